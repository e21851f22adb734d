package nn

import (
	"math"
	"unsafe"

	"ppl.dev/quant"
)

// The int8 mode: matrix products with quantized weights multiply the
// weights' integers (quant.DecodeInt8: q - Offset with a scale S and
// minimum M per group of 16 or 32 weights) with activations quantized to 8
// bits as llama.cpp quantizes them on the CPU: integer dot products per
// group, exact, combined in float32.
//
// Activations are quantized per row, in the blocks llama.cpp uses for the
// weight type (its vec_dot_type, quant.Int8Format.ActBlock), all float32:
//
//	Q8_0 (32 values; for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4,
//	     NVFP4 weights):
//	     amax = max |x|, d = f16(amax/127) (amax/127 itself if that
//	     overflows f16), qx = rne(x·(127/amax))
//	Q8_K (256 values; for the K-quants, the other i-quants, TQ1_0 and
//	     TQ2_0): xm = the x of largest magnitude (the first one),
//	     iscale = -127/xm, qx = min(127, rne(iscale·x)), d = 1/iscale for
//	     each block of 32
//
// where rne rounds to nearest even and qx is clamped to [-127, 127] (a NaN
// product, from an infinite x, becomes -127). A block whose amax is below
// actTiny gets d = 0 and qx = 0; a block with a NaN gets d = NaN (so the
// NaN reaches the output) and qx = 0. A row's record, rec bytes, holds:
//
//	[0, K)                 qx, int8
//	dOff + 4b              d of block b of 32, float32
//	xs16Off + 4j, xs32Off  Σ qx over group j of 16 or 32 values, int32
//	ds16Off + 4j, ds32Off  d·Σqx (float32 product) per group
//
// A weight row r and activation row t give, over the groups j in order,
//
//	f = fma(float32(T_j), S_rj·d_t, f)        T_j = Σ q·qx - Offset·Σqx (exact)
//	f = fma(M_rj, (d·Σqx)_tj, f)              for types with a minimum
//
// starting from f = 0: the same bits at every level (int8Generic is the
// reference; the vector kernels hold the 32 rows of a panel in two
// registers and VPDPBUSD multiplies four bytes at a time). That is
// ggml-cpu's order for the types it repacks on x86 (Q4_0, IQ4_NL, MXFP4:
// one FMA per block of 32, checked bit for bit against libggml's repacked
// GEMMs); its other kernels sum otherwise, and with Context.LlamaCPP the
// types whose order is copied take ggmlPanels instead (ggml.go).

// actTiny is the smallest block maximum quantized as it is; below it a
// block is treated as zero (127/amax would overflow).
const actTiny = float32(1e-30)

// nanBits is the one NaN a block with a NaN gets as its scale.
const nanBits = 0x7fc00000

// qacts is a window's activations quantized for the int8 kernels.
type qacts struct {
	n, k                                     int
	actBlock                                 int    // 32 (Q8_0) or 256 (Q8_K)
	rec                                      int    // bytes per row record, a multiple of 64
	buf                                      []byte // n records
	dOff, xs16Off, xs32Off, ds16Off, ds32Off int
	q16Off                                   int // qx as int16, for the kernels of kernels.int8Wide; 0 if absent
	// With sums4 (Context.LlamaCPP), xs4Off + 4i holds Σ qx over elements
	// 4i..4i+3, for the kernels that sum in ggml's lanes, and with mins
	// too, for blocks of 32, s81Off + 4b the s of ggml's Q8_1 activations
	// (for Q4_1 and Q5_1 weights, which set mins): f16(amax/127 · Σqx) of
	// block b, as a float32.
	sums4, mins    bool
	xs4Off, s81Off int
	// avx2 is Context.GGMLAVX2: the panels copy the AVX2 build's choice of
	// kernels (it does not repack Q2_K).
	avx2 bool
}

// layout sets the record layout for rows of k values (k a multiple of 32).
func (a *qacts) layout(n, k, actBlock int) {
	nb := k / 32
	a.n, a.k, a.actBlock = n, k, actBlock
	a.dOff = k
	a.xs16Off = a.dOff + 4*nb
	a.xs32Off = a.xs16Off + 8*nb
	a.ds16Off = a.xs32Off + 4*nb
	a.ds32Off = a.ds16Off + 8*nb
	end := a.ds32Off + 4*nb
	a.q16Off = 0
	if kern.int8Wide {
		a.q16Off = (end + 63) &^ 63
		end = a.q16Off + 2*k
	}
	a.xs4Off, a.s81Off = 0, 0
	if a.sums4 {
		a.xs4Off = (end + 63) &^ 63
		end = a.xs4Off + k
		if a.mins {
			a.s81Off = end
			end += 4 * nb
		}
	}
	a.rec = (end + 63) &^ 63
}

