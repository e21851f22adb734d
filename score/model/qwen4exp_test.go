package model

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ppl.dev/eval/mkmodel"
	"ppl.dev/gguf"
	"ppl.dev/oracle"
	"ppl.dev/quant"
)

// q4Shape is Qwen3.8-Flash-Next's layout in 4 layers (ppl-mkmodel's
// qwen4exp: 4 streams mixed at rank 16): Gated DeltaNet in 0 to 2 (2 key
// and 4 value heads of 32), PLE in layer 1 (2 orders of 2 heads of 32),
// gated attention with QSA in layer 3 (4 blocks of 4 keys by a 2-head
// indexer of 32, so that a window of 128 reads sparsely from row 20 on);
// 8 experts (2 used) and a shared expert.
func q4Shape(s *mkmodel.Shape) {
	s.Layers, s.SSMState, s.SSMKHeads, s.SSMVHeads, s.SSMConv, s.AttnInterval, s.RopeDims = 4, 32, 2, 4, 4, 4, 16
	s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN, s.PerLayer = 8, 2, 64, 64, 32
}

// TestQwen4ExpVariants: qwen4exp without QSA (dense attention), with a PLE
// hash no newline cuts, with QSA's blocks of 8, with its 12 per-stream norm
// weights stored flat and with routing keys llama.cpp does not read for it
// (both the base file's sums, llama.cpp's log-probs the same bits), against
// llama.cpp's sums on the same bytes (24 windows in both builds, every
// token within 5.1e-8; here the first 4); and the files llama.cpp refuses
// refused (each of them probed).
func TestQwen4ExpVariants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "qwen4exp", q4Shape)
	const a = "qwen4exp."
	flat, norms := flatStreamNorms(t, src)
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "dense attention", sha256: "55db9042bc5911d0a655151fbd347fad6d1da0c5d1bad96fccadc3e45ea06bc4",
			set:  map[string]any{a + "attention.compress_ratios": nil},
			sums: []float64{-1377.9692284, -692.0952691, -697.8518777, -671.3875816}},
		{name: "PLE without cuts", sha256: "5efb41c008692928ee3fcf37a6078650197184ff45af7d12e71d04a079cac39b",
			set:  map[string]any{a + "ple.eos_token_id": uint32(2)},
			sums: []float64{-1379.9240077, -689.9827667, -698.6139300, -670.9796070}},
		{name: "QSA blocks of 8", sha256: "b66b3d582c7eed404d49f3136fea72e6258cfcb49375326387bc2bf841b4b193",
			set:  map[string]any{a + "attention.compress_ratios": []uint32{0, 0, 0, 8}},
			sums: []float64{-1378.4696459, -692.4771723, -697.7417012, -671.3500669}},
		{name: "flat stream norms", sha256: "bcc301cda161349237c8ba688f2a87aa37a6ad5d155e848e8a9525fee7c493c6",
			add: flat, drop: norms,
			sums: []float64{-1378.7957362, -692.1793340, -698.0499072, -671.6313849}},
		{name: "routing keys not read", sha256: "d4a431f7d87291093fb6cadfe5c4b512da669162862f5f610b70dfc515974fc5",
			set:  map[string]any{a + "expert_weights_scale": float32(2.5), a + "expert_gating_func": uint32(2), a + "expert_weights_norm": false},
			sums: []float64{-1378.7957362, -692.1793340, -698.0499072, -671.6313849}},
	})
	checkRefusals(t, src, []refusal{
		{"one stream", map[string]any{a + "hyper_connection.count": uint32(1)}, nil, "metadata qwen4exp.hyper_connection.count = 1, want > 1"},
		{"no rank", map[string]any{a + "hyper_connection.low_rank": nil}, nil, "missing metadata qwen4exp.hyper_connection.low_rank"},
		{"no indexer budget", map[string]any{a + "attention.indexer.top_k": nil}, nil, "missing metadata qwen4exp.attention.indexer.top_k"},
		{"blocks of 1", map[string]any{a + "attention.compress_ratios": []uint32{0, 0, 0, 1}}, nil, "QSA needs a compress ratio above 1 that divides attention.indexer.top_k, got 1 and 16"},
		{"blocks of 3", map[string]any{a + "attention.compress_ratios": []uint32{0, 0, 0, 3}}, nil, "QSA needs a compress ratio above 1 that divides attention.indexer.top_k, got 3 and 16"},
		{"two ratios", map[string]any{a + "attention.compress_ratios": []uint32{0, 4, 0, 8}}, nil, "QSA layers must share one compress ratio, got 4 and 8"},
		{"PLE in attention", map[string]any{a + "ple.layers": []uint32{3}}, nil, "metadata qwen4exp.ple.layers: PLE layer 3 is not a Gated DeltaNet layer of the 4 run"},
		{"two PLE layers", map[string]any{a + "ple.layers": []uint32{1, 2}}, nil, "metadata qwen4exp.ple.layers lists 2 layers; llama.cpp supports one PLE layer"},
		{"short multipliers", map[string]any{a + "ple.layer_multipliers": []uint64{3, 5}}, nil, "metadata qwen4exp.ple.layer_multipliers has 2 values, want at least 3"},
		{"negative multiplier", map[string]any{a + "ple.layer_multipliers": []int64{3, -5, 7}}, nil, `metadata "qwen4exp.ple.layer_multipliers": array of int64 values out of uint64 range`},
		{"empty PLE head", map[string]any{a + "ple.head_vocab_sizes": []uint64{101, 0, 107, 109}}, nil, "PLE head 1's range [101, +0) does not fit an int32 row index"},
		{"PLE heads not the width", map[string]any{a + "embedding_length_per_layer_input": uint32(16)}, nil,
			"metadata qwen4exp.embedding_length_per_layer_input = 16: 4 PLE heads of it are not embedding_length 128"},
		{"no PLE end token", map[string]any{a + "ple.eos_token_id": nil}, nil, "missing metadata qwen4exp.ple.eos_token_id"},
		{"no PLE convolution", nil, []string{"blk.1.ple_conv1d.weight"}, "missing tensor blk.1.ple_conv1d.weight"},
		{"no indexer key norm", nil, []string{"blk.3.indexer.k_norm.weight"}, "missing tensor blk.3.indexer.k_norm.weight"},
		{"no head mix", nil, []string{"output_hc_up.weight"}, "missing tensor output_hc_up.weight"},
	})
}

