package model

import (
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// phi3: Phi-3, Phi-3.5 and Phi-4 (mini and the 14B), as llama.cpp 0.7.0
// runs them. The block is llama's (newDecoder's forward pass), with:
//   - fused projections: attn_qkv holds [q | k | v] (or attn_q, attn_k and
//     attn_v are separate) and ffn_up holds [gate | up], 2·n_ff rows, for
//     SwiGLU(gate, up); each part is bound as its own rows (LinearRows);
//   - RoPE in the NeoX layout over rope.dimension_count dims (Phi-4-mini
//     rotates 3/4 of each head);
//   - q multiplied by float32(1/sqrt(head)) after RoPE, and attention
//     scores taken unscaled (llama.cpp's ggml_scale, then kq_scale 1);
//   - LongRoPE (Phi-3-*-128k, Phi-3.5, Phi-4-mini): frequency factors per
//     rotated pair, rope_factors_long when the context (Options.Context,
//     ppl-window's --context, rounded up to a multiple of 256 as
//     llama.cpp pads it) exceeds rope.scaling.original_context_length,
//     else rope_factors_short, and cos/sin scaled by
//     rope.scaling.attn_factor.
//
// llama.cpp ignores phi3.attention.sliding_window (its Phi SWA is
// disabled), and so do we.
func init() {
	Register("phi3", newPhi3)
	Register("phimoe", newPhiMoE)
}

func newPhi3(l *Loader) Network {
	return l.fusedLayers(l.phi3Decoder(), false)
}

// phi3Decoder is phi3's decoder without its layers: NeoX RoPE (LongRoPE
// when the file has its factors), q scaled after RoPE.
func (l *Loader) phi3Decoder() *decoder {
	d := l.baseDecoder(true)
	d.attn.Scale = 1 // q is scaled instead
	l.longRoPE(d.rope)
	scale := nn.InvSqrtf(l.HP.HeadDim)
	d.scaleQ = func(b ml.Backend, q ml.Tensor) { b.Scale(q, float64(scale)) }
	return d
}

// phimoe: Phi-3.5-MoE, as llama.cpp 0.7.0 runs it: phi3's decoder with
// separate attn_q, attn_k and attn_v, biases on them, on attn_output and
// on the output matrix, softmax-routed experts (top-k, renormalized) of
// feed_forward_length, and norms with biases: the checkpoint's LayerNorms,
// which llama.cpp computes as RMS norms times the weight plus the bias
// (build_norm's LLM_NORM_RMS), not as LayerNorms; we compute what
// llama.cpp does, so its number is ours (Hugging Face's LayerNorm gives
// another).
func newPhiMoE(l *Loader) Network {
	hp := l.HP
	moe := l.moeParams(moeOpts{gating: ml.GateSoftmax, norm: true, ffn: hp.FFN})
	if moe == nil {
		return nil
	}
	d := l.phi3Decoder()
	d.outNormB = l.Vector("output_norm.bias", hp.Embd)
	return l.bindLayers(d, func(_ int, p string) decoderLayer {
		ly := l.preNormLayer(p, "ffn_norm")
		ly.attnNormB = l.Vector(p+"attn_norm.bias", hp.Embd)
		ly.ffnNormB = l.Vector(p+"ffn_norm.bias", hp.Embd)
		ly.ffn = l.MoE(p, moe)
		return ly
	})
}

// longRoPE applies Phi-3's LongRoPE factors, when the file has them: the
// long ones when Options.Context exceeds the original context (llama.cpp's
// get_rope_factors: n_ctx_seq > n_ctx_orig_yarn), else the short ones.
func (l *Loader) longRoPE(r *nn.RoPE) {
	long, short := l.Has("rope_factors_long.weight"), l.Has("rope_factors_short.weight")
	if l.err != nil || !long && !short {
		return
	}
	if l.Has("rope_freqs.weight") {
		l.Failf("tensors rope_freqs and rope_factors_long/short: one set of RoPE factors, not both")
		return
	}
	orig, err := meta{l.f, l.HP.Arch}.int("rope.scaling.original_context_length", l.HP.CtxTrain)
	if err != nil {
		l.fail(err)
		return
	}
	// llama.cpp pads its context to a multiple of 256 (llama_context's
	// n_ctx), so windows of 128 tokens take the long factors of a model
	// whose original context is 200.
	ctx := (l.Opts.Context + 255) &^ 255
	name := "rope_factors_short"
	if ctx > orig {
		name = "rope_factors_long"
	}
	if !l.Has(name + ".weight") {
		l.Failf("missing tensor %s.weight (context %d, original context %d)", name, l.Opts.Context, orig)
		return
	}
	r.FreqFactors = l.floats(name+".weight", r.Dims/2)
	l.pass("rope_factors_long.weight", "rope_factors_short.weight") // llama.cpp loads both, reads one
	l.rinfo.FreqFactors, l.rinfo.Factors = true, name[len("rope_factors_"):]
}
