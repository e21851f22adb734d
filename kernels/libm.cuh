// glibc's libm functions the CPU's llama.cpp arithmetic calls, ported so
// that a kernel gives its bits (ggml calls expf for SOFT_MAX's tail and
// its fused hyper-connection ops). Included by the modules that need it.
#pragma once
#include "common.cuh"

// glibc's expf (ARM's optimized routines, FMA build) as nn.LibcExpf:
// exp2f_tab is __exp2f_data.tab (N = 32), the bits of 2^(i/32) minus i <<
// 47.
__constant__ u64 exp2f_tab[32] = {
    0x3ff0000000000000ull, 0x3fefd9b0d3158574ull, 0x3fefb5586cf9890full, 0x3fef9301d0125b51ull,
    0x3fef72b83c7d517bull, 0x3fef54873168b9aaull, 0x3fef387a6e756238ull, 0x3fef1e9df51fdee1ull,
    0x3fef06fe0a31b715ull, 0x3feef1a7373aa9cbull, 0x3feedea64c123422ull, 0x3feece086061892dull,
    0x3feebfdad5362a27ull, 0x3feeb42b569d4f82ull, 0x3feeab07dd485429ull, 0x3feea47eb03a5585ull,
    0x3feea09e667f3bcdull, 0x3fee9f75e8ec5f74ull, 0x3feea11473eb0187ull, 0x3feea589994cce13ull,
    0x3feeace5422aa0dbull, 0x3feeb737b0cdc5e5ull, 0x3feec49182a3f090ull, 0x3feed503b23e255dull,
    0x3feee89f995ad3adull, 0x3feeff76f2fb5e47ull, 0x3fef199bdd85529cull, 0x3fef3720dcef9069ull,
    0x3fef5818dcfba487ull, 0x3fef7c97337b9b5full, 0x3fefa4afa2a490daull, 0x3fefd0765b6e4540ull,
};

__device__ __forceinline__ u32 abstop12(float x) { return (__float_as_uint(x) >> 20) & 0x7ff; }

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
