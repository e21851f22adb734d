// Gated DeltaNet (package ml's Recurrent extension: qwen35, qwen35moe,
// qwen3next): column gathers, the causal depthwise convolution with SiLU,
// L2 norms, the delta rule's gates, the delta rule itself and the gated
// RMSNorm.
//
// References: the plain definitions of ml.Recurrent (score/ml/recurrent.go:
// float64, rounded to float32 once), which the CPU backend
// (score/model/cpu_recurrent.go) is tested against. Every operation but
// the delta rule computes so here (sums in another order: a few float64
// ulps). The delta rule keeps its state in float32 registers and
// accumulates in float32, token by token: a few float32 ulps per step,
// damped by the decay.
#include "common.cuh"

#define GRID_STRIDE(idx, total) \
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < (total); idx += (i64)gridDim.x * blockDim.x)

__device__ __forceinline__ double silu_d(double x) { return x / (1.0 + exp(-x)); }

// gather_cols: out (rows, ncols) <- x (rows, xcols) at columns cols[j].
extern "C" __global__ void gather_cols(float* __restrict__ out, const float* __restrict__ x, const int* __restrict__ cols,
                                       int rows, int ncols, int xcols) {
	GRID_STRIDE(idx, (i64)rows * ncols) {
		i64 r = idx / ncols;
		int j = (int)(idx % ncols);
		out[idx] = x[r * xcols + cols[j]];
	}
}

// conv_silu: out (n, C) <- silu(Σ_j w[c·K + j] · x[t-K+1+j, c]), rows
// before the first taken from hist (K - 1 rows of C, oldest first); float64
// sum in tap order. out is not x.
extern "C" __global__ void conv_silu(float* __restrict__ out, const float* __restrict__ x, const float* __restrict__ hist,
                                     const float* __restrict__ w, int n, int C, int K) {
	GRID_STRIDE(idx, (i64)n * C) {
		int t = (int)(idx / C), c = (int)(idx % C);
		double acc = 0;
		for (int j = 0; j < K; j++) {
			int tt = t - K + 1 + j;
			float v = tt < 0 ? hist[(i64)(tt + K - 1) * C + c] : x[(i64)tt * C + c];
			acc += (double)w[(i64)c * K + j] * (double)v;
		}
		out[idx] = (float)silu_d(acc);
	}
}

#define CONV_MAX_HIST 15

// conv_hist: hist (K - 1, C) <- the last K - 1 inputs of the window part x
// (n, C), some from hist itself when n < K - 1. One thread per channel, so
// that reading and rewriting hist in place is safe. K <= CONV_MAX_HIST + 1.
extern "C" __global__ void conv_hist(float* __restrict__ hist, const float* __restrict__ x, int n, int C, int K) {
	GRID_STRIDE(c, (i64)C) {
		float last[CONV_MAX_HIST];
		for (int r = 0; r < K - 1; r++) {
			int tt = n - K + 1 + r;
			last[r] = tt < 0 ? hist[(i64)(tt + K - 1) * C + c] : x[(i64)tt * C + c];
		}
		for (int r = 0; r < K - 1; r++) hist[(i64)r * C + c] = last[r];
	}
}

// l2norm_f32: out row <- x row / max(‖x row‖, eps), float64; out may be x.
// grid.x = rows, blockDim a multiple of 32.
extern "C" __global__ void l2norm_f32(float* out, const float* x, int rows, int d, double eps) {
	__shared__ double sh[32];
	i64 r = blockIdx.x;
	if (r >= rows) return;
	const float* xr = x + r * d;
	double ss = 0;
	for (int i = threadIdx.x; i < d; i += blockDim.x) {
		double v = (double)xr[i];
		ss += v * v;
	}
	ss = block_sum_d(ss, sh);
	double inv = 1.0 / fmax(sqrt(ss), eps);
	for (int i = threadIdx.x; i < d; i += blockDim.x) out[r * d + i] = (float)((double)xr[i] * inv);
}

// delta_gates, in place on (rows, H): beta = sigmoid(beta); alpha = a[h] ·
// softplus(alpha + dtb[h]) (softplus(x) = x above 20, as ggml), float64.
extern "C" __global__ void delta_gates(float* __restrict__ beta, float* __restrict__ alpha, const float* __restrict__ a,
                                       const float* __restrict__ dtb, int rows, int H) {
	GRID_STRIDE(idx, (i64)rows * H) {
		int h = (int)(idx % H);
		beta[idx] = (float)(1.0 / (1.0 + exp(-(double)beta[idx])));
		double v = (double)alpha[idx] + (double)dtb[h];
		double sp = v > 20 ? v : log1p(exp(v));
		alpha[idx] = (float)((double)a[h] * sp);
	}
}

// gated_rmsnorm: per row of d values, out = x / sqrt(mean(x²) + eps) · w ·
// silu(z), float64; out may be x. grid.x = rows, blockDim a multiple of 32.
extern "C" __global__ void gated_rmsnorm(float* out, const float* x, const float* __restrict__ z, const float* __restrict__ w,
                                         int rows, int d, double eps) {
	__shared__ double sh[32];
	i64 r = blockIdx.x;
	if (r >= rows) return;
	const float* xr = x + r * d;
	double ss = 0;
	for (int i = threadIdx.x; i < d; i += blockDim.x) {
		double v = (double)xr[i];
		ss += v * v;
	}
	ss = block_sum_d(ss, sh);
	double scale = 1.0 / sqrt(ss / (double)d + eps);
	for (int i = threadIdx.x; i < d; i += blockDim.x)
		out[r * d + i] = (float)((double)xr[i] * scale * (double)w[i] * silu_d((double)z[r * d + i]));
}

