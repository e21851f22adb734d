// DeepSeek's sparse attention (DSA, package ml's Sparse extension): the
// lightning indexer's scores, from the products of its heads' queries with
// its keys (one GEMM per block of query rows), and each row's top_k keys
// as the row's bitmap of the key set where the choice is one whatever the
// order of the comparisons; the rows where it is not (equal scores past
// the last place, or a NaN) are chosen on the host (score/cuda/sparse.go).
//
// CPU reference: nn.LightningTopK (score/nn/indexer.go): score(i, j) =
// Σ_h relu(q[i,h]·k[j])·w[i,h], float32, heads in order; the top_k by
// nn.AddTopKeys (ggml's TOP_K: libstdc++'s heap selection).
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

// order_key maps a score to an unsigned key of the same order, -0 and +0
// to one key (they compare equal).
__device__ __forceinline__ u32 order_key(float f) {
	const u32 u = __float_as_uint(f == 0.0f ? 0.0f : f);
	return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// lid_topk: row r of the rows from row r0 of a window (scores sc, rows of
// ld; its keys j <= r0 + r, more than topk of them) gets in words (rows of
// nwords 64-bit words, key j bit j mod 64 of word j/64: nn.KeySet's row)
// its topk highest-scoring keys where every order of comparisons chooses
// the same ones: the keys above t, the topk-th highest score, and those
// equal to t when all of them fit. Where they do not (which of the equal
// scores TOP_K keeps is its heap's order) or a score is NaN, the row's
// words are 0 and ambiguous[r] is 1 (else 0): the host chooses. One block
// per row (grid.x = rows): a radix select of four 8-bit digits over
// order_key, counts by shared atomics (the same in any order).
extern "C" __global__ void lid_topk(u64* __restrict__ words, int* __restrict__ ambiguous, const float* __restrict__ sc,
                                    int rows, int ld, int nwords, int r0, int topk) {
	__shared__ int hist[256];
	__shared__ u32 prefix_sh;
	__shared__ int need_sh, nan_sh, tie_sh;
	const int r = blockIdx.x;
	if (r >= rows) return;
	const float* s = sc + (i64)r * ld;
	const int keys = r0 + r + 1;
	if (threadIdx.x == 0) nan_sh = 0;
	u32 prefix = 0, mask = 0;
	int need = topk;
	for (int shift = 24; shift >= 0; shift -= 8) {
		for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0;
		__syncthreads();
		for (int j = threadIdx.x; j < keys; j += blockDim.x) {
			const float f = s[j];
			if (f != f) {
				nan_sh = 1;
				continue;
			}
			const u32 u = order_key(f);
			if ((u & mask) == prefix) atomicAdd(&hist[(u >> shift) & 255], 1);
		}
		__syncthreads();
		if (threadIdx.x == 0) {
			int above = 0, b = 255;
			for (; b > 0 && above + hist[b] < need; b--) above += hist[b];
			need_sh = need - above;
			prefix_sh = prefix | (u32)b << shift;
			tie_sh = hist[b] > need - above;
		}
		__syncthreads();
		need = need_sh;
		prefix = prefix_sh;
		mask |= 255u << shift;
	}
	const bool amb = nan_sh || tie_sh;
	for (int w = threadIdx.x; w < nwords; w += blockDim.x) {
		u64 bits = 0;
		for (int b = 0; b < 64 && !amb; b++) {
			const int j = w * 64 + b;
			if (j < keys && order_key(s[j]) >= prefix) bits |= 1ull << b;
		}
		words[(i64)r * nwords + w] = bits;
	}
	if (threadIdx.x == 0) ambiguous[r] = amb;
}
