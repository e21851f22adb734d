package nn

import "math"

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
	scale := 1 / float32(math.Sqrt(float64(n))) // 1.0f/sqrtf(n): float32(1/√n) for a power of 2
	c.Parallel(rows, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			fwhtRow(dst[r*n:(r+1)*n], src[r*n:(r+1)*n], scale)
		}
	})
}

func fwhtRow(d, s []float32, scale float32) {
	for j, v := range s {
		d[j] = v * scale
	}
	n := len(d)
	for span := 1; span < n; span *= 2 {
		for i := 0; i < n; i += 2 * span {
			a, b := d[i:i+span], d[i+span:i+2*span]
			for j := range a {
				u, v := a[j], b[j]
				a[j], b[j] = u+v, u-v
			}
		}
	}
}