#define DN_MAXD 128 // largest head state size
#define DN_COLS 32  // state columns per block
#define DN_T 32     // tokens staged in shared memory at a time
#define DN_CHUNK 64 // the state is rounded to its dtype every DN_CHUNK tokens (the CPU's chunk)

// round_state rounds a float32 to the state dtype: 0 f32 (none), 1 f16, 2 bf16.
__device__ __forceinline__ float round_state(float v, int sdt) {
	if (sdt == 1) return f16_to_f32(f32_to_f16(v));
	if (sdt == 2) return bf16_to_f32(f32_to_bf16(v));
	return v;
}

// delta_net: the gated delta rule (ml.DeltaRule) for value head h =
// blockIdx.x and state columns [c0, c0 + DN_COLS), c0 = blockIdx.y ·
// DN_COLS, tokens in order, from the state in state (rows h·d + i, column
// j: S[i][j]), which it leaves holding the state after the last token. Per
// token: S ← exp(g)·S; S ← S + k ⊗ beta·(v - Sᵀk); out = Sᵀq. Each column
// of S evolves on its own (column j reads only v[j]), so blocks split the
// columns.
//
// 128 threads: lane jj + 8p of warp w holds column j = c0 + 8w + jj, rows
// i = 4r + p (r < ceil(d/4), i < d) of S in registers; the column sums Sᵀk
// and Sᵀq are each thread's float32 sum over its rows in order of r, then
// added over p by two butterfly shuffles ((p0 + p1) + (p2 + p3) on every
// lane), so a token needs no barrier. k, q, g, beta and the block's v of
// DN_T tokens are staged in shared memory (rows interleaved by p: no bank
// conflicts), two barriers per DN_T tokens. q, k (n, hk·d); v, out (n,
// hv·d); g, beta (n, hv). K head of h: h mod hk when tiled, else h div
// (hv/hk). grid (hv, ceil(d/DN_COLS)), block 128.
extern "C" __global__ void __launch_bounds__(128) delta_net(float* __restrict__ out, const float* __restrict__ q,
                                                            const float* __restrict__ k, const float* __restrict__ v,
                                                            const float* __restrict__ g, const float* __restrict__ beta,
                                                            float* __restrict__ state, int n, int hk, int hv, int d,
                                                            int tiled, int sdt) {
	__shared__ float sk[DN_T][DN_MAXD], sq[DN_T][DN_MAXD], sv[DN_T][DN_COLS], sg[DN_T], sb[DN_T];
	const int R = DN_MAXD / 4;
	int h = blockIdx.x, c0 = blockIdx.y * DN_COLS;
	int kh = tiled ? h % hk : h / (hv / hk);
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	int jj = lane & 7, p = lane >> 3;
	int jl = w * 8 + jj, j = c0 + jl; // column of S within the block, and in the head
	bool col = j < d;
	float s[R];
	float* st = state + (i64)h * d * d;
#pragma unroll
	for (int r = 0; r < R; r++) {
		int i = 4 * r + p;
		s[r] = col && i < d ? st[(i64)i * d + j] : 0.0f;
	}
	const i64 kd = (i64)hk * d, vd = (i64)hv * d;
	for (int t0 = 0; t0 < n; t0 += DN_T) {
		int T = min(DN_T, n - t0);
		__syncthreads(); // the previous tokens' stage is read
		for (int x = threadIdx.x; x < T * d; x += blockDim.x) {
			int tt = x / d, i = x % d;
			sk[tt][i] = k[(i64)(t0 + tt) * kd + (i64)kh * d + i];
			sq[tt][i] = q[(i64)(t0 + tt) * kd + (i64)kh * d + i];
		}
		for (int x = threadIdx.x; x < T * DN_COLS; x += blockDim.x) {
			int tt = x / DN_COLS, c = x % DN_COLS;
			sv[tt][c] = c0 + c < d ? v[(i64)(t0 + tt) * vd + (i64)h * d + c0 + c] : 0.0f;
		}
		if (threadIdx.x < T) {
			sg[threadIdx.x] = expf(g[(i64)(t0 + threadIdx.x) * hv + h]);
			sb[threadIdx.x] = beta[(i64)(t0 + threadIdx.x) * hv + h];
		}
		__syncthreads();
		for (int tt = 0; tt < T; tt++) {
			int t = t0 + tt;
			float decay = sg[tt], acc = 0;
#pragma unroll
			for (int r = 0; r < R; r++) {
				int i = 4 * r + p;
				if (i < d) {
					s[r] *= decay;
					acc += sk[tt][i] * s[r];
				}
			}
			acc += __shfl_xor_sync(0xffffffffu, acc, 8);
			acc += __shfl_xor_sync(0xffffffffu, acc, 16);
			float dj = sb[tt] * (sv[tt][jl] - acc);
			acc = 0;
#pragma unroll
			for (int r = 0; r < R; r++) {
				int i = 4 * r + p;
				if (i < d) {
					s[r] += sk[tt][i] * dj;
					acc += sq[tt][i] * s[r];
				}
			}
			acc += __shfl_xor_sync(0xffffffffu, acc, 8);
			acc += __shfl_xor_sync(0xffffffffu, acc, 16);
			if (col && p == 0) out[(i64)t * vd + (i64)h * d + j] = acc;
			if (sdt != 0 && ((t + 1) % DN_CHUNK == 0 || t == n - 1)) {
#pragma unroll
				for (int r = 0; r < R; r++) s[r] = round_state(s[r], sdt);
			}
		}
	}
#pragma unroll
	for (int r = 0; r < R; r++) {
		int i = 4 * r + p;
		if (col && i < d) st[(i64)i * d + j] = s[r];
	}
}
