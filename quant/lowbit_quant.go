package quant

import (
	"encoding/binary"
	"math"
	"sync"
)

// Quantizers for the low-bit types, so that ppl-mkmodel can write them for
// speed tests. TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0 and Q2_0 follow llama.cpp's reference
// quantizers (quantize_row_*_ref). The i-quants have none without an
// importance matrix; ours is simple and plain: one scale per group from its
// largest magnitude, each weight's sign from its own (for the types whose
// eighth sign is a parity bit, the smallest weight of an odd set gives in),
// and for each 8 (or 4) magnitudes a grid entry near them (see lattice).
// The files are valid and decode sensibly; they are not llama-quantize's
// bytes.

// lattice is a grid prepared for quantizing: its entries as float32 rows,
// and for every vector of levels (each coordinate one of the grid's byte
// values, as a base-len(levels) number) the grid entry nearest to it in
// squared distance. A target is rounded coordinate-wise to the nearest
// level and looked up: one table read instead of a search of the grid,
// close to the nearest entry and exact when the rounded vector is one.
type lattice struct {
	once   sync.Once
	levels []float32
	w      int
	rows   [][]float32
	table  []int32
	build  func() (levels []float32, rows [][]float32)
}

func (l *lattice) init() {
	l.once.Do(func() {
		l.levels, l.rows = l.build()
		l.w = len(l.rows[0])
		n := 1
		for range l.w {
			n *= len(l.levels)
		}
		l.table = make([]int32, n)
		v := make([]float32, l.w)
		for code := range n {
			c := code
			for i := range l.w {
				v[i] = l.levels[c%len(l.levels)]
				c /= len(l.levels)
			}
			best, bestD := 0, float32(math.Inf(1))
			for e, row := range l.rows {
				var d float32
				for i, g := range row {
					d += float32((g - v[i]) * (g - v[i]))
				}
				if d < bestD {
					best, bestD = e, d
				}
			}
			l.table[code] = int32(best)
		}
	})
}

// nearest returns the entry for target t (len w) and its squared distance.
func (l *lattice) nearest(t []float32) (int, float32) {
	l.init()
	code, mul := 0, 1
	for _, v := range t {
		k, kd := 0, float32(math.Inf(1))
		for i, lv := range l.levels {
			if d := float32(math.Abs(float64(v - lv))); d < kd {
				k, kd = i, d
			}
		}
		code += k * mul
		mul *= len(l.levels)
	}
	e := int(l.table[code])
	var d float32
	for i, g := range l.rows[e] {
		d += float32((g - t[i]) * (g - t[i]))
	}
	return e, d
}

// byteRows converts n grid entries of w bytes (as at(e, i)) to float rows.
func byteRows(levels []float32, n, w int, at func(e, i int) float32) func() ([]float32, [][]float32) {
	return func() ([]float32, [][]float32) {
		rows := make([][]float32, n)
		for e := range rows {
			rows[e] = make([]float32, w)
			for i := range w {
				rows[e][i] = at(e, i)
			}
		}
		return levels, rows
	}
}

var (
	iq2Levels = []float32{8, 25, 43}
	latIQ2XXS = &lattice{build: byteRows(iq2Levels, 256, 8, func(e, i int) float32 { return float32(iq2xxsGrid[e][i]) })}
	latIQ2XS  = &lattice{build: byteRows(iq2Levels, 512, 8, func(e, i int) float32 { return float32(iq2xsGrid[e][i]) })}
	latIQ2S   = &lattice{build: byteRows(iq2Levels, 1024, 8, func(e, i int) float32 { return float32(iq2sGrid[e][i]) })}
	latIQ3XXS = &lattice{build: byteRows([]float32{4, 12, 20, 28, 36, 44, 52, 62}, 256, 4,
		func(e, i int) float32 { return float32(iq3xxsGrid[e][i]) })}
	latIQ3S = &lattice{build: byteRows([]float32{1, 3, 5, 7, 9, 11, 13, 15}, 512, 4,
		func(e, i int) float32 { return float32(iq3sGrid[e][i]) })}
	latIQ1S = &lattice{build: byteRows([]float32{-1, 0, 1}, 2048, 8, func(e, i int) float32 { return float32(iq1sGrid[e][i]) })}
)

func maxAbs(x []float32) float32 {
	var m float32
	for _, v := range x {
		m = max(m, float32(math.Abs(float64(v))))
	}
	return m
}

