package mkmodel

import (
	"fmt"
	"math"

	"ppl.dev/gguf"
)

// Phi-3 (arch phi3: Phi-3, Phi-3.5, Phi-4) is llama's block with fused
// projections, as Microsoft's checkpoints and llama.cpp's converter store
// them: attn_qkv ([q | k | v] rows) and ffn_up ([gate | up], 2·FFN rows).
// Its own fields:
//
//	RopeDims     rope.dimension_count (0: the whole head; Phi-4-mini
//	             rotates 3/4 of it)
//	OrigContext  LongRoPE (Phi-3-*-128k, Phi-3.5, Phi-4-mini): the
//	             original context, rope.scaling.original_context_length;
//	             the file then has rope_factors_long and
//	             rope_factors_short (one factor per rotated pair) and
//	             rope.scaling.attn_factor sqrt(1 + ln(s)/ln(OrigContext)),
//	             s = Context/OrigContext, as the converter computes it.
//	             0: no LongRoPE (Phi-4).
//
// GLM-4 (arch glm4: GLM-4-0414, GLM-Z1) fuses the same tensors, with a
// bias on attn_qkv, RMS-norms the attention's and the FFN's outputs
// (post_attention_norm, post_ffw_norm), and rotates half of each head by
// default (RopeDims).
//
// PLaMo-3 (arch plamo3: PFN's PLaMo 3) fuses them too, without a bias,
// with glm4's post-norms, q and k RMS-normed per head (attn_q_norm,
// attn_k_norm) before NeoX RoPE over the whole head, and with Window
// every layer but each second one sliding over Window keys with RoPE of
// half the base (attention.sliding_window_pattern 2,
// rope.freq_base_swa).
func (s Shape) phi3() bool { return s.Arch == "phi3" || s.Arch == "phimoe" }

// fused reports an architecture with fused attn_qkv and ffn_up.
func (s Shape) fused() bool {
	return s.Arch == "phi3" || s.Arch == "glm4" || s.Arch == "chatglm" || s.Arch == "plamo3"
}

// partialRoPE reports an attention architecture whose RopeDims may be
// set (the hybrids check theirs apart).
func (s Shape) partialRoPE() bool {
	return s.phi3() || s.fused() || s.minicpm3() || s.minimax01() || s.Arch == "stablelm" || s.Arch == "minimax-m2" || s.minimaxM3() || s.Arch == "bailingmoe2" || s.Arch == "phi2" || s.Arch == "gptneox" || s.Arch == "nemotron"
}

// geluMLP reports an architecture whose MLPs are ungated GELU with
// biases, its attention's output biased and its norms LayerNorms with
// biases (starcoder2, phi2, gptneox, gpt2, bloom).
func (s Shape) geluMLP() bool {
	return s.Arch == "starcoder2" || s.Arch == "phi2" || s.Arch == "gptneox" || s.Arch == "gpt2" || s.Arch == "bloom"
}

// alibi reports an architecture whose q, k and v are fused in attn_qkv
// and whose attention has ALiBi's bias (bloom, mpt, jais).
func (s Shape) alibi() bool { return s.Arch == "bloom" || s.Arch == "mpt" || s.Arch == "jais" }

// checkPhi3 validates phi3's fields (and that other architectures leave
// OrigContext zero).
func (s Shape) checkPhi3() error {
	switch {
	case !s.phi3() && !s.minicpm3() && s.OrigContext != 0:
		return fmt.Errorf("shape: LongRoPE's original context is for phi3 and minicpm3, not %s", s.Arch)
	case !s.partialRoPE():
		return nil
	case s.RopeDims < 0 || s.RopeDims%2 != 0 || s.RopeDims > s.HeadDim:
		return fmt.Errorf("shape: rope dims %d (want even, 2..head dimension %d)", s.RopeDims, s.HeadDim)
	case s.OrigContext < 0 || s.OrigContext >= s.Context:
		return fmt.Errorf("shape: LongRoPE's original context %d must be below the context %d", s.OrigContext, s.Context)
	}
	return nil
}

// ropeDims is the rotated dimensions of a head.
func (s Shape) ropeDims() int {
	switch {
	case s.RopeDims != 0:
		return s.RopeDims
	case s.Arch == "glm4" || s.Arch == "chatglm" || s.Arch == "minimax-m2" || s.minimaxM3() || s.Arch == "phi2" || s.Arch == "nemotron": // phi2: near Phi-2's partial_rotary_factor 0.4; Minitron's 0.5
		return s.HeadDim / 2
	case s.minicpm3(): // MiniCPM3's 32 of 96: half the unrotated part (PLM's too)
		return s.HeadDim / 2
	case s.Arch == "stablelm" || s.Arch == "gptneox": // StableLM 2's and Pythia's partial_rotary_factor 0.25
		return s.HeadDim / 4
	}
	return s.HeadDim
}

