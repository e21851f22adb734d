package model

import (
	"math"

	"ppl.dev/score/ml"
)

// grok: xAI's Grok-1 (314B) and Grok-2, as llama.cpp 0.7.0 runs them: the
// token embeddings times embedding_scale; llama's attention (NeoX RoPE)
// whose scores are multiplied by attention.output_scale and soft-capped at
// attn_logit_softcapping, its output RMS-normed (attn_output_norm) before
// the residual; an FFN of softmax-routed experts (renormalized; GELU-gated:
// ggml's GEGLU), with Grok-2's dense GEGLU MLP of feed_forward_length
// (ffn_gate, ffn_up, ffn_down) beside them, the two summed and scaled by
// 1/sqrt(2), its output RMS-normed (layer_output_norm, or post_ffw_norm)
// before the residual; the logits times logit_scale, soft-capped at
// final_logit_softcapping when set. A key the file lacks takes llama.cpp's
// value for Grok-1 (embedding 78.38367176906169, attention
// 0.08838834764831845, soft-cap 30, logits 0.5773502691896257, no final
// soft-cap). llama.cpp 0.7.0 computes Grok's attention without flash
// attention whatever its setting (ml.Attn.MatMul), and ignores
// router_logit_softcapping.
func init() { Register("grok", newGrok) }

func newGrok(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	var err error
	getf := func(key string, def float64) float64 {
		v := def
		if err == nil {
			v, err = m.float(key, def)
		}
		return v
	}
	emb, attn := getf("embedding_scale", 78.38367176906169), getf("attention.output_scale", 0.08838834764831845)
	logit := getf("logit_scale", 0.5773502691896257)
	var attnCap, finalCap float64
	if err == nil {
		attnCap, err = m.softCap("attn_logit_softcapping", 30)
	}
	if err == nil {
		finalCap, err = m.softCap("final_logit_softcapping", 0)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	moe := l.moeParams(moeOpts{gating: ml.GateSoftmax, norm: true, ffn: hp.FFN})
	if moe == nil {
		return nil
	}
	d := l.baseDecoder(true)
	d.embScale = float64(float32(emb))
	d.attn.Scale, d.attn.SoftCap, d.attn.MatMul = float64(float32(attn)), attnCap, true
	d.head.Scale, d.head.SoftCap = float64(float32(logit)), finalCap
	return l.bindLayers(d, func(_ int, p string) decoderLayer {
		ly := l.preNormLayer(p, "ffn_norm")
		ly.postAttnNorm = l.Norm(p+"attn_output_norm", hp.Embd)
		post := p + "layer_output_norm"
		if !l.Has(post+".weight") && l.Has(p+"post_ffw_norm.weight") {
			post = p + "post_ffw_norm"
		}
		ly.postFFNNorm = l.Norm(post, hp.Embd)
		e := l.MoE(p, moe)
		if e == nil {
			return ly
		}
		e.Experts.Act = ml.GeGLU
		ly.ffn = e
		if l.Has(p + "ffn_up.weight") { // Grok-2's dense MLP beside the experts
			e.Shared = &ml.MLP{Gate: l.Linear(p+"ffn_gate", hp.Embd, hp.FFN), Up: l.Linear(p+"ffn_up", hp.Embd, hp.FFN),
				Down: l.Linear(p+"ffn_down", hp.FFN, hp.Embd), Act: ml.GeGLU}
			ly.ffn = scaledFFN{e, float64(float32(math.Sqrt2 / 2))}
		}
		return ly
	})
}