// signsOf returns the sign bits of x (bit j set where x[j] < 0) and the
// magnitudes. With parity, an odd number of negatives is made even by
// flipping the sign of the smallest magnitude, whose target then becomes
// negative (its nearest grid value is still the smallest level).
func signsOf(x []float32, parity bool, mag []float32) uint8 {
	var s uint8
	small := 0
	for j, v := range x {
		mag[j] = float32(math.Abs(float64(v)))
		if v < 0 {
			s |= 1 << j
		}
		if mag[j] < mag[small] {
			small = j
		}
	}
	if parity {
		n := 0
		for j := range x {
			n += int(s >> j & 1)
		}
		if n%2 == 1 {
			s ^= 1 << small
			mag[small] = -mag[small]
		}
	}
	return s
}

// superScale picks the f16 block scale d for groups whose wanted scales
// are want[g] (their largest magnitude over the largest grid level), with
// the integer scale field ls giving mult(ls) times d, ls in [0, maxLS]:
// d = max(want)/mult(maxLS), and each group the ls nearest its want.
func superScale(want []float32, maxLS int, mult func(ls int) float32) (d float32, ls []int) {
	var wm float32
	for _, w := range want {
		wm = max(wm, w)
	}
	d = F16ToF32(F32ToF16(wm / mult(maxLS)))
	ls = make([]int, len(want))
	if d == 0 {
		return 0, ls
	}
	for g, w := range want {
		best, bestE := 0, float32(math.Inf(1))
		for l := range maxLS + 1 {
			if e := float32(math.Abs(float64(float32(d*mult(l)) - w))); e < bestE {
				best, bestE = l, e
			}
		}
		ls[g] = best
	}
	return d, ls
}

// iq2Mult is the IQ2 scale ls's multiple of d: (0.5+ls)/4.
func iq2Mult(ls int) float32 { return (0.5 + float32(ls)) * 0.25 }

// quantIQ2 quantizes 8 weights to a grid index and sign byte with scale db.
func quantIQ2(x []float32, db float32, lat *lattice, parity bool) (int, uint8) {
	var mag [8]float32
	s := signsOf(x, parity, mag[:])
	if db == 0 {
		return 0, 0
	}
	for j := range mag {
		mag[j] /= db
	}
	idx, _ := lat.nearest(mag[:])
	return idx, s
}

func quantIQ2_XXS(src []float32, dst []byte) {
	for len(src) >= 256 {
		x, b := src[:256], dst[:66]
		var want [8]float32
		for ib := range 8 {
			want[ib] = maxAbs(x[32*ib:32*ib+32]) / 43
		}
		d, ls := superScale(want[:], 15, iq2Mult)
		putF16(b, d)
		for ib := range 8 {
			db := d * iq2Mult(ls[ib])
			aux := uint32(ls[ib]) << 28
			for l := range 4 {
				idx, s := quantIQ2(x[32*ib+8*l:][:8], db, latIQ2XXS, true)
				b[2+8*ib+l] = byte(idx)
				aux |= uint32(s&127) << (7 * l)
			}
			binary.LittleEndian.PutUint32(b[2+8*ib+4:], aux)
		}
		src, dst = src[256:], dst[66:]
	}
}

func quantIQ2_XS(src []float32, dst []byte) {
	for len(src) >= 256 {
		x, b := src[:256], dst[:74]
		var want [16]float32
		for k := range 16 {
			want[k] = maxAbs(x[16*k:16*k+16]) / 43
		}
		d, ls := superScale(want[:], 15, iq2Mult)
		putF16(b, d)
		for ib := range 8 {
			b[66+ib] = byte(ls[2*ib] | ls[2*ib+1]<<4)
			for l := range 4 {
				db := d * iq2Mult(ls[2*ib+l/2])
				idx, s := quantIQ2(x[32*ib+8*l:][:8], db, latIQ2XS, true)
				binary.LittleEndian.PutUint16(b[2+8*ib+2*l:], uint16(idx)|uint16(s&127)<<9)
			}
		}
		src, dst = src[256:], dst[74:]
	}
}