// quantizeActs quantizes x (n, k) into a in blocks of actBlock, with a
// buffer from c.
func (c *Context) quantizeActs(a *qacts, x []float32, n, k, actBlock int) {
	a.layout(n, k, actBlock)
	f := c.Alloc((n*a.rec + 63) / 4)
	a.buf = unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), n*a.rec)
	c.Parallel(n, func(_, lo, hi int) {
		for t := lo; t < hi; t++ {
			a.quantizeRow(x[t*k:(t+1)*k], a.buf[t*a.rec:(t+1)*a.rec])
		}
	})
}

// quantizeRow quantizes one row into its record.
func (a *qacts) quantizeRow(x []float32, rec []byte) {
	nb := a.k / 32
	d := unsafe.Slice((*float32)(unsafe.Pointer(&rec[a.dOff])), nb)
	xs16 := unsafe.Slice((*int32)(unsafe.Pointer(&rec[a.xs16Off])), 2*nb)
	if a.actBlock == 256 {
		if f := kern.quantQ8K; f != nil {
			f(&x[0], nb/8, &rec[0], a.dOff, a.xs16Off)
		} else {
			quantQ8KGeneric(x, rec[:a.k], d, xs16)
		}
	} else {
		if f := kern.quantQ80; f != nil {
			f(&x[0], nb, &rec[0], a.dOff, a.xs16Off)
		} else {
			quantQ80Generic(x, rec[:a.k], d, xs16)
		}
	}
	xs32 := unsafe.Slice((*int32)(unsafe.Pointer(&rec[a.xs32Off])), nb)
	ds16 := unsafe.Slice((*float32)(unsafe.Pointer(&rec[a.ds16Off])), 2*nb)
	ds32 := unsafe.Slice((*float32)(unsafe.Pointer(&rec[a.ds32Off])), nb)
	for b := range nb {
		xs32[b] = xs16[2*b] + xs16[2*b+1]
		ds16[2*b] = d[b] * float32(xs16[2*b])
		ds16[2*b+1] = d[b] * float32(xs16[2*b+1])
		ds32[b] = d[b] * float32(xs32[b])
	}
	if a.q16Off != 0 {
		q16 := unsafe.Slice((*int16)(unsafe.Pointer(&rec[a.q16Off])), a.k)
		for i, v := range rec[:a.k] {
			q16[i] = int16(int8(v))
		}
	}
	if a.sums4 {
		xs4 := unsafe.Slice((*int32)(unsafe.Pointer(&rec[a.xs4Off])), a.k/4)
		for i := range xs4 {
			q := rec[4*i : 4*i+4]
			xs4[i] = int32(int8(q[0])) + int32(int8(q[1])) + int32(int8(q[2])) + int32(int8(q[3]))
		}
		if a.mins && a.actBlock == 32 {
			s81 := unsafe.Slice((*float32)(unsafe.Pointer(&rec[a.s81Off])), nb)
			for b := range nb {
				var amax float32
				for _, v := range x[32*b : 32*b+32] {
					amax = max(amax, math.Float32frombits(math.Float32bits(v)&^(1<<31)))
				}
				s81[b] = quant.F16ToF32(quant.F32ToF16(amax / 127 * float32(xs32[b])))
			}
		}
	}
}

// quantQ80Generic quantizes x (a multiple of 32 values) in Q8_0 blocks:
// q, d per block, Σq per 16.
func quantQ80Generic(x []float32, q []byte, d []float32, xs16 []int32) {
	for b := range len(x) / 32 {
		xb, qb := x[32*b:32*b+32], q[32*b:32*b+32]
		var amax float32
		nan := false
		for _, v := range xb {
			amax = max(amax, float32(math.Abs(float64(v))))
			nan = nan || v != v
		}
		var id float32
		switch {
		case nan:
			d[b] = math.Float32frombits(nanBits)
		case amax < actTiny:
			d[b] = 0
		default:
			df := amax / 127
			d[b] = quant.F16ToF32(quant.F32ToF16(df))
			if math.IsInf(float64(d[b]), 0) {
				d[b] = df
			}
			id = 127 / amax
		}
		var s [2]int32
		for i, v := range xb {
			qi := int32(0)
			if !nan {
				qi = rne32(v * id)
			}
			qb[i] = byte(int8(qi))
			s[i/16] += qi
		}
		xs16[2*b], xs16[2*b+1] = s[0], s[1]
	}
}

