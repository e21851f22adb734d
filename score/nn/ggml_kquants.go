package nn

import (
	"unsafe"

	"ppl.dev/quant"
)

// The K-quants with Q8_K activations in llama.cpp's order (libggml 0.27.0,
// the AVX-512 zen4 build; the AVX2 build haswell gives the same bits).
// ggml-cpu's MUL_MAT picks one of three kernels per call, and each sums in
// its own order:
//
//   - the repacked GEMM and GEMV (repack.cpp, only Q4_K here: the x86
//     repacking buffer takes Q4_K when its row count is a multiple of 8,
//     never Q6_K); the 512-bit GEMM sums in the order of the 256-bit one;
//   - otherwise, with 8 or more activation rows in the call, the tiled
//     K-quant path (tiled/tiled.cpp, its AVX512-VNNI microkernel): one
//     float chain over the super-blocks per output;
//   - otherwise the vec_dot kernel per output (the AVX2 code).
//
// Integers and scales are the same in all three: the repack only moves the
// weights' bytes, and the activations quantized four rows at a time for the
// GEMM (ggml_quantize_mat_q8_K_4x8) give the Q8_K records' integers and d,
// up to the sign of a whole super-block when +max and -max tie, which
// flips a_e, B_j and dx together and leaves every product's bits as they
// are.
//
// The integer sums below are exact (no int16 step of the kernels can
// saturate: a pair of 4- or 6-bit weights times 8-bit activations is at
// most 2·63·127), so only their grouping matters: the float32 operations
// are listed as they round. Per super-block of 256, dx is the activations'
// Q8_K scale (the d of its eight blocks of 32), q_e the weight's unsigned
// integer (the nibble for Q4_K, the 6-bit value before the -32 offset for
// Q6_K), sc_e the integer scale of element e's sub-block, a_e the
// activation's integer, and "lane m" the elements e of the super-block with
// (e mod 32)/4 = m (the int32 lane of a 256-bit register that VPMADDUBSW
// then VPMADDWD leave them in).

// k4Scales decodes the eight 6-bit scales and mins of a Q4_K super-block
// (the 12 bytes of its scales field).
func k4Scales(s []byte) (sc, m [8]int32) {
	for j := range 4 {
		sc[j] = int32(s[j] & 63)
		m[j] = int32(s[j+4] & 63)
		sc[j+4] = int32(s[j+8]&0xf | (s[j]>>6)<<4)
		m[j+4] = int32(s[j+8]>>4 | (s[j+4]>>6)<<4)
	}
	return sc, m
}

// panelQ4K is panelInt8 for Q4_K weights in llama.cpp's order. With dw,
// dmin the super-block's f16 scales as float32, w_e = sc_e·q_e, B_j the
// activations' Σa over sub-block j (of 32) and m_j its min:
//
// Out a multiple of 8 (llama.cpp repacks the matrix into q4_K_8x8 and
// multiplies 8 weight rows at a time): the activation rows [0, n - n%4)
// of the call go through ggml_gemm_q4_K_8x8_q8_K, four at a time, which per
// output, over the super-blocks in order and within each over the pairs of
// sub-blocks p = 0..3, does
//
//	acc  = fma(float32(Σ_{e in sub-blocks 2p, 2p+1} w_e·a_e), dw·dx, acc)
//	accm = fma(float32(m_2p·B_2p + m_2p+1·B_2p+1), dmin·dx, accm)
//
// (dw·dx and dmin·dx rounded to float32) and returns acc - accm. The rows
// past the last multiple of 4 go through ggml_gemv_q4_K_8x8_q8_K, which is
// the same with one pair of FMAs per super-block: the integers summed over
// all 8 sub-blocks. Activation row t's output thus depends on whether t is
// among the last n%4 rows of the call.
//
// Out not a multiple of 8 (the matrix stays in the plain CPU buffer), with
// n >= 8 (the tiled path), per output over the super-blocks in order:
//
//	acc = fma(fma(-dmin, float32(Σ_j m_j·B_j), float32(Σ_e w_e·a_e)·dw), dx, acc)
//
// (the product with dw rounded, then VFNMADD, then VFMADD), starting from 0.
//
// Out not a multiple of 8 and n < 8 (ggml_vec_dot_q4_K_q8_K, per output):
// eight lanes acc_m add
// fma(dx·dw, float32(Σ_{e in lane m} w_e·a_e), acc_m) per super-block, and
// four lanes accm_i add fma(-dx·dmin, float32(m_2i·B_2i + m_2i+1·B_2i+1),
// accm_i) ((-dx)·dmin rounded); the result is hsum8(acc) plus
// (accm_0 + accm_2) + (accm_1 + accm_3).
func (l *Linear) panelQ4K(buf []float32, r0, r1 int, a *qacts, out []float32) {
	l.panelKMin(buf, r0, r1, a, out, &q4kFormat)
}

