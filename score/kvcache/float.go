package kvcache

import (
	"encoding/binary"
	"math"

	"ppl.dev/quant"
)

// F32 stores float32 values as they are.
type F32 struct{}

func (F32) Name() string { return "f32" }

func (F32) Encode(b *Block, x []float32, tokens, heads, headDim int) {
	setShape(b, tokens, heads, headDim)
	b.Data, b.Scales = grow(b.Data, 4*len(x)), nil
	for i, v := range x {
		binary.LittleEndian.PutUint32(b.Data[4*i:], math.Float32bits(v))
	}
}

func (F32) Decode(b *Block, x []float32) {
	for i := range x[:b.n()] {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b.Data[4*i:]))
	}
}

// F16 stores IEEE binary16 values, rounded to nearest even.
type F16 struct{}

func (F16) Name() string { return "f16" }

func (F16) Encode(b *Block, x []float32, tokens, heads, headDim int) {
	setShape(b, tokens, heads, headDim)
	b.Data, b.Scales = grow(b.Data, 2*len(x)), nil
	for i, v := range x {
		binary.LittleEndian.PutUint16(b.Data[2*i:], quant.F32ToF16(v))
	}
}

func (F16) Decode(b *Block, x []float32) {
	for i := range x[:b.n()] {
		x[i] = quant.F16ToF32(binary.LittleEndian.Uint16(b.Data[2*i:]))
	}
}

// BF16 stores bfloat16 values, rounded to nearest even.
type BF16 struct{}

func (BF16) Name() string { return "bf16" }

func (BF16) Encode(b *Block, x []float32, tokens, heads, headDim int) {
	setShape(b, tokens, heads, headDim)
	b.Data, b.Scales = grow(b.Data, 2*len(x)), nil
	for i, v := range x {
		binary.LittleEndian.PutUint16(b.Data[2*i:], quant.F32ToBF16(v))
	}
}

func (BF16) Decode(b *Block, x []float32) {
	for i := range x[:b.n()] {
		x[i] = quant.BF16ToF32(binary.LittleEndian.Uint16(b.Data[2*i:]))
	}
}

// amax returns max |v| over x, or NaN when x holds a NaN or an infinity.
func amax(x []float32) float32 {
	var m float32
	for _, v := range x {
		a := float32(math.Abs(float64(v)))
		if !(a <= math.MaxFloat32) {
			return float32(math.NaN())
		}
		m = max(m, a)
	}
	return m
}

func putF32(b []byte, v float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(v)) }
func getF32(b []byte) float32    { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }
