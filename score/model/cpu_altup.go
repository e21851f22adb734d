package model

import (
	"fmt"
	"math"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// The CPU's ml.AltUp: nn's Gemma 3n operations per token, in float64
// rounded once, or in the int8 modes (nn.Context.LlamaCPP) as llama.cpp's
// graph rounds them (nn.GGMLMatchNorm, GGMLAltUpPredict, GGMLAltUpCorrect).

var _ ml.AltUp = (*cpuBackend)(nil)

func (b *cpuBackend) Tanh(x ml.Tensor) {
	d := ct(x)
	b.c.Parallel(d.rows, func(_, lo, hi int) { nn.Tanh(d.d[lo*d.cols : hi*d.cols]) })
}

func (b *cpuBackend) MulCols(dst, x ml.Tensor, w *ml.Vector) {
	d, s := ct(dst), ct(x)
	shape("column product", d, s.rows, s.cols)
	if len(w.V) != s.cols {
		panic(fmt.Sprintf("cpu backend: %s has %d values for %d columns", w.Name, len(w.V), s.cols))
	}
	b.c.Parallel(s.rows, func(_, lo, hi int) {
		for i := lo * s.cols; i < hi*s.cols; i++ {
			d.d[i] = s.d[i] * w.V[i%s.cols]
		}
	})
}

func (b *cpuBackend) MatchNorm(x, ref ml.Tensor) {
	d, r := ct(x), ct(ref)
	shape("match-norm reference", r, d.rows, d.cols)
	f := nn.MatchNorm
	if b.c.LlamaCPP {
		f = nn.GGMLMatchNorm
	}
	b.c.Parallel(d.rows, func(_, lo, hi int) {
		for t := lo; t < hi; t++ {
			f(d.d[t*d.cols:(t+1)*d.cols], r.d[t*d.cols:(t+1)*d.cols])
		}
	})
}

// streams returns token t's row of each of the A streams stacked in x.
func streams(x *cpuT, A, t int, rows [][]float32) [][]float32 {
	n := x.rows / A
	for k := range A {
		r := k*n + t
		rows[k] = x.d[r*x.cols : (r+1)*x.cols]
	}
	return rows
}

func (b *cpuBackend) AltUpPredict(dst, x, coef ml.Tensor) {
	d, s, c := ct(dst), ct(x), ct(coef)
	A := int(math.Sqrt(float64(c.cols)))
	if A*A != c.cols || s.rows != A*c.rows || d == s {
		panic(fmt.Sprintf("cpu backend: AltUp prediction of %d×%d streams by %d×%d coefficients", s.rows, s.cols, c.rows, c.cols))
	}
	shape("AltUp prediction", d, s.rows, s.cols)
	f := nn.AltUpPredict
	if b.c.LlamaCPP {
		f = nn.GGMLAltUpPredict
	}
	b.c.Parallel(c.rows, func(_, lo, hi int) {
		xs, ds := make([][]float32, A), make([][]float32, A)
		for t := lo; t < hi; t++ {
			f(streams(d, A, t, ds), streams(s, A, t, xs), c.d[t*c.cols:(t+1)*c.cols])
		}
	})
}

func (b *cpuBackend) AltUpCorrect(dst, pred, act, coef ml.Tensor, active int) {
	d, p, a, c := ct(dst), ct(pred), ct(act), ct(coef)
	A := c.cols
	if p.rows != A*c.rows || active < 0 || active >= A {
		panic(fmt.Sprintf("cpu backend: AltUp correction of %d×%d streams by %d×%d coefficients, active %d", p.rows, p.cols, c.rows, c.cols, active))
	}
	shape("AltUp correction", d, p.rows, p.cols)
	shape("AltUp active output", a, c.rows, p.cols)
	f := nn.AltUpCorrect
	if b.c.LlamaCPP {
		f = nn.GGMLAltUpCorrect
	}
	b.c.Parallel(c.rows, func(_, lo, hi int) {
		ps, ds := make([][]float32, A), make([][]float32, A)
		for t := lo; t < hi; t++ {
			f(streams(d, A, t, ds), streams(p, A, t, ps), a.d[t*a.cols:(t+1)*a.cols], c.d[t*c.cols:(t+1)*c.cols], active)
		}
	})
}
