// Shared device helpers for ppl's CUDA kernels: number conversions that
// reproduce the Go reference bit for bit, and block reductions.
//
// Every conversion here is a port of a Go function named in its comment;
// they use integer arithmetic (or float64 where the Go code does) so that
// the GPU writes the same bytes as the CPU reference, not merely close ones.
#pragma once

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef long long i64;

// x86_cvt_i32: (int)f as x86's CVTTSS2SI computes it, which Go's float to
// integer conversions (and ggml's C casts) compile to on amd64: toward
// zero, and INT_MIN for NaN and for values outside int32's range, where
// the GPU's conversion saturates (+inf: INT_MAX) instead.
__device__ __forceinline__ int x86_cvt_i32(float f) {
	return f >= -2147483648.0f && f < 2147483648.0f ? (int)f : -2147483647 - 1;
}

// x86_div: a/b rounded, and a itself when a is NaN, as x86 passes a NaN
// operand on (the GPU gives its canonical NaN, 0x7fffffff): for a scale
// computed from a NaN amax, stored as the CPU stores it.
__device__ __forceinline__ float x86_div(float a, float b) { return a != a ? a : __fdiv_rn(a, b); }

// bf16 -> f32: quant.BF16ToF32 (exact).
__device__ __forceinline__ float bf16_to_f32(u16 h) { return __uint_as_float(((u32)h) << 16); }

