package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"ppl.dev/gguf"
)

// format is what this package knows about one weight type. The row
// functions take whole numbers of blocks, already checked.
type format struct {
	bs, ts int // weights per block, bytes per block

	deq   func(src []byte, dst []float32)     // dequantize len(dst)/bs blocks
	dot   func(w []byte, x []float32) float32 // dot of len(x)/bs blocks with x
	quant func(src []float32, dst []byte)     // quantize len(src)/bs blocks; nil if unsupported
}

// formats is indexed by gguf.Type; a zero bs means unsupported.
var formats = [...]format{
	gguf.TypeF32:     {1, 4, deqF32, dotF32, quantF32},
	gguf.TypeF16:     {1, 2, deqF16, dotF16, quantF16},
	gguf.TypeBF16:    {1, 2, deqBF16, dotBF16, quantBF16},
	gguf.TypeQ4_0:    {32, 18, deqQ4_0, dotQ4_0, quantQ4_0},
	gguf.TypeQ4_1:    {32, 20, deqQ4_1, dotQ4_1, quantQ4_1},
	gguf.TypeQ5_0:    {32, 22, deqQ5_0, dotQ5_0, quantQ5_0},
	gguf.TypeQ5_1:    {32, 24, deqQ5_1, dotQ5_1, quantQ5_1},
	gguf.TypeQ8_0:    {32, 34, deqQ8_0, dotQ8_0, quantQ8_0},
	gguf.TypeQ2_K:    {256, 84, deqQ2_K, dotQ2_K, quantQ2_K},
	gguf.TypeQ3_K:    {256, 110, deqQ3_K, dotQ3_K, quantQ3_K},
	gguf.TypeQ4_K:    {256, 144, deqQ4_K, dotQ4_K, quantQ4_K},
	gguf.TypeQ5_K:    {256, 176, deqQ5_K, dotQ5_K, quantQ5_K},
	gguf.TypeQ6_K:    {256, 210, deqQ6_K, dotQ6_K, quantQ6_K},
	gguf.TypeQ8_K:    {256, 292, deqQ8_K, dotQ8_K, nil},
	gguf.TypeIQ4_NL:  {32, 18, deqIQ4_NL, dotIQ4_NL, nil},
	gguf.TypeIQ4_XS:  {256, 136, deqIQ4_XS, dotIQ4_XS, nil},
	gguf.TypeIQ2_XXS: lbIQ2_XXS.format(quantIQ2_XXS),
	gguf.TypeIQ2_XS:  lbIQ2_XS.format(quantIQ2_XS),
	gguf.TypeIQ2_S:   lbIQ2_S.format(quantIQ2_S),
	gguf.TypeIQ3_XXS: lbIQ3_XXS.format(quantIQ3_XXS),
	gguf.TypeIQ3_S:   lbIQ3_S.format(quantIQ3_S),
	gguf.TypeIQ1_S:   lbIQ1_S.format(quantIQ1_S),
	gguf.TypeIQ1_M:   lbIQ1_M.format(quantIQ1_M),
	gguf.TypeTQ1_0:   lbTQ1_0.format(quantTQ1_0),
	gguf.TypeTQ2_0:   lbTQ2_0.format(quantTQ2_0),
	gguf.TypeMXFP4:   lbMXFP4.format(quantMXFP4),
	gguf.TypeNVFP4:   lbNVFP4.format(quantNVFP4),
	gguf.TypeQ1_0:    lbQ1_0.format(quantQ1_0),
	gguf.TypeQ2_0:    lbQ2_0.format(quantQ2_0),
}

func lookup(t gguf.Type) *format {
	if uint64(t) < uint64(len(formats)) && formats[t].bs != 0 {
		return &formats[t]
	}
	return nil
}

// Supported reports whether Dequantize, DequantizeRow and DotRow handle t.
func Supported(t gguf.Type) bool { return lookup(t) != nil }

// CanQuantize reports whether Quantize handles t.
func CanQuantize(t gguf.Type) bool {
	f := lookup(t)
	return f != nil && f.quant != nil
}