// quantQ8KGeneric quantizes x (a multiple of 256 values) in Q8_K blocks:
// q, d per block of 32 (the same for the 8 of a super-block), Σq per 16.
func quantQ8KGeneric(x []float32, q []byte, d []float32, xs16 []int32) {
	for sb := range len(x) / 256 {
		xb, qb := x[256*sb:256*sb+256], q[256*sb:256*sb+256]
		var amax, xm float32
		nan := false
		for _, v := range xb {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, xm = a, v
			}
			nan = nan || v != v
		}
		var iscale, db float32
		switch {
		case nan:
			db = math.Float32frombits(nanBits)
		case amax < actTiny:
		default:
			iscale = -127 / xm
			db = 1 / iscale
		}
		for b := range 8 {
			d[8*sb+b] = db
		}
		for j := range 16 {
			var s int32
			for i := 16 * j; i < 16*j+16; i++ {
				qi := int32(0)
				if !nan {
					qi = rne32(iscale * xb[i])
				}
				qb[i] = byte(int8(qi))
				s += qi
			}
			xs16[16*sb+j] = s
		}
	}
}

// rne32 rounds v to the nearest integer, ties to even, clamped to
// [-127, 127], NaN to -127: VCVTPS2DQ then VPMAXSD and VPMINSD.
func rne32(v float32) int32 {
	if v != v || v < -2147483648 || v >= 2147483648 {
		return -127 // the "integer indefinite", clamped
	}
	q := int32(math.RoundToEven(float64(v)))
	return min(127, max(-127, q))
}

// int8Panel is a panel of 32 weight rows decoded for the int8 kernels:
// the integers transposed four at a time, q[(b·8 + s)·32 + r] = bytes
// 4s..4s+3 of block b of row r, and per group j, s[j·32 + r], m[j·32 + r].
type int8Panel struct {
	q    []uint32
	s, m []float32
}

// int8Func computes an m-row tile of 32 columns (one panel) from a record
// pointer x (row t at x + t·ldx) over nb blocks of 32 values.
type int8Func func(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int)

// int8Generic is the reference int8 tile kernel for m rows and groups of g.
func int8Generic(m, g int, hasMin bool, x *byte, ldx int, w *uint32, sp *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int) {
	X := unsafe.Slice(x, (m-1)*ldx+max(dsoff, xsoff)+4*(32/g)*nb)
	W := unsafe.Slice(w, nb*8*32)
	ng := nb * 32 / g
	S := unsafe.Slice(sp, ng*32)
	var M []float32
	if hasMin {
		M = unsafe.Slice(mp, ng*32)
	}
	C := unsafe.Slice(c, (m-1)*ldc+32)
	for t := range m {
		rec := X[t*ldx:]
		for r := range 32 {
			var f float32
			for j := range ng {
				b := j * g / 32
				xs := *(*int32)(unsafe.Pointer(&rec[xsoff+4*j]))
				T := int32(negoff) * xs
				for i := j * g; i < (j+1)*g; i++ {
					wq := W[(i/4)*32+r] >> (8 * (i % 4)) & 0xff
					T += int32(wq) * int32(int8(rec[i]))
				}
				d := *(*float32)(unsafe.Pointer(&rec[doff+4*b]))
				f = fma32(float32(T), S[j*32+r]*d, f)
				if hasMin {
					ds := *(*float32)(unsafe.Pointer(&rec[dsoff+4*j]))
					f = fma32(M[j*32+r], ds, f)
				}
			}
			C[t*ldc+r] = f
		}
	}
}

// int8Kernels returns the tile kernels for groups of g (with minima or
// not): index m-1 computes m rows.
func (ks *kernels) int8Kernels(g int, hasMin bool) []int8Func {
	i := 0
	if g == 16 {
		i = 2
	}
	if hasMin {
		i++
	}
	return ks.int8[i]
}

func initGenericInt8() {
	for i := range 4 {
		g, hasMin := 32, i%2 == 1
		if i >= 2 {
			g = 16
		}
		for m := 1; m <= 4; m++ {
			generic.int8[i] = append(generic.int8[i], func(x *byte, ldx int, w *uint32, sp *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int) {
				int8Generic(m, g, hasMin, x, ldx, w, sp, mp, nb, negoff, c, ldc, doff, xsoff, dsoff)
			})
		}
	}
}

