package cuda

import (
	"strings"
	"testing"

	"ppl.dev/eval/mkmodel"
	"ppl.dev/score/model"
)

// TestLightningRefused: the GPU has no lightning attention (ml.Lightning),
// so a minimax-01 file is refused at load, naming the operation, before
// anything is scored.
func TestLightningRefused(t *testing.T) {
	path := genQ8(t, mkmodel.Shape{Arch: "minimax-01", Embd: 128, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 64, Context: 256,
		RopeBase: 10000, Eps: 1e-5, AttnInterval: 2, Experts: 4, ExpertsUsed: 2, ExpertFFN: 64})
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
