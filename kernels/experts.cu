// Mixture of experts: the routing and the data movement around the
// per-expert products.
//
// CPU reference: ml.Router.Route (score/ml/route.go) and
// cpuBackend.Experts (score/model/cpu.go). moe_route chooses each token's
// experts and weights on the device in the router's float64 arithmetic,
// moe_route_ggml in the int8 modes' float32 ggml arithmetic (llama.cpp's
// CPU graph, to the bit; ties, whose order is std::sort's, go to the
// host); the host orders
// a block of rows' choices by expert; gather_rows copies the tokens' rows
// into the products' input, expert after expert, cuBLAS runs the experts'
// gate, up and down products (batched, score/cuda/ml.go's Experts), and
// scatter_scaled writes each result row times its weight to its choice's
// slot; then sum_choices adds each token's K slots in the order of its
// choices, as the CPU does (float32 products and adds), so the grouping
// does not change a bit of the result.
#include "common.cuh"
#include "libm.cuh"

#define GRID_STRIDE(idx, total) \
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < (total); idx += (i64)gridDim.x * blockDim.x)

// gather_rows: out row i (cols values: bf16 (otype 0), fp16 (1) or float32
// (2, experts stored float32)) <- x row rows[i] (f32), for n rows.
extern "C" __global__ void gather_rows(void* __restrict__ out, const float* __restrict__ x, const int* __restrict__ rows,
                                       int n, int cols, int otype) {
	GRID_STRIDE(idx, (i64)n * cols) {
		i64 i = idx / cols;
		int c = (int)(idx % cols);
		float v = x[(i64)rows[i] * cols + c];
		if (otype == 2)
			((float*)out)[idx] = v;
		else
			((u16*)out)[idx] = otype ? f32_to_f16(v) : f32_to_bf16(v);
	}
}

// scale_rows: out row i (cols f32) <- x row rows[i] · w[i], for n rows:
// the inputs of experts weighted before their FFN (Llama 4).
extern "C" __global__ void scale_rows(float* __restrict__ out, const float* __restrict__ x, const int* __restrict__ rows,
                                      const float* __restrict__ w, int n, int cols) {
	GRID_STRIDE(idx, (i64)n * cols) {
		i64 i = idx / cols;
		int c = (int)(idx % cols);
		out[idx] = __fmul_rn(x[(i64)rows[i] * cols + c], w[i]);
	}
}

// scatter_scaled: slot choice[i] of res (slots of cols f32) <- y row i ·
// w[choice[i]], for n rows.
extern "C" __global__ void scatter_scaled(float* __restrict__ res, const float* __restrict__ y, const int* __restrict__ choice,
                                          const float* __restrict__ w, int n, int cols) {
	GRID_STRIDE(idx, (i64)n * cols) {
		i64 i = idx / cols;
		int c = (int)(idx % cols);
		int s = choice[i];
		res[(i64)s * cols + c] = __fmul_rn(y[idx], w[s]);
	}
}

// sum_choices: dst row t <- res slot t·k + 0, plus slots t·k + 1 .. k-1 in
// order (f32 adds), for rows tokens.
extern "C" __global__ void sum_choices(float* __restrict__ dst, const float* __restrict__ res, int rows, int k, int cols) {
	GRID_STRIDE(idx, (i64)rows * cols) {
		i64 t = idx / cols;
		int c = (int)(idx % cols);
		const float* s = res + t * k * cols + c;
		float v = s[0];
		for (int j = 1; j < k; j++) v = __fadd_rn(v, s[(i64)j * cols]);
		dst[idx] = v;
	}
}

// ---- Routing (ml.Router's float64 path, routeRows).

#define ROUTE_MAXE 512 // the most experts moe_route takes (a warp's two rows of doubles in shared memory)

// go_max is Go's math.Max: NaN if either is, +0 over -0.
__device__ __forceinline__ double go_max(double a, double b) {
	if (a != a || b != b) return a + b;
	if (a == 0 && b == 0) return __longlong_as_double(__double_as_longlong(a) & __double_as_longlong(b));
	return a > b ? a : b;
}

// route_best returns, on every lane, the index of the largest of v[0..n)
// that is not NaN (taken), the lowest index among equals; -1 if all are
// NaN. K rounds of it, each marking its pick NaN, give the order of
// ml.Router's selectBest: largest first, ties in index order.
__device__ int route_best(const double* v, int n) {
	int lane = threadIdx.x & 31, bi = -1;
	double bv = 0;
	for (int i = lane; i < n; i += 32) {
		double x = v[i];
		if (x == x && (bi < 0 || x > bv)) bv = x, bi = i;
	}
	for (int o = 16; o > 0; o >>= 1) {
		double ov = __shfl_xor_sync(0xffffffffu, bv, o);
		int oi = __shfl_xor_sync(0xffffffffu, bi, o);
		if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) bv = ov, bi = oi;
	}
	return bi;
}