// kMinFormat is what the K-quants with minima (Q2_K, Q4_K, Q5_K) differ in
// for panelKMin.
type kMinFormat struct {
	scales  tiledScales                                                         // a row's integer scales and minima, d and dmin
	repacks func(a *qacts) bool                                                 // whether llama.cpp repacks a matrix of Out a multiple of 8 (nil: never)
	variant int                                                                 // panelKRepacked's
	vec     func(p *vecRows, r int, qx []int8, xs []int32, d []float32) float32 // ggml_vec_dot's order
}

var (
	q4kFormat = kMinFormat{scales: k4RowScales(144), repacks: func(*qacts) bool { return true }, vec: (*vecRows).vecQ4K}
	q5kFormat = kMinFormat{scales: k4RowScales(176), vec: (*vecRows).vecQ5K}
	q2kFormat = kMinFormat{scales: q2kScales, repacks: func(a *qacts) bool { return !a.avx2 }, variant: 2, vec: (*vecRows).vecQ2K}
)

// panelKMin is panelInt8 for a K-quant with minima in llama.cpp's order
// (each type's panel says which sums): the repacked GEMM and GEMV where
// llama.cpp repacks the matrix, else the tiled order from ggmlTiledRows
// activation rows, else ggml_vec_dot's per output.
func (l *Linear) panelKMin(buf []float32, r0, r1 int, a *qacts, out []float32, f *kMinFormat) {
	switch {
	case l.Out%8 == 0 && f.repacks != nil && f.repacks(a):
		l.panelKRepacked(buf, r0, r1, a, out, f.scales, f.variant)
	case a.n >= ggmlTiledRows:
		l.panelTiled(buf, r0, r1, a, out, f.scales)
	default:
		c := carver(buf)
		p := l.decodeVec(&c, r0, r1, f.scales, 0)
		l.recordPanel(r0, r1, a, out, p.g, func(_ int, qx []int8, xs []int32, d []float32, r int) float32 {
			return f.vec(p, r, qx, xs, d)
		})
	}
}

// vecQ4K is ggml_vec_dot_q4_K_q8_K's output for row r (see panelQ4K).
func (p *vecRows) vecQ4K(r int, qx []int8, xs []int32, d []float32) float32 {
	ls := p.rowLanes(r, qx)
	var acc [8]float32
	var accm [4]float32
	for b := range p.nsb {
		dx := d[8*b]
		sd, sm := dx*p.dw[r*p.nsb+b], -dx*p.dm[r*p.nsb+b]
		for i := range 4 {
			accm[i] = fma32(sm, float32(p.minSum(r, xs, 8*b+2*i, 8*b+2*i+2)), accm[i])
		}
		for m := range 8 {
			acc[m] = fma32(sd, float32(ls[b][m]), acc[m])
		}
	}
	return hsum8(&acc) + ((accm[0] + accm[2]) + (accm[1] + accm[3]))
}

