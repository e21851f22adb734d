package mkmodel

import (
	"math"
	"path/filepath"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/score/model"
)

// TestLowbitModels writes a tiny llama model in each low-bit type, checks
// that every matrix has that type (the low-bit file types are pure; the
// 128-wide attn_output of the i-quants and ternary types falls back) and
// that the model scores a sentence in both activation modes like a random
// model should, with the two modes close.
func TestLowbitModels(t *testing.T) {
	voc := smallVocab(t, 400)
	for _, c := range []struct {
		typ string
		id  uint64
	}{
		{"IQ2_XXS", 19}, {"IQ2_XS", 20}, {"IQ2_S", 28}, {"IQ3_XXS", 23}, {"IQ3_S", 26}, {"IQ1_S", 24},
		{"IQ1_M", 31}, {"TQ1_0", 36}, {"TQ2_0", 37}, {"MXFP4", 38}, {"NVFP4", 39},
	} {
		t.Run(c.typ, func(t *testing.T) {
			cfg := tinyConfig(t, "llama", c.typ, voc)
			p := filepath.Join(t.TempDir(), "m.gguf")
			if err := Write(p, cfg); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if got, _ := f.Uint("general.file_type"); got != c.id {
				t.Errorf("general.file_type = %d, want %d", got, c.id)
			}
			for _, tt := range f.Tensors {
				want := cfg.Type.Base
				switch {
				case len(tt.Shape) < 2:
					want = gguf.TypeF32
				case tt.Shape[0]%uint64(want.BlockSize()) != 0: // attn_output, 128 wide
					want = gguf.TypeQ4_0
				}
				if tt.Type != want {
					t.Errorf("%s: %v, want %v", tt.Name, tt.Type, want)
				}
			}
			toks := voc.Encode([]byte("The perplexity of a model is the exponential of its mean negative log-likelihood."))
			var nll [2]float64
			for i, act := range []string{model.ActFP32, model.ActInt8} {
				m, err := model.Load(p, model.Options{Activations: act})
				if err != nil {
					t.Fatal(err)
				}
				r, err := m.Score(toks, 1)
				m.Close()
				if err != nil {
					t.Fatal(err)
				}
				for _, lp := range r.Logprobs {
					if math.IsNaN(lp) || lp > 0 {
						t.Fatalf("%s: log-probability %v", act, lp)
					}
					nll[i] -= lp / float64(len(r.Logprobs))
				}
			}
			if ppl := math.Exp(nll[0]); ppl < 20 || ppl > 40000 {
				t.Errorf("random model PPL %.1f, want roughly the vocabulary size", ppl)
			}
			if d := math.Abs(nll[0] - nll[1]); d > 0.05 {
				t.Errorf("mean NLL fp32 %.4f, int8 %.4f", nll[0], nll[1])
			}
			t.Logf("PPL %.1f (int8 %.1f)", math.Exp(nll[0]), math.Exp(nll[1]))
		})
	}
}

// TestLowbitTensorTypes: the low-bit file types are pure, and rows that
// are not whole blocks fall back to Q4_0 (i-quants, ternary, Q2_0: a row
// of 352 as llama-quantize's Q2_0 writes it) or F16 (Q1_0, which
// llama-quantize refuses: "no tensor type fallback is defined"; NVFP4,
// which it does not write).
func TestLowbitTensorTypes(t *testing.T) {
	for _, c := range []struct {
		ft   string
		name string
		ne0  int
		want gguf.Type
	}{
		{"IQ2_XXS", "output.weight", 4096, gguf.TypeIQ2_XXS},
		{"IQ2_XXS", "blk.0.attn_v.weight", 4096, gguf.TypeIQ2_XXS},
		{"IQ3_S", "blk.1.ffn_down.weight", 128, gguf.TypeQ4_0},
		{"TQ1_0", "blk.1.ffn_up.weight", 96, gguf.TypeQ4_0},
		{"MXFP4", "blk.1.ffn_up.weight", 96, gguf.TypeMXFP4},
		{"NVFP4", "blk.1.ffn_up.weight", 96, gguf.TypeF16},
		{"Q2_0", "blk.0.ffn_down.weight", 352, gguf.TypeQ4_0},
		{"Q2_0", "blk.0.ffn_down.weight", 320, gguf.TypeQ2_0},
		{"Q1_0", "blk.0.ffn_down.weight", 320, gguf.TypeF16},
		{"nvfp4", "blk.0.attn_norm.weight", 4096, gguf.TypeF32},
	} {
		ft, err := LookupFileType(c.ft)
		if err != nil {
			t.Fatal(err)
		}
		dims := 2
		if c.want == gguf.TypeF32 {
			dims = 1
		}
		if got := ft.TensorType(c.name, c.ne0, dims, 1, 8, 4, false); got != c.want {
			t.Errorf("%s %s (%d wide): %v, want %v", c.ft, c.name, c.ne0, got, c.want)
		}
	}
}