func quantIQ2_S(src []float32, dst []byte) {
	for len(src) >= 256 {
		x, b := src[:256], dst[:82]
		clear(b)
		var want [16]float32
		for k := range 16 {
			want[k] = maxAbs(x[16*k:16*k+16]) / 43
		}
		d, ls := superScale(want[:], 15, iq2Mult)
		putF16(b, d)
		for ib := range 8 {
			b[74+ib] = byte(ls[2*ib] | ls[2*ib+1]<<4)
			for l := range 4 {
				db := d * iq2Mult(ls[2*ib+l/2])
				idx, s := quantIQ2(x[32*ib+8*l:][:8], db, latIQ2S, false)
				b[2+4*ib+l] = byte(idx)
				b[66+ib] |= byte(idx>>8) << (2 * l)
				b[34+4*ib+l] = s
			}
		}
		src, dst = src[256:], dst[82:]
	}
}

// quantIQ3 quantizes 8 weights as two grid entries of 4 with scale db.
func quantIQ3(x []float32, db float32, lat *lattice, parity bool) (i1, i2 int, s uint8) {
	var mag [8]float32
	s = signsOf(x, parity, mag[:])
	if db == 0 {
		return 0, 0, 0
	}
	for j := range mag {
		mag[j] /= db
	}
	i1, _ = lat.nearest(mag[:4])
	i2, _ = lat.nearest(mag[4:])
	return i1, i2, s
}

func quantIQ3_XXS(src []float32, dst []byte) {
	mult := func(ls int) float32 { return (0.5 + float32(ls)) * 0.5 }
	for len(src) >= 256 {
		x, b := src[:256], dst[:98]
		var want [8]float32
		for ib := range 8 {
			want[ib] = maxAbs(x[32*ib:32*ib+32]) / 62
		}
		d, ls := superScale(want[:], 15, mult)
		putF16(b, d)
		for ib := range 8 {
			db := d * mult(ls[ib])
			aux := uint32(ls[ib]) << 28
			for l := range 4 {
				i1, i2, s := quantIQ3(x[32*ib+8*l:][:8], db, latIQ3XXS, true)
				b[2+8*ib+2*l], b[2+8*ib+2*l+1] = byte(i1), byte(i2)
				aux |= uint32(s&127) << (7 * l)
			}
			binary.LittleEndian.PutUint32(b[66+4*ib:], aux)
		}
		src, dst = src[256:], dst[98:]
	}
}

func quantIQ3_S(src []float32, dst []byte) {
	mult := func(ls int) float32 { return float32(1 + 2*ls) }
	for len(src) >= 256 {
		x, b := src[:256], dst[:110]
		clear(b)
		var want [8]float32
		for ib := range 8 {
			want[ib] = maxAbs(x[32*ib:32*ib+32]) / 15
		}
		d, ls := superScale(want[:], 15, mult)
		putF16(b, d)
		for ib := range 8 {
			db := d * mult(ls[ib])
			b[106+ib/2] |= byte(ls[ib] << (4 * (ib % 2)))
			for l := range 4 {
				i1, i2, s := quantIQ3(x[32*ib+8*l:][:8], db, latIQ3S, false)
				b[2+8*ib+2*l], b[2+8*ib+2*l+1] = byte(i1), byte(i2)
				b[66+ib] |= byte(i1>>8)<<(2*l) | byte(i2>>8)<<(2*l+1)
				b[74+4*ib+l] = s
			}
		}
		src, dst = src[256:], dst[110:]
	}
}

// quantIQ1 finds the grid entry and shift sign (true: -1/8) for 8 weights
// at scale dl, or for a fixed shift when fixed is ±1; it returns the
// squared error too.
func quantIQ1(x []float32, dl float32, fixed int) (idx int, neg bool, err float32) {
	if dl == 0 {
		return 0, false, 0
	}
	err = float32(math.Inf(1))
	for _, sh := range []int{1, -1} {
		if fixed != 0 && sh != fixed {
			continue
		}
		var t [8]float32
		for j, v := range x {
			t[j] = v/dl - float32(float32(sh)*0.125)
		}
		if i, e := latIQ1S.nearest(t[:]); e < err {
			idx, neg, err = i, sh < 0, e
		}
	}
	return idx, neg, err
}

func iq1Mult(ls int) float32 { return float32(2*ls + 1) }

