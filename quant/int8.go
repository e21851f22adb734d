package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"ppl.dev/gguf"
)

// Integer decoding, for matrix products that multiply weights with
// activations quantized to 8 bits (llama.cpp's way on the CPU): each
// weight is written as an unsigned 8-bit integer q and a scale and
// minimum shared by a group of weights,
//
//	weight i = S[j]·(q[i] - Offset) + M[j],  j = i / Group,
//
// exactly: q - Offset is the quant of the block format (a nibble minus 8
// for Q4_0, a signed byte for Q8_0, an index into the non-linear table for
// IQ4), S the product of the block scale and the sub-block scale, and M the
// block minimum (zero for formats without one). A product with quantized
// activations x = dx·qx then needs only the integer sums Σ q·qx and Σ qx
// per group, with Offset folded into the second.

// Int8Format describes a type's integer decoding.
type Int8Format struct {
	Group  int // weights per scale: 32, or 16 for Q2_K, Q3_K and Q6_K
	Offset int // added to each quant to make it unsigned: 0, 1, 4, 8, 16, 32 or 128
	// Max bounds q: the largest q a block decodes to (255 for the formats
	// with Offset 128, whose bound is the byte's); kernels that multiply
	// narrow integers (below 64) rely on it.
	Max    int
	HasMin bool // whether M can be nonzero
	// ActBlock is how llama.cpp quantizes the activations this type is
	// multiplied with (its vec_dot_type): 32 for Q8_0 blocks (an f16 scale
	// per 32 values; also MXFP4's, NVFP4's, Q1_0's and Q2_0's), 256 for Q8_K blocks (a
	// float32 scale per 256), the K-quants', the other i-quants' and the
	// ternary types'.
	ActBlock int
}

var int8Formats = [len(formats)]Int8Format{
	gguf.TypeQ4_0:   {32, 8, 15, false, 32},
	gguf.TypeQ4_1:   {32, 0, 15, true, 32},
	gguf.TypeQ5_0:   {32, 16, 31, false, 32},
	gguf.TypeQ5_1:   {32, 0, 31, true, 32},
	gguf.TypeQ8_0:   {32, 128, 255, false, 32},
	gguf.TypeQ2_K:   {16, 0, 3, true, 256},
	gguf.TypeQ3_K:   {16, 4, 7, false, 256},
	gguf.TypeQ4_K:   {32, 0, 15, true, 256},
	gguf.TypeQ5_K:   {32, 0, 31, true, 256},
	gguf.TypeQ6_K:   {16, 32, 63, false, 256},
	gguf.TypeQ8_K:   {32, 128, 255, false, 256},
	gguf.TypeIQ4_NL: {32, 128, 255, false, 32},
	gguf.TypeIQ4_XS: {32, 128, 255, false, 256},
	// llama.cpp multiplies the i-quants and the ternary types with Q8_K
	// activations, MXFP4 and NVFP4 with Q8_0.
	gguf.TypeIQ2_XXS: lbIQ2_XXS.int8(256, 255),
	gguf.TypeIQ2_XS:  lbIQ2_XS.int8(256, 255),
	gguf.TypeIQ2_S:   lbIQ2_S.int8(256, 255),
	gguf.TypeIQ3_XXS: lbIQ3_XXS.int8(256, 255),
	gguf.TypeIQ3_S:   lbIQ3_S.int8(256, 255),
	gguf.TypeIQ1_S:   lbIQ1_S.int8(256, 255),
	gguf.TypeIQ1_M:   lbIQ1_M.int8(256, 255),
	gguf.TypeTQ1_0:   lbTQ1_0.int8(256, 2),
	gguf.TypeTQ2_0:   lbTQ2_0.int8(256, 3),
	gguf.TypeMXFP4:   lbMXFP4.int8(32, 255),
	gguf.TypeNVFP4:   lbNVFP4.int8(32, 255),
	// Q1_0 and Q2_0 with Q8_0 activations, their one scale per block
	// repeated for each group of 32.
	gguf.TypeQ1_0: lbQ1_0.int8(32, 2),
	gguf.TypeQ2_0: lbQ2_0.int8(32, 3),
}

// Int8FormatOf returns t's integer decoding; ok is false for the float
// types (F32, F16, BF16), which have none, and unsupported ones.
func Int8FormatOf(t gguf.Type) (f Int8Format, ok bool) {
	if uint64(t) >= uint64(len(int8Formats)) || int8Formats[t].Group == 0 {
		return Int8Format{}, false
	}
	return int8Formats[t], true
}

