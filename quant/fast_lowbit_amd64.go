package quant

import "ppl.dev/gguf"

// The vector decoders of the low-bit types (fast_lowbit_amd64.s). Each
// kernel decodes 32 weights at a time to their signed integers in a vector
// register (grid entries loaded from the expanded tables of lowbit.go,
// signs applied as byte masks) and their scales (the reference's float32
// products, in its order), then either writes them in the integer form of
// DecodeInt8 (q = v + 128) or converts and multiplies them into float32:
// S·v, the reference's one rounding. The integer part is AVX2 code at both
// levels; the AVX512 level converts 16 weights per instruction instead of 8.

// lowbitKernels fills level l's rows for the low-bit types.
func lowbitKernels(l Level) {
	type kernels struct {
		typ          gguf.Type
		lb           *lowbit
		avx2, avx512 func(src *byte, dst *float32, n int)
		i8           func(w, q *byte, s *float32, n int)
	}
	for _, k := range []kernels{
		{gguf.TypeIQ2_XXS, lbIQ2_XXS, deqIQ2_XXSAVX2, deqIQ2_XXSAVX512, i8IQ2_XXSAVX2},
		{gguf.TypeIQ2_XS, lbIQ2_XS, deqIQ2_XSAVX2, deqIQ2_XSAVX512, i8IQ2_XSAVX2},
		{gguf.TypeIQ2_S, lbIQ2_S, deqIQ2_SAVX2, deqIQ2_SAVX512, i8IQ2_SAVX2},
		{gguf.TypeIQ1_S, lbIQ1_S, deqIQ1_SAVX2, deqIQ1_SAVX512, i8IQ1_SAVX2},
		{gguf.TypeIQ3_XXS, lbIQ3_XXS, deqIQ3_XXSAVX2, deqIQ3_XXSAVX512, i8IQ3_XXSAVX2},
		{gguf.TypeIQ3_S, lbIQ3_S, deqIQ3_SAVX2, deqIQ3_SAVX512, i8IQ3_SAVX2},
		{gguf.TypeIQ1_M, lbIQ1_M, deqIQ1_MAVX2, deqIQ1_MAVX512, i8IQ1_MAVX2},
		{gguf.TypeMXFP4, lbMXFP4, deqMXFP4AVX2, deqMXFP4AVX512, i8MXFP4AVX2},
		{gguf.TypeNVFP4, lbNVFP4, deqNVFP4AVX2, deqNVFP4AVX512, i8NVFP4AVX2},
	} {
		deq := k.avx2
		if l >= AVX512 {
			deq = k.avx512
		}
		levelDeq[l][k.typ] = blocks(k.lb.bs, k.lb.ts, deq)
		levelInt8[l][k.typ] = int8Blocks(k.lb, k.i8)
	}
}

// Tables of the kernels, all derived from the reference's.
var (
	// ksignMask[i] is the sign byte signs8(i) as eight byte masks (0xff
	// where the weight is negated), weight j in byte j.
	ksignMask [128]uint64
	// iq1sGrid8 is iq1sGrid times 8, as bytes (-8, 0, 8).
	iq1sGrid8 [2048][8]int8
	// e8m0Tab and ue4m3Tab are e8m0Half and ue4m3Half of every byte.
	e8m0Tab, ue4m3Tab [256]float32
	// halfPlus[ls] is 0.5 + ls, oddTab[ls] 1 + 2·ls: the i-quants' scale
	// factors, exact in float32.
	halfPlus, oddTab [16]float32
)

func init() {
	for i := range ksignMask {
		ksignMask[i] = signMasks[signs8(uint32(i))]
	}
	for e, c := range iq1sCodes {
		for i := range 8 {
			iq1sGrid8[e][i] = 8 * (int8(c>>(2*i)&3) - 1)
		}
	}
	for i := range 256 {
		e8m0Tab[i], ue4m3Tab[i] = e8m0Half(byte(i)), ue4m3Half(byte(i))
	}
	for i := range 16 {
		halfPlus[i], oddTab[i] = 0.5+float32(i), float32(1+2*i)
	}
}

// The kernels: deq* dequantize n blocks of src into dst, i8* decode n
// blocks of w into q (v + 128) and s (one scale per group).

//go:noescape
func deqIQ2_XXSAVX2(src *byte, dst *float32, n int)

//go:noescape
func deqIQ2_XXSAVX512(src *byte, dst *float32, n int)

//go:noescape
func i8IQ2_XXSAVX2(w, q *byte, s *float32, n int)

//go:noescape
func deqIQ2_XSAVX2(src *byte, dst *float32, n int)

//go:noescape
func deqIQ2_XSAVX512(src *byte, dst *float32, n int)

//go:noescape
func i8IQ2_XSAVX2(w, q *byte, s *float32, n int)

//go:noescape
func deqIQ1_SAVX2(src *byte, dst *float32, n int)

//go:noescape
func deqIQ1_SAVX512(src *byte, dst *float32, n int)

//go:noescape
func i8IQ1_SAVX2(w, q *byte, s *float32, n int)

//go:noescape
func deqIQ2_SAVX2(src *byte, dst *float32, n int)

//go:noescape
func deqIQ2_SAVX512(src *byte, dst *float32, n int)

//go:noescape
func i8IQ2_SAVX2(w, q *byte, s *float32, n int)

//go:noescape
func deqIQ3_XXSAVX2(src *byte, dst *float32, n int)

//go:noescape
func deqIQ3_XXSAVX512(src *byte, dst *float32, n int)

//go:noescape
func i8IQ3_XXSAVX2(w, q *byte, s *float32, n int)

//go:noescape
func deqIQ3_SAVX2(src *byte, dst *float32, n int)

//go:noescape
func deqIQ3_SAVX512(src *byte, dst *float32, n int)

//go:noescape
func i8IQ3_SAVX2(w, q *byte, s *float32, n int)

//go:noescape
func deqIQ1_MAVX2(src *byte, dst *float32, n int)

//go:noescape
func deqIQ1_MAVX512(src *byte, dst *float32, n int)

//go:noescape
func i8IQ1_MAVX2(w, q *byte, s *float32, n int)

//go:noescape
func deqMXFP4AVX2(src *byte, dst *float32, n int)

//go:noescape
func deqMXFP4AVX512(src *byte, dst *float32, n int)

//go:noescape
func i8MXFP4AVX2(w, q *byte, s *float32, n int)

//go:noescape
func deqNVFP4AVX2(src *byte, dst *float32, n int)

//go:noescape
func deqNVFP4AVX512(src *byte, dst *float32, n int)

//go:noescape
func i8NVFP4AVX2(w, q *byte, s *float32, n int)
