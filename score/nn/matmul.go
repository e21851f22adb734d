package nn

import (
	"fmt"
	"unsafe"
)

// Matrix products: a register tile of A·B per kernel call (gemmFunc), and
// Gemm, which covers any number of rows with tiles.
//
// The tiles follow BLIS: B is a panel of nr = 16 or 32 columns whose rows
// are contiguous (a packed weight panel, a transposed key block, or rows of
// values), each step of k broadcasts one element of each of A's rows and
// multiplies it into the panel's row, so that C's rows come out contiguous.

// gemmGeneric is the reference tile kernel: C (m × nr) = A (m × k) · B
// (k × nr), or C = fma(C, alpha, A·B) per row with alpha, each element of
// A·B one FMA chain over k in order; with acc, C = C + A·B, each chain
// starting from C (alpha unused).
func gemmGeneric(m, nr int, acc bool, a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32) {
	A := unsafe.Slice(a, (m-1)*lda+k)
	B := unsafe.Slice(b, max(0, (k-1)*ldb+nr))
	C := unsafe.Slice(c, (m-1)*ldc+nr)
	var al []float32
	if alpha != nil && !acc {
		al = unsafe.Slice(alpha, m)
	}
	var s [32]float32
	for i := range m {
		ci := C[i*ldc : i*ldc+nr]
		if acc {
			copy(s[:nr], ci)
		} else {
			clear(s[:nr])
		}
		ai := A[i*lda : i*lda+k]
		for p, av := range ai {
			bp := B[p*ldb : p*ldb+nr]
			for j, bv := range bp {
				s[j] = fma32(av, bv, s[j])
			}
		}
		for j := range ci {
			if al != nil {
				ci[j] = fma32(ci[j], al[i], s[j])
			} else {
				ci[j] = s[j]
			}
		}
	}
}

// Gemm computes C (m × nr) = A (m × k) · B (k × nr), or C = alpha ⊙ C + A·B
// (row i scaled by alpha[i]) when alpha is not nil, nr = 16 or 32. A's rows
// are lda floats apart, B's ldb and C's ldc. Each element of A·B is one
// chain of fused multiply-adds over k in order, whatever the CPU.
func Gemm(m, nr int, a []float32, lda int, b []float32, ldb int, k int, c []float32, ldc int, alpha []float32) {
	gemmTiles(false, m, nr, a, lda, b, ldb, k, c, ldc, alpha)
}

// GemmAcc computes C = C + A·B, each element of C continuing one chain of
// fused multiply-adds over k in order from its value in C (as ggml's
// flash attention accumulates its output), with Gemm's shapes.
func GemmAcc(m, nr int, a []float32, lda int, b []float32, ldb int, k int, c []float32, ldc int) {
	gemmTiles(true, m, nr, a, lda, b, ldb, k, c, ldc, nil)
}

func gemmTiles(acc bool, m, nr int, a []float32, lda int, b []float32, ldb int, k int, c []float32, ldc int, alpha []float32) {
	if m == 0 {
		return
	}
	if nr != 16 && nr != 32 {
		panic(fmt.Sprintf("nn: Gemm with %d columns (want 16 or 32)", nr))
	}
	check("Gemm A", len(a), (m-1)*lda+k)
	check("Gemm B", len(b), max(0, (k-1)*ldb+nr))
	check("Gemm C", len(c), (m-1)*ldc+nr)
	if lda < k || ldc < nr || (k > 1 && ldb < nr) {
		panic(fmt.Sprintf("nn: Gemm strides lda %d, ldb %d, ldc %d for k %d, nr %d", lda, ldb, ldc, k, nr))
	}
	var ap *float32
	if alpha != nil {
		check("Gemm alpha", len(alpha), m)
		ap = &alpha[0]
	}
	var bp *float32
	if len(b) > 0 {
		bp = &b[0]
	} else {
		bp = &c[0] // k = 0: B is never read
	}
	fns := kern.gemm[nr/16-1]
	if acc {
		fns = kern.gemmAcc[nr/16-1]
	}
	tile := len(fns)
	for i := 0; i < m; i += tile {
		mi := min(tile, m-i)
		var aip *float32
		if k > 0 {
			aip = &a[i*lda]
		} else {
			aip = bp
		}
		var al *float32
		if ap != nil {
			al = &alpha[i]
		}
		fns[mi-1](aip, lda, bp, ldb, k, &c[i*ldc], ldc, al)
	}
}
