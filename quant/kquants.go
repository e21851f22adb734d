package quant

import (
	"encoding/binary"
	"math"
)

// Dequantization and dot products of the 256-weight K-quants (layouts in the
// package comment). All products that form a weight are exact in float32,
// so only the subtraction of a minimum rounds, as in ggml.

// ---- Q2_K

func deqQ2_K(src []byte, dst []float32) {
	for len(dst) >= 256 {
		b, y := src[:84], dst[:256]
		sc, qs := b[0:16], b[16:80]
		d, dmin := f16(b[80:]), f16(b[82:])
		for k := range 16 {
			// Sub-block k holds weights 16k..16k+15 = 128h + 32s + 16e + l.
			h, s, e := k/8, k/2%4, k%2
			dl, ml := d*float32(sc[k]&15), float32(dmin*float32(sc[k]>>4))
			q := qs[32*h+16*e:][:16]
			yy := y[16*k:][:16]
			shift := uint(2 * s)
			for l, v := range q {
				yy[l] = float32(dl*float32(v>>shift&3)) - ml
			}
		}
		src, dst = src[84:], dst[256:]
	}
}

func dotQ2_K(w []byte, x []float32) float32 {
	var sum float32
	for len(x) >= 256 {
		b, xb := w[:84], x[:256]
		sc, qs := b[0:16], b[16:80]
		var sd, sm float32 // sum over sub-blocks of sc*sum(q*x), m*sum(x)
		for k := range 16 {
			h, s, e := k/8, k/2%4, k%2
			q := qs[32*h+16*e:][:16]
			xs := xb[16*k:][:16]
			shift := uint(2 * s)
			var sq, sx float32
			for l, v := range q {
				sq += float32(float32(v>>shift&3) * xs[l])
				sx += xs[l]
			}
			sd += float32(float32(sc[k]&15) * sq)
			sm += float32(float32(sc[k]>>4) * sx)
		}
		sum += float32(f16(b[80:])*sd) - float32(f16(b[82:])*sm)
		w, x = w[84:], x[256:]
	}
	return sum
}

// ---- Q3_K

// q3Scales unpacks Q3_K's twelve scale bytes into sixteen signed scales.
func q3Scales(b []byte) (sc [16]int32) {
	b = b[:12]
	for k := range 16 {
		var low uint8
		if k < 8 {
			low = b[k] & 15
		} else {
			low = b[k-8] >> 4
		}
		high := b[8+k%4] >> (2 * (k / 4)) & 3
		sc[k] = int32(low|high<<4) - 32
	}
	return sc
}

func deqQ3_K(src []byte, dst []float32) {
	for len(dst) >= 256 {
		b, y := src[:110], dst[:256]
		hm, qs := b[0:32], b[32:96]
		sc := q3Scales(b[96:108])
		d := f16(b[108:])
		for k := range 16 {
			h, s, e := k/8, k/2%4, k%2
			dl := d * float32(sc[k])
			q := qs[32*h+16*e:][:16]
			hh := hm[16*e:][:16]
			yy := y[16*k:][:16]
			shift, hbit := uint(2*s), uint(4*h+s)
			for l, v := range q {
				qi := int32(v>>shift&3) - 4 + 4*int32(hh[l]>>hbit&1)
				yy[l] = dl * float32(qi)
			}
		}
		src, dst = src[110:], dst[256:]
	}
}

func dotQ3_K(w []byte, x []float32) float32 {
	var sum float32
	for len(x) >= 256 {
		b, xb := w[:110], x[:256]
		hm, qs := b[0:32], b[32:96]
		sc := q3Scales(b[96:108])
		var sd float32
		for k := range 16 {
			h, s, e := k/8, k/2%4, k%2
			q := qs[32*h+16*e:][:16]
			hh := hm[16*e:][:16]
			xs := xb[16*k:][:16]
			shift, hbit := uint(2*s), uint(4*h+s)
			var sq float32
			for l, v := range q {
				qi := int32(v>>shift&3) - 4 + 4*int32(hh[l]>>hbit&1)
				sq += float32(float32(qi) * xs[l])
			}
			sd += float32(float32(sc[k]) * sq)
		}
		sum += float32(f16(b[108:]) * sd)
		w, x = w[110:], x[256:]
	}
	return sum
}

