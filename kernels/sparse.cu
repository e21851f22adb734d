// Sparse attention's choice of keys on the device (package ml's Sparse,
// BlockSparse and PooledSparse extensions): DeepSeek's lightning indexer's
// scores (DSA), MiniMax-M3's block scores (MSA), Qwen3.8's pooled-key
// block scores and pools (QSA), each from the products of the indexer's
// queries with its keys (one GEMM per block of query rows); then each
// row's top_k keys or blocks where the choice is one whatever the order of
// the comparisons (top_keys), the rows where it is not (equal scores past
// the last place, or a NaN) chosen on the host (score/cuda/sparse.go); and
// the blocks' bitmaps spread over their keys (block_keys).
//
// CPU references (score/nn): nn.LightningTopK (indexer.go): score(i, j) =
// Σ_h relu(q[i,h]·k[j])·w[i,h], float32, heads in order; nn.MSABlocks
// (msa.go); nn.QSAPool and nn.QSABlocks (qsa.go); the top_k by
// nn.TopKeys (ggml's TOP_K: libstdc++'s heap selection).
#include "common.cuh"
#include "libm.cuh"

// relu is max(x, 0) as Go's: a NaN stays one (fmaxf would give 0).
__device__ __forceinline__ float relu(float x) { return x != x ? x : fmaxf(x, 0.0f); }

// lid_scores: for the rows rows of a window from row r0, out[r·ld + j] =
// Σ_h max(qk[(r·heads + h)·ld + j], 0)·w[(r0 + r)·heads + h] for keys j <=
// r0 + r (heads in order, each product and sum rounded apart, as the CPU
// computes them from the same products; a NaN product stays one, as the
// CPU's max keeps it, and its row goes to the host), -inf for the keys
// after it; qk holds the products q[r0 + r, h]·k[j] (rows·heads rows of
// ld), w the heads' weights (n, heads).
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
		for (int h = 0; h < heads; h++) s = __fadd_rn(s, __fmul_rn(relu(c[(i64)h * ld]), wr[h]));
		out[idx] = s;
	}
}

// order_key maps a score to an unsigned key of the same order, -0 and +0
// to one key (they compare equal).
__device__ __forceinline__ u32 order_key(float f) {
	const u32 u = __float_as_uint(f == 0.0f ? 0.0f : f);
	return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// top_keys: score row R of rows (sc, rows of ld), of window row i = r0 +
// R/groups (groups score rows a window row: one per indexer head of MSA,
// else 1), has (i + 1 + add)/div candidates (DSA's keys j <= i: add 0, div
// 1; MSA's blocks up to i's own: block - 1, block; QSA's whole blocks: 0,
// block), more than topk of them; it gets in words (rows of nwords 64-bit
// words, candidate j bit j mod 64 of word j/64: nn.KeySet's row) its topk
// highest-scoring candidates where every order of comparisons chooses the
// same ones: those above t, the topk-th highest score, and those equal to
// t when all of them fit. Where they do not (which of the equal scores
// TOP_K keeps is its heap's order) or a score is NaN, the row's words are
// 0 and ambiguous[R] is 1 (else 0): the host chooses. One block per row
// (grid.x = rows): a radix select of four 8-bit digits over order_key,
// counts by shared atomics (the same in any order).
extern "C" __global__ void top_keys(u64* __restrict__ words, int* __restrict__ ambiguous, const float* __restrict__ sc,
                                    int rows, int ld, int nwords, int r0, int topk, int groups, int add, int div) {
	__shared__ int hist[256];
	__shared__ u32 prefix_sh;
	__shared__ int need_sh, nan_sh, tie_sh;
	const int r = blockIdx.x;
	if (r >= rows) return;
	const float* s = sc + (i64)r * ld;
	const int keys = (r0 + r / groups + 1 + add) / div;
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

// msa_scores: MSA's block scores. For the rows rows from window row r0,
// each of groups indexer heads (score row R = r·groups + g, i = r0 + r):
// out[R·ldo + b] = the highest of qk[R·ld + j] over the keys j of block b
// (of block keys) up to i, plus 1e30 in float32 for the local blocks up
// to i's own (b > i/block - local: they rank first), -inf after i's own;
// a NaN among them is the score (Go's max). qk holds the products
// q[i, g]·k[j].
extern "C" __global__ void msa_scores(float* __restrict__ out, const float* __restrict__ qk, int rows, int groups,
                                      int ld, int ldo, int r0, int block, int local) {
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < (i64)rows * groups * ldo;
	     idx += (i64)gridDim.x * blockDim.x) {
		const i64 R = idx / ldo;
		const int b = (int)(idx % ldo), i = r0 + (int)(R / groups), last = i / block;
		if (b > last) {
			out[idx] = -INFINITY;
			continue;
		}
		const float* c = qk + R * ld;
		float m = -INFINITY;
		for (int j = b * block; j < min((b + 1) * block, i + 1); j++) m = (c[j] != c[j] || m != m) ? NAN : fmaxf(m, c[j]);
		if (b > last - local) m = __fadd_rn(m, 1e30f);
		out[idx] = m;
	}
}

// qsa_scores: QSA's block scores. For the rows rows from window row r0 (i
// = r0 + r): out[r·ldo + b] = Σ_h max(qk[(r·heads + h)·ldo + b], 0)·w_h
// over the whole blocks b < (i + 1)/block, -inf after; w_h = w[i·heads +
// h], or scale where w is null. fused: ggml's sum, each term fused into
// the float32 sum in head order (fmaf); else a double sum rounded once,
// divided by sqrt(dim) where w is null (scale unused). qk holds the
// products q[i, h]·p[b·block] with the pooled keys p.
extern "C" __global__ void qsa_scores(float* __restrict__ out, const float* __restrict__ qk, const float* __restrict__ w,
                                      int rows, int heads, int ldo, int r0, int block, float scale, int dim, int fused) {
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < (i64)rows * ldo; idx += (i64)gridDim.x * blockDim.x) {
		const int r = (int)(idx / ldo), b = (int)(idx % ldo), i = r0 + r;
		if (b >= (i + 1) / block) {
			out[idx] = -INFINITY;
			continue;
		}
		const float* c = qk + (i64)r * heads * ldo + b;
		const float* wr = w ? w + (i64)i * heads : nullptr;
		if (fused) {
			float s = 0.0f;
			for (int h = 0; h < heads; h++) s = __fmaf_rn(relu(c[(i64)h * ldo]), wr ? wr[h] : scale, s);
			out[idx] = s;
			continue;
		}
		double s = 0.0;
		for (int h = 0; h < heads; h++) {
			const double v = (double)relu(c[(i64)h * ldo]);
			s = __dadd_rn(s, wr ? __dmul_rn(v, (double)wr[h]) : v);
		}
		if (!wr) s = __ddiv_rn(s, sqrt((double)dim));
		out[idx] = (float)s;
	}
}

