package kvcache

import (
	"encoding/binary"
	"fmt"
	"math"

	"ppl.dev/gguf"
	"ppl.dev/quant"
)

// GGML stores values as one of ggml's 32-element block types (Q8_0, Q4_1,
// Q5_0, Q5_1, IQ4_NL) laid along each token's head: llama.cpp's -ctk/-ctv
// cache types. Q4_0 is Q4 (k8v4's value codec), the same bytes.
type GGML struct {
	T gguf.Type
	// CPU, for Q8_0, quantizes as ggml-cpu's x86 quantize_row_q8_0, which
	// llama.cpp's CPU writes its cache with (id = 127/amax, rounded half
	// to even) rather than the reference (id = 1/d, rounded half away
	// from zero): the same bytes but for values an ulp from a rounding
	// boundary.
	CPU bool
}

// ggmlNames are the codec (and --kv-dtype) names of GGML's types.
var ggmlNames = map[gguf.Type]string{
	gguf.TypeQ8_0: "q8_0", gguf.TypeQ4_1: "q4_1", gguf.TypeQ5_0: "q5_0",
	gguf.TypeQ5_1: "q5_1", gguf.TypeIQ4_NL: "iq4_nl",
}

func (c GGML) Name() string { return ggmlNames[c.T] }

const ggmlBlock = 32

func (c GGML) Encode(b *Block, x []float32, tokens, heads, headDim int) {
	setShape(b, tokens, heads, headDim)
	ts := c.T.TypeSize()
	nb := blocks(headDim, ggmlBlock)
	b.Data, b.Scales = grow(b.Data, tokens*heads*nb*ts), nil
	var v [ggmlBlock]float32
	for g := range tokens * heads {
		for k := range nb {
			lo, hi := k*ggmlBlock, min((k+1)*ggmlBlock, headDim)
			clear(v[:])
			copy(v[:], x[g*headDim+lo:g*headDim+hi])
			dst := b.Data[(g*nb+k)*ts : (g*nb+k+1)*ts]
			if c.CPU && c.T == gguf.TypeQ8_0 && amax(v[:]) <= math.MaxFloat32 {
				encodeQ8CPU(dst, v[:])
				continue
			}
			encodeGGML(c.T, dst, v[:])
		}
	}
}

// encodeGGML writes one block of 32 values as ggml's quantize_row_*_ref
// does (quant.Quantize; IQ4_NL by quantIQ4NL). A block with a NaN or an
// infinity gets NaN scales (and offsets) and zero quants instead.
func encodeGGML(t gguf.Type, dst []byte, v []float32) {
	if !(amax(v) <= math.MaxFloat32) {
		clear(dst)
		nan := quant.F32ToF16(float32(math.NaN()))
		binary.LittleEndian.PutUint16(dst, nan)
		if t == gguf.TypeQ4_1 || t == gguf.TypeQ5_1 {
			binary.LittleEndian.PutUint16(dst[2:], nan)
		}
		return
	}
	if t == gguf.TypeIQ4_NL {
		quantIQ4NL(v, dst, -1)
		return
	}
	if err := quant.Quantize(t, v, dst); err != nil {
		panic(fmt.Sprintf("kvcache: %v", err)) // finite input, whole block: cannot happen
	}
}

// encodeQ8CPU writes one Q8_0 block of finite values as ggml-cpu's x86
// quantize_row_q8_0: d = amax/127 as float16, q = rne(x·(127/amax)); an
// all-zero block d = 0, q = 0.
func encodeQ8CPU(dst []byte, v []float32) {
	a := amax(v)
	var id float32
	if a != 0 {
		id = 127 / a
	}
	binary.LittleEndian.PutUint16(dst, quant.F32ToF16(a/127))
	for i, x := range v {
		dst[2+i] = byte(int8(math.RoundToEven(float64(x * id))))
	}
}

func (c GGML) Decode(b *Block, x []float32) {
	hd, ts := b.HeadDim, c.T.TypeSize()
	nb := blocks(hd, ggmlBlock)
	var v [ggmlBlock]float32
	for g := range b.Tokens * b.Heads {
		for k := range nb {
			quant.DequantizeRow(c.T, b.Data[(g*nb+k)*ts:(g*nb+k+1)*ts], v[:])
			lo, hi := k*ggmlBlock, min((k+1)*ggmlBlock, hd)
			copy(x[g*hd+lo:g*hd+hi], v[:hi-lo])
		}
	}
}

// iq4Values is ggml's kvalues_iq4nl.
var iq4Values = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// bestIndexIQ4 is ggml's best_index_int8(16, kvalues_iq4nl, x): the index
// of the nearest table value, the upper one on ties.
func bestIndexIQ4(x float32) uint8 {
	if x <= float32(iq4Values[0]) {
		return 0
	}
	if x >= float32(iq4Values[15]) {
		return 15
	}
	ml, mu := 0, 15
	for mu-ml > 1 {
		mav := (ml + mu) / 2
		if x < float32(iq4Values[mav]) {
			mu = mav
		} else {
			ml = mav
		}
	}
	if x-float32(iq4Values[mu-1]) < float32(iq4Values[mu])-x {
		return uint8(mu - 1)
	}
	return uint8(mu)
}

// quantIQ4NL writes one IQ4_NL block of the 32 values x as ggml's
// quantize_row_iq4_nl_impl(32, 32, ..., quant_weights NULL, ntry) does:
// ntry = -1 is quantize_row_iq4_nl_ref (the cache's, and llama.cpp's CPU
// set_rows), ntry = 7 is llama-quantize's (quantize_iq4_nl, tested against
// the oracle's zoo). Weights are x². A block whose largest magnitude is
// under 1e-15 (GROUP_MAX_EPS) gets scale 0 and, where ggml leaves its
// indices unset, index 8 (the table value nearest 0).
func quantIQ4NL(x []float32, dst []byte, ntry int) {
	var L [32]uint8
	var w [32]float32
	for j, v := range x {
		w[j] = v * v
	}
	var amx, mx float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > amx {
			amx, mx = a, v
		}
	}
	var d float32
	if amx < 1e-15 {
		for j := range L {
			L[j] = 8
		}
	} else {
		v0 := float32(iq4Values[0])
		if ntry > 0 {
			d = -mx / v0
		} else {
			d = mx / v0
		}
		id := 1 / d
		var sumqx, sumq2 float32
		for j, v := range x {
			l := bestIndexIQ4(float32(id * v))
			L[j] = l
			q := float32(iq4Values[l])
			sumqx += float32(float32(w[j]*q) * v)
			sumq2 += float32(float32(w[j]*q) * q)
		}
		d = sumqx / sumq2
		best := float32(d * sumqx)
		for itry := -ntry; itry <= ntry; itry++ {
			id = float32(itry+int(iq4Values[0])) / mx
			sumqx, sumq2 = 0, 0
			for j, v := range x {
				q := float32(iq4Values[bestIndexIQ4(float32(id*v))])
				sumqx += float32(float32(w[j]*q) * v)
				sumq2 += float32(float32(w[j]*q) * q)
			}
			if sumq2 > 0 && float32(sumqx*sumqx) > float32(best*sumq2) {
				d = sumqx / sumq2
				best = float32(d * sumqx)
			}
		}
	}
	binary.LittleEndian.PutUint16(dst, quant.F32ToF16(d))
	if ntry > 0 {
		var id float32
		if d != 0 {
			id = 1 / d
		}
		for j, v := range x {
			L[j] = bestIndexIQ4(float32(id * v))
		}
	}
	for j := range 16 {
		dst[2+j] = L[j] | L[j+16]<<4
	}
}
