package cuda

import (
	"path/filepath"
	"strings"
	"testing"

	"ppl.dev/eval/mkmodel"
	"ppl.dev/oracle"
	"ppl.dev/score/model"
)

// TestLightningRefused: the GPU has no lightning attention (ml.Lightning),
// so a minimax-01 file is refused at load, naming the operation, before
// anything is scored.
func TestLightningRefused(t *testing.T) {
	dir := oracle.Require(t)
	tok, err := mkmodel.TokenizerFrom(oracle.Model(dir, "tiny-llama-spm-q8_0"))
	if err != nil {
		t.Fatal(err)
	}
	ft, err := mkmodel.LookupFileType("Q8_0")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "minimax-01.gguf")
	s := mkmodel.Shape{Arch: "minimax-01", Embd: 128, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 64, Context: 256,
		Vocab: tok.NVocab, RopeBase: 10000, Eps: 1e-5, AttnInterval: 2, Experts: 4, ExpertsUsed: 2, ExpertFFN: 64}
	if err := mkmodel.Write(path, &mkmodel.Config{Shape: s, Type: ft, Seed: 1, Tokenizer: tok, Residual: 1}); err != nil {
		t.Fatal(err)
	}
	onDevices(t, func(t *testing.T, e *Engine) {
		g, err := loadOn(e, path, model.Options{Context: 256}, Mixed)
		if err == nil {
			g.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "minimax-01 needs lightning attention (ml.Lightning") {
			t.Errorf("got %v, want the lightning attention named", err)
		}
	})
}
