//go:build amd64 || arm64

package quant

import "ppl.dev/gguf"

// Dequantization and integer decoding in two steps, for the types whose
// weights are S·(q − Offset) + M of a code q gathered from bit fields (the
// section comment of int8.go): the legacy types, the K-quants, IQ4_NL,
// IQ4_XS, TQ2_0 and MXFP4. A vector kernel per layout writes a block's
// codes (codes*, in fast_amd64.s and fast_arm64.s), the scalar functions
// of the reference decoders or halfScales their scales and minima, and to
// dequantize one kernel for every type (affine) turns each group's codes
// into S·(q − Offset), plus M where the type has minima. That is the
// reference dequantizer's arithmetic: without minima, the same one
// product; with them (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K), S·q is exact in
// float32 (S an f16, or an f16 times an integer of at most 6 bits, q at
// most 5 bits), so the fused multiply-add rounds once where the reference
// rounds the sum of the same exact product, and x + M with M = −(dmin·m)
// is x − dmin·m to the bit.
//
// Every level gets these; the kernels a level has of its own for a type,
// set after them, take its place (AVX-512's fused dequantizers and
// decoders, the low-bit kernels' MXFP4 on amd64, NEON's dequantizers).

// codeTypes are the types of this scheme.
var codeTypes = [...]gguf.Type{
	gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0, gguf.TypeQ5_1, gguf.TypeQ8_0,
	gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K,
	gguf.TypeIQ4_NL, gguf.TypeIQ4_XS, gguf.TypeTQ2_0, gguf.TypeMXFP4,
}

// codeKernels adds the scheme's dequantizers, integer decoders and code
// kernels to level l (one implementation per architecture serves each of
// its levels). The code kernels stay DecodeCodes's at a level whose own
// integer decoders replace decodeViaCodes: the codes are the same bytes.
func codeKernels(l Level) {
	for _, t := range codeTypes {
		levelDeq[l][t] = func(src []byte, dst []float32) { deqViaCodes(t, src, dst) }
		levelInt8[l][t] = func(w, q []byte, s, m []float32) { decodeViaCodes(t, w, q, s, m) }
		levelCodes[l][t] = func(w, q []byte) {
			f := lookup(t)
			if n := len(q) / f.bs; n > 0 {
				_ = w[n*f.ts-1]
				blockCodes(t, &w[0], &q[0], n)
			}
		}
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
	case gguf.TypeQ4_1, gguf.TypeQ5_1: // s and m the f16s at 0 and 2
		halfScales(&w[0], &s[0], n, f.ts)
		halfScales(&w[2], &m[0], n, f.ts)
		return
	case gguf.TypeQ4_0, gguf.TypeQ5_0, gguf.TypeQ8_0, gguf.TypeIQ4_NL: // s the f16 at 0
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

// blockScales writes the scales (and minima) of one block of t, a K-quant,
// IQ4_XS or TQ2_0 (the blocks of 32 weights have halfScales, MXFP4 its
// E8M0 bytes).
func blockScales(t gguf.Type, b []byte, s, m []float32) {
	switch t {
	case gguf.TypeQ2_K:
		scalesQ2_K(b, s, m)
	case gguf.TypeQ3_K:
		scalesQ3_K(b, s, m)
	case gguf.TypeQ4_K, gguf.TypeQ5_K:
		scalesK4(b, s, m)
	case gguf.TypeQ6_K:
		scalesQ6_K(b, s, m)
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
	case gguf.TypeQ4_0:
		codesNibbles(w, q, &nibbleBytes, n, 18, 1)
	case gguf.TypeQ4_1:
		codesNibbles(w, q, &nibbleBytes, n, 20, 1)
	case gguf.TypeQ5_0:
		codesQ5(w, q, n, 22)
	case gguf.TypeQ5_1:
		codesQ5(w, q, n, 24)
	case gguf.TypeQ8_0:
		codesQ8_0(w, q, n)
	case gguf.TypeQ4_K:
		codesQ4_K(w, q, n)
	case gguf.TypeQ6_K:
		codesQ6_K(w, q, n)
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

// nibbleBytes maps each nibble to itself: Q4_0's and Q4_1's codes are
// their nibbles.
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

// codesQ5 writes the codes of n blocks of Q5_0 (ts 22) or Q5_1 (ts 24):
// the 32 high bits at ts − 20, the 16 bytes of nibbles at ts − 16.
//
//go:noescape
func codesQ5(w, q *byte, n, ts int)

// codesQ8_0, codesQ3_K, codesQ4_K, codesQ5_K and codesQ6_K write the codes
// of n blocks.
//
//go:noescape
func codesQ8_0(w, q *byte, n int)

//go:noescape
func codesQ4_K(w, q *byte, n int)

//go:noescape
func codesQ6_K(w, q *byte, n int)

//go:noescape
func codesQ3_K(w, q *byte, n int)

//go:noescape
func codesQ5_K(w, q *byte, n int)

// halfScales converts the f16 at the start of each of n blocks of ts bytes
// from w to s: the legacy types' and IQ4_NL's scales (and Q4_1's and
// Q5_1's minima, from w+2).
// It quiets a signaling NaN, as the other kernels' conversions do.
//
//go:noescape
func halfScales(w *byte, s *float32, n, ts int)

// affine sets y to s[j]·(q − off), plus m[j] unless m is nil, for the
// groups j of glen codes (a multiple of 16) of q.
//
//go:noescape
func affine(q *byte, s, m *float32, y *float32, groups, glen, off int)
