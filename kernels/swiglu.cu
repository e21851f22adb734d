// SwiGLU: out = silu(gate) · up, silu(g) = g / (1 + e^-g).
//
// CPU reference: nn.SwiGLU (score/nn/mlp.go): float64 inside, rounded to
// float32 once. The GPU's exp is within an ulp of Go's math.Exp in float64,
// so the float32 results agree but for rare ties; swiglu_half then rounds
// to bf16 (or fp16), the input of the down projection.
#include "common.cuh"

// swiglu_half: out[i] = half(f32(silu(gate[i]) * up[i])), bf16 or (f16 != 0) fp16.
// gate and up are rows of width f with row strides gs and us (elements), so
// a fused gate|up product can be read in place; out is (rows, f) dense.
extern "C" __global__ void swiglu_half(u16* __restrict__ out, const float* __restrict__ gate,
                                       const float* __restrict__ up, int rows, int f, int gs, int us, int f16) {
	i64 total = (i64)rows * f;
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (i64)gridDim.x * blockDim.x) {
		i64 r = idx / f;
		int c = (int)(idx % f);
		double g = (double)gate[r * gs + c];
		double u = (double)up[r * us + c];
		double v = __dmul_rn(__ddiv_rn(g, __dadd_rn(1.0, exp(-g))), u);
		out[idx] = f16 ? f32_to_f16((float)v) : f32_to_bf16((float)v);
	}
}

// glu_half: the other gated activations of ml.Act, act 1 GeGLU (nn.GeGLU:
// 0.5·g·(1 + tanh(sqrt(2/π)·(g + 0.044715·g³)))·u) and act 2 gpt-oss's
// clamped SwiGLU (nn.OAISwiGLU: g = min(gate, 7), u = clamp(up, -7, 7),
// g·sigmoid(1.702·g)·(u + 1)), in float64 rounded to float32 once, then to
// bf16 or (f16 != 0) fp16. gate and up are dense (rows, f).
extern "C" __global__ void glu_half(u16* __restrict__ out, const float* __restrict__ gate, const float* __restrict__ up,
                                    int rows, int f, int act, int f16) {
	i64 total = (i64)rows * f;
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (i64)gridDim.x * blockDim.x) {
		double g = (double)gate[idx], u = (double)up[idx], v;
		if (act == 1) {
			const double c = 0.7978845608028654; // sqrt(2/π)
			double inner = __dmul_rn(c, __dadd_rn(g, __dmul_rn(__dmul_rn(__dmul_rn(0.044715, g), g), g)));
			v = __dmul_rn(__dmul_rn(__dmul_rn(0.5, g), __dadd_rn(1.0, tanh(inner))), u);
		} else {
			g = fmin(g, 7.0);
			u = fmax(-7.0, fmin(u, 7.0));
			v = __dmul_rn(__ddiv_rn(g, __dadd_rn(1.0, exp(__dmul_rn(-1.702, g)))), __dadd_rn(u, 1.0));
		}
		out[idx] = f16 ? f32_to_f16((float)v) : f32_to_bf16((float)v);
	}
}
