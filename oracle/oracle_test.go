package oracle

import (
	"strings"
	"testing"
)

func TestReadGolden(t *testing.T) {
	d := Require(t)
	f, err := Read(Golden(d, "tiny-llama-spm-f16", "en-gpl3", "sliding"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Header.NTokens != 4617 || len(f.Header.Tokens) != 4617 || f.Header.Tokens[0] != 1 {
		t.Fatalf("header: n_tokens %d, %d tokens", f.Header.NTokens, len(f.Header.Tokens))
	}
	if w := f.Windows[0]; w.Begin != 0 || w.End != 256 || w.ScoreFrom != 1 || len(w.Logprobs) != 255 {
		t.Fatalf("window 0: %+v", w.Begin)
	}
	if got := len(Models(d)); got < 5 { // the oracle grows: at least the five it began with
		t.Fatalf("%d models", got)
	}
}

func TestReadKLD(t *testing.T) {
	d := Require(t)
	f, err := Read(d + "/golden/tiny-llama-spm-q4_k_m__mixed-unicode__sliding__kld-vs-tiny-llama-spm-f16.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	w := f.Windows[0]
	if len(w.Top1Agree) != len(w.KLD) || len(w.KLD) != len(w.Logprobs) || f.Header.MeanKLD <= 0 {
		t.Fatalf("window 0: %d top1, %d kld, %d logprobs; mean_kld %v", len(w.Top1Agree), len(w.KLD), len(w.Logprobs), f.Header.MeanKLD)
	}
}

// recorder is a testing.TB that records Fatalf and Skipf instead of
// stopping the test.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                        {}
func (r *recorder) Fatalf(format string, a ...any) { r.fatal = format }
func (r *recorder) Skipf(format string, a ...any)  { r.skip = format }

// A missing oracle skips, unless PPL_REQUIRE_ORACLE=1: then it fails.
func TestRequireFailsWhenRequired(t *testing.T) {
	t.Setenv(EnvDir, t.TempDir()) // no README.md: no oracle
	t.Setenv(EnvRequire, "")
	r := &recorder{TB: t}
	Require(r)
	if r.fatal != "" || r.skip == "" {
		t.Errorf("not required: fatal %q, skip %q", r.fatal, r.skip)
	}
	t.Setenv(EnvRequire, "1")
	r = &recorder{TB: t}
	Require(r)
	if !strings.Contains(r.fatal, "unavailable") {
		t.Errorf("required: fatal %q, skip %q", r.fatal, r.skip)
	}
	if _, ok := Optional(&recorder{TB: t}); ok {
		t.Error("Optional found an oracle in an empty directory")
	}
}