// int8Scratch is the float32s panelInt8 needs for rows of k inputs:
// decoded rows (32·k bytes), the panel (32·k bytes), row scales and minima
// and their panels, a C tile, the wide kernels' int16 panel (2·32·k
// bytes): at least 48·k. It holds every ggmlPanel's pieces too (carver),
// the largest the i-quants' vec_dot order with a δ part, about 40.4·k:
// the panel's codes (8·k), two int16 copies of its weights (32·k), then
// scales, a row's signed codes and lanes; the tiled order about 24.5·k
// (codes, their panel, the scales' panels and a C tile).
func int8Scratch(k int, f quant.Int8Format) int {
	return 2*(32*k/4) + 4*32*(k/f.Group) + gemmTileRows*32 + 2*(32*k/2)
}

// panelInt8 computes columns [r0, r1) of out = x·Wᵀ in the int8 mode from
// the quantized activations a; with s81 the minima's activation term is
// ggml's Q8_1 s (f16 of Σqx·amax/127) rather than d·Σqx.
func (l *Linear) panelInt8(buf []float32, r0, r1 int, a *qacts, f quant.Int8Format, s81 bool, out []float32) {
	n, k := a.n, l.In
	ng := k / f.Group
	qw := 32 * k / 4
	rowsQ, panelQ, rs, rm, ps, pm := l.decodeInt8(buf, r0, r1, f)
	ctile := buf[2*qw+128*ng : 2*qw+128*ng+gemmTileRows*32]
	wide := buf[2*qw+128*ng+gemmTileRows*32:]
	rows := r1 - r0
	// The kernels read the record from x0 on: qx (or its int16 copy for the
	// wide kernels), with the other fields at offsets from there.
	x0, negoff := 0, -f.Offset
	if kern.int8Wide {
		// Signed int16 weights, pairs transposed: the panel of the wide kernels.
		row16 := unsafe.Slice((*int16)(unsafe.Pointer(&wide[0])), 32*k)
		for i, v := range rowsQ[:rows*k] {
			row16[i] = int16(v) - int16(f.Offset)
		}
		panelQ = unsafe.Slice((*uint32)(unsafe.Pointer(&wide[32*k/2])), 32*k/2)
		pack32Words(panelQ, unsafe.Slice((*uint32)(unsafe.Pointer(&row16[0])), rows*k/2), k/2, rows)
		x0, negoff = a.q16Off, 0
	} else {
		packCodes(panelQ, unsafe.Slice((*uint32)(unsafe.Pointer(&rowsQ[0])), rows*k/4), k/4, rows, kern.flipBias)
	}
	pack32(ps, rs, ng, rows)
	var mp *float32
	if f.HasMin {
		pack32(pm, rm, ng, rows)
		mp = &pm[0]
	}
	xsOff, dsOff := a.xs32Off, a.ds32Off
	if f.Group == 16 {
		xsOff, dsOff = a.xs16Off, a.ds16Off
	}
	if s81 {
		dsOff = a.s81Off
	}
	kerns := kern.int8Kernels(f.Group, f.HasMin)
	tile := len(kerns)
	po := panelOut{out, ctile, l.Out, r0, rows}
	for t0 := 0; t0 < n; t0 += tile {
		m := min(tile, n-t0)
		c, ldc := po.at(t0)
		kerns[m-1](&a.buf[t0*a.rec+x0], a.rec, &panelQ[0], &ps[0], mp, k/32, negoff, c, ldc, a.dOff-x0, xsOff-x0, dsOff-x0)
		po.flush(t0, m)
	}
}

// panelOut is where a panel's kernels write m rows of its panelRows
// outputs: straight into out (ldc its width) when the panel is whole,
// else into tile (m·panelRows floats), which flush copies into out's
// columns [r0, r0+rows).
type panelOut struct {
	out, tile       []float32
	width, r0, rows int
}

// at is the kernel's C and ldc for the rows from t0 on.
func (p panelOut) at(t0 int) (*float32, int) {
	if p.rows < panelRows {
		return &p.tile[0], panelRows
	}
	return &p.out[t0*p.width+p.r0], p.width
}

// flush copies m rows from the tile into out, where they went there.
func (p panelOut) flush(t0, m int) {
	if p.rows == panelRows {
		return
	}
	for t := range m {
		o := (t0+t)*p.width + p.r0
		copy(p.out[o:o+p.rows], p.tile[t*panelRows:t*panelRows+p.rows])
	}
}

