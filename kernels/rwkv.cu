// RWKV-6 and RWKV-7 (package ml's RWKV extension): the token shift, the
// sigmoid and SiLU, the decays, a difference, the WKV6 and WKV7
// recurrences and RWKV-7's current-token term.
//
// CPU references: the plain definitions of ml.RWKV (score/ml/rwkv.go) as
// cpuBackend computes them outside the int8 modes
// (score/model/cpu_rwkv.go): token_shift and sub_f32 are its float32
// differences, bit for bit; sigmoid_f32, silu_f32, rwkv_decay and
// rwkv_bonus are float64 inside with one rounding to float32 (nn.Sigmoid,
// nn.SiLU32, nn.RWKVDecay and nn.RWKV6Decay, nn.RWKVBonus; the GPU's exp is
// within an ulp of Go's in float64); wkv6 and wkv7 are nn.WKV6GGML's and
// nn.WKV7GGML's float32 arithmetic (ggml's, its AVX-512 lanes for wkv7),
// bit for bit.
#include "common.cuh"

#define GRID_STRIDE(idx, total) \
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < (total); idx += (i64)gridDim.x * blockDim.x)

// token_shift: out (n, cols) <- x[t-1] - x[t], x[-1] = 0; out is not x.
extern "C" __global__ void token_shift(float* __restrict__ out, const float* __restrict__ x, int n, int cols) {
	GRID_STRIDE(idx, (i64)n * cols) out[idx] = idx < cols ? -x[idx] : __fsub_rn(x[idx - cols], x[idx]);
}

// sub_f32: out <- a - b over count values; out may be a or b.
extern "C" __global__ void sub_f32(float* out, const float* a, const float* b, i64 count) {
	GRID_STRIDE(idx, count) out[idx] = __fsub_rn(a[idx], b[idx]);
}

// sigmoid_f32: x <- f32(1 / (1 + e^-x)) in float64.
extern "C" __global__ void sigmoid_f32(float* __restrict__ x, i64 count) {
	GRID_STRIDE(idx, count) x[idx] = (float)__ddiv_rn(1.0, __dadd_rn(1.0, exp(-(double)x[idx])));
}

// silu_f32: x <- f32(x / (1 + e^-x)) in float64.
extern "C" __global__ void silu_f32(float* __restrict__ x, i64 count) {
	GRID_STRIDE(idx, count) {
		double v = (double)x[idx];
		x[idx] = (float)__ddiv_rn(v, __dadd_rn(1.0, exp(-v)));
	}
}

// rwkv_decay: x <- f32(exp(-0.606531 · sigmoid(x))) (kind 0, RWKV-7's) or
// f32(exp(-exp(x))) (kind 1, RWKV-6's) in float64.
extern "C" __global__ void rwkv_decay(float* __restrict__ x, i64 count, int kind) {
	GRID_STRIDE(idx, count) {
		double v = (double)x[idx];
		x[idx] = (float)exp(kind == 0 ? __ddiv_rn(-0.606531, __dadd_rn(1.0, exp(-v))) : -exp(v));
	}
}

#define WKV6_MAXD 128 // largest head of wkv6 (a thread's state column in registers)

// wkv6: RWKV-6's recurrence (ml.RWKV.WKV6: with the bonus u) or gated
// linear attention (u null) for heads of d <= 128 columns, from the state
// in state (rows h·d + i, columns j), which it leaves holding the state
// after the last token. A block per head, a thread per state column j
// keeping it in registers, tokens in order; each token's r, k, w (and u)
// staged in shared memory. nn.WKV6GGML's arithmetic, bit for bit: over
// key channels i in order, kv = v_j·k_i, then with u y = fma(fma(kv, u_i,
// s_i), r_i, y) and s_i = fma(s_i, w_i, kv), without s_i = fma(s_i, w_i,
// kv) and y = fma(s_i, r_i, y). r, k, v, w, out (n, heads·d); u (heads·d).
// grid heads, block d.
extern "C" __global__ void __launch_bounds__(WKV6_MAXD) wkv6(float* __restrict__ out, const float* __restrict__ r,
                                                             const float* __restrict__ k, const float* __restrict__ v,
                                                             const float* __restrict__ w, const float* __restrict__ u,
                                                             float* __restrict__ state, int n, int heads, int d) {
	__shared__ float sr[WKV6_MAXD], sk[WKV6_MAXD], sw[WKV6_MAXD], su[WKV6_MAXD];
	int h = blockIdx.x, j = threadIdx.x;
	i64 C = (i64)heads * d, h0 = (i64)h * d;
	float s[WKV6_MAXD];
#pragma unroll
	for (int i = 0; i < WKV6_MAXD; i++) s[i] = i < d ? state[(h0 + i) * d + j] : 0.0f;
	if (u != nullptr) su[j] = u[h0 + j];
	for (int t = 0; t < n; t++) {
		i64 o = (i64)t * C + h0;
		__syncthreads();
		sr[j] = r[o + j], sk[j] = k[o + j], sw[j] = w[o + j];
		__syncthreads();
		float vj = v[o + j], y = 0.0f;
		if (u != nullptr) {
#pragma unroll
			for (int i = 0; i < WKV6_MAXD; i++) {
				if (i < d) {
					float kv = __fmul_rn(vj, sk[i]);
					y = __fmaf_rn(__fmaf_rn(kv, su[i], s[i]), sr[i], y);
					s[i] = __fmaf_rn(s[i], sw[i], kv);
				}
			}
		} else {
#pragma unroll
			for (int i = 0; i < WKV6_MAXD; i++) {
				if (i < d) {
					s[i] = __fmaf_rn(s[i], sw[i], __fmul_rn(vj, sk[i]));
					y = __fmaf_rn(s[i], sr[i], y);
				}
			}
		}
		out[o + j] = y;
	}
#pragma unroll
	for (int i = 0; i < WKV6_MAXD; i++)
		if (i < d) state[(h0 + i) * d + j] = s[i];
}

