package model

import (
	"cmp"

	"ppl.dev/score/nn"
)

func init() { Register("muse-glimmer", newMuseGlimmer) }

// museGlimmerPostEps is the epsilon of Muse Glimmer's post-norms, fixed
// in llama.cpp's graph whatever the file says.
const museGlimmerPostEps = 1e-8

// muse-glimmer: Muse Glimmer (30B), as llama.cpp 0.7.0 runs it: the token
// embeddings RMS-normed without a weight; llama's block with RMS norms
// before and after the attention and the FFN (post_attention_norm and
// post_ffw_norm of epsilon 1e-8); q and k RMS-normed per head
// (attn_q_norm, attn_k_norm) before RoPE over adjacent pairs; the layers
// attention.sliding_window_pattern flags (an array of one flag per layer,
// or a period, 4 when absent, each period's last layer global) attend to
// the last attention.sliding_window keys (required) with a plain RoPE of
// rope.freq_base_swa's base, the others globally **without** RoPE; the
// attention's output times sigmoid(attn_gate·h) per element before
// attn_output; a SwiGLU MLP; the logits times logit_scale (required),
// then soft-capped by final_logit_softcapping (30 when absent, llama.cpp's
// default); the output matrix required.
func newMuseGlimmer(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	err := m.require("attention.sliding_window", "logit_scale")
	window := 0
	if err == nil {
		window, err = m.positive("attention.sliding_window", -1)
	}
	var slides []bool
	if err == nil {
		slides, err = m.slidingLayers(hp.Layers, 4, false)
	}
	scale, softcap, baseSWA := 0.0, 0.0, 0.0
	if err == nil {
		scale, err = m.float("logit_scale", -1)
	}
	if err == nil {
		softcap, err = m.float("final_logit_softcapping", 30)
	}
	if err == nil {
		baseSWA, err = m.float("rope.freq_base_swa", 0)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	if scale == 0 {
		l.Failf("metadata %s.logit_scale is 0: every logit would be 0", hp.Arch)
		return nil
	}
	d := l.baseDecoder(false)
	if l.Err() != nil { // d.rope may be missing
		return nil
	}
	d.embNorm = l.ones("token_embd_norm", hp.Embd)
	d.postNormEps = museGlimmerPostEps
	d.head.Scale, d.head.SoftCap = scale, softcap
	local := d.attn
	local.Window = window
	// unscaled, but for rope.scaling.attn_factor, which llama.cpp passes on (probed)
	plain := &nn.RoPE{HeadDim: hp.HeadDim, Dims: d.rope.Dims, Base: cmp.Or(baseSWA, d.rope.Base), FreqScale: 1, AttnFactor: d.rope.AttnFactor}
	E, qd := hp.Embd, hp.Heads*hp.HeadDim
	return l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := l.preNormLayer(p, "ffn_norm")
		ly.postAttnNorm, ly.postFFNNorm = l.Norm(p+"post_attention_norm", E), l.Norm(p+"post_ffw_norm", E)
		ly.qNorm, ly.kNorm = l.qkNorms(p, false)
		ly.gate = l.Linear(p+"attn_gate", E, qd)
		if slides[i] {
			ly.attn, ly.rope = &local, plain
		} else {
			ly.noRoPE = true
		}
		ly.ffn = l.DenseFFN(p, E, hp.FFN)
		return ly
	})
}
