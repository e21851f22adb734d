package mkmodel

import (
	"fmt"
	"slices"

	"ppl.dev/gguf"
)

// DeepSeek4 (arch deepseek4: DeepSeek-V4) is a decoder of mhcStreams
// residual streams mixed by manifold-constrained hyper-connections (as
// glm5-next's: hc_*_fn, hc_*_base, hc_*_scale around the attention and
// the FFN; output_hc_* reduce the streams before the final norm). Its
// attention reads one shared key per token that is also the value:
// rmsnorm(attn_kv·h)·attn_kv_a_norm, RoPE on its last HeadDim/2 elements;
// q compressed to half the width (attn_q_a, attn_q_a_norm, attn_q_b) and
// RMS-normed per head; attention sinks; the sliding window Window over the
// raw keys, plus, by layer (dsv4Ratio), the keys compressed from blocks of
// 4 overlapping tokens (attn_compressor_*, chosen by a lightning indexer
// of dsv4IdxHeads heads of dsv4IdxDim reading the compressed
// indexer_compressor_* keys; dsv4TopK blocks a query) or of 128 tokens;
// the heads' outputs turned back by the inverse RoPE and projected in
// dsv4Groups groups (attn_output_a) then together (attn_output_b). Every
// FFN is experts routed by sqrt(softplus) with a selection bias,
// renormalized and scaled, the first dsv4HashLayers layers' experts
// chosen by token (ffn_gate_tid2eid), their SwiGLUs clamped at 0.5, plus
// a shared expert as wide as one.
func (s Shape) deepseek4() bool { return s.Arch == "deepseek4" }

// The indexer's heads, their size (a multiple of 64
// other than the heads' size: llama.cpp turns the indexer's keys by a
// Hadamard matrix, and a cache of keys as wide as them too) and its budget
// of blocks (top_k: a query past 35 tokens reads 8 of its blocks); the
// output projection's groups; the layers routed by token.
const (
	dsv4IdxHeads   = 2
	dsv4IdxDim     = 64
	dsv4TopK       = 8
	dsv4Groups     = 2
	dsv4HashLayers = 1
)

// dsv4Ratio is layer i's compression (attention.compress_ratios): the
// first layer's raw keys only, then blocks of 4 and of 128 in turn.
func dsv4Ratio(i int) int {
	switch {
	case i == 0:
		return 0
	case i%2 == 1:
		return 4
	}
	return 128
}

// dsv4QLora is q's compressed width, dsv4ORank a group's output rank.
func (s Shape) dsv4QLora() int { return s.Embd / 2 }
func (s Shape) dsv4ORank() int { return s.HeadDim }

// checkDeepSeek4 validates deepseek4's fields.
func (s Shape) checkDeepSeek4() error {
	if s.deepseek4() && (s.HeadDim%4 != 0 || s.HeadDim == dsv4IdxDim || s.HeadDim/2 > dsv4IdxDim || s.Heads%dsv4Groups != 0 || s.Window <= 0 || s.Tied || s.Experts == 0 || s.SharedFFN != s.ExpertFFN || s.DenseLead != 0) {
		return fmt.Errorf("shape: deepseek4 needs a head size that is a multiple of 4, not %d (%d), heads in %d groups (%d), a sliding window (%d), an output matrix, experts in every layer and a shared expert as wide as one (%d, %d)", dsv4IdxDim, s.HeadDim, dsv4Groups, s.Heads, s.Window, s.SharedFFN, s.ExpertFFN)
	}
	return nil
}

