package nn

import (
	"encoding/binary"
	"unsafe"

	"ppl.dev/gguf"
	"ppl.dev/quant"
)

// The other i-quants' products in llama.cpp's order: IQ2_XS, IQ2_S,
// IQ3_XXS, IQ1_S and IQ4_XS weights (none repacked on x86) times Q8_K
// activations, by the two kernels of ggml_iquants.go's section comment
// (ggmlIQPanel): for n >= ggmlTiledRows activation rows the tiled kernel
// (panelTiled: S = Σ ls·Σ v·qx exact per block of 256, then acc =
// fma(float32(S)·d0, dx, acc)), for fewer the type's vec_dot kernel (the
// AVX2 code, which the AVX-512 build runs too): 8 int32 lanes per block,
// lane j = Σ over the 32-weight chunks c of ls·Σ_{e<4} v[32c+4j+e]·
// qx[32c+4j+e] (exact; 4 weights never straddle a group of 16), then lane
// j = fma(dd, float32(lane j), lane j) with dd = float32(d·dx) in block
// order, and the type's output from hsum8 of the lanes. v is DecodeInt8's
// q - 128 (the signed grid value, the IQ4_NL table value, or 8·grid + δ
// for IQ1_S), d the block's f16 scale.

var iqKindIQ2XS = &iqKind{
	bytes:      74,
	group:      16,
	scales:     iq2Scales16(66),
	vecOut:     func(s1, _ float32) float32 { return 0.125 * s1 },
	tiledScale: 0.125,
}

var iqKindIQ2S = &iqKind{
	bytes:      82,
	group:      16,
	scales:     iq2Scales16(74),
	vecOut:     func(s1, _ float32) float32 { return 0.125 * s1 },
	tiledScale: 0.125,
}

// iq2Scales16 is the scales of IQ2_XS and IQ2_S, whose 8 scale bytes start
// at off: ls = 2·s+1 for each 16 weights, s the low nibble of byte c/2 for
// an even group c, the high nibble for an odd one.
func iq2Scales16(off int) func(blk []byte, ls []int32) float32 {
	return func(blk []byte, ls []int32) float32 {
		for ib, s := range blk[off : off+8] {
			ls[2*ib] = 2*int32(s&15) + 1
			ls[2*ib+1] = 2*int32(s>>4) + 1
		}
		return quant.F16ToF32(binary.LittleEndian.Uint16(blk))
	}
}

var iqKindIQ3XXS = &iqKind{
	bytes: 98,
	group: 32,
	scales: func(blk []byte, ls []int32) float32 {
		for ib := range 8 {
			ls[ib] = int32(2*(binary.LittleEndian.Uint32(blk[66+4*ib:])>>28) + 1)
		}
		return quant.F16ToF32(binary.LittleEndian.Uint16(blk))
	},
	vecOut:     func(s1, _ float32) float32 { return 0.25 * s1 },
	tiledScale: 0.25,
}

var iqKindIQ1S = &iqKind{
	bytes: 50,
	group: 32,
	scales: func(blk []byte, ls []int32) float32 {
		for ib := range 8 {
			ls[ib] = int32(2*(binary.LittleEndian.Uint16(blk[34+2*ib:])>>12&7) + 1)
		}
		return quant.F16ToF32(binary.LittleEndian.Uint16(blk))
	},
	delta:       true,
	deltaScalar: true,
	// hsum8 + float32(0.125·acc): two roundings (the conversion keeps Go
	// from fusing them).
	vecOut:     func(s1, s2 float32) float32 { return s1 + float32(0.125*s2) },
	tiledScale: 0.125,
}

var iqKindIQ4XS = &iqKind{
	bytes: 136,
	group: 32,
	scales: func(blk []byte, ls []int32) float32 {
		sh := binary.LittleEndian.Uint16(blk[2:])
		for ib := range 8 {
			lo := int32(blk[4+ib/2] >> (4 * (ib % 2)) & 15)
			hi := int32(sh >> (2 * ib) & 3)
			ls[ib] = (lo | hi<<4) - 32
		}
		return quant.F16ToF32(binary.LittleEndian.Uint16(blk))
	},
	vecOut:     func(s1, _ float32) float32 { return s1 },
	tiledScale: 1,
}

// panelIQ2XS is panelInt8 for IQ2_XS weights in llama.cpp's order (see the
// section comment): v = ±grid (8, 25 or 43), ls = 2·s+1 with s the 4-bit
// scale of each 16 weights (scales[8] at byte 66, low nibble first), d the
// block's f16. vec_dot (n < 8, ggml_vec_dot_iq2_xs_q8_K): dd =
// float32(d·dx), the output float32(0.125·hsum8). Tiled (n >= 8): d0 =
// float32(d·0.125), the output acc.
func (l *Linear) panelIQ2XS(buf []float32, r0, r1 int, a *qacts, out []float32) {
	l.ggmlIQPanel(buf, r0, r1, a, out, iqKindIQ2XS)
}

// panelIQ2S is panelInt8 for IQ2_S weights in llama.cpp's order (see the
// section comment): as IQ2_XS (ls = 2·s+1 per 16 weights, scales[8] at
// byte 74; vec_dot: dd = float32(d·dx), the output float32(0.125·hsum8);
// tiled: d0 = float32(d·0.125), the output acc), with its own grid and
// sign bytes.
func (l *Linear) panelIQ2S(buf []float32, r0, r1 int, a *qacts, out []float32) {
	l.ggmlIQPanel(buf, r0, r1, a, out, iqKindIQ2S)
}

