package mkmodel

import (
	"fmt"
	"slices"
	"strings"

	"ppl.dev/gguf"
)

// GLM5-Next (arch glm5-next: GLM-5.3-Flash) is kimi-linear's hybrid (three
// Kimi Delta Attention layers to each latent attention one: kimiLayer's
// KDA, ssm_a a 1-D tensor) inside mhcStreams residual streams mixed by
// manifold-constrained hyper-connections: around the mixer and the FFN,
// hc_*_fn·rmsnorm(streams) gives per row the streams' read weights, their
// write weights and a streams × streams mixing matrix that Sinkhorn
// iterations make doubly stochastic (hc_*_scale, hc_*_base); the head
// reads the streams' mean. The latent attention has no RoPE
// (rope.dimension_count 0), q compressed to half the width, and sparse
// attention past a k-pool indexer: blocks of glm5KPool keys are pooled by
// a softmax over each channel's gate (indexer_compressor_gate, plus the
// position's indexer_compressor_ape), scored by 4 indexer heads, and each
// query reads the glm5TopK/glm5KPool best blocks and the keys after its
// last whole one. After DenseLead dense layers, sigmoid-routed experts
// with a selection bias, renormalized and scaled, their SwiGLUs clamped at
// 0.5, and a shared expert as wide as one.
func (s Shape) glm5Next() bool { return s.Arch == "glm5-next" }

// glm5KPool and glm5TopK are the indexer's block (attention.indexer.kpool)
// and its budget of keys (top_k): from row 19 on a query reads 4 blocks
// and its own unfinished one.
const (
	glm5KPool = 4
	glm5TopK  = 16
)

// glm5QLora, glm5KVLora are the latent attention's compressed widths.
func (s Shape) glm5QLora() int  { return s.Embd / 2 }
func (s Shape) glm5KVLora() int { return 2 * s.HeadDim }

// checkGLM5Next validates glm5-next's fields.
func (s Shape) checkGLM5Next() error {
	if s.glm5Next() && (s.SSMConv < 2 || s.Tied || s.Experts == 0 || s.SharedFFN != s.ExpertFFN) {
		return fmt.Errorf("shape: glm5-next needs --ssm-conv taps (%d), an output matrix, experts and a shared expert as wide as one (%d, %d)", s.SSMConv, s.SharedFFN, s.ExpertFFN)
	}
	return nil
}

// glm5Keys writes glm5-next's metadata.
func (c *Config) glm5Keys(w *gguf.Writer) {
	a := c.Arch
	kv := make([]int32, c.Layers)
	for i := range kv {
		if c.kimiMLA(i) {
			kv[i] = 1
		}
	}
	w.Add(a+".attention.head_count_kv", kv)
	w.Add(a+".attention.q_lora_rank", uint32(c.glm5QLora()))
	w.Add(a+".attention.kv_lora_rank", uint32(c.glm5KVLora()))
	w.Add(a+".attention.key_length_mla", uint32(c.HeadDim))
	w.Add(a+".attention.value_length_mla", uint32(c.HeadDim))
	w.Add(a+".rope.dimension_count", uint32(0))
	w.Add(a+".ssm.conv_kernel", uint32(c.SSMConv))
	w.Add(a+".kda.head_dim", uint32(c.HeadDim))
	w.Add(a+".attention.indexer.head_count", uint32(dots3IndexerHeads))
	w.Add(a+".attention.indexer.key_length", uint32(c.HeadDim))
	w.Add(a+".attention.indexer.top_k", uint32(glm5TopK))
	w.Add(a+".attention.indexer.kpool", uint32(glm5KPool))
	w.Add(a+".attention.indexer.kpool_select_tail", true)
	c.mhcKeys(w)
	w.Add(a+".swiglu_clamp_exp", slices.Repeat([]float32{0.5}, c.Layers))
	c.sigmoidRoutingKeys(w)
}

