// glibc's libm functions the CPU's llama.cpp arithmetic calls, ported so
// that a kernel gives its bits (ggml calls expf for SOFT_MAX's tail and
// its fused hyper-connection ops, logf and expf for SOFTPLUS), and
// ggml-cpu's own vector e^x and register sums. Included by the modules
// that need it.
#pragma once
#include "common.cuh"
#include "libmdata.cuh" // glibc's tables, generated from nn's (nn.LibmData)

// abstop12 is the top 12 bits of x's exponent and sign, as glibc's.
__device__ __forceinline__ u32 abstop12(float x) { return (__float_as_uint(x) >> 20) & 0x7ff; }

// glibc's expf (ARM's optimized routines, FMA build) as nn.LibcExpf.
__device__ float libc_expf(float x) {
	if (abstop12(x) >= abstop12(88.0f)) {
		if (x == -INFINITY) return 0.0f;
		if (abstop12(x) >= abstop12(INFINITY)) return x + x;
		if (x > 0x1.62e42ep6f) return INFINITY;
		if (x < -0x1.9fe368p6f) return 0.0f;
	}
	const double inv_ln2n = 0x1.71547652b82fep+0 * 32, shift = 0x1.8p+52;
	const double c0 = 0x1.c6af84b912394p-5 / 32 / 32 / 32, c1 = 0x1.ebfce50fac4f3p-3 / 32 / 32,
	             c2 = 0x1.62e42ff0c52d6p-1 / 32;
	const double xd = (double)x;
	double kd = __fma_rn(inv_ln2n, xd, shift);
	const u64 ki = (u64)__double_as_longlong(kd);
	kd = __dsub_rn(kd, shift);
	const double r = __fma_rn(inv_ln2n, xd, -kd);
	const double s = __longlong_as_double((long long)(exp2f_tab[ki % 32] + (ki << 47)));
	const double zz = __fma_rn(c0, r, c1);
	double y = __fma_rn(c2, r, 1.0);
	y = __fma_rn(zz, __dmul_rn(r, r), y);
	return (float)__dmul_rn(y, s);
}

// glibc's logf (ARM's optimized routines) as nn.LibcLogf, its products and
// sums rounded as that port rounds them.
__device__ float libc_logf(float x) {
	const double ln2 = 0x1.62e42fefa39efp-1;
	u32 ix = __float_as_uint(x);
	if (ix == 0x3f800000u) return 0.0f;
	if (ix - 0x00800000u >= 0x7f800000u - 0x00800000u) {
		if (ix * 2 == 0) return -INFINITY;
		if (ix == 0x7f800000u) return x;
		if ((ix & 0x80000000u) || ix * 2 >= 0xff000000u) return NAN;
		ix = __float_as_uint(__fmul_rn(x, 0x1p23f)) - (23u << 23); // subnormal: normalize
	}
	const u32 tmp = ix - 0x3f330000u;
	const int i = (tmp >> (23 - 4)) % 16, k = (int)tmp >> 23;
	const double z = (double)__uint_as_float(ix - (tmp & 0xff800000u));
	const double r = __fma_rn(z, logf_tab[i][0], -1.0);
	const double y0 = __dadd_rn(logf_tab[i][1], __dmul_rn((double)k, ln2));
	const double r2 = __dmul_rn(r, r);
	double y = __fma_rn(logf_poly[1], r, logf_poly[2]);
	y = __fma_rn(logf_poly[0], r2, y);
	return (float)__fma_rn(y, r2, __dadd_rn(y0, r));
}

// ggml_expf is ggml_v_expf of ggml-cpu's AVX-512 build (avx2 0: its
// scalef) or its AVX2 build (avx2 1: k + k·j, |n| > 126 by two factors),
// one lane, as nn.ggmlExpf and nn.ggmlExpfAVX2.
__device__ float ggml_expf(float x, int avx2) {
	const float r = 0x1.8p23f;
	const float z = __fmaf_rn(x, 0x1.715476p+0f, r);
	const float n = __fsub_rn(z, r);
	const float b = __fmaf_rn(-n, 0x1.7f7d1cp-20f, __fmaf_rn(-n, 0x1.62e4p-1f, x));
	const float u = __fmul_rn(b, b);
	const float hi = __fmaf_rn(__fmaf_rn(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, __fmaf_rn(0x1.555e66p-3f, b, 0x1.fffdb6p-2f));
	if (!avx2) {
		const float j = __fmaf_rn(hi, u, __fmaf_rn(0x1.ffffecp-1f, b, 1.0f));
		if (n != n || x != x) return NAN;
		if (fabsf(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
		return (float)__dmul_rn((double)j, ldexp(1.0, (int)n));
	}
	const u32 e = __float_as_uint(z) << 23;
	const float k = __uint_as_float(e + 0x3f800000u);
	const float j = __fmaf_rn(hi, u, __fmul_rn(0x1.ffffecp-1f, b));
	const float an = fabsf(n);
	if (!(an > 126.0f)) return __fmaf_rn(j, k, k);
	const u32 g = n <= 0.0f ? 0x82000000u : 0u;
	const float s1 = __uint_as_float(g + 0x7f000000u), s2 = __uint_as_float(e - g);
	if (an > 192.0f) return __fmul_rn(s1, s1);
	return __fmul_rn(__fmaf_rn(s2, j, s2), s1);
}

// ggml_lane_sum is the sum of one register of ggml's vector code: 16
// lanes reduced as _mm512_reduce_add_ps (the AVX-512 build), or with avx2
// 8 as hsum8 (nn.reduce16, nn.hsum8).
__device__ __forceinline__ float ggml_lane_sum(const float* lane, int avx2) {
	if (avx2)
		return __fadd_rn(__fadd_rn(__fadd_rn(lane[0], lane[4]), __fadd_rn(lane[2], lane[6])),
		                 __fadd_rn(__fadd_rn(lane[1], lane[5]), __fadd_rn(lane[3], lane[7])));
	float a[8];
	for (int i = 0; i < 8; i++) a[i] = __fadd_rn(lane[i], lane[i + 8]);
	for (int i = 0; i < 4; i++) a[i] = __fadd_rn(a[i], a[i + 4]);
	return __fadd_rn(__fadd_rn(a[0], a[2]), __fadd_rn(a[1], a[3]));
}
