package model

import (
	"math"
	"slices"
	"strings"
	"testing"

	"ppl.dev/oracle"
)

// TestScoreWithApart: scoring against a reference "on another device"
// (ScoreWithApart: the forward passes at once, the reference's logits
// copied to the model's backend through the host) gives ScoreWith's
// results to the bit, for the Q4_K_M oracle model against its F16 file,
// from the start and from a later target.
func TestScoreWithApart(t *testing.T) {
	dir := oracle.Require(t)
	m, ref := oracleModel(t, dir, "tiny-llama-spm-q4_k_m", ""), oracleModel(t, dir, "tiny-llama-spm-f16", "")
	toks := tinyTokens(200, m.Vocab())
	for _, from := range []int{1, 150} {
		want, err := m.ScoreWith(toks, from, ref)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.ScoreWithApart(toks, from, ref)
		if err != nil {
			t.Fatal(err)
		}
		if !sameResult(got, want) {
			t.Fatalf("from %d: apart differs from the same device", from)
		}
		var sum float64
		for _, k := range got.KLD {
			sum += k
		}
		if sum == 0 {
			t.Fatalf("from %d: KL divergence 0 between two files", from)
		}
		t.Logf("from %d: %d targets identical, mean KLD %.6f", from, len(got.KLD), sum/float64(len(got.KLD)))
	}
}

func sameResult(a, b *Result) bool {
	return a.ScoreFrom == b.ScoreFrom && slices.Equal(a.Logprobs, b.Logprobs) && slices.Equal(a.Argmax, b.Argmax) &&
		slices.Equal(a.RefLogprobs, b.RefLogprobs) && slices.Equal(a.KLD, b.KLD) && slices.Equal(a.Top1Agree, b.Top1Agree)
}

// TestScoreWithApartErrors: the checks of ScoreWith, and a bad logit of
// the reference named as the reference's, with the weight that holds it.
func TestScoreWithApartErrors(t *testing.T) {
	a, err := loadTiny(t, defaultTiny(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := defaultTiny()
	s.edit = func(name string, v []float32) {
		if name == "output.weight" {
			v[7*s.embd] = float32(math.Inf(1)) // row of token 7
		}
	}
	bad, err := loadTiny(t, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	small := defaultTiny()
	small.vocab = 60
	other, err := loadTiny(t, small, Options{})
	if err != nil {
		t.Fatal(err)
	}
	toks := tinyTokens(8, 50)
	for _, tc := range []struct {
		ref  *Model
		want string
	}{
		{nil, "model: ScoreWithApart: no reference model"},
		{a, "model: ScoreWithApart: the reference is the model itself"},
		{other, "model: ScoreWithApart: reference vocabulary has 60 tokens, model 50"},
		{bad, "model: reference logits for target 3 contain -Inf (token 7): tensor output.weight row 7 holds +Inf"},
	} {
		if _, err := a.ScoreWithApart(toks, 3, tc.ref); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
	// The model is free again after each of them.
	if _, err := a.Score(toks, 1); err != nil {
		t.Fatal(err)
	}
}
