package model

import (
	"fmt"
	"math"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// gemma3: Gemma 3, as llama.cpp runs it (the oracle README's gemma3
// section). What differs from llama:
//   - the token embedding is multiplied by sqrt(n_embd);
//   - four RMSNorms per layer: the attention's and the FFN's outputs are
//     normed (post_attention_norm, post_ffw_norm) before they join the
//     residual, besides the usual pre-norms;
//   - q and k are RMS-normed per head (attn_q_norm, attn_k_norm), roped
//     in the NeoX layout, and q is then multiplied by 1/sqrt(head_dim)
//     (1/sqrt(n_embd/n_head) for the 62-layer 27B model, as llama.cpp
//     decides by the layer count), with a score scale of 1;
//   - the MLP is GeGLU (tanh GELU);
//   - layer i is sliding-window attention (attention.sliding_window keys)
//     when i % P < P-1, P = attention.sliding_window_pattern (6 when
//     absent), with its own RoPE base rope.freq_base_swa (10,000 when
//     absent) and no scaling; the other layers attend to the whole window
//     with rope.freq_base and the file's (linear) scaling;
//   - logits are soft-capped when final_logit_softcapping is set.
//
// gemma2 (Gemma 2) is the same block without the q/k norms, with the
// attention's scores soft-capped (attn_logit_softcapping, 50 when absent),
// every other layer sliding (the even ones: a pattern of 2) with the one
// RoPE of the file, the 46-layer 27B model's query scale by n_embd/n_head,
// and the logits soft-capped by final_logit_softcapping (30 when absent),
// as llama.cpp 0.7.0's defaults.
//
// gemma (Gemma 1: 2B, 7B, CodeGemma) is Gemma 2's block without the
// post-norms, the soft-caps and the sliding window: every layer global,
// the output always the token embedding.
//
// Norm weights are used as stored (the converter folds Gemma's "+1" in).
func init() {
	Register("gemma3", newGemma3)
	Register("gemma2", newGemma2)
	Register("gemma", newGemma1)
}

type gemma3 struct {
	hp        HParams
	tokenEmbd *ml.Matrix
	embdScale float64 // sqrt(n_embd), as a float32
	qScale    float64 // query pre-scale
	layers    []gemma3Layer
	outNorm   *ml.Vector
	head      Head
}

type gemma3Layer struct {
	attnNorm, qNorm, kNorm, postAttnNorm *ml.Vector
	q, k, v, o                           *ml.Matrix
	ffnNorm, postFFNNorm                 *ml.Vector
	mlp                                  ml.MLP
	rope                                 *nn.RoPE // the global or the sliding RoPE
	attn                                 ml.Attn
}

// gemmaVariant is what tells Gemma 2 and Gemma 3 apart.
type gemmaVariant struct {
	qkNorm    bool
	period    int     // sliding-window pattern; 0: the file's
	swaBase   bool    // the sliding layers have their own RoPE base
	attnCap   float64 // attn_logit_softcapping's default; 0: no soft-cap
	finalCap  float64 // final_logit_softcapping's default
	layers27B int     // the layer count of the model whose query scale is n_embd/n_head
	tied      bool    // the output is the token embedding, whatever the file holds
	gemma1    bool    // no post-norms, no sliding window (nor soft-caps: attnCap and finalCap 0)
}

func newGemma3(l *Loader) Network {
	return newGemma(l, gemmaVariant{qkNorm: true, swaBase: true, layers27B: 62})
}

func newGemma2(l *Loader) Network {
	return newGemma(l, gemmaVariant{period: 2, attnCap: 50, finalCap: 30, layers27B: 46, tied: true})
}

func newGemma1(l *Loader) Network {
	return newGemma(l, gemmaVariant{gemma1: true, tied: true})
}

func newGemma(l *Loader, gv gemmaVariant) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	var window int
	var err error
	if !gv.gemma1 {
		window, err = m.positive("attention.sliding_window", -1)
	}
	period := gv.period
	if err == nil && period == 0 && !gv.gemma1 {
		period, err = m.positive("attention.sliding_window_pattern", 6)
	}
	baseSWA := 0.0
	if err == nil && gv.swaBase {
		baseSWA, err = m.float("rope.freq_base_swa", 10000)
	}
	var softcap, attnCap float64
	if err == nil && !gv.gemma1 {
		softcap, err = m.softCap("final_logit_softcapping", gv.finalCap)
	}
	if err == nil && gv.attnCap > 0 {
		attnCap, err = m.softCap("attn_logit_softcapping", gv.attnCap)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	qd, kvd := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	g := &gemma3{
		hp:        hp,
		tokenEmbd: l.Linear("token_embd", hp.Embd, hp.Vocab),
		embdScale: float64(float32(math.Sqrt(float64(hp.Embd)))),
		qScale:    float64(nn.InvSqrtf(hp.HeadDim)),
		outNorm:   l.Norm("output_norm", hp.Embd),
		head:      Head{SoftCap: softcap},
	}
	if gv.tied { // llama.cpp's gemma2 reads no output matrix
		g.head.Output = g.tokenEmbd
	} else {
		g.head.Output = l.LinearAlt(hp.Embd, hp.Vocab, "output", "token_embd")
	}
	if hp.Layers == gv.layers27B { // llama.cpp's LLM_TYPE_27B
		g.qScale = float64(nn.InvSqrtf(hp.Embd / hp.Heads))
	}
	global := l.RoPE(true)
	if global == nil {
		return nil
	}
	local := global
	if !gv.swaBase {
		local = l.swaRoPE(global) // gemma2: its sliding layers scaled as the others
	} else {
		local = global.Sliding(baseSWA)
		if err := local.Validate(); err != nil {
			l.Failf("sliding layers (%s.rope.freq_base_swa): %v", hp.Arch, err)
			return nil
		}
	}
	for i := range hp.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		ly := gemma3Layer{
			attnNorm: l.Norm(p+"attn_norm", hp.Embd),
			q:        l.Linear(p+"attn_q", hp.Embd, qd),
			k:        l.Linear(p+"attn_k", hp.Embd, kvd),
			v:        l.Linear(p+"attn_v", hp.Embd, kvd),
			o:        l.Linear(p+"attn_output", qd, hp.Embd),
			ffnNorm:  l.Norm(p+"ffn_norm", hp.Embd),
			rope:     global,
			attn:     ml.Attn{Heads: hp.Heads, KVHeads: hp.KVHeads, HeadDim: hp.HeadDim, Scale: 1, SoftCap: attnCap},
		}
		if !gv.gemma1 {
			ly.postAttnNorm, ly.postFFNNorm = l.Norm(p+"post_attention_norm", hp.Embd), l.Norm(p+"post_ffw_norm", hp.Embd)
		}
		if gv.qkNorm {
			ly.qNorm, ly.kNorm = l.Norm(p+"attn_q_norm", hp.HeadDim), l.Norm(p+"attn_k_norm", hp.HeadDim)
		}
		ly.mlp = l.DenseFFN(p, hp.Embd, hp.FFN).MLP
		ly.mlp.Act = ml.GeGLU
		if !gv.gemma1 && i%period < period-1 {
			ly.rope, ly.attn.Window = local, window
		}
		g.layers = append(g.layers, ly)
	}
	return g
}

