package model

import "ppl.dev/score/ml"

// arctic: Snowflake Arctic (480B: 128 experts, 2 used), as llama.cpp 0.7.0
// runs it: llama's block (adjacent-pair RoPE) whose SwiGLU MLP is as wide
// as the model (the dense residual MLP), and beside the layer a mixture of
// softmax-routed experts (renormalized) of feed_forward_length that reads
// the layer's input normed by ffn_norm_exps, its output added to the
// residual stream after the MLP's.
func init() { Register("arctic", newArctic) }

func newArctic(l *Loader) Network {
	hp := l.HP
	moe := l.moeParams(moeOpts{gating: ml.GateSoftmax, norm: true, ffn: hp.FFN})
	if moe == nil {
		return nil
	}
	return l.bindLayers(l.baseDecoder(false), func(_ int, p string) decoderLayer {
		ly := l.preNormLayer(p, "ffn_norm")
		ly.ffn = l.DenseFFN(p, hp.Embd, hp.Embd)
		ly.resMoENorm = l.Norm(p+"ffn_norm_exps", hp.Embd)
		if e := l.MoE(p, moe); e != nil {
			ly.resMoE = e
		}
		return ly
	})
}
