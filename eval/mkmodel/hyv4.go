package mkmodel

import (
	"fmt"
	"slices"

	"ppl.dev/gguf"
)

// hy_v4 (Tencent's Hunyuan 4) is a decoder of hyV4Streams residual
// streams (hyper-connections without the mixing matrix: per layer, around
// the attention and around the FFN, the streams are reduced to one row by
// sigmoid weights from hc_*_fn, hc_*_base and hc_*_scale of the normed
// streams, and the block's output is added back to each stream times its
// own gate; output_hc_* reduce them before the final norm). Its attention
// is dots3note's full layers' (latent attention with q compression, DSA
// with a lightning indexer of 4 heads of 2·HeadDim, top_k 48, in the even
// layers, the odd ones reusing the previous layer's keys), with attention
// sinks and an elementwise sigmoid gate (attn_gate, as wide as the heads'
// outputs) instead of the rope key's norm and the gate per head; no
// sliding layers. After DenseLead dense layers, sigmoid-routed experts
// with a selection bias, renormalized, their SwiGLUs clamped at 0.5, and
// a shared expert as wide as an expert. The output matrix is required.
func (s Shape) hyV4() bool { return s.Arch == "hy_v4" }

// hyV4Streams is the residual streams' count (hyper_connection.count).
const hyV4Streams = 4

// checkHyV4 validates hy_v4's fields.
func (s Shape) checkHyV4() error {
	if s.hyV4() && (s.HeadDim < 32 || s.HeadDim%2 != 0 || s.Tied || s.Experts == 0 || s.SharedFFN != s.ExpertFFN) {
		return fmt.Errorf("shape: hy_v4 needs an even head size of at least 32 (%d), an output matrix, experts and a shared expert as wide as one (%d, %d)", s.HeadDim, s.SharedFFN, s.ExpertFFN)
	}
	return nil
}

// hyV4Keys writes hy_v4's metadata: the latent sizes, the streams, the
// indexer and the routing.
func (c *Config) hyV4Keys(w *gguf.Writer) {
	a := c.Arch
	kvr, nope, vh := c.dots3Latent(false)
	rot := c.dots3Rope()
	w.Add(a+".attention.q_lora_rank", uint32(c.dots3QLora()))
	w.Add(a+".attention.kv_lora_rank", uint32(kvr))
	w.Add(a+".attention.key_length_mla", uint32(nope+rot))
	w.Add(a+".attention.value_length_mla", uint32(vh))
	w.Add(a+".rope.dimension_count", uint32(rot))
	w.Add(a+".hyper_connection.count", uint32(hyV4Streams))
	w.Add(a+".hyper_connection.epsilon", float32(1e-6))
	w.Add(a+".hyper_connection.magnitude", float32(2))
	types := make([]int32, c.Layers)
	for i := range types {
		types[i] = int32(1 - i%2)
	}
	c.dsaKeys(w, types)
	w.Add(a+".swiglu_clamp_exp", slices.Repeat([]float32{0.5}, c.Layers))
}

// hyV4Layer adds layer i's tensors.
func (c *Config) hyV4Layer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, h, ql, rot := uint64(c.Embd), uint64(c.Heads), uint64(c.dots3QLora()), uint64(c.dots3Rope())
	k, n, v := c.dots3Latent(false)
	kvr, nope, vh, hc := uint64(k), uint64(n), uint64(v), uint64(hyV4Streams)
	for _, part := range []string{"attn", "ffn"} {
		add(p+"hc_"+part+"_fn.weight", []uint64{hc * e, 2 * hc}, i, c.normal(p+"hc_"+part+"_fn.weight", invSqrt(hc*e)))
		add(p+"hc_"+part+"_base.weight", []uint64{2 * hc}, i, c.normal(p+"hc_"+part+"_base.weight", 0.5))
		add(p+"hc_"+part+"_scale.weight", []uint64{2}, i, c.gain(p+"hc_"+part+"_scale.weight", 1, 0.2))
	}
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	add(p+"attn_sinks.weight", []uint64{h}, i, c.normal(p+"attn_sinks.weight", 1))
	add(p+"attn_q_a.weight", []uint64{e, ql}, i, c.normal(p+"attn_q_a.weight", invSqrt(e)))
	add(p+"attn_q_a_norm.weight", []uint64{ql}, i, c.gain(p+"attn_q_a_norm.weight", 1, 0.1))
	add(p+"attn_q_b.weight", []uint64{ql, h * (nope + rot)}, i, c.normal(p+"attn_q_b.weight", 1.2*invSqrt(ql)))
	add(p+"attn_kv_a_mqa.weight", []uint64{e, kvr + rot}, i, c.normal(p+"attn_kv_a_mqa.weight", 1.2*invSqrt(e)))
	add(p+"attn_kv_a_norm.weight", []uint64{kvr}, i, c.gain(p+"attn_kv_a_norm.weight", 1, 0.1))
	add(p+"attn_k_b.weight", []uint64{nope, kvr, h}, i, c.normal(p+"attn_k_b.weight", invSqrt(kvr)))
	add(p+"attn_v_b.weight", []uint64{kvr, vh, h}, i, c.normal(p+"attn_v_b.weight", invSqrt(kvr)))
	add(p+"attn_output.weight", []uint64{h * vh, e}, i, c.normal(p+"attn_output.weight", c.Residual*invSqrt(h*vh)))
	add(p+"attn_gate.weight", []uint64{e, h * vh}, i, c.normal(p+"attn_gate.weight", invSqrt(e)))
	if i%2 == 0 {
		c.dsaIndexer(add, i)
	}
	c.leadOrExperts(add, i, true)
}

// hyV4Params is Params for hy_v4.
func (s Shape) hyV4Params() int64 {
	e, h, ql, rot, hc := int64(s.Embd), int64(s.Heads), int64(s.dots3QLora()), int64(s.dots3Rope()), int64(hyV4Streams)
	k, no, v := s.dots3Latent(false)
	kvr, nope, vh := int64(k), int64(no), int64(v)
	n := s.headParams() + hc*e*hc + hc + 1
	for i := range s.Layers {
		n += 2 * (hc*e*2*hc + 2*hc + 2)
		n += e + h + e*ql + ql + ql*h*(nope+rot) + e*(kvr+rot) + kvr + nope*kvr*h + kvr*vh*h + h*vh*e + e*h*vh
		if i%2 == 0 {
			n += s.dsaIndexerParams()
		}
		n += s.leadOrExpertsParams(i, true)
	}
	return n
}