// ---- Q4_K and Q5_K share the 6-bit scale/min packing.

// scaleMinK4 returns the 6-bit scale and minimum of sub-block j (0..7) from
// the twelve packed bytes q (ggml's get_scale_min_k4).
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	q = q[:12]
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&15 | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

func deqQ4_K(src []byte, dst []float32) {
	for len(dst) >= 256 {
		b, y := src[:144], dst[:256]
		d, dmin := f16(b), f16(b[2:])
		scales, qs := b[4:16], b[16:144]
		for c := range 4 {
			sc1, m1 := scaleMinK4(2*c, scales)
			sc2, m2 := scaleMinK4(2*c+1, scales)
			d1, dm1 := d*float32(sc1), float32(dmin*float32(m1))
			d2, dm2 := d*float32(sc2), float32(dmin*float32(m2))
			q := qs[32*c:][:32]
			y1, y2 := y[64*c:][:32], y[64*c+32:][:32]
			for l, v := range q {
				y1[l] = float32(d1*float32(v&15)) - dm1
				y2[l] = float32(d2*float32(v>>4)) - dm2
			}
		}
		src, dst = src[144:], dst[256:]
	}
}

func dotQ4_K(w []byte, x []float32) float32 {
	var sum float32
	for len(x) >= 256 {
		b, xb := w[:144], x[:256]
		scales, qs := b[4:16], b[16:144]
		var sd, sm float32
		for c := range 4 {
			sc1, m1 := scaleMinK4(2*c, scales)
			sc2, m2 := scaleMinK4(2*c+1, scales)
			q := qs[32*c:][:32]
			x1, x2 := xb[64*c:][:32], xb[64*c+32:][:32]
			var q1, q2, s1, s2 float32
			for l, v := range q {
				q1 += float32(float32(v&15) * x1[l])
				q2 += float32(float32(v>>4) * x2[l])
				s1 += x1[l]
				s2 += x2[l]
			}
			sd += float32(float32(sc1)*q1) + float32(float32(sc2)*q2)
			sm += float32(float32(m1)*s1) + float32(float32(m2)*s2)
		}
		sum += float32(f16(b)*sd) - float32(f16(b[2:])*sm)
		w, x = w[144:], x[256:]
	}
	return sum
}

func deqQ5_K(src []byte, dst []float32) {
	for len(dst) >= 256 {
		b, y := src[:176], dst[:256]
		d, dmin := f16(b), f16(b[2:])
		scales, qh, qs := b[4:16], b[16:48], b[48:176]
		for c := range 4 {
			sc1, m1 := scaleMinK4(2*c, scales)
			sc2, m2 := scaleMinK4(2*c+1, scales)
			d1, dm1 := d*float32(sc1), float32(dmin*float32(m1))
			d2, dm2 := d*float32(sc2), float32(dmin*float32(m2))
			q := qs[32*c:][:32]
			hh := qh[:32]
			y1, y2 := y[64*c:][:32], y[64*c+32:][:32]
			s1, s2 := uint(2*c), uint(2*c+1)
			for l, v := range q {
				y1[l] = float32(d1*float32(v&15|(hh[l]>>s1&1)<<4)) - dm1
				y2[l] = float32(d2*float32(v>>4|(hh[l]>>s2&1)<<4)) - dm2
			}
		}
		src, dst = src[176:], dst[256:]
	}
}

func dotQ5_K(w []byte, x []float32) float32 {
	var sum float32
	for len(x) >= 256 {
		b, xb := w[:176], x[:256]
		scales, qh, qs := b[4:16], b[16:48], b[48:176]
		var sd, sm float32
		for c := range 4 {
			sc1, m1 := scaleMinK4(2*c, scales)
			sc2, m2 := scaleMinK4(2*c+1, scales)
			q := qs[32*c:][:32]
			hh := qh[:32]
			x1, x2 := xb[64*c:][:32], xb[64*c+32:][:32]
			sh1, sh2 := uint(2*c), uint(2*c+1)
			var q1, q2, s1, s2 float32
			for l, v := range q {
				q1 += float32(float32(v&15|(hh[l]>>sh1&1)<<4) * x1[l])
				q2 += float32(float32(v>>4|(hh[l]>>sh2&1)<<4) * x2[l])
				s1 += x1[l]
				s2 += x2[l]
			}
			sd += float32(float32(sc1)*q1) + float32(float32(sc2)*q2)
			sm += float32(float32(m1)*s1) + float32(float32(m2)*s2)
		}
		sum += float32(f16(b)*sd) - float32(f16(b[2:])*sm)
		w, x = w[176:], x[256:]
	}
	return sum
}

