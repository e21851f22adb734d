package model

import (
	"math"
	"testing"

	"ppl.dev/eval/mkmodel"
	"ppl.dev/oracle"
)

// gemma3nShape gives a gemma3n model llama.cpp loads: per-layer inputs of
// its fixed 256, 22 layers so that the last two read the KV of layer 18
// (llama.cpp's KV layers are the first 20), a window of 40, and the
// tokenizer's first 4096 tokens (the per-layer embedding has 256 values
// per layer and token).
func gemma3nShape(s *mkmodel.Shape) {
	s.Layers, s.Embd, s.Heads, s.KVHeads, s.HeadDim, s.FFN = 22, 64, 2, 1, 32, 128
	s.Window, s.PerLayer, s.Tied, s.Vocab = 40, 256, true, 4096
}

// TestGemma3nRefused: the keys llama.cpp does not read but fixes are
// checked against its constants; a file that says otherwise is refused
// naming the key, as is one without a window.
func TestGemma3nRefused(t *testing.T) {
	dir := oracle.Require(t)
	pattern := make([]bool, 22)
	sparsity := make([]float32, 22)
	for i := range pattern {
		pattern[i] = i%2 == 0
		sparsity[i] = float32(math.Inf(-1))
	}
	checkRefusals(t, genModelType(t, dir, "gemma3n", "Q8_0", gemma3nShape), []refusal{
		{"streams", map[string]any{"gemma3n.altup.num_inputs": uint32(2)}, nil, "gemma3n.altup.num_inputs = 2: llama.cpp runs gemma3n with 4 only"},
		{"active stream", map[string]any{"gemma3n.altup.active_idx": uint32(1)}, nil, "gemma3n.altup.active_idx = 1: llama.cpp runs gemma3n with 0 only"},
		{"per-layer width", map[string]any{"gemma3n.embedding_length_per_layer_input": uint32(128)}, nil, "gemma3n.embedding_length_per_layer_input = 128: llama.cpp runs gemma3n with 256 only"},
		{"shared KV", map[string]any{"gemma3n.attention.shared_kv_layers": float32(5)}, nil, "gemma3n.attention.shared_kv_layers = 5: llama.cpp gives gemma3n's layers from 20 on"},
		{"pattern", map[string]any{"gemma3n.attention.sliding_window_pattern": pattern}, nil, "gemma3n.attention.sliding_window_pattern: layer 1 sliding false; llama.cpp runs gemma3n with 4 sliding layers of every 5"},
		{"sparsity", map[string]any{"gemma3n.activation_sparsity_scale": sparsity}, nil, "gemma3n.activation_sparsity_scale[0] = -Inf: llama.cpp sparsifies gemma3n's first 10 layers at 1.6448534 and no others"},
		{"no window", map[string]any{"gemma3n.attention.sliding_window": nil}, nil, "missing metadata gemma3n.attention.sliding_window"},
		{"laurel rank", nil, []string{"blk.3.laurel_l.weight"}, "blk.3.laurel_l.weight"},
	})
}