// route_leave leaves a row to the host: its first expert (ex) -1, *flag 1.
__device__ __forceinline__ void route_leave(int* flag, int* ex) {
	ex[0] = -1;
	atomicMax(flag, 1);
}

// route_left reports, on every lane, whether a lane saw a NaN; then lane 0
// leaves the row to the host (route_leave).
__device__ __forceinline__ bool route_left(bool nan, int* flag, int* ex) {
	if (!__any_sync(0xffffffffu, nan)) return false;
	if ((threadIdx.x & 31) == 0) route_leave(flag, ex);
	return true;
}

// moe_route: token t's K experts (experts[t·K + j], best first) and their
// weights (weights[t·K + j]) from its n_exp router logits, as
// ml.Router.routeRows computes them in float64 (gating 1 softmax, 2
// sigmoid, 3 softmax of the chosen logits, 4 sqrt(softplus); bias: the
// selection bias or null; groups, groups_used; chunk; opts bit 0 Norm, bit
// 1 SelectSigmoid, bit 2 the experts given in experts, as ml.Router's
// Chosen: the weights alone; scale 0 for none): every step the same
// operation in the same order, the sums sequential. One warp a token
// (block = 32 threads, grid = tokens).
// A row with a NaN logit or a NaN selection score (an infinite logit),
// whose order the host's stable sort decides, is left to the host: its
// experts[t·K] is -1 and *flag 1.
extern "C" __global__ void moe_route(const float* __restrict__ logits, const float* __restrict__ bias, int* __restrict__ experts,
                                     float* __restrict__ weights, int* __restrict__ flag, int n, int n_exp, int k, int gating,
                                     int groups, int groups_used, int chunk, int opts, double scale) {
	__shared__ double p[ROUTE_MAXE], s[ROUTE_MAXE];
	const unsigned all = 0xffffffffu;
	int t = blockIdx.x, lane = threadIdx.x & 31;
	if (t >= n) return;
	const float* row = logits + (i64)t * n_exp;
	int* ex = experts + (i64)t * k;
	float* wt = weights + (i64)t * k;
	bool nan = false;
	double mx = -INFINITY;
	for (int i = lane; i < n_exp; i += 32) {
		float v = row[i];
		nan |= v != v;
		p[i] = (double)v;
	}
	if (route_left(nan, flag, ex)) return;
	__syncwarp();
	if (gating == 1) {
		if (lane == 0) {
			for (int i = 0; i < n_exp; i++) mx = go_max(mx, p[i]);
		}
		mx = __shfl_sync(all, mx, 0);
		for (int i = lane; i < n_exp; i += 32) p[i] = exp(__dadd_rn(p[i], -mx));
		__syncwarp();
		double sum = 0;
		if (lane == 0) {
			for (int i = 0; i < n_exp; i++) sum = __dadd_rn(sum, p[i]);
		}
		sum = __shfl_sync(all, sum, 0);
		for (int i = lane; i < n_exp; i += 32) p[i] = __ddiv_rn(p[i], sum);
	} else if (gating == 2) {
		for (int i = lane; i < n_exp; i += 32) p[i] = __ddiv_rn(1.0, __dadd_rn(1.0, exp(-p[i])));
	} else if (gating == 4) {
		for (int i = lane; i < n_exp; i += 32) p[i] = __dsqrt_rn(p[i] <= 20 ? log1p(exp(p[i])) : p[i]);
	}
	if (!(opts & 4)) { // the choice, unless given
		for (int i = lane; i < n_exp; i += 32) {
			double x = p[i];
			if (opts & 2) x = __ddiv_rn(1.0, __dadd_rn(1.0, exp(-(double)row[i])));
			if (bias) x = __dadd_rn(x, (double)bias[i]);
			s[i] = x;
			nan |= x != x;
		}
		if (route_left(nan, flag, ex)) return;
		__syncwarp();
		if (groups > 1) {
			// A group's score is the sum of its two best; the groups_used
			// best stay eligible (marked by a NaN score), the others'
			// experts -Inf.
			__shared__ double gs[ROUTE_MAXE / 2];
			int per = n_exp / groups;
			for (int g = lane; g < groups; g += 32) {
				double a = -INFINITY, b = -INFINITY;
				for (int i = g * per; i < (g + 1) * per; i++) {
					double v = s[i];
					if (v > a) b = a, a = v;
					else if (v > b) b = v;
				}
				gs[g] = __dadd_rn(a, b);
				nan |= gs[g] != gs[g];
			}
			if (route_left(nan, flag, ex)) return;
			__syncwarp();
			for (int j = 0; j < groups_used; j++) {
				int g = route_best(gs, groups);
				if (lane == 0) gs[g] = NAN;
				__syncwarp();
			}
			for (int i = lane; i < n_exp; i += 32)
				if (gs[i / per] == gs[i / per]) s[i] = -INFINITY;
			__syncwarp();
		}
		for (int j = 0; j < k; j++) {
			int e = route_best(s, n_exp);
			if (lane == 0) {
				s[e] = NAN;
				if (chunk > 0) e = (int)__fmul_rn((float)e, __frcp_rn((float)chunk));
				ex[j] = e;
			}
			__syncwarp();
		}
	}
	__syncwarp();
	if (lane != 0) return;
	// The weights, lane 0 alone (K values, in order); s[0..k) holds them.
	if (gating == 3) {
		double m = -INFINITY, sum = 0;
		for (int j = 0; j < k; j++) m = go_max(m, p[ex[j]]);
		for (int j = 0; j < k; j++) {
			s[j] = exp(__dadd_rn(p[ex[j]], -m));
			sum = __dadd_rn(sum, s[j]);
		}
		for (int j = 0; j < k; j++) s[j] = __ddiv_rn(s[j], sum);
	} else {
		for (int j = 0; j < k; j++) s[j] = p[ex[j]];
	}
	if (opts & 1) {
		double sum = 0;
		for (int j = 0; j < k; j++) sum = __dadd_rn(sum, s[j]);
		sum = go_max(sum, 0x1p-14);
		for (int j = 0; j < k; j++) s[j] = __ddiv_rn(s[j], sum);
	}
	for (int j = 0; j < k; j++) wt[j] = __double2float_rn(scale != 0 ? __dmul_rn(s[j], scale) : s[j]);
}