func (g *gemma3) Head() *Head { return &g.head }

func (g *gemma3) Forward(b ml.Backend, tokens []int32) ml.Tensor {
	hp, n := g.hp, len(tokens)
	qd, kvd := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	x := b.Alloc(n, hp.Embd) // the residual stream
	b.Embed(x, g.tokenEmbd, tokens)
	b.Scale(x, g.embdScale)
	for i := range g.layers {
		ly := &g.layers[i]
		mark := b.Mark()
		h := b.Alloc(n, hp.Embd)
		q, k, v := b.Alloc(n, qd), b.Alloc(n, kvd), b.Alloc(n, kvd)
		att := b.Alloc(n, qd)

		b.RMSNorm(h, x, ly.attnNorm, hp.Eps)
		b.Linears([]ml.Tensor{q, k, v}, h, []*ml.Matrix{ly.q, ly.k, ly.v})
		if ly.qNorm != nil {
			qh, kh := b.View(q, n*hp.Heads, hp.HeadDim), b.View(k, n*hp.KVHeads, hp.HeadDim)
			b.RMSNorm(qh, qh, ly.qNorm, hp.Eps)
			b.RMSNorm(kh, kh, ly.kNorm, hp.Eps)
		}
		b.RoPE(q, hp.Heads, ly.rope)
		b.RoPE(k, hp.KVHeads, ly.rope)
		b.Scale(q, g.qScale)
		b.Attention(att, q, k, v, i, &ly.attn)
		b.Linear(h, att, ly.o)
		if ly.postAttnNorm != nil {
			b.RMSNorm(h, h, ly.postAttnNorm, hp.Eps)
		}
		b.Add(x, h)

		b.RMSNorm(h, x, ly.ffnNorm, hp.Eps)
		ff := b.Alloc(n, hp.Embd)
		b.MLP(ff, h, &ly.mlp)
		if ly.postFFNNorm != nil {
			b.RMSNorm(ff, ff, ly.postFFNNorm, hp.Eps)
		}
		b.Add(x, ff)
		b.Release(mark)
	}
	b.RMSNorm(x, x, g.outNorm, hp.Eps)
	return x
}
