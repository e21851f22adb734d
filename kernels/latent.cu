// Multi-head latent attention (package ml's Latent extension: deepseek2):
// the column copies that assemble and split heads, and attention whose
// values are the first vd elements of its keys. HeadLinear is a cuBLAS
// product per head over strided views.
//
// CPU references: score/model/cpu_mla.go: cpuBackend.Columns (a copy,
// exact) and LatentAttention (nn.Attention over the keys as the cache
// gives them back, the keys as values).
#include "kvformat.cuh"

// copy_cols: dst[r, dc + i] = x[r, xc + i] for r < rows, i < width; dst
// rows of dcols values, x rows of xcols. dst and x do not overlap.
extern "C" __global__ void copy_cols(float* __restrict__ dst, int dcols, int dc, const float* __restrict__ x, int xcols, int xc,
                                     int width, int rows) {
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < (i64)rows * width; idx += (i64)gridDim.x * blockDim.x) {
		i64 r = idx / width;
		int i = (int)(idx % width);
		dst[r * dcols + dc + i] = x[r * xcols + xc + i];
	}
}

#define LAT_MAXD 640 // DeepSeek-V3's latent keys are 576 (kv_lora 512 + rope 64)
#define LAT_ACC (LAT_MAXD / 128)

// attn_latent: attn_simple's arithmetic (attention.cu) for keys of up to
// LAT_MAXD elements, reading one cache tensor: for query i, head h, KV head
// g = h / (heads/kvheads), out[i,h] = Σ_j softmax_j(q[i,h]·k[j,g]·scale)
// k[j,g][0:vd], j <= i (and i - j < window when window > 0), exp(sinks[h])
// in the denominator when sinks is not null. One block of 128 threads per
// (query, head): float32 scores, online softmax over chunks of 128 keys,
// each key decoded element by element (kv_decode1): plainly right, slow at
// long windows (it rereads the cache for every query). grid (n, heads).
// keys, when not null, is a key set of kgroups groups, as attn_simple's
// (DeepSeek's sparse attention: the keys its lightning indexer chose).
// Output (n, heads·vd): bf16 (otype 0), fp16 (1) or float32 (2, the int8
// mode's, whose next product quantizes it), as attn_simple's.
extern "C" __global__ void __launch_bounds__(128)
    attn_latent(void* __restrict__ out, const float* __restrict__ q, int n, int heads, int kvheads, int hd, int vd, float scale,
                int window, const float* __restrict__ sinks, int kfmt, const void* kdata, const void* kscales,
                const float* ktscale, int otype, const u64* __restrict__ keys, int kgroups) {
	__shared__ float qs[LAT_MAXD];
	__shared__ float ps[128];
	__shared__ float red[4];
	const int i = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
	if (i >= n) return;
	const int g = h / (heads / kvheads);
	KVPlanes K = {kfmt, kdata, kscales, ktscale, kvheads, hd};
	const float* qi = q + ((i64)i * heads + h) * hd;
	const u64* krow = key_row(keys, kgroups, g, n, i);
	for (int d = tid; d < hd; d += 128) qs[d] = qi[d];
	__syncthreads();
	float m = sinks ? sinks[h] : -INFINITY, l = sinks ? 1.0f : 0.0f;
	float acc[LAT_ACC];
#pragma unroll
	for (int c = 0; c < LAT_ACC; c++) acc[c] = 0.0f;
	const int lo = window > 0 ? max(0, i - window + 1) : 0;
	for (int j0 = lo; j0 <= i; j0 += 128) {
		if (krow && !keys_any(krow, j0, min(j0 + 127, i))) continue; // the same for every thread
		const int j = j0 + tid;
		float s = -INFINITY;
		if (j <= i && (!krow || key_in(krow, j))) {
			float dot = 0.0f;
			for (int d = 0; d < hd; d++) dot += qs[d] * kv_decode1(K, j, g, d);
			s = dot * scale;
		}
		float mx = warp_max_f(s);
		if ((tid & 31) == 0) red[tid >> 5] = mx;
		__syncthreads();
		mx = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
		const float mnew = fmaxf(m, mx);
		ps[tid] = j <= i ? expf(s - mnew) : 0.0f;
		__syncthreads();
		const float corr = expf(m - mnew);
#pragma unroll
		for (int c = 0; c < LAT_ACC; c++) acc[c] *= corr;
		float lc = 0.0f;
		const int cnt = min(128, i - j0 + 1);
		for (int jj = 0; jj < cnt; jj++) {
			if (krow && !key_in(krow, j0 + jj)) continue; // p = 0
			const float p = ps[jj];
			lc += p;
#pragma unroll
			for (int c = 0; c < LAT_ACC; c++)
				if (tid + 128 * c < vd) acc[c] += p * kv_decode1(K, j0 + jj, g, tid + 128 * c);
		}
		l = l * corr + lc;
		m = mnew;
		__syncthreads();
	}
	const i64 at = ((i64)i * heads + h) * vd;
#pragma unroll
	for (int c = 0; c < LAT_ACC; c++) {
		const int d = tid + 128 * c;
		if (d >= vd) break;
		if (otype == 2) {
			((float*)out)[at + d] = acc[c] / l;
		} else {
			((u16*)out)[at + d] = otype ? f32_to_f16(acc[c] / l) : f32_to_bf16(acc[c] / l);
		}
	}
}
