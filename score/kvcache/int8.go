package kvcache

import "math"

// Int8 stores symmetric int8 values with one float32 scale per token and
// head: d = amax/127, q = clamp(rne(x/d), -127, 127).
type Int8 struct{}

func (Int8) Name() string { return "int8" }

func (Int8) Encode(b *Block, x []float32, tokens, heads, headDim int) {
	setShape(b, tokens, heads, headDim)
	groups := tokens * heads
	b.Data, b.Scales = grow(b.Data, len(x)), grow(b.Scales, 4*groups)
	for g := range groups {
		v := x[g*headDim : (g+1)*headDim]
		d := amax(v) / 127
		putF32(b.Scales[4*g:], d)
		q := b.Data[g*headDim : (g+1)*headDim]
		for i, xi := range v {
			q[i] = uint8(int8(quantInt8(xi, d)))
		}
	}
}

// quantInt8 returns clamp(rne(x/d), -127, 127), 0 when d is 0 or not finite.
func quantInt8(x, d float32) int {
	if d == 0 || d != d {
		return 0
	}
	r := math.RoundToEven(float64(x / d))
	return int(max(-127, min(127, r)))
}

func (Int8) Decode(b *Block, x []float32) {
	hd := b.HeadDim
	for g := range b.Tokens * b.Heads {
		d := getF32(b.Scales[4*g:])
		for i, q := range b.Data[g*hd : (g+1)*hd] {
			x[g*hd+i] = float32(int8(q)) * d
		}
	}
}

// FP8 stores E4M3 values with one float32 scale per token and head:
// d = amax/448, q = e4m3(x/d).
type FP8 struct{}

func (FP8) Name() string { return "fp8" }

func (FP8) Encode(b *Block, x []float32, tokens, heads, headDim int) {
	setShape(b, tokens, heads, headDim)
	groups := tokens * heads
	b.Data, b.Scales = grow(b.Data, len(x)), grow(b.Scales, 4*groups)
	for g := range groups {
		v := x[g*headDim : (g+1)*headDim]
		d := amax(v) / 448
		putF32(b.Scales[4*g:], d)
		q := b.Data[g*headDim : (g+1)*headDim]
		for i, xi := range v {
			if d == 0 || d != d {
				q[i] = 0
			} else {
				q[i] = E4M3(xi / d)
			}
		}
	}
}

func (FP8) Decode(b *Block, x []float32) {
	hd := b.HeadDim
	for g := range b.Tokens * b.Heads {
		d := getF32(b.Scales[4*g:])
		for i, q := range b.Data[g*hd : (g+1)*hd] {
			x[g*hd+i] = E4M3Value(q) * d
		}
	}
}