// DecodeInt8 decodes the row w of len(q) weights of type t: q[i] (see the
// section comment) and S[j], M[j] for each group of weights. M may be nil
// for a type without minima. It panics, naming the sizes, if they do not
// match or t has no integer decoding.
func DecodeInt8(t gguf.Type, w []byte, q []byte, s, m []float32) {
	f, ok := Int8FormatOf(t)
	if !ok {
		panic(fmt.Sprintf("quant: %v has no integer decoding", t))
	}
	mustLookup(t, len(q), len(w))
	groups := len(q) / f.Group
	if len(s) < groups || (f.HasMin && len(m) < groups) {
		panic(fmt.Sprintf("quant: DecodeInt8 %v: %d weights need %d scales and minima, got %d and %d", t, len(q), groups, len(s), len(m)))
	}
	decodeInt8(t, w, q, s, m)
}

// decodeInt8 is DecodeInt8 past its checks.
func decodeInt8(t gguf.Type, w, q []byte, s, m []float32) {
	if simdOn {
		if d := fastInt8[t]; d != nil {
			d(w, q, s, m)
			return
		}
	}
	int8Decoders[t](w, q, s, m)
}

// DecodeCodes is DecodeInt8 without the scales and minima: the codes q of
// the row w alone, for callers that read each block's scales in their own
// form (score/nn's integer scales of the K-quants and i-quants). It
// panics as DecodeInt8 does.
func DecodeCodes(t gguf.Type, w, q []byte) {
	f, ok := Int8FormatOf(t)
	if !ok {
		panic(fmt.Sprintf("quant: %v has no integer decoding", t))
	}
	b := mustLookup(t, len(q), len(w))
	if simdOn {
		if d := fastCodes[t]; d != nil {
			d(w, q)
			return
		}
	}
	// 128 groups at a time, their scales on the stack: a multiple of every
	// block (at most 16 groups, a power of 2).
	var s, m [128]float32
	for step := len(s) * f.Group; len(q) > 0; {
		n := min(step, len(q))
		nw := n / b.bs * b.ts
		decodeInt8(t, w[:nw], q[:n], s[:n/f.Group], m[:n/f.Group])
		w, q = w[nw:], q[n:]
	}
}

// int8Decoders are the reference decoders; each takes whole blocks.
var int8Decoders = [len(formats)]func(w, q []byte, s, m []float32){
	gguf.TypeQ4_0:    i8Q4_0,
	gguf.TypeQ4_1:    i8Q4_1,
	gguf.TypeQ5_0:    i8Q5_0,
	gguf.TypeQ5_1:    i8Q5_1,
	gguf.TypeQ8_0:    i8Q8_0,
	gguf.TypeQ2_K:    i8Q2_K,
	gguf.TypeQ3_K:    i8Q3_K,
	gguf.TypeQ4_K:    i8Q4_K,
	gguf.TypeQ5_K:    i8Q5_K,
	gguf.TypeQ6_K:    i8Q6_K,
	gguf.TypeQ8_K:    i8Q8_K,
	gguf.TypeIQ4_NL:  i8IQ4_NL,
	gguf.TypeIQ4_XS:  i8IQ4_XS,
	gguf.TypeIQ2_XXS: lbIQ2_XXS.decode,
	gguf.TypeIQ2_XS:  lbIQ2_XS.decode,
	gguf.TypeIQ2_S:   lbIQ2_S.decode,
	gguf.TypeIQ3_XXS: lbIQ3_XXS.decode,
	gguf.TypeIQ3_S:   lbIQ3_S.decode,
	gguf.TypeIQ1_S:   lbIQ1_S.decode,
	gguf.TypeIQ1_M:   lbIQ1_M.decode,
	gguf.TypeTQ1_0:   lbTQ1_0.decode,
	gguf.TypeTQ2_0:   lbTQ2_0.decode,
	gguf.TypeMXFP4:   lbMXFP4.decode,
	gguf.TypeNVFP4:   lbNVFP4.decode,
	gguf.TypeQ1_0:    lbQ1_0.decode,
	gguf.TypeQ2_0:    lbQ2_0.decode,
}

// fastInt8 holds the vector decoders this CPU has.
var fastInt8 [len(formats)]func(w, q []byte, s, m []float32)

