// Synthetic weights for the throughput benchmark: the numbers don't change
// the speed of a dense model, so a model of any shape is made in device
// memory from a seed instead of read from a file.
//
// No CPU reference: not part of scoring; the simulator in
// ppl.dev/score/cuda repeats the hash (uniformHalf), and TestFillUniform
// compares.
#include "common.cuh"

__device__ __forceinline__ u32 mix32(unsigned long long x) {
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return (u32)x;
}

// fill_uniform_half: out[i] = half(uniform(-a, a)) from (seed, i): the
// value rounded to bf16, then stored as bf16 or (f16 != 0) fp16, as model
// weights are.
extern "C" __global__ void fill_uniform_half(u16* __restrict__ out, i64 count, unsigned long long seed, float a,
                                             int f16) {
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < count; idx += (i64)gridDim.x * blockDim.x) {
		u32 r = mix32(seed * 0x9e3779b97f4a7c15ULL + (unsigned long long)idx);
		float u = (float)(r >> 8) * (1.0f / 16777216.0f); // [0, 1)
		u16 h = f32_to_bf16((2.0f * u - 1.0f) * a);
		out[idx] = f16 ? f32_to_f16(bf16_to_f32(h)) : h;
	}
}

// fill_f32: out[i] = v.
extern "C" __global__ void fill_f32(float* __restrict__ out, i64 count, float v) {
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < count; idx += (i64)gridDim.x * blockDim.x)
		out[idx] = v;
}
