package nn

import "math"

// exp32 is e^x in float32, within 2 ulp for x in [-87.33654, 88.72283],
// +Inf above (where e^x overflows float32) and e^-87.33654 (a tiny normal
// number, not zero) below -87.33654: Cephes' expf, with the operations in this order in every
// kernel, so that the vector versions give the same bits. Softmax and
// SiLU only ever need it where it is accurate: a term e^-87 next to the
// largest term 1 is invisible in a float32 sum.
//
//	x = clamp(x, expLo, expHi)
//	n = round-to-even(x · log2(e))      float32 product, then rounded
//	r = x - n·ln2Hi - n·ln2Lo           two FMAs
//	P = ((((c5·r + c4)·r + c3)·r + c2)·r + c1)·r + c0   FMAs
//	e = (P·r² + r) + 1                  r² rounded, one FMA, one add
//	result = e · 2ⁿ                     exact unless it over- or underflows
func exp32(x float32) float32 {
	if x != x {
		return x
	}
	x = min(max(x, expLo), expHi)
	n := float32(math.RoundToEven(float64(x * log2e)))
	r := fma32(-n, ln2Hi, x)
	r = fma32(-n, ln2Lo, r)
	pp := fma32(expC5, r, expC4)
	pp = fma32(pp, r, expC3)
	pp = fma32(pp, r, expC2)
	pp = fma32(pp, r, expC1)
	pp = fma32(pp, r, expC0)
	r2 := r * r
	e := fma32(pp, r2, r) + 1
	return float32(float64(e) * math.Ldexp(1, int(n)))
}

// exps sets dst[i] = exp32(x[i] - m), on the level's kernel where it has
// one.
func exps(dst, x []float32, m float32) {
	n := 0
	if f := kern.exps; f != nil && len(x) >= 16 {
		n = len(x) &^ 15
		check("exps dst", len(dst), len(x))
		f(&dst[0], &x[0], n, m)
	}
	for i := n; i < len(x); i++ {
		dst[i] = exp32(x[i] - m)
	}
}

// The constants of exp32 (Cephes expf).
const (
	expHi = float32(89) // e^89 overflows: the clamp keeps n within range, 2ⁿ⁺¹ gives +Inf
	expLo = float32(-87.33654)
	log2e = float32(1.44269504088896341)
	ln2Hi = float32(0.693359375)
	ln2Lo = float32(-2.12194440e-4)
	expC5 = float32(1.9875691500e-4)
	expC4 = float32(1.3981999507e-3)
	expC3 = float32(8.3334519073e-3)
	expC2 = float32(4.1665795894e-2)
	expC1 = float32(1.6666665459e-1)
	expC0 = float32(5.0000001201e-1)
)
