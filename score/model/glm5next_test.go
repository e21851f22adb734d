package model

import (
	"path/filepath"
	"testing"

	"ppl.dev/eval/mkmodel"
	"ppl.dev/oracle"
)

// glm5Shape is GLM5-Next's layout in 4 layers: 3 Kimi Delta Attention
// layers (the first with a dense MLP), then latent attention without RoPE
// whose k-pool indexer scores blocks of 4 keys (top_k 16: sparse from row
// 19 on), all inside 4 streams mixed by mHC; 8 experts (2 used) and a
// shared expert, every SwiGLU clamped at 0.5.
func glm5Shape(s *mkmodel.Shape) {
	s.Layers, s.SSMConv, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 4, 4, 1, 8, 2, 64, 64
}

// TestGLM5NextVariants: glm5-next with dense attention (top_k 128), without
// the clamps, with KDA's safe gate (kda.gate_lower_bound -5), with the
// shared expert's and the dense MLP's own clamp (swiglu_clamp_shexp), and
// in 8 layers with and without the second attention layer reusing the
// first's choice of keys (attention.indexer.types), against llama.cpp's
// sums on the same bytes (24 windows each in the AVX-512 build, every
// window's sum within 6.5e-7; here the first 4; the base file's first 8
// in the AVX2 build within 4.4e-7, here 4); and the files llama.cpp
// refuses, aborts on or reads no key from refused by name.
func TestGLM5NextVariants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	tokens := golden.Header.Tokens
	src := genModel(t, dir, "glm5-next", glm5Shape)
	// llama.cpp's AVX2 build (libggml-cpu-haswell.so loaded alone: beside
	// the others ggml picks the AVX-512 one), 0.47 per window off it.
	modeScores(t, src, "f16", ActInt8AVX2, tokens, []window{{0, 128, 1}, {64, 192, 128}, {128, 256, 192}, {192, 320, 256}},
		[]float64{-1618.1758807, -796.6269645, -789.1777319, -790.1758226}, 1e-6)
	const a = "glm5-next."
	checkVariants(t, src, tokens, []fileVariant{
		{name: "dense", sha256: "f6a27400d51a8ade19fd737855c72a60a989748eb94bca2ecdeebbf69cd06838",
			set:  map[string]any{a + "attention.indexer.top_k": uint32(128)},
			sums: []float64{-1611.1972980, -800.1379417, -787.4569134, -788.8292719}},
		{name: "no clamps", sha256: "30a3bdbcb799ef21c3ff50d95554db3c55f0ef9a6a4f56d6f3b6449fa7ba718b",
			set:  map[string]any{a + "swiglu_clamp_exp": nil},
			sums: []float64{-1638.7546695, -773.0412163, -766.9654109, -791.8239382}},
		{name: "safe gate", sha256: "dcc7e7367c2f7490d3858d1251bfc271ca2cdaefd17b5e96ab747a7fb64cdbde",
			set:  map[string]any{a + "kda.gate_lower_bound": float32(-5)},
			sums: []float64{-1599.6839811, -797.9221389, -794.0180533, -780.7431255}},
		{name: "shared expert's clamp", sha256: "194869b4355df999b15118c1e5de91a89fa4896e45ea0c64e880ac2d2660be0e",
			set:  map[string]any{a + "swiglu_clamp_shexp": []float32{0.3, 0.3, 0.3, 0.3}},
			sums: []float64{-1611.0818661, -801.6258043, -795.0426165, -789.2955798}},
	})
	eight := genModel(t, dir, "glm5-next", func(s *mkmodel.Shape) { glm5Shape(s); s.Layers = 8 })
	checkSHA(t, eight, "c72b0e4a5eed74fc0a4f4244fdbdc230e60ea0de5837d1f33b0223a0e375f3b3")
	generatedScores(t, eight, tokens, []float64{-1589.7042273, -809.1841536, -780.2743329, -793.8944836})
	checkVariants(t, eight, tokens, []fileVariant{
		{name: "shared indexer", sha256: "5bc24cabce32127ce00291f5c31db3dbb58733a9476c955a7a9703da9b6f3f81",
			set:  map[string]any{a + "attention.indexer.types": []int32{1, 1, 1, 1, 1, 1, 1, 0}},
			sums: []float64{-1588.4453627, -810.8952175, -782.0707329, -794.8692440}},
	})
	checkRefusals(t, src, []refusal{
		{"no tail", map[string]any{a + "attention.indexer.kpool_select_tail": false}, nil, "kpool_select_tail: false or absent"},
		{"a block not dividing top_k", map[string]any{a + "attention.indexer.kpool": uint32(3)}, nil,
			"metadata glm5-next.attention.indexer.kpool = 3: want above 1 and dividing attention.indexer.top_k = 16"},
		{"RoPE", map[string]any{a + "rope.dimension_count": uint32(16)}, nil, "metadata glm5-next.rope.dimension_count = 16: GLM5-Next's latent attention has no RoPE"},
		{"2 streams", map[string]any{a + "hyper_connection.count": uint32(2)}, nil, "metadata glm5-next.hyper_connection.count = 2: llama.cpp runs mHC of 4 streams only"},
		{"no Sinkhorn iterations", map[string]any{a + "hyper_connection.sinkhorn_iterations": nil}, nil, "missing metadata glm5-next.hyper_connection.sinkhorn_iterations"},
		{"a bound above 0", map[string]any{a + "kda.gate_lower_bound": float32(1)}, nil, "metadata glm5-next.kda.gate_lower_bound = 1, want below 0"},
		{"the attention layer without its indexer", map[string]any{a + "attention.indexer.types": []int32{1, 1, 1, 0}}, nil,
			"the first attention layer, 3, must run its indexer"},
		{"no selection bias", nil, []string{"blk.1.exp_probs_b.bias"}, "missing tensor blk.1.exp_probs_b.bias"},
		{"no pool positions", nil, []string{"blk.3.indexer_compressor_ape.weight"}, "missing tensor blk.3.indexer_compressor_ape.weight"},
		{"no mix", nil, []string{"blk.2.hc_ffn_fn.weight"}, "missing tensor blk.2.hc_ffn_fn.weight"},
	})
}