// block_keys: the key set (nn.KeySet's words: row i of group g at (g·n +
// i)·nwords, key j bit j mod 64 of word j/64) of a window of n rows from
// the chosen blocks' bitmaps bw (score row R = (i - r0)·groups + g of
// nbw words, block b bit b mod 64 of word b/64) of the rows from r0: row
// i >= r0 reads the keys j <= i of its chosen blocks (of block keys) and,
// with tail, those after its last whole block (QSA's); a row before r0
// reads every key j <= i.
extern "C" __global__ void block_keys(u64* __restrict__ set, const u64* __restrict__ bw, int n, int groups, int nwords,
                                      int nbw, int r0, int block, int tail) {
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < (i64)groups * n * nwords;
	     idx += (i64)gridDim.x * blockDim.x) {
		const i64 gi = idx / nwords;
		const int w = (int)(idx % nwords), g = (int)(gi / n), i = (int)(gi % n);
		u64 bits = 0;
		for (int t = 0; t < 64; t++) {
			const int j = w * 64 + t;
			if (j > i) break;
			bool in = i < r0 || (tail && j >= (i + 1) / block * block);
			if (!in) {
				const int b = j / block;
				in = (bw[((i64)(i - r0) * groups + g) * nbw + b / 64] >> (b % 64)) & 1;
			}
			if (in) bits |= 1ull << t;
		}
		set[idx] = bits;
	}
}

// qsa_pool: QSA's pooled keys, row r of dst (n rows of dim) the mean of
// k's rows [r, r + block) as nn.QSAPool: summed in float32 in row order,
// then times 1/block in float32; rows past n - block zero.
extern "C" __global__ void qsa_pool(float* __restrict__ dst, const float* __restrict__ k, int n, int dim, int block) {
	const float inv = __frcp_rn((float)block);
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < (i64)n * dim; idx += (i64)gridDim.x * blockDim.x) {
		const int r = (int)(idx / dim), d = (int)(idx % dim);
		if (r + block > n) {
			dst[idx] = 0.0f;
			continue;
		}
		float s = k[idx];
		for (int m = r + 1; m < r + block; m++) s = __fadd_rn(s, k[(i64)m * dim + d]);
		dst[idx] = __fmul_rn(s, inv);
	}
}

