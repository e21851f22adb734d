// KV cache store: encode one layer's keys (after RoPE) or values into the
// cache format chosen by --kv-dtype, and decode them back (for tests).
//
// CPU reference: the Encode and Decode methods of package kvcache
// (score/kvcache/float.go, int8.go, q4.go, nvfp4.go, minifloat.go, ggml.go,
// rotate.go), which
// pin every format down to the byte and to the rounding of each float32
// operation. These kernels follow them operation by operation with
// explicitly rounded arithmetic (__fdiv_rn, __fmul_rn, ...: nvcc would
// otherwise fuse multiply-adds), so the bytes written are the bytes
// kvcache's Encode writes; the tests compare them byte for byte.
//
// Input x is (tokens, heads, hd) float32, row-major.
#include "kvformat.cuh"

// amax_group: max |v| over v[0..n), or NaN when one is NaN or infinite
// (kvcache.amax). One thread, sequential.
__device__ __forceinline__ float amax_seq(const float* v, int n) {
	float m = 0.0f;
	for (int i = 0; i < n; i++) {
		float a = fabsf(v[i]);
		if (!(a <= 3.402823466e38f)) return __uint_as_float(0x7fc00000u);
		m = fmaxf(m, a);
	}
	return m;
}

// kv_store_plain: f32, f16 or bf16 (fmt), one thread per element.
extern "C" __global__ void kv_store_plain(void* __restrict__ data, const float* __restrict__ x, i64 count, int fmt) {
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (i64)gridDim.x * blockDim.x) {
		float v = x[i];
		if (fmt == KV_F32)
			((float*)data)[i] = v;
		else if (fmt == KV_F16)
			((u16*)data)[i] = f32_to_f16(v);
		else
			((u16*)data)[i] = f32_to_bf16(v);
	}
}

// quant_int8: kvcache.quantInt8: clamp(rne(x/d), -127, 127), 0 when d is 0 or NaN.
__device__ __forceinline__ int quant_int8(float x, float d) {
	if (d == 0.0f || d != d) return 0;
	float r = rintf(__fdiv_rn(x, d));
	return (int)fmaxf(-127.0f, fminf(127.0f, r));
}

// kv_store_scaled: int8 or fp8 (fmt) with one float32 scale per (token,
// head): one thread per group, sequential over its hd values.
extern "C" __global__ void kv_store_scaled(u8* __restrict__ data, float* __restrict__ scales,
                                           const float* __restrict__ x, i64 groups, int hd, int fmt) {
	for (i64 g = (i64)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += (i64)gridDim.x * blockDim.x) {
		const float* v = x + g * hd;
		u8* q = data + g * hd;
		float a = amax_seq(v, hd);
		if (fmt == KV_INT8) {
			float d = x86_div(a, 127.0f);
			scales[g] = d;
			for (int i = 0; i < hd; i++) q[i] = (u8)(signed char)quant_int8(v[i], d);
		} else {
			float d = x86_div(a, 448.0f);
			scales[g] = d;
			for (int i = 0; i < hd; i++) q[i] = (d == 0.0f || d != d) ? 0 : e4m3_encode(__fdiv_rn(v[i], d));
		}
	}
}

// q4_block: one Q4_0 block of the len (<= 32) values v (missing values
// count as 0) at dst (18 bytes), as kvcache.encodeQ4 / ggml's
// quantize_row_q4_0_ref.
__device__ __forceinline__ void q4_block(u8* dst, const float* v, int len) {
	float amax = 0.0f, m = 0.0f;
	bool finite = true;
	for (int i = 0; i < len; i++) {
		float a = fabsf(v[i]);
		if (!(a <= 3.402823466e38f)) finite = false;
		if (a > amax) {
			amax = a;
			m = v[i];
		}
	}
	float d = __fdiv_rn(m, -8.0f);
	float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
	if (!finite) {
		d = __uint_as_float(0x7fc00000u);
		id = 0.0f;
	}
	u16 dh = f32_to_f16(d);
	dst[0] = (u8)(dh & 0xffu);
	dst[1] = (u8)(dh >> 8);
	for (int j = 0; j < 16; j++) {
		float x0 = j < len ? v[j] : 0.0f;
		float x1 = j + 16 < len ? v[j + 16] : 0.0f;
		// Go: uint8(min(15, int8(x*id+8.5))), the low byte of x86's
		// conversion (0 for +inf, where id is infinite for a subnormal d),
		// and the two nibbles ORed as bytes
		u8 n0 = (u8)min(15, (int)(signed char)x86_cvt_i32(__fadd_rn(__fmul_rn(x0, id), 8.5f)));
		u8 n1 = (u8)min(15, (int)(signed char)x86_cvt_i32(__fadd_rn(__fmul_rn(x1, id), 8.5f)));
		dst[2 + j] = (u8)(n0 | (u8)(n1 << 4));
	}
}

