package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"ppl.dev/pipe"
)

func TestDefaultDir(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	for _, c := range []struct {
		model *pipe.Model
		want  string
	}{
		{&pipe.Model{Name: "tiny-llama-spm-q4_k_m.gguf"}, "profiles/perplexity/20250102T020405Z-tiny-llama-spm-q4_k_m"},
		{&pipe.Model{Name: "/models/Llama 3 8B (Q4).gguf"}, "profiles/perplexity/20250102T020405Z-Llama_3_8B_Q4"},
		{&pipe.Model{Name: "../.."}, "profiles/perplexity/20250102T020405Z-model"},
		{nil, "profiles/perplexity/20250102T020405Z-model"},
	} {
		if got := DefaultDir(at, c.model); got != c.want {
			t.Errorf("DefaultDir(%v) = %q, want %q", c.model, got, c.want)
		}
	}
}

// Exit statuses: 0 for --help, 2 for usage errors, 1 for failures.
func TestExitStatus(t *testing.T) {
	for _, c := range []struct {
		args   []string
		status int
		stderr string
	}{
		{[]string{"--help"}, 0, ""},
		{[]string{"--version"}, 0, ""},
		{[]string{"--bogus"}, 2, "ppl-aggregate: unknown flag --bogus\n"},
		{[]string{"--bootstrap=-3", "x"}, 2, "ppl-aggregate: --bootstrap -3: want 0 (off) or 2 to 100000 resamples\n"},
		{[]string{"-o", t.TempDir() + "/out", "-"}, 1, "ppl-aggregate: <stdin>: no records: empty input\n"},
	} {
		var out, errb bytes.Buffer
		if got := Run(c.args, strings.NewReader(""), &out, &errb); got != c.status || errb.String() != c.stderr {
			t.Errorf("%q: status %d, stderr %q; want %d, %q", c.args, got, errb.String(), c.status, c.stderr)
		}
	}
}
