package model

import (
	"path/filepath"
	"testing"

	"ppl.dev/eval/mkmodel"
	"ppl.dev/oracle"
)

// m3Shape is MiniMax-M3's layout in 3 layers: a dense first layer, then 8
// experts (2 used) and a shared expert, the two sparse layers' indexers
// choosing 4 blocks of 16 keys, the last 2 always (ppl-mkmodel's MSA), so
// that a window of 128 reads at most 64 keys from row 64 on.
func m3Shape(s *mkmodel.Shape) {
	s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 3, 1, 8, 2, 64, 64
}

// TestMiniMaxM3Variants: minimax-m3 without forced local blocks, with 2
// blocks of 32 and 1 local, and softmax-routed without renormalization or
// scale, against llama.cpp's sums on the same bytes (24 windows in both
// builds, every token within 5.3e-8; here the first 4); and the files
// llama.cpp refuses refused (its loader's required keys, a gating of 0 on
// which it aborts, the tensors it requires), as is an indexer with other
// than one head per KV head, which it asserts against.
func TestMiniMaxM3Variants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "minimax-m3", m3Shape)
	const a = "minimax-m3."
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "no local blocks", sha256: "9e2943ab354db417a88e04faa26af62a85abca208b860a2f344cb5aa106120bf",
			set:  map[string]any{a + "attention.indexer.local_blocks": uint32(0)},
			sums: []float64{-1604.2458614, -845.0487829, -793.2853709, -808.7047775}},
		{name: "2 blocks of 32, 1 local", sha256: "0d6dedfc399cc7ab5d6457f3c19763a4748942e76967cdac0ab74d4204fc1ea0",
			set:  map[string]any{a + "attention.indexer.top_k": uint32(2), a + "attention.indexer.block_size": uint32(32), a + "attention.indexer.local_blocks": uint32(1)},
			sums: []float64{-1602.0913499, -834.0934023, -796.4263450, -807.2877701}},
		{name: "softmax routing", sha256: "17e325a8ee2862885f4f68dc7e3c4921be956f854e045047f0d7a0d774d74408",
			set:  map[string]any{a + "expert_gating_func": uint32(1), a + "expert_weights_norm": false, a + "expert_weights_scale": nil},
			sums: []float64{-1618.1724539, -817.1151991, -790.5295250, -785.9733573}},
	})
	checkRefusals(t, src, []refusal{
		{"no gating", map[string]any{a + "expert_gating_func": nil}, nil, "missing metadata minimax-m3.expert_gating_func"},
		{"gating 0", map[string]any{a + "expert_gating_func": uint32(0)}, nil, "metadata minimax-m3.expert_gating_func = 0: llama.cpp has no default for minimax-m3 and aborts"},
		{"no block size", map[string]any{a + "attention.indexer.block_size": nil}, nil, "missing metadata minimax-m3.attention.indexer.block_size"},
		{"no local_blocks key", map[string]any{a + "attention.indexer.local_blocks": nil}, nil, "missing metadata minimax-m3.attention.indexer.local_blocks"},
		{"no shared count", map[string]any{a + "expert_shared_count": nil}, nil, "missing metadata minimax-m3.expert_shared_count"},
		{"an indexer head for both KV heads", map[string]any{a + "attention.indexer.head_count": uint32(1)}, nil,
			"metadata minimax-m3.attention.indexer.head_count = 1: MSA needs one indexer head per KV head (2)"},
		{"no indexer key norm", nil, []string{"blk.1.indexer.k_norm.weight"}, "missing tensor blk.1.indexer.k_norm.weight"},
		{"no selection bias", nil, []string{"blk.2.exp_probs_b.bias"}, "missing tensor blk.2.exp_probs_b.bias"},
		{"no shared expert", nil, []string{"blk.1.ffn_up_shexp.weight"}, "missing tensor blk.1.ffn_up_shexp.weight"},
	})
}
