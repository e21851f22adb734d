// RoPE: rotate pairs of each query and key head by position-dependent angles.
//
// CPU reference: nn.RoPE.Forward and rotate (score/nn/rope.go). The cos and
// sin tables (YaRN, linear scaling, frequency factors and magnitude scaling
// included) are built on the host by nn.RoPE.Angle in float64 and uploaded,
// so this kernel only rotates: a' = a·cos - b·sin, b' = a·sin + b·cos in
// float64 with one rounding per operation (no fused multiply-add, as Go),
// each result rounded to float32 once: the same bits as the CPU.
#include "common.cuh"

// rope: x (n, heads, headDim) f32 in place; cosT/sinT (n, dims/2) float64.
// neox selects pairs (i, i+dims/2) instead of (2i, 2i+1); elements past dims
// are left as they are. One thread per (token, head, pair): 1-D grid.
extern "C" __global__ void rope(float* x, const double* __restrict__ cosT, const double* __restrict__ sinT, int n,
                                int heads, int headDim, int dims, int neox) {
	int half = dims / 2;
	i64 total = (i64)n * heads * half;
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (i64)gridDim.x * blockDim.x) {
		int i = (int)(idx % half);
		i64 th = idx / half; // token*heads + head
		i64 t = th / heads;
		float* v = x + th * headDim;
		int ia = 2 * i, ib = 2 * i + 1;
		if (neox) {
			ia = i;
			ib = i + half;
		}
		double c = cosT[t * half + i], s = sinT[t * half + i];
		double a = (double)v[ia], b = (double)v[ib];
		v[ia] = (float)__dsub_rn(__dmul_rn(a, c), __dmul_rn(b, s));
		v[ib] = (float)__dadd_rn(__dmul_rn(a, s), __dmul_rn(b, c));
	}
}