// ---- Routing as llama.cpp's CPU graph computes it (ml.Router's GGML path,
// routeGGML), float32 ggml operations to the bit.

// ggml_soft_max sets y to ggml's SOFT_MAX of x (n values; y may be x), as
// nn.GGMLSoftMax: the maximum as ggml's MAX, e^(x - max) by ggml_v_expf in
// whole registers of 16 lanes (avx2: 8) and glibc's expf past them, each
// register's sum (ggml_lane_sum) and each value past them added in double,
// then every value times float32(1/sum).
__device__ void ggml_soft_max(float* y, const float* x, int n, int avx2) {
	float m = -INFINITY;
	for (int i = 0; i < n; i++)
		if (!(m > x[i])) m = x[i];
	const int lanes = avx2 ? 8 : 16, whole = n / lanes * lanes;
	double sum = 0.0;
	for (int i = 0; i < whole; i += lanes) {
		for (int l = 0; l < lanes; l++) y[i + l] = ggml_expf(__fsub_rn(x[i + l], m), avx2);
		sum = __dadd_rn(sum, (double)ggml_lane_sum(y + i, avx2));
	}
	for (int i = whole; i < n; i++) {
		y[i] = libc_expf(__fsub_rn(x[i], m));
		sum = __dadd_rn(sum, (double)y[i]);
	}
	const float inv = (float)__ddiv_rn(1.0, sum);
	for (int i = 0; i < n; i++) y[i] = __fmul_rn(y[i], inv);
}

// ggml_sigmoid is ggml's SIGMOID of x: 1/(1 + expf(-x)) in float32,
// glibc's expf (nn.GGMLSigmoid).
__device__ __forceinline__ float ggml_sigmoid(float x) { return __fdiv_rn(1.0f, __fadd_rn(1.0f, libc_expf(-x))); }

// ggml_sqrt_softplus is ggml's SQRT of SOFTPLUS: sqrtf of x past 20, else
// of logf(1 + expf(x)), glibc's logf and expf (nn.GGMLSoftplus).
__device__ __forceinline__ float ggml_sqrt_softplus(float x) {
	return __fsqrt_rn(x > 20.0f ? x : libc_logf(__fadd_rn(1.0f, libc_expf(x))));
}

// ggml_best puts in idx[0..min(k, n)) the k largest of v[0..n), largest
// first, and returns 1 where ggml's ARGSORT (std::sort) must put them first
// in that order: v holds no NaN and each of them is the only one of its
// value, so that its min(k + 1, n) largest are distinct (ml's ggmlBest).
// Otherwise 0: equal values come out in std::sort's order, which the host
// follows.
__device__ int ggml_best(int* idx, const float* v, int n, int k) {
	for (int i = 0; i < n; i++)
		if (v[i] != v[i]) return 0;
	const int m = min(k, n);
	float prev = INFINITY;
	for (int j = 0; j < m; j++) {
		int bi = -1, same = 0;
		for (int i = 0; i < n; i++) {
			const float x = v[i];
			if (j > 0 && !(x < prev)) continue;
			if (bi < 0 || x > v[bi]) {
				bi = i, same = 0;
			} else if (x == v[bi]) {
				same = 1;
			}
		}
		if (bi < 0 || same) return 0;
		idx[j] = bi;
		prev = v[bi];
	}
	return 1;
}

