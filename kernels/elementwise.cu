// Elementwise operations on float32 activations: the residual add, scaling,
// a sigmoid gate, logit soft-capping, Apertus's xIELU, and widening halves
// to float32.
//
// CPU references (score/model/cpu.go, the CPU backend of package ml):
// cpuBackend.Add (nn.Add: float32 adds), Scale (float32 products with the
// scale rounded to float32), GateMul and SoftCap (float64 inside, one
// rounding to float32). The GPU's exp and tanh are within an ulp of Go's in
// float64, so the float32 results agree but for rare ties.
#include "common.cuh"

#define GRID_STRIDE(idx, total) \
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < (total); idx += (i64)gridDim.x * blockDim.x)

// add_f32: x[i] += y[i] for count elements (x and y may not overlap).
extern "C" __global__ void add_f32(float* __restrict__ x, const float* __restrict__ y, i64 count) {
	GRID_STRIDE(idx, count) x[idx] = __fadd_rn(x[idx], y[idx]);
}

// scale_f32: x[i] *= s.
extern "C" __global__ void scale_f32(float* __restrict__ x, i64 count, float s) {
	GRID_STRIDE(idx, count) x[idx] = __fmul_rn(x[idx], s);
}

// clamp_f32: x[i] = min(max(x[i], -c), c) (ggml_clamp; a NaN stays NaN, as
// the CPU's Go min and max keep it).
extern "C" __global__ void clamp_f32(float* __restrict__ x, i64 count, float c) {
	GRID_STRIDE(idx, count) {
		float v = x[idx];
		if (v != v) continue;
		x[idx] = v < -c ? -c : (v > c ? c : v);
	}
}

// unscale_f32: x[i] *= 2^-down_exp(*amax), the product of a down
// projection whose fp16 input swiglu.cu scaled; nothing when it did not.
extern "C" __global__ void unscale_f32(float* __restrict__ x, i64 count, const u32* __restrict__ amax) {
	int k = down_exp(*amax);
	if (k == 0) return;
	float s = pow2f(-k);
	GRID_STRIDE(idx, count) x[idx] = __fmul_rn(x[idx], s);
}

// gate_mul: x (rows, cols) *= f(g), g (rows, gcols) with gcols cols (one
// gate per element) or 1 (one per row), in float64 rounded once: fn 0
// x = f32(x / (1 + e^-g)), 1 f32(x · softplus(g)), 2 f32(x · softplus(g·ln
// 2)/ln 2) = log2(1 + 2^g) (softplus(t) = log(1 + e^t), t itself past 20,
// as ggml; nn.Softplus, nn.Softplus2).
extern "C" __global__ void gate_mul(float* __restrict__ x, const float* __restrict__ g, int rows, int cols, int gcols, int fn) {
	const double ln2 = 0.69314718055994530942;
	GRID_STRIDE(idx, (i64)rows * cols) {
		i64 r = idx / cols;
		int c = (int)(idx % cols);
		double gv = (double)g[r * gcols + (gcols == 1 ? 0 : c)];
		if (fn == 0) {
			x[idx] = (float)__ddiv_rn((double)x[idx], __dadd_rn(1.0, exp(-gv)));
			continue;
		}
		double t = fn == 2 ? __dmul_rn(gv, ln2) : gv;
		double sp = t > 20.0 ? t : log1p(exp(t));
		x[idx] = (float)__dmul_rn((double)x[idx], fn == 2 ? __ddiv_rn(sp, ln2) : sp);
	}
}

// softcap: x = f32(cap · tanh(x / cap)) in float64.
extern "C" __global__ void softcap(float* __restrict__ x, i64 count, double cap) {
	GRID_STRIDE(idx, count) x[idx] = (float)__dmul_rn(cap, tanh(__ddiv_rn((double)x[idx], cap)));
}

// xielu_f32: x = f32(xielu(x)) in float64 (nn.XIELU.Ref): x > 0:
// ap·x·x + beta·x; else (expm1(min(x, eps)) - x)·an + beta·x.
extern "C" __global__ void xielu_f32(float* __restrict__ x, i64 count, float an, float ap, float beta, float eps) {
	GRID_STRIDE(idx, count) {
		double v = (double)x[idx], b = (double)beta;
		double y = v > 0.0 ? __dadd_rn(__dmul_rn(__dmul_rn((double)ap, v), v), __dmul_rn(b, v))
		                   : __dadd_rn(__dmul_rn(__dsub_rn(expm1(fmin(v, (double)eps)), v), (double)an), __dmul_rn(b, v));
		x[idx] = (float)y;
	}
}

// widen_half: out[i] = f32(h[i]), bf16 or (f16 != 0) fp16: exact.
extern "C" __global__ void widen_half(float* __restrict__ out, const u16* __restrict__ h, i64 count, int f16) {
	GRID_STRIDE(idx, count) out[idx] = f16 ? f16_to_f32(h[idx]) : bf16_to_f32(h[idx]);
}
