package model

import (
	"path/filepath"
	"testing"

	"ppl.dev/eval/mkmodel"
	"ppl.dev/oracle"
)

// TestChameleon holds chameleon to llama.cpp 0.7.0 on genModel's files:
// per-head q/k LayerNorms with biases; with swin_norm, post-norms and the
// FFN reading the attention's normed output; tied. The tokens are en-gpl3's
// with those among the image ids (4 to 8195) moved past them by 8192, so
// that no target's own logit is -FLT_MAX, and the image tokens' logits
// overwritten in the first row of logits of each window change every other
// token's log-prob of that row (about 0.3 per window). llama.cpp's sums
// are oracle.cpp's with logits requested from each window's first target
// on, as llama-perplexity requests them (24 windows, both CPU builds:
// within 7.1e-7; here the first 4). Requesting every row's logits, as
// oracle.cpp does, moves the overwritten row to the window's first, which
// the windows scored from their middle do not read.
func TestChameleon(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	tokens := mkmodel.ChameleonText(golden.Header.Tokens)
	for _, c := range []struct {
		name   string
		set    func(*mkmodel.Shape)
		sha256 string
		sums   []float64
	}{
		{"chameleon", nil, "2d0dd9e620850786778f794627e94097d39d1181a29333795727dd278f2ab829",
			[]float64{-1581.7785579, -813.6225714, -799.4507378, -804.1436488}},
		{"swin_norm", func(s *mkmodel.Shape) { s.SwinNorm = true }, "76dc7b7a26c2e898a207a4e61cf4df97728161d121dc7f43f0f3ce4e843136f5",
			[]float64{-1590.7933905, -795.2962412, -774.3576236, -769.7806881}},
		{"tied", func(s *mkmodel.Shape) { s.Tied = true }, "253c3d742fef92444640df97682366b6e1a6ed9a93b4b86ad8e7590285d71434",
			[]float64{-1537.9382768, -766.7145052, -785.3868634, -822.0528266}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := genModel(t, dir, "chameleon", c.set)
			checkSHA(t, path, c.sha256)
			generatedScores(t, path, tokens, c.sums)
		})
	}
	checkRefusals(t, genModel(t, dir, "chameleon", nil), []refusal{
		{"partial RoPE", map[string]any{"chameleon.rope.dimension_count": uint32(16)}, nil,
			"metadata chameleon.rope.dimension_count = 16: chameleon rotates whole heads of 32 (llama.cpp 0.7.0 asserts it)"},
		{"q norm", nil, []string{"blk.1.attn_q_norm.weight"}, "blk.1.attn_q_norm.weight"},
	})
	checkRefusals(t, genModel(t, dir, "chameleon", func(s *mkmodel.Shape) { s.Vocab = 4000 }), []refusal{
		{"small vocabulary", nil, nil, "chameleon: a vocabulary of 4000 tokens has no image tokens [4, 8196)"},
	})
}
