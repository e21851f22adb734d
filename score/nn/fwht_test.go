package nn

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// FWHT against HadamardMatrix's product in float64 (the exact rotation of
// the same inputs): sizes 64 to 512, normal rows, rows of one spike, of
// values 2^±100 apart, zeros, an infinity. The butterflies round
// log2(n) times and the first scaling once: measured worst 3.1e-8 of a
// row's norm (n 64 and 128), held to 4e-8. FWHT twice gives the input
// back.
func TestFWHT(t *testing.T) {
	rng := rand.New(rand.NewPCG(80, 1))
	c := NewContext(2)
	for _, n := range []int{64, 128, 256, 512} {
		const rows = 6
		x := make([]float32, rows*n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		x[n+7] = 1e4       // row 1: a spike over normal values
		for j := range n { // row 2: values 2^±100 apart
			x[2*n+j] = float32(math.Ldexp(1, 100*(j%3-1))) * float32(1+rng.IntN(7))
		}
		clear(x[3*n : 4*n])             // row 3: zeros
		x[4*n+3] = float32(math.Inf(1)) // row 4: +Inf (every output ±Inf)
		got := make([]float32, len(x))
		FWHT(c, got, x, rows, n)
		h := HadamardMatrix(n)
		worst := 0.0
		for r := range rows {
			var norm float64
			for _, v := range x[r*n : (r+1)*n] {
				norm += float64(v) * float64(v)
			}
			norm = math.Sqrt(norm)
			for i := range n {
				var want float64
				for j := range n {
					w := math.Float32frombits(binary.LittleEndian.Uint32(h.Data[4*(i*n+j):]))
					want += float64(w) * float64(x[r*n+j])
				}
				g := float64(got[r*n+i])
				if math.IsInf(norm, 0) {
					if !math.IsInf(g, 0) {
						t.Fatalf("n %d row %d output %d: %g, want ±Inf", n, r, i, g)
					}
					continue
				}
				if norm == 0 {
					if g != 0 {
						t.Fatalf("n %d row %d output %d: %g, want 0", n, r, i, g)
					}
					continue
				}
				worst = max(worst, math.Abs(g-want)/norm)
			}
		}
		back := make([]float32, len(x))
		FWHT(c, back, got, rows, n)
		for i, v := range x[:n] {
			if d := math.Abs(float64(back[i] - v)); d > 1e-6*math.Abs(float64(v))+2e-6 {
				t.Fatalf("n %d: FWHT twice: value %d %g, want %g", n, i, back[i], v)
			}
		}
		t.Logf("n %d: worst error %.3g of a row's norm", n, worst)
		if bound := 4e-8; worst > bound {
			t.Errorf("n %d: worst error %.3g of a row's norm, want at most %.3g", n, worst, bound)
		}
	}
}

// FWHTHeads on heads padded past their width (values of 64 and 128 in
// heads of 96 and 192, a head the whole row) gives FWHT's bits on the
// width's blocks and the rest of each row as it was, out of place and in
// place.
func TestFWHTHeads(t *testing.T) {
	rng := rand.New(rand.NewPCG(82, 1))
	c := NewContext(2)
	for _, s := range []struct{ stride, width, n int }{{96, 64, 64}, {192, 128, 64}, {128, 128, 64}, {320, 256, 128}} {
		const heads = 7
		x := make([]float32, heads*s.stride)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		compact := make([]float32, heads*s.width)
		for h := range heads {
			copy(compact[h*s.width:(h+1)*s.width], x[h*s.stride:])
		}
		want := make([]float32, len(compact))
		FWHT(c, want, compact, heads*s.width/s.n, s.n)
		out, in := make([]float32, len(x)), slices.Clone(x)
		FWHTHeads(c, out, x, heads, s.stride, s.width, s.n)
		FWHTHeads(c, in, in, heads, s.stride, s.width, s.n)
		for name, got := range map[string][]float32{"out of place": out, "in place": in} {
			for h := range heads {
				for j := range s.stride {
					w := x[h*s.stride+j]
					if j < s.width {
						w = want[h*s.width+j]
					}
					if g := got[h*s.stride+j]; math.Float32bits(g) != math.Float32bits(w) {
						t.Fatalf("%+v %s: head %d value %d %v, want %v", s, name, h, j, g, w)
					}
				}
			}
		}
	}
}
