package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// RWKV-6 (arch rwkv6: the RWKV-6 "Finch" models) is RWKV-7's layout with
// RWKV-6's time mix: one blend (time_mix_lerp_x) feeding a low-rank map to
// five data-dependent blends (time_mix_w1, w2; lerp_fused, 5 rows: w, k,
// v, r, g), a decay exp(-exp(w)) from its own low-rank map
// (time_mix_decay_w1, w2, time_mix_decay), a bonus per channel
// (time_mix_first), and a channel mix with a receptance gate
// (channel_mix_receptance, channel_mix_lerp_r). Heads of HeadDim (64: RWKV-6's
// wkv.head_size); time_mix_extra_dim and time_decay_extra_dim as the
// converter's (rwkv6Dims); rescale_every_n_layers 6, as
// the Finch models' files give it (llama.cpp halves every sixth layer's
// output).
//
// RWKV6Qwen2 (arch rwkv6qwen2: QRWKV6, Qwen 2.5 with RWKV-6 time mixing)
// has RWKV-6's time mix without time_mix_first (gated linear attention
// with a sigmoid gate), KVHeads groups of keys and values, between RMS
// norms (attn_norm, ffn_norm) and a SwiGLU MLP; token_shift_count 1.
func (s Shape) rwkv6() bool { return s.Arch == "rwkv6" || s.Arch == "rwkv6qwen2" }

// rwkv6Dims are RWKV-6's time_mix_extra_dim and time_decay_extra_dim as
// the converter writes them: 64 and 128 at a width of 4096, else 32 and
// 64.
func (s Shape) rwkv6Dims() (mix, decay int) {
	if s.Embd == 4096 {
		return 64, 128
	}
	return 32, 64
}

// rwkv6Keys writes RWKV-6's sizes.
func (c *Config) rwkv6Keys(w *gguf.Writer) {
	a := c.Arch
	mix, decay := c.rwkv6Dims()
	w.Add(a+".feed_forward_length", uint32(c.FFN))
	w.Add(a+".attention.head_count", uint32(0))
	w.Add(a+".wkv.head_size", uint32(c.HeadDim))
	w.Add(a+".time_mix_extra_dim", uint32(mix))
	w.Add(a+".time_decay_extra_dim", uint32(decay))
	if a == "rwkv6" {
		w.Add(a+".attention.layer_norm_epsilon", float32(c.Eps))
		w.Add(a+".rescale_every_n_layers", uint32(6))
		return
	}
	w.Add(a+".attention.head_count_kv", uint32(c.KVHeads))
	w.Add(a+".token_shift_count", uint32(1))
}

