// RMSNorm (y = x / sqrt(mean(x²) + eps) · w per row) and LayerNorm.
//
// CPU reference: nn.RMSNorm.Forward (score/nn/rmsnorm.go): the sum of
// squares, the scale and each product in float64, each output rounded to
// float32 once. Same here, except that the sum is a tree over the block
// rather than left to right (a few float64 ulps, gone after rounding to
// float32 in all but rare ties).
#include "common.cuh"

// rmsnorm_f32: out (rows, d) f32 <- x (rows, d) f32, w of wrows rows, row
// r taking row r mod wrows (per-head weights); out may be x (each element
// is read and written by one thread). grid.x = rows, block = 128.
extern "C" __global__ void rmsnorm_f32(float* out, const float* x, const float* __restrict__ w, int rows, int d,
                                       int wrows, double eps) {
	__shared__ double sh[32];
	i64 r = blockIdx.x;
	if (r >= rows) return;
	const float* xr = x + r * d;
	w += (r % wrows) * d;
	double ss = 0;
	for (int i = threadIdx.x; i < d; i += blockDim.x) {
		double v = (double)xr[i];
		ss += v * v;
	}
	ss = block_sum_d(ss, sh);
	double scale = 1.0 / sqrt(ss / (double)d + eps);
	for (int i = threadIdx.x; i < d; i += blockDim.x)
		out[r * d + i] = (float)__dmul_rn(__dmul_rn((double)xr[i], scale), (double)w[i]);
}

// layernorm_f32: LayerNorm (nn.LayerNorm): per row, the mean and the
// variance of x - mean in float64, out = (x - mean) / sqrt(variance + eps)
// · w (+ b when has_b), float64, rounded once; w and b hold wrows rows,
// row r taking row r mod wrows (per-head weights); out may be x. grid.x =
// rows, block = 128.
extern "C" __global__ void layernorm_f32(float* out, const float* x, const float* __restrict__ w,
                                         const float* __restrict__ b, int has_b, int rows, int d, int wrows,
                                         double eps) {
	__shared__ double sh[32];
	i64 r = blockIdx.x;
	if (r >= rows) return;
	const float* xr = x + r * d;
	w += (r % wrows) * d;
	if (has_b) b += (r % wrows) * d;
	double s = 0;
	for (int i = threadIdx.x; i < d; i += blockDim.x) s += (double)xr[i];
	double mean = block_sum_d(s, sh) / (double)d;
	double ss = 0;
	for (int i = threadIdx.x; i < d; i += blockDim.x) {
		double v = (double)xr[i] - mean;
		ss += v * v;
	}
	double scale = 1.0 / sqrt(block_sum_d(ss, sh) / (double)d + eps);
	for (int i = threadIdx.x; i < d; i += blockDim.x) {
		double y = __dmul_rn(__dmul_rn((double)xr[i] - mean, scale), (double)w[i]);
		if (has_b) y += (double)b[i];
		out[r * d + i] = (float)y;
	}
}