// moe_route_ggml: moe_route's outputs for n tokens as ml.Router's GGML
// path computes them (routeGGML, chooseGGML; gating 1 softmax, 2 sigmoid,
// 3 softmax of the chosen logits, 4 sqrt(softplus); opts as moe_route's;
// scale 0 or 1 for none), one thread a token: p by ggml's SOFT_MAX,
// SIGMOID (glibc's expf) or SQRT of SOFTPLUS (glibc's logf and expf);
// unless the experts are given, the selection scores p (or the sigmoid of
// the logits) plus the bias in float32, each group scored by the double
// sum of its two best rounded to float32 and all but the groups_used best
// groups' experts -inf, the k best (each mapped to its chunk: float32(e)·
// float32(1/chunk), truncated); their p (ggml's SOFT_MAX of them for
// gating 3), divided by max(their double sum rounded, 2^-14) with Norm and
// times float32(scale). A row with a NaN logit (the host's error) or whose
// choice meets equal values (groups or experts: std::sort's order) is left
// to the host: experts[t·k] is -1 and *flag 1.
extern "C" __global__ void moe_route_ggml(const float* __restrict__ logits, const float* __restrict__ bias,
                                          int* __restrict__ experts, float* __restrict__ weights, int* __restrict__ flag,
                                          int n, int n_exp, int k, int gating, int groups, int groups_used, int chunk,
                                          int opts, double scale, int avx2) {
	const int t = blockIdx.x * blockDim.x + threadIdx.x;
	if (t >= n) return;
	float p[ROUTE_MAXE], s[ROUTE_MAXE], gs[ROUTE_MAXE / 2];
	int idx[ROUTE_MAXE];
	const float* row = logits + (i64)t * n_exp;
	int* ex = experts + (i64)t * k;
	float* wt = weights + (i64)t * k;
	for (int i = 0; i < n_exp; i++) {
		const float x = row[i];
		if (x != x) {
			route_leave(flag, ex);
			return;
		}
		p[i] = gating == 2 ? ggml_sigmoid(x) : x;
	}
	if (gating == 1) ggml_soft_max(p, p, n_exp, avx2);
	if (gating == 4)
		for (int i = 0; i < n_exp; i++) p[i] = ggml_sqrt_softplus(p[i]);
	if (!(opts & 4)) { // the choice, unless given
		for (int i = 0; i < n_exp; i++) {
			const float x = (opts & 2) ? ggml_sigmoid(row[i]) : p[i];
			s[i] = bias ? __fadd_rn(x, bias[i]) : x;
		}
		int ok = 1;
		if (groups > 1) {
			const int per = n_exp / groups;
			ok = per >= 2;
			for (int g = 0; g < groups && ok; g++) {
				// The sum of the group's two best values, whichever of
				// equal values ARGSORT puts first.
				float a = -INFINITY, b = -INFINITY;
				for (int i = g * per; i < (g + 1) * per; i++) {
					const float v = s[i];
					ok &= v == v;
					if (v > a) b = a, a = v;
					else if (v > b) b = v;
				}
				gs[g] = (float)__dadd_rn((double)a, (double)b);
			}
			ok = ok && ggml_best(idx, gs, groups, groups_used);
			for (int g = 0; g < groups && ok; g++) {
				int used = 0;
				for (int j = 0; j < groups_used; j++) used |= idx[j] == g;
				if (!used)
					for (int i = g * per; i < (g + 1) * per; i++) s[i] = -INFINITY;
			}
		}
		if (!ok || !ggml_best(idx, s, n_exp, k)) {
			route_leave(flag, ex);
			return;
		}
		for (int j = 0; j < k; j++) {
			int e = idx[j];
			if (chunk > 0) e = (int)__fmul_rn((float)e, __fdiv_rn(1.0f, (float)chunk));
			ex[j] = e;
		}
	}
	float w[ROUTE_MAXE];
	for (int j = 0; j < k; j++) w[j] = p[ex[j]];
	if (gating == 3) ggml_soft_max(w, w, k, avx2);
	if (opts & 1) {
		double sum = 0.0;
		for (int j = 0; j < k; j++) sum = __dadd_rn(sum, (double)w[j]);
		float d = (float)sum;
		if (d == d && d < 0x1p-14f) d = 0x1p-14f;
		for (int j = 0; j < k; j++) w[j] = __fdiv_rn(w[j], d);
	}
	const float sc = (float)scale;
	for (int j = 0; j < k; j++) wt[j] = (scale != 0.0 && scale != 1.0) ? __fmul_rn(w[j], sc) : w[j];
}
