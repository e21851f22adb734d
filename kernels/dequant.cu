// Weight dequantization on the device: rows of a matrix kept in its GGUF
// blocks, dequantized into the half-precision operand of a cuBLAS GEMM (or
// the float32 rows of an embedding) right before it is used, or (i8dec_*,
// at the end) decoded into their integers and group scales for the int8
// mode's integer GEMM (int8mm.cu).
//
// CPU reference: quant.Dequantize (ppl.dev/quant: legacy.go, kquants.go,
// iq4.go, lowbit.go, float.go), then one rounding to the operand's type:
// quant.F32ToF16 or quant.F32ToBF16 (none for float32 rows). Each weight is
// computed with the Go decoder's float32 operations in the Go decoder's
// order, each one rounded (__fmul_rn, __fadd_rn, __fsub_rn: nvcc may not
// contract them into an FMA), so the device writes the bits of the host's
// decoder. Most of these products are exact anyway (a half scale times a
// small integer); the ordered roundings matter for the subtraction of a
// minimum and for scales that are products of two values.
//
// One kernel per weight type, all with the same parameters:
//
//   out (rows, in) <- rows of w, as bf16 (otype 0), fp16 (1) or float32
//   (2), row r being idx[r] when idx is not null (an embedding's tokens)
//   and row0 + r otherwise (a slab of a matrix, an expert of a stack);
//   rowbytes is the size of one row of w in its type. in is a multiple of
//   8 and of the type's block size; grid is the i-quants' lattices (below;
//   unused by the other types, may be null). Each thread writes 8
//   consecutive values (one 16-byte store of halves, two of floats, so a
//   warp's stores are coalesced); grid-stride over rows · in/8, which is
//   below 2^32 (the launcher checks).
//
// Every type's sub-blocks (the weights that share a scale) are 16 or 32
// weights, so the 8 weights of a thread share one scale: each type's
// function g_<type>(b, p, y) decodes weights p..p+7 of block b (p a
// multiple of 8) into y, reading the scale once.
//
// Blocks are read byte by byte: a block's size (18, 22, 34 bytes ...) does
// not align its fields.
#include "common.cuh"

__device__ __forceinline__ u32 ld16(const u8* b) { return (u32)b[0] | ((u32)b[1] << 8); }
__device__ __forceinline__ u32 ld32(const u8* b) {
	return (u32)b[0] | ((u32)b[1] << 8) | ((u32)b[2] << 16) | ((u32)b[3] << 24);
}
__device__ __forceinline__ float h16(const u8* b) { return f16_to_f32((u16)ld16(b)); }

// The operand's half, one rounding of the decoded weight: fp16 by the
// hardware's conversion (round to nearest even, subnormals kept, overflow
// to infinity: quant.F32ToF16 on every finite value, in a fifth of the
// instructions of its port f32_to_f16, which the host harness uses), or
// bf16.
__device__ __forceinline__ u16 to_half(float v, int f16) {
	if (!f16) return f32_to_bf16(v);
#ifdef __CUDA_ARCH__
	u16 r;
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(v));
	return r;
#else
	return f32_to_f16(v);
#endif
}

// ---- F16, BF16 (blocks of 8 values).

__device__ __forceinline__ void g_f16(const u8* b, int, float* y) {
	for (int k = 0; k < 8; k++) y[k] = h16(b + 2 * k);
}
__device__ __forceinline__ void g_bf16(const u8* b, int, float* y) {
	for (int k = 0; k < 8; k++) y[k] = bf16_to_f32((u16)ld16(b + 2 * k));
}

// ---- The 32-weight formats (legacy.go): weight p < 16 is the low nibble of
// qs[p], weight p >= 16 the high nibble of qs[p-16].

// nibbles8: the 4-bit values of weights p..p+7 (p a multiple of 8) of a
// 32-weight half-split block whose bytes are qs.
__device__ __forceinline__ void nibbles8(const u8* qs, int p, u32* q) {
	const u8* s = qs + (p & 15);
	if (p < 16)
		for (int k = 0; k < 8; k++) q[k] = s[k] & 15u;
	else
		for (int k = 0; k < 8; k++) q[k] = s[k] >> 4;
}

// Q4_0: f16 d, qs[16]; y = (q-8)·d.
__device__ __forceinline__ void g_q4_0(const u8* b, int p, float* y) {
	float d = h16(b);
	u32 q[8];
	nibbles8(b + 2, p, q);
	for (int k = 0; k < 8; k++) y[k] = __fmul_rn((float)((int)q[k] - 8), d);
}

// Q4_1: f16 d, f16 m, qs[16]; y = q·d + m.
__device__ __forceinline__ void g_q4_1(const u8* b, int p, float* y) {
	float d = h16(b), m = h16(b + 2);
	u32 q[8];
	nibbles8(b + 4, p, q);
	for (int k = 0; k < 8; k++) y[k] = __fadd_rn(__fmul_rn((float)q[k], d), m);
}

// Q5_0: f16 d, qh (uint32), qs[16]; bit p of qh is weight p's fifth bit;
// y = (q-16)·d.
__device__ __forceinline__ void g_q5_0(const u8* b, int p, float* y) {
	float d = h16(b);
	u32 qh = ld32(b + 2) >> p, q[8];
	nibbles8(b + 6, p, q);
	for (int k = 0; k < 8; k++) y[k] = __fmul_rn((float)((int)(q[k] | ((qh >> k) & 1u) << 4) - 16), d);
}

// Q5_1: f16 d, f16 m, qh, qs[16]; y = q·d + m.
__device__ __forceinline__ void g_q5_1(const u8* b, int p, float* y) {
	float d = h16(b), m = h16(b + 2);
	u32 qh = ld32(b + 4) >> p, q[8];
	nibbles8(b + 8, p, q);
	for (int k = 0; k < 8; k++) y[k] = __fadd_rn(__fmul_rn((float)(q[k] | ((qh >> k) & 1u) << 4), d), m);
}

// Q8_0: f16 d, int8 qs[32]; y = q·d.
__device__ __forceinline__ void g_q8_0(const u8* b, int p, float* y) {
	float d = h16(b);
	for (int k = 0; k < 8; k++) y[k] = __fmul_rn((float)(signed char)b[2 + p + k], d);
}

// ---- The K-quants (kquants.go), 256 weights.

