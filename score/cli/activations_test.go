package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"ppl.dev/oracle"
)

// TestActivations scores one golden case in each activation mode with one
// cache: the header records the mode, the second mode is not served from
// the first mode's cache entries, and int8 stays within llama.cpp's
// tolerances.
func TestActivations(t *testing.T) {
	dir := oracle.Require(t)
	stem := "tiny-llama-spm-q8_0"
	g, err := oracle.Read(oracle.Golden(dir, stem, "mixed-unicode", "sliding"))
	if err != nil {
		t.Fatal(err)
	}
	model := oracle.Model(dir, stem)
	in := pipeline(t, model, g, false)
	cacheDir := t.TempDir()
	outs := map[string][]byte{}
	for _, act := range []string{"fp32", "int8"} {
		var out, errb bytes.Buffer
		if err := runArgs(t, []string{"--model", model, "--device", "cpu", "--activations", act, "--cache-dir", cacheDir}, in, &out, &errb); err != nil {
			t.Fatalf("%s: %v\n%s", act, err, errb.String())
		}
		if !strings.Contains(errb.String(), "4 windows (4 scored, 0 from the cache)") {
			t.Fatalf("%s: not scored afresh: %s", act, errb.String())
		}
		if !strings.Contains(out.String(), `"activations":"`+act+`"`) {
			t.Fatalf("%s: the header does not record the mode", act)
		}
		outs[act] = out.Bytes()
		var diff float64
		n := 0
		for i, s := range scores(t, out.Bytes()) {
			for j, lp := range s.Logprobs {
				d := lp - g.Windows[i].Logprobs[j]
				diff += max(d, -d)
				n++
			}
		}
		if mad := diff / float64(n); mad > 0.04 {
			t.Errorf("%s: mean |Δ logprob| vs llama.cpp %.4f > 0.04", act, mad)
		}
	}
	if bytes.Equal(scoresOnly(t, outs["fp32"]), scoresOnly(t, outs["int8"])) {
		t.Error("the two modes gave the same scores")
	}
	var out, errb bytes.Buffer
	if err := runArgs(t, []string{"--model", model, "--activations", "int16"}, in, &out, &errb); err == nil {
		t.Error("--activations int16 accepted")
	}
}

// scoresOnly is the log-probs of ppl-score output, as text.
func scoresOnly(t *testing.T, out []byte) []byte {
	var b bytes.Buffer
	for _, s := range scores(t, out) {
		fmt.Fprintln(&b, s.Logprobs)
	}
	return b.Bytes()
}
