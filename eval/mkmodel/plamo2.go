package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// PLaMo-2 (arch plamo2: PFN's PLaMo 2) is a hybrid of Mamba layers and
// attention, every AttnInterval-th layer attention (head_count_kv, written
// per layer, 0 for the Mamba layers), each layer's mixer and its SwiGLU
// MLP (gate and up in one ffn_up) both between a pre-norm and a post-norm
// (attn_norm, post_attention_norm; ffn_norm, post_ffw_norm: the post-norms
// without ".weight", as llama.cpp 0.7.0 binds them). Its attention fuses
// q, k and v in attn_qkv and RMS-norms q and k per head before NeoX RoPE,
// with a weight row per head (attn_q_norm, attn_k_norm).
// Its Mamba mixer: [z | x] = ssm_in·h interleaved per head (head h's z,
// then its x: SSMVHeads heads of SSMHeadDim), x through a causal
// convolution of SSMConv taps without bias, then SiLU (u); [B | C | dt] =
// ssm_x·u (SSMState values each of B and C, dt of max(64, Embd/16)), each
// RMS-normed by its weights (ssm_b_norm, ssm_c_norm, ssm_dt_norm); dt =
// ssm_dt·dt, one per head; Mamba-2's scan with one group (decays ssm_a,
// skip ssm_d, dt bias ssm_dt.bias); y·silu(z); ssm_out·y.
func (s Shape) plamo2() bool { return s.Arch == "plamo2" }

// plamo2DtDim is the width of the Mamba mixer's dt before its projection.
func (s Shape) plamo2DtDim() int { return max(64, s.Embd/16) }

// checkPlamo2 validates plamo2's fields.
func (s Shape) checkPlamo2() error {
	if !s.plamo2() {
		return nil
	}
	switch {
	case s.SSMState <= 0 || s.SSMVHeads <= 0 || s.SSMHeadDim <= 0 || s.SSMConv <= 0 || s.AttnInterval <= 0:
		return fmt.Errorf("shape: plamo2 needs a state size, heads, a head size, a conv kernel and an attention interval (%d, %d, %d, %d, %d)",
			s.SSMState, s.SSMVHeads, s.SSMHeadDim, s.SSMConv, s.AttnInterval)
	case s.SSMKHeads != 0 || s.Layout != "" || s.NoPE || s.Window != 0 || s.moe() || s.SSMNoNorm:
		return fmt.Errorf("shape: plamo2's mixers have one group, its attention no window and RoPE, its MLPs no experts")
	case s.Layers < s.AttnInterval:
		return fmt.Errorf("shape: %d layers with attention every %d-th: plamo2 needs an attention layer", s.Layers, s.AttnInterval)
	}
	return nil
}

// plamo2Keys writes plamo2's SSM sizes and KV heads per layer.
func (c *Config) plamo2Keys(w *gguf.Writer) {
	a := c.Arch
	w.Add(a+".ssm.conv_kernel", uint32(c.SSMConv))
	w.Add(a+".ssm.state_size", uint32(c.SSMState))
	w.Add(a+".ssm.group_count", uint32(0)) // as the converter writes it; llama.cpp 0.7.0 requires 0
	w.Add(a+".ssm.time_step_rank", uint32(c.SSMVHeads))
	w.Add(a+".ssm.inner_size", uint32(c.SSMVHeads*c.SSMHeadDim))
	kv := make([]uint32, c.Layers)
	for i := range kv {
		if !c.recurrent(i) {
			kv[i] = uint32(c.KVHeads)
		}
	}
	w.Add(a+".attention.head_count_kv", kv)
	w.Add(a+".rope.dimension_count", uint32(c.HeadDim))
}

// plamo2Layer adds layer i's tensors.
func (c *Config) plamo2Layer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, ff, res := uint64(c.Embd), uint64(c.FFN), c.Residual
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	if c.recurrent(i) {
		d, n, h, r := uint64(c.SSMVHeads*c.SSMHeadDim), uint64(c.SSMState), uint64(c.SSMVHeads), uint64(c.plamo2DtDim())
		add(p+"ssm_in.weight", []uint64{e, 2 * d}, i, c.normal(p+"ssm_in.weight", invSqrt(e)))
		add(p+"ssm_conv1d.weight", []uint64{uint64(c.SSMConv), d}, i, c.normal(p+"ssm_conv1d.weight", 1.2*invSqrt(uint64(c.SSMConv))))
		add(p+"ssm_x.weight", []uint64{d, 2*n + r}, i, c.normal(p+"ssm_x.weight", invSqrt(d)))
		add(p+"ssm_dt_norm", []uint64{r}, i, c.gain(p+"ssm_dt_norm", 1, 0.1))
		add(p+"ssm_b_norm", []uint64{n}, i, c.gain(p+"ssm_b_norm", 1, 0.1))
		add(p+"ssm_c_norm", []uint64{n}, i, c.gain(p+"ssm_c_norm", 1, 0.1))
		add(p+"ssm_dt.weight", []uint64{r, h}, i, c.normal(p+"ssm_dt.weight", 0.5*invSqrt(r)))
		add(p+"ssm_dt.bias", []uint64{h}, i, c.uniform(p+"ssm_dt.bias", -6.9, -2.3))
		add(p+"ssm_a", []uint64{h}, i, c.uniform(p+"ssm_a", -16, -1))
		add(p+"ssm_d", []uint64{h}, i, c.gain(p+"ssm_d", 1, 0.1))
		add(p+"ssm_out.weight", []uint64{d, e}, i, c.normal(p+"ssm_out.weight", res*invSqrt(d)))
	} else {
		q := uint64(c.Heads * c.HeadDim)
		c.fusedQKV(add, i)
		hd := uint64(c.HeadDim)
		add(p+"attn_q_norm.weight", []uint64{hd, uint64(c.Heads)}, i, c.gain(p+"attn_q_norm.weight", 1, 0.2))
		add(p+"attn_k_norm.weight", []uint64{hd, uint64(c.KVHeads)}, i, c.gain(p+"attn_k_norm.weight", 1, 0.2))
		add(p+"attn_output.weight", []uint64{q, e}, i, c.normal(p+"attn_output.weight", res*invSqrt(q)))
	}
	add(p+"post_attention_norm", []uint64{e}, i, c.gain(p+"post_attention_norm", res, 0.1*res))
	add(p+"ffn_norm.weight", []uint64{e}, i, c.gain(p+"ffn_norm.weight", 1, 0.1))
	add(p+"ffn_up.weight", []uint64{e, 2 * ff}, i, c.normal(p+"ffn_up.weight", invSqrt(e)))
	add(p+"ffn_down.weight", []uint64{ff, e}, i, c.normal(p+"ffn_down.weight", res*invSqrt(ff)))
	add(p+"post_ffw_norm", []uint64{e}, i, c.gain(p+"post_ffw_norm", res, 0.1*res))
}

// plamo2Params is Params for plamo2.
func (s Shape) plamo2Params() int64 {
	e, q, kv, ff := int64(s.Embd), int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim), int64(s.FFN)
	d, n, h, r := int64(s.SSMVHeads*s.SSMHeadDim), int64(s.SSMState), int64(s.SSMVHeads), int64(s.plamo2DtDim())
	p := s.headParams()
	for i := range s.Layers {
		p += 4*e + 3*e*ff
		if s.recurrent(i) {
			p += 2*e*d + int64(s.SSMConv)*d + d*(2*n+r) + r + 2*n + r*h + 3*h + d*e
		} else {
			p += e*(q+2*kv) + q + kv + q*e
		}
	}
	return p
}
