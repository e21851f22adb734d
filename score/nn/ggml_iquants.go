package nn

import (
	"encoding/binary"
	"unsafe"

	"ppl.dev/quant"
)

// The i-quants' products in llama.cpp's order: IQ2_XXS, IQ3_S and IQ1_M
// weights (not repacked) times Q8_K activations, and through the same
// iqKind machinery IQ2_XS, IQ2_S, IQ3_XXS, IQ1_S and IQ4_XS
// (ggml_iquants2.go). libggml's MUL_MAT takes
// one of two kernels for them, by the number of activation rows n:
//
// n < 8: ggml_vec_dot_iq2_xxs_q8_K, ggml_vec_dot_iq3_s_q8_K and
// ggml_vec_dot_iq1_m_q8_K (the AVX2 code, which the AVX-512 build runs
// too), one call per output, all three in the same float32 shape:
//
//   - per block of 256 weights, 8 int32 lanes: lane j holds the exact sum,
//     over the eight 32-weight chunks c, of ls(c)·Σ_{e<4} v[32c+4j+e]·
//     qx[32c+4j+e], with v the signed integer weight (grid value times sign)
//     and ls the odd sub-block scale of that chunk (for IQ1_M, IQ2_XS and
//     IQ2_S of its 16-weight half, which 4 weights never straddle);
//   - the block's scale dd = float32(dw·dx), dw the weight block's f16
//     scale as float32, dx the activation block's float32 scale;
//   - 8 float32 lanes, lane j = fma(dd, float32(int lane j), lane j), one
//     correctly rounded FMA per block, in block order (ggmlIQLanes);
//   - at the end the lanes summed as hsum_float_8 (hsum8); what each type
//     does with that sum is in its doc comment.
//
// n >= 8: ggml_compute_forward_mul_mat_tiled (ggml-cpu/tiled: the AVX-512
// VNNI microkernel, and the AVX2 build's, whose float order is the same),
// which sums each block of 256 into one integer and rounds per block, not
// per lane (panelTiled, ggml_tiled.go):
//
//   - s = Σ over the sub-blocks of ls·Σ v·qx (exact; VNNI sums (v+128)·qx
//     and takes 128·Σqx off);
//   - acc = fma(float32(float32(s)·d0), dx, acc) per block in block order,
//     from acc = 0: the product with the weight scale d0 rounded, then one
//     FMA with the activation scale; acc is the output.
//
// The integer sums are exact in both, so only these float orders matter.

// ggmlIQLanes adds one block's integer lanes s to the 8 float32 lanes as
// the vec_dot kernels do: lane j = fma(dd, float32(s[j]), lane j).
func ggmlIQLanes(lanes *[8]float32, dd float32, s *[8]int32) {
	for j := range 8 {
		lanes[j] = fma32(dd, float32(s[j]), lanes[j])
	}
}

// iqKind is what the three i-quant panels do differently.
type iqKind struct {
	bytes int // per block of 256
	group int // weights per integer scale ls: 32, or 16
	// scales writes the integer scale ls of each group of the block blk
	// and returns its f16 scale as float32.
	scales func(blk []byte, ls []int32) (d float32)
	// delta (IQ1_M, IQ1_S: v = 8·grid + δ): the vec_dot kernel sums grid
	// and δ apart. IQ1_M in a second set of 8 lanes, IQ1_S (deltaScalar)
	// in one integer per block, accumulated in one float32 as
	// acc = fma(dd, float32(Σ), acc) in block order.
	delta, deltaScalar bool
	// vecOut is the vec_dot kernel's output from the hsum8 of the lanes
	// of w1 and from the δ part (IQ1_M: the hsum8 of its lanes; IQ1_S: its
	// acc; 0 without).
	vecOut func(s1, s2 float32) float32
	// tiledScale is the factor the tiled kernel folds into d0 = d·scale
	// (a float32 product).
	tiledScale float32
}

