package model

import (
	"fmt"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// The CPU's ml.AttnRes: nn.ResMix per token row, or in the int8 modes
// nn.GGMLResMix.
var _ ml.AttnRes = (*cpuBackend)(nil)

func (b *cpuBackend) ResMix(dst, ckpts, cur ml.Tensor, w *ml.Vector, eps float64) {
	d, s, c := ct(dst), ct(ckpts), ct(cur)
	shape("residual-attention input", c, d.rows, d.cols)
	if d.rows == 0 || s.cols != d.cols || s.rows%d.rows != 0 || s.rows == 0 || len(w.V) != d.cols {
		panic(fmt.Sprintf("cpu backend: residual attention of %d×%d checkpoints and %d×%d rows scored by %d weights (%s)", s.rows, s.cols, d.rows, d.cols, len(w.V), w.Name))
	}
	C, n, E := s.rows/d.rows, d.rows, d.cols
	b.c.Parallel(n, func(_, lo, hi int) {
		rows := make([][]float32, C)
		tmp := make([]float32, E)
		for t := lo; t < hi; t++ {
			for i := range rows {
				r := i*n + t
				rows[i] = s.d[r*E : (r+1)*E]
			}
			out, x := d.d[t*E:(t+1)*E], c.d[t*E:(t+1)*E]
			if b.c.LlamaCPP {
				nn.GGMLResMix(out, rows, x, w.V, tmp, float32(eps), b.c.GGMLAVX2)
			} else {
				nn.ResMix(out, rows, x, w.V, eps)
			}
		}
	})
}
