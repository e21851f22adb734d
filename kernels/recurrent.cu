// Package ml's Recurrent extension: Gated DeltaNet (qwen35, qwen35moe,
// qwen3next): column gathers, the causal depthwise convolution with SiLU,
// L2 norms, the delta rule's gates, the delta rule itself and the gated
// RMSNorm; Mamba-2 (granitehybrid): the convolution with a bias, the
// selective scan and the gated group norm; LFM2 (lfm2, lfm2moe): the
// plain convolution and the elementwise product of its short convolution
// blocks.
//
// References: the plain definitions of ml.Recurrent (score/ml/recurrent.go:
// float64, rounded to float32 once), which the CPU backend
// (score/model/cpu_recurrent.go) is tested against. Every operation but
// the two scans and LFM2's two computes so here (sums in another order: a
// few float64 ulps). conv_f32 and mul_f32 are the CPU's float32 sequence
// (nn.Conv, ggml's SSM_CONV and MUL), bit for bit. The delta rule and the
// selective scan keep their state in float32 registers and accumulate in
// float32, token by token (as the CPU's nn.SSMScan): a few float32 ulps
// per step, damped by the decay.
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

// conv_silu: out (n, C) <- silu(Σ_j w[c·K + j] · x[t-K+1+j, c] + bias[c]),
// rows before the first taken from hist (K - 1 rows of C, oldest first);
// float64 sum in tap order. bias may be null (none); else, as nn.ConvSiLU
// and llama.cpp, the sum is rounded to float32 and the bias added in
// float32 before silu (float64, rounded once). out is not x.
extern "C" __global__ void conv_silu(float* __restrict__ out, const float* __restrict__ x, const float* __restrict__ hist,
                                     const float* __restrict__ w, const float* __restrict__ bias, int n, int C, int K) {
	GRID_STRIDE(idx, (i64)n * C) {
		int t = (int)(idx / C), c = (int)(idx % C);
		double acc = 0;
		for (int j = 0; j < K; j++) {
			int tt = t - K + 1 + j;
			float v = tt < 0 ? hist[(i64)(tt + K - 1) * C + c] : x[(i64)tt * C + c];
			acc += (double)w[(i64)c * K + j] * (double)v;
		}
		if (bias) acc = (double)((float)acc + bias[c]);
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

// delta_gates, in place: beta (rows, H) = sigmoid(beta); alpha (rows, C)
// = a[h] · softplus(alpha + dtb[c]) for column c of head h = c div (C/H)
// (softplus(x) = x above 20, as ggml), float64. C is H, or with gates per
// key channel (Kimi's) H times the head size.
extern "C" __global__ void delta_gates(float* __restrict__ beta, float* __restrict__ alpha, const float* __restrict__ a,
                                       const float* __restrict__ dtb, int rows, int H, int C) {
	GRID_STRIDE(idx, (i64)rows * C) {
		int c = (int)(idx % C);
		if (idx < (i64)rows * H) beta[idx] = (float)(1.0 / (1.0 + exp(-(double)beta[idx])));
		double v = (double)alpha[idx] + (double)dtb[c];
		double sp = v > 20 ? v : log1p(exp(v));
		alpha[idx] = (float)((double)a[c / (C / H)] * sp);
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
// token: S ← exp(g)·S; S ← S + k ⊗ beta·(v - Sᵀk); out = Sᵀq/sqrt(d). Each column
// of S evolves on its own (column j reads only v[j]), so blocks split the
// columns. With kda, g is (n, hv·d), a log-decay per key channel: row i of
// S decays by expf(g[t, h, i]), read from global memory (each thread its
// rows').
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
                                                            int tiled, int kda, int sdt) {
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
	const float scale = 1.0f / sqrtf((float)d);
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
			sg[threadIdx.x] = kda ? 1.0f : expf(g[(i64)(t0 + threadIdx.x) * hv + h]);
			sb[threadIdx.x] = beta[(i64)(t0 + threadIdx.x) * hv + h];
		}
		__syncthreads();
		for (int tt = 0; tt < T; tt++) {
			int t = t0 + tt;
			float decay = sg[tt], acc = 0;
			const float* gk = g + ((i64)t * hv + h) * d; // kda: this token's gates
#pragma unroll
			for (int r = 0; r < R; r++) {
				int i = 4 * r + p;
				if (i < d) {
					s[r] *= kda ? expf(gk[i]) : decay;
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
			if (col && p == 0) out[(i64)t * vd + (i64)h * d + j] = acc * scale;
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

// gated_groupnorm: Mamba-2's output norm (nn.GatedGroupNormRef): per run
// of group values of a row of d, u = x·silu(z) rounded to float32, then
// out = u / sqrt(mean(u²) + eps) · w[column], float64; out may be x.
// grid.x = rows · (d / group), one block a group; blockDim a multiple of 32.
__device__ __forceinline__ double gate_u(float x, float z) { return (double)(float)(silu_d((double)z) * (double)x); }

extern "C" __global__ void gated_groupnorm(float* out, const float* x, const float* __restrict__ z,
                                           const float* __restrict__ w, int rows, int d, int group, double eps) {
	__shared__ double sh[32];
	int ng = d / group;
	i64 r = blockIdx.x / ng;
	int c0 = (int)(blockIdx.x % ng) * group;
	if (r >= rows) return;
	i64 o = r * d + c0;
	double ss = 0;
	for (int i = threadIdx.x; i < group; i += blockDim.x) {
		double u = gate_u(x[o + i], z[o + i]);
		ss += u * u;
	}
	ss = block_sum_d(ss, sh);
	double scale = 1.0 / sqrt(ss / (double)group + eps);
	for (int i = threadIdx.x; i < group; i += blockDim.x)
		out[o + i] = (float)(gate_u(x[o + i], z[o + i]) * scale * (double)w[c0 + i]);
}

// gate_silu: gated_groupnorm without the norm (ml.Recurrent.GatedGroupNorm
// with no weights): out = x·silu(z) rounded to float32, for n values; out
// may be x.
extern "C" __global__ void gate_silu(float* out, const float* x, const float* __restrict__ z, i64 n) {
	i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) out[i] = (float)gate_u(x[i], z[i]);
}

#define SS_MAXN 256 // largest state size (columns of a head's state)
#define SS_MAXK (SS_MAXN / 32)
#define SS_ROWS 4              // state rows per warp (ssm_scan's reduction is written for 4)
#define SS_BROWS (4 * SS_ROWS) // state rows per block (4 warps)
#define SS_T 16                // tokens staged in shared memory at a time

// ssm_scan: the Mamba-2 selective scan (ml.SSM; nn.SSMScan the CPU's) for
// head h = blockIdx.x and its state rows [i0, i0 + SS_BROWS), i0 =
// blockIdx.y · SS_BROWS, tokens in order, from the state in state (rows
// h·P + i, column s: S[i][s]), which it leaves holding the state after
// the last token. Per token, with group g = h div (H/G):
//
//	d = softplus(dt[t,h] + dtb[h])   (a for a > 20, else log1p(e^a))
//	S[i][s] ← S[i][s]·e^(d·A[h]) + B[t,g,s]·(x[t,h,i]·d)
//	out[t,h,i] = Σ_s S[i][s]·C[t,g,s] + D[h]·x[t,h,i]
//
// Each row of S evolves on its own, so blocks split the rows. 128
// threads: warp w holds rows i0 + SS_ROWS·w + r (r < SS_ROWS), lane l
// columns s = l + 32k (k < ceil(N/32)) in registers. d and e^(d·A) are
// float32 roundings of float64 (as nn.SSMScan), the state and the sums
// float32: each lane sums its columns in order of k, then the warp adds
// the SS_ROWS rows' sums together in 6 butterfly shuffles (halving the
// rows a lane keeps twice, xor 16 and 8, then xor 4, 2, 1): lane 8r holds
// row r's sum. sdt rounds the state after each token (0 f32, 1 f16, 2
// bf16). B, C, x and the gates of SS_T tokens are staged in shared memory
// (33 KB), two barriers per SS_T tokens. x, out (n, H·P); dt (n, H); B, C
// (n, G·N); A, D, dtb (H). N <= SS_MAXN. grid (H, ceil(P/SS_BROWS)), block
// 128.
extern "C" __global__ void __launch_bounds__(128) ssm_scan(float* __restrict__ out, const float* __restrict__ x,
                                                           const float* __restrict__ dt, const float* __restrict__ B,
                                                           const float* __restrict__ C, float* __restrict__ state,
                                                           const float* __restrict__ A, const float* __restrict__ D,
                                                           const float* __restrict__ dtb, int n, int H, int P, int G,
                                                           int N, int sdt) {
	__shared__ float sB[SS_T][SS_MAXN], sC[SS_T][SS_MAXN], sx[SS_T][SS_BROWS], sd[SS_T], sdA[SS_T];
	int h = blockIdx.x, i0 = blockIdx.y * SS_BROWS;
	int g = h / (H / G);
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	int nk = (N + 31) / 32, ncols = 32 * nk; // the columns staged: B and C zero past N, so those of S stay 0
	float a = A[h], dd = D[h], bias = dtb[h];
	float s[SS_ROWS][SS_MAXK];
	float* st = state + ((i64)h * P + i0 + SS_ROWS * w) * N;
#pragma unroll
	for (int r = 0; r < SS_ROWS; r++) {
#pragma unroll
		for (int k = 0; k < SS_MAXK; k++) {
			int c = lane + 32 * k;
			s[r][k] = k < nk && c < N && i0 + SS_ROWS * w + r < P ? st[(i64)r * N + c] : 0.0f;
		}
	}
	const i64 xd = (i64)H * P, bd = (i64)G * N;
	for (int t0 = 0; t0 < n; t0 += SS_T) {
		int T = min(SS_T, n - t0);
		__syncthreads(); // the previous tokens' stage is read
		for (int q = threadIdx.x; q < T * ncols; q += blockDim.x) {
			int tt = q / ncols, c = q % ncols;
			i64 at = (i64)(t0 + tt) * bd + (i64)g * N + c;
			sB[tt][c] = c < N ? B[at] : 0.0f;
			sC[tt][c] = c < N ? C[at] : 0.0f;
		}
		for (int q = threadIdx.x; q < T * SS_BROWS; q += blockDim.x) {
			int tt = q / SS_BROWS, i = i0 + q % SS_BROWS;
			sx[tt][q % SS_BROWS] = i < P ? x[(i64)(t0 + tt) * xd + (i64)h * P + i] : 0.0f;
		}
		if (threadIdx.x < T) {
			float v = dt[(i64)(t0 + threadIdx.x) * H + h] + bias;
			float d = v > 20.0f ? v : (float)log1p(exp((double)v));
			sd[threadIdx.x] = d;
			sdA[threadIdx.x] = (float)exp((double)(d * a));
		}
		__syncthreads();
		for (int tt = 0; tt < T; tt++) {
			float d = sd[tt], dA = sdA[tt], xv[SS_ROWS], y[SS_ROWS];
#pragma unroll
			for (int r = 0; r < SS_ROWS; r++) {
				xv[r] = sx[tt][SS_ROWS * w + r];
				y[r] = 0.0f;
			}
#pragma unroll
			for (int k = 0; k < SS_MAXK; k++) {
				if (k < nk) {
					float b = sB[tt][lane + 32 * k], c = sC[tt][lane + 32 * k];
#pragma unroll
					for (int r = 0; r < SS_ROWS; r++) {
						float v = s[r][k] * dA + b * (xv[r] * d);
						y[r] += v * c;
						s[r][k] = v;
					}
				}
			}
			if (sdt != 0) {
#pragma unroll
				for (int r = 0; r < SS_ROWS; r++) {
#pragma unroll
					for (int k = 0; k < SS_MAXK; k++) s[r][k] = round_state(s[r][k], sdt);
				}
			}
			// Rows 0, 1 stay on lanes without bit 16, rows 2, 3 on those with.
			bool hi = lane & 16;
			float p0 = hi ? y[2] : y[0], p1 = hi ? y[3] : y[1];
			p0 += __shfl_xor_sync(0xffffffffu, hi ? y[0] : y[2], 16);
			p1 += __shfl_xor_sync(0xffffffffu, hi ? y[1] : y[3], 16);
			// Then the even row on lanes without bit 8, the odd one on those with.
			bool odd = lane & 8;
			float sum = odd ? p1 : p0;
			sum += __shfl_xor_sync(0xffffffffu, odd ? p0 : p1, 8);
			sum += __shfl_xor_sync(0xffffffffu, sum, 4);
			sum += __shfl_xor_sync(0xffffffffu, sum, 2);
			sum += __shfl_xor_sync(0xffffffffu, sum, 1);
			int r = lane >> 3, i = i0 + SS_ROWS * w + r;
			if ((lane & 7) == 0 && i < P) out[(i64)(t0 + tt) * xd + (i64)h * P + i] = sum + dd * sx[tt][SS_ROWS * w + r];
		}
	}
#pragma unroll
	for (int r = 0; r < SS_ROWS; r++) {
#pragma unroll
		for (int k = 0; k < SS_MAXK; k++) {
			int c = lane + 32 * k;
			if (k < nk && c < N && i0 + SS_ROWS * w + r < P) st[(i64)r * N + c] = s[r][k];
		}
	}
}

#define SC_MAXN 32 // largest state of ssm_scan_cols (columns a thread keeps in registers)

// ssm_scan_cols: the selective scan with a decay per state column (Mamba-1:
// ml.SSM with StateDecays, heads of one channel, one group of B and C) for
// channel h = blockIdx.x · 128 + threadIdx.x, tokens in order, from the
// state in state (row h, column s: S[h][s]), which it leaves holding the
// state after the last token. Per token:
//
//	d = softplus(dt[t,h] + dtb[h])   (a for a > 20, else log1p(e^a))
//	S[h][s] ← S[h][s]·e^(d·A[h,s]) + B[t,s]·(x[t,h]·d)
//	out[t,h] = Σ_s S[h][s]·C[t,s] + D[h]·x[t,h]
//
// A thread keeps its channel's N <= SC_MAXN columns in registers. d and
// each e^(d·A) are float32 roundings of float64, every product and sum is
// rounded on its own (__fmul_rn, __fadd_rn: no contraction) and the sum
// runs over the columns in order: nn.SSMScan's arithmetic, so the two
// agree wherever CUDA's exp and log1p round as Go's. sdt rounds the state
// after each token (0 f32, 1 f16, 2 bf16). x, out, dt (n, H); B, C (n, N);
// A (H, N); D, dtb (H). grid ceil(H/128), block 128.
extern "C" __global__ void __launch_bounds__(128) ssm_scan_cols(float* __restrict__ out, const float* __restrict__ x,
                                                                const float* __restrict__ dt, const float* __restrict__ B,
                                                                const float* __restrict__ C, float* __restrict__ state,
                                                                const float* __restrict__ A, const float* __restrict__ D,
                                                                const float* __restrict__ dtb, int n, int H, int N, int sdt) {
	int h = blockIdx.x * blockDim.x + threadIdx.x;
	if (h >= H) return;
	float s[SC_MAXN], a[SC_MAXN];
#pragma unroll
	for (int k = 0; k < SC_MAXN; k++) {
		s[k] = k < N ? state[(i64)h * N + k] : 0.0f;
		a[k] = k < N ? A[(i64)h * N + k] : 0.0f;
	}
	float dd = D[h], bias = dtb[h];
	for (int t = 0; t < n; t++) {
		float v = __fadd_rn(dt[(i64)t * H + h], bias);
		float d = v > 20.0f ? v : (float)log1p(exp((double)v));
		float xv = x[(i64)t * H + h], xd = __fmul_rn(xv, d), y = 0.0f;
		const float *bt = B + (i64)t * N, *ct = C + (i64)t * N;
#pragma unroll
		for (int k = 0; k < SC_MAXN; k++) {
			if (k < N) {
				float dA = (float)exp((double)__fmul_rn(d, a[k]));
				s[k] = __fadd_rn(__fmul_rn(s[k], dA), __fmul_rn(bt[k], xd));
				y = __fadd_rn(y, __fmul_rn(s[k], ct[k]));
				if (sdt != 0) s[k] = round_state(s[k], sdt);
			}
		}
		out[(i64)t * H + h] = __fadd_rn(y, __fmul_rn(dd, xv));
	}
#pragma unroll
	for (int k = 0; k < SC_MAXN; k++) {
		if (k < N) state[(i64)h * N + k] = s[k];
	}
}

// LFM2's short convolution blocks (lfm2, lfm2moe).

// conv_f32: the convolution of conv_silu without bias or SiLU (ggml's
// SSM_CONV, nn.Conv the CPU's): out (n, C) <- Σ_j w[c·K + j] ·
// x[t-K+1+j, c], rows before the first from hist (conv_hist then updates
// it). The CPU's float32 arithmetic exactly: from 0, taps in order from
// the oldest, each product and each sum rounded apart (__fmul_rn,
// __fadd_rn: nvcc may not contract them into fused multiply-adds), so the
// two agree to the bit. out is not x.
extern "C" __global__ void conv_f32(float* __restrict__ out, const float* __restrict__ x, const float* __restrict__ hist,
                                    const float* __restrict__ w, int n, int C, int K) {
	GRID_STRIDE(idx, (i64)n * C) {
		int t = (int)(idx / C), c = (int)(idx % C);
		float acc = 0.0f;
		for (int j = 0; j < K; j++) {
			int tt = t - K + 1 + j;
			float v = tt < 0 ? hist[(i64)(tt + K - 1) * C + c] : x[(i64)tt * C + c];
			acc = __fadd_rn(acc, __fmul_rn(v, w[(i64)c * K + j]));
		}
		out[idx] = acc;
	}
}

// mul_f32: out <- a ⊙ b over count values, each product rounded to float32
// (__fmul_rn); out may be a or b (each element is read before its own
// write, by the same thread).
extern "C" __global__ void mul_f32(float* out, const float* a, const float* b, i64 count) {
	GRID_STRIDE(i, count) out[i] = __fmul_rn(a[i], b[i]);
}
