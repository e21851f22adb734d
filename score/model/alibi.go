package model

import (
	"fmt"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// The architectures whose attention has no positions but ALiBi's linear
// bias (ml.Attn.Slopes; nn.ALiBiSlopes), as llama.cpp 0.7.0 runs them:
// bloom, mpt, refact, jais, and baichuan at 40 layers (newBaichuan).
func init() {
	Register("bloom", newBloom)
	Register("mpt", newMPT)
	Register("refact", newRefact)
	Register("jais", newJais)
}

// alibi gives every layer of d no RoPE and, when maxBias > 0, ALiBi's
// slopes for it; false after an error (nothing bound).
func (l *Loader) alibi(d *decoder, maxBias float64) bool {
	if l.Err() != nil {
		return false
	}
	if maxBias > 0 {
		l.alibiBias = maxBias
		d.attn.Slopes = l.constVector("alibi slopes", nn.ALiBiSlopes(l.HP.Heads, float32(maxBias)))
	}
	for i := range d.layers {
		d.layers[i].noRoPE = true
	}
	return true
}

// maxALiBiBias reads attention.max_alibi_bias: 0 when absent, as llama.cpp
// 0.7.0 reads it (mpt and jais then attend without ALiBi, and without
// positions unless mpt's position_embd gives them); -1 after an error.
func (l *Loader) maxALiBiBias() float64 {
	m := meta{l.f, l.HP.Arch}
	b, err := m.float("attention.max_alibi_bias", 0)
	if err == nil && (b < 0 || b > 1e4) {
		err = fmt.Errorf("metadata %s.attention.max_alibi_bias = %v, want 0 to 1e4", l.HP.Arch, b)
	}
	if err != nil {
		l.fail(err)
		return -1
	}
	return b
}

// alibiNetwork is d bound with ALiBi's slopes for maxBias, as an
// lnDecoder when layerNorm; nil after an error.
func (l *Loader) alibiNetwork(net Network, d *decoder, maxBias float64) Network {
	if net == nil || !l.alibi(d, maxBias) {
		return nil
	}
	if d.layerNorm != 0 {
		return lnDecoder{d}
	}
	return d
}

// bloom: BigScience's BLOOM (560M to 176B) and its descendants, as
// llama.cpp 0.7.0 runs them: the token embeddings LayerNormed
// (token_embd_norm, its bias required) before the first layer;
// starcoder2's LayerNorms, biases and ungated GELU MLP; q, k and v in
// attn_qkv with its bias (required); ALiBi with a maximum bias of 8
// (llama.cpp's fixed value; the file has no key for it); the output
// matrix, or the token embedding.
func newBloom(l *Loader) Network {
	hp := l.HP
	eps := l.layerNormEps()
	if eps == 0 {
		return nil
	}
	d := l.baseDecoder(false)
	d.embNorm, d.embNormB = l.Norm("token_embd_norm", hp.Embd), l.Vector("token_embd_norm.bias", hp.Embd)
	net := l.lnLayers(ml.GELU, true, d, eps, l.biasedQKVLayer)
	return l.alibiNetwork(net, d, 8)
}

// mpt: MosaicML's MPT (7B, 30B and their fine-tunes), as llama.cpp 0.7.0
// runs them: LayerNorms (attention.layer_norm_epsilon), their biases, and
// those of attn_qkv, attn_output, ffn_up and ffn_down, where the file has
// them (MPT's no_bias leaves none); q, k and v in attn_qkv, clamped to ±
// attention.clamp_kqv where given; an ungated GELU MLP; ALiBi with
// attention.max_alibi_bias (maxALiBiBias); learned positions (position_embd)
// added to the token embeddings where the file has them; the output
// matrix, or the token embedding. Files with q/k LayerNorms (attn_q_norm)
// or AWQ's activation scales (ffn_act) are refused: llama.cpp's graph for
// them is not checked here.
func newMPT(l *Loader) Network {
	hp := l.HP
	eps := l.layerNormEps()
	if eps == 0 {
		return nil
	}
	clamp, err := meta{l.f, hp.Arch}.clampKQV(false)
	if err != nil {
		l.fail(err)
		return nil
	}
	maxBias := l.maxALiBiBias()
	for i := range hp.Layers {
		for _, t := range []string{"attn_q_norm", "ffn_act"} {
			if p := fmt.Sprintf("blk.%d.%s", i, t); l.Has(p+".weight") || l.Has(p+".scales") {
				l.Failf("tensor %s: MPT with %s is not supported", p, t)
				return nil
			}
		}
	}
	d := l.baseDecoder(false)
	if l.Has("position_embd.weight") && !l.learnedPositions(d) {
		return nil
	}
	d.layerNorm, d.clampQKV = eps, clamp
	d.outNormB = l.optVector("output_norm.bias", hp.Embd)
	net := l.bindLayers(d, func(_ int, p string) decoderLayer {
		ly := l.qkvAttn(p)
		ly.attnNormB = l.optVector(p+"attn_norm.bias", hp.Embd)
		ly.ffnNorm, ly.ffnNormB = l.Norm(p+"ffn_norm", hp.Embd), l.optVector(p+"ffn_norm.bias", hp.Embd)
		ly.ffn = &Dense{ml.MLP{Up: l.Linear(p+"ffn_up", hp.Embd, hp.FFN), Down: l.Linear(p+"ffn_down", hp.FFN, hp.Embd), Act: ml.GELU}}
		return ly
	})
	return l.alibiNetwork(net, d, maxBias)
}

// refact: Refact-1.6B, as llama.cpp 0.7.0 runs it: llama's block (RMS
// norms, q, k and v apart with their biases where the file has them, a
// SwiGLU MLP) with ALiBi of maximum bias 8 (llama.cpp's fixed value)
// instead of RoPE; the biases of the attention's output and the MLP
// llama.cpp loads and leaves unapplied, and so does ppl (probed); the
// output matrix, or the token embedding.
func newRefact(l *Loader) Network {
	d := l.unbiasedOutputs(newDecoder(l, decoderOpts{}), true)
	return l.alibiNetwork(d, d, 8)
}

// jais: Core42's Jais (1.3B to 70B, the ALiBi family), as llama.cpp 0.7.0
// runs it: starcoder2's LayerNorms with biases; q, k and v in attn_qkv
// with its bias; scores scaled by 1/head (muP), not 1/sqrt(head); a SwiGLU
// MLP whose three matrices have biases (required); ALiBi with
// attention.max_alibi_bias (maxALiBiBias); the output matrix required.
func newJais(l *Loader) Network {
	hp := l.HP
	eps := l.layerNormEps()
	if eps == 0 {
		return nil
	}
	maxBias := l.maxALiBiBias()
	d := l.baseDecoder(false)
	d.layerNorm, d.attn.Scale = eps, float64(1/float32(hp.HeadDim)) // 1.0f/float(n_embd_head)
	d.outNormB = l.Vector("output_norm.bias", hp.Embd)
	net := l.bindLayers(d, func(_ int, p string) decoderLayer {
		ly := l.biasedQKVLayer(p)
		ly.attnNormB = l.Vector(p+"attn_norm.bias", hp.Embd)
		ffn := l.DenseFFN(p, hp.Embd, hp.FFN)
		l.needBias(ly.o, ffn.Gate, ffn.Up, ffn.Down)
		ly.ffn = ffn
		return ly
	})
	return l.alibiNetwork(net, d, maxBias)
}

// optVector is Vector where the file has name, else nil.
func (l *Loader) optVector(name string, n int) *ml.Vector {
	if !l.Has(name) {
		return nil
	}
	return l.Vector(name, n)
}

// learnedPositions binds position_embd into d (gpt2, mpt): one row per
// position up to context_length, refusing a context past it; false after
// an error.
func (l *Loader) learnedPositions(d *decoder) bool {
	hp := l.HP
	if hp.CtxTrain <= 0 || l.Opts.Context > hp.CtxTrain {
		l.Failf("metadata %s.context_length = %d: windows of %d tokens need learned positions past it", hp.Arch, hp.CtxTrain, l.Opts.Context)
		return false
	}
	d.posEmbd = l.Linear("position_embd", hp.Embd, hp.CtxTrain)
	return d.posEmbd != nil
}