// pool_entry gives entry j of output row r's channel d of a gated pool:
// its gate, bias and value (see gated_pool).
__device__ __forceinline__ void pool_entry(const float* k, const float* g, const float* ape, int dim, int block, int overlap,
                                           int r, int d, int j, float* gv, float* av, float* kv) {
	if (!overlap) {
		*gv = g[(i64)(r + j) * dim + d], *av = ape[(i64)j * dim + d], *kv = k[(i64)(r + j) * dim + d];
		return;
	}
	const int w = 2 * dim;
	if (j < block) {
		if (r == 0) {
			*gv = -INFINITY, *av = 0.0f, *kv = 0.0f;
			return;
		}
		*gv = g[(i64)(r - block + j) * w + d], *av = ape[(i64)j * w + d], *kv = k[(i64)(r - block + j) * w + d];
		return;
	}
	j -= block;
	*gv = g[(i64)(r + j) * w + dim + d], *av = ape[(i64)j * w + dim + d], *kv = k[(i64)(r + j) * w + dim + d];
}

// pool_exp is entry j's e^(logit - m) of ggml's SOFT_MAX over m entries:
// ggml_v_expf in the whole lanes (16, AVX2's 8), glibc's expf after.
__device__ __forceinline__ float pool_exp(float x, int j, int whole, int avx2) {
	return j < whole ? ggml_expf(x, avx2) : libc_expf(x);
}

// gated_pool: DeepSeek-V4's and GLM5-Next's compressed keys, dst (n, dim)
// row b·block channel d for every whole block b: Σ_j softmax_j(g_j + a_j)·k_j
// over its entries, the rows [b·block, (b+1)·block) of k and g (n, dim)
// and the bias ape (block, dim) (nn.GatedPool); with overlap (k, g, ape of
// 2·dim columns) first the previous block's rows in the first dim columns
// (-inf gates before the window), then the block's own in the last dim
// (nn.OverlapPool); every other row 0. With ggml as llama.cpp computes it
// (the logits' sums in float32, ggml's SOFT_MAX in the AVX2 build's lanes
// with avx2, else the AVX-512 build's: ggml_v_expf, each lane group's sum
// in its reduction's order added in double; the products rounded to
// float32 and summed in double, rounded once); otherwise in double,
// rounded once. A thread per value, the logits read thrice rather than
// held.
extern "C" __global__ void gated_pool(float* __restrict__ dst, const float* __restrict__ k, const float* __restrict__ g,
                                      const float* __restrict__ ape, int n, int dim, int block, int overlap, int ggml,
                                      int avx2) {
	const int m = overlap ? 2 * block : block, lanes = avx2 ? 8 : 16, whole = m / lanes * lanes;
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < (i64)n * dim; idx += (i64)gridDim.x * blockDim.x) {
		const int r = (int)(idx / dim), d = (int)(idx % dim);
		if (r % block != 0 || r + block > n) {
			dst[idx] = 0.0f;
			continue;
		}
		float gv, av, kv;
		if (!ggml) {
			double mx = -INFINITY;
			#pragma unroll 1
			for (int j = 0; j < m; j++) {
				pool_entry(k, g, ape, dim, block, overlap, r, d, j, &gv, &av, &kv);
				const double e = __dadd_rn((double)gv, (double)av);
				mx = (e != e || mx != mx) ? NAN : fmax(mx, e);
			}
			double z = 0.0, s = 0.0;
			#pragma unroll 1
			for (int j = 0; j < m; j++) {
				pool_entry(k, g, ape, dim, block, overlap, r, d, j, &gv, &av, &kv);
				const double e = exp(__dsub_rn(__dadd_rn((double)gv, (double)av), mx));
				z = __dadd_rn(z, e);
				s = __dadd_rn(s, __dmul_rn(e, (double)kv));
			}
			dst[idx] = (float)__ddiv_rn(s, z);
			continue;
		}
		float mx = -INFINITY;
		#pragma unroll 1
		for (int j = 0; j < m; j++) {
			pool_entry(k, g, ape, dim, block, overlap, r, d, j, &gv, &av, &kv);
			const float x = __fadd_rn(gv, av);
			if (!(mx > x)) mx = x; // ggml's MAX
		}
		double sum = 0.0;
		float lane[16];
		#pragma unroll 1
		for (int j = 0; j < m; j++) {
			pool_entry(k, g, ape, dim, block, overlap, r, d, j, &gv, &av, &kv);
			const float e = pool_exp(__fsub_rn(__fadd_rn(gv, av), mx), j, whole, avx2);
			if (j >= whole) {
				sum = __dadd_rn(sum, (double)e);
				continue;
			}
			lane[j % lanes] = e;
			if (j % lanes != lanes - 1) continue;
			sum = __dadd_rn(sum, (double)ggml_lane_sum(lane, avx2));
		}
		const float inv = (float)__ddiv_rn(1.0, sum);
		double s = 0.0;
		#pragma unroll 1
		for (int j = 0; j < m; j++) {
			pool_entry(k, g, ape, dim, block, overlap, r, d, j, &gv, &av, &kv);
			const float p = __fmul_rn(pool_exp(__fsub_rn(__fadd_rn(gv, av), mx), j, whole, avx2), inv);
			s = __dadd_rn(s, (double)__fmul_rn(p, kv));
		}
		dst[idx] = (float)s;
	}
}