// rwkv_bonus: for each token t and head h of d columns, out[t,h,:] +=
// v[t,h,:] · Σ_i r·k·u[h·d+i], in float64 (nn.RWKVBonus). A warp per
// (token, head); the sum in lane order (a few float64 ulps from the
// reference's). grid (n·heads+7)/8, block 256.
extern "C" __global__ void rwkv_bonus(float* __restrict__ out, const float* __restrict__ r, const float* __restrict__ k,
                                      const float* __restrict__ v, const float* __restrict__ u, int n, int heads, int d) {
	i64 w = (i64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	if (w >= (i64)n * heads) return;
	i64 base = w * d;
	int h = (int)(w % heads);
	double s = 0;
	for (int i = lane; i < d; i += 32) s = __dadd_rn(s, __dmul_rn(__dmul_rn((double)r[base + i], (double)k[base + i]), (double)u[h * d + i]));
	for (int o = 16; o > 0; o >>= 1) s = __dadd_rn(s, __shfl_xor_sync(0xffffffffu, s, o));
	for (int i = lane; i < d; i += 32) out[base + i] = (float)__dadd_rn((double)out[base + i], __dmul_rn((double)v[base + i], s));
}

#define WKV_MAXC 8 // columns a lane keeps: heads of at most 256

// lanes_sum folds a row's 64 lane accumulators, lane x holding lanes x
// (lo) and x + 32 (hi), as ggml's GGML_F32_VEC_REDUCE does on AVX-512
// (4 vectors of 16, nn.ggmlReduce): lanes l and l+32, then l and l+16 (the
// vectors pairwise), then _mm512_reduce_add_ps's l and l+8, l+4, l+2, l+1.
// Every lane returns the sum.
__device__ __forceinline__ float lanes_sum(float lo, float hi) {
	float s = __fadd_rn(lo, hi);
	for (int o = 16; o > 0; o >>= 1) {
		float other = __shfl_down_sync(0xffffffffu, s, o);
		s = __fadd_rn(s, other);
	}
	return __shfl_sync(0xffffffffu, s, 0);
}

// wkv7: RWKV-7's recurrence (ml.RWKV.WKV7) for heads of d columns, d a
// multiple of 64 up to 256, from the state in state (rows h·d + i, columns
// j), which it leaves holding the state after the last token. A warp per
// state row i of head h, tokens in order; lane x keeps columns x + 32m.
// nn.WKV7GGML's arithmetic, bit for bit: sa's and the output's products
// FMA-accumulated per lane of 64 (column j in lane j mod 64, in order of
// j), folded by lanes_sum; each state element fma(sa, b, fma(s, w, v·k)).
// r, w, k, v, a, b, out (n, heads·d). grid heads·d/8, block 256.
extern "C" __global__ void __launch_bounds__(256) wkv7(float* __restrict__ out, const float* __restrict__ r,
                                                       const float* __restrict__ w, const float* __restrict__ k,
                                                       const float* __restrict__ v, const float* __restrict__ a,
                                                       const float* __restrict__ b, float* __restrict__ state, int n,
                                                       int heads, int d) {
	i64 row = (i64)blockIdx.x * 8 + threadIdx.x / 32; // h·d + i
	int lane = threadIdx.x % 32, cols = d / 32;
	if (row >= (i64)heads * d) return;
	i64 C = (i64)heads * d, h0 = (row / d) * d;
	float s[WKV_MAXC];
#pragma unroll
	for (int m = 0; m < WKV_MAXC; m++) s[m] = m < cols ? state[row * d + lane + 32 * m] : 0.0f;
	for (int t = 0; t < n; t++) {
		i64 o = (i64)t * C + h0 + lane;
		float lo = 0.0f, hi = 0.0f; // lanes x and x+32: even m and odd m
#pragma unroll
		for (int m = 0; m < WKV_MAXC; m++) {
			if (m < cols) {
				if (m % 2 == 0) lo = __fmaf_rn(a[o + 32 * m], s[m], lo);
				else hi = __fmaf_rn(a[o + 32 * m], s[m], hi);
			}
		}
		float sa = lanes_sum(lo, hi), vi = v[(i64)t * C + row];
		lo = 0.0f, hi = 0.0f;
#pragma unroll
		for (int m = 0; m < WKV_MAXC; m++) {
			if (m < cols) {
				i64 j = o + 32 * m;
				s[m] = __fmaf_rn(sa, b[j], __fmaf_rn(s[m], w[j], __fmul_rn(vi, k[j])));
				if (m % 2 == 0) lo = __fmaf_rn(s[m], r[j], lo);
				else hi = __fmaf_rn(s[m], r[j], hi);
			}
		}
		float y = lanes_sum(lo, hi);
		if (lane == 0) out[(i64)t * C + row] = y;
	}
#pragma unroll
	for (int m = 0; m < WKV_MAXC; m++)
		if (m < cols) state[row * d + lane + 32 * m] = s[m];
}
