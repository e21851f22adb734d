package model

import (
	"fmt"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// The CPU's ml.PLE: nn.PLEGate per token row, or in the int8 modes
// nn.GGMLPLEGate.
var _ ml.PLE = (*cpuBackend)(nil)

func (b *cpuBackend) PLEGate(dst, key, query ml.Tensor, scale float64) {
	d, k, q := ct(dst), ct(key), ct(query)
	shape("n-gram embeddings' query", q, k.rows, k.cols)
	if d.rows != k.rows || d.cols == 0 || k.cols%d.cols != 0 {
		panic(fmt.Sprintf("cpu backend: n-gram gate of %d×%d from %d×%d keys", d.rows, d.cols, k.rows, k.cols))
	}
	b.c.Parallel(d.rows, func(_, lo, hi int) {
		for t := lo; t < hi; t++ {
			out, kr, qr := d.d[t*d.cols:(t+1)*d.cols], k.d[t*k.cols:(t+1)*k.cols], q.d[t*k.cols:(t+1)*k.cols]
			if b.c.LlamaCPP {
				nn.GGMLPLEGate(out, kr, qr, float32(scale))
			} else {
				nn.PLEGate(out, kr, qr, scale)
			}
		}
	})
}
