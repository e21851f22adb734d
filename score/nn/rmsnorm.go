package nn

import (
	"cmp"
	"fmt"
	"math"
)

// RMSNorm scales each row to unit root-mean-square and multiplies it by a
// learned weight: y = x / sqrt(mean(x²) + Eps) · W.
type RMSNorm struct {
	Name string
	W    []float32 // one weight per element of a row, or of several (Cols)
	Eps  float64
	// Cols, when not 0, is a row's length, and W holds len(W)/Cols rows of
	// weights, row r of the input taking weight row r mod len(W)/Cols
	// (PLaMo-2's q and k norms with a weight row per head, heads as rows).
	Cols int
}

// Forward normalizes n rows: x (n, d) -> out (n, d), d = Cols, or len(W).
// out may be x. The sum of squares, the scale and each product are
// float64; each output is rounded to float32 once (rmsRow). With
// Context.LlamaCPP it is llama.cpp's float32 sequence instead
// (ggmlRMSRow: RMS_NORM, then MUL by the weights broadcast over rows).
func (m *RMSNorm) Forward(c *Context, out, x []float32, n int) {
	d := cmp.Or(m.Cols, len(m.W))
	if d == 0 || len(m.W)%d != 0 {
		panic(fmt.Sprintf("nn: %s: %d weights for rows of %d", m.Name, len(m.W), d))
	}
	parts := len(m.W) / d
	check(m.Name+" input", len(x), n*d)
	check(m.Name+" output", len(out), n*d)
	c.Parallel(n, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			w := m.W[r%parts*d : (r%parts+1)*d]
			if c.LlamaCPP {
				ggmlRMSRow(out[r*d:(r+1)*d], x[r*d:(r+1)*d], w, float32(m.Eps))
				continue
			}
			rmsRow(out[r*d:(r+1)*d], x[r*d:(r+1)*d], w, m.Eps)
		}
	})
}

// rmsRow normalizes one row. The squares are summed in float64 in 16
// lanes (element i in lane i mod 16), folded as in ExpSum, then the tail
// past the last multiple of 16 is added in order; each output is
// float32((x·scale)·w) in float64. The vector kernels do the same.
func rmsRow(out, x, w []float32, eps float64) {
	d := len(w)
	n16 := d &^ 15
	var ss float64
	if f := kern.sumSquares; f != nil && n16 > 0 {
		ss = f(&x[0], n16)
	} else {
		var acc [16]float64
		for i := 0; i < n16; i += 16 {
			for j := range 16 {
				v := float64(x[i+j])
				acc[j] += float64(v * v) // exact square: the same as a fused multiply-add
			}
		}
		for j := range 8 {
			acc[j] += acc[j+8]
		}
		for j := range 4 {
			acc[j] += acc[j+4]
		}
		acc[0] += acc[2]
		acc[1] += acc[3]
		ss = acc[0] + acc[1]
	}
	for _, v := range x[n16:d] {
		ss += float64(float64(v) * float64(v))
	}
	scale := 1 / math.Sqrt(ss/float64(d)+eps)
	i := 0
	if f := kern.scaleRow; f != nil && d >= 8 {
		i = d &^ 7
		f(&out[0], &x[0], &w[0], i, scale)
	}
	for ; i < d; i++ {
		out[i] = float32(float64(x[i]) * scale * float64(w[i]))
	}
}
