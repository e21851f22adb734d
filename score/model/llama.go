package model

import (
	"fmt"
	"math"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// llama: Llama 2 and 3, Mistral, Mixtral and other "llama" GGUF files, and the
// variants that differ from it in a few options (qwen2, qwen3, qwen3moe:
// see decoderOpts; glm4moe, gpt-oss and mistral3 bind their own tensors
// into the same decoder). A pre-norm decoder: x += Attn(RMSNorm(x)); x +=
// FFN(RMSNorm(x)), with grouped-query attention, RoPE and a SwiGLU MLP (or
// a mixture of experts). The output head is output.weight, or the token
// embedding when tied.
func init() {
	Register("llama", func(l *Loader) Network {
		// A llama file with experts is Mixtral's layout: softmax routing,
		// the chosen weights renormalized, experts of feed_forward_length.
		n, err := meta{l.f, l.HP.Arch}.int("expert_count", 0)
		if err != nil {
			l.fail(err)
			return nil
		}
		if n > 0 {
			return newDecoder(l, decoderOpts{moe: &moeOpts{gating: ml.GateSoftmax, norm: true, ffn: l.HP.FFN}})
		}
		return newDecoder(l, decoderOpts{})
	})
	Register("qwen2", func(l *Loader) Network { return newDecoder(l, decoderOpts{neox: true, qkvBias: true}) })
	Register("qwen3", func(l *Loader) Network { return newDecoder(l, decoderOpts{neox: true, qkNorm: true}) })
	Register("qwen3moe", func(l *Loader) Network {
		return newDecoder(l, decoderOpts{neox: true, qkNorm: true, moe: &moeOpts{gating: ml.GateSoftmax, norm: true}})
	})
}

// decoderOpts are what the llama-style architectures add to llama:
//   - neox: RoPE in the NeoX layout (pairs i, i+d/2) instead of adjacent pairs;
//   - qkvBias: biases on q, k and v required (qwen2; optional elsewhere, as
//     llama.cpp binds them);
//   - qkNorm: an RMSNorm over each query and key head before RoPE
//     (blk.N.attn_q_norm, attn_k_norm; qwen3);
//   - moe: every layer's FFN is a mixture of experts (qwen3moe).
type decoderOpts struct {
	neox, qkvBias, qkNorm bool
	moe                   *moeOpts
}

type decoder struct {
	hp         HParams
	tokenEmbd  *ml.Matrix // token_embd: (vocab, embd), read by row
	layers     []decoderLayer
	outputNorm *ml.Vector // output_norm
	head       Head
	rope       *nn.RoPE
	attn       ml.Attn // every layer's, unless the layer has its own
	// scaleQ, when set, scales the queries after RoPE (mistral3's
	// attention temperature by position).
	scaleQ func(b ml.Backend, q ml.Tensor)
	// embScale and resScale, when not 0, multiply the token embeddings
	// and each attention and FFN output before it joins the residual
	// stream (granite's embedding_scale and residual_scale).
	embScale, resScale float64
}

type decoderLayer struct {
	// attnNorm and ffnNorm (blk.N.attn_norm, ffn_norm) norm the residual
	// stream for the attention and the FFN; nil, they read it as it is
	// (olmo2, exaone4).
	attnNorm, ffnNorm *ml.Vector
	q, k, v, o        *ml.Matrix // blk.N.attn_q, attn_k, attn_v, attn_output (+ optional .bias)
	// qNorm and kNorm (blk.N.attn_q_norm, attn_k_norm), when set, norm q
	// and k before RoPE: over each head (HeadDim values) or over the whole
	// row (the row's values: olmo2, minimax-m2).
	qNorm, kNorm *ml.Vector
	ffn          FFN
	attn         *ml.Attn // the layer's own attention options (gpt-oss: sinks, window), or nil
	// postAttnNorm and postFFNNorm, when set, norm the attention's and
	// the FFN's outputs before they join the residual stream (glm4:
	// post_attention_norm, post_ffw_norm).
	postAttnNorm, postFFNNorm *ml.Vector
	noRoPE                    bool // no positions in this layer's q and k (smollm3's NoPE layers)
}

func newDecoder(l *Loader, o decoderOpts) *decoder {
	hp := l.HP
	m := l.baseDecoder(o.neox)
	var moe *moeParams
	if o.moe != nil {
		moe = l.moeParams(*o.moe)
	}
	for i := range hp.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		ly := l.preNormLayer(p, "ffn_norm")
		if o.qkvBias {
			for _, b := range []struct {
				name string
				w    *ml.Matrix
			}{{"attn_q", ly.q}, {"attn_k", ly.k}, {"attn_v", ly.v}} {
				if l.Err() == nil && b.w.Bias == nil {
					l.Failf("missing tensor %s%s.bias", p, b.name)
				}
			}
		}
		if o.qkNorm {
			ly.qNorm, ly.kNorm = l.qkNorms(p, false)
		}
		if moe != nil {
			ly.ffn = l.MoE(p, moe)
		} else {
			ly.ffn = l.DenseFFN(p, hp.Embd, hp.FFN)
		}
		m.layers = append(m.layers, ly)
	}
	return m
}

