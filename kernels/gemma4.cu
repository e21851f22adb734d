// Gemma 4 (package ml's Gemma4 extension): the gated activation of its
// per-layer inputs outside an MLP, in float32. GatherCols is recurrent.cu's
// gather_cols; AttentionShared runs the attention kernels of attention.cu.
//
// CPU reference: cpuBackend.GLU (score/model/cpu_gemma4.go), i.e.
// nn.SwiGLU, nn.GeGLU and nn.OAISwiGLU (score/nn/mlp.go): float64 inside,
// rounded to float32 once, the same arithmetic as swiglu.cu's kernels
// (whose outputs are halves). glu_f32 is also MLP's and Experts'
// activation where ffn_down reads float32 (the int8 mode, an F32 matrix),
// the ungated ReLU² (nn.ReLUSqr) included.
#include "common.cuh"

// glu_f32: out[i] = f32(act(gate[i]) · up[i]) for count elements; act 0
// SwiGLU, 1 GeGLU (tanh form), 2 gpt-oss's clamped SwiGLU, 6 Step-3.5's
// clamped SwiGLU of the limit (ml.Act; limit unused by the others), 7
// ReGLU, max(g, 0)·u, 8 ggml's SWIGLU_CLAMP of the limit, silu(min(g,
// L))·clamp(u, -L, L), 11 Kimi K3's SiTU of β = limit and λ = limit2,
// β·tanh(g/β)·sigmoid(g) · λ·tanh(u/λ) (u itself for λ <= 0: nn.SiTU's
// Ref); the
// ungated act 3 ReLU², out[i] = f32(max(gate[i], 0)²) (nn.ReLUSqr: the
// float64 product of two floats is exact, so this is the float32
// product), act 5 GELU, out[i] = f32(gelu(gate[i])) (nn.GELU), and act 9
// SiLU, out[i] = f32(g / (1 + e^-g)) (nn.SiLU32), gate
// being an ungated MLP's Up·x, up unused and may be null. out may be gate
// or up (each element is read and written by one thread).
extern "C" __global__ void glu_f32(float* out, const float* gate, const float* up, i64 count, int act, float limit, float limit2) {
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < count; idx += (i64)gridDim.x * blockDim.x) {
		double g = (double)gate[idx], v;
		if (act == 3 || act == 5) {
			double r = g < 0.0 ? 0.0 : g; // Go's max(g, 0): a NaN stays NaN
			out[idx] = (float)(act == 3 ? __dmul_rn(r, r) : gelu_tanh(g));
			continue;
		}
		if (act == 9) {
			out[idx] = (float)__ddiv_rn(g, __dadd_rn(1.0, exp(-g)));
			continue;
		}
		double u = (double)up[idx];
		if (act == 0) {
			v = __dmul_rn(__ddiv_rn(g, __dadd_rn(1.0, exp(-g))), u);
		} else if (act == 1) {
			v = __dmul_rn(gelu_tanh(g), u);
		} else if (act == 6) {
			v = clamp_swiglu(g, u, limit);
		} else if (act == 8) {
			v = swiglu_clamp_in(g, u, limit);
		} else if (act == 11) {
			double b = (double)limit, lb = (double)limit2;
			if (lb > 0.0) u = __dmul_rn(lb, tanh(__ddiv_rn(u, lb)));
			v = __dmul_rn(__ddiv_rn(__dmul_rn(b, tanh(__ddiv_rn(g, b))), __dadd_rn(1.0, exp(-g))), u);
		} else if (act == 7) {
			v = g > 0.0 ? __dmul_rn(g, u) : 0.0; // ReGLU as ggml's: a product of two floats, exact; +0 otherwise
		} else {
			g = fmin(g, 7.0);
			u = fmax(-7.0, fmin(u, 7.0));
			v = __dmul_rn(__ddiv_rn(g, __dadd_rn(1.0, exp(__dmul_rn(-1.702, g)))), __dadd_rn(u, 1.0));
		}
		out[idx] = (float)v;
	}
}
