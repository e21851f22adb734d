package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// LFM2 (arch lfm2: LFM2, LFM2.5; lfm2moe: LFM2-8B-A1B) is llama's pre-norm
// block whose mixer is a short convolution in every layer but each
// AttnInterval-th, which is attention with per-head q and k norms
// (head_count_kv is written per layer, 0 for the convolutions): [B | C | x]
// = shortconv.in_proj·h, y = C ⊙ conv(B ⊙ x) over SSMConv taps
// (shortconv.l_cache), out = shortconv.out_proj·y. lfm2moe's FFNs from
// DenseLead on are experts (sigmoid routing with a selection bias). The
// final norm is token_embd_norm.
func (s Shape) lfm2() bool { return s.Arch == "lfm2" || s.Arch == "lfm2moe" }

// checkLFM2 validates LFM2's fields.
func (s Shape) checkLFM2() error {
	if !s.lfm2() {
		return nil
	}
	switch {
	case s.SSMConv < 2 || s.AttnInterval <= 0 || s.Layers < s.AttnInterval:
		return fmt.Errorf("shape: %s needs a convolution of 2 or more taps and an attention layer (%d taps, attention every %d-th of %d layers)", s.Arch, s.SSMConv, s.AttnInterval, s.Layers)
	case s.SSMState != 0 || s.SSMKHeads != 0 || s.SSMVHeads != 0 || s.RopeDims != 0 || s.SharedFFN != 0:
		return fmt.Errorf("shape: %s has no state, heads of a scan, partial RoPE or shared expert", s.Arch)
	}
	return nil
}

// lfm2Keys writes LFM2's own metadata.
func (c *Config) lfm2Keys(w *gguf.Writer) {
	a := c.Arch
	kv := make([]uint32, c.Layers)
	for i := range kv {
		if !c.recurrent(i) {
			kv[i] = uint32(c.KVHeads)
		}
	}
	w.Add(a+".attention.head_count_kv", kv)
	w.Add(a+".shortconv.l_cache", uint32(c.SSMConv))
	w.Add(a+".rope.dimension_count", uint32(c.HeadDim))
	if c.moe() {
		w.Add(a+".leading_dense_block_count", uint32(c.DenseLead))
		w.Add(a+".expert_gating_func", uint32(2)) // sigmoid
		w.Add(a+".expert_weights_norm", true)
	}
}

// lfm2Layer adds layer i of an LFM2 model.
func (c *Config) lfm2Layer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e := uint64(c.Embd)
	res := c.Residual
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	if c.recurrent(i) {
		add(p+"shortconv.in_proj.weight", []uint64{e, 3 * e}, i, c.normal(p+"shortconv.in_proj.weight", 1.5*invSqrt(e)))
		add(p+"shortconv.conv.weight", []uint64{uint64(c.SSMConv), e}, i, c.normal(p+"shortconv.conv.weight", invSqrt(uint64(c.SSMConv))))
		add(p+"shortconv.out_proj.weight", []uint64{e, e}, i, c.normal(p+"shortconv.out_proj.weight", res*invSqrt(e)))
	} else {
		hd := uint64(c.HeadDim)
		c.attnTensors(add, i)
		add(p+"attn_q_norm.weight", []uint64{hd}, i, c.gain(p+"attn_q_norm.weight", 1, 0.2))
		add(p+"attn_k_norm.weight", []uint64{hd}, i, c.gain(p+"attn_k_norm.weight", 1, 0.2))
	}
	add(p+"ffn_norm.weight", []uint64{e}, i, c.gain(p+"ffn_norm.weight", 1, 0.1))
	if c.moe() && i >= c.DenseLead {
		c.expertTensors(add, i)
		add(p+"exp_probs_b.bias", []uint64{uint64(c.Experts)}, i, c.normal(p+"exp_probs_b.bias", 0.1))
		return
	}
	ff := uint64(c.FFN)
	add(p+"ffn_gate.weight", []uint64{e, ff}, i, c.normal(p+"ffn_gate.weight", invSqrt(e)))
	add(p+"ffn_up.weight", []uint64{e, ff}, i, c.normal(p+"ffn_up.weight", invSqrt(e)))
	add(p+"ffn_down.weight", []uint64{ff, e}, i, c.normal(p+"ffn_down.weight", res*invSqrt(ff)))
}

// lfm2Params is Params for LFM2.
func (s Shape) lfm2Params() int64 {
	e, q, kv := int64(s.Embd), int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	n := s.headParams()
	for i := range s.Layers {
		n += 2 * e
		if s.recurrent(i) {
			n += 5*e*e + e*int64(s.SSMConv)
		} else {
			n += 2*e*q + 2*e*kv + 2*int64(s.HeadDim)
		}
		if s.moe() && i >= s.DenseLead {
			nx := int64(s.Experts)
			n += e*nx + 3*e*int64(s.ExpertFFN)*nx + nx
		} else {
			n += 3 * e * int64(s.FFN)
		}
	}
	return n
}