// f32 -> bf16: quant.F32ToBF16 (ggml's GGML_FP32_TO_BF16): NaNs keep sign and
// top payload and are quieted; everything else rounds to nearest even.
__device__ __forceinline__ u16 f32_to_bf16(float f) {
	u32 u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40u);
	return (u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// f16 -> f32: quant.F16ToF32 (exact).
__device__ __forceinline__ float f16_to_f32(u16 h) {
	u32 sign = ((u32)(h & 0x8000u)) << 16;
	u32 e = h & 0x7c00u;
	if (e == 0) {
		// zero or subnormal: mant * 2^-24, exact in float32
		float v = (float)(h & 0x3ffu) * 5.9604644775390625e-08f;
		return __uint_as_float(sign | __float_as_uint(v));
	}
	if (e == 0x7c00u) return __uint_as_float(sign | 0x7f800000u | ((u32)(h & 0x3ffu) << 13));
	return __uint_as_float(sign | ((((u32)(h & 0x7fffu)) << 13) + ((127u - 15u) << 23)));
}

// down_exp is the power of two k that brings a largest magnitude of 2^15
// or more, given as its float32 bits, to [2^14, 2^15); 0 for one below
// 2^15 (no scaling) and for infinities and NaNs. See swiglu.cu.
__device__ __forceinline__ int down_exp(u32 mbits) {
	u32 e = (mbits >> 23) & 0xffu;
	if (mbits < 0x47000000u || e == 0xffu) return 0;
	return 141 - (int)e; // m in [2^(e-127), 2^(e-126))
}

// pow2f is 2^k for k in [-126, 127].
__device__ __forceinline__ float pow2f(int k) { return __uint_as_float((u32)(k + 127) << 23); }

// f32 -> f16: quant.F32ToF16, round to nearest even, overflow to infinity,
// NaN payload kept (top bits) and quieted.
__device__ __forceinline__ u16 f32_to_f16(float f) {
	u32 b = __float_as_uint(f);
	u16 sign = (u16)((b >> 16) & 0x8000u);
	int exp = (int)((b >> 23) & 0xffu);
	u32 mant = b & 0x7fffffu;
	if (exp == 0xff) {
		if (mant != 0) return sign | 0x7e00u | (u16)(mant >> 13);
		return sign | 0x7c00u;
	}
	int e = exp - 127 + 15;
	if (e >= 0x1f) return sign | 0x7c00u;
	if (e >= 1) {
		u32 h = ((u32)e << 10) + (mant >> 13);
		u32 rest = mant & 0x1fffu;
		if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
		return sign | (u16)h;
	}
	if (exp == 0) return sign;
	u32 m = mant | 0x800000u;
	u32 s = (u32)(126 - exp);
	if (s > 24) return sign;
	u32 h = m >> s;
	u32 rest = m & ((1u << s) - 1u);
	u32 half = 1u << (s - 1);
	if (rest > half || (rest == half && (h & 1u))) h++;
	return sign | (u16)h;
}

// kvcache.roundMini: round a >= 0 to mbits mantissa bits with smallest
// normal exponent emin (subnormals below), ties to even; float64 like Go.
__device__ __forceinline__ double round_mini(double a, int mbits, int emin) {
	if (a == 0.0) return 0.0;
	int e;
	frexp(a, &e); // a = f*2^e, f in [0.5, 1)
	int ex = max(e - 1, emin);
	double q = ldexp(1.0, ex - mbits);
	return rint(a / q) * q;
}

// kvcache.encodeMini: the bits of r (a value of the format, sign apart).
__device__ __forceinline__ u8 encode_mini(double r, int mbits, int emin, int bias) {
	if (r < ldexp(1.0, emin)) return (u8)(r / ldexp(1.0, emin - mbits));
	int e;
	frexp(r, &e);
	int ex = e - 1;
	double m = r / ldexp(1.0, ex - mbits) - ldexp(1.0, mbits);
	return (u8)(((u8)(ex + bias)) << mbits) | (u8)m;
}

// kvcache.E4M3: OCP FP8 E4M3, round to nearest even, saturating at ±448,
// NaN -> 0x7f with the sign.
__device__ __forceinline__ u8 e4m3_encode(float x) {
	u8 sign = signbit(x) ? 0x80 : 0;
	double a = fabs((double)x);
	if (a != a) return sign | 0x7f;
	if (a >= 448.0) return sign | 0x7e;
	double r = round_mini(a, 3, -6);
	if (r > 448.0) r = 448.0;
	return sign | encode_mini(r, 3, -6, 7);
}

// kvcache.E4M3Value.
__device__ __forceinline__ float e4m3_value(u8 b) {
	u32 sign = ((u32)(b & 0x80u)) << 24;
	u32 ex = (b >> 3) & 0xfu, m = b & 7u;
	if (ex == 0xfu && m == 7u) return __uint_as_float(sign | 0x7fc00000u);
	if (ex == 0) return __uint_as_float(sign | __float_as_uint((float)m * 0.001953125f)); // m * 2^-9
	return __uint_as_float(sign | ((ex - 7u + 127u) << 23) | (m << 20));
}

// kvcache.E2M1: OCP FP4 E2M1, round to nearest even, saturating at ±6;
// NaN -> +0.
__device__ __forceinline__ u8 e2m1_encode(float x) {
	u8 sign = signbit(x) ? 0x8 : 0;
	double a = fabs((double)x);
	if (a != a) return 0;
	if (a >= 6.0) return sign | 0x7;
	double r = round_mini(a, 1, 0);
	if (r > 6.0) r = 6.0;
	return sign | encode_mini(r, 1, 0, 1);
}

// kvcache.E2M1Value of the low 4 bits of b.
__device__ __forceinline__ float e2m1_value(u32 b) {
	u32 sign = (b & 8u) << 28;
	u32 ex = (b >> 1) & 3u, m = b & 1u;
	if (ex == 0) return __uint_as_float(sign | (m ? 0x3f000000u : 0u)); // 0 or 0.5
	return __uint_as_float(sign | ((ex - 1u + 127u) << 23) | (m << 22));
}

// gelu_tanh is the tanh form of GELU in float64, each operation rounded
// as nn's gelu64: 0.5·g·(1 + tanh(sqrt(2/π)·(g + 0.044715·g³))) (GeGLU's
// gate, the ungated GELU).
__device__ __forceinline__ double gelu_tanh(double g) {
	const double c = 0.7978845608028654; // sqrt(2/π)
	double inner = __dmul_rn(c, __dadd_rn(g, __dmul_rn(__dmul_rn(__dmul_rn(0.044715, g), g), g)));
	return __dmul_rn(__dmul_rn(0.5, g), __dadd_rn(1.0, tanh(inner)));
}

// clamp_swiglu is Step-3.5's clamped SwiGLU of the limit l in float64,
// each operation rounded as nn.ClampSwiGLU: min(silu(g), l)·clamp(u, -l, l).
__device__ __forceinline__ double clamp_swiglu(double g, double u, float limit) {
	double l = (double)limit;
	double s = fmin(__ddiv_rn(g, __dadd_rn(1.0, exp(-g))), l);
	return __dmul_rn(s, fmax(-l, fmin(u, l)));
}

// swiglu_clamp_in is ggml's SWIGLU_CLAMP of the limit l in float64, each
// operation rounded as nn.SwiGLUClampIn: silu(min(g, l))·clamp(u, -l, l).
__device__ __forceinline__ double swiglu_clamp_in(double g, double u, float limit) {
	double l = (double)limit;
	g = fmin(g, l);
	return __dmul_rn(__ddiv_rn(g, __dadd_rn(1.0, exp(-g))), fmax(-l, fmin(u, l)));
}

// warp reductions
__device__ __forceinline__ double warp_sum_d(double v) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}
__device__ __forceinline__ float warp_max_f(float v) {
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}
__device__ __forceinline__ float warp_sum_f(float v) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

