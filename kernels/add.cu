// Bias add: out[t, j] += b[j] (the biases of a product: qwen2's q, k, v,
// an expert stack's).
//
// CPU reference: the bias loop of nn.Linear.Forward (score/nn/linear.go),
// float32 adds. The residual adds are add_f32 (elementwise.cu).
#include "common.cuh"

// add_bias: x (rows, d) f32 += b (d) f32, or with bi row r of x += row
// bi[r] of b (rows of d: the experts' biases, each row its expert's).
extern "C" __global__ void add_bias(float* x, const float* __restrict__ b, const int* __restrict__ bi, int rows, int d) {
	i64 total = (i64)rows * d;
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (i64)gridDim.x * blockDim.x)
		x[idx] = __fadd_rn(x[idx], b[(bi ? (i64)bi[idx / d] * d : 0) + idx % d]);
}

// cast_half: out[i] = half(x[i]) (quant.F32ToBF16, or quant.F32ToF16 when
// f16): a product's input.
extern "C" __global__ void cast_half(u16* __restrict__ out, const float* __restrict__ x, i64 count, int f16) {
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < count; idx += (i64)gridDim.x * blockDim.x)
		out[idx] = f16 ? f32_to_f16(x[idx]) : f32_to_bf16(x[idx]);
}

