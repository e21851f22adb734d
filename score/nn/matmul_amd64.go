package nn

import "golang.org/x/sys/cpu"

// The AVX2/FMA kernels of matmul_amd64.s. They compute what MatMulRows
// computes for a block of exactly 16 weight rows, transposed first so that
// each step broadcasts one x element against 16 weights; each output is a
// single FMA chain in order of k (MatMulRows sums with separate rounding of
// products and partial sums, so the two differ in the last bits).

//go:noescape
func gemm4x16(x *float32, xs int, w *float32, k int, out *float32, os int)

//go:noescape
func gemm1x16(x *float32, w *float32, k int, out *float32)

func init() {
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		matMul16 = matMul16AVX2
	}
}

// matMul16AVX2 is MatMulRows for r = 16 weight rows, using wt (16·k floats)
// as scratch for the transposed block.
func matMul16AVX2(out []float32, stride int, x []float32, n, k int, w, wt []float32) {
	check("matMul16 x", len(x), n*k)
	check("matMul16 w", len(w), 16*k)
	check("matMul16 wt", len(wt), 16*k)
	check("matMul16 out", len(out), (n-1)*stride+16)
	if k == 0 {
		for t := range n {
			clear(out[t*stride : t*stride+16])
		}
		return
	}
	for j := range 16 {
		for i, v := range w[j*k : (j+1)*k] {
			wt[i*16+j] = v
		}
	}
	t := 0
	for ; t+4 <= n; t += 4 {
		gemm4x16(&x[t*k], k, &wt[0], k, &out[t*stride], stride)
	}
	for ; t < n; t++ {
		gemm1x16(&x[t*k], &wt[0], k, &out[t*stride])
	}
}