// block_sum_d returns the sum of v over the block (blockDim.x a multiple of
// 32, at most 1024) to every thread. sh holds 32 doubles.
__device__ __forceinline__ double block_sum_d(double v, double* sh) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
	v = warp_sum_d(v);
	__syncthreads(); // sh may be in use by a previous reduction
	if (lane == 0) sh[w] = v;
	__syncthreads();
	double t = lane < nw ? sh[lane] : 0.0;
	return warp_sum_d(t);
}

// Key sets (nn.KeySet.Words, the keys each query row of a sparse attention
// reads): groups of n rows of (n+63)/64 words, key j the bit j mod 64 of
// word j/64; a set of one group serves every KV head.
typedef unsigned long long u64;

// key_row is row i's words for KV head g, or null without a set.
__device__ __forceinline__ const u64* key_row(const u64* keys, int groups, int g, int n, int i) {
	return keys ? keys + ((i64)(groups == 1 ? 0 : g) * n + i) * ((n + 63) >> 6) : nullptr;
}

// key_in reports whether row holds key j.
__device__ __forceinline__ bool key_in(const u64* row, int j) { return (row[j >> 6] >> (j & 63)) & 1; }

// range_bits is the bits of word w (keys [64·w, 64·w + 64)) of the keys
// [lo, hi).
__device__ __forceinline__ u64 range_bits(int w, int lo, int hi) {
	lo = max(lo - 64 * w, 0);
	hi = min(hi - 64 * w, 64);
	if (lo >= hi) return 0;
	const u64 upto = hi == 64 ? ~0ull : (1ull << hi) - 1;
	return upto & ~((1ull << lo) - 1);
}

// keys_any reports whether row holds one of the keys lo..hi (lo <= hi).
__device__ __forceinline__ bool keys_any(const u64* row, int lo, int hi) {
	for (int w = lo >> 6; w <= (hi >> 6); w++)
		if (row[w] & range_bits(w, lo, hi + 1)) return true;
	return false;
}

// butterflies: v (n, a power of two) <- its butterflies of stride 1, 2,
// …, n/2, (a, b) -> (a+b, a-b), each a float32 rounding: the
// Walsh-Hadamard transform without its scale (kvstore.cu's hadamard,
// fwht.cu).
__device__ __forceinline__ void butterflies(float* v, int n) {
	for (int h = 1; h < n; h *= 2)
		for (int i = 0; i < n; i += 2 * h)
			for (int j = i; j < i + h; j++) {
				float a = v[j], b = v[j + h];
				v[j] = __fadd_rn(a, b);
				v[j + h] = __fsub_rn(a, b);
			}
}
