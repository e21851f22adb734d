package oracle

import "testing"

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
	if got := len(Models(d)); got != 5 {
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