// panelQ6K is panelInt8 for Q6_K weights in llama.cpp's order (llama.cpp
// does not repack Q6_K on x86). With sc_j the int8 scale of sub-block j (of
// 16), b_j the activations' Σa over it, w_e = sc_e·q_e (q_e in [0, 64)) and
// dw the super-block's f16 scale:
//
// With n >= 8 activation rows in the call (the tiled path), per output over
// the super-blocks in order, from 0,
//
//	acc = fma(float32(Σ_e sc_e·(q_e - 32)·a_e)·dw, dx, acc)
//
// (the product with dw rounded). Otherwise (ggml_vec_dot_q6_K_q8_K, per
// output) eight lanes add, per super-block,
//
//	acc_m = fma(dx·dw, float32(Σ_{e in lane m} w_e·a_e - 32·(sc_2m·b_2m + sc_2m+1·b_2m+1)), acc_m)
//
// (dx·dw rounded to float32; the offset term of lane m is that of the
// elements 32m..32m+31, not of lane m's own), and the result is hsum8(acc).
func (l *Linear) panelQ6K(buf []float32, r0, r1 int, a *qacts, out []float32) {
	if a.n >= ggmlTiledRows {
		l.panelTiled(buf, r0, r1, a, out, q6kScales)
		return
	}
	c := carver(buf)
	p := l.decodeVec(&c, r0, r1, q6kScales, 0) // w_e = sc_e·q_e, q_e the unsigned 6-bit value
	l.recordPanel(r0, r1, a, out, 16, func(_ int, qx []int8, xs16 []int32, d []float32, r int) float32 {
		ls, sc := p.rowLanes(r, qx), p.ls[r*p.ng:(r+1)*p.ng]
		var acc [8]float32
		for b := range p.nsb {
			sd := d[8*b] * p.dw[r*p.nsb+b]
			for m := range 8 {
				j := 16*b + 2*m
				v := ls[b][m] - 32*(sc[j]*xs16[j]+sc[j+1]*xs16[j+1])
				acc[m] = fma32(sd, float32(v), acc[m])
			}
		}
		return hsum8(&acc)
	})
}

// q6kScales is panelTiled's scales for Q6_K: the sixteen int8 scales of
// each super-block (one per 16 weights) and its f16 d.
func q6kScales(row []byte, ls []int32, d0 []float32, _ []int32, _ []float32) {
	for b := range d0 {
		blk := row[210*b : 210*b+210]
		for j := range 16 {
			ls[16*b+j] = int32(int8(blk[192+j]))
		}
		d0[b] = quant.F16ToF32(uint16(blk[208]) | uint16(blk[209])<<8)
	}
}

// kRepackedFunc computes an m-row tile of 32 columns of Q4_K or Q2_K
// products in their repacked GEMM's or GEMV's order (kRepackedGeneric) from
// a record pointer x (row t at x + t·ldx) over nb blocks of 32: w is the
// panel of the weights' unsigned integers (nibbles, or Q2_K's 2 bits), ls
// and mins the integer scale and minimum of group j of row r at j·32 + r,
// dw and dm the super-block's d and dmin at B·32 + r.
type kRepackedFunc func(x *byte, ldx int, w *uint32, ls *int32, mins *int32, dw *float32, dm *float32, nb int, c *float32, ldc int, doff, xsoff int)

// The repacked kernels' variants (kernels.kRepacked): the type's group
// (Q4_K 32, Q2_K 16) and how many groups each pair of FMAs takes, in the
// GEMM (Q4_K 2, Q2_K 8) and in the GEMV (a super-block's: 8, 16).
var kRepackedVariants = [4]struct{ g, pair int }{{32, 2}, {32, 8}, {16, 8}, {16, 16}}

// kRepackedGeneric is the reference repacked kernel for m rows, groups of
// g and pair groups per pair of FMAs (see panelQ4K, panelQ2K).
func kRepackedGeneric(m, g, pair int, x *byte, ldx int, w *uint32, lsp *int32, minp *int32, dwp *float32, dmp *float32, nb int, c *float32, ldc int, doff, xsoff int) {
	ng, gps := nb*32/g, 256/g
	X := unsafe.Slice(x, (m-1)*ldx+max(doff+4*nb, xsoff+4*ng))
	W := unsafe.Slice(w, nb*8*32)
	LS, MN := unsafe.Slice(lsp, ng*32), unsafe.Slice(minp, ng*32)
	DW, DM := unsafe.Slice(dwp, nb/8*32), unsafe.Slice(dmp, nb/8*32)
	C := unsafe.Slice(c, (m-1)*ldc+32)
	for t := range m {
		rec := X[t*ldx:]
		for r := range 32 {
			var acc, accm float32
			for sb := range nb / 8 {
				dx := *(*float32)(unsafe.Pointer(&rec[doff+4*8*sb]))
				sd, sm := DW[sb*32+r]*dx, DM[sb*32+r]*dx
				for j0 := gps * sb; j0 < gps*(sb+1); j0 += pair {
					var s, mm int32
					for j := j0; j < j0+pair; j++ {
						var T int32
						for i := g * j; i < g*(j+1); i++ {
							T += int32(W[(i/4)*32+r]>>(8*(i%4))&0xff) * int32(int8(rec[i]))
						}
						s += LS[j*32+r] * T
						mm += MN[j*32+r] * *(*int32)(unsafe.Pointer(&rec[xsoff+4*j]))
					}
					acc = fma32(float32(s), sd, acc)
					accm = fma32(float32(mm), sm, accm)
				}
			}
			C[t*ldc+r] = acc - accm
		}
	}
}

