package nn

import (
	"fmt"
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

// runGGML returns the outputs and final state of DeltaRuleGGML, in the
// AVX2 build's lanes with avx2.
func (in *deltaInputs) runGGML(avx2 bool) (out, st []float32) {
	D := in.D
	out, st = make([]float32, in.n*D), slices.Clone(in.state)
	DeltaRuleGGML(D, out, D, in.q, in.k, in.ldq, in.v, in.ldv, in.g, in.beta, in.ldg, in.n, st, avx2, make([]float32, D*D), nil)
	return out, st
}

// TestDeltaRuleGGML runs ggml's token-by-token delta rule in float32
// (both builds' lanes) against the float64 recurrence on every family,
// head sizes in ggml's element loop alone (16, 20), whole vector steps
// (64, 128) and both (80): outputs and final state within 5e-6 relative
// to their largest value (measured 9.9e-7, see the log). Its bits are
// llama.cpp's (TestGGMLDeltaNet).
func TestDeltaRuleGGML(t *testing.T) {
	var worst float64
	for fam, f := range deltaFamilies {
		for _, D := range []int{16, 20, 64, 80, 128} {
			for _, n := range []int{1, 5, 70} {
				in := makeDelta(rand.New(rand.NewPCG(uint64(fam*1000+D), uint64(n))), fam, D, n)
				ro, rs := in.run(true, nil)
				for _, avx2 := range []bool{false, true} {
					co, cs := in.runGGML(avx2)
					do, ds := relDiff(co, ro), relDiff(cs, rs)
					worst = math.Max(worst, math.Max(do, ds))
					if do > 5e-6 || ds > 5e-6 || math.IsNaN(do) || math.IsNaN(ds) {
						t.Errorf("%s D=%d n=%d avx2 %v: output %.2e, state %.2e relative", f.name, D, n, avx2, do, ds)
					}
				}
			}
		}
	}
	t.Logf("worst relative difference from the recurrence: %.2e", worst)
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
// where silu saturates, kernel 1, and with and without a bias (Mamba-2's).
func TestConvSiLU(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	c := NewContext(2)
	for _, K := range []int{1, 4} {
		for _, biased := range []bool{false, true} {
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
			var bias []float32
			if biased {
				bias = make([]float32, C)
				for i := range bias {
					bias[i] = float32(r.NormFloat64())
				}
			}
			got, want := make([]float32, n*C), make([]float32, n*C)
			hg, hw := make([]float32, (K-1)*C), make([]float32, (K-1)*C)
			for _, sp := range [][2]int{{0, 2}, {2, 3}, {3, n}} {
				ConvSiLU(c, got[sp[0]*C:sp[1]*C], x[sp[0]*C:sp[1]*C], hg, w, bias, sp[1]-sp[0], C, K)
				ConvSiLURef(want[sp[0]*C:sp[1]*C], x[sp[0]*C:sp[1]*C], hw, w, bias, sp[1]-sp[0], C, K)
			}
			if !slices.Equal(hg, hw) {
				t.Errorf("K=%d: history differs", K)
			}
			// The sum is rounded to float32 before silu (and once more with
			// the bias), whose relative condition number at a is |1 +
			// a·(1 - sigmoid(a))| ≤ 1 + |a|; the bias adds the sum's
			// magnitude relative to the biased one's.
			cond := make([]float32, n*C)
			for tt := range n {
				for ch := range C {
					var a float64
					for j := range K {
						if p := tt - K + 1 + j; p >= 0 {
							a += float64(w[ch*K+j]) * float64(x[p*C+ch])
						}
					}
					k := 1.0
					if bias != nil {
						k = 1 + math.Abs(a)/math.Max(math.Abs(a+float64(bias[ch])), 1e-30)
						a += float64(bias[ch])
					}
					cond[tt*C+ch] = float32(k * (1 + math.Abs(a)))
				}
			}
			checkULP(t, fmt.Sprintf("ConvSiLU K=%d bias=%v", K, biased), got, want, 5, cond)
		}
	}
}

// TestShiftHist checks the convolutions' history against its definition,
// the last K - 1 rows of the old history followed by the new inputs, for
// windows shorter than, as long as and longer than the history.
func TestShiftHist(t *testing.T) {
	const C = 3
	for _, K := range []int{1, 2, 4} {
		for _, n := range []int{0, 1, 2, 3, 4, 7} {
			hist, x := make([]float32, (K-1)*C), make([]float32, n*C)
			for i := range hist {
				hist[i] = float32(-1 - i)
			}
			for i := range x {
				x[i] = float32(1 + i)
			}
			all := append(slices.Clone(hist), x...)
			want := all[len(all)-(K-1)*C:]
			shiftHist(x, hist, n, C, K)
			if !slices.Equal(hist, want) {
				t.Errorf("K=%d, %d rows: history %v, want %v", K, n, hist, want)
			}
		}
	}
}

// TestSSMScan runs the float32 selective scan against the float64
// reference on heads of 16 and 64 with states of 16 and 128 (Granite 4.0's
// and Nemotron-H's), over 300 tokens from a nonzero state, with dt past
// softplus's threshold of 20 and far below 0, split across calls as a
// window's blocks split it: outputs and final state within 1e-6 relative
// to their largest value (float32 sums over the state and a decay carried
// across tokens). With an f16 state both round it after every token and
// stay within 1e-4 of each other (measured 4.3e-7 and 3.7e-5). Mamba-1's
// heads of one channel with a decay per state column (Falcon-Mamba's
// state of 16) likewise, and its int8 modes' ggml loop too: within 5e-7
// with and without an f16 state (measured 1.7e-7).
func TestSSMScan(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, c := range []struct {
		P, N    int
		columns bool // Mamba-1's decays per column
		round   func([]float32)
		bound   float64
	}{{16, 16, false, nil, 1e-6}, {64, 128, false, nil, 1e-6}, {16, 16, false, roundStateF16, 1e-4},
		{1, 16, true, nil, 5e-7}, {1, 16, true, roundStateF16, 5e-7}} {
		const T, H = 300, 3
		P, N := c.P, c.N
		x, dt := make([]float32, T*H*P), make([]float32, T*H)
		b, cc := make([]float32, T*N), make([]float32, T*N)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		for i := range dt {
			dt[i] = float32(2 * r.NormFloat64())
			switch i % 37 {
			case 0:
				dt[i] = 25 // past softplus's threshold
			case 1:
				dt[i] = -30
			}
		}
		for i := range b {
			b[i], cc[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		s0 := make([]float32, P*N)
		for i := range s0 {
			s0[i] = float32(r.NormFloat64())
		}
		var as []float32
		if c.columns { // Mamba-1's -(1..N) (its A_log's initialization) times a spread
			as = make([]float32, N)
			for k := range as {
				as[k] = -float32(k+1) * float32(0.5+r.Float64())
			}
		}
		for h := range H {
			got, want, gg := make([]float32, T*H*P), make([]float32, T*H*P), make([]float32, T*H*P)
			sg, sw, sgg := slices.Clone(s0), slices.Clone(s0), slices.Clone(s0)
			head := func(out, st []float32, t0, t1 int) *SSMHead {
				return &SSMHead{Out: out[t0*H*P+h*P:], X: x[t0*H*P+h*P:], Dt: dt[t0*H+h:], B: b[t0*N:], C: cc[t0*N:],
					XS: H * P, DS: H, BS: N, N: N, P: P, T: t1 - t0, A: -float32(h+1) / 4, D: float32(h) - 0.5, DtBias: 0.25, AS: as, S: st}
			}
			for _, sp := range [][2]int{{0, 7}, {7, 200}, {200, T}} {
				SSMScan(head(got, sg, sp[0], sp[1]), c.round)
				SSMScanRef(head(want, sw, sp[0], sp[1]), c.round)
				if c.columns {
					SSMScanGGML(head(gg, sgg, sp[0], sp[1]), false, c.round)
				}
			}
			what := fmt.Sprintf("P=%d N=%d columns %v head %d", P, N, c.columns, h)
			if d := relDiff(got, want); d > c.bound {
				t.Errorf("%s: output %.2e relative, want <= %.0e", what, d, c.bound)
			}
			if d := relDiff(sg, sw); d > c.bound {
				t.Errorf("%s: state %.2e relative, want <= %.0e", what, d, c.bound)
			}
			if !c.columns {
				continue
			}
			if d := relDiff(gg, want); d > c.bound {
				t.Errorf("%s, ggml: output %.2e relative, want <= %.0e", what, d, c.bound)
			}
			if d := relDiff(sgg, sw); d > c.bound {
				t.Errorf("%s, ggml: state %.2e relative, want <= %.0e", what, d, c.bound)
			}
		}
	}
}

// roundStateF16 rounds a state to float16 in place.
func roundStateF16(s []float32) {
	for i, v := range s {
		s[i] = roundF16(v)
	}
}

// TestGatedGroupNorm checks Mamba-2's gate-then-norm against
// GatedGroupNormRef (6 ulp) in place, with a zero group, gates past where
// silu saturates, and groups of 128 and 20.
func TestGatedGroupNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	c := NewContext(2)
	for _, g := range []int{128, 20} {
		const rows, groups = 9, 4
		d := g * groups
		x, z, w := make([]float32, rows*d), make([]float32, rows*d), make([]float32, d)
		for i := range x {
			x[i], z[i] = float32(r.NormFloat64()), float32(3*r.NormFloat64())
			if i%17 == 0 {
				z[i] *= 50
			}
		}
		clear(x[d+g : d+2*g])
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		want := make([]float32, rows*d)
		GatedGroupNormRef(want, x, z, w, rows, g, 1e-6)
		forEachLevel(t, func(t testing.TB, l Level) {
			got := slices.Clone(x)
			GatedGroupNorm(c, got, got, z, w, rows, g, 1e-6)
			checkULP(t, "GatedGroupNorm "+l.String(), got, want, 6, nil)
		})
		// Without weights, the gate alone (Falcon-H1 without ssm_norm).
		GatedGroupNormRef(want, x, z, nil, rows, g, 1e-6)
		for i := range want {
			zz := float64(z[i])
			if u := float32(zz / (1 + math.Exp(-zz)) * float64(x[i])); want[i] != u {
				t.Fatalf("gate alone, reference: %v, want x·silu(z) = %v", want[i], u)
			}
		}
		got := slices.Clone(x)
		GatedGroupNorm(c, got, got, z, nil, rows, g, 1e-6)
		checkULP(t, "GatedGroupNorm without weights", got, want, 2, nil)
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
