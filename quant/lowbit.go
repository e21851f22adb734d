package quant

import (
	"encoding/binary"
	"math"
)

// The low-bit types: the i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S), the ternary TQ1_0 and TQ2_0, PrismML's Q1_0 (signs) and
// Q2_0 (2-bit codes) of its Bonsai models, and the 4-bit floats MXFP4 and
// NVFP4. Every weight of these types is a small integer v (a signed grid
// value, a ternary digit, a doubled E2M1 value) times a scale shared by 16
// or 32 weights, and that product is exact in float32. So each type has one
// decoder, to its integer form (v + Offset as a byte and a scale per group,
// as DecodeInt8 writes it), and Dequantize, DotRow and DecodeInt8 are all
// built on it: dequantizing computes S·v, which is the very float32 ggml's
// dequantize_row_* computes in its own order (the products are exact), and
// the int8 mode multiplies v with the activations as llama.cpp's integer
// dot products do.
//
// IQ1_S and IQ1_M add ±1/8 to each grid value (-1, 0 or 1); their integer
// form is v = 8·grid ± 1 with a scale of dl/8, so the shift needs no
// minimum and, in IQ1_M, may change every 8 weights.

// lowbit describes a low-bit type's integer decoding: whole blocks of bs
// weights (ts bytes) to q (v + off) and one scale per group weights.
type lowbit struct {
	bs, ts, group, off int
	dec                func(w, q []byte, s []float32) // one block
}

// format is the type's entry in formats, with its quantizer (see
// lowbit_quant.go).
func (lb *lowbit) format(quant func(src []float32, dst []byte)) format {
	return format{lb.bs, lb.ts, lb.deq, lb.dot, quant}
}

// int8 is the type's Int8Format, with activations in blocks of actBlock:
// q at most 255 with Offset 128, and at most top for the ternary digits.
func (lb *lowbit) int8(actBlock, top int) Int8Format {
	return Int8Format{lb.group, lb.off, top, false, actBlock}
}

// decode decodes whole blocks of w into q and s (len(q) weights); the
// int8Decoders entry of every low-bit type.
func (lb *lowbit) decode(w, q []byte, s, _ []float32) {
	ng := lb.bs / lb.group
	for len(q) >= lb.bs {
		lb.dec(w[:lb.ts], q[:lb.bs], s[:ng])
		w, q, s = w[lb.ts:], q[lb.bs:], s[ng:]
	}
}

// deq dequantizes whole blocks: y = S·v.
func (lb *lowbit) deq(src []byte, dst []float32) {
	var q [256]byte
	var s [16]float32
	for len(dst) >= lb.bs {
		lb.dec(src[:lb.ts], q[:lb.bs], s[:lb.bs/lb.group])
		g := lb.group
		for j := range lb.bs / g {
			sj, y := s[j], dst[j*g:(j+1)*g]
			for i, v := range q[j*g : (j+1)*g] {
				y[i] = sj * float32(int(v)-lb.off)
			}
		}
		src, dst = src[lb.ts:], dst[lb.bs:]
	}
}

// dot is the row dot product, each group's scale factored out of its sum.
func (lb *lowbit) dot(w []byte, x []float32) float32 {
	var q [256]byte
	var s [16]float32
	var sum float32
	for len(x) >= lb.bs {
		lb.dec(w[:lb.ts], q[:lb.bs], s[:lb.bs/lb.group])
		var sb float32
		for j := range lb.bs / lb.group {
			var a float32
			xs := x[j*lb.group : (j+1)*lb.group]
			for i, v := range q[j*lb.group : (j+1)*lb.group] {
				a += float32(float32(int(v)-lb.off) * xs[i])
			}
			sb += float32(s[j] * a)
		}
		sum += sb
		w, x = w[lb.ts:], x[lb.bs:]
	}
	return sum
}

