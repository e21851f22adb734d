// Bias add: out[t, j] += b[j] (the q, k, v biases of qwen2).
//
// CPU reference: the bias loop of nn.Linear.Forward (score/nn/linear.go),
// float32 adds. The residual adds x += Attn(...) and x += MLP(...) (the
// nn.Add calls of model/llama.go) need no kernel: the output and down
// projections accumulate into x in cuBLAS's epilogue (beta = 1), one float32
// rounding of (x + product) instead of two.
#include "common.cuh"

// add_bias: x (rows, d) f32 += b (d) f32.
extern "C" __global__ void add_bias(float* x, const float* __restrict__ b, int rows, int d) {
	i64 total = (i64)rows * d;
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (i64)gridDim.x * blockDim.x)
		x[idx] = __fadd_rn(x[idx], b[idx % d]);
}

// cast_bf16: out[i] = bf16(x[i]) (quant.F32ToBF16), for tests and tools.
extern "C" __global__ void cast_bf16(u16* __restrict__ out, const float* __restrict__ x, i64 count) {
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < count; idx += (i64)gridDim.x * blockDim.x)
		out[idx] = f32_to_bf16(x[idx]);
}

// split_bf16: hi[i] = bf16(x[i]), lo[i] = bf16(x[i] - hi[i]): x as the sum
// of two bf16 values (16 significant bits), so that a product with bf16
// weights can take float32-like activations as two bf16 products
// (x·W = hi·W + lo·W, the second accumulated with beta = 1).
extern "C" __global__ void split_bf16(u16* __restrict__ hi, u16* __restrict__ lo, const float* __restrict__ x, i64 count) {
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < count; idx += (i64)gridDim.x * blockDim.x) {
		float v = x[idx];
		u16 h = f32_to_bf16(v);
		hi[idx] = h;
		lo[idx] = f32_to_bf16(__fsub_rn(v, bf16_to_f32(h)));
	}
}
