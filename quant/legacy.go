package quant

import (
	"encoding/binary"
	"math"
)

// The 32-weight formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0.
//
// Dequantization is exact (see the package comment). The quantizers follow
// llama.cpp's quantize_row_*_ref statement by statement, in float32; an
// explicit float32(...) around a product keeps the Go compiler from fusing
// it with the following addition (which ggml's x86-64 build does not do
// either), so the roundings match on every architecture.

func absf(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// roundf is C's roundf (halves away from zero) for |v| < 2^31: v ± 0.5 is
// exact in float64, and the conversion truncates toward zero.
func roundf(v float32) int32 {
	return int32(float64(v) + math.Copysign(0.5, float64(v)))
}

// absMax returns the largest magnitude in x and the value that has it (the
// first one on ties), as the reference's `if (amax < fabsf(v))` loop does.
func absMax(x []float32) (amax, v float32) {
	for _, xv := range x {
		if a := absf(xv); amax < a {
			amax, v = a, xv
		}
	}
	return amax, v
}

// ---- Q4_0: f16 d, 16 bytes of nibbles; y = d*(q-8).

func deqQ4_0(src []byte, dst []float32) {
	for len(dst) >= 32 {
		b, y := src[:18], dst[:32]
		d := f16(b)
		qs := b[2:18]
		for j, q := range qs {
			y[j] = float32(int32(q&15)-8) * d
			y[j+16] = float32(int32(q>>4)-8) * d
		}
		src, dst = src[18:], dst[32:]
	}
}

func dotQ4_0(w []byte, x []float32) float32 {
	var sum float32
	for len(x) >= 32 {
		b, xs := w[:18], x[:32]
		qs := b[2:18]
		var s0, s1 float32
		for j, q := range qs {
			s0 += float32(float32(int32(q&15)-8) * xs[j])
			s1 += float32(float32(int32(q>>4)-8) * xs[j+16])
		}
		sum += float32(f16(b) * (s0 + s1))
		w, x = w[18:], x[32:]
	}
	return sum
}

func quantQ4_0(src []float32, dst []byte) {
	for len(src) >= 32 {
		x, b := src[:32], dst[:18]
		_, vmax := absMax(x)
		d := vmax / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(b, d)
		for j := range 16 {
			// (int8_t)(x*id + 8.5f) truncates toward zero; MIN(15, .).
			q0 := min(15, max(0, int32(float32(x[j]*id)+8.5)))
			q1 := min(15, max(0, int32(float32(x[j+16]*id)+8.5)))
			b[2+j] = uint8(q0) | uint8(q1)<<4
		}
		src, dst = src[32:], dst[18:]
	}
}

// ---- Q4_1: f16 d, f16 m, 16 bytes of nibbles; y = d*q + m.

func deqQ4_1(src []byte, dst []float32) {
	for len(dst) >= 32 {
		b, y := src[:20], dst[:32]
		d, m := f16(b), f16(b[2:])
		qs := b[4:20]
		for j, q := range qs {
			y[j] = float32(float32(q&15)*d) + m
			y[j+16] = float32(float32(q>>4)*d) + m
		}
		src, dst = src[20:], dst[32:]
	}
}

func dotQ4_1(w []byte, x []float32) float32 {
	var sum float32
	for len(x) >= 32 {
		b, xs := w[:20], x[:32]
		qs := b[4:20]
		var sq, sx float32
		for j, q := range qs {
			sq += float32(float32(q&15)*xs[j]) + float32(float32(q>>4)*xs[j+16])
			sx += xs[j] + xs[j+16]
		}
		sum += float32(f16(b)*sq) + float32(f16(b[2:])*sx)
		w, x = w[20:], x[32:]
	}
	return sum
}

// minMax returns the smallest and largest of x, starting from ±MaxFloat32
// as the reference does.
func minMax(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

func quantQ4_1(src []float32, dst []byte) {
	for len(src) >= 32 {
		x, b := src[:32], dst[:20]
		lo, hi := minMax(x)
		d := (hi - lo) / 15
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(b, d)
		putF16(b[2:], lo)
		for j := range 16 {
			q0 := min(15, max(0, int32(float32((x[j]-lo)*id)+0.5)))
			q1 := min(15, max(0, int32(float32((x[j+16]-lo)*id)+0.5)))
			b[4+j] = uint8(q0) | uint8(q1)<<4
		}
		src, dst = src[32:], dst[20:]
	}
}

// ---- Q5_0: f16 d, uint32 qh (fifth bits), 16 bytes of nibbles; y = d*(q-16).

func deqQ5_0(src []byte, dst []float32) {
	for len(dst) >= 32 {
		b, y := src[:22], dst[:32]
		d := f16(b)
		qh := binary.LittleEndian.Uint32(b[2:])
		qs := b[6:22]
		for j, q := range qs {
			q0 := int32(q&15) | int32(qh>>j&1)<<4
			q1 := int32(q>>4) | int32(qh>>(j+16)&1)<<4
			y[j] = float32(q0-16) * d
			y[j+16] = float32(q1-16) * d
		}
		src, dst = src[22:], dst[32:]
	}
}

func dotQ5_0(w []byte, x []float32) float32 {
	var sum float32
	for len(x) >= 32 {
		b, xs := w[:22], x[:32]
		qh := binary.LittleEndian.Uint32(b[2:])
		qs := b[6:22]
		var s0, s1 float32
		for j, q := range qs {
			q0 := int32(q&15) | int32(qh>>j&1)<<4
			q1 := int32(q>>4) | int32(qh>>(j+16)&1)<<4
			s0 += float32(float32(q0-16) * xs[j])
			s1 += float32(float32(q1-16) * xs[j+16])
		}
		sum += float32(f16(b) * (s0 + s1))
		w, x = w[22:], x[32:]
	}
	return sum
}

func quantQ5_0(src []float32, dst []byte) {
	for len(src) >= 32 {
		x, b := src[:32], dst[:22]
		_, vmax := absMax(x)
		d := vmax / -16
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(b, d)
		var qh uint32
		for j := range 16 {
			q0 := min(31, max(0, int32(float32(x[j]*id)+16.5)))
			q1 := min(31, max(0, int32(float32(x[j+16]*id)+16.5)))
			b[6+j] = uint8(q0&15) | uint8(q1&15)<<4
			qh |= uint32(q0>>4) << j
			qh |= uint32(q1>>4) << (j + 16)
		}
		binary.LittleEndian.PutUint32(b[2:], qh)
		src, dst = src[32:], dst[22:]
	}
}

// ---- Q5_1: f16 d, f16 m, uint32 qh, 16 bytes of nibbles; y = d*q + m.

func deqQ5_1(src []byte, dst []float32) {
	for len(dst) >= 32 {
		b, y := src[:24], dst[:32]
		d, m := f16(b), f16(b[2:])
		qh := binary.LittleEndian.Uint32(b[4:])
		qs := b[8:24]
		for j, q := range qs {
			q0 := uint32(q&15) | (qh>>j&1)<<4
			q1 := uint32(q>>4) | (qh>>(j+16)&1)<<4
			y[j] = float32(float32(q0)*d) + m
			y[j+16] = float32(float32(q1)*d) + m
		}
		src, dst = src[24:], dst[32:]
	}
}

func dotQ5_1(w []byte, x []float32) float32 {
	var sum float32
	for len(x) >= 32 {
		b, xs := w[:24], x[:32]
		qh := binary.LittleEndian.Uint32(b[4:])
		qs := b[8:24]
		var sq, sx float32
		for j, q := range qs {
			q0 := uint32(q&15) | (qh>>j&1)<<4
			q1 := uint32(q>>4) | (qh>>(j+16)&1)<<4
			sq += float32(float32(q0)*xs[j]) + float32(float32(q1)*xs[j+16])
			sx += xs[j] + xs[j+16]
		}
		sum += float32(f16(b)*sq) + float32(f16(b[2:])*sx)
		w, x = w[24:], x[32:]
	}
	return sum
}

func quantQ5_1(src []float32, dst []byte) {
	for len(src) >= 32 {
		x, b := src[:32], dst[:24]
		lo, hi := minMax(x)
		d := (hi - lo) / 31
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(b, d)
		putF16(b[2:], lo)
		var qh uint32
		for j := range 16 {
			// The reference has no MIN(31, .) here; (x-min)/d <= 31 anyway.
			q0 := min(31, max(0, int32(float32((x[j]-lo)*id)+0.5)))
			q1 := min(31, max(0, int32(float32((x[j+16]-lo)*id)+0.5)))
			b[8+j] = uint8(q0&15) | uint8(q1&15)<<4
			qh |= uint32(q0>>4) << j
			qh |= uint32(q1>>4) << (j + 16)
		}
		binary.LittleEndian.PutUint32(b[4:], qh)
		src, dst = src[32:], dst[24:]
	}
}

// ---- Q8_0: f16 d, 32 int8; y = d*q.

func deqQ8_0(src []byte, dst []float32) {
	for len(dst) >= 32 {
		b, y := src[:34], dst[:32]
		d := f16(b)
		qs := b[2:34]
		for j, q := range qs {
			y[j] = float32(int8(q)) * d
		}
		src, dst = src[34:], dst[32:]
	}
}

func dotQ8_0(w []byte, x []float32) float32 {
	var sum float32
	for len(x) >= 32 {
		b, xs := w[:34], x[:32]
		qs := b[2:34]
		var s0, s1, s2, s3 float32
		for j := 0; j < 32; j += 4 {
			s0 += float32(float32(int8(qs[j])) * xs[j])
			s1 += float32(float32(int8(qs[j+1])) * xs[j+1])
			s2 += float32(float32(int8(qs[j+2])) * xs[j+2])
			s3 += float32(float32(int8(qs[j+3])) * xs[j+3])
		}
		sum += float32(f16(b) * ((s0 + s1) + (s2 + s3)))
		w, x = w[34:], x[32:]
	}
	return sum
}

func quantQ8_0(src []float32, dst []byte) {
	for len(src) >= 32 {
		x, b := src[:32], dst[:34]
		amax, _ := absMax(x)
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(b, d)
		for j, v := range x {
			// A subnormal d has an infinite id: ±∞ clamped, 0·∞ (NaN) 0.
			var q int32
			switch y := v * id; {
			case y >= 127:
				q = 127
			case y <= -127:
				q = -127
			case y == y:
				q = roundf(y)
			}
			b[2+j] = uint8(int8(q))
		}
		src, dst = src[32:], dst[34:]
	}
}