// The low-bit types' decodings; Offset 128 for the signed values, 1 for
// the ternary digits (TQ2_0's 2-bit digit may also be 3).
var (
	lbIQ2_XXS = &lowbit{256, 66, 32, 128, decIQ2_XXS}
	lbIQ2_XS  = &lowbit{256, 74, 16, 128, decIQ2_XS}
	lbIQ2_S   = &lowbit{256, 82, 16, 128, decIQ2_S}
	lbIQ3_XXS = &lowbit{256, 98, 32, 128, decIQ3_XXS}
	lbIQ3_S   = &lowbit{256, 110, 32, 128, decIQ3_S}
	lbIQ1_S   = &lowbit{256, 50, 32, 128, decIQ1_S}
	lbIQ1_M   = &lowbit{256, 56, 16, 128, decIQ1_M}
	lbTQ1_0   = &lowbit{256, 54, 32, 1, decTQ1_0}
	lbTQ2_0   = &lowbit{256, 66, 32, 1, decTQ2_0}
	lbMXFP4   = &lowbit{32, 17, 32, 128, decMXFP4}
	lbNVFP4   = &lowbit{64, 36, 16, 128, decNVFP4}
	lbQ1_0    = &lowbit{128, 18, 32, 1, decQ1_0}
	lbQ2_0    = &lowbit{64, 18, 32, 1, decQ2_0}
)

// Expanded grids (from grids.go): the byte values of each entry.
var (
	iq2xxsGrid [256][8]uint8
	iq2xsGrid  [512][8]uint8
	iq2sGrid   [1024][8]uint8
	iq3xxsGrid [256][4]uint8
	iq3sGrid   [512][4]uint8
	iq1sGrid   [2048][8]int8 // -1, 0, 1
	iq1Codes   [2048]uint64  // 128 + 8·iq1sGrid, byte j weight j's
)

func init() {
	iq2 := []uint8{8, 25, 43}
	expand8 := func(dst [][8]uint8, codes []uint16) {
		for e, c := range codes {
			for i := range 8 {
				dst[e][i] = iq2[c>>(2*i)&3]
			}
		}
	}
	expand8(iq2xxsGrid[:], iq2xxsCodes[:])
	expand8(iq2xsGrid[:], iq2xsCodes[:])
	expand8(iq2sGrid[:], iq2sCodes[:])
	for e, c := range iq3xxsCodes {
		for i := range 4 {
			l := c >> (3 * i) & 7
			iq3xxsGrid[e][i] = uint8(4 + 8*l + l/7*2) // 4, 12, ..., 52, 62
		}
	}
	for e, c := range iq3sCodes {
		for i := range 4 {
			iq3sGrid[e][i] = uint8(1 + 2*(c>>(3*i)&7)) // 1, 3, ..., 15
		}
	}
	for e, c := range iq1sCodes {
		for i := range 8 {
			iq1sGrid[e][i] = int8(c>>(2*i)&3) - 1
			iq1Codes[e] |= uint64(128+8*int(iq1sGrid[e][i])) << (8 * i)
		}
	}
}

// signs8 is ggml's ksigns_iq2xs[i&127]: the seven stored sign bits of
// eight weights plus the eighth, which makes their number even.
func signs8(i uint32) uint8 {
	i &= 127
	p := i ^ i>>4
	p ^= p >> 2
	p ^= p >> 1
	return uint8(i | (p&1)<<7)
}

// signMasks[s] is the sign byte s as eight byte masks: 0xff in byte j
// where bit j of s is set (the weight negated), 0 elsewhere. (Initialized
// with the package's variables, before any init: the kernels' tables are
// made from it.)
var signMasks = func() (m [256]uint64) {
	for s := range m {
		for j := range 8 {
			if s>>j&1 != 0 {
				m[s] |= 0xff << (8 * j)
			}
		}
	}
	return m
}()

// putSigned writes eight grid values g, negated where their bit of sign is
// set, plus 128, as one 64-bit word: with m a byte's mask (all ones where
// negated), (v ^ m) + (m & 1) is −v in two's complement, and v where m is
// 0, and no byte carries into the next (every grid value is above 0);
// + 128 is ^ 0x80 in every byte.
func putSigned(q []byte, g *[8]uint8, sign uint8) {
	m := signMasks[sign]
	v := binary.LittleEndian.Uint64(g[:])
	binary.LittleEndian.PutUint64(q, ((v^m)+(m&0x0101010101010101))^0x8080808080808080)
}

// putSigned4 is putSigned of four grid values (bits 0-3 of sign).
func putSigned4(q []byte, g *[4]uint8, sign uint8) {
	m := uint32(signMasks[sign&15])
	v := binary.LittleEndian.Uint32(g[:])
	binary.LittleEndian.PutUint32(q, ((v^m)+(m&0x01010101))^0x80808080)
}