// ple_gate: Qwen3.8's n-gram embeddings' gate, a thread per token t and
// group s of S: with d = Σ_e key[t, s·E + e]·query[t, s·E + e]·scale over
// the group's E values, dst[t·S + s] = sigmoid(sign(d)·sqrt(max(|d|,
// 1e-6))), a NaN d giving a NaN. ggml: llama.cpp's graph's roundings
// (nn.GGMLPLEGate: float32 products summed in double, rounded, times the
// float32 scale; sqrtf, glibc's expf), else nn.PLEGate's (float64 in
// order, rounded once; the device's exp, not Go's, may move its last
// bit).
extern "C" __global__ void ple_gate(float* __restrict__ dst, const float* __restrict__ key,
                                    const float* __restrict__ query, int n, int S, int E, double scale, int ggml) {
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < (i64)n * S; idx += (i64)gridDim.x * blockDim.x) {
		const float* k = key + idx * E;
		const float* q = query + idx * E;
		double sum = 0;
		if (ggml) {
			for (int e = 0; e < E; e++) sum = __dadd_rn(sum, (double)__fmul_rn(k[e], q[e]));
			const float d = __fmul_rn((float)sum, (float)scale), a = fabsf(d);
			const float mag = __fsqrt_rn(a != a ? a : fmaxf(a, 1e-6f));
			const float sg = d > 0.0f ? 1.0f : d < 0.0f ? -1.0f : 0.0f;
			dst[idx] = __fdiv_rn(1.0f, __fadd_rn(1.0f, libc_expf(-__fmul_rn(sg, mag))));
			continue;
		}
		for (int e = 0; e < E; e++) sum = __dadd_rn(sum, __dmul_rn((double)k[e], (double)q[e]));
		const double d = __dmul_rn(sum, scale), a = fabs(d);
		double gv = __dsqrt_rn(a != a ? a : fmax(a, 1e-6));
		if (d < 0) gv = -gv;
		else if (d == 0) gv = 0;
		dst[idx] = (float)__ddiv_rn(1.0, __dadd_rn(1.0, exp(-gv)));
	}
}

// layout_keys: the key set of DeepSeek-V4's compressed layout
// (nn.NewCompressedLayout), a thread per word of set (N rows of nwords =
// (N+63)/64): a placeholder row r < P reads its own key; query row P + i
// its raw keys (i - window, i] and the compressed key R + b of each whole
// block b < (i+1)/ratio that vis (n rows of nvis words) holds at bit
// b·ratio of row i, every one where vis is null.
extern "C" __global__ void layout_keys(u64* __restrict__ set, const u64* __restrict__ vis, int N, int P, int R,
                                       int window, int ratio, int nvis) {
	const int nwords = (N + 63) / 64;
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < (i64)N * nwords; idx += (i64)gridDim.x * blockDim.x) {
		const int r = (int)(idx / nwords), w = (int)(idx % nwords);
		if (r < P) {
			set[idx] = r / 64 == w ? 1ull << (r % 64) : 0;
			continue;
		}
		const int i = r - P, nb = (i + 1) / ratio;
		u64 bits = range_bits(w, max(0, i - window + 1), i + 1);
		if (!vis) {
			bits |= range_bits(w, R, R + nb);
		} else {
			const u64* row = vis + (i64)i * nvis;
			for (int j = max(64 * w, R); j < min(64 * w + 64, R + nb); j++)
				if (key_in(row, (j - R) * ratio)) bits |= 1ull << (j - 64 * w);
		}
		set[idx] = bits;
	}
}
