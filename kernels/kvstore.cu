// KV cache store: encode one layer's keys (after RoPE) or values into the
// cache format chosen by --kv-dtype, and decode them back (for tests).
//
// CPU reference: the Encode and Decode methods of package kvcache
// (score/kvcache/float.go, int8.go, q4.go, nvfp4.go, minifloat.go), which
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
			float d = __fdiv_rn(a, 127.0f);
			scales[g] = d;
			for (int i = 0; i < hd; i++) q[i] = (u8)(signed char)quant_int8(v[i], d);
		} else {
			float d = __fdiv_rn(a, 448.0f);
			scales[g] = d;
			for (int i = 0; i < hd; i++) q[i] = (d == 0.0f || d != d) ? 0 : e4m3_encode(__fdiv_rn(v[i], d));
		}
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
		int lo = k * 32, len = min(32, hd - lo);
		const float* v = x + g * hd + lo;
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
		u8* dst = data + b * 18;
		u16 dh = f32_to_f16(d);
		dst[0] = (u8)(dh & 0xffu);
		dst[1] = (u8)(dh >> 8);
		for (int j = 0; j < 16; j++) {
			float x0 = j < len ? v[j] : 0.0f;
			float x1 = j + 16 < len ? v[j + 16] : 0.0f;
			// Go: uint8(min(15, int8(x*id+8.5))): truncation toward zero
			int n0 = min(15, (int)__fadd_rn(__fmul_rn(x0, id), 8.5f));
			int n1 = min(15, (int)__fadd_rn(__fmul_rn(x1, id), 8.5f));
			dst[2 + j] = (u8)((n0 & 15) | ((n1 & 15) << 4));
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
	float g = __fdiv_rn(__uint_as_float(*amaxWord), 2688.0f); // 6*448
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
