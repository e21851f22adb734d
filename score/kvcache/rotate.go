package kvcache

import (
	"encoding/binary"
	"fmt"
	"math"

	"ppl.dev/quant"
)

// Hadamard replaces v (its length n a power of two) with H·v/√n, H the
// n×n Sylvester-Hadamard matrix: butterflies of stride 1, 2, 4, …, n/2,
// each pair (a, b) at j and j+stride becoming (a+b, a−b) in float32, then
// every element times float32(1/√n) (computed in float64, rounded once).
// H/√n is orthogonal and symmetric, so Hadamard is its own inverse (up to
// rounding).
func Hadamard(v []float32) {
	Butterflies(v)
	s := HadamardScale(len(v))
	for i := range v {
		v[i] *= s
	}
}

// Butterflies replaces v (its length a power of two) with H·v, H the
// Sylvester-Hadamard matrix unscaled: butterflies of stride 1, 2, 4, …,
// n/2, each pair (a, b) at j and j+stride becoming (a+b, a−b) in float32.
// Hadamard scales after them, ggml's transform (nn.FWHT) before.
func Butterflies(v []float32) {
	n := len(v)
	for h := 1; h < n; h *= 2 {
		for i := 0; i < n; i += 2 * h {
			for j := i; j < i+h; j++ {
				a, b := v[j], v[j+h]
				v[j], v[j+h] = a+b, a-b
			}
		}
	}
}

// HadamardScale is float32(1/√n), Hadamard's final factor.
func HadamardScale(n int) float32 { return float32(1 / math.Sqrt(float64(n))) }

// Rotated stores each token's head rotated by Hadamard in the Inner
// format, and reads it back by decoding Inner and rotating again (H/√n is
// its own inverse). Head sizes must be powers of two (Check).
type Rotated struct{ Inner Codec }

func (r Rotated) Name() string { return "r" + r.Inner.Name() }

// Check refuses head sizes that are not powers of two.
func (r Rotated) Check(headDim int) error {
	if headDim <= 0 || headDim&(headDim-1) != 0 {
		return fmt.Errorf("keys are rotated by a Walsh-Hadamard transform, which needs a power-of-two head size, not %d", headDim)
	}
	return nil
}

func (r Rotated) Encode(b *Block, x []float32, tokens, heads, headDim int) {
	if err := r.Check(headDim); err != nil {
		panic(err.Error()) // callers check the model's head size first (Format.Check)
	}
	if cap(b.rot) < len(x) {
		b.rot = make([]float32, len(x))
	}
	rot := b.rot[:len(x)]
	copy(rot, x)
	for g := range tokens * heads {
		Hadamard(rot[g*headDim : (g+1)*headDim])
	}
	r.Inner.Encode(b, rot, tokens, heads, headDim)
}

func (r Rotated) Decode(b *Block, x []float32) {
	r.Inner.Decode(b, x)
	hd := b.HeadDim
	for g := range b.Tokens * b.Heads {
		Hadamard(x[g*hd : (g+1)*hd])
	}
}

// Q2 stores values in blocks of 32 along each token's head (shorter tail
// blocks count the missing values as 0), 10 bytes each: fp16 d, then 8
// bytes of 2-bit codes, element j in bits 2·(j%4) of byte j/4. Codes
// 0..3 stand for −1.5, −0.5, 0.5, 1.5 times d. rk2v4's key format.
type Q2 struct{}

func (Q2) Name() string { return "q2" }

const (
	q2Block = 32
	q2Bytes = 2 + q2Block/4
)

func (Q2) Encode(b *Block, x []float32, tokens, heads, headDim int) {
	setShape(b, tokens, heads, headDim)
	nb := blocks(headDim, q2Block)
	b.Data, b.Scales = grow(b.Data, tokens*heads*nb*q2Bytes), nil
	var v [q2Block]float32
	for g := range tokens * heads {
		for k := range nb {
			lo, hi := k*q2Block, min((k+1)*q2Block, headDim)
			clear(v[:])
			copy(v[:], x[g*headDim+lo:g*headDim+hi])
			encodeQ2(b.Data[(g*nb+k)*q2Bytes:(g*nb+k+1)*q2Bytes], v[:])
		}
	}
}

// encodeQ2: d = amax/1.5 (NaN when the block has a NaN or an infinity),
// id = 1/d (0 when d is 0 or NaN), code = clamp(rne(x·id + 1.5), 0, 3),
// stored d = fp16(d).
func encodeQ2(dst []byte, v []float32) {
	d := amax(v) / 1.5
	var id float32
	if d != 0 && d == d {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(dst, quant.F32ToF16(d))
	q := dst[2:q2Bytes]
	clear(q)
	for j, x := range v {
		r := math.RoundToEven(float64(float32(x*id) + 1.5))
		c := uint8(max(0, min(3, r)))
		q[j/4] |= c << (2 * (j % 4))
	}
}

func (Q2) Decode(b *Block, x []float32) {
	hd := b.HeadDim
	nb := blocks(hd, q2Block)
	for g := range b.Tokens * b.Heads {
		for k := range nb {
			blk := b.Data[(g*nb+k)*q2Bytes : (g*nb+k+1)*q2Bytes]
			d := quant.F16ToF32(binary.LittleEndian.Uint16(blk))
			lo, hi := k*q2Block, min((k+1)*q2Block, hd)
			for j := lo; j < hi; j++ {
				i := j - lo
				c := blk[2+i/4] >> (2 * (i % 4)) & 3
				x[g*hd+j] = (float32(c) - 1.5) * d
			}
		}
	}
}
