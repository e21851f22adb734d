// SwiGLU: out = silu(gate) · up, silu(g) = g / (1 + e^-g).
//
// CPU reference: nn.SwiGLU (score/nn/mlp.go): float64 inside, rounded to
// float32 once. The GPU's exp is within an ulp of Go's math.Exp in float64,
// so the float32 results agree but for rare ties; swiglu_half then rounds
// to fp16 (times a power of two where it would overflow, below) or bf16,
// the input of the down projection. glu_half computes the other
// activations of ml.Act the same way (nn.GeGLU, nn.OAISwiGLU, and the
// ungated nn.ReLUSqr).
#include "common.cuh"

// The down projection's input in fp16 (amax not null): silu(g)·u is not
// normalized and can exceed fp16's range (65504). A launch with rescale 0
// writes the fp16 values and the largest magnitude among them (its float32
// bits, by atomicMax: the same whatever the order) into *amax; the launch
// after it, rescale 1, returns at once unless that maximum is 2^15 or
// more, and then writes every value times 2^down_exp(*amax), which brings
// the maximum to [2^14, 2^15); unscale_f32 (elementwise.cu) multiplies the
// product by 2^-down_exp(*amax) again. Both are exact (powers of two), so
// the input keeps fp16's 11 bits everywhere but below 2^-29 of its
// maximum. bf16 inputs (amax null) take one launch.

// out_half rounds the activation v for the down projection, times 2^k,
// and keeps the largest magnitude in *m.
__device__ __forceinline__ u16 out_half(float v, int f16, int k, float* m) {
	if (!f16) return f32_to_bf16(v);
	*m = fmaxf(*m, fabsf(v));
	return f32_to_f16(k ? __fmul_rn(v, pow2f(k)) : v);
}

// glu_max adds a thread's maximum to *amax: one atomic per warp.
__device__ __forceinline__ void glu_max(u32* amax, float m) {
	u32 b = __reduce_max_sync(0xffffffffu, __float_as_uint(m));
	if ((threadIdx.x & 31) == 0) atomicMax(amax, b);
}

// swiglu_half: out[i] = half(f32(silu(gate[i]) * up[i])), bf16 or (f16 != 0) fp16.
// gate and up are rows of width f with row strides gs and us (elements), so
// a fused gate|up product can be read in place; out is (rows, f) dense.
// amax and rescale: above.
extern "C" __global__ void swiglu_half(u16* __restrict__ out, const float* __restrict__ gate,
                                       const float* __restrict__ up, int rows, int f, int gs, int us, int f16,
                                       u32* amax, int rescale) {
	int k = rescale ? down_exp(*amax) : 0;
	if (rescale && k == 0) return;
	float m = 0;
	i64 total = (i64)rows * f;
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (i64)gridDim.x * blockDim.x) {
		i64 r = idx / f;
		int c = (int)(idx % f);
		double g = (double)gate[r * gs + c];
		double u = (double)up[r * us + c];
		double v = __dmul_rn(__ddiv_rn(g, __dadd_rn(1.0, exp(-g))), u);
		out[idx] = out_half((float)v, f16, k, &m);
	}
	if (amax && !rescale) glu_max(amax, m);
}

// glu_half: the other activations of ml.Act, act 1 GeGLU (nn.GeGLU:
// 0.5·g·(1 + tanh(sqrt(2/π)·(g + 0.044715·g³)))·u), act 2 gpt-oss's
// clamped SwiGLU (nn.OAISwiGLU: g = min(gate, 7), u = clamp(up, -7, 7),
// g·sigmoid(1.702·g)·(u + 1)), act 6 Step-3.5's clamped SwiGLU of the
// limit L (nn.ClampSwiGLU: min(silu(g), L)·clamp(up, -L, L)), act 8
// ggml's SWIGLU_CLAMP of the limit L (nn.SwiGLUClampIn: silu(min(g,
// L))·clamp(up, -L, L)), act 7 ReGLU
// (nn.ReGLU: max(g, 0)·up), and the ungated act 3 ReLU² (nn.ReLUSqr:
// max(g, 0)²) and act 5 GELU (nn.GELU: gelu(g)), g being an ungated
// MLP's Up·x, up unused and may be null, in float64 rounded to float32
// once (ReLU²'s product of two floats is exact in float64: the float32
// product), then to bf16 or (f16 != 0)
// fp16. gate and up are dense (rows, f). amax and rescale: above.
extern "C" __global__ void glu_half(u16* __restrict__ out, const float* __restrict__ gate, const float* __restrict__ up,
                                    int rows, int f, int act, float limit, int f16, u32* amax, int rescale) {
	int k = rescale ? down_exp(*amax) : 0;
	if (rescale && k == 0) return;
	float m = 0;
	i64 total = (i64)rows * f;
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (i64)gridDim.x * blockDim.x) {
		double g = (double)gate[idx], v;
		if (act == 3 || act == 5) {
			double r = g < 0.0 ? 0.0 : g; // Go's max(g, 0): a NaN stays NaN
			out[idx] = out_half((float)(act == 3 ? __dmul_rn(r, r) : gelu_tanh(g)), f16, k, &m);
			continue;
		}
		double u = (double)up[idx];
		if (act == 1) {
			v = __dmul_rn(gelu_tanh(g), u);
		} else if (act == 6) {
			v = clamp_swiglu(g, u, limit);
		} else if (act == 8) {
			v = swiglu_clamp_in(g, u, limit);
		} else if (act == 7) {
			v = g > 0.0 ? __dmul_rn(g, u) : 0.0; // ReGLU as ggml's: a product of two floats, exact; +0 otherwise
		} else {
			g = fmin(g, 7.0);
			u = fmax(-7.0, fmin(u, 7.0));
			v = __dmul_rn(__ddiv_rn(g, __dadd_rn(1.0, exp(__dmul_rn(-1.702, g)))), __dadd_rn(u, 1.0));
		}
		out[idx] = out_half((float)v, f16, k, &m);
	}
	if (amax && !rescale) glu_max(amax, m);
}