// kv_store_q4: Q4_0 blocks of 32 values along each (token, head), the last
// block of a head shorter when hd is not a multiple of 32 (missing values
// count as 0), as kvcache.encodeQ4 / ggml's quantize_row_q4_0_ref: one thread
// per block.
extern "C" __global__ void kv_store_q4(u8* __restrict__ data, const float* __restrict__ x, i64 groups, int hd) {
	int nb = (hd + 31) / 32;
	i64 total = groups * nb;
	for (i64 b = (i64)blockIdx.x * blockDim.x + threadIdx.x; b < total; b += (i64)gridDim.x * blockDim.x) {
		i64 g = b / nb;
		int k = (int)(b % nb);
		int lo = k * 32;
		q4_block(data + b * 18, x + g * hd + lo, min(32, hd - lo));
	}
}

__device__ __forceinline__ void put_f16(u8* dst, float v) {
	u16 h = f32_to_f16(v);
	dst[0] = (u8)(h & 0xffu);
	dst[1] = (u8)(h >> 8);
}

__device__ __forceinline__ void put_u32(u8* dst, u32 v) {
	dst[0] = (u8)v, dst[1] = (u8)(v >> 8), dst[2] = (u8)(v >> 16), dst[3] = (u8)(v >> 24);
}

// q2_block: one q2 block of 32 values (kvcache.encodeQ2): d = amax/1.5
// (NaN when one is NaN or infinite), id = 1/d (0 when d is 0 or NaN),
// code = clamp(rne(x·id + 1.5), 0, 3).
__device__ __forceinline__ void q2_block(u8* dst, const float* v) {
	float a = amax_seq(v, 32);
	float d = a != a ? __uint_as_float(0x7fc00000u) : __fdiv_rn(a, 1.5f);
	float id = (d != 0.0f && d == d) ? __fdiv_rn(1.0f, d) : 0.0f;
	put_f16(dst, d);
	for (int j = 0; j < 8; j++) {
		u32 byte = 0;
		for (int e = 0; e < 4; e++) {
			float r = rintf(__fadd_rn(__fmul_rn(v[4 * j + e], id), 1.5f));
			int c = r == r ? (int)fmaxf(0.0f, fminf(3.0f, r)) : 0; // NaN (an infinite x times 0): 0, as Go's uint8(NaN)
			byte |= (u32)c << (2 * e);
		}
		dst[2 + j] = (u8)byte;
	}
}

// iq4_best: ggml's best_index_int8(16, kvalues_iq4nl, x).
__device__ __forceinline__ int iq4_best(float x) {
	if (x <= kv_iq4nl[0]) return 0;
	if (x >= kv_iq4nl[15]) return 15;
	int ml = 0, mu = 15;
	while (mu - ml > 1) {
		int mav = (ml + mu) / 2;
		if (x < kv_iq4nl[mav]) mu = mav;
		else ml = mav;
	}
	return __fsub_rn(x, kv_iq4nl[mu - 1]) < __fsub_rn(kv_iq4nl[mu], x) ? mu - 1 : mu;
}

