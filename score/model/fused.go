package model

import "ppl.dev/score/ml"

// fusedLayers binds the layers of a decoder whose files fuse projections
// (phi3, glm4): attn_norm, q, k and v (qkv), attn_output, ffn_norm and a
// SwiGLU MLP of fused gate and up rows; with postNorms also glm4's
// post_attention_norm and post_ffw_norm. It returns d, or nil after an
// error.
func (l *Loader) fusedLayers(d *decoder, postNorms bool) Network {
	hp := l.HP
	qd, kvd := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	return l.bindLayers(d, func(_ int, p string) decoderLayer {
		ly := decoderLayer{
			attnNorm: l.Norm(p+"attn_norm", hp.Embd),
			o:        l.Linear(p+"attn_output", qd, hp.Embd),
			ffnNorm:  l.Norm(p+"ffn_norm", hp.Embd),
		}
		if postNorms {
			ly.postAttnNorm = l.Norm(p+"post_attention_norm", hp.Embd)
			ly.postFFNNorm = l.Norm(p+"post_ffw_norm", hp.Embd)
		}
		ly.q, ly.k, ly.v = l.qkv(p, qd, kvd, kvd)
		ly.ffn = l.fusedFFN(p, hp.Embd, hp.FFN)
		return ly
	})
}

// qkv binds a layer's q, k and v projections of qd, kd and vd rows: the
// rows of prefix+"attn_qkv" ([q | k | v], with its bias) when the file
// fuses them, else attn_q, attn_k and attn_v.
func (l *Loader) qkv(prefix string, qd, kd, vd int) (q, k, v *ml.Matrix) {
	in := l.HP.Embd
	if !l.Has(prefix + "attn_qkv.weight") {
		return l.Linear(prefix+"attn_q", in, qd), l.Linear(prefix+"attn_k", in, kd), l.Linear(prefix+"attn_v", in, vd)
	}
	if m := l.LinearRows(prefix+"attn_qkv", in, qd, kd, vd); m != nil {
		return m[0], m[1], m[2]
	}
	return nil, nil, nil
}

// fusedFFN binds a SwiGLU MLP whose gate and up rows share prefix+
// "ffn_up" ([gate | up], 2·ff rows: ggml's swiglu of the fused product
// takes silu of the first half times the second).
func (l *Loader) fusedFFN(prefix string, embd, ff int) FFN {
	gu := l.LinearRows(prefix+"ffn_up", embd, ff, ff)
	if gu == nil {
		return nil
	}
	return &Dense{ml.MLP{Gate: gu[0], Up: gu[1], Down: l.Linear(prefix+"ffn_down", ff, embd)}}
}
