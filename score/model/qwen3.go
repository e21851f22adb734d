package model

import (
	"fmt"

	"ppl.dev/score/nn"
)

// qwen3: Qwen3 dense models. The llama decoder with an RMSNorm over each
// query and key head before RoPE (blk.N.attn_q_norm, attn_k_norm), a head
// size of its own (attention.key_length, not embedding_length/head_count),
// no biases, and RoPE in the NeoX layout.
func init() { Register("qwen3", newQwen3) }

type qwen3 struct {
	*llama
	qNorm, kNorm []*nn.RMSNorm // per layer, over HeadDim elements
}

func newQwen3(l *Loader) Network {
	m := &qwen3{llama: newLlama(l, true)}
	for i := range l.HP.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		m.qNorm = append(m.qNorm, l.Norm(p+"attn_q_norm", l.HP.HeadDim))
		m.kNorm = append(m.kNorm, l.Norm(p+"attn_k_norm", l.HP.HeadDim))
	}
	return m
}

func (m *qwen3) Forward(c *nn.Context, tokens []int32) []float32 {
	hp, n := m.hp, len(tokens)
	qd, kvd := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	x := c.Alloc(n * hp.Embd)
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
		m.qNorm[i].Forward(c, q, q, n*hp.Heads) // one row per head
		m.kNorm[i].Forward(c, k, k, n*hp.KVHeads)
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
