// Kimi K3's cross-layer residual attention (package ml's AttnRes
// extension), float64 inside with one rounding to float32 per output.
//
// CPU reference: cpuBackend.ResMix outside the int8 modes, i.e. nn.ResMix
// (score/nn/attnres.go): the same arithmetic but for the order of the
// block's reductions (a few float64 ulps).
#include "common.cuh"

// RES_MAX bounds the checkpoints and the running row a token mixes (the
// Go side refuses more).
#define RES_MAX 512

// res_mix: for token t (grid.x = n; blockDim a multiple of 32), with the C
// checkpoints stacked in ck (C·n, d; checkpoint c in rows [c·n, (c+1)·n))
// and the running rows cur (n, d): for each row x of the C + 1 (cur's
// last), scale = 1/sqrt(Σ x²/d + eps) and s = Σ x·scale·w; p = e^(s - max s)
// (the softmax's numerators) and out[t] = (Σ_c p_c·x_c + p_C·cur[t]) / Σ p,
// rounded once. out may be cur: each element is read and written by one
// thread, after every score.
extern "C" __global__ void res_mix(float* out, const float* __restrict__ ck, const float* cur, const float* __restrict__ w,
                                   int n, int C, int d, double eps) {
	__shared__ double sh[32];
	__shared__ double p[RES_MAX];
	__shared__ double tot;
	i64 t = blockIdx.x;
	if (t >= n) return;
	for (int c = 0; c <= C; c++) {
		const float* x = c < C ? ck + ((i64)c * n + t) * d : cur + t * d;
		double ss = 0;
		for (int i = threadIdx.x; i < d; i += blockDim.x) {
			double v = (double)x[i];
			ss = __dadd_rn(ss, __dmul_rn(v, v));
		}
		ss = block_sum_d(ss, sh);
		double scale = __ddiv_rn(1.0, sqrt(__dadd_rn(__ddiv_rn(ss, (double)d), eps)));
		double s = 0;
		for (int i = threadIdx.x; i < d; i += blockDim.x) s = __dadd_rn(s, __dmul_rn(__dmul_rn((double)x[i], scale), (double)w[i]));
		s = block_sum_d(s, sh);
		if (threadIdx.x == 0) p[c] = s;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		double m = p[0], sum = 0;
		for (int c = 1; c <= C; c++) m = fmax(m, p[c]);
		for (int c = 0; c <= C; c++) {
			p[c] = exp(__dadd_rn(p[c], -m));
			sum = __dadd_rn(sum, p[c]);
		}
		tot = sum;
	}
	__syncthreads();
	for (int i = threadIdx.x; i < d; i += blockDim.x) {
		double acc = __dmul_rn(p[C], (double)cur[t * d + i]);
		for (int c = 0; c < C; c++) acc = __dadd_rn(acc, __dmul_rn(p[c], (double)ck[((i64)c * n + t) * d + i]));
		out[t * d + i] = (float)__ddiv_rn(acc, tot);
	}
}