// glm5Layer adds layer i's tensors.
func (c *Config) glm5Layer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	c.mhcMixes(add, i)
	if !c.kimiMLA(i) {
		c.kimiLayer(add, i)
		return
	}
	e, h, hd, ql, kvr := uint64(c.Embd), uint64(c.Heads), uint64(c.HeadDim), uint64(c.glm5QLora()), uint64(c.glm5KVLora())
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	add(p+"attn_q_a.weight", []uint64{e, ql}, i, c.normal(p+"attn_q_a.weight", invSqrt(e)))
	add(p+"attn_q_a_norm.weight", []uint64{ql}, i, c.gain(p+"attn_q_a_norm.weight", 1, 0.1))
	add(p+"attn_q_b.weight", []uint64{ql, h * hd}, i, c.normal(p+"attn_q_b.weight", 1.2*invSqrt(ql)))
	add(p+"attn_kv_a_mqa.weight", []uint64{e, kvr}, i, c.normal(p+"attn_kv_a_mqa.weight", 1.2*invSqrt(e)))
	add(p+"attn_kv_a_norm.weight", []uint64{kvr}, i, c.gain(p+"attn_kv_a_norm.weight", 1, 0.1))
	add(p+"attn_k_b.weight", []uint64{hd, kvr, h}, i, c.normal(p+"attn_k_b.weight", invSqrt(kvr)))
	add(p+"attn_v_b.weight", []uint64{kvr, hd, h}, i, c.normal(p+"attn_v_b.weight", invSqrt(kvr)))
	add(p+"attn_output.weight", []uint64{h * hd, e}, i, c.normal(p+"attn_output.weight", c.Residual*invSqrt(h*hd)))
	x, ih := p+"indexer.", uint64(dots3IndexerHeads)
	add(x+"k_norm.weight", []uint64{hd}, i, c.gain(x+"k_norm.weight", 1, 0.1))
	add(x+"k_norm.bias", []uint64{hd}, i, c.normal(x+"k_norm.bias", 0.1))
	add(x+"proj.weight", []uint64{e, ih}, i, c.normal(x+"proj.weight", invSqrt(e)))
	add(x+"attn_k.weight", []uint64{e, hd}, i, c.normal(x+"attn_k.weight", invSqrt(e)))
	add(x+"attn_q_b.weight", []uint64{ql, ih * hd}, i, c.normal(x+"attn_q_b.weight", invSqrt(ql)))
	add(p+"indexer_compressor_gate.weight", []uint64{e, hd}, i, c.normal(p+"indexer_compressor_gate.weight", invSqrt(e)))
	add(p+"indexer_compressor_ape.weight", []uint64{hd, glm5KPool}, i, c.normal(p+"indexer_compressor_ape.weight", 0.5))
	c.leadOrExperts(add, i, true)
}

// glm5Params is Params for glm5-next.
func (s Shape) glm5Params() int64 {
	e, hd, h, k, hc := int64(s.Embd), int64(s.HeadDim), int64(s.Heads), int64(s.SSMConv), int64(mhcStreams)
	ql, kvr, ih := int64(s.glm5QLora()), int64(s.glm5KVLora()), int64(dots3IndexerHeads)
	n := s.headParams()
	for i := range s.Layers {
		n += 2*(hc*e*(2+hc)*hc+(2+hc)*hc+3) + e + s.leadOrExpertsParams(i, true)
		if s.kimiMLA(i) {
			n += e*ql + ql + ql*h*hd + e*kvr + kvr + 2*hd*kvr*h + h*hd*e
			n += 2*hd + e*ih + e*hd + ql*ih*hd + e*hd + hd*glm5KPool
			continue
		}
		d := h * hd
		n += 3*e*d + 3*k*d + 2*(e*hd+hd*d) + e*h + h + d + hd + d*e
	}
	return n
}

// glm5Kept reports a glm5-next tensor llama-quantize leaves at its source
// type in a quantized file (probed: F16 from an F16 source), which ppl-mkmodel
// writes as F16: the streams' mixes, KDA's gates, the latent attention's
// small projections and the indexer.
func glm5Kept(name string) bool {
	for _, s := range []string{"hc_attn_fn.", "hc_ffn_fn.", "ssm_beta.", "ssm_f_a.", "ssm_f_b.", "ssm_g_a.", "ssm_g_b.",
		"attn_k_b.", "attn_v_b.", "attn_kv_a_mqa.", "indexer."} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return strings.Contains(name, "indexer_compressor_gate")
}