// bindLayers appends layer(i, "blk.i.") to d for every layer and returns
// d, or nil after an error.
func (l *Loader) bindLayers(d *decoder, layer func(i int, p string) decoderLayer) Network {
	for i := range l.HP.Layers {
		d.layers = append(d.layers, layer(i, fmt.Sprintf("blk.%d.", i)))
	}
	if l.Err() != nil {
		return nil
	}
	return d
}

// qkNorms binds attn_q_norm and attn_k_norm: a head's values each, or, with
// rows, q's and k's whole rows.
func (l *Loader) qkNorms(p string, rows bool) (q, k *ml.Vector) {
	hp := l.HP
	qn, kn := hp.HeadDim, hp.HeadDim
	if rows {
		qn, kn = hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	}
	return l.Norm(p+"attn_q_norm", qn), l.Norm(p+"attn_k_norm", kn)
}

// postNormLayer binds a layer that norms outputs rather than inputs
// (olmo2, exaone4): attn_q, attn_k, attn_v and attn_output, q and k norms
// (per head, or with rows over whole rows), post_attention_norm, a SwiGLU
// MLP and post_ffw_norm.
func (l *Loader) postNormLayer(p string, rows bool) decoderLayer {
	hp := l.HP
	qd, kvd := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	ly := decoderLayer{
		q:            l.Linear(p+"attn_q", hp.Embd, qd),
		k:            l.Linear(p+"attn_k", hp.Embd, kvd),
		v:            l.Linear(p+"attn_v", hp.Embd, kvd),
		o:            l.Linear(p+"attn_output", qd, hp.Embd),
		postAttnNorm: l.Norm(p+"post_attention_norm", hp.Embd),
		ffn:          l.DenseFFN(p, hp.Embd, hp.FFN),
		postFFNNorm:  l.Norm(p+"post_ffw_norm", hp.Embd),
	}
	ly.qNorm, ly.kNorm = l.qkNorms(p, rows)
	return ly
}

// preNormLayer binds a llama layer's attention and norms: attn_norm,
// attn_q, attn_k and attn_v (each with its bias when the file has one),
// attn_output and the FFN's pre-norm called ffnNorm ("ffn_norm"; seed_oss
// names it post_attention_norm). The architecture binds the FFN.
func (l *Loader) preNormLayer(p, ffnNorm string) decoderLayer {
	hp := l.HP
	qd, kvd := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	return decoderLayer{
		attnNorm: l.Norm(p+"attn_norm", hp.Embd),
		q:        l.Linear(p+"attn_q", hp.Embd, qd),
		k:        l.Linear(p+"attn_k", hp.Embd, kvd),
		v:        l.Linear(p+"attn_v", hp.Embd, kvd),
		o:        l.Linear(p+"attn_output", qd, hp.Embd),
		ffnNorm:  l.Norm(p+ffnNorm, hp.Embd),
	}
}

