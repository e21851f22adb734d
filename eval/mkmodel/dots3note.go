package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// dots3note (rednote's dots3-note, 288B-A19B) is DeepSeek-V3.2's decoder
// with two kinds of layers: every layer latent attention with q
// compression (attn_q_a, attn_q_a_norm, attn_q_b; attn_kv_a_mqa,
// attn_kv_a_norm, attn_k_b, attn_v_b) whose shared rope key is RMS-normed
// (attn_k_norm) before RoPE and whose heads' outputs are gated by
// sigmoid(attn_gate·x) per head before attn_output; the full layers (even
// ones here) read the keys their lightning indexer chooses (indexer.*:
// 4 heads of 2·HeadDim, attention.indexer.top_k 48), the sliding layers (odd
// ones) the last Window keys, with a narrower latent (kv_lora_rank_swa,
// key_length_mla_swa, value_length_mla_swa) and RoPE of half the base
// (rope.freq_base_swa). After DenseLead dense layers, sigmoid-routed
// experts with a selection bias, renormalized and scaled by 2.5, and a
// shared expert as wide as an expert.
func (s Shape) dots3note() bool { return s.Arch == "dots3note" }

// dots3Sliding reports whether layer i slides: the odd layers.
func (s Shape) dots3Sliding(i int) bool { return i%2 == 1 }

// dots3Latent is a layer's latent width, key heads' unrotated part and
// value heads (sliding layers half the full layers'); dots3Rope the rope
// part both share, dots3QLora q's compressed width.
func (s Shape) dots3Latent(sliding bool) (kvr, nope, vh int) {
	if sliding {
		return s.HeadDim, s.HeadDim / 2, s.HeadDim / 2
	}
	return 2 * s.HeadDim, s.HeadDim, s.HeadDim
}
func (s Shape) dots3Rope() int  { return s.HeadDim / 2 }
func (s Shape) dots3QLora() int { return 2 * s.HeadDim }

// dots3IndexerHeads and dots3TopK are the lightning indexer's heads (of
// 2·HeadDim: llama.cpp rotates them by Hadamard blocks of 64) and the keys
// each query reads past the window's first 48.
const dots3IndexerHeads, dots3TopK = 4, 48

// checkDots3Note validates dots3note's fields.
func (s Shape) checkDots3Note() error {
	if s.dots3note() && (s.HeadDim < 32 || s.HeadDim&(s.HeadDim-1) != 0 || s.Window <= 0 || s.Experts == 0 || s.SharedFFN != s.ExpertFFN) {
		return fmt.Errorf("shape: dots3note needs a head size that is a power of 2, at least 32 (%d: the indexer's heads of twice it are rotated by Hadamard blocks of 64), a sliding window (%d), experts and a shared expert as wide as one (%d, %d)", s.HeadDim, s.Window, s.SharedFFN, s.ExpertFFN)
	}
	return nil
}

// dots3Keys writes dots3note's metadata: both latent geometries, the
// sliding layers (their window is Window's, written with the others'), the
// indexer and the routing.
func (c *Config) dots3Keys(w *gguf.Writer) {
	a := c.Arch
	kvr, nope, vh := c.dots3Latent(false)
	skvr, snope, svh := c.dots3Latent(true)
	rot := c.dots3Rope()
	w.Add(a+".attention.key_length_swa", uint32(skvr+rot))
	w.Add(a+".attention.value_length_swa", uint32(skvr))
	w.Add(a+".attention.q_lora_rank", uint32(c.dots3QLora()))
	w.Add(a+".attention.kv_lora_rank", uint32(kvr))
	w.Add(a+".attention.key_length_mla", uint32(nope+rot))
	w.Add(a+".attention.value_length_mla", uint32(vh))
	w.Add(a+".attention.kv_lora_rank_swa", uint32(skvr))
	w.Add(a+".attention.key_length_mla_swa", uint32(snope+rot))
	w.Add(a+".attention.value_length_mla_swa", uint32(svh))
	w.Add(a+".rope.dimension_count", uint32(rot))
	w.Add(a+".rope.freq_base_swa", float32(c.RopeBase/2))
	slides, types := make([]bool, c.Layers), make([]int32, c.Layers)
	for i := range slides {
		slides[i] = c.dots3Sliding(i)
		if !slides[i] {
			types[i] = 1
		}
	}
	w.Add(a+".attention.sliding_window_pattern", slides)
	c.dsaKeys(w, types)
}

// dsaKeys writes the lightning indexer's keys (types: 1 where a layer
// runs its own) and the routing of dots3note and hy_v4
// (sigmoidRoutingKeys).
func (c *Config) dsaKeys(w *gguf.Writer, types []int32) {
	a := c.Arch
	w.Add(a+".attention.indexer.head_count", uint32(dots3IndexerHeads))
	w.Add(a+".attention.indexer.key_length", uint32(2*c.HeadDim))
	w.Add(a+".attention.indexer.top_k", uint32(dots3TopK))
	w.Add(a+".attention.indexer.types", types)
	c.sigmoidRoutingKeys(w)
}