// ggml_block: one block of 32 finite values v in ggml format fmt at dst,
// as ggml's quantize_row_<fmt>_ref (package quant's quantizers,
// kvcache.quantIQ4NL with ntry -1), float32 operation by operation.
__device__ __forceinline__ void ggml_block(u8* dst, const float* v, int fmt) {
	switch (fmt) {
	case KV_Q8_0: {
		float amax = 0.0f;
		for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(v[j]));
		float d = __fdiv_rn(amax, 127.0f);
		float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
		put_f16(dst, d);
		for (int j = 0; j < 32; j++) {
			float q = roundf(__fmul_rn(v[j], id)); // halves away from zero
			// NaN (0 times an infinite id, d subnormal): 0, as Go's int8(NaN) and ggml on x86
			dst[2 + j] = q == q ? (u8)(signed char)(int)fminf(127.0f, fmaxf(-127.0f, q)) : 0;
		}
		return;
	}
	case KV_Q4_1:
	case KV_Q5_1: {
		float lo = 3.402823466e38f, hi = -3.402823466e38f;
		for (int j = 0; j < 32; j++) {
			if (v[j] < lo) lo = v[j];
			if (v[j] > hi) hi = v[j];
		}
		int nmax = fmt == KV_Q4_1 ? 15 : 31;
		float d = __fdiv_rn(__fsub_rn(hi, lo), (float)nmax);
		float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
		put_f16(dst, d);
		put_f16(dst + 2, lo);
		u8* qs = dst + (fmt == KV_Q4_1 ? 4 : 8);
		u32 qh = 0;
		for (int j = 0; j < 16; j++) {
			int q0 = min(nmax, max(0, x86_cvt_i32(__fadd_rn(__fmul_rn(__fsub_rn(v[j], lo), id), 0.5f))));
			int q1 = min(nmax, max(0, x86_cvt_i32(__fadd_rn(__fmul_rn(__fsub_rn(v[j + 16], lo), id), 0.5f))));
			qs[j] = (u8)((q0 & 15) | ((q1 & 15) << 4));
			qh |= (u32)(q0 >> 4) << j;
			qh |= (u32)(q1 >> 4) << (j + 16);
		}
		if (fmt == KV_Q5_1) put_u32(dst + 4, qh);
		return;
	}
	case KV_Q5_0: {
		float amax = 0.0f, m = 0.0f;
		for (int j = 0; j < 32; j++) {
			float a = fabsf(v[j]);
			if (amax < a) {
				amax = a;
				m = v[j];
			}
		}
		float d = __fdiv_rn(m, -16.0f);
		float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
		put_f16(dst, d);
		u32 qh = 0;
		for (int j = 0; j < 16; j++) {
			int q0 = min(31, max(0, x86_cvt_i32(__fadd_rn(__fmul_rn(v[j], id), 16.5f))));
			int q1 = min(31, max(0, x86_cvt_i32(__fadd_rn(__fmul_rn(v[j + 16], id), 16.5f))));
			dst[6 + j] = (u8)((q0 & 15) | ((q1 & 15) << 4));
			qh |= (u32)(q0 >> 4) << j;
			qh |= (u32)(q1 >> 4) << (j + 16);
		}
		put_u32(dst + 2, qh);
		return;
	}
	case KV_IQ4_NL: {
		u8 L[32];
		float amax = 0.0f, mx = 0.0f;
		for (int j = 0; j < 32; j++) {
			float a = fabsf(v[j]);
			if (a > amax) {
				amax = a;
				mx = v[j];
			}
		}
		float d = 0.0f;
		if (amax < 1e-15f) {
			for (int j = 0; j < 32; j++) L[j] = 8;
		} else {
			d = __fdiv_rn(mx, -127.0f);
			float id = __fdiv_rn(1.0f, d);
			float sumqx = 0.0f, sumq2 = 0.0f;
			for (int j = 0; j < 32; j++) {
				int l = iq4_best(__fmul_rn(id, v[j]));
				L[j] = (u8)l;
				float q = kv_iq4nl[l], w = __fmul_rn(v[j], v[j]);
				sumqx = __fadd_rn(sumqx, __fmul_rn(__fmul_rn(w, q), v[j]));
				sumq2 = __fadd_rn(sumq2, __fmul_rn(__fmul_rn(w, q), q));
			}
			d = __fdiv_rn(sumqx, sumq2);
			// a NaN here comes of inf - inf or inf/inf in the sums (values
			// near float32's largest): x86's default NaN, as the CPU's
			if (d != d) d = __uint_as_float(0xffc00000u);
		}
		put_f16(dst, d);
		for (int j = 0; j < 16; j++) dst[2 + j] = (u8)(L[j] | (L[j + 16] << 4));
		return;
	}
	case KV_Q2:
		q2_block(dst, v);
		return;
	}
}

