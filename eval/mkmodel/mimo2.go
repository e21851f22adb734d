package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// MiMo-V2 (arch mimo2: Xiaomi's MiMo-V2-Flash) is llama's block with NeoX
// RoPE over a third of each key head, values of two thirds of the key
// head's size (MiMo's 128 of 192), three layers of every four sliding over
// Window keys with attention sinks, RoPE of half the base and twice the
// KV heads of the global ones (head_count and head_count_kv are written
// per layer), the attention's output scaled by attention.value_scale, and
// after DenseLead dense layers sigmoid-routed experts with a selection
// bias.
func (s Shape) mimo2() bool { return s.Arch == "mimo2" }

// mimo2Sliding reports whether layer i slides (the layers olmo2's
// converter pattern flags: every fourth is global).
func (s Shape) mimo2Sliding(i int) bool { return (i+1)%4 != 0 }

// mimo2KV is layer i's KV heads: twice KVHeads (at most Heads) where it
// slides.
func (s Shape) mimo2KV(i int) int {
	if s.mimo2Sliding(i) {
		return min(s.Heads, 2*s.KVHeads)
	}
	return s.KVHeads
}

// valueDim is the size of a value head: HeadDim, or two thirds of it in
// mimo2.
func (s Shape) valueDim() int {
	if s.mimo2() {
		return s.HeadDim * 2 / 3
	}
	return s.HeadDim
}

// checkMiMo2 validates mimo2's fields.
func (s Shape) checkMiMo2() error {
	if !s.mimo2() {
		return nil
	}
	if s.HeadDim%6 != 0 || s.Window <= 0 || s.Heads%min(s.Heads, 2*s.KVHeads) != 0 {
		return fmt.Errorf("shape: mimo2 needs a head size that is a multiple of 6 (%d), a window (%d) and heads a multiple of twice the KV heads", s.HeadDim, s.Window)
	}
	return nil
}

// mimo2Keys writes mimo2's per-layer head counts, RoPE's dimensions and the
// value scale.
func (c *Config) mimo2Keys(w *gguf.Writer) {
	a := c.Arch
	heads, kv := make([]int32, c.Layers), make([]int32, c.Layers)
	for i := range c.Layers {
		heads[i], kv[i] = int32(c.Heads), int32(c.mimo2KV(i))
	}
	w.Add(a+".attention.head_count", heads)
	w.Add(a+".attention.head_count_kv", kv)
	w.Add(a+".rope.dimension_count", uint32(c.HeadDim/3))
	w.Add(a+".attention.value_scale", float32(0.707))
}

// mimo2Layer adds layer i's tensors.
func (c *Config) mimo2Layer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e := uint64(c.Embd)
	q, k, v := uint64(c.Heads*c.HeadDim), uint64(c.mimo2KV(i)*c.HeadDim), uint64(c.mimo2KV(i)*c.valueDim())
	o := uint64(c.Heads * c.valueDim())
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	add(p+"attn_q.weight", []uint64{e, q}, i, c.normal(p+"attn_q.weight", 1.2*invSqrt(e)))
	add(p+"attn_k.weight", []uint64{e, k}, i, c.normal(p+"attn_k.weight", 1.2*invSqrt(e)))
	add(p+"attn_v.weight", []uint64{e, v}, i, c.normal(p+"attn_v.weight", invSqrt(e)))
	add(p+"attn_output.weight", []uint64{o, e}, i, c.normal(p+"attn_output.weight", c.Residual*invSqrt(o)))
	if c.mimo2Sliding(i) {
		add(p+"attn_sinks.weight", []uint64{uint64(c.Heads)}, i, c.normal(p+"attn_sinks.weight", 1))
	}
	c.leadOrExperts(add, i, false)
}

// leadOrExperts adds layer i's ffn_norm and FFN: a SwiGLU MLP of FFN in
// the first DenseLead layers, then experts with a selection bias
// (exp_probs_b), and with shared a shared expert of SharedFFN (mimo2,
// step35).
func (c *Config) leadOrExperts(add func(name string, shape []uint64, layer int, fill RowFunc), i int, shared bool) {
	p := fmt.Sprintf("blk.%d.", i)
	e, ff := uint64(c.Embd), uint64(c.FFN)
	add(p+"ffn_norm.weight", []uint64{e}, i, c.gain(p+"ffn_norm.weight", 1, 0.1))
	if i < c.DenseLead {
		add(p+"ffn_gate.weight", []uint64{e, ff}, i, c.normal(p+"ffn_gate.weight", invSqrt(e)))
		add(p+"ffn_up.weight", []uint64{e, ff}, i, c.normal(p+"ffn_up.weight", invSqrt(e)))
		add(p+"ffn_down.weight", []uint64{ff, e}, i, c.normal(p+"ffn_down.weight", c.Residual*invSqrt(ff)))
		return
	}
	c.expertTensors(add, i)
	add(p+"exp_probs_b.bias", []uint64{uint64(c.Experts)}, i, c.normal(p+"exp_probs_b.bias", 0.1))
	if shared {
		sf := uint64(c.SharedFFN)
		add(p+"ffn_gate_shexp.weight", []uint64{e, sf}, i, c.normal(p+"ffn_gate_shexp.weight", invSqrt(e)))
		add(p+"ffn_up_shexp.weight", []uint64{e, sf}, i, c.normal(p+"ffn_up_shexp.weight", invSqrt(e)))
		add(p+"ffn_down_shexp.weight", []uint64{sf, e}, i, c.normal(p+"ffn_down_shexp.weight", c.Residual*invSqrt(sf)))
	}
}

// leadOrExpertsParams is leadOrExperts' weights in layer i.
func (s Shape) leadOrExpertsParams(i int, shared bool) int64 {
	e := int64(s.Embd)
	if i < s.DenseLead {
		return e + 3*e*int64(s.FFN)
	}
	n := e + e*int64(s.Experts) + 3*e*int64(s.ExpertFFN)*int64(s.Experts) + int64(s.Experts)
	if shared {
		n += 3 * e * int64(s.SharedFFN)
	}
	return n
}

// mimo2Params is Params for mimo2.
func (s Shape) mimo2Params() int64 {
	e, hd, vd := int64(s.Embd), int64(s.HeadDim), int64(s.valueDim())
	n := s.headParams()
	for i := range s.Layers {
		h, kv := int64(s.Heads), int64(s.mimo2KV(i))
		n += e + e*h*hd + e*kv*(hd+vd) + h*vd*e + s.leadOrExpertsParams(i, false)
		if s.mimo2Sliding(i) {
			n += h
		}
	}
	return n
}
