// DeepSeek's sparse attention (DSA, package ml's Sparse extension): the
// lightning indexer's scores, from the products of its heads' queries with
// its keys (one GEMM per block of query rows); the choice of the top_k
// keys of each row runs on the host (score/cuda/sparse.go).
//
// CPU reference: nn.LightningTopK (score/nn/indexer.go): score(i, j) =
// Σ_h relu(q[i,h]·k[j])·w[i,h], float32, heads in order.
#include "common.cuh"

// lid_scores: for the rows rows of a window from row r0, out[r·ld + j] =
// Σ_h max(qk[(r·heads + h)·ld + j], 0)·w[(r0 + r)·heads + h] for keys j <=
// r0 + r (heads in order, each product and sum rounded apart, as the CPU
// computes them from the same products), -inf for the keys after it; qk
// holds the products q[r0 + r, h]·k[j] (rows·heads rows of ld), w the
// heads' weights (n, heads).
extern "C" __global__ void lid_scores(float* __restrict__ out, const float* __restrict__ qk, const float* __restrict__ w,
                                      int rows, int heads, int ld, int r0) {
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < (i64)rows * ld; idx += (i64)gridDim.x * blockDim.x) {
		const int r = (int)(idx / ld), j = (int)(idx % ld);
		if (j > r0 + r) {
			out[idx] = -INFINITY;
			continue;
		}
		const float* c = qk + (i64)r * heads * ld + j;
		const float* wr = w + (i64)(r0 + r) * heads;
		float s = 0.0f;
		for (int h = 0; h < heads; h++) s = __fadd_rn(s, __fmul_rn(fmaxf(c[(i64)h * ld], 0.0f), wr[h]));
		out[idx] = s;
	}
}