// sigmoidRoutingKeys writes DeepSeek-V3's routing as dots1, dots3note,
// hy_v4 and minimax-m3 have it: DenseLead dense layers, a shared expert,
// sigmoid gating, renormalized and scaled by 2.5.
func (c *Config) sigmoidRoutingKeys(w *gguf.Writer) {
	a := c.Arch
	w.Add(a+".leading_dense_block_count", uint32(c.DenseLead))
	w.Add(a+".expert_shared_count", uint32(1))
	w.Add(a+".expert_gating_func", uint32(2)) // sigmoid
	w.Add(a+".expert_weights_norm", true)
	w.Add(a+".expert_weights_scale", float32(2.5))
}

// dots3Layer adds layer i's tensors.
func (c *Config) dots3Layer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, h, ql, rot := uint64(c.Embd), uint64(c.Heads), uint64(c.dots3QLora()), uint64(c.dots3Rope())
	k, n, v := c.dots3Latent(c.dots3Sliding(i))
	kvr, nope, vh := uint64(k), uint64(n), uint64(v)
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	add(p+"attn_q_a.weight", []uint64{e, ql}, i, c.normal(p+"attn_q_a.weight", invSqrt(e)))
	add(p+"attn_q_a_norm.weight", []uint64{ql}, i, c.gain(p+"attn_q_a_norm.weight", 1, 0.1))
	add(p+"attn_q_b.weight", []uint64{ql, h * (nope + rot)}, i, c.normal(p+"attn_q_b.weight", 1.2*invSqrt(ql)))
	add(p+"attn_kv_a_mqa.weight", []uint64{e, kvr + rot}, i, c.normal(p+"attn_kv_a_mqa.weight", 1.2*invSqrt(e)))
	add(p+"attn_kv_a_norm.weight", []uint64{kvr}, i, c.gain(p+"attn_kv_a_norm.weight", 1, 0.1))
	add(p+"attn_k_norm.weight", []uint64{rot}, i, c.gain(p+"attn_k_norm.weight", 1, 0.1))
	add(p+"attn_k_b.weight", []uint64{nope, kvr, h}, i, c.normal(p+"attn_k_b.weight", invSqrt(kvr)))
	add(p+"attn_v_b.weight", []uint64{kvr, vh, h}, i, c.normal(p+"attn_v_b.weight", invSqrt(kvr)))
	add(p+"attn_output.weight", []uint64{h * vh, e}, i, c.normal(p+"attn_output.weight", c.Residual*invSqrt(h*vh)))
	add(p+"attn_gate.weight", []uint64{e, h}, i, c.normal(p+"attn_gate.weight", invSqrt(e)))
	if !c.dots3Sliding(i) {
		c.dsaIndexer(add, i)
	}
	c.leadOrExperts(add, i, true)
}

// dsaIndexer adds layer i's lightning indexer (dots3note, hy_v4): 4 heads
// of 2·HeadDim from the compressed q, one key from the layer's input,
// LayerNormed, and the heads' weights.
func (c *Config) dsaIndexer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.indexer.", i)
	e, ql, d, ih := uint64(c.Embd), uint64(c.dots3QLora()), uint64(2*c.HeadDim), uint64(dots3IndexerHeads)
	add(p+"k_norm.weight", []uint64{d}, i, c.gain(p+"k_norm.weight", 1, 0.1))
	add(p+"k_norm.bias", []uint64{d}, i, c.normal(p+"k_norm.bias", 0.1))
	add(p+"proj.weight", []uint64{e, ih}, i, c.normal(p+"proj.weight", invSqrt(e)))
	add(p+"attn_k.weight", []uint64{e, d}, i, c.normal(p+"attn_k.weight", invSqrt(e)))
	add(p+"attn_q_b.weight", []uint64{ql, ih * d}, i, c.normal(p+"attn_q_b.weight", invSqrt(ql)))
}

// dsaIndexerParams is dsaIndexer's weights.
func (s Shape) dsaIndexerParams() int64 {
	e, ql, d, ih := int64(s.Embd), int64(s.dots3QLora()), int64(2*s.HeadDim), int64(dots3IndexerHeads)
	return 2*d + e*ih + e*d + ql*ih*d
}

// dots3Params is Params for dots3note.
func (s Shape) dots3Params() int64 {
	e, h, ql, rot := int64(s.Embd), int64(s.Heads), int64(s.dots3QLora()), int64(s.dots3Rope())
	n := s.headParams()
	for i := range s.Layers {
		k, no, v := s.dots3Latent(s.dots3Sliding(i))
		kvr, nope, vh := int64(k), int64(no), int64(v)
		n += e + e*ql + ql + ql*h*(nope+rot) + e*(kvr+rot) + kvr + rot + nope*kvr*h + kvr*vh*h + h*vh*e + e*h
		if !s.dots3Sliding(i) {
			n += s.dsaIndexerParams()
		}
		n += s.leadOrExpertsParams(i, true)
	}
	return n
}
