package quant

import "math"

// F16ToF32 widens an IEEE 754 binary16 value to float32. Every half value,
// subnormals included, is exactly representable in float32, so this is
// exact; infinities keep their sign and NaNs keep sign and payload.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	switch h & 0x7c00 {
	case 0: // zero or subnormal: mant * 2^-24, exact (a normal float32)
		return math.Float32frombits(sign | math.Float32bits(float32(h&0x3ff)*0x1p-24))
	case 0x7c00: // infinity or NaN
		return math.Float32frombits(sign | 0x7f800000 | uint32(h&0x3ff)<<13)
	}
	// Normal: move exponent and mantissa into place and rebias 15 -> 127.
	return math.Float32frombits(sign | (uint32(h&0x7fff)<<13 + (127-15)<<23))
}

// F32ToF16 narrows f to IEEE 754 binary16 with round-to-nearest-even, the
// rounding of the x86 F16C instruction that ggml's GGML_FP32_TO_FP16 uses and
// of numpy's astype(float16). Results below half the smallest subnormal
// (2^-25) become signed zero, ties at 2^-25 included; values at or above
// 65520 become infinity. A NaN stays a NaN of the same sign, quieted, with the
// top 9 bits of its payload (as F16C does).
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // biased half exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e >= 1 {
		// Normal: keep 10 of 23 mantissa bits, round the other 13.
		// Adding the rounded mantissa to the exponent field lets a carry out
		// of the mantissa bump the exponent (up to infinity) for free.
		h := uint32(e)<<10 + mant>>13
		rest := mant & 0x1fff
		if rest > 0x1000 || (rest == 0x1000 && h&1 == 1) {
			h++
		}
		return sign | uint16(h) // h <= 0x7c00: the largest carry lands on infinity
	}
	// Half subnormal (or zero): count units of 2^-24. With the implicit bit,
	// f = m * 2^(exp-150), so the count is m >> (126-exp).
	if exp == 0 {
		return sign // float32 subnormals are far below 2^-25
	}
	m := mant | 0x800000
	s := uint(126 - exp) // >= 14 since e <= 0
	if s > 24 {
		return sign // below 2^-25 (m < 2^24 <= 2^(s-1))
	}
	h := m >> s
	rest := m & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rest > half || (rest == half && h&1 == 1) {
		h++ // may carry into the smallest normal, 0x0400: still the right encoding
	}
	return sign | uint16(h)
}

// BF16ToF32 widens a bfloat16 value to float32 (exact: bfloat16 is the top
// half of a float32).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 narrows f to bfloat16 as ggml's GGML_FP32_TO_BF16 does: NaNs keep
// their sign and top payload bits and are forced quiet (bit 6 set);
// everything else rounds to nearest even, overflowing to infinity. Subnormals
// are kept (bfloat16 has float32's exponent range).
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	return uint16((uint64(u) + 0x7fff + uint64(u>>16&1)) >> 16)
}