// fusedKeys writes phi3's, glm4's and plamo3's own metadata.
func (c *Config) fusedKeys(w *gguf.Writer) {
	a := c.Arch
	w.Add(a+".rope.dimension_count", uint32(c.ropeDims()))
	if a == "plamo3" && c.Window > 0 {
		w.Add(a+".attention.sliding_window_pattern", uint32(2))
		w.Add(a+".rope.freq_base_swa", float32(c.RopeBase/2))
	}
	if c.OrigContext > 0 {
		w.Add(a+".rope.scaling.original_context_length", uint32(c.OrigContext))
		scale := float64(c.Context) / float64(c.OrigContext)
		w.Add(a+".rope.scaling.attn_factor", float32(math.Sqrt(1+math.Log(scale)/math.Log(float64(c.OrigContext)))))
	}
}

// fusedLayer adds layer i's tensors: llama's, with q, k and v in one
// attn_qkv and gate and up in one ffn_up (and glm4's bias and post-norms).
func (c *Config) fusedLayer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	e, q, kv, ff := uint64(c.Embd), uint64(c.Heads*c.HeadDim), uint64(c.KVHeads*c.HeadDim), uint64(c.FFN)
	inv := 1 / math.Sqrt(float64(e))
	p := fmt.Sprintf("blk.%d.", i)
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	c.fusedQKV(add, i)
	glm := c.Arch == "glm4" || c.Arch == "plamo3" // post-norms
	if c.Arch == "glm4" || c.Arch == "chatglm" {
		add(p+"attn_qkv.bias", []uint64{q + 2*kv}, i, c.normal(p+"attn_qkv.bias", 0.1))
	}
	if c.Arch == "plamo3" {
		hd := uint64(c.HeadDim)
		add(p+"attn_q_norm.weight", []uint64{hd}, i, c.gain(p+"attn_q_norm.weight", 1, 0.2))
		add(p+"attn_k_norm.weight", []uint64{hd}, i, c.gain(p+"attn_k_norm.weight", 1, 0.2))
	}
	add(p+"attn_output.weight", []uint64{q, e}, i, c.normal(p+"attn_output.weight", c.Residual/math.Sqrt(float64(q))))
	postAttn, postFFN := "post_attention_norm.weight", "post_ffw_norm.weight"
	if c.Arch == "plamo3" { // llama.cpp 0.7.0 binds them without the suffix
		postAttn, postFFN = "post_attention_norm", "post_ffw_norm"
	}
	if glm {
		add(p+postAttn, []uint64{e}, i, c.gain(p+postAttn, c.Residual, 0.1*c.Residual))
	}
	add(p+"ffn_norm.weight", []uint64{e}, i, c.gain(p+"ffn_norm.weight", 1, 0.1))
	add(p+"ffn_up.weight", []uint64{e, 2 * ff}, i, c.normal(p+"ffn_up.weight", inv))
	add(p+"ffn_down.weight", []uint64{ff, e}, i, c.normal(p+"ffn_down.weight", c.Residual/math.Sqrt(float64(ff))))
	if glm {
		add(p+postFFN, []uint64{e}, i, c.gain(p+postFFN, c.Residual, 0.1*c.Residual))
	}
}

// phi3Factors adds LongRoPE's factors (after the output matrices, where
// the converter writes them): short ones near 1, long ones growing from 1
// to about Context/OrigContext over the pairs, as the real ones do.
func (c *Config) phi3Factors(add func(name string, shape []uint64, layer int, fill RowFunc)) {
	if c.OrigContext == 0 {
		return
	}
	pairs := uint64(c.ropeDims() / 2)
	s := float64(c.Context) / float64(c.OrigContext)
	add("rope_factors_long.weight", []uint64{pairs}, -1, func(_ int, dst []float32) {
		for j := range dst {
			dst[j] = float32(1 + (s-1)*float64(j)/float64(len(dst)))
		}
	})
	add("rope_factors_short.weight", []uint64{pairs}, -1, c.gain("rope_factors_short.weight", 1, 0.05))
}

// Phi-3.5-MoE (arch phimoe) is llama's block with biases on q, k, v and
// the attention's output, the norms and the output matrix (the
// checkpoint's LayerNorms, which llama.cpp runs as RMS norms plus the
// bias), softmax-routed experts of feed_forward_length, and phi3's RoPE
// (LongRoPE with OrigContext).

// normBias adds the bias of a norm (phimoe's; orion's, stablelm's,
// starcoder2's and phi2's LayerNorms').
func (c *Config) normBias(add func(name string, shape []uint64, layer int, fill RowFunc), name string, layer int) {
	if c.Arch == "phimoe" || c.Arch == "orion" || c.Arch == "stablelm" || c.geluMLP() || c.Arch == "falcon" || c.Arch == "nemotron" || c.Arch == "jais" || c.Arch == "jais2" || c.Arch == "rwkv7" || c.Arch == "rwkv6" {
		add(name, []uint64{uint64(c.Embd)}, layer, c.normal(name, 0.1))
	}
}
