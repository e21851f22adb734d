// RMSNorm: y = x / sqrt(mean(x²) + eps) · w per row.
//
// CPU reference: nn.RMSNorm.Forward (score/nn/rmsnorm.go): the sum of
// squares, the scale and each product in float64, each output rounded to
// float32 once. Same here, except that the sum is a tree over the block
// rather than left to right (a few float64 ulps, gone after rounding to
// float32 in all but rare ties). rmsnorm_half then rounds that float32 to
// bf16 or fp16 (the next matrix product's input), rmsnorm_f32 keeps it.
#include "common.cuh"

// out: 0 float32, 1 bf16, 2 fp16.
__device__ __forceinline__ void rmsnorm_row(void* out, int otype, const float* x, const float* __restrict__ w,
                                            int d, double eps) {
	__shared__ double sh[32];
	i64 r = blockIdx.x;
	const float* xr = x + r * d;
	double ss = 0;
	for (int i = threadIdx.x; i < d; i += blockDim.x) {
		double v = (double)xr[i];
		ss += v * v;
	}
	ss = block_sum_d(ss, sh);
	double scale = 1.0 / sqrt(ss / (double)d + eps);
	for (int i = threadIdx.x; i < d; i += blockDim.x) {
		double v = __dmul_rn(__dmul_rn((double)xr[i], scale), (double)w[i]);
		float f = (float)v;
		if (otype == 1)
			((u16*)out)[r * d + i] = f32_to_bf16(f);
		else if (otype == 2)
			((u16*)out)[r * d + i] = f32_to_f16(f);
		else
			((float*)out)[r * d + i] = f;
	}
}

// rmsnorm_half: out (rows, d) bf16, or fp16 when f16 != 0, <- x (rows, d)
// f32. grid.x = rows, block = 256.
extern "C" __global__ void rmsnorm_half(u16* out, const float* __restrict__ x, const float* __restrict__ w, int rows,
                                        int d, double eps, int f16) {
	if ((int)blockIdx.x < rows) rmsnorm_row(out, f16 ? 2 : 1, x, w, d, eps);
}

// rmsnorm_f32: out (rows, d) f32 <- x (rows, d) f32; out may be x (each
// element is read and written by one thread). grid.x = rows, block = 128.
extern "C" __global__ void rmsnorm_f32(float* out, const float* x, const float* __restrict__ w, int rows, int d,
                                       double eps) {
	if ((int)blockIdx.x < rows) rmsnorm_row(out, 0, x, w, d, eps);
}