// panelIQ3XXS is panelInt8 for IQ3_XXS weights in llama.cpp's order (see
// the section comment): v = ±grid (4, 12, ..., 62), ls = 2·s+1 with s the
// top 4 bits of each 32 weights' uint32 (from byte 66), d the block's f16.
// vec_dot (n < 8, ggml_vec_dot_iq3_xxs_q8_K): dd = float32(d·dx), the
// output float32(0.25·hsum8). Tiled (n >= 8): d0 = float32(d·0.25), the
// output acc.
func (l *Linear) panelIQ3XXS(buf []float32, r0, r1 int, a *qacts, out []float32) {
	l.ggmlIQPanel(buf, r0, r1, a, out, iqKindIQ3XXS)
}

// panelIQ1S is panelInt8 for IQ1_S weights in llama.cpp's order (see the
// section comment): ls = 2·s+1 with s bits 12-14 of each 32 weights'
// uint16 qh, δ = -1 where its bit 15 is set and +1 otherwise, d the
// block's f16. vec_dot (n < 8, ggml_vec_dot_iq1_s_q8_K): 8 lanes over v =
// grid (-1, 0 or 1) with dd = float32(dx·d), and beside them one exact
// integer per block, Σ_c ls_c·δ_c·Σ_{e in c} qx_e (from the activations'
// sums of 16), accumulated as acc = fma(dd, float32(Σ), acc) in block
// order from 0; the output is hsum8 + float32(0.125·acc), each rounded.
// Tiled (n >= 8): one integer sum over v = 8·grid + δ, d0 =
// float32(d·0.125), the output acc.
func (l *Linear) panelIQ1S(buf []float32, r0, r1 int, a *qacts, out []float32) {
	l.ggmlIQPanel(buf, r0, r1, a, out, iqKindIQ1S)
}

// panelIQ4XS is panelInt8 for IQ4_XS weights in llama.cpp's order (see the
// section comment): v = kvalues_iq4nl[nibble] (-127 ... 113), ls = the
// signed 6-bit scale of each 32 weights (low 4 bits from scales_l, high 2
// from scales_h) - 32, d the block's f16. vec_dot (n < 8,
// ggml_vec_dot_iq4_xs_q8_K): dd = float32(d·dx), the output hsum8 itself.
// Tiled (n >= 8): d0 = d, the output acc.
func (l *Linear) panelIQ4XS(buf []float32, r0, r1 int, a *qacts, out []float32) {
	l.ggmlIQPanel(buf, r0, r1, a, out, iqKindIQ4XS)
}

// panelTernary is panelInt8 for TQ1_0 and TQ2_0 weights in llama.cpp's
// order (ggml_vec_dot_tq1_0_q8_K and _tq2_0_q8_K, the AVX2 code in both
// builds; neither type is repacked nor tiled): per output eight float32
// lanes from 0; per block of 256, with t_e = v_e + 1 in {0, 1, 2} (v the
// ternary weight), lane m (the elements e with (e mod 32)/4 = m: both
// kernels multiply byte j of a register with the activation at j plus a
// multiple of 32, TQ1_0's powers of 3 included) holds the exact integer
// Σ t_e·qx_e minus the activations' Σqx over the block's m-th 32 values
// (its bsums, subtracted in the int16 lanes), and becomes
// fma(float32(lane), dd, lane) with dd = float32(dx·d) (the kernel's
// multiply and add, which GCC contracts into one FMA); at the end hsum8.
func (l *Linear) panelTernary(buf []float32, r0, r1 int, a *qacts, out []float32) {
	f, _ := l.int8Able()
	k, rows, nsb := l.In, r1-r0, l.In/256
	block, dOff := 66, 64 // a block's bytes, and its d's offset
	if l.Type == gguf.TypeTQ1_0 {
		block, dOff = 54, 52
	}
	// DecodeInt8's codes are t (its offset is 1); rm, unused by types
	// without minima, holds the rows' d.
	rowsQ, panelQ, _, dw, ps, _ := l.decodeInt8(buf, r0, r1, f)
	for r := range rows {
		row := l.Data[(r0+r)*l.RowBytes : (r0+r+1)*l.RowBytes]
		for b := range nsb {
			dw[r*nsb+b] = quant.F16ToF32(binary.LittleEndian.Uint16(row[block*b+dOff:]))
		}
	}
	if kt := kern.ternary; kt != nil {
		pack32Words(panelQ, unsafe.Slice((*uint32)(unsafe.Pointer(&rowsQ[0])), rows*k/4), k/4, rows)
		pack32(ps, dw[:rows*nsb], nsb, rows)
		var c [32]float32
		for t := 0; t < a.n; t++ {
			kt(&a.buf[t*a.rec], &panelQ[0], &ps[0], nsb, 0, &c[0], a.dOff, a.xs32Off)
			copy(out[t*l.Out+r0:t*l.Out+r1], c[:rows])
		}
		return
	}
	l.recordPanel(r0, r1, a, out, 32, func(_ int, qx []int8, xs32 []int32, d []float32, r int) float32 {
		var acc [8]float32
		for b := range nsb {
			dd := d[8*b] * dw[r*nsb+b]
			lanes := laneSums256(rowsQ[r*k+256*b:r*k+256*b+256], qx[256*b:256*b+256])
			for m := range 8 {
				acc[m] = fma32(float32(lanes[m]-xs32[8*b+m]), dd, acc[m])
			}
		}
		return hsum8(&acc)
	})
}
