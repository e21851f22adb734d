// Gemma 3n (package ml's AltUp extension and ml.MLP.TopK): tanh, a product
// by a column vector, rescaling rows to a reference's norms, AltUp's
// prediction and correction of the residual streams, and the gate's
// gaussian top-k sparsification.
//
// CPU references: the plain definitions of ml.AltUp (score/ml/altup.go),
// i.e. nn.Tanh, nn.MatchNorm, nn.AltUpPredict, nn.AltUpCorrect and
// nn.GaussianTopK (score/nn/altup.go: float64 inside, rounded to float32
// once), as cpuBackend computes them (score/model/cpu_altup.go) outside
// the int8 modes; mul_cols is cpuBackend.MulCols's float32 product. The
// streams are stacked: for A streams of n tokens, rows [k·n, (k+1)·n) are
// stream k. Sums in float64 in the reference's order, but for the row
// reductions of match_norm and gaussian_topk (a block's order: a few
// float64 ulps); the GPU's tanh is within an ulp of Go's in float64.
#include "common.cuh"

#define GRID_STRIDE(idx, total) \
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < (total); idx += (i64)gridDim.x * blockDim.x)

// tanh_f32: x = f32(tanh(x)) in float64 (nn.Tanh).
extern "C" __global__ void tanh_f32(float* __restrict__ x, i64 count) {
	GRID_STRIDE(idx, count) x[idx] = (float)tanh((double)x[idx]);
}

// mul_cols: out (rows, cols) <- x · w[col], float32 products
// (cpuBackend.MulCols); out may be x.
extern "C" __global__ void mul_cols(float* out, const float* x, const float* __restrict__ w, int rows, int cols) {
	GRID_STRIDE(idx, (i64)rows * cols) out[idx] = __fmul_rn(x[idx], w[idx % cols]);
}

// match_norm: each row of x (rows, d) <- x · ‖ref row‖ / ‖x row‖, float64
// (nn.MatchNorm); ref may be x. grid.x = rows, blockDim a multiple of 32.
extern "C" __global__ void match_norm(float* x, const float* ref, int rows, int d) {
	__shared__ double sh[32];
	i64 r = blockIdx.x;
	if (r >= rows) return;
	float* xr = x + r * d;
	const float* rr = ref + r * d;
	double sx = 0, sr = 0;
	for (int i = threadIdx.x; i < d; i += blockDim.x) {
		double v = (double)xr[i], w = (double)rr[i];
		sx = __dadd_rn(sx, __dmul_rn(v, v));
		sr = __dadd_rn(sr, __dmul_rn(w, w));
	}
	sx = block_sum_d(sx, sh);
	sr = block_sum_d(sr, sh);
	double f = __ddiv_rn(sqrt(sr), sqrt(sx));
	for (int i = threadIdx.x; i < d; i += blockDim.x) xr[i] = (float)__dmul_rn((double)xr[i], f);
}

// altup_predict: for A streams of n tokens of cols values stacked in x,
// dst[j][t] = x[j][t] + Σ_k coef[t, j·A+k] · x[k][t], float64 in order of
// k (nn.AltUpPredict); coef (n, A·A). dst is not x.
extern "C" __global__ void altup_predict(float* __restrict__ dst, const float* __restrict__ x, const float* __restrict__ coef,
                                         int n, int A, int cols) {
	i64 per = (i64)n * cols; // one stream
	GRID_STRIDE(idx, (i64)A * per) {
		int j = (int)(idx / per);
		i64 te = idx % per;
		const float* c = coef + (te / cols) * A * A + j * A;
		double s = (double)x[idx];
		for (int k = 0; k < A; k++) s = __dadd_rn(s, __dmul_rn((double)c[k], (double)x[k * per + te]));
		dst[idx] = (float)s;
	}
}

// altup_correct: for A streams of n tokens of cols values stacked in pred,
// dst[j][t] = pred[j][t] + (act[t] - pred[active][t]) · (coef[t, j] + 1),
// float64 (nn.AltUpCorrect); act (n, cols), coef (n, A). dst may be pred:
// one thread per (token, column) reads pred[active] before writing any
// stream.
extern "C" __global__ void altup_correct(float* dst, const float* pred, const float* __restrict__ act,
                                         const float* __restrict__ coef, int n, int A, int cols, int active) {
	i64 per = (i64)n * cols;
	GRID_STRIDE(te, per) {
		const float* c = coef + (te / cols) * A;
		double inn = __dsub_rn((double)act[te], (double)pred[active * per + te]);
		for (int j = 0; j < A; j++)
			dst[j * per + te] = (float)__dadd_rn((double)pred[j * per + te], __dmul_rn(inn, __dadd_rn((double)c[j], 1.0)));
	}
}

// gaussian_topk_f32: each row g of x (rows, d) <- max(g - (mean + k·std),
// 0), std the sample standard deviation (d - 1), float64
// (nn.GaussianTopK: a NaN stays NaN, -0 becomes 0, as Go's math.Max).
// grid.x = rows, blockDim a multiple of 32.
extern "C" __global__ void gaussian_topk_f32(float* __restrict__ x, int rows, int d, double k) {
	__shared__ double sh[32];
	i64 r = blockIdx.x;
	if (r >= rows) return;
	float* xr = x + r * d;
	double s = 0;
	for (int i = threadIdx.x; i < d; i += blockDim.x) s = __dadd_rn(s, (double)xr[i]);
	double mean = __ddiv_rn(block_sum_d(s, sh), (double)d);
	double ss = 0;
	for (int i = threadIdx.x; i < d; i += blockDim.x) {
		double v = __dsub_rn((double)xr[i], mean);
		ss = __dadd_rn(ss, __dmul_rn(v, v));
	}
	ss = block_sum_d(ss, sh);
	double cut = __dadd_rn(mean, __dmul_rn(k, sqrt(__ddiv_rn(ss, (double)(d - 1)))));
	for (int i = threadIdx.x; i < d; i += blockDim.x) {
		double v = __dsub_rn((double)xr[i], cut);
		xr[i] = (float)(v > 0.0 || v != v ? v : 0.0);
	}
}
