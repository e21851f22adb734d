package nn

import (
	"fmt"
	"math"
)

// Soft-capping (Gemma 2's attention scores, Gemma's and Grok's logits)
// computes c·tanh(x·m/c) for every score or logit: in the fp32 mode with
// Go's math.Tanh that was half of Gemma 2's time at 2048 tokens. TanhCaps
// computes it in float64 by one formula, the same operations in every
// kernel (the plain loop here, AVX-512 and AVX2), so every level gives the
// same bits:
//
//	y = (x·m)/c,  a = min(|y|, 20)     (a NaN stays one)
//	z = -2a;  k = round-to-even(z·log2 e);  r = z - k·ln2 (two FMAs, ln2 high and low)
//	q = Σ_{n<=12} r^n/(n+1)!  by Horner's FMAs;  e = q·r   (e^r - 1)
//	m' = fma(2^k, e, 2^k - 1)                              (e^z - 1)
//	tanh a = -m'/(2 + m');  the sign y's;  the result float32(c·tanh)
//
// |r| <= ln2/2 truncates the series at 1.2e-17 relative; e^z - 1 keeps its
// relative accuracy near 0 (k = 0 there), and past |y| = 20 tanh is 1 in
// float64. Against math.Tanh the float64 tanh is within 4.8e-16 relative
// (measured), so the float32 results are math.Tanh's but for a rounding
// in rare ties: none unscaled (m = c = 1) on all 2^32 float32 inputs,
// compared by hand, nor on TestTanhCaps's 17 million in four scalings.

// tanhK4 holds the constants of the vector kernels, each 4 times (AVX2's
// memory operands): see tanhKernelConsts.
var tanhK4 = func() (k [tanhKN][4]float64) {
	fill4(k[:], tanhKernelConsts()...)
	return k
}()

// fill4 sets k[i] to 4 copies of v[i], the vector kernels' constants (the
// AVX2 kernels read them as memory operands); their counts must agree.
func fill4(k [][4]float64, v ...float64) {
	if len(v) != len(k) {
		panic(fmt.Sprintf("nn: %d kernel constants for a table of %d", len(v), len(k)))
	}
	for i, x := range v {
		k[i] = [4]float64{x, x, x, x}
	}
}

const (
	tanhKN    = 23                     // constants in tanhK4
	tanhClamp = 20                     // past it tanh is 1 in float64
	tanhLog2e = 1.4426950408889634     // log2(e)
	tanhLn2Hi = 0.6931471805599453     // ln 2 rounded to float64
	tanhLn2Lo = 2.3190468138462996e-17 // ln 2 minus tanhLn2Hi
	// tanhMagic is 1.5·2^52: k + tanhMagic holds the integer k in its low
	// bits (|k| < 2^51), so bits(k + tanhMagic) - tanhMagicBias is k + 1023,
	// the exponent field of 2^k.
	tanhMagic = 6755399441055744.0
)

// tanhCoef are the series' coefficients 1/(n+1)! for n = 12 down to 1
// (Horner's order; the last step adds 1).
var tanhCoef = func() (c [12]float64) {
	f := 1.0
	for n := 1; n <= 13; n++ {
		f *= float64(n)
		if n >= 2 {
			c[13-n] = 1 / f
		}
	}
	return c
}()

// tanhMagicBias is bits(tanhMagic) - 1023.
var tanhMagicBias = math.Float64bits(tanhMagic) - 1023

// tanhKernelConsts lists tanhK4's values in the kernels' order: the clamp,
// -2, log2 e, ln 2 high and low, the 12 coefficients, 1, 2, tanhMagic,
// and as bits tanhMagicBias, the magnitude mask and the sign bit.
func tanhKernelConsts() []float64 {
	v := []float64{tanhClamp, -2, tanhLog2e, tanhLn2Hi, tanhLn2Lo}
	v = append(v, tanhCoef[:]...)
	return append(v, 1, 2, tanhMagic, math.Float64frombits(tanhMagicBias),
		math.Float64frombits(1<<63-1), math.Float64frombits(1<<63))
}

// tanh64 is tanh(y) by the formula above (y's sign, NaN for NaN).
func tanh64(y float64) float64 {
	a := math.Abs(y)
	if a > tanhClamp {
		a = tanhClamp
	}
	k, r := expReduce(a * -2)
	q := tanhCoef[0]
	for _, c := range tanhCoef[1:] {
		q = math.FMA(q, r, c)
	}
	q = math.FMA(q, r, 1)
	e := q * r
	s := pow2(k)
	mm := math.FMA(s, e, s-1)
	return math.Copysign(-mm/(mm+2), y)
}

// expReduce is the range reduction of tanh64 and exp64x8: k =
// round-to-even(v·log2 e) and r = v - k·ln2 by two FMAs (ln 2 high, then
// low), |r| <= ln2/2.
func expReduce(v float64) (k, r float64) {
	k = math.RoundToEven(v * tanhLog2e)
	return k, math.FMA(-k, tanhLn2Lo, math.FMA(-k, tanhLn2Hi, v))
}

// pow2 is 2^k for an integer k (|k| <= 1022) in float64, built in its
// exponent bits as the kernels build it (tanhMagic).
func pow2(k float64) float64 {
	return math.Float64frombits((math.Float64bits(k+tanhMagic) - tanhMagicBias) << 52)
}

// TanhCap is c·tanh(x·m/c) rounded to float32 (TanhCaps's bits): m = 1
// soft-caps a logit x at c, m = the attention's scale a score.
func TanhCap(x float32, m, c float64) float32 {
	return float32(c * tanh64(float64(x)*m/c))
}

// TanhCaps sets dst[i] = TanhCap(x[i], m, c), in lanes of 8 float64 on
// AVX-512 and of 4 on AVX2 (dst may alias x).
func TanhCaps(dst, x []float32, m, c float64) {
	check("TanhCaps", len(dst), len(x))
	i := 0
	if f := kern.tanhCap; f != nil && len(x) >= 8 {
		i = len(x) &^ 7
		f(&dst[0], &x[0], i, m, c, &tanhK4)
	}
	for ; i < len(x); i++ {
		dst[i] = TanhCap(x[i], m, c)
	}
}
