package nn

import (
	"fmt"

	"ppl.dev/score/kvcache"
)

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
	FWHTHeads(c, dst, src, rows, n, n, n)
}

// FWHTHeads is FWHT over the first width values (a multiple of n) of each
// of heads rows of stride values, in blocks of n, the rest of each row
// copied: value heads padded with zeros to the key heads' size (MiniCPM3's
// 64 of 96), which llama.cpp turns as heads of width. dst may be src.
func FWHTHeads(c *Context, dst, src []float32, heads, stride, width, n int) {
	if n <= 0 || n&(n-1) != 0 || width%n != 0 || width > stride {
		panic(fmt.Sprintf("nn: FWHT of %d of %d values in blocks of %d (a power of 2 dividing them)", width, stride, n))
	}
	check("FWHT input", len(src), heads*stride)
	check("FWHT output", len(dst), heads*stride)
	// ggml's 1.0f/sqrtf(n) is float32(1/√n) for every power of 2.
	scale := kvcache.HadamardScale(n)
	c.Parallel(heads, func(_, lo, hi int) {
		for h := lo; h < hi; h++ {
			d, s := dst[h*stride:(h+1)*stride], src[h*stride:(h+1)*stride]
			for j, v := range s[:width] {
				d[j] = v * scale
			}
			copy(d[width:], s[width:])
			for b := 0; b < width; b += n {
				kvcache.Butterflies(d[b : b+n])
			}
		}
	})
}
