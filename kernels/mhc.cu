// Manifold-constrained hyper-connections (package ml's MHC extension:
// DeepSeek-V4's and GLM5-Next's residual streams): the streams' mixing
// matrix, made doubly stochastic by Sinkhorn iterations.
//
// CPU reference: nn.SinkhornMix (score/nn/mhc.go), which is ggml's fused
// DSV4_HC_COMB's float32 arithmetic: the same operations in the same
// order, its multiply-adds fused, glibc's expf (libm.cuh), so the bits.
#include "common.cuh"
#include "libm.cuh"

// MHC_MAX bounds the streams (the Go side refuses more; llama.cpp runs 4).
#define MHC_MAX 8

// sinkhorn_norm divides each line of c (S×S, element (d, s) at d + S·s)
// by eps plus its sum in order: the rows (fixed s, over d) with by_rows,
// else the columns (fixed d, over s).
__device__ __forceinline__ void sinkhorn_norm(float* c, int S, float eps, bool by_rows) {
	for (int a = 0; a < S; a++) {
		const int at = by_rows ? S * a : a, step = by_rows ? 1 : S;
		float sum = eps;
		for (int b = 0; b < S; b++) sum = __fadd_rn(sum, c[at + b * step]);
		const float inv = __fdiv_rn(1.0f, sum);
		for (int b = 0; b < S; b++) c[at + b * step] = __fmul_rn(c[at + b * step], inv);
	}
}

// sinkhorn_mix: a thread per token t of n: dst[t·S·S + d + S·s] (d the
// stream written, s the one read) starts as m[t·cols + off + d + S·s]·scale
// + base[d + S·s] (fused); a softmax over d for each s (glibc's expf, the
// sum in order) plus eps (fused); the columns normalized, then iters - 1
// times the rows and the columns.
extern "C" __global__ void sinkhorn_mix(float* __restrict__ dst, const float* __restrict__ m,
                                        const float* __restrict__ base, int n, int cols, int off, int S, float scale,
                                        float eps, int iters) {
	for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += (i64)gridDim.x * blockDim.x) {
		float c[MHC_MAX * MHC_MAX];
		const float* x = m + t * cols + off;
		for (int s = 0; s < S; s++) {
			float mx = -INFINITY;
			for (int d = 0; d < S; d++) {
				const float v = __fmaf_rn(x[d + S * s], scale, base[d + S * s]);
				c[d + S * s] = v;
				mx = fmaxf(mx, v); // Go's max keeps a NaN, but one makes the line's sum NaN either way
			}
			float sum = 0.0f;
			for (int d = 0; d < S; d++) {
				const float v = libc_expf(__fsub_rn(c[d + S * s], mx));
				c[d + S * s] = v;
				sum = __fadd_rn(sum, v);
			}
			const float inv = __fdiv_rn(1.0f, sum);
			for (int d = 0; d < S; d++) c[d + S * s] = __fmaf_rn(c[d + S * s], inv, eps);
		}
		sinkhorn_norm(c, S, eps, false);
		for (int i = 1; i < iters; i++) {
			sinkhorn_norm(c, S, eps, true);
			sinkhorn_norm(c, S, eps, false);
		}
		float* o = dst + t * S * S;
		for (int i = 0; i < S * S; i++) o[i] = c[i];
	}
}
