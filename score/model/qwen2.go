package model

import "ppl.dev/score/nn"

// qwen2: Qwen2 and Qwen2.5. The llama decoder with biases on the q, k and v
// projections (blk.N.attn_q.bias, ...) and RoPE in the NeoX layout (pairs
// i, i+d/2).
func init() { Register("qwen2", newQwen2) }

func newQwen2(l *Loader) Network {
	m := newLlama(l, true)
	for i, ly := range m.layers {
		for _, p := range []struct {
			name string
			lin  *nn.Linear
		}{{"attn_q", ly.q}, {"attn_k", ly.k}, {"attn_v", ly.v}} {
			if l.Err() == nil && p.lin.Bias == nil {
				l.Failf("missing tensor blk.%d.%s.bias", i, p.name)
			}
		}
	}
	return m
}
