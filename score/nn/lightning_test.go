package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestLightningSlopes: 4 heads' slopes are 2^-2, 2^-4, 2^-6, 2^-8 exactly;
// MiniMax-01's 64 are 2^(-(h+1)/8) within 1 + h/2 ulps (start·start^h:
// the rounding of start = 2^(-1/8), amplified by the power); every
// decay factor e^x within 1 + 2|x| ulps of exp(−s·c·m) in float64 (the
// two float32 roundings of x, amplified by the exponential, then expf's).
func TestLightningSlopes(t *testing.T) {
	for h, s := range LightningSlopes(4) {
		if want := float32(math.Ldexp(1, -2*(h+1))); s != want {
			t.Errorf("4 heads: slope %d = %g, want %g", h, s, want)
		}
	}
	ulps := func(a, b float32) float64 {
		return math.Abs(float64(int64(math.Float32bits(a)) - int64(math.Float32bits(b))))
	}
	s64 := LightningSlopes(64)
	for h, s := range s64 {
		if want := float32(math.Pow(2, -float64(h+1)/8)); ulps(s, want) > 1+float64(h)/2 {
			t.Errorf("64 heads: slope %d = %g, want %g", h, s, want)
		}
	}
	const n = 300
	for _, il := range []int{0, 37, 79} {
		c := LightningScale(il, 80)
		d := LightningDecay(s64, c, n)
		for h, s := range s64 {
			for m := range n {
				want := float32(math.Exp(-float64(s) * float64(c) * float64(m)))
				x := float64(s) * float64(c) * float64(m)
				if got := d[h*n+m]; ulps(got, want) > 1+2*x && want > 1e-37 {
					t.Fatalf("layer %d head %d distance %d: decay %g, want %g", il, h, m, got, want)
				}
			}
		}
	}
}

// TestLightning compares ggml's form of the lightning attention (both
// builds' lanes) with the float64 reference on heads of 32, 128 and 96,
// windows of 1, 7, 64 and 130 tokens (the lanes' blocks and their
// leftovers), random inputs, inputs of 1e3 and of zeros, and no decay
// (slope 0): within 4e-7 of the largest output (measured 1.8e-7).
func TestLightning(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	worst := 0.0
	for _, c := range []struct {
		heads, d, n int
		scale       float64 // the inputs' magnitude; 0: zeros
		noDecay     bool
	}{
		{3, 32, 130, 1, false}, {2, 128, 64, 1, false}, {1, 96, 7, 1, false}, {2, 32, 1, 1, false},
		{2, 64, 130, 1e3, false}, {2, 32, 64, 0, false}, {4, 32, 130, 1, true},
	} {
		qkv := make([]float32, c.n*c.heads*3*c.d)
		for i := range qkv {
			qkv[i] = float32(c.scale * r.NormFloat64())
		}
		slopes := LightningSlopes(c.heads)
		if c.noDecay {
			clear(slopes)
		}
		scale := LightningScale(1, 4)
		decay := LightningDecay(slopes, scale, c.n)
		want := make([]float32, c.n*c.heads*c.d)
		LightningRef(want, qkv, c.n, c.heads, c.d, slopes, scale)
		for _, avx2 := range []bool{false, true} {
			got := make([]float32, len(want))
			Lightning(got, qkv, c.n, c.heads, c.d, decay, 0, c.heads, avx2)
			e := relDiff(got, want)
			worst = max(worst, e)
			if what := fmt.Sprintf("%d heads of %d, %d tokens, inputs ×%g, no decay %v, avx2 %v", c.heads, c.d, c.n, c.scale, c.noDecay, avx2); e > 4e-7 {
				t.Errorf("%s: %.2e of the largest output, want <= 4e-7", what, e)
			}
		}
	}
	t.Logf("worst difference %.2g of the largest output", worst)
}

// BenchmarkLightning: one head of 128 over 512 tokens, ggml's form (the
// int8 modes' and the float32 mode's) against the float64 reference.
func BenchmarkLightning(b *testing.B) {
	const n, d = 512, 128
	r := rand.New(rand.NewPCG(33, 34))
	qkv := make([]float32, n*3*d)
	for i := range qkv {
		qkv[i] = float32(r.NormFloat64())
	}
	slopes, scale := LightningSlopes(1), LightningScale(0, 2)
	out := make([]float32, n*d)
	b.Run("ggml", func(b *testing.B) {
		decay := LightningDecay(slopes, scale, n)
		for b.Loop() {
			Lightning(out, qkv, n, 1, d, decay, 0, 1, false)
		}
	})
	b.Run("ref", func(b *testing.B) {
		for b.Loop() {
			LightningRef(out, qkv, n, 1, d, slopes, scale)
		}
	})
}
