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

// fwht_f32: the first per·n values of each row of stride of x turned
// into out, in blocks of n values (a power of two, at most FWHT_MAXD),
// each value times s = float32(1/√n) first, then butterflies; blocks is
// rows·per (value heads padded to the key heads' size: per·n < stride,
// the rest of each row not written). out may be x. One thread per block.
extern "C" __global__ void fwht_f32(float* out, const float* x, i64 blocks, int n, int per, int stride, float s) {
	for (i64 r = (i64)blockIdx.x * blockDim.x + threadIdx.x; r < blocks; r += (i64)gridDim.x * blockDim.x) {
		const i64 off = r / per * stride + r % per * n;
		float v[FWHT_MAXD];
		for (int i = 0; i < n; i++) v[i] = __fmul_rn(x[off + i], s);
		butterflies(v, n);
		for (int i = 0; i < n; i++) out[off + i] = v[i];
	}
}
