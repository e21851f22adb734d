package model

import (
	"fmt"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// The CPU's ml.MHC: nn.SinkhornMix over each worker's rows.
var _ ml.MHC = (*cpuBackend)(nil)

func (b *cpuBackend) SinkhornMix(dst, m ml.Tensor, S, off int, scale float32, base *ml.Vector, eps float32, iters int) {
	d, x := ct(dst), ct(m)
	if S < 1 || d.cols != S*S || x.rows != d.rows || off < 0 || off+S*S > x.cols || len(base.V) != S*S || iters < 1 {
		panic(fmt.Sprintf("cpu backend: Sinkhorn mix of %d streams, %d×%d, from %d×%d mixes at column %d, %d base values (%s), %d iterations", S, d.rows, d.cols, x.rows, x.cols, off, len(base.V), base.Name, iters))
	}
	w := S * S
	b.c.Parallel(d.rows, func(_, lo, hi int) {
		nn.SinkhornMix(d.d[lo*w:hi*w], x.d[lo*x.cols:hi*x.cols], hi-lo, x.cols, off, S, scale, base.V, eps, iters)
	})
}