// Q2_K: scales[16] (low nibble scale, high nibble min), qs[64], f16 d,
// f16 dmin. Sub-block k = p/16 holds weights 128h + 32s + 16e + l.
__device__ __forceinline__ void g_q2_k(const u8* b, int p, float* y) {
	int k = p >> 4, l = p & 15, h = k >> 3, s = (k >> 1) & 3, e = k & 1;
	u32 sc = b[k];
	float dl = __fmul_rn(h16(b + 80), (float)(sc & 15u));
	float ml = __fmul_rn(h16(b + 82), (float)(sc >> 4));
	const u8* q = b + 16 + 32 * h + 16 * e + l;
	for (int j = 0; j < 8; j++) y[j] = __fsub_rn(__fmul_rn(dl, (float)((q[j] >> (2 * s)) & 3u)), ml);
}

// q3_scale: the signed 6-bit scale of sub-block k of Q3_K, from its
// scales[12] sb (q3Scales).
__device__ __forceinline__ int q3_scale(const u8* sb, int k) {
	u32 low = k < 8 ? sb[k] & 15u : sb[k - 8] >> 4;
	u32 high = (sb[8 + k % 4] >> (2 * (k / 4))) & 3u;
	return (int)(low | high << 4) - 32;
}

// Q3_K: hmask[32], qs[64], scales[12] (sixteen 6-bit signed scales, q3Scales),
// f16 d.
__device__ __forceinline__ void g_q3_k(const u8* b, int p, float* y) {
	int k = p >> 4, l = p & 15, h = k >> 3, s = (k >> 1) & 3, e = k & 1;
	float dl = __fmul_rn(h16(b + 108), (float)q3_scale(b + 96, k));
	const u8 *q = b + 32 + 32 * h + 16 * e + l, *hm = b + 16 * e + l;
	for (int j = 0; j < 8; j++) {
		int qi = (int)((q[j] >> (2 * s)) & 3u) - 4 + 4 * (int)((hm[j] >> (4 * h + s)) & 1u);
		y[j] = __fmul_rn(dl, (float)qi);
	}
}

