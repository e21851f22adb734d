// MiniMax-01's lightning attention (package ml's Lightning extension):
// linear attention without softmax whose scores decay with the distance
// between query and key.
//
// CPU reference: cpuBackend.Lightning (score/model/cpu_lightning.go), i.e.
// nn.Lightning: out[j, h] = Σ_{i≤j} D_h(j−i)·(q_j·k_i)·v_i, two float32
// products in ggml-cpu's lanes; here the same factors (decay, the host's
// nn.LightningDecay: glibc's expf) and float32 sums in key order, so the
// outputs agree to float32 roundings (nn.LightningRef is the float64
// reference both are held to).
#include "common.cuh"

// LIGHT_MAXD is the largest head size (MiniMax-01's heads are 128).
#define LIGHT_MAXD 512

// lightning_attn: grid (n, heads), block 128: query j of head h. Row t of
// qkv holds, head after head, q_t (d values), k_t (d), v_t (d); decay[h·n
// + m] is D_h(m). Keys in chunks of 128: each thread scores one,
// s_i = (q_j·k_i)·D_h(j − i), then each thread sums s_i·v_i over the chunk
// for its output dims (d/128 of them), in key order. out (n, heads·d),
// float32.
extern "C" __global__ void __launch_bounds__(128)
    lightning_attn(float* __restrict__ out, const float* __restrict__ qkv, int n, int heads, int d,
                   const float* __restrict__ decay) {
	__shared__ float qs[LIGHT_MAXD];
	__shared__ float ss[128];
	const int j = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
	if (j >= n) return;
	const i64 w = (i64)heads * 3 * d;
	const float* qj = qkv + j * w + (i64)h * 3 * d;
	for (int e = tid; e < d; e += 128) qs[e] = qj[e];
	__syncthreads();
	const float* dh = decay + (i64)h * n;
	float acc[LIGHT_MAXD / 128] = {};
	for (int i0 = 0; i0 <= j; i0 += 128) {
		const int i = i0 + tid;
		float s = 0.0f;
		if (i <= j) {
			const float* ki = qkv + i * w + (i64)h * 3 * d + d;
			float dot = 0.0f;
			for (int e = 0; e < d; e++) dot += qs[e] * ki[e];
			s = dot * dh[j - i];
		}
		ss[tid] = s;
		__syncthreads();
		const int cnt = min(128, j - i0 + 1);
		for (int ii = 0; ii < cnt; ii++) {
			const float* vi = qkv + (i0 + ii) * w + (i64)h * 3 * d + 2 * d;
			const float p = ss[ii];
#pragma unroll
			for (int c = 0; c < LIGHT_MAXD / 128; c++)
				if (tid + 128 * c < d) acc[c] += p * vi[tid + 128 * c];
		}
		__syncthreads(); // ss is rewritten by the next chunk
	}
	float* o = out + (i64)j * heads * d + (i64)h * d;
#pragma unroll
	for (int c = 0; c < LIGHT_MAXD / 128; c++)
		if (tid + 128 * c < d) o[tid + 128 * c] = acc[c];
}