// flatStreamNorms returns src's per-stream norm weights (hc_*_norm,
// ple_norm_*: {embd, streams}) as flat tensors of streams·embd, and their
// names.
func flatStreamNorms(t *testing.T, src string) (map[string]f32Tensor, []string) {
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flat := map[string]f32Tensor{}
	var names []string
	for _, tn := range f.Tensors {
		if !(strings.Contains(tn.Name, "hc_") && strings.HasSuffix(tn.Name, "norm.weight")) && !strings.Contains(tn.Name, "ple_norm_") {
			continue
		}
		v := make([]float32, tn.Shape[0]*tn.Shape[1])
		if err := quant.Dequantize(tn.Type, f.Data(tn), v); err != nil {
			t.Fatal(err)
		}
		flat[tn.Name] = f32Tensor{[]uint64{uint64(len(v))}, v}
		names = append(names, tn.Name)
	}
	return flat, names
}

// TestQwen4ExpPLERows: the n-gram hash's rows against values computed by
// hand from its definition (uint64 products that wrap, XORed; predecessors
// at or before the end token, or before the window, read as it), and its
// orders' heads in place.
func TestQwen4ExpPLERows(t *testing.T) {
	p := &q4PLE{gram: 3, perGram: 2, eos: 7, mult: []uint64{3, 1 << 62, 5}, offsets: []uint64{0, 11, 24, 41}, sizes: []uint64{11, 13, 17, 19}}
	ngram := func(c ...uint64) uint64 {
		var m uint64
		for j, x := range c {
			m ^= x * p.mult[j]
		}
		return m
	}
	heads := func(bi, tri uint64) []int32 {
		return []int32{int32(bi % 11), int32(bi%13 + 11), int32(tri%17 + 24), int32(tri%19 + 41)}
	}
	tokens := []int32{5, 9, 7, 4, 6}
	var want []int32
	want = append(want, heads(ngram(5, 7), ngram(5, 7, 7))...) // no predecessors
	want = append(want, heads(ngram(9, 5), ngram(9, 5, 7))...)
	want = append(want, heads(ngram(7, 9), ngram(7, 9, 5))...) // the end token itself does not cut its context
	want = append(want, heads(ngram(4, 7), ngram(4, 7, 7))...) // cut at the end token
	want = append(want, heads(ngram(6, 4), ngram(6, 4, 7))...)
	if got := p.rows(tokens); !slices.Equal(got, want) {
		t.Errorf("rows %v, want %v", got, want)
	}
	if ngram(1, 2) != 3^2<<62 || ngram(0, 4) != 0 { // 4·2⁶² wraps to 0
		t.Fatal("bad hand hash")
	}
}