func i8Q8_0(w, q []byte, s, _ []float32) {
	for j := 0; len(q) >= 32; j++ {
		b := w[:34]
		s[j] = f16(b)
		for i, v := range b[2:34] {
			q[i] = v ^ 0x80 // int8 + 128
		}
		w, q = w[34:], q[32:]
	}
}

func i8Q4_0(w, q []byte, s, _ []float32) {
	for j := 0; len(q) >= 32; j++ {
		b := w[:18]
		s[j] = f16(b)
		for i, v := range b[2:18] {
			q[i], q[i+16] = v&15, v>>4
		}
		w, q = w[18:], q[32:]
	}
}

func i8Q4_1(w, q []byte, s, m []float32) {
	for j := 0; len(q) >= 32; j++ {
		b := w[:20]
		s[j], m[j] = f16(b), f16(b[2:])
		for i, v := range b[4:20] {
			q[i], q[i+16] = v&15, v>>4
		}
		w, q = w[20:], q[32:]
	}
}

func i8Q5_0(w, q []byte, s, _ []float32) {
	for j := 0; len(q) >= 32; j++ {
		b := w[:22]
		s[j] = f16(b)
		qh := binary.LittleEndian.Uint32(b[2:])
		for i, v := range b[6:22] {
			q[i] = v&15 | uint8(qh>>i&1)<<4
			q[i+16] = v>>4 | uint8(qh>>(i+16)&1)<<4
		}
		w, q = w[22:], q[32:]
	}
}

func i8Q5_1(w, q []byte, s, m []float32) {
	for j := 0; len(q) >= 32; j++ {
		b := w[:24]
		s[j], m[j] = f16(b), f16(b[2:])
		qh := binary.LittleEndian.Uint32(b[4:])
		for i, v := range b[8:24] {
			q[i] = v&15 | uint8(qh>>i&1)<<4
			q[i+16] = v>>4 | uint8(qh>>(i+16)&1)<<4
		}
		w, q = w[24:], q[32:]
	}
}

func i8Q8_K(w, q []byte, s, _ []float32) {
	for j := 0; len(q) >= 256; j += 8 {
		b := w[:292]
		d := math.Float32frombits(binary.LittleEndian.Uint32(b))
		for k := range 8 {
			s[j+k] = d
		}
		for i, v := range b[4:260] {
			q[i] = v ^ 0x80
		}
		w, q = w[292:], q[256:]
	}
}

// Q2_K: 16 groups of 16; y = (d·(sc&15))·q - dmin·(sc>>4), q in 0..3.
func i8Q2_K(w, q []byte, s, m []float32) {
	for j := 0; len(q) >= 256; j += 16 {
		b := w[:84]
		scalesQ2_K(b, s[j:], m[j:])
		qs := b[16:80]
		for k := range 16 {
			h, sh, e := k/8, k/2%4, k%2
			src := qs[32*h+16*e:][:16]
			dst := q[16*k:][:16]
			for l, v := range src {
				dst[l] = v >> (2 * sh) & 3
			}
		}
		w, q = w[84:], q[256:]
	}
}

// Q3_K: 16 groups of 16; y = (d·scale)·(q-4), q = low | high<<2 in 0..7.
func i8Q3_K(w, q []byte, s, _ []float32) {
	for j := 0; len(q) >= 256; j += 16 {
		b := w[:110]
		scalesQ3_K(b, s[j:], nil)
		hm, qs := b[0:32], b[32:96]
		for k := range 16 {
			h, sh, e := k/8, k/2%4, k%2
			src := qs[32*h+16*e:][:16]
			hh := hm[16*e:][:16]
			dst := q[16*k:][:16]
			hbit := uint(4*h + sh)
			for l, v := range src {
				dst[l] = v>>(2*sh)&3 | (hh[l]>>hbit&1)<<2
			}
		}
		w, q = w[110:], q[256:]
	}
}

// Q4_K: 8 groups of 32; y = (d·sc)·q - dmin·m, q in 0..15.
func i8Q4_K(w, q []byte, s, m []float32) {
	for j := 0; len(q) >= 256; j += 8 {
		b := w[:144]
		scalesK4(b, s[j:], m[j:])
		qs := b[16:144]
		for c := range 4 {
			src := qs[32*c:][:32]
			lo, hi := q[64*c:][:32], q[64*c+32:][:32]
			for l, v := range src {
				lo[l], hi[l] = v&15, v>>4
			}
		}
		w, q = w[144:], q[256:]
	}
}