// rwkv6Layer adds layer i's tensors in the converter's shapes; the decays
// exp(-exp(w)) mostly between 0.4 and 0.99.
func (c *Config) rwkv6Layer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, f, d := uint64(c.Embd), uint64(c.FFN), uint64(c.HeadDim)
	kv := uint64(c.KVHeads) * d
	mix, decay := c.rwkv6Dims()
	m, dd := uint64(mix), uint64(decay)
	qwen := c.Arch == "rwkv6qwen2"
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	if !qwen {
		add(p+"attn_norm.bias", []uint64{e}, i, c.normal(p+"attn_norm.bias", 0.1))
		add(p+"attn_norm_2.weight", []uint64{e}, i, c.gain(p+"attn_norm_2.weight", 1, 0.1))
		add(p+"attn_norm_2.bias", []uint64{e}, i, c.normal(p+"attn_norm_2.bias", 0.1))
	}
	add(p+"time_mix_w1.weight", []uint64{e, 5 * m}, i, c.normal(p+"time_mix_w1.weight", invSqrt(e)))
	add(p+"time_mix_w2.weight", []uint64{m, e, 5}, i, c.normal(p+"time_mix_w2.weight", 0.3*invSqrt(m)))
	add(p+"time_mix_lerp_x.weight", []uint64{e, 1, 1}, i, c.uniform(p+"time_mix_lerp_x.weight", 0, 1))
	add(p+"time_mix_lerp_fused.weight", []uint64{e, 1, 1, 5}, i, c.uniform(p+"time_mix_lerp_fused.weight", 0, 1))
	if !qwen {
		add(p+"time_mix_first.weight", []uint64{d, e / d}, i, c.normal(p+"time_mix_first.weight", 0.5))
	}
	add(p+"time_mix_decay.weight", []uint64{e}, i, c.uniform(p+"time_mix_decay.weight", -4, 0))
	add(p+"time_mix_decay_w1.weight", []uint64{e, dd}, i, c.normal(p+"time_mix_decay_w1.weight", invSqrt(e)))
	add(p+"time_mix_decay_w2.weight", []uint64{dd, e}, i, c.normal(p+"time_mix_decay_w2.weight", 0.3*invSqrt(dd)))
	add(p+"time_mix_key.weight", []uint64{e, kv}, i, c.normal(p+"time_mix_key.weight", invSqrt(e)))
	add(p+"time_mix_value.weight", []uint64{e, kv}, i, c.normal(p+"time_mix_value.weight", invSqrt(e)))
	add(p+"time_mix_receptance.weight", []uint64{e, e}, i, c.normal(p+"time_mix_receptance.weight", invSqrt(e)))
	if qwen { // Qwen's q, k and v biases
		add(p+"time_mix_key.bias", []uint64{kv}, i, c.normal(p+"time_mix_key.bias", 0.1))
		add(p+"time_mix_value.bias", []uint64{kv}, i, c.normal(p+"time_mix_value.bias", 0.1))
		add(p+"time_mix_receptance.bias", []uint64{e}, i, c.normal(p+"time_mix_receptance.bias", 0.1))
	}
	add(p+"time_mix_gate.weight", []uint64{e, e}, i, c.normal(p+"time_mix_gate.weight", invSqrt(e)))
	if !qwen {
		add(p+"time_mix_ln.weight", []uint64{e}, i, c.gain(p+"time_mix_ln.weight", 1, 0.1))
		add(p+"time_mix_ln.bias", []uint64{e}, i, c.normal(p+"time_mix_ln.bias", 0.1))
	}
	add(p+"time_mix_output.weight", []uint64{e, e}, i, c.normal(p+"time_mix_output.weight", c.Residual*invSqrt(e)))
	if qwen {
		add(p+"ffn_norm.weight", []uint64{e}, i, c.gain(p+"ffn_norm.weight", 1, 0.1))
		add(p+"ffn_gate.weight", []uint64{e, f}, i, c.normal(p+"ffn_gate.weight", invSqrt(e)))
		add(p+"ffn_down.weight", []uint64{f, e}, i, c.normal(p+"ffn_down.weight", c.Residual*invSqrt(f)))
		add(p+"ffn_up.weight", []uint64{e, f}, i, c.normal(p+"ffn_up.weight", invSqrt(e)))
		return
	}
	add(p+"channel_mix_lerp_k.weight", []uint64{e, 1, 1}, i, c.uniform(p+"channel_mix_lerp_k.weight", 0, 1))
	add(p+"channel_mix_lerp_r.weight", []uint64{e, 1, 1}, i, c.uniform(p+"channel_mix_lerp_r.weight", 0, 1))
	add(p+"channel_mix_key.weight", []uint64{e, f}, i, c.normal(p+"channel_mix_key.weight", invSqrt(e)))
	add(p+"channel_mix_value.weight", []uint64{f, e}, i, c.normal(p+"channel_mix_value.weight", 2*c.Residual*invSqrt(f)))
	add(p+"channel_mix_receptance.weight", []uint64{e, e}, i, c.normal(p+"channel_mix_receptance.weight", invSqrt(e)))
}

// rwkv6Params is Params for rwkv6 (the embeddings' LayerNorm and the
// output norm's bias beside headParams) and rwkv6qwen2.
func (s Shape) rwkv6Params() int64 {
	e, f, kv := int64(s.Embd), int64(s.FFN), int64(s.KVHeads*s.HeadDim)
	mix, decay := s.rwkv6Dims()
	m, dd := int64(mix), int64(decay)
	n := s.headParams()
	per := 10*e*m + 6*e + 2*e*dd + e + 2*e*kv + 3*e*e // w1, w2, the blends, the decay's map and base, k, v, r, gate, output
	if s.Arch == "rwkv6qwen2" {
		per += e + 2*kv + e + e + 3*e*f // attn_norm, the biases, ffn_norm, the MLP
	} else {
		n += 3 * e
		per += 4*e + e + 2*e + 2*e + 2*e*f + e*e // the norms, time_mix_first, time_mix_ln, the channel mix
	}
	return n + int64(s.Layers)*per
}