// decode fills one block's w1 = ls·v, and with delta (v = 8·grid + δ)
// w1 = ls·grid and w2 = ls·δ, from its bytes blk and integer weights v
// (DecodeInt8's q - 128), and returns its d.
func (kind *iqKind) decode(blk []byte, v []int8, w1, w2 []int16) float32 {
	var ls [16]int32
	d := kind.scales(blk, ls[:256/kind.group])
	g := kind.group
	for e, x := range v[:256] {
		l := int16(ls[e/g])
		if !kind.delta {
			w1[e] = l * int16(x)
			continue
		}
		gr := (int16(x) + 4) >> 3 // grid = ⌊(v+4)/8⌋
		w1[e] = l * gr
		w2[e] = l * (int16(x) - 8*gr)
	}
	return d
}

// tiledScales is panelTiled's scales for kind: ls per group, d0 =
// float32(d·tiledScale) per block of 256.
func (kind *iqKind) tiledScales(row []byte, ls []int32, d0 []float32, _ []int32, _ []float32) {
	per := len(ls) / len(d0)
	for b := range d0 {
		d0[b] = kind.scales(row[kind.bytes*b:kind.bytes*(b+1)], ls[per*b:per*(b+1)]) * kind.tiledScale
	}
}

// ggmlIQPanel is the panel of the three i-quant types (see the section
// comment): the tiled kernel's order (panelTiled) from ggmlTiledRows
// activation rows on, the vec_dot kernel's below.
func (l *Linear) ggmlIQPanel(buf []float32, r0, r1 int, a *qacts, out []float32, kind *iqKind) {
	if a.n >= ggmlTiledRows {
		l.panelTiled(buf, r0, r1, a, out, kind.tiledScales)
		return
	}
	k := l.In
	nb := k / 256
	rows := r1 - r0
	c := carver(buf)
	q := l.decodeCodes(&c, r0, r1)
	v := carve[int8](&c, k)
	d := carve[float32](&c, rows*nb)
	w1 := carve[int16](&c, rows*k)
	var w2 []int16
	if kind.delta {
		w2 = carve[int16](&c, rows*k)
	}
	s1, s2 := carve[[8]int32](&c, nb), carve[[8]int32](&c, nb)
	for r := range rows {
		row := l.Data[(r0+r)*l.RowBytes : (r0+r+1)*l.RowBytes]
		for i, b := range q[r*k : (r+1)*k] {
			v[i] = int8(int(b) - 128)
		}
		for b := range nb {
			o := r*k + 256*b
			var w2b []int16
			if kind.delta {
				w2b = w2[o : o+256]
			}
			d[r*nb+b] = kind.decode(row[kind.bytes*b:kind.bytes*(b+1)], v[256*b:256*b+256], w1[o:o+256], w2b)
		}
	}
	for t := 0; t < a.n; t++ {
		rec := a.buf[t*a.rec : (t+1)*a.rec]
		qx := unsafe.Slice((*int8)(unsafe.Pointer(&rec[0])), k)
		dx := unsafe.Slice((*float32)(unsafe.Pointer(&rec[a.dOff])), k/32)
		o := out[t*l.Out+r0 : t*l.Out+r1]
		for r := range rows {
			laneSums(s1, w1[r*k:(r+1)*k], qx)
			if kind.delta {
				laneSums(s2, w2[r*k:(r+1)*k], qx)
			}
			var l1, l2 [8]float32
			var acc float32
			for b := range nb {
				dd := d[r*nb+b] * dx[8*b]
				ggmlIQLanes(&l1, dd, &s1[b])
				if !kind.delta {
					continue
				}
				if !kind.deltaScalar {
					ggmlIQLanes(&l2, dd, &s2[b])
					continue
				}
				var t int32
				for _, u := range s2[b] {
					t += u
				}
				acc = fma32(dd, float32(t), acc)
			}
			if kind.deltaScalar {
				o[r] = kind.vecOut(hsum8(&l1), acc)
			} else {
				o[r] = kind.vecOut(hsum8(&l1), hsum8(&l2))
			}
		}
	}
}

