//go:build amd64 || arm64

package quant

import "ppl.dev/gguf"

// Dequantization and integer decoding in two steps, for the types whose
// weights are S·(q − Offset) + M of a code q gathered from bit fields (the
// section comment of int8.go): Q4_1, Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS and
// TQ2_0.
// A vector kernel per type writes a block's codes (codes<Type>, in
// fast_amd64.s and fast_arm64.s), the scalar functions of the reference
// decoders their scales and minima (scales<Type>), and to dequantize one
// kernel for every type (affine) turns each group's codes into
// S·(q − Offset), plus M where the type has minima. That is the reference
// dequantizer's arithmetic: S·(q − Offset) is exact in float32 for every
// type here (S is an f16, or an f16 times an integer of at most 6 bits, q −
// Offset an integer of at most 7), so the fused multiply-add rounds once
// where the reference rounds the sum of the same exact product, and x + M
// with M = −(dmin·m) is x − dmin·m to the bit.

// codeTypes are the types of this scheme, in the order of codeKernels.
var codeTypes = [...]gguf.Type{
	gguf.TypeQ4_1, gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ5_K, gguf.TypeIQ4_NL, gguf.TypeIQ4_XS, gguf.TypeTQ2_0,
}

// codeKernels adds the scheme's dequantizers and integer decoders to
// level l (one implementation per architecture serves each of its levels),
// and those of the extra types (MXFP4 on arm64, which has no kernel of its
// own there).
func codeKernels(l Level, extra ...gguf.Type) {
	for _, t := range append(codeTypes[:], extra...) {
		levelDeq[l][t] = func(src []byte, dst []float32) { deqViaCodes(t, src, dst) }
		levelInt8[l][t] = func(w, q []byte, s, m []float32) { decodeViaCodes(t, w, q, s, m) }
	}
}

// decodeViaCodes is DecodeInt8 of whole blocks of t: the codes of every
// block by the vector kernel, then each block's scales.
func decodeViaCodes(t gguf.Type, w, q []byte, s, m []float32) {
	f, g := lookup(t), int8Formats[t].Group
	n := len(q) / f.bs
	if n == 0 {
		return
	}
	_ = w[n*f.ts-1]
	blockCodes(t, &w[0], &q[0], n)
	switch t {
	case gguf.TypeQ4_1: // s and m the f16s at 0 and 2
		halfScales(&w[0], &s[0], n, f.ts)
		halfScales(&w[2], &m[0], n, f.ts)
		return
	case gguf.TypeIQ4_NL: // s the f16 at 0
		halfScales(&w[0], &s[0], n, f.ts)
		return
	case gguf.TypeMXFP4: // s the E8M0 byte at 0
		for i := range n {
			s[i] = e8m0Half(w[i*f.ts])
		}
		return
	}
	per := f.bs / g
	for i := range n {
		b := w[i*f.ts : (i+1)*f.ts]
		if m == nil {
			blockScales(t, b, s[i*per:(i+1)*per], nil)
		} else {
			blockScales(t, b, s[i*per:(i+1)*per], m[i*per:(i+1)*per])
		}
	}
}

// deqViaCodes dequantizes whole blocks of t, 256 weights at a time
// through codes, scales and minima on the stack.
func deqViaCodes(t gguf.Type, src []byte, dst []float32) {
	f, i8 := lookup(t), int8Formats[t]
	per := 256 / f.bs // blocks a step
	var (
		q    [256]byte
		s, m [16]float32
	)
	var mp *float32
	if i8.HasMin {
		mp = &m[0]
	}
	for len(dst) >= f.bs {
		nb := min(per, len(dst)/f.bs)
		n := nb * f.bs
		decodeViaCodes(t, src[:nb*f.ts], q[:n], s[:], m[:])
		affine(&q[0], &s[0], mp, &dst[0], n/i8.Group, i8.Group, i8.Offset)
		src, dst = src[nb*f.ts:], dst[n:]
	}
}

// blockScales writes the scales (and minima) of one block of t, a K-quant
// or IQ4_XS (the blocks of 32 weights have halfScales).
func blockScales(t gguf.Type, b []byte, s, m []float32) {
	switch t {
	case gguf.TypeQ2_K:
		scalesQ2_K(b, s, m)
	case gguf.TypeQ3_K:
		scalesQ3_K(b, s, m)
	case gguf.TypeQ5_K:
		scalesQ5_K(b, s, m)
	case gguf.TypeIQ4_XS:
		scalesIQ4_XS(b, s, m)
	case gguf.TypeTQ2_0: // d for every group
		d := f16(b[64:])
		for j := range 8 {
			s[j] = d
		}
	}
}

// blockCodes runs t's code kernel over n blocks from w to q.
func blockCodes(t gguf.Type, w, q *byte, n int) {
	switch t {
	case gguf.TypeQ4_1:
		codesNibbles(w, q, &nibbleBytes, n, 20, 1)
	case gguf.TypeQ2_K:
		codes2Bit(w, q, n, 84, 16)
	case gguf.TypeQ3_K:
		codesQ3_K(w, q, n)
	case gguf.TypeQ5_K:
		codesQ5_K(w, q, n)
	case gguf.TypeIQ4_NL:
		codesNibbles(w, q, &iq4Bytes, n, 18, 1)
	case gguf.TypeIQ4_XS:
		codesNibbles(w, q, &iq4Bytes, n, 136, 8)
	case gguf.TypeTQ2_0:
		codes2Bit(w, q, n, 66, 0)
	case gguf.TypeMXFP4:
		codesNibbles(w, q, &fp4Bytes, n, 17, 1)
	}
}

// fp4Bytes are MXFP4's codes: fp4Values plus 128.
var fp4Bytes = func() (t [16]byte) {
	for i, v := range fp4Values {
		t[i] = byte(128 + int(v))
	}
	return t
}()

// nibbleBytes maps each nibble to itself: Q4_1's codes are its nibbles.
var nibbleBytes = [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}

// The kernels of fast_amd64.s and fast_arm64.s.

// codesNibbles writes the codes of n blocks of ts bytes that end in units
// runs of 16 bytes of nibbles: each run gives 32 codes, tab of its low
// nibbles, then tab of its high ones.
//
//go:noescape
func codesNibbles(w, q *byte, tab *[16]byte, n, ts, units int)

// codes2Bit writes the codes of n blocks of ts bytes with 64 bytes of
// 2-bit fields at off (Q2_K's, TQ2_0's): code 128h + 32l + m is bits 2l,
// 2l+1 of byte 32h + m.
//
//go:noescape
func codes2Bit(w, q *byte, n, ts, off int)

// codesQ3_K and codesQ5_K write the codes of n blocks.
//
//go:noescape
func codesQ3_K(w, q *byte, n int)

//go:noescape
func codesQ5_K(w, q *byte, n int)

// halfScales converts the f16 at the start of each of n blocks of ts bytes
// from w to s: Q4_1's and IQ4_NL's scales (and Q4_1's minima, from w+2).
// It quiets a signaling NaN, as the other kernels' conversions do.
//
//go:noescape
func halfScales(w *byte, s *float32, n, ts int)

// affine sets y to s[j]·(q − off), plus m[j] unless m is nil, for the
// groups j of glen codes (a multiple of 16) of q.
//
//go:noescape
func affine(q *byte, s, m *float32, y *float32, groups, glen, off int)
