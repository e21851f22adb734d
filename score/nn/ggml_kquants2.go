package nn

import (
	"encoding/binary"
	"unsafe"

	"ppl.dev/quant"
)

// Q2_K, Q3_K and Q5_K with Q8_K activations in llama.cpp's order (libggml
// 0.27.0, the AVX-512 zen4 build), with the notation of ggml_kquants.go:
// per super-block of 256, dx the activations' Q8_K scale, a_e their
// integers, B_j their Σa over group j (of 16 for Q2_K and Q3_K, of 32 for
// Q5_K), q_e DecodeInt8's unsigned integer of the weight, sc_j and m_j the
// integer scale and minimum of group j, w_e = sc_e·q_e, dw and dmin the
// super-block's f16 scales as float32. All integer sums are exact; only
// the float32 operations listed round.

// vecRows is a panel of rows of a K-quant decoded for its vec_dot order
// (fewer than ggmlTiledRows activation rows; the tiled and repacked
// orders have kernels: panelTiled, panelKRepacked).
type vecRows struct {
	k, g, nsb, ng int        // inputs, group size, super-blocks, groups per row
	w             []int16    // w_e = sc_e·(q_e − off) (at most 128·63 in magnitude), row after row
	ls            []int32    // sc_j, row after row
	mins          []int32    // m_j, row after row (the types with minima)
	dw, dm        []float32  // d and dmin per super-block (dm: with minima)
	lanes         [][8]int32 // rowLanes's, one row's at a time
}

// decodeVec decodes rows [r0, r1) of l into pieces of c: scales gives a
// row's integer scales (and minima, for a type with them) per group and
// the d (and dmin) of its super-blocks, the weights are sc_e·(q_e − off).
func (l *Linear) decodeVec(c *carver, r0, r1 int, scales tiledScales, off int16) *vecRows {
	f, _ := quant.Int8FormatOf(l.Type)
	k, rows := l.In, r1-r0
	p := &vecRows{k: k, g: f.Group, nsb: k / 256, ng: k / f.Group}
	q := l.decodeCodes(c, r0, r1)
	p.w, p.ls = carve[int16](c, rows*k), carve[int32](c, rows*p.ng)
	p.dw = carve[float32](c, rows*p.nsb)
	if f.HasMin {
		p.mins, p.dm = carve[int32](c, rows*p.ng), carve[float32](c, rows*p.nsb)
	}
	p.lanes = carve[[8]int32](c, p.nsb)
	for r := range rows {
		row := l.Data[(r0+r)*l.RowBytes : (r0+r+1)*l.RowBytes]
		ls := p.ls[r*p.ng : (r+1)*p.ng]
		var m []int32
		var dm []float32
		if f.HasMin {
			m, dm = p.mins[r*p.ng:(r+1)*p.ng], p.dm[r*p.nsb:(r+1)*p.nsb]
		}
		scales(row, ls, p.dw[r*p.nsb:(r+1)*p.nsb], m, dm)
		scaleCodes(p.w[r*k:(r+1)*k], q[r*k:(r+1)*k], ls, p.g, off)
	}
	return p
}

// scaleCodes writes the vec_dot orders' weights w_e = sc_j·(q_e − off)
// of a row's codes q, sc_j the integer scale of group j (of g codes).
func scaleCodes(w []int16, q []byte, sc []int32, g int, off int16) {
	for j, s := range sc[:len(q)/g] {
		wj, qj := w[g*j:g*j+g], q[g*j:g*j+g]
		for e, v := range qj {
			wj[e] = int16(s) * (int16(v) - off)
		}
	}
}

// rowLanes is laneSums of row r with the activations qx, into p.lanes.
func (p *vecRows) rowLanes(r int, qx []int8) [][8]int32 {
	laneSums(p.lanes, p.w[r*p.k:(r+1)*p.k], qx)
	return p.lanes
}

// minSum is Σ m_j·B_j over the groups [j0, j1) of row r.
func (p *vecRows) minSum(r int, xs []int32, j0, j1 int) (sm int32) {
	mr := p.mins[r*p.ng : (r+1)*p.ng]
	for j := j0; j < j1; j++ {
		sm += mr[j] * xs[j]
	}
	return sm
}

// recordPanel sets out for the weight rows [r0, r1) and each activation
// row t to value(t, qx, xs, d, r): the record's integers, its Σqx per
// group of g (16 or 32) and its scales per block of 32.
func (l *Linear) recordPanel(r0, r1 int, a *qacts, out []float32, g int, value func(t int, qx []int8, xs []int32, d []float32, r int) float32) {
	k, nb := l.In, l.In/32
	for t := 0; t < a.n; t++ {
		rec := a.buf[t*a.rec : (t+1)*a.rec]
		qx := unsafe.Slice((*int8)(unsafe.Pointer(&rec[0])), k)
		d := unsafe.Slice((*float32)(unsafe.Pointer(&rec[a.dOff])), nb)
		var xs []int32
		if g == 16 {
			xs = unsafe.Slice((*int32)(unsafe.Pointer(&rec[a.xs16Off])), 2*nb)
		} else {
			xs = unsafe.Slice((*int32)(unsafe.Pointer(&rec[a.xs32Off])), nb)
		}
		o := out[t*l.Out+r0 : t*l.Out+r1]
		for r := range o {
			o[r] = value(t, qx, xs, d, r)
		}
	}
}

