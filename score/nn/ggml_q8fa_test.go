package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// q8Round returns x's Q8_0 blocks (as quantQ80Generic quantizes them)
// decoded: d·q, each a float32 product.
func q8Round(x []float32) []float32 {
	q, d, xs := make([]byte, len(x)), make([]float32, len(x)/32), make([]int32, len(x)/16)
	quantQ80Generic(x, q, d, xs)
	out := make([]float32, len(x))
	for i := range x {
		out[i] = d[i/32] * float32(int8(q[i]))
	}
	return out
}

// TestGGMLQ8Attention: llama.cpp's flash attention over Q8_0 keys and
// values against causal attention in float64 over the same decoded keys
// and values and the Q8_0-rounded queries, with grouped heads, a window and
// a zero block, within 6e-7 (float32's roundings); and q8Block recovers
// every block's integers and scale exactly, a zero block's too.
func TestGGMLQ8Attention(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	const n, heads, kvh, hd = 40, 4, 2, 64
	for _, window := range []int{0, 9} {
		q, k, v := randVec(r, n*heads*hd), randVec(r, n*kvh*hd), randVec(r, n*kvh*hd)
		for i := range 32 {
			k[5*kvh*hd+i] = 0 // a zero block
		}
		kd, vd, qd := q8Round(k), q8Round(v), q8Round(q)
		a := &Attention{Heads: heads, KVHeads: kvh, HeadDim: hd, Scale: 0.125, Window: window, GGMLQ8: true}
		got := make([]float32, n*heads*hd)
		a.Forward(NewContext(2), got, q, kd, vd, n)
		var worst float64
		for i := range n {
			for h := range heads {
				g := h / (heads / kvh)
				first := 0
				if window > 0 {
					first = max(0, i-window+1)
				}
				s := make([]float64, i+1)
				m := math.Inf(-1)
				for j := first; j <= i; j++ {
					for d := range hd {
						s[j] += float64(qd[(i*heads+h)*hd+d]) * float64(kd[(j*kvh+g)*hd+d])
					}
					s[j] *= 0.125
					m = max(m, s[j])
				}
				var z float64
				for j := first; j <= i; j++ {
					s[j] = math.Exp(s[j] - m)
					z += s[j]
				}
				for d := range hd {
					var o float64
					for j := first; j <= i; j++ {
						o += s[j] * float64(vd[(j*kvh+g)*hd+d])
					}
					worst = max(worst, math.Abs(o/z-float64(got[(i*heads+h)*hd+d])))
				}
			}
		}
		if worst > 6e-7 { // measured 3.4e-7, 3.8e-7

			t.Fatalf("window %d: %g from float64", window, worst)
		}
	}
	x := randVec(r, 4*32)
	for i := range 32 {
		x[32+i] = 0
	}
	qq, d, xs := make([]byte, len(x)), make([]float32, 4), make([]int32, 8)
	quantQ80Generic(x, qq, d, xs)
	dec := q8Round(x)
	kq := make([]int8, 32)
	for b := range 4 {
		db := q8Block(kq, dec[32*b:32*b+32])
		for i := range 32 {
			if kq[i] != int8(qq[32*b+i]) || db != d[b] {
				t.Fatalf("block %d: q8Block %d and %v, want %d and %v", b, kq[i], db, int8(qq[32*b+i]), d[b])
			}
		}
	}
}