// kv_store_ggml: blocks of 32 values along each (token, head) in fmt
// (KV_Q8_0, KV_Q4_1, KV_Q5_0, KV_Q5_1, KV_IQ4_NL, KV_Q2), a head's last block
// padded with zeros when hd is not a multiple of 32, as kvcache.GGML /
// kvcache.Q2 Encode: one thread per block. A block with a NaN or an
// infinity gets NaN scales (and offsets) and zero quants (Q2: code 2, and
// 0 for the NaN or infinite values).
extern "C" __global__ void kv_store_ggml(u8* __restrict__ data, const float* __restrict__ x, i64 groups, int hd, int fmt) {
	int nb = (hd + 31) / 32, ts = kv_block_bytes(fmt);
	i64 total = groups * nb;
	for (i64 b = (i64)blockIdx.x * blockDim.x + threadIdx.x; b < total; b += (i64)gridDim.x * blockDim.x) {
		i64 g = b / nb;
		int k = (int)(b % nb);
		int lo = k * 32, len = min(32, hd - lo);
		float v[32];
		for (int j = 0; j < 32; j++) v[j] = j < len ? x[g * hd + lo + j] : 0.0f;
		u8* dst = data + b * ts;
		float a = amax_seq(v, 32);
		if (fmt != KV_Q2 && a != a) {
			for (int j = 0; j < ts; j++) dst[j] = 0;
			u16 nan = f32_to_f16(__uint_as_float(0x7fc00000u));
			dst[0] = (u8)(nan & 0xffu), dst[1] = (u8)(nan >> 8);
			if (fmt == KV_Q4_1 || fmt == KV_Q5_1) dst[2] = dst[0], dst[3] = dst[1];
			continue;
		}
		ggml_block(dst, v, fmt);
	}
}

// KV_ROT_MAXD is the largest head size the rotated formats take (Gemma 4's
// global heads of 512).
#define KV_ROT_MAXD 512

// hadamard: v (n, a power of two, at most KV_ROT_MAXD) <- H·v·s as
// kvcache.Hadamard: butterflies, then times s = float32(1/√n).
__device__ __forceinline__ void hadamard(float* v, int n, float s) {
	butterflies(v, n);
	for (int i = 0; i < n; i++) v[i] = __fmul_rn(v[i], s);
}

// kv_rotate: out row r <- hadamard(x row r), rows of n values (n a power
// of two, at most KV_ROT_MAXD); out may be x. One thread per row. Rotates the
// queries for the rotated key formats, and decodes those formats back.
extern "C" __global__ void kv_rotate(float* out, const float* x, i64 rows, int n, float s) {
	for (i64 r = (i64)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += (i64)gridDim.x * blockDim.x) {
		float v[KV_ROT_MAXD];
		for (int i = 0; i < n; i++) v[i] = x[r * n + i];
		hadamard(v, n, s);
		for (int i = 0; i < n; i++) out[r * n + i] = v[i];
	}
}

// kv_store_rot: KV_RINT8, KV_RQ4 or KV_RQ2 (fmt): each (token, head) of hd
// values (a power of two, at most KV_ROT_MAXD) rotated by hadamard, then stored as
// KV_INT8, KV_Q4 or KV_Q2 (kvcache.Rotated's Encode): one thread per group.
extern "C" __global__ void kv_store_rot(u8* __restrict__ data, float* __restrict__ scales, const float* __restrict__ x,
                                        i64 groups, int hd, int fmt, float s) {
	int nb = (hd + 31) / 32;
	for (i64 g = (i64)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += (i64)gridDim.x * blockDim.x) {
		float v[KV_ROT_MAXD];
		for (int i = 0; i < hd; i++) v[i] = x[g * hd + i];
		hadamard(v, hd, s);
		if (fmt == KV_RINT8) {
			float d = x86_div(amax_seq(v, hd), 127.0f);
			scales[g] = d;
			for (int i = 0; i < hd; i++) data[g * hd + i] = (u8)(signed char)quant_int8(v[i], d);
		} else if (fmt == KV_RQ4) {
			for (int k = 0; k < nb; k++) q4_block(data + (g * nb + k) * 18, v + k * 32, min(32, hd - k * 32));
		} else {
			for (int k = 0; k < nb; k++) {
				float b[32];
				for (int j = 0; j < 32; j++) b[j] = k * 32 + j < hd ? v[k * 32 + j] : 0.0f;
				q2_block(data + (g * nb + k) * 10, b);
			}
		}
	}
}

