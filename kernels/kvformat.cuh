// KV cache formats on the device: ids and element decoding, shared by the
// store kernels (kvstore.cu), the attention kernels (attention.cu) and the
// decode kernel the tests read back.
//
// The byte layouts are package kvcache's (score/kvcache/kvcache.go): a cache
// tensor is one layer's keys or values of one window, tokens × heads ×
// headDim, and each format's planes are
//   KV_F32   data float [t][h][i]
//   KV_F16   data binary16 [t][h][i]
//   KV_BF16  data bfloat16 [t][h][i]
//   KV_INT8  data int8 [t][h][i], scales float [t][h]
//   KV_FP8   data E4M3 [t][h][i], scales float [t][h]
//   KV_Q4    data Q4_0 blocks [t][h][b] of 18 bytes (fp16 d, 16 bytes of nibbles)
//   KV_NVFP4 data E2M1 nibbles [t][h][ceil(i/2)], scales E4M3 [t][h][b16],
//            tensor scale float (one, in device memory)
//   KV_Q8_0, KV_Q4_1, KV_Q5_0, KV_Q5_1, KV_IQ4_NL
//            data ggml blocks of 32 [t][h][b] (34, 20, 22, 24, 18 bytes)
//   KV_Q2    data blocks [t][h][b] of 10 bytes (fp16 d, 8 bytes of 2-bit codes)
//   KV_RINT8, KV_RQ4, KV_RQ2
//            KV_INT8, KV_Q4 and KV_Q2 of Hadamard-rotated heads: they decode
//            here in the rotated basis (attention rotates q to match)
#pragma once
#include "common.cuh"
#include "kvids.cuh" // the ids, generated from kvformat.go

// KVPlanes points at one cache tensor's planes.
struct KVPlanes {
	int fmt;
	const void* data;
	const void* scales;
	const float* tscale; // KV_NVFP4 only
	int heads, hd;       // heads and head size of the tensor
};

__constant__ float kv_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// kv_ggml_decode: element j (0..31) of one ggml block of format fmt, as
// ggml's dequantize_row_* (and package quant) compute it.
__device__ __forceinline__ float kv_ggml_decode(int fmt, const u8* blk, int j) {
	float d = f16_to_f32((u16)(blk[0] | (blk[1] << 8)));
	switch (fmt) {
	case KV_Q8_0:
		return __fmul_rn((float)(signed char)blk[2 + j], d);
	case KV_Q4_1: {
		float m = f16_to_f32((u16)(blk[2] | (blk[3] << 8)));
		u32 nib = blk[4 + (j & 15)];
		if (j >= 16) nib >>= 4;
		return __fadd_rn(__fmul_rn((float)(nib & 15u), d), m);
	}
	case KV_Q5_0: {
		u32 qh = (u32)blk[2] | ((u32)blk[3] << 8) | ((u32)blk[4] << 16) | ((u32)blk[5] << 24);
		u32 nib = blk[6 + (j & 15)];
		if (j >= 16) nib >>= 4;
		int q = (int)((nib & 15u) | (((qh >> j) & 1u) << 4));
		return __fmul_rn((float)(q - 16), d);
	}
	case KV_Q5_1: {
		float m = f16_to_f32((u16)(blk[2] | (blk[3] << 8)));
		u32 qh = (u32)blk[4] | ((u32)blk[5] << 8) | ((u32)blk[6] << 16) | ((u32)blk[7] << 24);
		u32 nib = blk[8 + (j & 15)];
		if (j >= 16) nib >>= 4;
		u32 q = (nib & 15u) | (((qh >> j) & 1u) << 4);
		return __fadd_rn(__fmul_rn((float)q, d), m);
	}
	case KV_IQ4_NL: {
		u32 nib = blk[2 + (j & 15)];
		if (j >= 16) nib >>= 4;
		return __fmul_rn(d, kv_iq4nl[nib & 15u]);
	}
	case KV_Q2:
	case KV_RQ2: {
		u32 c = (blk[2 + j / 4] >> (2 * (j & 3))) & 3u;
		return __fmul_rn(__fsub_rn((float)c, 1.5f), d);
	}
	}
	return 0.0f;
}

