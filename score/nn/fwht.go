package nn

import "ppl.dev/score/kvcache"

// FWHT turns each of rows rows of n values (n a power of 2) of src into
// dst by the normalized Walsh-Hadamard matrix (HadamardMatrix(n)) as
// ggml-cpu computes a product with a matrix llama.cpp flags
// GGML_HINT_SRC0_IS_HADAMARD (ggml_compute_forward_fwht, which ggml-cpu
// runs instead of MUL_MAT: llama.cpp 0.7.0 flags its rotations before a
// quantized KV cache and DeepSeek-V4's lightning indexer's, not
// DeepSeek-V3.2's or GLM-5's, probed on its graphs): every value times 1/sqrtf(n) first, then log2(n)
// passes of butterflies (u+v, u−v) of spans 1, 2, 4, ..., each sum a
// float32 rounding (ggml's SIMD passes take u−v as fma(v, −1, u), the same
// value). The matrix's product to within those roundings, in n·log2(n)
// operations. dst may be src.
func FWHT(c *Context, dst, src []float32, rows, n int) {
	if n <= 0 || n&(n-1) != 0 {
		panic("nn: FWHT of a size that is not a power of 2")
	}
	check("FWHT input", len(src), rows*n)
	check("FWHT output", len(dst), rows*n)
	// ggml's 1.0f/sqrtf(n) is float32(1/√n) for every power of 2.
	scale := kvcache.HadamardScale(n)
	c.Parallel(rows, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			d := dst[r*n : (r+1)*n]
			for j, v := range src[r*n : (r+1)*n] {
				d[j] = v * scale
			}
			kvcache.Butterflies(d)
		}
	})
}
