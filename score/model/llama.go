package model

import (
	"fmt"
	"math"

	"ppl.dev/score/nn"
)

// llama: Llama 2 and 3, Mistral and other "llama" GGUF files. A pre-norm
// decoder: x += Attn(RMSNorm(x)); x += MLP(RMSNorm(x)), with grouped-query
// attention, RoPE in the normal (interleaved pairs) layout and a SwiGLU MLP.
// The output head is output.weight, or the token embedding when tied.
func init() { Register("llama", func(l *Loader) Network { return newLlama(l, false) }) }

type llama struct {
	hp         HParams
	tokenEmbd  *nn.Linear // token_embd: (vocab, embd), read by row
	layers     []llamaLayer
	outputNorm *nn.RMSNorm // output_norm
	output     *nn.Linear  // output, or token_embd when tied
	rope       *nn.RoPE
	attn       nn.Attention
}

type llamaLayer struct {
	attnNorm   *nn.RMSNorm // blk.N.attn_norm
	q, k, v, o *nn.Linear  // blk.N.attn_q, attn_k, attn_v, attn_output (+ optional .bias)
	ffnNorm    *nn.RMSNorm // blk.N.ffn_norm
	mlp        nn.MLP      // blk.N.ffn_gate, ffn_up, ffn_down
}

// newLlama binds a llama-style decoder; neox selects the RoPE layout for
// architectures (qwen2) that differ from llama only there.
func newLlama(l *Loader, neox bool) *llama {
	hp := l.HP
	qd, kvd := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	m := &llama{
		hp:         hp,
		tokenEmbd:  l.Linear("token_embd", hp.Embd, hp.Vocab),
		outputNorm: l.Norm("output_norm", hp.Embd),
		output:     l.LinearAlt(hp.Embd, hp.Vocab, "output", "token_embd"),
		rope:       l.RoPE(neox),
		attn:       nn.Attention{Heads: hp.Heads, KVHeads: hp.KVHeads, HeadDim: hp.HeadDim, Scale: 1 / math.Sqrt(float64(hp.HeadDim))},
	}
	for i := range hp.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		m.layers = append(m.layers, llamaLayer{
			attnNorm: l.Norm(p+"attn_norm", hp.Embd),
			q:        l.Linear(p+"attn_q", hp.Embd, qd),
			k:        l.Linear(p+"attn_k", hp.Embd, kvd),
			v:        l.Linear(p+"attn_v", hp.Embd, kvd),
			o:        l.Linear(p+"attn_output", qd, hp.Embd),
			ffnNorm:  l.Norm(p+"ffn_norm", hp.Embd),
			mlp: nn.MLP{
				Gate: l.Linear(p+"ffn_gate", hp.Embd, hp.FFN),
				Up:   l.Linear(p+"ffn_up", hp.Embd, hp.FFN),
				Down: l.Linear(p+"ffn_down", hp.FFN, hp.Embd),
			},
		})
	}
	return m
}

func (m *llama) Output() *nn.Linear { return m.output }

func (m *llama) Forward(c *nn.Context, tokens []int32) []float32 {
	hp, n := m.hp, len(tokens)
	qd, kvd := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	x := c.Alloc(n * hp.Embd) // the residual stream
	m.tokenEmbd.Lookup(c, x, tokens)
	for i := range m.layers {
		ly := &m.layers[i]
		mark := c.Mark()
		h := c.Alloc(n * hp.Embd)
		q, k, v := c.Alloc(n*qd), c.Alloc(n*kvd), c.Alloc(n*kvd)
		att := c.Alloc(n * qd)
		ff := c.Alloc(n * hp.Embd)

		ly.attnNorm.Forward(c, h, x, n)
		nn.ForwardShared(c, h, n, []*nn.Linear{ly.q, ly.k, ly.v}, [][]float32{q, k, v})
		m.rope.Forward(c, q, n, hp.Heads)
		m.rope.Forward(c, k, n, hp.KVHeads)
		c.StoreKV(i, k, v, n, hp.KVHeads, hp.HeadDim)
		m.attn.Forward(c, att, q, k, v, n)
		ly.o.Forward(c, h, att, n)
		nn.Add(x, h)

		ly.ffnNorm.Forward(c, h, x, n)
		ly.mlp.Forward(c, ff, h, n)
		nn.Add(x, ff)
		c.Release(mark)
	}
	m.outputNorm.Forward(c, x, x, n)
	return x
}
