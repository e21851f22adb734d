package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// sinkhornRef is SinkhornMix's definition in float64: the affine map, a
// softmax over d for each s plus eps, the columns normalized, then iters-1
// times the rows and the columns.
func sinkhornRef(m []float64, S int, scale float64, base []float64, eps float64, iters int) []float64 {
	c := make([]float64, S*S)
	for s := range S {
		mx := math.Inf(-1)
		for d := range S {
			c[d+S*s] = m[d+S*s]*scale + base[d+S*s]
			mx = max(mx, c[d+S*s])
		}
		var z float64
		for d := range S {
			c[d+S*s] = math.Exp(c[d+S*s] - mx)
			z += c[d+S*s]
		}
		for d := range S {
			c[d+S*s] = c[d+S*s]/z + eps
		}
	}
	norm := func(rows bool) {
		for a := range S {
			sum := eps
			for b := range S {
				sum += c[sinkhornAt(a, b, S, rows)]
			}
			for b := range S {
				c[sinkhornAt(a, b, S, rows)] /= sum
			}
		}
	}
	norm(false)
	for range iters - 1 {
		norm(true)
		norm(false)
	}
	return c
}

// TestSinkhornMix: ggml's float32 Sinkhorn within 6e-7 (measured 3.3e-7) of the float64
// definition on random mixes, large ones (a softmax near one-hot), equal
// ones (the uniform matrix) and one iteration; after 20 iterations every
// column sums to 1 within 3e-6 and, but for the near one-hot softmaxes
// (slow to converge), every row within 1e-4.
func TestSinkhornMix(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	const S, cols, off = 4, 24, 8
	for _, c := range []struct {
		name  string
		scale float32
		iters int
		fill  func() float32
	}{
		{"random", 0.7, 20, func() float32 { return float32(r.NormFloat64()) }},
		{"large", 40, 20, func() float32 { return float32(r.NormFloat64()) }},
		{"equal", 1, 20, func() float32 { return 0.5 }},
		{"one iteration", 1.3, 1, func() float32 { return float32(r.NormFloat64()) }},
	} {
		const n = 50
		m, base := make([]float32, n*cols), make([]float32, S*S)
		for i := range m {
			m[i] = c.fill()
		}
		for i := range base {
			base[i] = c.fill() / 4
		}
		got := make([]float32, n*S*S)
		SinkhornMix(got, m, n, cols, off, S, c.scale, base, 1e-6, c.iters)
		for tk := range n {
			m64, b64 := make([]float64, S*S), make([]float64, S*S)
			for i := range m64 {
				m64[i], b64[i] = float64(m[tk*cols+off+i]), float64(base[i])
			}
			want := sinkhornRef(m64, S, float64(c.scale), b64, float64(float32(1e-6)), c.iters)
			row := got[tk*S*S : (tk+1)*S*S]
			for i, w := range want {
				if math.Abs(float64(row[i])-w) > 6e-7 || math.IsNaN(float64(row[i])) {
					t.Fatalf("%s: token %d element %d: %v, want %v", c.name, tk, i, row[i], w)
				}
			}
			if c.name == "equal" && math.Abs(float64(row[5])-0.25) > 1e-6 {
				t.Fatalf("equal mixes: %v, want 1/4", row[5])
			}
			for a := range S {
				var colSum, rowSum float64
				for b := range S {
					colSum += float64(row[sinkhornAt(a, b, S, false)])
					rowSum += float64(row[sinkhornAt(a, b, S, true)])
				}
				if c.iters == 20 && math.Abs(colSum-1) > 3e-6 || c.iters == 20 && c.name != "large" && math.Abs(rowSum-1) > 1e-4 {
					t.Fatalf("%s: token %d line %d: column sum %v, row sum %v", c.name, tk, a, colSum, rowSum)
				}
			}
		}
	}
}
