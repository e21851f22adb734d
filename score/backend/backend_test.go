package backend

import (
	"strings"
	"testing"

	"ppl.dev/score/model"
)

func TestParseDevice(t *testing.T) {
	for _, c := range []struct {
		in    string
		name  string
		index int
		err   string
	}{
		{"cpu", "cpu", 0, ""},
		{"cuda", "cuda", 0, ""},
		{"cuda:3", "cuda", 3, ""},
		{"cuda:", "", 0, "bad device"},
		{"CUDA", "", 0, "bad device"},
		{"cuda:x", "", 0, "bad device"},
		{"cuda:99999999", "", 0, "bad device index"},
	} {
		name, index, err := ParseDevice(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseDevice(%q) = %v, want error %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || name != c.name || index != c.index {
			t.Errorf("ParseDevice(%q) = %q, %d, %v; want %q, %d", c.in, name, index, err, c.name, c.index)
		}
	}
}

func TestRegistry(t *testing.T) {
	if _, ok := Get("cpu"); !ok {
		t.Fatal("cpu backend not registered")
	}
	if got := strings.Join(Names(), ","); !strings.Contains(got, "cpu") {
		t.Errorf("Names() = %s", got)
	}
	b, _ := Get("cpu")
	if _, err := b.Open("x.gguf", modelOptions(), 1); err == nil || !strings.Contains(err.Error(), "one device") {
		t.Errorf("Open on cpu:1: %v", err)
	}
}

func modelOptions() model.Options { return model.Options{} }
