package nn

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"ppl.dev/quant"
)

// sameBits says a and b have the same bits, or are both NaNs (a NaN's
// payload depends on the operand order of the instructions that carry it,
// which Go's compiler picks).
func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
}

// expEdges returns inputs of exp32 around its edges: the clamps, the
// overflow of e·2¹²⁸ near 88.72, the smallest scale 2⁻¹²⁶, zeros,
// subnormals, infinities, NaN and random bits.
func expEdges(r *rand.Rand) []float32 {
	x := []float32{0, float32(math.Copysign(0, -1)), 1, -1, expHi, expLo, 1e-45, -1e-45, 1e-40, -1e-40,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32, -math.MaxFloat32,
		88.72283, 88.72284, 88.7228, 88.37, 88.38, -87.33655, -87.3365, -86.99, -87.0, 126.5 * 0.6931472, -126.5 * 0.6931472}
	for _, c := range []float32{88.7228, 88.376, 89, -87.33654, -87.68, -86.99, 0.3466, -0.3466} {
		v := c
		for range 64 {
			x = append(x, v)
			v = math.Nextafter32(v, float32(math.Inf(1)))
		}
		v = c
		for range 64 {
			v = math.Nextafter32(v, float32(math.Inf(-1)))
			x = append(x, v)
		}
	}
	for range 2000 {
		x = append(x, float32(r.Float64()*200-100))
	}
	for range 500 {
		x = append(x, randBits(r))
	}
	for len(x)%16 != 0 {
		x = append(x, float32(r.NormFloat64()))
	}
	return x
}