// scaleMinK4: the 6-bit scale and min of sub-block j of Q4_K and Q5_K.
__device__ __forceinline__ void scale_min_k4(int j, const u8* q, u32* sc, u32* m) {
	if (j < 4) {
		*sc = q[j] & 63u;
		*m = q[j + 4] & 63u;
	} else {
		*sc = (q[j + 4] & 15u) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

// Q4_K: f16 d, f16 dmin, scales[12], qs[128]. Chunk c = p/64: its first 32
// weights the low nibbles of qs[32c..], sub-block 2c; the next 32 the high
// nibbles, sub-block 2c+1. y = d·sc·q - dmin·m.
__device__ __forceinline__ void g_q4_k(const u8* b, int p, float* y) {
	int c = p >> 6, hi = (p >> 5) & 1, l = p & 31;
	u32 sc, m;
	scale_min_k4(2 * c + hi, b + 4, &sc, &m);
	float d1 = __fmul_rn(h16(b), (float)sc), dm = __fmul_rn(h16(b + 2), (float)m);
	const u8* q = b + 16 + 32 * c + l;
	for (int j = 0; j < 8; j++) y[j] = __fsub_rn(__fmul_rn(d1, (float)(hi ? q[j] >> 4 : q[j] & 15u)), dm);
}

// Q5_K: Q4_K's layout plus qh[32]: bit 2c (2c+1) of qh[l] is the fifth bit
// of the low (high) nibble of qs[32c+l].
__device__ __forceinline__ void g_q5_k(const u8* b, int p, float* y) {
	int c = p >> 6, hi = (p >> 5) & 1, l = p & 31;
	u32 sc, m;
	scale_min_k4(2 * c + hi, b + 4, &sc, &m);
	float d1 = __fmul_rn(h16(b), (float)sc), dm = __fmul_rn(h16(b + 2), (float)m);
	const u8 *q = b + 48 + 32 * c + l, *qh = b + 16 + l;
	int sh = 2 * c + hi;
	for (int j = 0; j < 8; j++) {
		u32 v = (hi ? q[j] >> 4 : q[j] & 15u) | ((qh[j] >> sh) & 1u) << 4;
		y[j] = __fsub_rn(__fmul_rn(d1, (float)v), dm);
	}
}

// Q6_K: ql[128], qh[64], int8 scales[16], f16 d. Half h = p/128: quarter
// k of it takes 4 bits of ql[64h + l] or ql[64h + l + 32] and 2 bits of
// qh[32h + l], l = p%32; y = d·scale·(q-32).
__device__ __forceinline__ void g_q6_k(const u8* b, int p, float* y) {
	int h = p >> 7, k = (p >> 5) & 3, l = p & 31;
	const u8 *ql = b + 64 * h + l + ((k & 1) ? 32 : 0), *qh = b + 128 + 32 * h + l;
	float ds = __fmul_rn(h16(b + 208), (float)(signed char)b[192 + 8 * h + l / 16 + 2 * k]);
	for (int j = 0; j < 8; j++) {
		u32 q = ((k & 2) ? ql[j] >> 4 : ql[j] & 15u) | ((qh[j] >> (2 * k)) & 3u) << 4;
		y[j] = __fmul_rn(ds, (float)((int)q - 32));
	}
}

// ---- IQ4_NL and IQ4_XS (iq4.go): ggml's kvalues_iq4nl.

__constant__ signed char iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// IQ4_NL: f16 d, qs[16] as Q4_0; y = d·table[q].
__device__ __forceinline__ void g_iq4_nl(const u8* b, int p, float* y) {
	float d = h16(b);
	u32 q[8];
	nibbles8(b + 2, p, q);
	for (int k = 0; k < 8; k++) y[k] = __fmul_rn(d, (float)iq4_values[q[k]]);
}

// IQ4_XS: f16 d, scales_h (uint16), scales_l[4], qs[128]; sub-block k =
// p/32 has the 6-bit scale (low nibble of scales_l[k/2] >> 4(k%2), bits 2k
// of scales_h) - 32 (iq4xs_scale) and its 16 bytes of qs as IQ4_NL;
// y = d·scale·table[q].
__device__ __forceinline__ int iq4xs_scale(const u8* b, int k) {
	u32 lo = (b[4 + k / 2] >> (4 * (k % 2))) & 15u, hi = (ld16(b + 2) >> (2 * k)) & 3u;
	return (int)(lo | hi << 4) - 32;
}
__device__ __forceinline__ void g_iq4_xs(const u8* b, int p, float* y) {
	int k = p >> 5;
	float dl = __fmul_rn(h16(b), (float)iq4xs_scale(b, k));
	u32 q[8];
	nibbles8(b + 8 + 16 * k, p & 31, q);
	for (int j = 0; j < 8; j++) y[j] = __fmul_rn(dl, (float)iq4_values[q[j]]);
}

// ---- The 4-bit floats and the ternary types (lowbit.go): y = S·v, S the
// group's scale and v a small integer, exactly as the Go decoder's integer
// form.

__constant__ signed char fp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// e8m0Half: 2^(e-128) (e = 0 and 1 subnormal).
__device__ __forceinline__ float e8m0_half(u32 e) {
	return e < 2 ? __uint_as_float(0x00200000u << e) : __uint_as_float((e - 1) << 23);
}

// ue4m3Half: the unsigned E4M3 scale halved; 0 and 0x7f give 0.
__device__ __forceinline__ float ue4m3_half(u32 x) {
	if (x == 0 || x == 0x7f) return 0.0f;
	u32 e = (x >> 3) & 15u, m = x & 7u;
	if (e == 0) return __fmul_rn((float)m, 0.0009765625f); // m·2^-10
	return __fmul_rn((float)(8 + m), __uint_as_float((127u + e - 11u) << 23)); // (1+m/8)·2^(e-8)
}

// MXFP4: E8M0 e, qs[16] as Q4_0; y = fp4[q]·2^(e-128).
__device__ __forceinline__ void g_mxfp4(const u8* b, int p, float* y) {
	float s = e8m0_half(b[0]);
	u32 q[8];
	nibbles8(b + 1, p, q);
	for (int k = 0; k < 8; k++) y[k] = __fmul_rn(s, (float)fp4_values[q[k]]);
}

// NVFP4 (64 weights): four UE4M3 scales, qs[32] at 4; sub-block s = p/16
// has its 8 bytes of qs, low nibbles the first 8 weights.
__device__ __forceinline__ void g_nvfp4(const u8* b, int p, float* y) {
	int s = p >> 4;
	float sc = ue4m3_half(b[s]);
	const u8* qs = b + 4 + 8 * s;
	for (int k = 0; k < 8; k++) y[k] = __fmul_rn(sc, (float)fp4_values[(p & 8) ? qs[k] >> 4 : qs[k] & 15u]);
}

// TQ2_0: qs[64], f16 d at 64; weight 128h + 32l + m is bits 2l of
// qs[32h + m]; y = d·(digit-1).
__device__ __forceinline__ void g_tq2_0(const u8* b, int p, float* y) {
	int h = p >> 7, l = (p >> 5) & 3, m = p & 31;
	float d = h16(b + 64);
	for (int k = 0; k < 8; k++) y[k] = __fmul_rn(d, (float)((int)((b[32 * h + m + k] >> (2 * l)) & 3u) - 1));
}

// Q1_0: f16 d, then qs[16]: weight p's sign is bit p%8 of qs[p/8] (p a
// multiple of 8: one byte holds the 8), y = d where set, -d where not.
__device__ __forceinline__ void g_q1_0(const u8* b, int p, float* y) {
	float d = h16(b);
	u32 x = b[2 + (p >> 3)];
	for (int k = 0; k < 8; k++) y[k] = __fmul_rn(d, (float)((int)((x >> k) & 1u) * 2 - 1));
}

// Q2_0: f16 d, then qs[16]: weight p's code is bits 2(p%4).. of qs[p/4],
// y = d·(code - 1).
__device__ __forceinline__ void g_q2_0(const u8* b, int p, float* y) {
	float d = h16(b);
	for (int k = 0; k < 8; k++) y[k] = __fmul_rn(d, (float)((int)((b[2 + ((p + k) >> 2)] >> (2 * ((p + k) & 3))) & 3u) - 1));
}

// TQ1_0: qs[48] (five base-3 digits a byte), qh[4] at 48 (four), f16 d at
// 52; digit n of byte x is ((x·3^n mod 256)·3) >> 8. Weights 0-159 digit
// p/32 of qs[p%32]; 160-239 digit (p-160)/16 of qs[32 + p%16]; 240-255
// digit (p-240)/4 of qh[p%4]; y = d·(digit-1).
__device__ __forceinline__ int tq1_digit(const u8* b, int p) {
	int n, m;
	if (p < 160) {
		n = p / 32, m = p % 32;
	} else if (p < 240) {
		n = (p - 160) / 16, m = 32 + (p - 160) % 16;
	} else {
		n = (p - 240) / 4, m = 48 + (p - 240) % 4;
	}
	u32 pow3 = n == 0 ? 1u : n == 1 ? 3u : n == 2 ? 9u : n == 3 ? 27u : 81u;
	u32 x = (b[m] * pow3) & 255u;
	return (int)((x * 3u) >> 8);
}
__device__ __forceinline__ void g_tq1_0(const u8* b, int p0, float* y) {
	float d = h16(b + 52);
	for (int k = 0; k < 8; k++) y[k] = __fmul_rn(d, (float)(tq1_digit(b, p0 + k) - 1));
}

// ---- The i-quants (lowbit.go): grid values with signs, times a group
// scale. Their lattices are in grid, a device buffer the engine uploads
// from the Go tables (iqGrids in score/cuda/qweights.go, read back from
// ppl.dev/quant's own decoder, so there is one source): iq2xxs (256 × 8
// bytes) at 0, iq2xs (512 × 8) at 2048, iq2s (1024 × 8) at 6144, iq3xxs
// (256 × 4) at 14336, iq3s (512 × 4) at 15360, iq1s (2048 × 8, int8 -1, 0,
// 1) at 17408; 33792 bytes. A thread's 8 weights are one grid entry of 8,
// or two of 4, with one scale and one byte of signs.
#define GRID_IQ2XXS 0
#define GRID_IQ2XS 2048
#define GRID_IQ2S 6144
#define GRID_IQ3XXS 14336
#define GRID_IQ3S 15360
#define GRID_IQ1S 17408

// signs8: ggml's ksigns_iq2xs[i & 127], seven stored sign bits and the
// parity bit.
__device__ __forceinline__ u32 signs8(u32 i) {
	i &= 127u;
	u32 p = i ^ (i >> 4);
	p ^= p >> 2;
	p ^= p >> 1;
	return i | (p & 1u) << 7;
}

// the scale d·(0.5 + ls)·f of IQ2_* (f = 0.25) and IQ3_XXS (f = 0.5).
__device__ __forceinline__ float iq_scale(float d, u32 ls, float f) {
	return __fmul_rn(__fmul_rn(d, __fadd_rn(0.5f, (float)ls)), f);
}

// signed8: y[j] = s·±g[j], negated where bit j of sign is set; g0 holds
// the first 4 values, g1 the last 4.
__device__ __forceinline__ void signed8(float s, const u8* g0, const u8* g1, u32 sign, float* y) {
	for (int j = 0; j < 8; j++) {
		int g = j < 4 ? g0[j] : g1[j - 4];
		y[j] = __fmul_rn(s, (float)((sign >> j) & 1u ? -g : g));
	}
}

// IQ2_XXS (66 bytes): f16 d; per 32 weights 4 grid indices and a uint32
// of four 7-bit sign indices and the scale in bits 28-31.
__device__ __forceinline__ void g_iq2_xxs(const u8* b, int p, float* y, const u8* grid) {
	int ib = p >> 5, l = (p >> 3) & 3;
	const u8* g = b + 2 + 8 * ib;
	u32 aux = ld32(g + 4);
	const u8* e = grid + GRID_IQ2XXS + 8 * g[l];
	signed8(iq_scale(h16(b), aux >> 28, 0.25f), e, e + 4, signs8(aux >> (7 * l)), y);
}

// IQ2_XS (74 bytes): f16 d; 32 uint16 (9-bit index, 7-bit sign index);
// scales[8] at 66, a nibble per 16 weights.
__device__ __forceinline__ void g_iq2_xs(const u8* b, int p, float* y, const u8* grid) {
	int ib = p >> 5, l = (p >> 3) & 3;
	u32 v = ld16(b + 2 + 8 * ib + 2 * l), sc = b[66 + ib];
	const u8* e = grid + GRID_IQ2XS + 8 * (v & 511u);
	signed8(iq_scale(h16(b), l < 2 ? sc & 15u : sc >> 4, 0.25f), e, e + 4, signs8(v >> 9), y);
}

// IQ2_S (82 bytes): f16 d; qs[32] the index's low 8 bits; signs[32] at
// 34; qh[8] at 66 its bits 8-9; scales[8] at 74 as IQ2_XS.
__device__ __forceinline__ void g_iq2_s(const u8* b, int p, float* y, const u8* grid) {
	int ib = p >> 5, l = (p >> 3) & 3;
	u32 idx = b[2 + 4 * ib + l] | (((u32)b[66 + ib] << (8 - 2 * l)) & 0x300u), sc = b[74 + ib];
	const u8* e = grid + GRID_IQ2S + 8 * idx;
	signed8(iq_scale(h16(b), l < 2 ? sc & 15u : sc >> 4, 0.25f), e, e + 4, b[34 + 4 * ib + l], y);
}

// IQ3_XXS (98 bytes): f16 d; qs[64], an index per 4 weights; per 32
// weights a uint32 at 66 of four 7-bit sign indices and the scale.
__device__ __forceinline__ void g_iq3_xxs(const u8* b, int p, float* y, const u8* grid) {
	int ib = p >> 5, l = (p >> 3) & 3;
	u32 aux = ld32(b + 66 + 4 * ib);
	const u8* qs = b + 2 + 8 * ib + 2 * l;
	signed8(iq_scale(h16(b), aux >> 28, 0.5f), grid + GRID_IQ3XXS + 4 * qs[0], grid + GRID_IQ3XXS + 4 * qs[1],
	        signs8(aux >> (7 * l)), y);
}

// IQ3_S (110 bytes): f16 d; qs[64] the low 8 bits of an index per 4
// weights; qh[8] at 66 the ninth bits; signs[32] at 74; scales[4] at 106,
// a nibble per 32 weights; y = d·(1+2·ls)·±grid.
__device__ __forceinline__ void g_iq3_s(const u8* b, int p, float* y, const u8* grid) {
	int ib = p >> 5, l = (p >> 3) & 3;
	u32 qh = b[66 + ib];
	u32 i1 = b[2 + 8 * ib + 2 * l] | ((qh << (8 - 2 * l)) & 256u);
	u32 i2 = b[2 + 8 * ib + 2 * l + 1] | ((qh << (7 - 2 * l)) & 256u);
	float s = __fmul_rn(h16(b), (float)(1 + 2 * (int)((b[106 + ib / 2] >> (4 * (ib % 2))) & 15u)));
	signed8(s, grid + GRID_IQ3S + 4 * i1, grid + GRID_IQ3S + 4 * i2, b[74 + 4 * ib + l], y);
}

// iq1_8: y[j] = s·(8·grid[j] ± 1), grid in -1, 0, 1.
__device__ __forceinline__ void iq1_8(float s, const u8* grid, u32 idx, bool neg, float* y) {
	const u8* e = grid + GRID_IQ1S + 8 * idx;
	for (int j = 0; j < 8; j++) y[j] = __fmul_rn(s, (float)(8 * (int)(signed char)e[j] + (neg ? -1 : 1)));
}

// IQ1_S (50 bytes): f16 d; qs[32] at 2, the index's low 8 bits; per 32
// weights a uint16 at 34: 3 high bits per index, the scale in bits 12-14,
// the shift's sign in bit 15; y = d·(2·ls+1)/8 · (8·grid ± 1).
__device__ __forceinline__ void g_iq1_s(const u8* b, int p, float* y, const u8* grid) {
	int ib = p >> 5, l = (p >> 3) & 3;
	u32 qh = ld16(b + 34 + 2 * ib);
	float s = __fmul_rn(__fmul_rn(h16(b), (float)(2 * (int)((qh >> 12) & 7u) + 1)), 0.125f);
	iq1_8(s, grid, b[2 + 4 * ib + l] | ((qh >> (3 * l)) & 7u) << 8, (qh & 0x8000u) != 0, y);
}

// IQ1_M (56 bytes): qs[32]; qh[16] at 32, a nibble per 8 weights (3 index
// bits, the shift's sign); four uint16 at 48: 3-bit scales per 16 weights
// and, in their top nibbles, the f16 d.
__device__ __forceinline__ float iq1m_d(const u8* b) {
	u32 sc0 = ld16(b + 48), sc1 = ld16(b + 50), sc2 = ld16(b + 52), sc3 = ld16(b + 54);
	return f16_to_f32((u16)((sc0 >> 12) | ((sc1 >> 8) & 0xf0u) | ((sc2 >> 4) & 0xf00u) | (sc3 & 0xf000u)));
}
// iq1m_scale: the scale of the 16 weights h (0 or 1) of group ib,
// d·(2·ls+1)/8.
__device__ __forceinline__ float iq1m_scale(const u8* b, float d, int ib, int h) {
	u32 ls = (ld16(b + 48 + 2 * (ib / 2)) >> (6 * (ib % 2) + 3 * h)) & 7u;
	return __fmul_rn(__fmul_rn(d, (float)(2 * (int)ls + 1)), 0.125f);
}
__device__ __forceinline__ void g_iq1_m(const u8* b, int p, float* y, const u8* grid) {
	int ib = p >> 5, h = (p >> 4) & 1, l = (p >> 3) & 3;
	float s = iq1m_scale(b, iq1m_d(b), ib, h);
	u32 nb = b[32 + 2 * ib + l / 2] >> (4 * (l % 2));
	iq1_8(s, grid, b[4 * ib + l] | (nb & 7u) << 8, (nb & 8u) != 0, y);
}

// DEQUANT defines kernel name for blocks of BS weights in TS bytes, the 8
// weights from p of block b being fn(b, p, y) (DEQUANT_GRID: fn(b, p, y,
// grid)).
#define DEQUANT_GRID(name, BS, TS, fn, GRIDARG)                                                      \
	extern "C" __global__ void name(void* __restrict__ out, const u8* __restrict__ w,              \
	                                const int* __restrict__ idx, i64 row0, int rows, int in,       \
	                                i64 rowbytes, int otype, const u8* __restrict__ grid) {        \
		u32 per = (u32)in >> 3;                                                                \
		u32 n = (u32)rows * per;                                                               \
		for (u32 g = blockIdx.x * blockDim.x + threadIdx.x; g < n; g += gridDim.x * blockDim.x) { \
			u32 r = g / per;                                                               \
			u32 c = (g - r * per) << 3;                                                    \
			i64 src = idx ? (i64)idx[r] : row0 + r;                                        \
			const u8* b = w + src * rowbytes + (i64)(c / (BS)) * (TS);                     \
			float y[8];                                                                    \
			fn(b, (int)(c % (BS)), y GRIDARG);                                             \
			if (otype == 2) {                                                              \
				float4* o = (float4*)((float*)out + (i64)r * in + c);                  \
				o[0] = make_float4(y[0], y[1], y[2], y[3]);                            \
				o[1] = make_float4(y[4], y[5], y[6], y[7]);                            \
				continue;                                                              \
			}                                                                              \
			uint4 v;                                                                       \
			v.x = to_half(y[0], otype) | (u32)to_half(y[1], otype) << 16;                  \
			v.y = to_half(y[2], otype) | (u32)to_half(y[3], otype) << 16;                  \
			v.z = to_half(y[4], otype) | (u32)to_half(y[5], otype) << 16;                  \
			v.w = to_half(y[6], otype) | (u32)to_half(y[7], otype) << 16;                  \
			*(uint4*)((u16*)out + (i64)r * in + c) = v;                                    \
		}                                                                                      \
	}
#define DEQUANT(name, BS, TS, fn) DEQUANT_GRID(name, BS, TS, fn, )
#define WITH_GRID , grid

DEQUANT(dequant_f16, 8, 16, g_f16)
DEQUANT(dequant_bf16, 8, 16, g_bf16)
DEQUANT(dequant_q4_0, 32, 18, g_q4_0)
DEQUANT(dequant_q4_1, 32, 20, g_q4_1)
DEQUANT(dequant_q5_0, 32, 22, g_q5_0)
DEQUANT(dequant_q5_1, 32, 24, g_q5_1)
DEQUANT(dequant_q8_0, 32, 34, g_q8_0)
DEQUANT(dequant_q2_k, 256, 84, g_q2_k)
DEQUANT(dequant_q3_k, 256, 110, g_q3_k)
DEQUANT(dequant_q4_k, 256, 144, g_q4_k)
DEQUANT(dequant_q5_k, 256, 176, g_q5_k)
DEQUANT(dequant_q6_k, 256, 210, g_q6_k)
DEQUANT(dequant_iq4_nl, 32, 18, g_iq4_nl)
DEQUANT(dequant_iq4_xs, 256, 136, g_iq4_xs)
DEQUANT(dequant_mxfp4, 32, 17, g_mxfp4)
DEQUANT(dequant_nvfp4, 64, 36, g_nvfp4)
DEQUANT(dequant_tq1_0, 256, 54, g_tq1_0)
DEQUANT(dequant_tq2_0, 256, 66, g_tq2_0)
DEQUANT(dequant_q1_0, 128, 18, g_q1_0)
DEQUANT(dequant_q2_0, 64, 18, g_q2_0)
DEQUANT_GRID(dequant_iq2_xxs, 256, 66, g_iq2_xxs, WITH_GRID)
DEQUANT_GRID(dequant_iq2_xs, 256, 74, g_iq2_xs, WITH_GRID)
DEQUANT_GRID(dequant_iq2_s, 256, 82, g_iq2_s, WITH_GRID)
DEQUANT_GRID(dequant_iq3_xxs, 256, 98, g_iq3_xxs, WITH_GRID)
DEQUANT_GRID(dequant_iq3_s, 256, 110, g_iq3_s, WITH_GRID)
DEQUANT_GRID(dequant_iq1_s, 256, 50, g_iq1_s, WITH_GRID)
DEQUANT_GRID(dequant_iq1_m, 256, 56, g_iq1_m, WITH_GRID)

// ---- Integer decoding: the int8 operand of the weights for the int8
// tensor-core GEMM (--activations int8).
//
// CPU reference: quant.DecodeInt8 (ppl.dev/quant: int8.go, lowbit.go),
// which writes each weight as an unsigned byte Q and a scale S (and, for
// the types with a minimum, M) per group of G weights (quant.Int8Format:
// G = 16 or 32), weight = S·(Q - Offset) + M. The kernels write Q - Offset
// as a signed byte (every type's fits), and S and M as float32 computed
// with the Go decoder's operations in its order, each one rounded (the
// dequantization kernels' scales, above, are the same expressions), so the
// device writes the bits of the host's decoder.
//
// One kernel i8dec_<type> per weight type, all with the same parameters:
//
//   q (rows, in) signed bytes, s and m (rows, in/G) floats <- rows row0 ..
//   row0+rows-1 of w, rowbytes bytes each; m only for the types with a
//   minimum (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K), untouched (may be null) for
//   the others; grid the i-quants' lattices (null for the other types). in
//   is a multiple of 32 and of the type's block size; q is 16-byte
//   aligned.
//
// Each thread decodes 32 consecutive weights of a row (a group of 32 or
// two of 16, never across a block) and writes their bytes with two
// 16-byte stores and their one or two scales (and minima); grid-stride
// over rows · in/32, which is below 2^32 (the launcher checks). Each
// type's function i8_<type>(b, p, y, s, m, grid) decodes weights p..p+31
// of block b (p a multiple of 32) into y and the scales and minima of
// their groups into s[0..] and m[0..].

// nibbles32: the 4-bit values plus off of a 32-weight half-split block
// whose bytes are qs (weight k < 16 the low nibble of qs[k], weight k+16
// its high nibble).
__device__ __forceinline__ void nibbles32(const u8* qs, int off, int* y) {
	for (int p = 0; p < 32; p += 8) {
		u32 q[8];
		nibbles8(qs, p, q);
		for (int k = 0; k < 8; k++) y[p + k] = (int)q[k] + off;
	}
}

// signed8i: y[j] = ±g[j], negated where bit j of sign is set; g0 holds
// the first 4 values, g1 the last 4 (signed8's integers).
__device__ __forceinline__ void signed8i(const u8* g0, const u8* g1, u32 sign, int* y) {
	for (int j = 0; j < 8; j++) {
		int g = j < 4 ? g0[j] : g1[j - 4];
		y[j] = (sign >> j) & 1u ? -g : g;
	}
}

// iq1_8i: y[j] = 8·grid[j] ± 1 (iq1_8's integers).
__device__ __forceinline__ void iq1_8i(const u8* grid, u32 idx, bool neg, int* y) {
	const u8* e = grid + GRID_IQ1S + 8 * idx;
	for (int j = 0; j < 8; j++) y[j] = 8 * (int)(signed char)e[j] + (neg ? -1 : 1);
}

// Q4_0: q - 8.
__device__ __forceinline__ void i8_q4_0(const u8* b, int, int* y, float* s, float*, const u8*) {
	s[0] = h16(b);
	nibbles32(b + 2, -8, y);
}

// Q4_1: q; S = d, M = m.
__device__ __forceinline__ void i8_q4_1(const u8* b, int, int* y, float* s, float* m, const u8*) {
	s[0] = h16(b);
	m[0] = h16(b + 2);
	nibbles32(b + 4, 0, y);
}

// Q5_0: q - 16, bit k of qh weight k's fifth bit.
__device__ __forceinline__ void i8_q5_0(const u8* b, int, int* y, float* s, float*, const u8*) {
	s[0] = h16(b);
	u32 qh = ld32(b + 2);
	nibbles32(b + 6, -16, y);
	for (int k = 0; k < 32; k++) y[k] += (int)((qh >> k) & 1u) << 4;
}

// Q5_1: q; S = d, M = m.
__device__ __forceinline__ void i8_q5_1(const u8* b, int, int* y, float* s, float* m, const u8*) {
	s[0] = h16(b);
	m[0] = h16(b + 2);
	u32 qh = ld32(b + 4);
	nibbles32(b + 8, 0, y);
	for (int k = 0; k < 32; k++) y[k] += (int)((qh >> k) & 1u) << 4;
}

// Q8_0: the signed bytes themselves.
__device__ __forceinline__ void i8_q8_0(const u8* b, int, int* y, float* s, float*, const u8*) {
	s[0] = h16(b);
	for (int k = 0; k < 32; k++) y[k] = (signed char)b[2 + k];
}

// Q2_K: sub-blocks k = p/16 and k+1 (e = 0 and 1) are the 2-bit fields s
// of qs[32h .. 32h+31]; S = d·(sc&15), M = -(dmin·(sc>>4)).
__device__ __forceinline__ void i8_q2_k(const u8* b, int p, int* y, float* s, float* m, const u8*) {
	int k = p >> 4, h = k >> 3, sh = (k >> 1) & 3;
	float d = h16(b + 80), dmin = h16(b + 82);
	for (int e = 0; e < 2; e++) {
		u32 sc = b[k + e];
		s[e] = __fmul_rn(d, (float)(sc & 15u));
		m[e] = -__fmul_rn(dmin, (float)(sc >> 4));
	}
	const u8* q = b + 16 + 32 * h;
	for (int l = 0; l < 32; l++) y[l] = (q[l] >> (2 * sh)) & 3u;
}

// Q3_K: as Q2_K, with the third bit from hmask[0..31]; q - 4; S =
// d·scale.
__device__ __forceinline__ void i8_q3_k(const u8* b, int p, int* y, float* s, float*, const u8*) {
	int k = p >> 4, h = k >> 3, sh = (k >> 1) & 3;
	float d = h16(b + 108);
	for (int e = 0; e < 2; e++) s[e] = __fmul_rn(d, (float)q3_scale(b + 96, k + e));
	const u8* q = b + 32 + 32 * h;
	for (int l = 0; l < 32; l++)
		y[l] = (int)(((q[l] >> (2 * sh)) & 3u) | ((b[l] >> (4 * h + sh)) & 1u) << 2) - 4;
}

// Q4_K: sub-block 2c+hi, the low (hi = 0) or high nibbles of qs[32c ..];
// S = d·sc, M = -(dmin·m).
__device__ __forceinline__ void i8_q4_k(const u8* b, int p, int* y, float* s, float* m, const u8*) {
	int c = p >> 6, hi = (p >> 5) & 1;
	u32 sc, mn;
	scale_min_k4(2 * c + hi, b + 4, &sc, &mn);
	s[0] = __fmul_rn(h16(b), (float)sc);
	m[0] = -__fmul_rn(h16(b + 2), (float)mn);
	const u8* q = b + 16 + 32 * c;
	for (int l = 0; l < 32; l++) y[l] = hi ? q[l] >> 4 : q[l] & 15u;
}

// Q5_K: Q4_K plus the fifth bit, bit 2c+hi of qh[l].
__device__ __forceinline__ void i8_q5_k(const u8* b, int p, int* y, float* s, float* m, const u8*) {
	int c = p >> 6, hi = (p >> 5) & 1, sh = 2 * c + hi;
	u32 sc, mn;
	scale_min_k4(sh, b + 4, &sc, &mn);
	s[0] = __fmul_rn(h16(b), (float)sc);
	m[0] = -__fmul_rn(h16(b + 2), (float)mn);
	const u8 *q = b + 48 + 32 * c, *qh = b + 16;
	for (int l = 0; l < 32; l++) y[l] = (hi ? q[l] >> 4 : q[l] & 15u) | ((qh[l] >> sh) & 1u) << 4;
}

// Q6_K: quarter k of half h (as g_q6_k), q - 32; S = d·scale of
// sub-blocks p/16 and p/16 + 1.
__device__ __forceinline__ void i8_q6_k(const u8* b, int p, int* y, float* s, float*, const u8*) {
	int h = p >> 7, k = (p >> 5) & 3;
	float d = h16(b + 208);
	for (int e = 0; e < 2; e++) s[e] = __fmul_rn(d, (float)(signed char)b[192 + (p >> 4) + e]);
	const u8 *ql = b + 64 * h + ((k & 1) ? 32 : 0), *qh = b + 128 + 32 * h;
	for (int l = 0; l < 32; l++)
		y[l] = (int)(((k & 2) ? ql[l] >> 4 : ql[l] & 15u) | ((qh[l] >> (2 * k)) & 3u) << 4) - 32;
}

// IQ4_NL: the table's values.
__device__ __forceinline__ void i8_iq4_nl(const u8* b, int, int* y, float* s, float*, const u8*) {
	s[0] = h16(b);
	nibbles32(b + 2, 0, y);
	for (int k = 0; k < 32; k++) y[k] = iq4_values[y[k]];
}

// IQ4_XS: sub-block p/32; S = d·scale.
__device__ __forceinline__ void i8_iq4_xs(const u8* b, int p, int* y, float* s, float*, const u8*) {
	int k = p >> 5;
	s[0] = __fmul_rn(h16(b), (float)iq4xs_scale(b, k));
	nibbles32(b + 8 + 16 * k, 0, y);
	for (int j = 0; j < 32; j++) y[j] = iq4_values[y[j]];
}

// IQ2_XXS: group p/32, four grid entries; S = d·(0.5+ls)·0.25.
__device__ __forceinline__ void i8_iq2_xxs(const u8* b, int p, int* y, float* s, float*, const u8* grid) {
	const u8* g = b + 2 + 8 * (p >> 5);
	u32 aux = ld32(g + 4);
	s[0] = iq_scale(h16(b), aux >> 28, 0.25f);
	for (int l = 0; l < 4; l++) {
		const u8* e = grid + GRID_IQ2XXS + 8 * g[l];
		signed8i(e, e + 4, signs8(aux >> (7 * l)), y + 8 * l);
	}
}

// IQ2_XS: group ib = p/32, its two 16-weight scales the nibbles of
// scales[ib].
__device__ __forceinline__ void i8_iq2_xs(const u8* b, int p, int* y, float* s, float*, const u8* grid) {
	int ib = p >> 5;
	u32 sc = b[66 + ib];
	float d = h16(b);
	s[0] = iq_scale(d, sc & 15u, 0.25f);
	s[1] = iq_scale(d, sc >> 4, 0.25f);
	for (int l = 0; l < 4; l++) {
		u32 v = ld16(b + 2 + 8 * ib + 2 * l);
		const u8* e = grid + GRID_IQ2XS + 8 * (v & 511u);
		signed8i(e, e + 4, signs8(v >> 9), y + 8 * l);
	}
}

// IQ2_S: as IQ2_XS, the index's high bits in qh and the signs stored.
__device__ __forceinline__ void i8_iq2_s(const u8* b, int p, int* y, float* s, float*, const u8* grid) {
	int ib = p >> 5;
	u32 sc = b[74 + ib];
	float d = h16(b);
	s[0] = iq_scale(d, sc & 15u, 0.25f);
	s[1] = iq_scale(d, sc >> 4, 0.25f);
	for (int l = 0; l < 4; l++) {
		u32 idx = b[2 + 4 * ib + l] | (((u32)b[66 + ib] << (8 - 2 * l)) & 0x300u);
		const u8* e = grid + GRID_IQ2S + 8 * idx;
		signed8i(e, e + 4, b[34 + 4 * ib + l], y + 8 * l);
	}
}

// IQ3_XXS: group ib = p/32, two 4-value entries per 8 weights; S =
// d·(0.5+ls)·0.5.
__device__ __forceinline__ void i8_iq3_xxs(const u8* b, int p, int* y, float* s, float*, const u8* grid) {
	int ib = p >> 5;
	u32 aux = ld32(b + 66 + 4 * ib);
	s[0] = iq_scale(h16(b), aux >> 28, 0.5f);
	for (int l = 0; l < 4; l++) {
		const u8* qs = b + 2 + 8 * ib + 2 * l;
		signed8i(grid + GRID_IQ3XXS + 4 * qs[0], grid + GRID_IQ3XXS + 4 * qs[1], signs8(aux >> (7 * l)), y + 8 * l);
	}
}

// IQ3_S: group ib = p/32; S = d·(1+2·ls).
__device__ __forceinline__ void i8_iq3_s(const u8* b, int p, int* y, float* s, float*, const u8* grid) {
	int ib = p >> 5;
	u32 qh = b[66 + ib];
	s[0] = __fmul_rn(h16(b), (float)(1 + 2 * (int)((b[106 + ib / 2] >> (4 * (ib % 2))) & 15u)));
	for (int l = 0; l < 4; l++) {
		u32 i1 = b[2 + 8 * ib + 2 * l] | ((qh << (8 - 2 * l)) & 256u);
		u32 i2 = b[2 + 8 * ib + 2 * l + 1] | ((qh << (7 - 2 * l)) & 256u);
		signed8i(grid + GRID_IQ3S + 4 * i1, grid + GRID_IQ3S + 4 * i2, b[74 + 4 * ib + l], y + 8 * l);
	}
}

// IQ1_S: group ib = p/32, one shift sign for all 32; S = d·(2·ls+1)/8.
__device__ __forceinline__ void i8_iq1_s(const u8* b, int p, int* y, float* s, float*, const u8* grid) {
	int ib = p >> 5;
	u32 qh = ld16(b + 34 + 2 * ib);
	s[0] = __fmul_rn(__fmul_rn(h16(b), (float)(2 * (int)((qh >> 12) & 7u) + 1)), 0.125f);
	for (int l = 0; l < 4; l++)
		iq1_8i(grid, b[2 + 4 * ib + l] | ((qh >> (3 * l)) & 7u) << 8, (qh & 0x8000u) != 0, y + 8 * l);
}

// IQ1_M: group ib = p/32, a scale per 16 weights, a shift sign per 8.
__device__ __forceinline__ void i8_iq1_m(const u8* b, int p, int* y, float* s, float*, const u8* grid) {
	int ib = p >> 5;
	float d = iq1m_d(b);
	s[0] = iq1m_scale(b, d, ib, 0);
	s[1] = iq1m_scale(b, d, ib, 1);
	for (int l = 0; l < 4; l++) {
		u32 nb = b[32 + 2 * ib + l / 2] >> (4 * (l % 2));
		iq1_8i(grid, b[4 * ib + l] | (nb & 7u) << 8, (nb & 8u) != 0, y + 8 * l);
	}
}

// TQ1_0: digit - 1; S = d.
__device__ __forceinline__ void i8_tq1_0(const u8* b, int p, int* y, float* s, float*, const u8*) {
	s[0] = h16(b + 52);
	for (int k = 0; k < 32; k++) y[k] = tq1_digit(b, p + k) - 1;
}

// TQ2_0: digit - 1, the 2-bit fields l = p/32 % 4 of qs[32h ..]; S = d.
__device__ __forceinline__ void i8_tq2_0(const u8* b, int p, int* y, float* s, float*, const u8*) {
	int h = p >> 7, l = (p >> 5) & 3;
	s[0] = h16(b + 64);
	for (int k = 0; k < 32; k++) y[k] = (int)((b[32 * h + k] >> (2 * l)) & 3u) - 1;
}

// Q1_0 and Q2_0: the signs (±1) and the codes minus one; S = d, the
// block's one scale, for each group of 32.
__device__ __forceinline__ void i8_q1_0(const u8* b, int p, int* y, float* s, float*, const u8*) {
	s[0] = h16(b);
	for (int k = 0; k < 32; k++) y[k] = (int)((b[2 + ((p + k) >> 3)] >> ((p + k) & 7)) & 1u) * 2 - 1;
}

__device__ __forceinline__ void i8_q2_0(const u8* b, int p, int* y, float* s, float*, const u8*) {
	s[0] = h16(b);
	for (int k = 0; k < 32; k++) y[k] = (int)((b[2 + ((p + k) >> 2)] >> (2 * ((p + k) & 3))) & 3u) - 1;
}

// MXFP4: the doubled E2M1 values; S = 2^(e-128).
__device__ __forceinline__ void i8_mxfp4(const u8* b, int, int* y, float* s, float*, const u8*) {
	s[0] = e8m0_half(b[0]);
	nibbles32(b + 1, 0, y);
	for (int k = 0; k < 32; k++) y[k] = fp4_values[y[k]];
}

// NVFP4: sub-blocks p/16 and p/16 + 1, each 8 bytes of qs (low nibbles
// the first 8 weights); S = the UE4M3 scale halved.
__device__ __forceinline__ void i8_nvfp4(const u8* b, int p, int* y, float* s, float*, const u8*) {
	for (int e = 0; e < 2; e++) {
		int sb = (p >> 4) + e;
		s[e] = ue4m3_half(b[sb]);
		const u8* qs = b + 4 + 8 * sb;
		for (int k = 0; k < 8; k++) {
			y[16 * e + k] = fp4_values[qs[k] & 15u];
			y[16 * e + 8 + k] = fp4_values[qs[k] >> 4];
		}
	}
}

// I8DEC defines kernel name for blocks of BS weights in TS bytes, groups
// of G weights, with minima when MIN; fn decodes 32 weights.
#define I8DEC(name, BS, TS, G, MIN, fn)                                                                 \
	extern "C" __global__ void name(signed char* __restrict__ q, float* __restrict__ s,              \
	                                float* __restrict__ m, const u8* __restrict__ w, i64 row0,      \
	                                int rows, int in, i64 rowbytes, const u8* __restrict__ grid) {  \
		u32 per = (u32)in >> 5;                                                                 \
		u32 n = (u32)rows * per;                                                                \
		for (u32 u = blockIdx.x * blockDim.x + threadIdx.x; u < n; u += gridDim.x * blockDim.x) { \
			u32 r = u / per;                                                                \
			u32 c = (u - r * per) << 5;                                                     \
			const u8* b = w + (row0 + r) * rowbytes + (i64)(c / (BS)) * (TS);               \
			int y[32];                                                                      \
			float sc[2], mn[2];                                                             \
			fn(b, (int)(c % (BS)), y, sc, mn, grid);                                        \
			u32 v[8];                                                                       \
			for (int k = 0; k < 8; k++)                                                     \
				v[k] = (u32)(y[4 * k] & 255) | (u32)(y[4 * k + 1] & 255) << 8 |         \
				       (u32)(y[4 * k + 2] & 255) << 16 | (u32)(y[4 * k + 3] & 255) << 24; \
			i64 o = (i64)r * in + c;                                                        \
			uint4* d = (uint4*)(q + o);                                                     \
			d[0] = make_uint4(v[0], v[1], v[2], v[3]);                                      \
			d[1] = make_uint4(v[4], v[5], v[6], v[7]);                                      \
			for (int j = 0; j < 32 / (G); j++) {                                            \
				s[o / (G) + j] = sc[j];                                                 \
				if (MIN) m[o / (G) + j] = mn[j];                                        \
			}                                                                               \
		}                                                                                       \
	}

I8DEC(i8dec_q4_0, 32, 18, 32, 0, i8_q4_0)
I8DEC(i8dec_q4_1, 32, 20, 32, 1, i8_q4_1)
I8DEC(i8dec_q5_0, 32, 22, 32, 0, i8_q5_0)
I8DEC(i8dec_q5_1, 32, 24, 32, 1, i8_q5_1)
I8DEC(i8dec_q8_0, 32, 34, 32, 0, i8_q8_0)
I8DEC(i8dec_q2_k, 256, 84, 16, 1, i8_q2_k)
I8DEC(i8dec_q3_k, 256, 110, 16, 0, i8_q3_k)
I8DEC(i8dec_q4_k, 256, 144, 32, 1, i8_q4_k)
I8DEC(i8dec_q5_k, 256, 176, 32, 1, i8_q5_k)
I8DEC(i8dec_q6_k, 256, 210, 16, 0, i8_q6_k)
I8DEC(i8dec_iq4_nl, 32, 18, 32, 0, i8_iq4_nl)
I8DEC(i8dec_iq4_xs, 256, 136, 32, 0, i8_iq4_xs)
I8DEC(i8dec_iq2_xxs, 256, 66, 32, 0, i8_iq2_xxs)
I8DEC(i8dec_iq2_xs, 256, 74, 16, 0, i8_iq2_xs)
I8DEC(i8dec_iq2_s, 256, 82, 16, 0, i8_iq2_s)
I8DEC(i8dec_iq3_xxs, 256, 98, 32, 0, i8_iq3_xxs)
I8DEC(i8dec_iq3_s, 256, 110, 32, 0, i8_iq3_s)
I8DEC(i8dec_iq1_s, 256, 50, 32, 0, i8_iq1_s)
I8DEC(i8dec_iq1_m, 256, 56, 16, 0, i8_iq1_m)
I8DEC(i8dec_tq1_0, 256, 54, 32, 0, i8_tq1_0)
I8DEC(i8dec_tq2_0, 256, 66, 32, 0, i8_tq2_0)
I8DEC(i8dec_mxfp4, 32, 17, 32, 0, i8_mxfp4)
I8DEC(i8dec_nvfp4, 64, 36, 16, 0, i8_nvfp4)
I8DEC(i8dec_q1_0, 128, 18, 32, 0, i8_q1_0)
I8DEC(i8dec_q2_0, 64, 18, 32, 0, i8_q2_0)