// Q5_K: as Q4_K with a fifth bit, q in 0..31.
func i8Q5_K(w, q []byte, s, m []float32) {
	for j := 0; len(q) >= 256; j += 8 {
		b := w[:176]
		scalesK4(b, s[j:], m[j:])
		qh, qs := b[16:48], b[48:176]
		for c := range 4 {
			src := qs[32*c:][:32]
			lo, hi := q[64*c:][:32], q[64*c+32:][:32]
			s1, s2 := uint(2*c), uint(2*c+1)
			for l, v := range src {
				lo[l] = v&15 | (qh[l]>>s1&1)<<4
				hi[l] = v>>4 | (qh[l]>>s2&1)<<4
			}
		}
		w, q = w[176:], q[256:]
	}
}

// Q6_K: 16 groups of 16; y = (d·sc)·(q-32), q in 0..63.
func i8Q6_K(w, q []byte, s, _ []float32) {
	for j := 0; len(q) >= 256; j += 16 {
		b := w[:210]
		scalesQ6_K(b, s[j:], nil)
		for h := range 2 {
			ql, qh := b[64*h:][:64], b[128+32*h:][:32]
			qq := q[128*h:][:128]
			for l := range 32 {
				lo0, lo1, hi := ql[l], ql[l+32], qh[l]
				qq[l] = lo0&15 | (hi&3)<<4
				qq[l+32] = lo1&15 | (hi>>2&3)<<4
				qq[l+64] = lo0>>4 | (hi>>4&3)<<4
				qq[l+96] = lo1>>4 | (hi>>6)<<4
			}
		}
		w, q = w[210:], q[256:]
	}
}

// iq4Bytes is the IQ4 table plus 128: every entry fits a uint8.
var iq4Bytes = func() (t [16]uint8) {
	for i, v := range iq4Table {
		t[i] = uint8(int(v) + 128)
	}
	return t
}()

func i8IQ4_NL(w, q []byte, s, _ []float32) {
	for j := 0; len(q) >= 32; j++ {
		b := w[:18]
		s[j] = f16(b)
		for i, v := range b[2:18] {
			q[i], q[i+16] = iq4Bytes[v&15], iq4Bytes[v>>4]
		}
		w, q = w[18:], q[32:]
	}
}

func i8IQ4_XS(w, q []byte, s, _ []float32) {
	for j := 0; len(q) >= 256; j += 8 {
		b := w[:136]
		scalesIQ4_XS(b, s[j:], nil)
		qs := b[8:136]
		for k := range 8 {
			src := qs[16*k:][:16]
			dst := q[32*k:][:32]
			for i, v := range src {
				dst[i], dst[i+16] = iq4Bytes[v&15], iq4Bytes[v>>4]
			}
		}
		w, q = w[136:], q[256:]
	}
}

// The scales S and minima M (see the section comment) of one block of the
// K-quants and IQ4_XS, for the decoders above and for the vector kernels'
// (fast_codes.go); m is not written for the types without minima.

func scalesQ2_K(b []byte, s, m []float32) {
	sc := b[:16]
	d, dmin := f16(b[80:]), f16(b[82:])
	_, _ = s[15], m[15]
	for k, v := range sc {
		s[k] = d * float32(v&15)
		m[k] = -(dmin * float32(v>>4))
	}
}

func scalesQ3_K(b []byte, s, _ []float32) {
	sc := q3Scales(b[96:108])
	d := f16(b[108:])
	_ = s[15]
	for k, v := range sc {
		s[k] = d * float32(v)
	}
}

// scalesK4 is Q4_K's and Q5_K's: 8 groups, d·sc and −(dmin·m).
func scalesK4(b []byte, s, m []float32) {
	d, dmin := f16(b), f16(b[2:])
	_, _ = s[7], m[7]
	for k := range 8 {
		sc, mn := scaleMinK4(k, b[4:16])
		s[k], m[k] = d*float32(sc), -(dmin * float32(mn))
	}
}

func scalesQ6_K(b []byte, s, _ []float32) {
	d := f16(b[208:])
	_ = s[15]
	for k, v := range b[192:208] {
		s[k] = d * float32(int8(v))
	}
}

func scalesIQ4_XS(b []byte, s, _ []float32) {
	d := f16(b)
	sh := binary.LittleEndian.Uint16(b[2:])
	_ = s[7]
	for k := range 8 {
		s[k] = d * float32(iq4xsScale(sh, b[4:8], k))
	}
}