func quantIQ1_S(src []float32, dst []byte) {
	for len(src) >= 256 {
		x, b := src[:256], dst[:50]
		var want [8]float32
		for ib := range 8 {
			want[ib] = maxAbs(x[32*ib:32*ib+32]) / 1.125
		}
		d, ls := superScale(want[:], 7, iq1Mult)
		putF16(b, d)
		for ib := range 8 {
			dl := d * iq1Mult(ls[ib])
			// One shift for all 32: the one with the smaller total error.
			var best [4]int
			bestNeg, bestE := false, float32(math.Inf(1))
			for _, sh := range []int{1, -1} {
				var idx [4]int
				var e float32
				for l := range 4 {
					i, _, el := quantIQ1(x[32*ib+8*l:][:8], dl, sh)
					idx[l] = i
					e += el
				}
				if e < bestE {
					best, bestNeg, bestE = idx, sh < 0, e
				}
			}
			qh := uint16(ls[ib]) << 12
			if bestNeg {
				qh |= 0x8000
			}
			for l, i := range best {
				b[2+4*ib+l] = byte(i)
				qh |= uint16(i>>8) << (3 * l)
			}
			binary.LittleEndian.PutUint16(b[34+2*ib:], qh)
		}
		src, dst = src[256:], dst[50:]
	}
}

func quantIQ1_M(src []float32, dst []byte) {
	for len(src) >= 256 {
		x, b := src[:256], dst[:56]
		clear(b)
		var want [16]float32
		for k := range 16 {
			want[k] = maxAbs(x[16*k:16*k+16]) / 1.125
		}
		d, ls := superScale(want[:], 7, iq1Mult)
		var sc [4]uint16
		dBits := F32ToF16(d)
		for k := range 4 {
			sc[k] = dBits >> (4 * k) & 15 << 12
		}
		for ib := range 8 {
			for h := range 2 {
				sc[ib/2] |= uint16(ls[2*ib+h]) << (6*(ib%2) + 3*h)
			}
			for l := range 4 {
				i, neg, _ := quantIQ1(x[32*ib+8*l:][:8], d*iq1Mult(ls[2*ib+l/2]), 0)
				b[4*ib+l] = byte(i)
				nib := byte(i >> 8)
				if neg {
					nib |= 8
				}
				b[32+2*ib+l/2] |= nib << (4 * (l % 2))
			}
		}
		for k := range 4 {
			binary.LittleEndian.PutUint16(b[48+2*k:], sc[k])
		}
		src, dst = src[256:], dst[56:]
	}
}

// ternaryScale is the scale of the ternary quantizers (TQ1_0, TQ2_0,
// Q2_0): d = amax, and its inverse, 0 for an all-zero block.
func ternaryScale(x []float32) (d, id float32) {
	d = maxAbs(x)
	if d != 0 {
		id = 1 / d
	}
	return d, id
}

// ternary returns round(v·id) + 1 in 0..2 (ties away from zero).
func ternary(v, id float32) int {
	return min(2, max(0, int(math.Round(float64(v*id)))+1))
}

// quantTQ1_0 is llama.cpp's quantize_row_tq1_0_ref: d = amax, digits
// written most significant first and the base-3 number scaled to a byte
// fraction, rounding up (so that decTQ1_0's digit extraction reads them).
func quantTQ1_0(src []float32, dst []byte) {
	for len(src) >= 256 {
		x, b := src[:256], dst[:54]
		d, id := ternaryScale(x)
		pack := func(vals []float32, n int) byte {
			q := 0
			for _, v := range vals[:n] {
				q = 3*q + ternary(v, id)
			}
			for range 5 - n {
				q *= 3
			}
			return byte((q*256 + 242) / 243)
		}
		var v [5]float32
		for m := range 32 {
			for n := range 5 {
				v[n] = x[m+32*n]
			}
			b[m] = pack(v[:], 5)
		}
		for m := range 16 {
			for n := range 5 {
				v[n] = x[160+m+16*n]
			}
			b[32+m] = pack(v[:], 5)
		}
		for j := range 4 {
			for n := range 4 {
				v[n] = x[240+j+4*n]
			}
			b[48+j] = pack(v[:], 4)
		}
		putF16(b[52:], d)
		src, dst = src[256:], dst[54:]
	}
}

