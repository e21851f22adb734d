package nn

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
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