// decodeInt8 decodes rows [r0, r1) of l into buf (int8Scratch floats):
// the integers row after row (rowsQ) and in a panel for the VNNI kernels,
// the group scales and minima row after row (rs, rm) and in panels (ps, pm).
func (l *Linear) decodeInt8(buf []float32, r0, r1 int, f quant.Int8Format) (rowsQ []byte, panelQ []uint32, rs, rm, ps, pm []float32) {
	k := l.In
	ng := k / f.Group
	qw := 32 * k / 4
	rowsQ = unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), 32*k)
	panelQ = unsafe.Slice((*uint32)(unsafe.Pointer(&buf[qw])), qw)
	rs, rm = buf[2*qw:2*qw+32*ng], buf[2*qw+32*ng:2*qw+64*ng]
	ps, pm = buf[2*qw+64*ng:2*qw+96*ng], buf[2*qw+96*ng:2*qw+128*ng]
	for r := range r1 - r0 {
		var mr []float32
		if f.HasMin {
			mr = rm[r*ng : (r+1)*ng]
		}
		quant.DecodeInt8(l.Type, l.Data[(r0+r)*l.RowBytes:(r0+r+1)*l.RowBytes], rowsQ[r*k:(r+1)*k], rs[r*ng:(r+1)*ng], mr)
	}
	return
}

// decodeCodes decodes the codes of rows [r0, r1) of l (quant.DecodeCodes:
// no float scales) row after row into a piece of c, in one call: the rows
// are whole blocks one after another.
func (l *Linear) decodeCodes(c *carver, r0, r1 int) []byte {
	q := carve[byte](c, (r1-r0)*l.In)
	quant.DecodeCodes(l.Type, l.Data[r0*l.RowBytes:r1*l.RowBytes], q)
	return q
}

// carver hands out consecutive pieces of a panel's scratch (a worker's
// floats, int8Scratch of them), so that a panel allocates
// nothing per call; a piece holds whatever the worker's last panel left
// there.
type carver []float32

// carve takes n elements of type T from c, from a float's boundary on.
func carve[T int8 | uint8 | int16 | int32 | uint32 | float32 | [8]int32](c *carver, n int) []T {
	var z T
	w := (n*int(unsafe.Sizeof(z)) + 3) / 4
	p := (*c)[:w:w]
	*c = (*c)[w:]
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(p))), n)
}

// int8Able reports whether l runs in the int8 mode: a type with an integer
// decoding and rows of whole activation blocks.
func (l *Linear) int8Able() (quant.Int8Format, bool) {
	f, ok := quant.Int8FormatOf(l.Type)
	return f, ok && l.In%f.ActBlock == 0
}

// QuantizeActs quantizes the row x (a multiple of block values, block 32
// for Q8_0 or 256 for Q8_K) as the int8 mode does (quantQ80Generic,
// quantQ8KGeneric): the codes q, the scale d of each 32 values and the sum
// of the codes of each 16, xs16. It is the reference of the GPU's
// quant_acts kernel.
func QuantizeActs(x []float32, block int, q []int8, d []float32, xs16 []int32) {
	qb := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(q))), len(q))
	if block == 256 {
		quantQ8KGeneric(x, qb, d, xs16)
	} else {
		quantQ80Generic(x, qb, d, xs16)
	}
}

// Int8Output is one output of a product in the int8 mode, int8Generic's
// arithmetic for one weight row (integers qw, the weight's code minus its
// offset, group scales s and minima m, nil without) and one activation row
// (codes qx, scales d per 32): over the groups j of g values in order,
// from f = 0,
//
//	f = fma(float32(T_j), s[j]·d[b], f)          T_j = Σ qw·qx over group j
//	f = fma(m[j], d[b]·float32(Σ qx over j), f)  with minima
//
// b being the block of 32 that holds group j. It is the reference of the
// GPU's i8mm kernels.
func Int8Output(qw, qx []int8, s, m, d []float32, g int) float32 {
	var f float32
	for j := range len(qw) / g {
		var t, xs int32
		for i := j * g; i < (j+1)*g; i++ {
			t += int32(qw[i]) * int32(qx[i])
			xs += int32(qx[i])
		}
		db := d[j*g/32]
		f = fma32(float32(t), s[j]*db, f)
		if m != nil {
			f = fma32(m[j], db*float32(xs), f)
		}
	}
	return f
}
