package quant

import (
	"encoding/binary"
	"math"
)

// F32, F16 and BF16: one weight per "block".

func deqF32(src []byte, dst []float32) {
	src = src[:4*len(dst)]
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func dotF32(w []byte, x []float32) float32 {
	w = w[:4*len(x)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		b := w[4*i : 4*i+16]
		s0 += float32(math.Float32frombits(binary.LittleEndian.Uint32(b[0:])) * x[i])
		s1 += float32(math.Float32frombits(binary.LittleEndian.Uint32(b[4:])) * x[i+1])
		s2 += float32(math.Float32frombits(binary.LittleEndian.Uint32(b[8:])) * x[i+2])
		s3 += float32(math.Float32frombits(binary.LittleEndian.Uint32(b[12:])) * x[i+3])
	}
	for ; i < len(x); i++ {
		s0 += float32(math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:])) * x[i])
	}
	return (s0 + s1) + (s2 + s3)
}

func quantF32(src []float32, dst []byte) {
	dst = dst[:4*len(src)]
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

func deqF16(src []byte, dst []float32) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

func dotF16(w []byte, x []float32) float32 {
	w = w[:2*len(x)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		b := w[2*i : 2*i+8]
		s0 += float32(F16ToF32(binary.LittleEndian.Uint16(b[0:])) * x[i])
		s1 += float32(F16ToF32(binary.LittleEndian.Uint16(b[2:])) * x[i+1])
		s2 += float32(F16ToF32(binary.LittleEndian.Uint16(b[4:])) * x[i+2])
		s3 += float32(F16ToF32(binary.LittleEndian.Uint16(b[6:])) * x[i+3])
	}
	for ; i < len(x); i++ {
		s0 += float32(F16ToF32(binary.LittleEndian.Uint16(w[2*i:])) * x[i])
	}
	return (s0 + s1) + (s2 + s3)
}

func quantF16(src []float32, dst []byte) {
	dst = dst[:2*len(src)]
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
	}
}

func deqBF16(src []byte, dst []float32) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

func dotBF16(w []byte, x []float32) float32 {
	w = w[:2*len(x)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		b := w[2*i : 2*i+8]
		s0 += float32(BF16ToF32(binary.LittleEndian.Uint16(b[0:])) * x[i])
		s1 += float32(BF16ToF32(binary.LittleEndian.Uint16(b[2:])) * x[i+1])
		s2 += float32(BF16ToF32(binary.LittleEndian.Uint16(b[4:])) * x[i+2])
		s3 += float32(BF16ToF32(binary.LittleEndian.Uint16(b[6:])) * x[i+3])
	}
	for ; i < len(x); i++ {
		s0 += float32(BF16ToF32(binary.LittleEndian.Uint16(w[2*i:])) * x[i])
	}
	return (s0 + s1) + (s2 + s3)
}

func quantBF16(src []float32, dst []byte) {
	dst = dst[:2*len(src)]
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(v))
	}
}