// IQ2_XXS (66 bytes): f16 d; 8 groups of 32 weights, each 8 bytes: four
// grid indices (bytes 0-3) and a uint32 (bytes 4-7) holding four 7-bit sign
// indices (bits 7l..7l+6 for the l-th 8 weights) and the 4-bit scale ls in
// bits 28-31. y = d·(0.5+ls)·0.25 · ±iq2xxs_grid[index][j].
func decIQ2_XXS(b, q []byte, s []float32) {
	d := f16(b)
	for ib := range 8 {
		g := b[2+8*ib:][:8]
		aux := binary.LittleEndian.Uint32(g[4:])
		s[ib] = d * (0.5 + float32(aux>>28)) * 0.25
		for l := range 4 {
			putSigned(q[32*ib+8*l:], &iq2xxsGrid[g[l]], signs8(aux>>(7*l)))
		}
	}
}

// IQ2_XS (74 bytes): f16 d; qs, 32 uint16: index (bits 0-8) into
// iq2xs_grid and 7-bit sign index (bits 9-15) of 8 weights each; scales[8]
// at 66, one byte per 32 weights, low nibble the first 16 weights', high
// nibble the second 16's: y = d·(0.5+ls)·0.25 · ±grid[j].
func decIQ2_XS(b, q []byte, s []float32) {
	d := f16(b)
	sc := b[66:74]
	for ib := range 8 {
		s[2*ib] = d * (0.5 + float32(sc[ib]&15)) * 0.25
		s[2*ib+1] = d * (0.5 + float32(sc[ib]>>4)) * 0.25
		for l := range 4 {
			v := binary.LittleEndian.Uint16(b[2+8*ib+2*l:])
			putSigned(q[32*ib+8*l:], &iq2xsGrid[v&511], signs8(uint32(v>>9)))
		}
	}
}

// IQ2_S (82 bytes): f16 d; qs[32] at 2, the low 8 bits of the grid index
// of each 8 weights; signs[32] at 34, one byte of 8 sign bits per 8
// weights; qh[8] at 66, the index's bits 8-9 for the 4 eights of 32
// weights (bits 2l, 2l+1); scales[8] at 74, as IQ2_XS.
func decIQ2_S(b, q []byte, s []float32) {
	d := f16(b)
	qs, sg, qh, sc := b[2:34], b[34:66], b[66:74], b[74:82]
	for ib := range 8 {
		s[2*ib] = d * (0.5 + float32(sc[ib]&15)) * 0.25
		s[2*ib+1] = d * (0.5 + float32(sc[ib]>>4)) * 0.25
		for l := range 4 {
			idx := int(qs[4*ib+l]) | int(qh[ib])<<(8-2*l)&0x300
			putSigned(q[32*ib+8*l:], &iq2sGrid[idx], sg[4*ib+l])
		}
	}
}

// IQ3_XXS (98 bytes): f16 d; qs[64] at 2, one iq3xxs_grid index per 4
// weights; then 8 uint32 (one per 32 weights) holding four 7-bit sign
// indices and the scale ls in bits 28-31: y = d·(0.5+ls)·0.5 · ±grid[j].
func decIQ3_XXS(b, q []byte, s []float32) {
	d := f16(b)
	qs := b[2:66]
	for ib := range 8 {
		aux := binary.LittleEndian.Uint32(b[66+4*ib:])
		s[ib] = d * (0.5 + float32(aux>>28)) * 0.5
		for l := range 4 {
			sign := signs8(aux >> (7 * l))
			o := 32*ib + 8*l
			putSigned4(q[o:], &iq3xxsGrid[qs[8*ib+2*l]], sign)
			putSigned4(q[o+4:], &iq3xxsGrid[qs[8*ib+2*l+1]], sign>>4)
		}
	}
}