// quantTQ2_0 is llama.cpp's quantize_row_tq2_0_ref: d = amax.
func quantTQ2_0(src []float32, dst []byte) {
	for len(src) >= 256 {
		x, b := src[:256], dst[:66]
		d, id := ternaryScale(x)
		clear(b[:64])
		for h := range 2 {
			for l := range 4 {
				for m := range 32 {
					b[32*h+m] |= byte(ternary(x[128*h+32*l+m], id)) << (2 * l)
				}
			}
		}
		putF16(b[64:], d)
		src, dst = src[256:], dst[66:]
	}
}

// quantQ1_0 is llama.cpp's quantize_row_q1_0_ref: d = Σ|x|/128, summed in
// float32 in order, and a weight's bit set where x >= 0.
func quantQ1_0(src []float32, dst []byte) {
	for len(src) >= 128 {
		x, b := src[:128], dst[:18]
		var sum float32
		for _, v := range x {
			sum += float32(math.Abs(float64(v)))
		}
		putF16(b, sum/128)
		clear(b[2:])
		for j, v := range x {
			if v >= 0 {
				b[2+j/8] |= 1 << (j % 8)
			}
		}
		src, dst = src[128:], dst[18:]
	}
}

// quantQ2_0 is llama.cpp's quantize_row_q2_0_ref: d = amax and TQ2_0's
// ternary codes (its code 3, 2·d, never written).
func quantQ2_0(src []float32, dst []byte) {
	for len(src) >= 64 {
		x, b := src[:64], dst[:18]
		d, id := ternaryScale(x)
		putF16(b, d)
		clear(b[2:])
		for j, v := range x {
			b[2+j/4] |= byte(ternary(v, id)) << (2 * (j % 4))
		}
		src, dst = src[64:], dst[18:]
	}
}

// fp4Index is the index of the fp4Values entry nearest x/d (the first on
// ties), as llama.cpp's best_index_mxfp4.
func fp4Index(x, d float32) byte {
	best, bestE := 0, float32(math.Inf(1))
	for i, v := range fp4Values {
		if e := float32(math.Abs(float64(float32(float32(v)*d) - x))); e < bestE {
			best, bestE = i, e
		}
	}
	return byte(best)
}

// quantMXFP4 is llama.cpp's quantize_row_mxfp4_ref: e = floor(log2(amax))
// - 2 + 127 (so amax lands in [4, 8) times the halved scale), 0 for a zero
// block.
func quantMXFP4(src []float32, dst []byte) {
	for len(src) >= 32 {
		x, b := src[:32], dst[:17]
		var e byte
		if a := maxAbs(x); a > 0 {
			// Clamped to the E8M0 range (llama.cpp's cast is undefined
			// below 2^-125).
			e = byte(min(254, max(0, int(math.Floor(math.Log2(float64(a))))-2+127)))
		}
		b[0] = e
		d := e8m0Half(e)
		for j := range 16 {
			b[1+j] = fp4Index(x[j], d) | fp4Index(x[j+16], d)<<4
		}
		src, dst = src[32:], dst[17:]
	}
}

// toUE4M3 rounds x > 0 to an unsigned E4M3 byte as llama.cpp's
// ggml_fp32_to_ue4m3: clamped to 448, subnormals to nearest, normals by
// the first dropped mantissa bit.
func toUE4M3(x float32) byte {
	if !(x > 0) {
		return 0
	}
	x = min(x, 448)
	bits := math.Float32bits(x)
	e := int(bits>>23&0xff) - 127 + 7
	if e <= 0 {
		m := min(7, int(float32(x*512)+0.5))
		return byte(max(m, 0))
	}
	if e >= 15 {
		return 0x7e
	}
	m := int(bits>>20&7) + int(bits>>19&1)
	if m > 7 {
		m, e = 0, e+1
		if e >= 15 {
			return 0x7e
		}
	}
	return byte(e<<3 | m)
}

// quantNVFP4 is llama.cpp's quantize_row_nvfp4_ref: per 16 weights the
// UE4M3 scale amax/6, then the nearest values (no per-tensor scale).
func quantNVFP4(src []float32, dst []byte) {
	for len(src) >= 64 {
		x, b := src[:64], dst[:36]
		for s := range 4 {
			xs := x[16*s : 16*s+16]
			b[s] = toUE4M3(maxAbs(xs) / 6)
			d := ue4m3Half(b[s])
			for j := range 8 {
				b[4+8*s+j] = fp4Index(xs[j], d) | fp4Index(xs[j+8], d)<<4
			}
		}
		src, dst = src[64:], dst[36:]
	}
}
