package cuda

import (
	"math"
	"path/filepath"
	"testing"

	"ppl.dev/eval/mkmodel"
	"ppl.dev/score/model"
)

// TestEndToEndQ1Q2: Llama models with every matrix in Q1_0 and in Q2_0
// (ppl-mkmodel's, q8Vocab's vocabulary; PrismML's Bonsai formats), the
// GPU, its weights kept in their blocks (dequant_q1_0, i8dec_q1_0 and
// Q2_0's), against the CPU in the mixed and the int8 modes, a bf16 cache,
// TestEndToEndGenerated's windows. Emulation, mixed and int8: Q1_0 max
// 0.0054 and 0.035, mean 0.00055 and 0.0039, PPL ratio 1.000026 and
// 1.00074; Q2_0 max 0.013 and 0.071, mean 0.0022 and 0.0126, PPL ratio
// 1.00020 and 0.99958 (the int8 mode's products summed otherwise than the
// CPU's ggml order: tiny-llama-spm-q8_0's mean is 0.0127).
func TestEndToEndQ1Q2(t *testing.T) {
	dir, tok, _ := q8Vocab(t)
	toks := archTokens(dir, "tiny-llama-spm-q8_0", tok.NVocab, 2048)
	paths := map[string]string{}
	for _, typ := range []string{"Q1_0", "Q2_0"} {
		ft, err := mkmodel.LookupFileType(typ)
		if err != nil {
			t.Fatal(err)
		}
		paths[typ] = filepath.Join(t.TempDir(), typ+".gguf")
		s := mkmodel.Shape{Arch: "llama", Embd: 128, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 256,
			Context: 4096, Vocab: tok.NVocab, RopeBase: 10000, Eps: 1e-5}
		if err := mkmodel.Write(paths[typ], &mkmodel.Config{Shape: s, Type: ft, Seed: 1, Tokenizer: tok, Residual: 1}); err != nil {
			t.Fatal(err)
		}
	}
	onDevices(t, func(t *testing.T, e *Engine) {
		for _, c := range []struct {
			typ, act          string
			maxAbs, mean, ppl float64
		}{
			{"Q1_0", "", 0.011, 0.0008, 0.00005}, {"Q1_0", model.ActInt8, 0.05, 0.0055, 0.0011},
			{"Q2_0", "", 0.018, 0.0032, 0.0003}, {"Q2_0", model.ActInt8, 0.1, 0.018, 0.0006},
		} {
			t.Run(c.typ+"/"+c.act, func(t *testing.T) {
				windows := []e2eWindow{{0, 256, 1}, {100, 356, 228}}
				s := e2eCase(t, e, Mixed, paths[c.typ], model.Options{KVDtype: "bf16", Context: 256, Activations: c.act}, windows, toks, false)
				t.Logf("bf16 cache: %v", s)
				if mean := s.sumAbs / float64(s.n); s.maxAbs > c.maxAbs || mean > c.mean || math.Abs(s.pplRatio()-1) > c.ppl {
					t.Errorf("%v; want max |Δ| <= %g, mean <= %g, |PPL ratio - 1| <= %g", s, c.maxAbs, c.mean, c.ppl)
				}
			})
		}
	})
}
