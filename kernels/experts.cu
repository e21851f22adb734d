// Mixture of experts: the routing and the data movement around the
// per-expert products.
//
// CPU reference: ml.Router.Route (score/ml/route.go) and
// cpuBackend.Experts (score/model/cpu.go). moe_route chooses each token's
// experts and weights on the device in the router's float64 arithmetic
// (the int8 modes' float32 ggml routing stays on the host); the host orders
// a block of rows' choices by expert; gather_rows copies the tokens' rows
// into the products' input, expert after expert, cuBLAS runs the experts'
// gate, up and down products (batched, score/cuda/ml.go's Experts), and
// scatter_scaled writes each result row times its weight to its choice's
// slot; then sum_choices adds each token's K slots in the order of its
// choices, as the CPU does (float32 products and adds), so the grouping
// does not change a bit of the result.
#include "common.cuh"

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

// route_left reports, on every lane, whether a lane saw a NaN; then the
// row is left to the host and lane 0 sets *flag.
__device__ __forceinline__ bool route_left(bool nan, int* flag) {
	if (!__any_sync(0xffffffffu, nan)) return false;
	if ((threadIdx.x & 31) == 0) atomicMax(flag, 1);
	return true;
}

// moe_route: token t's K experts (experts[t·K + j], best first) and their
// weights (weights[t·K + j]) from its n_exp router logits, as
// ml.Router.routeRows computes them in float64 (gating 1 softmax, 2
// sigmoid, 3 softmax of the chosen logits, 4 sqrt(softplus); bias: the
// selection bias or
// null; groups, groups_used; chunk; opts bit 0 Norm, bit 1 SelectSigmoid;
// scale 0 for none): every step the same operation in the same order, the
// sums sequential. One warp a token (block = 32 threads, grid = tokens).
// A row with a NaN logit or a NaN selection score (an infinite logit),
// whose order the host's stable sort decides, sets *flag and the host
// routes the block itself.
extern "C" __global__ void moe_route(const float* __restrict__ logits, const float* __restrict__ bias, int* __restrict__ experts,
                                     float* __restrict__ weights, int* __restrict__ flag, int n, int n_exp, int k, int gating,
                                     int groups, int groups_used, int chunk, int opts, double scale) {
	__shared__ double p[ROUTE_MAXE], s[ROUTE_MAXE];
	const unsigned all = 0xffffffffu;
	int t = blockIdx.x, lane = threadIdx.x & 31;
	if (t >= n) return;
	const float* row = logits + (i64)t * n_exp;
	bool nan = false;
	double mx = -INFINITY;
	for (int i = lane; i < n_exp; i += 32) {
		float v = row[i];
		nan |= v != v;
		p[i] = (double)v;
	}
	if (route_left(nan, flag)) return;
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
	for (int i = lane; i < n_exp; i += 32) {
		double x = p[i];
		if (opts & 2) x = __ddiv_rn(1.0, __dadd_rn(1.0, exp(-(double)row[i])));
		if (bias) x = __dadd_rn(x, (double)bias[i]);
		s[i] = x;
		nan |= x != x;
	}
	if (route_left(nan, flag)) return;
	__syncwarp();
	if (groups > 1) {
		// A group's score is the sum of its two best; the groups_used best
		// stay eligible (marked by a NaN score), the others' experts -Inf.
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
		if (route_left(nan, flag)) return;
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
	int* ex = experts + (i64)t * k;
	float* wt = weights + (i64)t * k;
	for (int j = 0; j < k; j++) {
		int e = route_best(s, n_exp);
		if (lane == 0) {
			s[e] = NAN;
			if (chunk > 0) e = (int)__fmul_rn((float)e, __frcp_rn((float)chunk));
			ex[j] = e;
		}
		__syncwarp();
	}
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
