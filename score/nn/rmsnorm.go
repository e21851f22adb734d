package nn

import "math"

// RMSNorm scales each row to unit root-mean-square and multiplies it by a
// learned weight: y = x / sqrt(mean(x²) + Eps) · W.
type RMSNorm struct {
	Name string
	W    []float32 // one weight per element of a row
	Eps  float64
}

// Forward normalizes n rows: x (n, len(W)) -> out (n, len(W)). out may be x.
// The sum of squares, the scale and each product are float64; each output
// is rounded to float32 once.
func (m *RMSNorm) Forward(c *Context, out, x []float32, n int) {
	d := len(m.W)
	check(m.Name+" input", len(x), n*d)
	check(m.Name+" output", len(out), n*d)
	c.Parallel(n, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			xr := x[r*d : (r+1)*d]
			var ss float64
			for _, v := range xr {
				ss += float64(v) * float64(v)
			}
			scale := 1 / math.Sqrt(ss/float64(d)+m.Eps)
			or := out[r*d : (r+1)*d]
			for i, v := range xr {
				or[i] = float32(float64(v) * scale * float64(m.W[i]))
			}
		}
	})
}