// q2kScales is the row scales (tiledScales) of Q2_K: per super-block of
// 84 bytes the low and high nibbles of its 16 scale bytes, d and dmin
// after them.
func q2kScales(row []byte, ls []int32, d0 []float32, m []int32, dm []float32) {
	for b := range d0 {
		blk := row[84*b : 84*b+84]
		for j := range 16 {
			ls[16*b+j], m[16*b+j] = int32(blk[j]&15), int32(blk[j]>>4)
		}
		d0[b] = quant.F16ToF32(uint16(blk[80]) | uint16(blk[81])<<8)
		dm[b] = quant.F16ToF32(uint16(blk[82]) | uint16(blk[83])<<8)
	}
}

// k4RowScales is the row scales (tiledScales) of Q4_K (super-blocks of
// 144 bytes) and Q5_K (176): d and dmin (f16, as float32) and the eight
// 6-bit scales and minima of each, k4Scales's fields taken four bytes at
// a time.
func k4RowScales(bytes int) tiledScales {
	return func(row []byte, ls []int32, d0 []float32, m []int32, dm []float32) {
		for b := range d0 {
			blk := row[bytes*b : bytes*b+16]
			lo, hi, top := binary.LittleEndian.Uint32(blk[4:]), binary.LittleEndian.Uint32(blk[8:]), binary.LittleEndian.Uint32(blk[12:])
			sc03, m03 := lo&0x3f3f3f3f, hi&0x3f3f3f3f
			sc47 := top&0x0f0f0f0f | lo>>2&0x30303030
			m47 := top>>4&0x0f0f0f0f | hi>>2&0x30303030
			sc, mn := ls[8*b:8*b+8], m[8*b:8*b+8]
			for j := range 4 {
				sc[j], sc[j+4] = int32(uint8(sc03>>(8*j))), int32(uint8(sc47>>(8*j)))
				mn[j], mn[j+4] = int32(uint8(m03>>(8*j))), int32(uint8(m47>>(8*j)))
			}
			d0[b] = quant.F16ToF32(binary.LittleEndian.Uint16(blk))
			dm[b] = quant.F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
		}
	}
}

// panelQ2K is panelInt8 for Q2_K weights in llama.cpp's order.
//
// Out a multiple of 8, in the AVX-512 build (it repacks the matrix into
// q2_K_8x8 and multiplies 8 weight rows at a time; its AVX2 build does
// not repack Q2_K): the activation rows [0, n - n%4) of
// the call go through ggml_gemm_q2_K_8x8_q8_K (its AVX-512 part and its
// AVX2 part alike), four at a time, which per output, over the
// super-blocks in order and within each over its two halves h of 128
// (groups 8h..8h+7), does
//
//	acc  = fma(float32(Σ_{e in half h} w_e·a_e), dw·dx, acc)
//	accm = fma(float32(Σ_{j in half h} m_j·B_j), dmin·dx, accm)
//
// (dw·dx and dmin·dx rounded to float32) and returns acc - accm. The rows
// past the last multiple of 4 go through ggml_gemv_q2_K_8x8_q8_K, the same
// with one pair of FMAs per super-block (the integers summed over all 16
// groups).
//
// Otherwise (the matrix stays in the plain CPU buffer), with
// n >= 8 (the tiled path), per output over the super-blocks in order, from
// 0, as Q4_K's and Q5_K's tiled order with groups of 16:
//
//	acc = fma(fma(-dmin, float32(Σ_j m_j·B_j), float32(Σ_e w_e·a_e)·dw), dx, acc)
//
// Otherwise with n < 8 (ggml_vec_dot_q2_K_q8_K, per output):
// eight lanes, per super-block first
// acc_m = fma(-dx·dmin, float32(m_2m·B_2m + m_2m+1·B_2m+1), acc_m)
// ((-dx)·dmin rounded), then acc_m = fma(dx·dw, float32(Σ_{e in lane m}
// w_e·a_e), acc_m); the result is hsum8(acc).
func (l *Linear) panelQ2K(buf []float32, r0, r1 int, a *qacts, out []float32) {
	l.panelKMin(buf, r0, r1, a, out, &q2kFormat)
}

