package nn

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"ppl.dev/quant"
)

// deltaInputs are one head's delta rule inputs, laid out with strides as a
// layer's tensors hold them (other heads' values in between).
type deltaInputs struct {
	D, n, ldq, ldv, ldg int
	q, k, v, g, beta    []float32
	state               []float32
}

// deltaFamilies are random and adversarial inputs: decays near 1 and near 0
// (g down to -60: e^{G} underflows within a chunk), mixed, beta at 1, the
// same key at every token (k_t·k_s = 1, the triangular system at its most
// coupled), and large values.
var deltaFamilies = []struct {
	name    string
	g, beta func(r *rand.Rand, t int) float64
	sameKey bool
	vScale  float64
}{
	{"random", func(r *rand.Rand, _ int) float64 { return -2 * r.Float64() }, func(r *rand.Rand, _ int) float64 { return r.Float64() }, false, 1},
	{"decay-near-1", func(r *rand.Rand, _ int) float64 { return -1e-7 * r.Float64() }, func(r *rand.Rand, _ int) float64 { return r.Float64() }, false, 1},
	{"decay-near-0", func(r *rand.Rand, _ int) float64 { return -20 - 40*r.Float64() }, func(r *rand.Rand, _ int) float64 { return r.Float64() }, false, 1},
	{"decay-mixed", func(r *rand.Rand, t int) float64 {
		if t%7 == 3 {
			return -50
		}
		return -1e-6 * r.Float64()
	}, func(r *rand.Rand, _ int) float64 { return r.Float64() }, false, 1},
	{"beta-1", func(r *rand.Rand, _ int) float64 { return -0.01 * r.Float64() }, func(r *rand.Rand, _ int) float64 { return 1 - 1e-7*r.Float64() }, false, 1},
	{"same-key-beta-1", func(r *rand.Rand, _ int) float64 { return -1e-3 * r.Float64() }, func(*rand.Rand, int) float64 { return 1 }, true, 1},
	{"large-v", func(r *rand.Rand, _ int) float64 { return -0.1 * r.Float64() }, func(r *rand.Rand, _ int) float64 { return r.Float64() }, false, 1e4},
}

func unit32(r *rand.Rand, row []float32) {
	var ss float64
	x := make([]float64, len(row))
	for i := range x {
		x[i] = r.NormFloat64()
		ss += x[i] * x[i]
	}
	for i := range x {
		row[i] = float32(x[i] / math.Sqrt(ss))
	}
}

func makeDelta(r *rand.Rand, fam int, D, n int) *deltaInputs {
	f := deltaFamilies[fam]
	in := &deltaInputs{D: D, n: n, ldq: 2*D + 3, ldv: 3*D + 1, ldg: 5}
	in.q, in.k = make([]float32, n*in.ldq), make([]float32, n*in.ldq)
	in.v = make([]float32, n*in.ldv)
	in.g, in.beta = make([]float32, n*in.ldg), make([]float32, n*in.ldg)
	for t := range n {
		unit32(r, in.q[t*in.ldq:t*in.ldq+D])
		if f.sameKey && t > 0 {
			copy(in.k[t*in.ldq:t*in.ldq+D], in.k[:D])
		} else {
			unit32(r, in.k[t*in.ldq:t*in.ldq+D])
		}
		for j := range D {
			in.v[t*in.ldv+j] = float32(f.vScale * 3 * r.NormFloat64())
		}
		in.g[t*in.ldg], in.beta[t*in.ldg] = float32(f.g(r, t)), float32(f.beta(r, t))
	}
	in.state = make([]float32, D*D)
	for i := range in.state {
		in.state[i] = float32(f.vScale * 0.3 * r.NormFloat64())
	}
	return in
}

// run returns the outputs (n × D) and final state of DeltaScan or of the
// reference recurrence.
func (in *deltaInputs) run(ref bool, round func([]float32)) (out, st []float32) {
	D := in.D
	out, st = make([]float32, in.n*D), slices.Clone(in.state)
	if ref {
		DeltaRuleRef(D, out, D, in.q, in.k, in.ldq, in.v, in.ldv, in.g, in.beta, in.ldg, in.n, st, round)
	} else {
		NewDeltaScan(D).Run(out, D, in.q, in.k, in.ldq, in.v, in.ldv, in.g, in.beta, in.ldg, in.n, st, round)
	}
	return out, st
}

// relDiff returns max |a - b| / max |b|.
func relDiff(a, b []float32) float64 {
	var d, m float64
	for i := range b {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
		m = math.Max(m, math.Abs(float64(b[i])))
	}
	if m == 0 {
		return d
	}
	return d / m
}