// baseDecoder binds what every llama-style decoder has: the token
// embedding, the final norm, the output head (or the tied embedding), RoPE
// in the given layout and attention scaled by 1/sqrt(head size). The
// architecture binds its layers.
func (l *Loader) baseDecoder(neox bool) *decoder {
	hp := l.HP
	return &decoder{
		hp:         hp,
		tokenEmbd:  l.Linear("token_embd", hp.Embd, hp.Vocab),
		outputNorm: l.Norm("output_norm", hp.Embd),
		head:       Head{Output: l.LinearAlt(hp.Embd, hp.Vocab, "output", "token_embd")},
		rope:       l.RoPE(neox),
		attn:       ml.Attn{Heads: hp.Heads, KVHeads: hp.KVHeads, HeadDim: hp.HeadDim, Scale: 1 / math.Sqrt(float64(hp.HeadDim))},
	}
}

func (m *decoder) Head() *Head { return &m.head }

// normSpans RMS-norms each span of len(w.V) values of t's rows by w: each
// head of q or k, or the whole row.
func normSpans(b ml.Backend, t ml.Tensor, w *ml.Vector, eps float64) {
	if span := len(w.V); span != t.Cols() {
		t = b.View(t, t.Rows()*t.Cols()/span, span)
	}
	b.RMSNorm(t, t, w, eps)
}

func (m *decoder) Forward(b ml.Backend, tokens []int32) ml.Tensor {
	hp, n := m.hp, len(tokens)
	qd, kvd := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	x := b.Alloc(n, hp.Embd) // the residual stream
	b.Embed(x, m.tokenEmbd, tokens)
	if m.embScale != 0 {
		b.Scale(x, m.embScale)
	}
	for i := range m.layers {
		ly := &m.layers[i]
		mark := b.Mark()
		h := b.Alloc(n, hp.Embd)
		q, k, v := b.Alloc(n, qd), b.Alloc(n, kvd), b.Alloc(n, kvd)
		att := b.Alloc(n, qd)
		ff := b.Alloc(n, hp.Embd)

		// normed is the residual stream normed by w into h, or itself.
		normed := func(w *ml.Vector) ml.Tensor {
			if w == nil {
				return x
			}
			b.RMSNorm(h, x, w, hp.Eps)
			return h
		}
		b.Linears([]ml.Tensor{q, k, v}, normed(ly.attnNorm), []*ml.Matrix{ly.q, ly.k, ly.v})
		if ly.qNorm != nil {
			normSpans(b, q, ly.qNorm, hp.Eps)
			normSpans(b, k, ly.kNorm, hp.Eps)
		}
		if !ly.noRoPE {
			b.RoPE(q, hp.Heads, m.rope)
			b.RoPE(k, hp.KVHeads, m.rope)
		}
		if m.scaleQ != nil {
			m.scaleQ(b, q)
		}
		at := &m.attn
		if ly.attn != nil {
			at = ly.attn
		}
		b.Attention(att, q, k, v, i, at)
		b.Linear(h, att, ly.o)
		if ly.postAttnNorm != nil {
			b.RMSNorm(h, h, ly.postAttnNorm, hp.Eps)
		}
		if m.resScale != 0 {
			b.Scale(h, m.resScale)
		}
		b.Add(x, h)

		ly.ffn.Forward(b, ff, normed(ly.ffnNorm))
		if ly.postFFNNorm != nil {
			b.RMSNorm(ff, ff, ly.postFFNNorm, hp.Eps)
		}
		if m.resScale != 0 {
			b.Scale(ff, m.resScale)
		}
		b.Add(x, ff)
		b.Release(mark)
	}
	b.RMSNorm(x, x, m.outputNorm, hp.Eps)
	return x
}
