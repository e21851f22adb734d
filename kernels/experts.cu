// Mixture of experts: the data movement around the per-expert products.
//
// CPU reference: cpuBackend.Experts (score/model/cpu.go). The host routes
// (ml.Router.Route) and orders a block of rows' choices by expert;
// gather_rows copies the tokens' rows into the products' input, expert
// after expert, cuBLAS runs the experts' gate, up and down products
// (batched, score/cuda/ml.go's Experts), and scatter_scaled writes each
// result row times its weight to its choice's slot; then
// sum_choices adds each token's K slots in the order of its choices, as
// the CPU does (float32 products and adds), so the grouping does not change
// a bit of the result.
#include "common.cuh"

#define GRID_STRIDE(idx, total) \
	for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < (total); idx += (i64)gridDim.x * blockDim.x)

// gather_rows: out row i (cols values: bf16 (otype 0), fp16 (1) or float32
// (2, experts stored float32)) <- x row rows[i] (f32), for n rows.
extern "C" __global__ void gather_rows(void* __restrict__ out, const float* __restrict__ x, const int* __restrict__ rows,
                                       int n, int cols, int otype) {
	GRID_STRIDE(idx, (i64)n * cols) {
		i64 i = idx / cols;
		int c = (int)(idx % cols);
		float v = x[(i64)rows[i] * cols + c];
		if (otype == 2)
			((float*)out)[idx] = v;
		else
			((u16*)out)[idx] = otype ? f32_to_f16(v) : f32_to_bf16(v);
	}
}

// scale_rows: out row i (cols f32) <- x row rows[i] · w[i], for n rows:
// the inputs of experts weighted before their FFN (Llama 4).
extern "C" __global__ void scale_rows(float* __restrict__ out, const float* __restrict__ x, const int* __restrict__ rows,
                                      const float* __restrict__ w, int n, int cols) {
	GRID_STRIDE(idx, (i64)n * cols) {
		i64 i = idx / cols;
		int c = (int)(idx % cols);
		out[idx] = __fmul_rn(x[(i64)rows[i] * cols + c], w[i]);
	}
}

// scatter_scaled: slot choice[i] of res (slots of cols f32) <- y row i ·
// w[choice[i]], for n rows.
extern "C" __global__ void scatter_scaled(float* __restrict__ res, const float* __restrict__ y, const int* __restrict__ choice,
                                          const float* __restrict__ w, int n, int cols) {
	GRID_STRIDE(idx, (i64)n * cols) {
		i64 i = idx / cols;
		int c = (int)(idx % cols);
		int s = choice[i];
		res[(i64)s * cols + c] = __fmul_rn(y[idx], w[s]);
	}
}

// sum_choices: dst row t <- res slot t·k + 0, plus slots t·k + 1 .. k-1 in
// order (f32 adds), for rows tokens.
extern "C" __global__ void sum_choices(float* __restrict__ dst, const float* __restrict__ res, int rows, int k, int cols) {
	GRID_STRIDE(idx, (i64)rows * cols) {
		i64 t = idx / cols;
		int c = (int)(idx % cols);
		const float* s = res + t * k * cols + c;
		float v = s[0];
		for (int j = 1; j < k; j++) v = __fadd_rn(v, s[(i64)j * cols]);
		dst[idx] = v;
	}
}
