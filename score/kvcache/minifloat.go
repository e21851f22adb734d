package kvcache

import "math"

// The OCP 8-bit and 4-bit floats, by rounding in float64: a float32 input
// and every candidate output are exact in float64, and scaling by powers of
// two is exact, so round-to-nearest-even there is the true rne.

// roundMini rounds a >= 0 to a float with mbits mantissa bits whose
// smallest normal exponent is emin (below it the quantum stays 2^(emin-mbits):
// subnormals), ties to even. It does not saturate.
func roundMini(a float64, mbits, emin int) float64 {
	if a == 0 {
		return 0
	}
	_, e := math.Frexp(a) // a = f·2^e, f in [0.5, 1): leading bit at 2^(e-1)
	exp := max(e-1, emin)
	q := math.Ldexp(1, exp-mbits)
	return math.RoundToEven(a/q) * q
}

// encodeMini returns the bits of r, a value of the format (sign separate).
func encodeMini(r float64, mbits, emin, bias int) uint8 {
	if r < math.Ldexp(1, emin) { // subnormal or zero: exponent field 0
		return uint8(r / math.Ldexp(1, emin-mbits))
	}
	_, e := math.Frexp(r)
	exp := e - 1
	m := r/math.Ldexp(1, exp-mbits) - math.Ldexp(1, mbits)
	return uint8(exp+bias)<<mbits | uint8(m)
}

// E4M3 converts x to OCP FP8 E4M3 (bias 7, largest 448, NaN 0x7f) with
// round to nearest even, saturating at ±448; NaN gives 0x7f (sign kept).
func E4M3(x float32) uint8 {
	var sign uint8
	if math.Signbit(float64(x)) {
		sign = 0x80
	}
	a := math.Abs(float64(x))
	switch {
	case a != a:
		return sign | 0x7f
	case a >= 448:
		return sign | 0x7e
	}
	r := roundMini(a, 3, -6)
	if r > 448 {
		r = 448
	}
	return sign | encodeMini(r, 3, -6, 7)
}

// E4M3Value decodes an E4M3 byte.
func E4M3Value(b uint8) float32 { return e4m3Table[b] }

// E2M1 converts x to OCP FP4 E2M1 (bias 1: 0, 0.5, 1, 1.5, 2, 3, 4, 6) with
// round to nearest even, saturating at ±6. NaN gives +0 (E2M1 has no NaN;
// callers handle NaN through their scales).
func E2M1(x float32) uint8 {
	var sign uint8
	if math.Signbit(float64(x)) {
		sign = 0x8
	}
	a := math.Abs(float64(x))
	switch {
	case a != a:
		return 0
	case a >= 6:
		return sign | 0x7
	}
	r := roundMini(a, 1, 0)
	if r > 6 {
		r = 6
	}
	return sign | encodeMini(r, 1, 0, 1)
}

// E2M1Value decodes the low 4 bits of b as E2M1.
func E2M1Value(b uint8) float32 { return e2m1Table[b&0xf] }

var e4m3Table, e2m1Table = func() (t8 [256]float32, t4 [16]float32) {
	for b := range 256 {
		exp, m := b>>3&0xf, b&7
		var v float64
		switch {
		case exp == 0xf && m == 7:
			v = math.NaN()
		case exp == 0:
			v = math.Ldexp(float64(m), -9)
		default:
			v = math.Ldexp(float64(8+m), exp-7-3)
		}
		if b&0x80 != 0 {
			v = -v
		}
		t8[b] = float32(v)
	}
	for b := range 16 {
		exp, m := b>>1&3, b&1
		v := math.Ldexp(float64(m), -1)
		if exp != 0 {
			v = math.Ldexp(float64(2+m), exp-1-1)
		}
		if b&8 != 0 {
			v = -v
		}
		t4[b] = float32(v)
	}
	return
}()