// IQ3_S (110 bytes): f16 d; qs[64] at 2, the low 8 bits of an iq3s_grid
// index per 4 weights; qh[8] at 66, bit k of qh[ib] the ninth bit of the
// k-th index of 32 weights ib; signs[32] at 74, one bit per weight;
// scales[4] at 106, a nibble per 32 weights (low first):
// y = d·(1+2·ls) · ±grid[j].
func decIQ3_S(b, q []byte, s []float32) {
	d := f16(b)
	qs, qh, sg, sc := b[2:66], b[66:74], b[74:106], b[106:110]
	for ib := range 8 {
		s[ib] = d * float32(1+2*int(sc[ib/2]>>(4*(ib%2))&15))
		for l := range 4 {
			i1 := int(qs[8*ib+2*l]) | int(qh[ib])<<(8-2*l)&256
			i2 := int(qs[8*ib+2*l+1]) | int(qh[ib])<<(7-2*l)&256
			o := 32*ib + 8*l
			putSigned4(q[o:], &iq3sGrid[i1], sg[4*ib+l])
			putSigned4(q[o+4:], &iq3sGrid[i2], sg[4*ib+l]>>4)
		}
	}
}

// iq1Put writes the IQ1 weights of one grid entry, 8·grid ± 1 + 128, as
// one 64-bit word: iq1Codes' bytes (120, 128, 136) plus or minus 1 in
// every byte, without carries or borrows between them.
func iq1Put(q []byte, idx int, neg bool) {
	const ones = 0x0101010101010101
	var m uint64
	if neg {
		m = 2 * ones
	}
	binary.LittleEndian.PutUint64(q, iq1Codes[idx]+ones-m)
}

// IQ1_S (50 bytes): f16 d; qs[32] at 2, the low 8 bits of an iq1s_grid
// index per 8 weights; qh, 8 uint16 at 34, one per 32 weights: bits 3l..3l+2
// the index's high bits, 12-14 the scale ls, 15 the sign of the shift:
// y = d·(2·ls+1) · (grid[j] ± 0.125).
func decIQ1_S(b, q []byte, s []float32) {
	d := f16(b)
	qs := b[2:34]
	for ib := range 8 {
		qh := binary.LittleEndian.Uint16(b[34+2*ib:])
		s[ib] = d * float32(2*int(qh>>12&7)+1) * 0.125
		for l := range 4 {
			idx := int(qs[4*ib+l]) | int(qh>>(3*l)&7)<<8
			iq1Put(q[32*ib+8*l:][:8], idx, qh&0x8000 != 0)
		}
	}
}

// IQ1_M (56 bytes, no block scale field): qs[32], the low 8 bits of an
// iq1s_grid index per 8 weights; qh[16] at 32, a nibble per 8 weights: bits
// 0-2 the index's high bits, bit 3 the sign of the shift; scales, 4 uint16
// at 48: bits 0-11 of each hold four 3-bit scales (one per 16 weights), and
// their top nibbles together the f16 d (bits 12-15 of the first are d's
// bits 0-3, and so on): y = d·(2·ls+1) · (grid[j] ± 0.125).
func decIQ1_M(b, q []byte, s []float32) {
	qs, qh := b[0:32], b[32:48]
	var sc [4]uint16
	for i := range sc {
		sc[i] = binary.LittleEndian.Uint16(b[48+2*i:])
	}
	d := F16ToF32(sc[0]>>12 | sc[1]>>8&0xf0 | sc[2]>>4&0xf00 | sc[3]&0xf000)
	for ib := range 8 {
		for h := range 2 {
			ls := sc[ib/2] >> (6*(ib%2) + 3*h) & 7
			s[2*ib+h] = d * float32(2*int(ls)+1) * 0.125
		}
		for l := range 4 {
			nib := qh[2*ib+l/2] >> (4 * (l % 2))
			idx := int(qs[4*ib+l]) | int(nib&7)<<8
			iq1Put(q[32*ib+8*l:][:8], idx, nib&8 != 0)
		}
	}
}

// TQ1_0 (54 bytes): qs[48], five base-3 digits per byte; qh[4] at 48, four
// digits per byte; f16 d at 52. A byte holds its digits as a fixed-point
// fraction: digit n of byte x is the top base-3 digit of x·3^n (mod 256),
// ((x·3^n mod 256)·3) >> 8. Weights 0-159 are digit n of qs[m] for n = 0..4,
// m = 0..31 (n outer); 160-239 the same over qs[32..47]; 240-255 digit n of
// qh[m], n = 0..3. y = (digit - 1)·d.
func decTQ1_0(b, q []byte, s []float32) {
	digit := func(x byte, n int) byte {
		p := x * [5]byte{1, 3, 9, 27, 81}[n]
		return byte(uint16(p) * 3 >> 8)
	}
	i := 0
	for _, part := range [][]byte{b[0:32], b[32:48]} {
		for n := range 5 {
			for _, x := range part {
				q[i] = digit(x, n)
				i++
			}
		}
	}
	for n := range 4 {
		for _, x := range b[48:52] {
			q[i] = digit(x, n)
			i++
		}
	}
	d := f16(b[52:])
	for j := range s {
		s[j] = d
	}
}

