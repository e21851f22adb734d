package model

import (
	"fmt"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// The CPU's ml.Gemma4: GatherCols is Recurrent's (cpu_recurrent.go); GLU
// runs the nn activations (float64, rounded once); AttentionShared is
// Attention without the store, since the CPU's Attention leaves the keys
// and values it stored in k and v as the cache gives them back.

var _ ml.Gemma4 = (*cpuBackend)(nil)

func (b *cpuBackend) GLU(dst, g, u ml.Tensor, act ml.Act) {
	d, gg, uu := ct(dst), ct(g), ct(u)
	shape("glu gate", gg, d.rows, d.cols)
	shape("glu up", uu, d.rows, d.cols)
	f := nn.SwiGLU
	switch act {
	case ml.SwiGLU:
	case ml.GeGLU:
		f = nn.GeGLU
	case ml.OAISwiGLU:
		f = nn.OAISwiGLU
	default:
		panic(fmt.Sprintf("cpu backend: activation %v", act))
	}
	b.c.Parallel(d.rows, func(_, lo, hi int) {
		c := d.cols
		f(d.d[lo*c:hi*c], gg.d[lo*c:hi*c], uu.d[lo*c:hi*c])
	})
}

func (b *cpuBackend) AttentionShared(dst, q, k, v ml.Tensor, src int, a *ml.Attn) {
	o, qq, kk, vv := ct(dst), ct(q), ct(k), ct(v)
	n := qq.rows
	shape("shared attention q", qq, n, a.Heads*a.HeadDim)
	shape("shared attention k", kk, n, a.KVHeads*a.HeadDim)
	shape("shared attention v", vv, n, a.KVHeads*a.HeadDim)
	shape("shared attention output", o, n, a.Heads*a.HeadDim)
	at := nn.Attention{Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: a.HeadDim, Scale: a.Scale, Window: a.Window}
	if a.Sinks != nil {
		at.Sinks = a.Sinks.V
	}
	at.Forward(b.c, o.d, qq.d, kk.d, vv.d, n)
}
