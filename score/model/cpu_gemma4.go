package model

import (
	"ppl.dev/score/ml"
)

// The CPU's ml.Gemma4: GatherCols is Recurrent's (cpu_recurrent.go); GLU
// runs the nn activations (cpuBackend.glu); AttentionShared is
// Attention without the store, since the CPU's Attention leaves the keys
// and values it stored in k and v as the cache gives them back.

var _ ml.Gemma4 = (*cpuBackend)(nil)

func (b *cpuBackend) GLU(dst, g, u ml.Tensor, act ml.Act) {
	d, gg, uu := ct(dst), ct(g), ct(u)
	shape("glu gate", gg, d.rows, d.cols)
	shape("glu up", uu, d.rows, d.cols)
	f := b.glu(act)
	b.c.Parallel(d.rows, func(_, lo, hi int) {
		c := d.cols
		f(d.d[lo*c:hi*c], gg.d[lo*c:hi*c], uu.d[lo*c:hi*c])
	})
}

func (b *cpuBackend) AttentionShared(dst, q, k, v ml.Tensor, src int, a *ml.Attn) {
	b.attend("shared attention", dst, q, k, v, -1, a)
}
