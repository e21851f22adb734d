package quant

import (
	"math"
	"strings"
	"testing"

	"ppl.dev/gguf"
)

// supportedTypes is every type Dequantize handles.
var supportedTypes = []gguf.Type{
	gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0,
	gguf.TypeQ5_1, gguf.TypeQ8_0, gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K,
	gguf.TypeQ6_K, gguf.TypeQ8_K, gguf.TypeIQ4_NL, gguf.TypeIQ4_XS,
	gguf.TypeIQ2_XXS, gguf.TypeIQ2_XS, gguf.TypeIQ2_S, gguf.TypeIQ3_XXS, gguf.TypeIQ3_S,
	gguf.TypeIQ1_S, gguf.TypeIQ1_M, gguf.TypeTQ1_0, gguf.TypeTQ2_0, gguf.TypeMXFP4, gguf.TypeNVFP4,
	gguf.TypeQ1_0, gguf.TypeQ2_0,
}

// quantizableTypes is every type Quantize handles with llama.cpp's
// reference quantizer, but the low-bit types (lowbitTypes).
var quantizableTypes = []gguf.Type{
	gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0,
	gguf.TypeQ5_1, gguf.TypeQ8_0, gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K,
	gguf.TypeQ6_K,
}

// lowbitTypes are the low-bit types, which Quantize also handles (our own
// quantizers for the i-quants).
var lowbitTypes = []gguf.Type{
	gguf.TypeIQ2_XXS, gguf.TypeIQ2_XS, gguf.TypeIQ2_S, gguf.TypeIQ3_XXS, gguf.TypeIQ3_S,
	gguf.TypeIQ1_S, gguf.TypeIQ1_M, gguf.TypeTQ1_0, gguf.TypeTQ2_0, gguf.TypeMXFP4, gguf.TypeNVFP4,
	gguf.TypeQ1_0, gguf.TypeQ2_0,
}

// allQuantizable is every type Quantize handles.
func allQuantizable() []gguf.Type {
	return append(append([]gguf.Type{}, quantizableTypes...), lowbitTypes...)
}

// TestSupportedSet pins which types are supported, and that our block
// geometry agrees with package gguf's.
func TestSupportedSet(t *testing.T) {
	want := map[gguf.Type]bool{}
	for _, typ := range supportedTypes {
		want[typ] = true
		f := lookup(typ)
		if f == nil {
			t.Errorf("%v: not supported", typ)
			continue
		}
		if f.bs != typ.BlockSize() || f.ts != typ.TypeSize() {
			t.Errorf("%v: block %d weights/%d bytes here, gguf says %d/%d", typ, f.bs, f.ts, typ.BlockSize(), typ.TypeSize())
		}
	}
	for i := range 64 {
		typ := gguf.Type(i)
		if Supported(typ) != want[typ] {
			t.Errorf("Supported(%v) = %v, want %v", typ, Supported(typ), want[typ])
		}
	}
	if Supported(gguf.Type(1 << 31)) {
		t.Error("Supported(huge type) = true")
	}
	canQ := map[gguf.Type]bool{}
	for _, typ := range allQuantizable() {
		canQ[typ] = true
	}
	for i := range 64 {
		typ := gguf.Type(i)
		if CanQuantize(typ) != canQ[typ] {
			t.Errorf("CanQuantize(%v) = %v, want %v", typ, CanQuantize(typ), canQ[typ])
		}
	}
}

func TestDequantizeErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		typ  gguf.Type
		src  int
		dst  int
		want string
	}{
		{"unsupported Q8_1", gguf.TypeQ8_1, 36, 32, "quant: dequantize Q8_1: unsupported type"},
		{"unknown type", gguf.Type(4), 18, 32, "unsupported type"},
		{"partial block", gguf.TypeQ4_0, 18, 31, "31 weights is not a multiple of the block size 32"},
		{"short src", gguf.TypeQ4_K, 143, 256, "quant: dequantize Q4_K: 256 weights take 144 bytes, got 143"},
		{"long src", gguf.TypeQ8_0, 35, 32, "32 weights take 34 bytes, got 35"},
		{"src without dst", gguf.TypeF16, 2, 0, "0 weights take 0 bytes, got 2"},
	} {
		dst := make([]float32, c.dst)
		for i := range dst {
			dst[i] = 42
		}
		err := Dequantize(c.typ, make([]byte, c.src), dst)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
		for i, v := range dst {
			if v != 42 {
				t.Fatalf("%s: dst[%d] written on error", c.name, i)
			}
		}
	}
	if err := Dequantize(gguf.TypeQ6_K, nil, nil); err != nil {
		t.Errorf("empty input: %v", err)
	}
}

func TestQuantizeErrors(t *testing.T) {
	nan := make([]float32, 32)
	nan[7] = float32(math.NaN())
	inf := make([]float32, 256)
	inf[3] = float32(math.Inf(1))
	for _, c := range []struct {
		name string
		typ  gguf.Type
		src  []float32
		dst  int
		want string
	}{
		{"unsupported", gguf.TypeIQ4_NL, make([]float32, 32), 18, "quant: quantize IQ4_NL: unsupported type"},
		{"partial block", gguf.TypeQ4_K, make([]float32, 255), 144, "255 weights is not a multiple of the block size 256"},
		{"wrong dst", gguf.TypeQ8_0, make([]float32, 64), 67, "64 weights take 68 bytes, got 67"},
		{"NaN", gguf.TypeQ8_0, nan, 34, "quant: quantize Q8_0: src[7] is NaN"},
		{"Inf", gguf.TypeQ6_K, inf, 210, "quant: quantize Q6_K: src[3] is +Inf"},
	} {
		err := Quantize(c.typ, c.src, make([]byte, c.dst))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
	// F16 converts non-finite values like any other.
	dst := make([]byte, 64)
	if err := Quantize(gguf.TypeF16, nan, dst); err != nil || dst[14] != 0x00 || dst[15] != 0x7e {
		t.Errorf("F16 NaN: err %v, bytes % x", err, dst[14:16])
	}
}

func TestRowPanics(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func()
		want string
	}{
		{"DequantizeRow short", func() { DequantizeRow(gguf.TypeQ8_0, make([]byte, 33), make([]float32, 32)) },
			"quant: Q8_0 row of 32 weights needs 34 bytes (block 32/34 bytes), got 33"},
		{"DotRow partial", func() { DotRow(gguf.TypeQ4_K, make([]byte, 144), make([]float32, 250)) },
			"quant: Q4_K row of 250 weights"},
		{"DotRow unsupported", func() { DotRow(gguf.TypeQ8_1, make([]byte, 36), make([]float32, 32)) },
			"quant: unsupported type Q8_1"},
	} {
		func() {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, c.want) {
					t.Errorf("%s: panic %v, want %q", c.name, r, c.want)
				}
			}()
			c.f()
		}()
	}
}