// checkSizes returns an error unless n weights (a whole number of blocks)
// take exactly nbytes bytes in format f.
func checkSizes(op string, t gguf.Type, f *format, n, nbytes int) error {
	if n%f.bs != 0 {
		return fmt.Errorf("quant: %s %v: %d weights is not a multiple of the block size %d", op, t, n, f.bs)
	}
	if want := n / f.bs * f.ts; nbytes != want {
		return fmt.Errorf("quant: %s %v: %d weights take %d bytes, got %d", op, t, n, want, nbytes)
	}
	return nil
}

// Dequantize decodes src, whole blocks of type t, into dst. len(dst) must be
// a multiple of t's block size and len(src) exactly the bytes those blocks
// take; otherwise, or when t is not supported, it returns an error and
// leaves dst untouched.
func Dequantize(t gguf.Type, src []byte, dst []float32) error {
	f := lookup(t)
	if f == nil {
		return fmt.Errorf("quant: dequantize %v: unsupported type", t)
	}
	if err := checkSizes("dequantize", t, f, len(dst), len(src)); err != nil {
		return err
	}
	f.deqFunc(t)(src, dst)
	return nil
}

// DequantizeRow is Dequantize for callers that already know the sizes are
// right (one row of a tensor checked at load time). It panics, naming both
// sizes, if they are not.
func DequantizeRow(t gguf.Type, src []byte, dst []float32) {
	f := mustLookup(t, len(dst), len(src))
	f.deqFunc(t)(src, dst)
}

// DotRow returns the dot product of the weight row w (len(x) weights of
// type t) with x, dequantizing block by block without a row buffer. Each
// block's scale is factored out of its sum (d*sum(q*x) rather than
// sum(d*q*x)), all in float32, so the result equals Dequantize-then-dot only
// up to float32 rounding: at most about k * 2^-24 * sum|w_i x_i|, k the
// longest chain of roundings a product goes through (under 130 for a
// 512-weight row of any type). It panics, naming both sizes, if len(w) does
// not match len(x) or t is unsupported.
func DotRow(t gguf.Type, w []byte, x []float32) float32 {
	f := mustLookup(t, len(x), len(w))
	return f.dot(w, x)
}

func mustLookup(t gguf.Type, n, nbytes int) *format {
	f := lookup(t)
	if f == nil {
		panic(fmt.Sprintf("quant: unsupported type %v", t))
	}
	if n%f.bs != 0 || nbytes != n/f.bs*f.ts {
		panic(fmt.Sprintf("quant: %v row of %d weights needs %d bytes (block %d/%d bytes), got %d",
			t, n, n/f.bs*f.ts, f.bs, f.ts, nbytes))
	}
	return f
}

// Quantize encodes src into dst as type t with llama.cpp's reference
// quantizer for t (quantize_row_*_ref; F16 and BF16 round to nearest even).
// len(src) must be a multiple of the block size and len(dst) exactly the
// bytes those blocks take. Quantized types reject NaN and infinite inputs
// (the reference quantizers would write garbage); F32, F16 and BF16 convert
// them like any other value.
func Quantize(t gguf.Type, src []float32, dst []byte) error {
	f := lookup(t)
	if f == nil || f.quant == nil {
		return fmt.Errorf("quant: quantize %v: unsupported type", t)
	}
	if err := checkSizes("quantize", t, f, len(src), len(dst)); err != nil {
		return err
	}
	if f.bs > 1 {
		for i, v := range src {
			if math.Float32bits(v)&0x7f800000 == 0x7f800000 { // NaN or ±Inf
				return fmt.Errorf("quant: quantize %v: src[%d] is %v", t, i, v)
			}
		}
	}
	f.quant(src, dst)
	return nil
}

// f16 reads the binary16 at b[0:2].
func f16(b []byte) float32 { return F16ToF32(binary.LittleEndian.Uint16(b)) }

func putF16(b []byte, f float32) { binary.LittleEndian.PutUint16(b, F32ToF16(f)) }