// dsv4Keys writes deepseek4's metadata.
func (c *Config) dsv4Keys(w *gguf.Writer) {
	a := c.Arch
	ratios := make([]uint32, c.Layers)
	for i := range ratios {
		ratios[i] = uint32(dsv4Ratio(i))
	}
	w.Add(a+".rope.dimension_count", uint32(c.HeadDim/2))
	w.Add(a+".attention.q_lora_rank", uint32(c.dsv4QLora()))
	w.Add(a+".attention.output_group_count", uint32(dsv4Groups))
	w.Add(a+".attention.output_lora_rank", uint32(c.dsv4ORank()))
	w.Add(a+".attention.compress_ratios", ratios)
	w.Add(a+".attention.compress_rope_freq_base", float32(160000))
	w.Add(a+".attention.indexer.head_count", uint32(dsv4IdxHeads))
	w.Add(a+".attention.indexer.key_length", uint32(dsv4IdxDim))
	w.Add(a+".attention.indexer.top_k", uint32(dsv4TopK))
	c.mhcKeys(w)
	w.Add(a+".hash_layer_count", uint32(dsv4HashLayers))
	w.Add(a+".swiglu_clamp_exp", slices.Repeat([]float32{0.5}, c.Layers))
	w.Add(a+".expert_shared_count", uint32(1))
	w.Add(a+".expert_gating_func", uint32(4)) // sqrt(softplus)
	w.Add(a+".expert_weights_norm", true)
	w.Add(a+".expert_weights_scale", float32(1.5))
}

// dsv4Layer adds layer i's tensors.
func (c *Config) dsv4Layer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, h, d, ql := uint64(c.Embd), uint64(c.Heads), uint64(c.HeadDim), uint64(c.dsv4QLora())
	g, or := uint64(dsv4Groups), uint64(c.dsv4ORank())
	c.mhcMixes(add, i)
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	add(p+"attn_sinks.weight", []uint64{h}, i, c.normal(p+"attn_sinks.weight", 1))
	add(p+"attn_q_a.weight", []uint64{e, ql}, i, c.normal(p+"attn_q_a.weight", invSqrt(e)))
	add(p+"attn_q_a_norm.weight", []uint64{ql}, i, c.gain(p+"attn_q_a_norm.weight", 1, 0.1))
	add(p+"attn_q_b.weight", []uint64{ql, h * d}, i, c.normal(p+"attn_q_b.weight", invSqrt(ql)))
	add(p+"attn_kv.weight", []uint64{e, d}, i, c.normal(p+"attn_kv.weight", invSqrt(e)))
	add(p+"attn_kv_a_norm.weight", []uint64{d}, i, c.gain(p+"attn_kv_a_norm.weight", 1, 0.1))
	add(p+"attn_output_a.weight", []uint64{h * d / g, or * g}, i, c.normal(p+"attn_output_a.weight", invSqrt(h*d/g)))
	add(p+"attn_output_b.weight", []uint64{g * or, e}, i, c.normal(p+"attn_output_b.weight", c.Residual*invSqrt(g*or)))
	if r := uint64(dsv4Ratio(i)); r != 0 {
		coff := uint64(1)
		if r == 4 {
			coff = 2
		}
		c.dsv4Compressor(add, p+"attn_compressor_", i, coff*d, d, r)
		if r == 4 {
			ih, id := uint64(dsv4IdxHeads), uint64(dsv4IdxDim)
			add(p+"indexer.proj.weight", []uint64{e, ih}, i, c.normal(p+"indexer.proj.weight", invSqrt(e)))
			add(p+"indexer.attn_q_b.weight", []uint64{ql, ih * id}, i, c.normal(p+"indexer.attn_q_b.weight", invSqrt(ql)))
			c.dsv4Compressor(add, p+"indexer_compressor_", i, 2*id, id, r)
		}
	}
	nx := uint64(c.Experts)
	add(p+"ffn_gate_inp.weight", []uint64{e, nx}, i, c.normal(p+"ffn_gate_inp.weight", invSqrt(e)))
	if i < dsv4HashLayers {
		add(p+"ffn_gate_tid2eid.weight", []uint64{uint64(c.ExpertsUsed), uint64(c.Vocab)}, i, c.expertTable(p+"ffn_gate_tid2eid.weight"))
	} else {
		add(p+"exp_probs_b.bias", []uint64{nx}, i, c.normal(p+"exp_probs_b.bias", 0.1))
	}
	add(p+"ffn_norm.weight", []uint64{e}, i, c.gain(p+"ffn_norm.weight", 1, 0.1))
	fx, sf := uint64(c.ExpertFFN), uint64(c.SharedFFN)
	add(p+"ffn_gate_exps.weight", []uint64{e, fx, nx}, i, c.normal(p+"ffn_gate_exps.weight", invSqrt(e)))
	add(p+"ffn_down_exps.weight", []uint64{fx, e, nx}, i, c.normal(p+"ffn_down_exps.weight", c.Residual*invSqrt(fx)))
	add(p+"ffn_up_exps.weight", []uint64{e, fx, nx}, i, c.normal(p+"ffn_up_exps.weight", invSqrt(e)))
	add(p+"ffn_gate_shexp.weight", []uint64{e, sf}, i, c.normal(p+"ffn_gate_shexp.weight", invSqrt(e)))
	add(p+"ffn_down_shexp.weight", []uint64{sf, e}, i, c.normal(p+"ffn_down_shexp.weight", c.Residual*invSqrt(sf)))
	add(p+"ffn_up_shexp.weight", []uint64{e, sf}, i, c.normal(p+"ffn_up_shexp.weight", invSqrt(e)))
}