// TestDeltaScan runs the chunked float32 delta rule against the float64
// per-token recurrence on every family, head sizes that are and are not
// multiples of 16, lengths around the chunk, from a nonzero state: outputs
// and final state within 2e-5 relative to their largest value (float32
// products of length ≤ 128 and the rounded inverse of the triangular
// system: measured 9.9e-7, see the log), and the same bits at every
// kernel level.
func TestDeltaScan(t *testing.T) {
	var worst float64
	for fam, f := range deltaFamilies {
		for _, D := range []int{16, 20, 64, 128} {
			for _, n := range []int{1, 5, 63, 64, 65, 130, 200} {
				in := makeDelta(rand.New(rand.NewPCG(uint64(fam*1000+D), uint64(n))), fam, D, n)
				ro, rs := in.run(true, nil)
				var first, firstS []float32
				forEachLevel(t, func(t testing.TB, l Level) {
					co, cs := in.run(false, nil)
					do, ds := relDiff(co, ro), relDiff(cs, rs)
					worst = math.Max(worst, math.Max(do, ds))
					if do > 2e-5 || ds > 2e-5 || math.IsNaN(do) || math.IsNaN(ds) {
						t.Errorf("%s D=%d n=%d %v: output %.2e, state %.2e relative", f.name, D, n, l, do, ds)
					}
					if first == nil {
						first, firstS = co, cs
					} else if !slices.Equal(co, first) || !slices.Equal(cs, firstS) {
						t.Errorf("%s D=%d n=%d: level %v differs from generic", f.name, D, n, l)
					}
				})
			}
		}
	}
	t.Logf("worst relative difference from the recurrence: %.2e", worst)
}

// TestDeltaScanRounded: with the state rounded to f16 after each chunk
// (DeltaScan) or token (the reference), the outputs stay within f16's
// precision of the reference.
func TestDeltaScanRounded(t *testing.T) {
	round := func(x []float32) {
		for i, v := range x {
			x[i] = quant.F16ToF32(quant.F32ToF16(v))
		}
	}
	in := makeDelta(rand.New(rand.NewPCG(7, 8)), 0, 64, 200)
	ro, _ := in.run(true, round)
	co, _ := in.run(false, round)
	d := relDiff(co, ro)
	t.Logf("f16 state: %.2e relative", d)
	if d > 1e-2 {
		t.Errorf("f16 state: %.2e relative, want <= 1e-2", d)
	}
}

// TestConvSiLU checks the convolution against ConvSiLURef (5 ulp) with the
// history carried across calls, one shorter than the kernel, inputs past
// where silu saturates, and kernel 1.
func TestConvSiLU(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	c := NewContext(2)
	for _, K := range []int{1, 4} {
		const n, C = 40, 300
		x := make([]float32, n*C)
		w := make([]float32, C*K)
		for i := range x {
			x[i] = float32(r.NormFloat64())
			if i%13 == 0 {
				x[i] *= 100 // silu saturating both ways
			}
		}
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		got, want := make([]float32, n*C), make([]float32, n*C)
		hg, hw := make([]float32, (K-1)*C), make([]float32, (K-1)*C)
		for _, sp := range [][2]int{{0, 2}, {2, 3}, {3, n}} {
			ConvSiLU(c, got[sp[0]*C:sp[1]*C], x[sp[0]*C:sp[1]*C], hg, w, sp[1]-sp[0], C, K)
			ConvSiLURef(want[sp[0]*C:sp[1]*C], x[sp[0]*C:sp[1]*C], hw, w, sp[1]-sp[0], C, K)
		}
		if !slices.Equal(hg, hw) {
			t.Errorf("K=%d: history differs", K)
		}
		// The sum is rounded to float32 before silu, whose relative
		// condition number at a is |1 + a·(1 - sigmoid(a))| ≤ 1 + |a|.
		cond := make([]float32, n*C)
		for tt := range n {
			for ch := range C {
				var a float64
				for j := range K {
					if p := tt - K + 1 + j; p >= 0 {
						a += float64(w[ch*K+j]) * float64(x[p*C+ch])
					}
				}
				cond[tt*C+ch] = float32(1 + math.Abs(a))
			}
		}
		checkULP(t, "ConvSiLU", got, want, 5, cond)
	}
}

// TestGatedRMSNorm checks the gated norm against GatedRMSNormRef (6 ulp),
// in place, with a zero row and gates past where silu saturates.
func TestGatedRMSNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	c := NewContext(2)
	for _, d := range []int{128, 20} {
		const rows = 37
		x, z, w := make([]float32, rows*d), make([]float32, rows*d), make([]float32, d)
		for i := range x {
			x[i], z[i] = float32(r.NormFloat64()), float32(3*r.NormFloat64())
			if i%17 == 0 {
				z[i] *= 50
			}
		}
		clear(x[d : 2*d])
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		want := make([]float32, rows*d)
		GatedRMSNormRef(want, x, z, w, rows, 1e-6)
		forEachLevel(t, func(t testing.TB, l Level) {
			got := slices.Clone(x)
			GatedRMSNorm(c, got, got, z, w, rows, 1e-6)
			checkULP(t, "GatedRMSNorm "+l.String(), got, want, 6, nil)
		})
	}
}

// checkULP fails when got and want differ by more than ulps float32 ulps
// of want (times cond[i] when cond is not nil) plus 1e-30: below that lies silu's tail x·e^x for x < -60, which
// float32's exp and its subnormals round any way they like.
func checkULP(t testing.TB, what string, got, want []float32, ulps float64, cond []float32) {
	t.Helper()
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		ulp := math.Abs(w) * 0x1p-23
		if cond != nil {
			ulp *= float64(cond[i])
		}
		if math.Abs(g-w) > ulps*ulp+1e-30 || math.IsNaN(g) != math.IsNaN(w) {
			t.Fatalf("%s: element %d = %v, want %v (%.1f ulp)", what, i, got[i], want[i], math.Abs(g-w)/ulp)
		}
	}
}
