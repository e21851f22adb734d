package nn

// laneSums's kernels (lanesums_amd64.s): VPMADDWD over the sign-extended
// activations, in 512-bit and 256-bit registers.

//go:noescape
func laneSums16AVX512(w *int16, x *int8, n int, s *[8]int32)

//go:noescape
func laneSums16AVX2(w *int16, x *int8, n int, s *[8]int32)