// dsv4Compressor adds a compressor's tensors under prefix: its values and
// gates (w wide, from the residual), the gates' bias per position in a
// block of r, and the compressed key's norm (d wide).
func (c *Config) dsv4Compressor(add func(name string, shape []uint64, layer int, fill RowFunc), prefix string, i int, w, d, r uint64) {
	e := uint64(c.Embd)
	add(prefix+"kv.weight", []uint64{e, w}, i, c.normal(prefix+"kv.weight", invSqrt(e)))
	add(prefix+"gate.weight", []uint64{e, w}, i, c.normal(prefix+"gate.weight", invSqrt(e)))
	add(prefix+"ape.weight", []uint64{w, r}, i, c.normal(prefix+"ape.weight", 0.5))
	add(prefix+"norm.weight", []uint64{d}, i, c.gain(prefix+"norm.weight", 1, 0.1))
}

// expertTable fills a hash layer's experts per token: row t holds
// ExpertsUsed distinct experts, drawn for the token.
func (c *Config) expertTable(name string) RowFunc {
	return func(r int, dst []float32) {
		for j, e := range c.rng(name, r).Perm(c.Experts)[:len(dst)] {
			dst[j] = float32(e)
		}
	}
}

// dsv4Params is Params for deepseek4.
func (s Shape) dsv4Params() int64 {
	e, h, d, ql, hc := int64(s.Embd), int64(s.Heads), int64(s.HeadDim), int64(s.dsv4QLora()), int64(mhcStreams)
	g, or, nx, fx := int64(dsv4Groups), int64(s.dsv4ORank()), int64(s.Experts), int64(s.ExpertFFN)
	ih, id := int64(dsv4IdxHeads), int64(dsv4IdxDim)
	n := s.headParams() + hc*e*hc + hc + 1
	for i := range s.Layers {
		mix := (2 + hc) * hc
		n += 2*(hc*e*mix+mix+3) + e + h + e*ql + ql + ql*h*d + e*d + d + h*d/g*or*g + g*or*e
		switch dsv4Ratio(i) {
		case 4:
			n += 2*e*2*d + 2*d*4 + d + e*ih + ql*ih*id + 2*e*2*id + 2*id*4 + id
		case 128:
			n += 2*e*d + d*128 + d
		}
		n += e*nx + e + 3*e*fx*nx + 3*e*int64(s.SharedFFN)
		if i < dsv4HashLayers {
			n += int64(s.ExpertsUsed) * int64(s.Vocab)
		} else {
			n += nx
		}
	}
	return n
}
