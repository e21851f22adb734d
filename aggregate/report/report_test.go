package report

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ppl.dev/pipe"
)

func TestFloatEncoding(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{
		{268337.39724723255, "268337.39724723255"},
		{0.1, "0.1"},
		{1e-7, "1e-07"},
		{math.Inf(1), "null"},
		{math.NaN(), "null"},
		{math.Copysign(0, -1), "-0"},
	} {
		b, err := F(c.f).MarshalJSON()
		if err != nil || string(b) != c.want {
			t.Errorf("%v: %s, %v; want %s", c.f, b, err, c.want)
		}
		var back F
		if err := back.UnmarshalJSON(b); err != nil {
			t.Fatal(err)
		}
		if !(float64(back) == c.f || math.IsNaN(c.f) && math.IsNaN(float64(back)) || math.IsInf(c.f, 0) && math.IsNaN(float64(back))) {
			t.Errorf("%v read back as %v", c.f, back)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"schema": 2}`, "report schema 2: this tool reads schema 1"},
		{`{}`, `no "schema" field`},
		{`[1]`, "not a report"},
		{`{"schema": 1, "overall": {"perplexity": {"ppl": "x"}}}`, "malformed report"},
	} {
		if _, err := Decode([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.in, err, c.want)
		}
	}
}

// Decode never panics, and what it accepts encodes again.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"schema":1,"overall":{"name":"overall","perplexity":{"ppl":1.5,"naive":{"ppl_ci":[1,2]}}},"streams":[{"name":"a","window_results":[{"index":0,"ppl":null}]}]}`))
	f.Add([]byte(`{"schema":1}`))
	f.Add([]byte(`{"schema":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Decode(data)
		if err != nil {
			return
		}
		if _, err := Encode(r); err != nil {
			t.Fatalf("decoded report does not encode: %v", err)
		}
	})
}

// Read refuses a report over MaxBytes without reading it, and anything but
// a regular file; a killed write's temporary file does not make a
// directory "not empty".
func TestReadBoundsAndPrepareDir(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(MaxBytes + 1) // sparse: costs no disk
	f.Close()
	if _, err := Read(big); err == nil || !strings.Contains(err.Error(), "over the limit of 1073741824 a report") {
		t.Errorf("big report: %v", err)
	}
	sub := filepath.Join(dir, "out")
	os.MkdirAll(filepath.Join(sub, FileName), 0o755)
	if _, err := Read(sub); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory at report.json: %v", err)
	}
	left := filepath.Join(dir, "left")
	os.MkdirAll(left, 0o755)
	os.WriteFile(filepath.Join(left, pipe.TempPrefix+"123"), []byte("{"), 0o600)
	if err := PrepareDir(left); err != nil {
		t.Errorf("leftover temporary file: %v", err)
	}
	if ents, _ := os.ReadDir(left); len(ents) != 0 {
		t.Errorf("leftover not cleared: %v", ents)
	}
	os.WriteFile(filepath.Join(left, "other"), nil, 0o644)
	if err := PrepareDir(left); err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Errorf("other file: %v", err)
	}
}
