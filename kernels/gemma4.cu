// Gemma 4 (package ml's Gemma4 extension): the gated activation of its
// per-layer inputs outside an MLP, in float32. GatherCols is recurrent.cu's
// gather_cols; AttentionShared runs the attention kernels of attention.cu.
//
// CPU reference: cpuBackend.GLU (score/model/cpu_gemma4.go), i.e.
// nn.SwiGLU, nn.GeGLU and nn.OAISwiGLU (score/nn/mlp.go): float64 inside,
// rounded to float32 once, the same arithmetic as swiglu.cu's kernels
// (whose outputs are halves).
#include "common.cuh"

// glu_f32: out[i] = f32(act(gate[i]) · up[i]) for count elements; act 0
// SwiGLU, 1 GeGLU (tanh form), 2 gpt-oss's clamped SwiGLU (ml.Act). out
// may be gate or up (each element is read and written by one thread).
extern "C" __global__ void glu_f32(float* out, const float* gate, const float* up, i64 count, int act) {
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < count; idx += (i64)gridDim.x * blockDim.x) {
		double g = (double)gate[idx], u = (double)up[idx], v;
		if (act == 0) {
			v = __dmul_rn(__ddiv_rn(g, __dadd_rn(1.0, exp(-g))), u);
		} else if (act == 1) {
			const double c = 0.7978845608028654; // sqrt(2/π)
			double inner = __dmul_rn(c, __dadd_rn(g, __dmul_rn(__dmul_rn(__dmul_rn(0.044715, g), g), g)));
			v = __dmul_rn(__dmul_rn(__dmul_rn(0.5, g), __dadd_rn(1.0, tanh(inner))), u);
		} else {
			g = fmin(g, 7.0);
			u = fmax(-7.0, fmin(u, 7.0));
			v = __dmul_rn(__ddiv_rn(g, __dadd_rn(1.0, exp(__dmul_rn(-1.702, g)))), __dadd_rn(u, 1.0));
		}
		out[idx] = (float)v;
	}
}
