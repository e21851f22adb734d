package kvcache

import (
	"encoding/binary"
	"math"

	"ppl.dev/quant"
)

// Q4 stores values as ggml's Q4_0 blocks (fp16 scale, 32 4-bit values) laid
// along each token's head; the value half of k8v4.
type Q4 struct{}

func (Q4) Name() string { return "q4" }

const (
	q4Block = 32
	q4Bytes = 2 + q4Block/2
)

// blocks returns the number of blocks of size bs that cover n elements.
func blocks(n, bs int) int { return (n + bs - 1) / bs }

func (Q4) Encode(b *Block, x []float32, tokens, heads, headDim int) {
	setShape(b, tokens, heads, headDim)
	nb := blocks(headDim, q4Block)
	b.Data, b.Scales = grow(b.Data, tokens*heads*nb*q4Bytes), nil
	for g := range tokens * heads {
		for k := range nb {
			lo, hi := k*q4Block, min((k+1)*q4Block, headDim)
			encodeQ4(b.Data[(g*nb+k)*q4Bytes:(g*nb+k+1)*q4Bytes], x[g*headDim+lo:g*headDim+hi])
		}
	}
}

// encodeQ4 writes one Q4_0 block of up to 32 values (missing ones count as
// 0) as quantize_row_q4_0_ref does; non-finite input stores a NaN scale.
func encodeQ4(dst []byte, v []float32) {
	var amax, m float32
	finite := true
	for _, x := range v {
		a := float32(math.Abs(float64(x)))
		if !(a <= math.MaxFloat32) {
			finite = false
		}
		if a > amax {
			amax, m = a, x
		}
	}
	d := m / -8
	var id float32
	if d != 0 {
		id = 1 / d
	}
	if !finite {
		d, id = float32(math.NaN()), 0
	}
	binary.LittleEndian.PutUint16(dst, quant.F32ToF16(d))
	q := dst[2:q4Bytes]
	for j := range q4Block / 2 {
		q[j] = nibble(v, j, id) | nibble(v, j+q4Block/2, id)<<4
	}
}

func nibble(v []float32, j int, id float32) uint8 {
	var x float32
	if j < len(v) {
		x = v[j]
	}
	return uint8(min(15, int8(float32(x*id)+8.5)))
}

func (Q4) Decode(b *Block, x []float32) {
	hd := b.HeadDim
	nb := blocks(hd, q4Block)
	for g := range b.Tokens * b.Heads {
		for k := range nb {
			blk := b.Data[(g*nb+k)*q4Bytes : (g*nb+k+1)*q4Bytes]
			d := quant.F16ToF32(binary.LittleEndian.Uint16(blk))
			lo, hi := k*q4Block, min((k+1)*q4Block, hd)
			for j := lo; j < hi; j++ {
				i := j - lo
				nib := blk[2+i%(q4Block/2)]
				if i >= q4Block/2 {
					nib >>= 4
				}
				x[g*hd+j] = float32(int(nib&0xf)-8) * d
			}
		}
	}
}
