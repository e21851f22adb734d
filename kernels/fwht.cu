// llama.cpp's turns of the attention's heads before its quantized KV
// caches, in the int8 mode: ggml-cpu's fast Walsh-Hadamard transform, which
// it runs for a product with a matrix llama.cpp flags
// GGML_HINT_SRC0_IS_HADAMARD.
//
// CPU reference: nn.FWHT (score/nn/fwht.go), to the bit: every butterfly
// is one float32 sum of the same two values.
#include "common.cuh"

// FWHT_MAXD is the largest row fwht_f32 turns (Gemma 4's heads of 512).
#define FWHT_MAXD 512

// fwht_f32: out row r <- x row r, each value times s = float32(1/√n)
// first, then butterflies; rows of n values (a power of two, at most
// FWHT_MAXD); out may be x. One thread per row.
extern "C" __global__ void fwht_f32(float* out, const float* x, i64 rows, int n, float s) {
	for (i64 r = (i64)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += (i64)gridDim.x * blockDim.x) {
		float v[FWHT_MAXD];
		for (int i = 0; i < n; i++) v[i] = __fmul_rn(x[r * n + i], s);
		butterflies(v, n);
		for (int i = 0; i < n; i++) out[r * n + i] = v[i];
	}
}