// kv_amax: *word = max over x of |x| as float bits, or NaN bits when any
// value is NaN or infinite (kvcache.amax over a whole tensor). *word must
// be 0 before the launch. Non-negative floats order like their bits, and
// NaN (0x7fc00000) above them all.
extern "C" __global__ void kv_amax(u32* word, const float* __restrict__ x, i64 count) {
	float m = 0.0f;
	bool bad = false;
	for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (i64)gridDim.x * blockDim.x) {
		float a = fabsf(x[i]);
		if (!(a <= 3.402823466e38f)) bad = true;
		else m = fmaxf(m, a);
	}
	u32 bits = bad ? 0x7fc00000u : __float_as_uint(m);
	for (int o = 16; o > 0; o >>= 1) bits = max(bits, __shfl_xor_sync(0xffffffffu, bits, o));
	if ((threadIdx.x & 31) == 0) atomicMax(word, bits);
}

// kv_store_nvfp4: E2M1 values in blocks of 16 along each (token, head) with
// an E4M3 scale per block and the tensor scale g = amax/(6·448) (amax from
// kv_amax's word), as kvcache.NVFP4.Encode: one thread per block. Thread 0
// of block 0 also stores g to *tscale.
extern "C" __global__ void kv_store_nvfp4(u8* __restrict__ data, u8* __restrict__ scales, float* tscale,
                                          const u32* __restrict__ amaxWord, const float* __restrict__ x, i64 groups,
                                          int hd) {
	int nb = (hd + 15) / 16, pb = (hd + 1) / 2;
	float g = x86_div(__uint_as_float(*amaxWord), 2688.0f); // 6*448
	if (blockIdx.x == 0 && threadIdx.x == 0) *tscale = g;
	i64 total = groups * nb;
	for (i64 b = (i64)blockIdx.x * blockDim.x + threadIdx.x; b < total; b += (i64)gridDim.x * blockDim.x) {
		i64 grp = b / nb;
		int k = (int)(b % nb);
		int lo = k * 16, hi = min(lo + 16, hd);
		const float* v = x + grp * hd;
		u8 s = 0;
		if (g > 0.0f) s = e4m3_encode(__fdiv_rn(__fdiv_rn(amax_seq(v + lo, hi - lo), 6.0f), g));
		scales[grp * nb + k] = s;
		float e = __fmul_rn(e4m3_value(s), g);
		u8* d = data + grp * pb;
		for (int j = lo; j < hi; j += 2) {
			u8 q0 = e > 0.0f ? e2m1_encode(__fdiv_rn(v[j], e)) : 0;
			u8 q1 = (j + 1 < hi && e > 0.0f) ? e2m1_encode(__fdiv_rn(v[j + 1], e)) : 0;
			d[j / 2] = (u8)(q0 | (q1 << 4));
		}
	}
}

// kv_decode: out (tokens, heads, hd) f32 <- the planes, through the same
// kv_decode1 that attention reads with. For tests.
extern "C" __global__ void kv_decode(float* __restrict__ out, int fmt, const void* data, const void* scales,
                                     const float* tscale, i64 tokens, int heads, int hd) {
	KVPlanes p = {fmt, data, scales, tscale, heads, hd};
	i64 total = tokens * heads * hd;
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (i64)gridDim.x * blockDim.x) {
		int i = (int)(idx % hd);
		i64 th = idx / hd;
		out[idx] = kv_decode1(p, th / heads, (int)(th % heads), i);
	}
}