func initGenericKRepacked() {
	for i, v := range kRepackedVariants {
		for m := 1; m <= 2; m++ {
			generic.kRepacked[i] = append(generic.kRepacked[i], func(x *byte, ldx int, w *uint32, ls *int32, mins *int32, dw *float32, dm *float32, nb int, c *float32, ldc int, doff, xsoff int) {
				kRepackedGeneric(m, v.g, v.pair, x, ldx, w, ls, mins, dw, dm, nb, c, ldc, doff, xsoff)
			})
		}
	}
}

// panelKRepacked is panelQ4K and panelQ2K for a matrix llama.cpp repacks
// (Out a multiple of 8): the activation rows [0, n - n%4) in the GEMM's
// order, the others in the GEMV's; scales gives a row's (as decodeVec's),
// variant is the GEMM's in kRepackedVariants.
func (l *Linear) panelKRepacked(buf []float32, r0, r1 int, a *qacts, out []float32, scales tiledScales, variant int) {
	f, _ := l.int8Able()
	k, rows := l.In, r1-r0
	nb, nsb, ng := k/32, k/256, k/f.Group
	c := carver(buf)
	rowsQ := l.decodeCodes(&c, r0, r1)
	panelQ := carve[uint32](&c, 32*k/4)
	pack32Words(panelQ, unsafe.Slice((*uint32)(unsafe.Pointer(&rowsQ[0])), rows*k/4), k/4, rows)
	ls, mins := carve[int32](&c, rows*ng), carve[int32](&c, rows*ng)
	dw, dm := carve[float32](&c, rows*nsb), carve[float32](&c, rows*nsb)
	for r := range rows {
		row := l.Data[(r0+r)*l.RowBytes : (r0+r+1)*l.RowBytes]
		scales(row, ls[r*ng:(r+1)*ng], dw[r*nsb:(r+1)*nsb], mins[r*ng:(r+1)*ng], dm[r*nsb:(r+1)*nsb])
	}
	pls, pmins := carve[uint32](&c, 32*ng), carve[uint32](&c, 32*ng)
	pack32Words(pls, unsafe.Slice((*uint32)(unsafe.Pointer(&ls[0])), rows*ng), ng, rows)
	pack32Words(pmins, unsafe.Slice((*uint32)(unsafe.Pointer(&mins[0])), rows*ng), ng, rows)
	pdw, pdm := carve[float32](&c, 32*nsb), carve[float32](&c, 32*nsb)
	pack32(pdw, dw, nsb, rows)
	pack32(pdm, dm, nsb, rows)
	xsOff := a.xs32Off
	if f.Group == 16 {
		xsOff = a.xs16Off
	}
	nGemm := l.ggmlGemmRows(a)
	po := panelOut{out, carve[float32](&c, 2*panelRows), l.Out, r0, rows}
	for t0 := 0; t0 < a.n; {
		i, m := variant, min(2, nGemm-t0)
		if t0 >= nGemm {
			i, m = variant+1, min(2, a.n-t0)
		}
		kerns := kern.kRepacked[i]
		if len(kerns) == 0 {
			kerns = generic.kRepacked[i]
		}
		c, ldc := po.at(t0)
		kerns[m-1](&a.buf[t0*a.rec], a.rec, &panelQ[0], (*int32)(unsafe.Pointer(&pls[0])), (*int32)(unsafe.Pointer(&pmins[0])),
			&pdw[0], &pdm[0], nb, c, ldc, a.dOff, xsOff)
		po.flush(t0, m)
		t0 += m
	}
}
