package nn

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestExp32 checks exp32 against float64 exp: within 2 ulp where the
// result is a normal float32, +Inf above the range.
func TestExp32(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	check := func(x float32) {
		got := exp32(x)
		want := math.Exp(float64(x))
		switch {
		case math.IsInf(float64(float32(want)), 1):
			if !math.IsInf(float64(got), 1) {
				t.Fatalf("exp32(%v) = %v, want +Inf", x, got)
			}
		case x < expLo:
			if got != exp32(expLo) {
				t.Fatalf("exp32(%v) = %v, want exp32(lo) %v", x, got, exp32(expLo))
			}
		default:
			ulp := math.Abs(float64(math.Nextafter32(float32(want), float32(math.Inf(1)))) - float64(float32(want)))
			if d := math.Abs(float64(got) - want); d > 2*ulp {
				t.Fatalf("exp32(%v) = %v, want %v (%.2f ulp)", x, got, want, d/ulp)
			}
		}
	}
	for range 1000000 {
		check(float32(r.Float64()*180 - 90))
	}
	for _, x := range []float32{0, -0, 1, -1, expHi, expLo, 88.7, -87.3, 1e-8, -1e-8, 100, -100, -1000} {
		check(x)
	}
	if v := exp32(float32(math.NaN())); v == v {
		t.Errorf("exp32(NaN) = %v", v)
	}
	if v := exp32(float32(math.Inf(-1))); v != exp32(expLo) {
		t.Errorf("exp32(-Inf) = %v", v)
	}
}

// TestSwiGLU32 checks the float32 SwiGLU against the float64 reference
// (within 4 ulp of the result's magnitude scale) and every level against
// the generic bits, on lengths with and without a tail.
func TestSwiGLU32(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for _, n := range []int{1, 15, 16, 33, 1000} {
		g, u := randVec(r, n), randVec(r, n)
		for i := range g {
			g[i] *= float32(int(1) << r.IntN(8))
		}
		g[0] = 100 // e^-g underflows to the clamp
		if n > 1 {
			g[1] = -100 // e^-g overflows: silu = -0
		}
		want := make([]float32, n)
		SwiGLU(want, g, u)
		var ref []float32
		forEachLevel(t, func(t testing.TB, l Level) {
			got := make([]float32, n)
			swiglu32(got, g, u)
			for i := range got {
				d := math.Abs(float64(got[i] - want[i]))
				ulp := math.Abs(float64(math.Nextafter32(want[i], float32(math.Inf(1))) - want[i]))
				if d > 4*ulp && d > 1e-30 {
					t.Fatalf("level %v n=%d: swiglu32(%v, %v) = %v, want %v", l, n, g[i], u[i], got[i], want[i])
				}
			}
			if ref == nil {
				ref = got
			} else if !slicesEqualBits(ref, got) {
				t.Fatalf("level %v n=%d: differs from generic", l, n)
			}
		})
	}
}

func slicesEqualBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func TestExpSum(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 5))
	for _, n := range []int{1, 16, 17, 32000, 151669} {
		x := randVec(r, n)
		for i := range x {
			x[i] *= 10
		}
		m := float32(math.Inf(-1))
		for _, v := range x {
			m = max(m, v)
		}
		var want float64
		for _, v := range x {
			want += math.Exp(float64(v) - float64(m))
		}
		var ref float64
		forEachLevel(t, func(t testing.TB, l Level) {
			got := ExpSum(x, m)
			if math.Abs(got-want) > 2e-7*want {
				t.Fatalf("level %v n=%d: %v, want %v", l, n, got, want)
			}
			if l == Generic {
				ref = got
			} else if got != ref {
				t.Fatalf("level %v n=%d: %v, generic %v", l, n, got, ref)
			}
		})
	}
}

func TestMaxArg(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	for _, n := range []int{1, 15, 16, 17, 100, 32000} {
		x := randVec(r, n)
		x[r.IntN(n)] = 50
		x[n-1] = 50 // a tie after the first
		forEachLevel(t, func(t testing.TB, l Level) {
			m, arg, ok := MaxArg(x)
			wantArg := slices.Index(x, 50)
			if !ok || m != 50 || arg != wantArg {
				t.Fatalf("level %v n=%d: %v %v %v, want 50 %d", l, n, m, arg, ok, wantArg)
			}
			for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
				y := slices.Clone(x)
				y[r.IntN(n)] = bad
				if _, _, ok := MaxArg(y); ok {
					t.Fatalf("level %v n=%d: %v accepted", l, n, bad)
				}
			}
		})
	}
}

// TestExps holds exps at every level to exp32(x - m) bit for bit, on every
// 4099th float32 bit pattern (NaNs, infinities, subnormals among them) and
// lengths around the kernels' blocks of 16.
func TestExps(t *testing.T) {
	var x []float32
	for b := uint64(0); b < 1<<32; b += 4099 {
		x = append(x, math.Float32frombits(uint32(b)))
	}
	for _, m := range []float32{0, 1.5, -3, 88.5} {
		want := make([]float32, len(x))
		for i, v := range x {
			want[i] = exp32(v - m)
		}
		forEachLevel(t, func(t testing.TB, l Level) {
			for _, n := range []int{len(x), 15, 16, 17, 47} {
				got := make([]float32, n)
				exps(got, x[:n], m)
				for i, v := range got {
					if math.Float32bits(v) != math.Float32bits(want[i]) {
						t.Fatalf("%v: exps of %v (%#08x) - %v = %v (%#08x), want %v (%#08x)", l, x[i], math.Float32bits(x[i]), m, v, math.Float32bits(v), want[i], math.Float32bits(want[i]))
					}
				}
			}
		})
	}
}