// TQ2_0 (66 bytes): qs[64], four 2-bit digits per byte; f16 d at 64.
// Weight 128h + 32l + m is bits 2l..2l+1 of qs[32h+m]; y = (digit - 1)·d.
func decTQ2_0(b, q []byte, s []float32) {
	for h := range 2 {
		for l := range 4 {
			for m, x := range b[32*h : 32*h+32] {
				q[128*h+32*l+m] = x >> (2 * l) & 3
			}
		}
	}
	d := f16(b[64:])
	for j := range s {
		s[j] = d
	}
}

// Q1_0 (18 bytes): f16 d, then qs[16]: weight j's sign is bit j%8 of
// qs[j/8], y = d where it is set, -d where not; its digit is 2·bit (a
// weight (digit - 1)·d, as TQ2_0's), one scale for all 128.
func decQ1_0(b, q []byte, s []float32) {
	for j := range 128 {
		q[j] = b[2+j/8] >> (j % 8) & 1 << 1
	}
	d := f16(b)
	for j := range s {
		s[j] = d
	}
}

// Q2_0 (18 bytes): f16 d, then qs[16]: weight j's code is bits
// 2(j%4)..2(j%4)+1 of qs[j/4], y = (code - 1)·d.
func decQ2_0(b, q []byte, s []float32) {
	for j := range 64 {
		q[j] = b[2+j/4] >> (2 * (j % 4)) & 3
	}
	d := f16(b)
	for j := range s {
		s[j] = d
	}
}

// fp4Values are the E2M1 values doubled (ggml's kvalues_mxfp4): index
// bit 3 the sign, bits 0-2 the magnitude 0, 0.5, 1, 1.5, 2, 3, 4, 6.
var fp4Values = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// e8m0Half is the E8M0 scale e halved, 2^(e-128), as ggml's
// GGML_E8M0_TO_FP32_HALF computes it (e = 0 and 1 subnormal; 255 is not a
// NaN).
func e8m0Half(e byte) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// ue4m3Half is the unsigned E4M3 scale x halved, as ggml's
// ggml_ue4m3_to_fp32: exponent bias 7, subnormal when the exponent field is
// 0; 0x7f (the NaN) gives 0, and bit 7 is ignored otherwise.
func ue4m3Half(x byte) float32 {
	if x == 0 || x == 0x7f {
		return 0
	}
	e, m := int(x>>3&15), float64(x&7)
	if e == 0 {
		return float32(math.Ldexp(m, -10))
	}
	return float32(math.Ldexp(8+m, e-11))
}

// MXFP4 (32 weights, 17 bytes): E8M0 e; qs[16], weight j the low nibble of
// qs[j] and weight j+16 its high nibble, each an fp4Values index:
// y = fp4Values[n]·2^(e-128).
func decMXFP4(b, q []byte, s []float32) {
	s[0] = e8m0Half(b[0])
	for j, v := range b[1:17] {
		q[j] = byte(128 + int(fp4Values[v&15]))
		q[j+16] = byte(128 + int(fp4Values[v>>4]))
	}
}

// NVFP4 (64 weights, 36 bytes): four UE4M3 scales, one per 16 weights;
// qs[32] at 4, the 16 weights k of sub-block s in qs[8s .. 8s+7] as MXFP4
// packs 32 (low nibbles first 8, high nibbles last 8):
// y = fp4Values[n]·ue4m3(d[s])/2.
func decNVFP4(b, q []byte, s []float32) {
	for sb := range 4 {
		s[sb] = ue4m3Half(b[sb])
		for j, v := range b[4+8*sb : 12+8*sb] {
			q[16*sb+j] = byte(128 + int(fp4Values[v&15]))
			q[16*sb+j+8] = byte(128 + int(fp4Values[v>>4]))
		}
	}
}