// TestExpEdgesLevels runs the kernels built on exp32 on exp's edges at
// every level and compares with the generic bits: swiglu32 of -x, ExpSum
// of each value alone in its 16 lanes (the others e^-Inf) and of 16 copies,
// and softmax rows whose scores are the values (scaled by 1, with a running
// maximum 0 above them, so p = e^x exactly where x ≤ 0).
func TestExpEdgesLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 71))
	x := expEdges(r)
	n := len(x)
	gate := make([]float32, n)
	for i, v := range x {
		gate[i] = -v
	}
	up := randVec(r, n)
	ones := make([]float32, n)
	for i := range ones {
		ones[i] = 1
	}
	type result struct {
		sw1, sw2 []float32
		sums     []float64
		p        []float32
		m, l, a  []float32
	}
	rows := n / keyBlock
	run := func() *result {
		res := &result{sw1: make([]float32, n), sw2: make([]float32, n)}
		swiglu32(res.sw1, gate, ones)
		swiglu32(res.sw2, gate, up)
		for i, v := range x {
			var y [16]float32
			for j := range y {
				y[j] = float32(math.Inf(-1))
			}
			y[i%16] = v
			res.sums = append(res.sums, ExpSum(y[:], 0))
			for j := range y {
				y[j] = v
			}
			res.sums = append(res.sums, ExpSum(y[:], 0))
		}
		res.sums = append(res.sums, ExpSum(x, 0), ExpSum(x, -50), ExpSum(x, 50))
		// Softmax: non-positive scores with m = 0, and the raw values
		// (with NaNs and infinities) with m = -Inf.
		s := make([]float32, 2*rows*keyBlock)
		lim := make([]int32, 2*rows)
		m := make([]float32, 2*rows)
		l := make([]float32, 2*rows)
		a := make([]float32, 2*rows)
		for i := range rows * keyBlock {
			s[i] = -float32(math.Abs(float64(x[i])))
			s[rows*keyBlock+i] = x[i]
		}
		for i := range 2 * rows {
			lim[i] = int32((i * 7) % (keyBlock + 1))
			if i < rows {
				lim[i] = keyBlock
				m[i] = 0
			} else {
				m[i] = float32(math.Inf(-1))
			}
			l[i] = float32(i)
		}
		kern.softmax(&s[0], 2*rows, &lim[0], 1, &m[0], &l[0], &a[0])
		res.p, res.m, res.l, res.a = s, m, l, a
		return res
	}
	var ref *result
	forEachLevel(t, func(t testing.TB, lv Level) {
		res := run()
		if ref == nil {
			ref = res
			// p = e^x on the first rows: check exp32 itself.
			for i := range rows * keyBlock {
				if want := exp32(-float32(math.Abs(float64(x[i])))); !sameBits(ref.p[i], want) {
					t.Fatalf("generic softmax p[%d] = %v, exp32 %v", i, ref.p[i], want)
				}
			}
			return
		}
		cmp := func(name string, got, want []float32) {
			for i := range got {
				if !sameBits(got[i], want[i]) {
					t.Fatalf("level %v %s[%d] (x %v): %v (%#x), generic %v (%#x)", lv, name, i, x[i%n], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
		}
		cmp("swiglu(-x, 1)", res.sw1, ref.sw1)
		cmp("swiglu(-x, u)", res.sw2, ref.sw2)
		for i := range res.sums {
			if g, w := res.sums[i], ref.sums[i]; math.Float64bits(g) != math.Float64bits(w) && !(g != g && w != w) {
				t.Fatalf("level %v ExpSum case %d (x %v): %v, generic %v", lv, i, x[min(i/2, n-1)], g, w)
			}
		}
		cmp("softmax p", res.p, ref.p)
		cmp("softmax m", res.m, ref.m)
		cmp("softmax l", res.l, ref.l)
		cmp("softmax alpha", res.a, ref.a)
	})
}

// TestSoftmaxTileAdversarial runs softmax blocks with NaN, infinite, huge
// and tiny scores, every lim from 0 to 64, and running states (m, l) that
// are -Inf, finite, above the block or NaN, at every level against the
// generic bits. Generic max32 skips NaN scores in the block maximum.
func TestSoftmaxTileAdversarial(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 13))
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
		math.MaxFloat32, -math.MaxFloat32, 1e-45, -1e-45, 1e30, -1e30, 88.7, -87.4}
	for trial := range 300 {
		rows := 1 + r.IntN(20)
		s := randVec(r, rows*keyBlock)
		for i := range s {
			s[i] *= float32(math.Pow(10, float64(r.IntN(8))))
			if trial%3 != 0 && r.IntN(20) == 0 {
				s[i] = specials[r.IntN(len(specials))]
			}
		}
		lim := make([]int32, rows)
		m0, l0 := make([]float32, rows), make([]float32, rows)
		for i := range rows {
			lim[i] = int32((trial + i) % (keyBlock + 1))
			switch r.IntN(5) {
			case 0:
				m0[i] = float32(math.Inf(-1))
			case 1:
				m0[i] = 1e4 // above every score
			case 2:
				if trial%3 != 0 {
					m0[i] = float32(math.NaN())
				}
			default:
				m0[i] = float32(r.NormFloat64() * 10)
			}
			l0[i] = float32(r.Float64() * 100)
		}
		if trial%7 == 0 {
			for i := range s {
				s[i] = float32(math.Inf(-1))
			}
		}
		scale := float32(r.Float64() * 2)
		if trial%11 == 0 {
			scale = float32(math.Inf(1))
		}
		type state struct{ p, m, l, a []float32 }
		var ref *state
		forEachLevel(t, func(t testing.TB, lv Level) {
			st := &state{p: slices.Clone(s), m: slices.Clone(m0), l: slices.Clone(l0), a: make([]float32, rows)}
			kern.softmax(&st.p[0], rows, &lim[0], scale, &st.m[0], &st.l[0], &st.a[0])
			if ref == nil {
				ref = st
				return
			}
			if (lv == AVX512 || lv == AVX512VNNI) && trial%3 != 0 {
				return // the AVX-512 kernel's block maximum does not skip NaN scores as max32 does
			}
			for _, c := range []struct {
				name      string
				got, want []float32
			}{{"p", st.p, ref.p}, {"m", st.m, ref.m}, {"l", st.l, ref.l}, {"alpha", st.a, ref.a}} {
				for i := range c.got {
					if !sameBits(c.got[i], c.want[i]) {
						row := i
						if c.name == "p" {
							row = i / keyBlock
						}
						t.Fatalf("trial %d level %v: %s[%d] = %v, generic %v (lim %d)", trial, lv, c.name, i, c.got[i], c.want[i], lim[row])
					}
				}
			}
		})
	}
}

