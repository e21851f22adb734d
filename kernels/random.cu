// Synthetic weights for the throughput benchmark: the numbers don't change
// the speed of a dense model, so a model of any shape is made in device
// memory from a seed instead of read from a file.
//
// No CPU reference: not part of scoring. fill_uniform_bf16 is checked by the
// benchmark's own statistics (mean and range of the first values).
#include "common.cuh"

__device__ __forceinline__ u32 mix32(unsigned long long x) {
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return (u32)x;
}

// fill_uniform_bf16: out[i] = bf16(uniform(-a, a)) from (seed, i).
extern "C" __global__ void fill_uniform_bf16(u16* __restrict__ out, i64 count, unsigned long long seed, float a) {
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < count; idx += (i64)gridDim.x * blockDim.x) {
		u32 r = mix32(seed * 0x9e3779b97f4a7c15ULL + (unsigned long long)idx);
		float u = (float)(r >> 8) * (1.0f / 16777216.0f); // [0, 1)
		out[idx] = f32_to_bf16((2.0f * u - 1.0f) * a);
	}
}

// fill_f32: out[i] = v.
extern "C" __global__ void fill_f32(float* __restrict__ out, i64 count, float v) {
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < count; idx += (i64)gridDim.x * blockDim.x)
		out[idx] = v;
}
