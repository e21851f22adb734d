package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestTanhCaps checks tanh64 against math.Tanh (relative error, measured
// 4.8e-16 on normal and tiny arguments), TanhCap against math.Tanh's
// float32 results (at most one ulp apart, and rarely), and TanhCaps at
// every level against TanhCap to the bit: every 251st float32 bit pattern
// (NaNs, infinities and subnormals among them) and the neighbours of 0,
// of tanh64's clamp and of its switch from k = 0, in both halves of a
// kernel's lanes and in the scalar tail, as logits capped at 30 (m = 1),
// attention scores (m = 1/16, cap 50), at a cap of 0.7, and as ggml's
// tanhf (m = c = 1: float32(math.Tanh), GGMLSoftCap's, which TanhCap
// equals on all 2^32 float32s, compared by hand).
func TestTanhCaps(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	worst := 0.0
	for i := range 2000000 {
		y := r.NormFloat64() * 4
		if i%4 == 0 {
			y = math.Ldexp(r.Float64(), -r.IntN(60))
		}
		if want := math.Tanh(y); want != 0 {
			worst = max(worst, math.Abs(tanh64(y)-want)/math.Abs(want))
		}
	}
	if worst > 6e-16 {
		t.Errorf("tanh64: worst relative error %.3g against math.Tanh, want at most 6e-16", worst)
	}
	for _, y := range []float64{0, math.Copysign(0, -1), 1e-300, 20, 21, math.Inf(1)} {
		for _, s := range []float64{1, -1} {
			if got, want := tanh64(s*y), math.Tanh(s*y); got != want || math.Signbit(got) != math.Signbit(want) {
				t.Errorf("tanh64(%v) = %v, math.Tanh %v", s*y, got, want)
			}
		}
	}
	if v := tanh64(math.NaN()); v == v {
		t.Errorf("tanh64(NaN) = %v", v)
	}

	var x []float32
	for u := uint64(0); u < 1<<32; u += 251 {
		x = append(x, math.Float32frombits(uint32(u)))
	}
	for _, b := range []float32{0, 1e-45, 0.0866, 0.1733, 0.17329, 10, 20, 21, 320, 1000} {
		for _, v := range []float32{b, -b} {
			u := math.Float32bits(v)
			for d := uint32(0); d < 9; d++ {
				x = append(x, math.Float32frombits(u-4+d))
			}
		}
	}
	x = append(x, 1, 2, 3) // a tail past the lanes of 8
	for _, mc := range [][2]float64{{1, 30}, {0.0625, 50}, {1, 0.7}, {1, 1}} {
		m, c := mc[0], mc[1]
		want := make([]float32, len(x))
		off := 0
		for i, v := range x {
			want[i] = TanhCap(v, m, c)
			if w := float32(c * math.Tanh(float64(v)*m/c)); math.Float32bits(w) != math.Float32bits(want[i]) && !(w != w && want[i] != want[i]) {
				off++
				if d := math.Abs(float64(w) - float64(want[i])); d > ulp32(w) {
					t.Fatalf("TanhCap(%v, %v, %v) = %v, math.Tanh's %v: more than one ulp", v, m, c, want[i], w)
				}
			}
		}
		if off > len(x)/100000 {
			t.Errorf("m %v c %v: %d of %d values a rounding off math.Tanh's", m, c, off, len(x))
		}
		forEachLevel(t, func(t testing.TB, l Level) {
			got := make([]float32, len(x))
			TanhCaps(got, x, m, c)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
					t.Fatalf("level %v, m %v c %v: TanhCaps(%v) = %v, TanhCap %v", l, m, c, x[i], got[i], want[i])
				}
			}
		})
	}
}

// ulp32 is the spacing of float32s at |v|.
func ulp32(v float32) float64 {
	a := math.Abs(float64(v))
	return float64(math.Nextafter32(float32(a), float32(math.Inf(1)))) - a
}