// panelQ3K is panelInt8 for Q3_K weights in llama.cpp's order (llama.cpp
// does not repack Q3_K on x86). With sc_j the 6-bit scale of group j (of
// 16) less 32 and q_e - 4 the signed 3-bit weight (DecodeInt8's q less its
// Offset):
//
// With n >= 8 activation rows in the call (the tiled path), per output
// over the super-blocks in order, from 0 (panelTiled with q3kScales),
//
//	acc = fma(float32(Σ_e sc_e·(q_e - 4)·a_e)·dw, dx, acc)
//
// (the product with dw rounded). Otherwise (ggml_vec_dot_q3_K_q8_K, per
// output) eight lanes add, per super-block,
//
//	acc_m = fma(dx·dw, float32(Σ_{e in lane m} sc_e·(q_e - 4)·a_e), acc_m)
//
// (dx·dw rounded to float32), and the result is hsum8(acc).
func (l *Linear) panelQ3K(buf []float32, r0, r1 int, a *qacts, out []float32) {
	if a.n >= ggmlTiledRows {
		l.panelTiled(buf, r0, r1, a, out, q3kScales)
		return
	}
	c := carver(buf)
	p := l.decodeVec(&c, r0, r1, q3kScales, 4) // w_e = sc_e·(q_e − 4)
	l.recordPanel(r0, r1, a, out, 16, func(_ int, qx []int8, _ []int32, d []float32, r int) float32 {
		ls := p.rowLanes(r, qx)
		var acc [8]float32
		for b := range p.nsb {
			sd := d[8*b] * p.dw[r*p.nsb+b]
			for m := range 8 {
				acc[m] = fma32(sd, float32(ls[b][m]), acc[m])
			}
		}
		return hsum8(&acc)
	})
}

// q3kScales is panelTiled's scales for Q3_K: the sixteen 6-bit scales of
// each super-block less 32 and its f16 d.
func q3kScales(row []byte, ls []int32, d0 []float32, _ []int32, _ []float32) {
	for b := range d0 {
		blk := row[110*b : 110*b+110]
		s := blk[96:108]
		for j := range 16 {
			lo := s[j%8] >> (4 * (j / 8)) & 15
			hi := s[8+j%4] >> (2 * (j / 4)) & 3
			ls[16*b+j] = int32(lo|hi<<4) - 32
		}
		d0[b] = quant.F16ToF32(uint16(blk[108]) | uint16(blk[109])<<8)
	}
}

// panelQ5K is panelInt8 for Q5_K weights in llama.cpp's order (llama.cpp
// does not repack Q5_K on x86); sc_j, m_j the 6-bit scale and minimum of
// group j (of 32), packed as Q4_K's.
//
// With n >= 8 activation rows in the call (the tiled path), per output
// over the super-blocks in order, from 0, as Q4_K's tiled order:
//
//	acc = fma(fma(-dmin, float32(Σ_j m_j·B_j), float32(Σ_e w_e·a_e)·dw), dx, acc)
//
// (the product with dw rounded, then VFNMADD, then VFMADD). Otherwise
// (ggml_vec_dot_q5_K_q8_K, per output): eight lanes add, per super-block,
// acc_m = fma(dx·dw, float32(Σ_{e in lane m} w_e·a_e), acc_m), and one
// scalar adds summs = fma(float32(Σ_j m_j·B_j), -dx·dmin, summs) ((-dx)·dmin
// rounded; the block's eight min products summed exactly); the result is
// hsum8(acc) + summs.
func (l *Linear) panelQ5K(buf []float32, r0, r1 int, a *qacts, out []float32) {
	l.panelKMin(buf, r0, r1, a, out, &q5kFormat)
}

// vecQ2K is ggml_vec_dot_q2_K_q8_K's output for row r (see panelQ2K).
func (p *vecRows) vecQ2K(r int, qx []int8, xs []int32, d []float32) float32 {
	mr := p.mins[r*p.ng : (r+1)*p.ng]
	ls := p.rowLanes(r, qx)
	var acc [8]float32
	for b := range p.nsb {
		dx := d[8*b]
		sd, smn := dx*p.dw[r*p.nsb+b], -dx*p.dm[r*p.nsb+b]
		for m := range 8 {
			j := 16*b + 2*m
			acc[m] = fma32(smn, float32(mr[j]*xs[j]+mr[j+1]*xs[j+1]), acc[m])
		}
		for m := range 8 {
			acc[m] = fma32(sd, float32(ls[b][m]), acc[m])
		}
	}
	return hsum8(&acc)
}

// vecQ5K is ggml_vec_dot_q5_K_q8_K's output for row r (see panelQ5K).
func (p *vecRows) vecQ5K(r int, qx []int8, xs []int32, d []float32) float32 {
	ls := p.rowLanes(r, qx)
	var acc [8]float32
	var summs float32
	for b := range p.nsb {
		dx := d[8*b]
		sd, smn := dx*p.dw[r*p.nsb+b], -dx*p.dm[r*p.nsb+b]
		summs = fma32(float32(p.minSum(r, xs, 8*b, 8*b+8)), smn, summs)
		for m := range 8 {
			acc[m] = fma32(sd, float32(ls[b][m]), acc[m])
		}
	}
	return hsum8(&acc) + summs
}
