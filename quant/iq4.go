package quant

import "encoding/binary"

// IQ4_NL and IQ4_XS: 4-bit indices into a fixed non-linear table
// (ggml's kvalues_iq4nl), denser near zero where weights cluster.

var iq4Table = [16]float32{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

func deqIQ4_NL(src []byte, dst []float32) {
	for len(dst) >= 32 {
		b, y := src[:18], dst[:32]
		d := f16(b)
		for j, q := range b[2:18] {
			y[j] = d * iq4Table[q&15]
			y[j+16] = d * iq4Table[q>>4]
		}
		src, dst = src[18:], dst[32:]
	}
}

func dotIQ4_NL(w []byte, x []float32) float32 {
	var sum float32
	for len(x) >= 32 {
		b, xs := w[:18], x[:32]
		var s0, s1 float32
		for j, q := range b[2:18] {
			s0 += float32(iq4Table[q&15] * xs[j])
			s1 += float32(iq4Table[q>>4] * xs[j+16])
		}
		sum += float32(f16(b) * (s0 + s1))
		w, x = w[18:], x[32:]
	}
	return sum
}

// iq4xsScale returns the signed scale of sub-block k (0..7).
func iq4xsScale(scalesH uint16, scalesL []byte, k int) int32 {
	lo := scalesL[k/2] >> (4 * (k % 2)) & 15
	hi := uint8(scalesH>>(2*k)) & 3
	return int32(lo|hi<<4) - 32
}

func deqIQ4_XS(src []byte, dst []float32) {
	for len(dst) >= 256 {
		b, y := src[:136], dst[:256]
		d := f16(b)
		sh := binary.LittleEndian.Uint16(b[2:])
		sl, qs := b[4:8], b[8:136]
		for k := range 8 {
			dl := d * float32(iq4xsScale(sh, sl, k))
			q := qs[16*k:][:16]
			yy := y[32*k:][:32]
			for j, v := range q {
				yy[j] = dl * iq4Table[v&15]
				yy[j+16] = dl * iq4Table[v>>4]
			}
		}
		src, dst = src[136:], dst[256:]
	}
}

func dotIQ4_XS(w []byte, x []float32) float32 {
	var sum float32
	for len(x) >= 256 {
		b, xb := w[:136], x[:256]
		sh := binary.LittleEndian.Uint16(b[2:])
		sl, qs := b[4:8], b[8:136]
		var sd float32
		for k := range 8 {
			q := qs[16*k:][:16]
			xs := xb[32*k:][:32]
			var s0, s1 float32
			for j, v := range q {
				s0 += float32(iq4Table[v&15] * xs[j])
				s1 += float32(iq4Table[v>>4] * xs[j+16])
			}
			sd += float32(float32(iq4xsScale(sh, sl, k)) * (s0 + s1))
		}
		sum += float32(f16(b) * sd)
		w, x = w[136:], x[256:]
	}
	return sum
}