var iqKindIQ2XXS = &iqKind{
	bytes: 66,
	group: 32,
	scales: func(blk []byte, ls []int32) float32 {
		for ib := range 8 {
			ls[ib] = int32(2*(binary.LittleEndian.Uint32(blk[2+8*ib+4:])>>28) + 1)
		}
		return quant.F16ToF32(binary.LittleEndian.Uint16(blk))
	},
	vecOut:     func(s1, _ float32) float32 { return 0.125 * s1 },
	tiledScale: 0.125,
}

var iqKindIQ3S = &iqKind{
	bytes: 110,
	group: 32,
	scales: func(blk []byte, ls []int32) float32 {
		for ib := range 8 {
			ls[ib] = int32(2*(blk[106+ib/2]>>(4*(ib%2))&15) + 1)
		}
		return quant.F16ToF32(binary.LittleEndian.Uint16(blk))
	},
	vecOut:     func(s1, _ float32) float32 { return s1 },
	tiledScale: 1,
}

var iqKindIQ1M = &iqKind{
	bytes: 56,
	group: 16,
	scales: func(blk []byte, ls []int32) float32 {
		var sc [4]uint16
		for i := range sc {
			sc[i] = binary.LittleEndian.Uint16(blk[48+2*i:])
		}
		for ib := range 8 {
			for h := range 2 {
				ls[2*ib+h] = int32(2*(sc[ib/2]>>(6*(ib%2)+3*h)&7) + 1)
			}
		}
		return quant.F16ToF32(sc[0]>>12 | sc[1]>>8&0xf0 | sc[2]>>4&0xf00 | sc[3]&0xf000)
	},
	delta:      true,
	vecOut:     func(s1, s2 float32) float32 { return fma32(s2, 0.125, s1) },
	tiledScale: 0.125,
}

// panelIQ2XXS is panelInt8 for IQ2_XXS weights in llama.cpp's order (see
// the section comment for both kernels). v = ±grid (8, 25 or 43), ls =
// 2·s+1 with s the top 4 bits of each 32 weights' uint32, d the block's
// f16. vec_dot (n < 8): dd = float32(d·dx), the output float32(0.125 ·
// hsum8). Tiled (n >= 8): d0 = float32(d·0.125), the output acc.
func (l *Linear) panelIQ2XXS(buf []float32, r0, r1 int, a *qacts, out []float32) {
	l.ggmlIQPanel(buf, r0, r1, a, out, iqKindIQ2XXS)
}

// panelIQ3S is panelInt8 for IQ3_S weights in llama.cpp's order (see the
// section comment for both kernels). v = ±grid (1, 3, ..., 15), ls = 2·s+1
// with s the low nibble of scales[c/2] for an even 32-weight chunk c, the
// high nibble for an odd one, d the block's f16. vec_dot (n < 8): dd =
// float32(d·dx), the output hsum8 itself. Tiled (n >= 8): d0 = d, the
// output acc.
func (l *Linear) panelIQ3S(buf []float32, r0, r1 int, a *qacts, out []float32) {
	l.ggmlIQPanel(buf, r0, r1, a, out, iqKindIQ3S)
}

// panelIQ1M is panelInt8 for IQ1_M weights in llama.cpp's order (see the
// section comment for both kernels). d is the f16 assembled from the top
// nibbles of the four scale words, ls = 2·s+1 with s the 3-bit scale of
// each 16 weights. vec_dot (n < 8): two sets of 8 lanes with the same dd =
// float32(dx·d), the first over v = grid (-1, 0 or 1), the second over v =
// δ (-1 or +1, one per 8 weights); the output is fma(hsum8(second), 0.125,
// hsum8(first)), one rounding (the compiler's contraction of first +
// 0.125·second). Tiled (n >= 8): one integer sum over v = 8·grid + δ,
// d0 = float32(d·0.125), the output acc.
func (l *Linear) panelIQ1M(buf []float32, r0, r1 int, a *qacts, out []float32) {
	l.ggmlIQPanel(buf, r0, r1, a, out, iqKindIQ1M)
}