// kv_block_bytes: bytes per block of 32 of the ggml-style block formats.
__device__ __forceinline__ int kv_block_bytes(int fmt) {
	switch (fmt) {
	case KV_Q8_0: return 34;
	case KV_Q4_1: return 20;
	case KV_Q5_0: return 22;
	case KV_Q5_1: return 24;
	case KV_IQ4_NL: return 18;
	case KV_Q2:
	case KV_RQ2: return 10;
	}
	return 0;
}

// kv_decode1 reads element i of head h of token t.
__device__ __forceinline__ float kv_decode1(const KVPlanes& p, i64 t, int h, int i) {
	i64 g = t * p.heads + h; // (token, head) group
	switch (p.fmt) {
	case KV_F32:
		return ((const float*)p.data)[g * p.hd + i];
	case KV_F16:
		return f16_to_f32(((const u16*)p.data)[g * p.hd + i]);
	case KV_BF16:
		return bf16_to_f32(((const u16*)p.data)[g * p.hd + i]);
	case KV_INT8:
	case KV_RINT8:
		return __fmul_rn((float)(signed char)((const u8*)p.data)[g * p.hd + i], ((const float*)p.scales)[g]);
	case KV_FP8:
		return __fmul_rn(e4m3_value(((const u8*)p.data)[g * p.hd + i]), ((const float*)p.scales)[g]);
	case KV_Q8_0:
	case KV_Q4_1:
	case KV_Q5_0:
	case KV_Q5_1:
	case KV_IQ4_NL:
	case KV_Q2:
	case KV_RQ2: {
		int nb = (p.hd + 31) / 32, k = i / 32;
		return kv_ggml_decode(p.fmt, (const u8*)p.data + (g * nb + k) * kv_block_bytes(p.fmt), i - k * 32);
	}
	case KV_Q4:
	case KV_RQ4: {
		int nb = (p.hd + 31) / 32, k = i / 32, j = i - k * 32;
		const u8* blk = (const u8*)p.data + (g * nb + k) * 18;
		float d = f16_to_f32((u16)(blk[0] | (blk[1] << 8)));
		u32 nib = blk[2 + (j & 15)];
		if (j >= 16) nib >>= 4;
		return __fmul_rn((float)((int)(nib & 15u) - 8), d);
	}
	case KV_NVFP4: {
		int pb = (p.hd + 1) / 2, nb = (p.hd + 15) / 16;
		u32 b = ((const u8*)p.data)[g * pb + i / 2] >> (4 * (i & 1));
		float s = e4m3_value(((const u8*)p.scales)[g * nb + i / 16]);
		return __fmul_rn(__fmul_rn(e2m1_value(b), s), *p.tscale);
	}
	}
	return 0.0f;
}

// kv_decode8 reads elements i0..i0+7 of head h of token t (i0 a multiple
// of 8, headDim a multiple of 8), with wide loads where the format allows.
__device__ __forceinline__ void kv_decode8(const KVPlanes& p, i64 t, int h, int i0, float* v) {
	i64 g = t * p.heads + h;
	switch (p.fmt) {
	case KV_F32: {
		const float4* s = (const float4*)((const float*)p.data + g * p.hd + i0);
		float4 a = s[0], b = s[1];
		v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
		return;
	}
	case KV_F16:
	case KV_BF16: {
		uint4 a = *(const uint4*)((const u16*)p.data + g * p.hd + i0);
		u32 w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
		for (int k = 0; k < 4; k++) {
			u16 lo = (u16)(w[k] & 0xffffu), hi = (u16)(w[k] >> 16);
			v[2 * k] = p.fmt == KV_BF16 ? bf16_to_f32(lo) : f16_to_f32(lo);
			v[2 * k + 1] = p.fmt == KV_BF16 ? bf16_to_f32(hi) : f16_to_f32(hi);
		}
		return;
	}
	case KV_INT8:
	case KV_RINT8:
	case KV_FP8: {
		uint2 a = *(const uint2*)((const u8*)p.data + g * p.hd + i0);
		float d = ((const float*)p.scales)[g];
#pragma unroll
		for (int k = 0; k < 8; k++) {
			u8 q = (u8)(((k < 4 ? a.x : a.y) >> (8 * (k & 3))) & 0xffu);
			float e = p.fmt != KV_FP8 ? (float)(signed char)q : e4m3_value(q);
			v[k] = __fmul_rn(e, d);
		}
		return;
	}
	default:
#pragma unroll
		for (int k = 0; k < 8; k++) v[k] = kv_decode1(p, t, h, i0 + k);
	}
}