// TestMaxArgZeros checks MaxArg's vector part on zeros of both signs (Go's
// max takes +0 over -0), ties and tails at every level against generic.
func TestMaxArgZeros(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 19))
	negz := float32(math.Copysign(0, -1))
	for trial := range 400 {
		n := 16 * (1 + r.IntN(4))
		if trial%2 == 1 {
			n += r.IntN(16)
		}
		x := make([]float32, n)
		for i := range x {
			switch r.IntN(4) {
			case 0:
				x[i] = negz
			case 1:
				x[i] = 0
			case 2:
				x[i] = -float32(r.IntN(3))
			default:
				x[i] = negz
			}
		}
		if trial%5 == 0 {
			for i := range x {
				x[i] = negz
			}
			x[r.IntN(n)] = 0
		}
		if trial%7 == 0 {
			x[r.IntN(n)] = float32(r.IntN(3)) * 1e-45
		}
		type res struct {
			m   float32
			arg int
			ok  bool
		}
		var ref res
		forEachLevel(t, func(t testing.TB, lv Level) {
			var g res
			g.m, g.arg, g.ok = MaxArg(x)
			if lv == Generic {
				ref = g
				return
			}
			if lv == AVX512 || lv == AVX512VNNI {
				return // VMAXPS keeps the second of two zeros there: -0 may come out
			}
			if math.Float32bits(g.m) != math.Float32bits(ref.m) || g.arg != ref.arg || g.ok != ref.ok {
				t.Fatalf("trial %d level %v: %v, generic %v (%v)", trial, lv, g, ref, x)
			}
		})
	}
}

// TestRMSNormExtremes runs rows with huge, tiny, subnormal and infinite
// values (sums of squares that overflow float64 or are zero) at every level
// against the generic bits.
func TestRMSNormExtremes(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 20))
	for trial := range 60 {
		d := []int{8, 16, 24, 40, 64, 100}[trial%6]
		w := randVec(r, d)
		x := randVec(r, 2*d)
		for i := range x {
			switch r.IntN(6) {
			case 0:
				x[i] = randBits(r)
			case 1:
				x[i] *= 1e-40
			case 2:
				x[i] *= 3e38
			}
		}
		if trial%10 == 0 {
			x[r.IntN(len(x))] = float32(math.Inf(1))
		}
		if trial%10 == 1 {
			clear(x)
		}
		var ref []float32
		forEachLevel(t, func(t testing.TB, lv Level) {
			out := make([]float32, 2*d)
			(&RMSNorm{Name: "n", W: w, Eps: 0}).Forward(NewContext(1), out, x, 2)
			if ref == nil {
				ref = out
			} else {
				for i := range out {
					if !sameBits(out[i], ref[i]) {
						t.Fatalf("trial %d d=%d level %v: out[%d] = %v, generic %v", trial, d, lv, i, out[i], ref[i])
					}
				}
			}
		})
	}
}

// TestRoundHalfEdges rounds f16's edges (subnormals, ties, overflow,
// infinities, NaN) at every level against quant's conversion.
func TestRoundHalfEdges(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 21))
	x := []float32{65504, 65519.99, 65520, -65520, 6e-8, 5.96e-8, 2.98e-8, 2.99e-8, 1e-9, 6.1e-5, 6.09e-5,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0, float32(math.Copysign(0, -1)), 1 + 0x1p-11, 1 + 0x1p-11 + 0x1p-23}
	for len(x) < 4000 {
		x = append(x, randBits(r), float32(r.NormFloat64())*float32(math.Pow(2, float64(r.IntN(50)-30))))
	}
	forEachLevel(t, func(t testing.TB, lv Level) {
		got := make([]float32, len(x))
		roundHalf(0, got, x)
		for i, v := range x {
			if want := quant.F16ToF32(quant.F32ToF16(v)); !sameBits(got[i], want) {
				t.Fatalf("level %v: %v -> %v, want %v", lv, v, got[i], want)
			}
		}
	})
}