// ---- Q6_K

// q6 returns the four 6-bit quants (minus 32) at offsets l, l+32, l+64, l+96
// of the 128-weight half whose low and high bits are ql (64 bytes) and qh
// (32 bytes).
func q6(ql, qh []byte, l int) (q1, q2, q3, q4 int32) {
	lo0, lo1, hi := ql[l], ql[l+32], qh[l]
	q1 = int32(lo0&15|(hi&3)<<4) - 32
	q2 = int32(lo1&15|(hi>>2&3)<<4) - 32
	q3 = int32(lo0>>4|(hi>>4&3)<<4) - 32
	q4 = int32(lo1>>4|(hi>>6)<<4) - 32
	return
}

func deqQ6_K(src []byte, dst []float32) {
	for len(dst) >= 256 {
		b, y := src[:210], dst[:256]
		d := f16(b[208:])
		sc := b[192:208]
		for h := range 2 {
			ql, qh := b[64*h:][:64], b[128+32*h:][:32]
			yy := y[128*h:][:128]
			s := sc[8*h:][:8]
			for l := range 32 {
				q1, q2, q3, q4 := q6(ql, qh, l)
				is := l / 16
				yy[l] = d * float32(int8(s[is])) * float32(q1)
				yy[l+32] = d * float32(int8(s[is+2])) * float32(q2)
				yy[l+64] = d * float32(int8(s[is+4])) * float32(q3)
				yy[l+96] = d * float32(int8(s[is+6])) * float32(q4)
			}
		}
		src, dst = src[210:], dst[256:]
	}
}

func dotQ6_K(w []byte, x []float32) float32 {
	var sum float32
	for len(x) >= 256 {
		b, xb := w[:210], x[:256]
		sc := b[192:208]
		var sd float32
		for h := range 2 {
			ql, qh := b[64*h:][:64], b[128+32*h:][:32]
			xs := xb[128*h:][:128]
			s := sc[8*h:][:8]
			// acc[k] sums sub-block 8h+k (16 weights).
			var acc [8]float32
			for l := range 32 {
				q1, q2, q3, q4 := q6(ql, qh, l)
				is := l / 16
				acc[is] += float32(float32(q1) * xs[l])
				acc[is+2] += float32(float32(q2) * xs[l+32])
				acc[is+4] += float32(float32(q3) * xs[l+64])
				acc[is+6] += float32(float32(q4) * xs[l+96])
			}
			for k, a := range acc {
				sd += float32(float32(int8(s[k])) * a)
			}
		}
		sum += float32(f16(b[208:]) * sd)
		w, x = w[210:], x[256:]
	}
	return sum
}

// ---- Q8_K: float32 d, 256 int8, 16 int16 block sums (ignored).

func deqQ8_K(src []byte, dst []float32) {
	for len(dst) >= 256 {
		b, y := src[:292], dst[:256]
		d := math.Float32frombits(binary.LittleEndian.Uint32(b))
		for j, q := range b[4:260] {
			y[j] = d * float32(int8(q))
		}
		src, dst = src[292:], dst[256:]
	}
}

func dotQ8_K(w []byte, x []float32) float32 {
	var sum float32
	for len(x) >= 256 {
		b, xs := w[:292], x[:256]
		var s float32
		for j, q := range b[4:260] {
			s += float32(float32(int8(q)) * xs[j])
		}
		sum += float32(math.Float32frombits(binary.LittleEndian.Uint32(b)) * s)
		w, x = w[292:], x[256:]
	}
	return sum
}
