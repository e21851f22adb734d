package gguf

import (
	"fmt"
	"math/bits"
)

// Type is a ggml tensor type id, as in ggml.h's enum ggml_type. The ids are
// stored in GGUF tensor infos, so they never change; removed types leave gaps.
type Type uint32

// Tensor types. Block and byte sizes are those of ggml.c's type_traits (and
// gguf-py's GGML_QUANT_SIZES); see Type.BlockSize and Type.TypeSize.
const (
	TypeF32     Type = 0
	TypeF16     Type = 1
	TypeQ4_0    Type = 2
	TypeQ4_1    Type = 3
	TypeQ5_0    Type = 6 // 4 and 5 (Q4_2, Q4_3) were removed from ggml
	TypeQ5_1    Type = 7
	TypeQ8_0    Type = 8
	TypeQ8_1    Type = 9
	TypeQ2_K    Type = 10
	TypeQ3_K    Type = 11
	TypeQ4_K    Type = 12
	TypeQ5_K    Type = 13
	TypeQ6_K    Type = 14
	TypeQ8_K    Type = 15
	TypeIQ2_XXS Type = 16
	TypeIQ2_XS  Type = 17
	TypeIQ3_XXS Type = 18
	TypeIQ1_S   Type = 19
	TypeIQ4_NL  Type = 20
	TypeIQ3_S   Type = 21
	TypeIQ2_S   Type = 22
	TypeIQ4_XS  Type = 23
	TypeI8      Type = 24
	TypeI16     Type = 25
	TypeI32     Type = 26
	TypeI64     Type = 27
	TypeF64     Type = 28
	TypeIQ1_M   Type = 29
	TypeBF16    Type = 30
	TypeTQ1_0   Type = 34 // 31..33 (Q4_0_4_4, Q4_0_4_8, Q4_0_8_8) were removed from GGUF
	TypeTQ2_0   Type = 35
	TypeMXFP4   Type = 39 // 36..38 (IQ4_NL_4_4, ...) were removed from GGUF
	TypeNVFP4   Type = 40 // 64 E2M1 values, a UE4M3 scale per 16
	TypeQ1_0    Type = 41 // 128 signs, an f16 scale
	TypeQ2_0    Type = 42 // 64 2-bit codes, an f16 scale
)

type typeTraits struct {
	name  string
	block int // elements per block
	size  int // bytes per block
}

// typeTable is indexed by Type; a zero entry is an unknown (or removed) id.
var typeTable = [...]typeTraits{
	TypeF32:     {"F32", 1, 4},
	TypeF16:     {"F16", 1, 2},
	TypeQ4_0:    {"Q4_0", 32, 2 + 16},
	TypeQ4_1:    {"Q4_1", 32, 2 + 2 + 16},
	TypeQ5_0:    {"Q5_0", 32, 2 + 4 + 16},
	TypeQ5_1:    {"Q5_1", 32, 2 + 2 + 4 + 16},
	TypeQ8_0:    {"Q8_0", 32, 2 + 32},
	TypeQ8_1:    {"Q8_1", 32, 2 + 2 + 32},
	TypeQ2_K:    {"Q2_K", 256, 256/16 + 256/4 + 2 + 2},
	TypeQ3_K:    {"Q3_K", 256, 256/8 + 256/4 + 12 + 2},
	TypeQ4_K:    {"Q4_K", 256, 2 + 2 + 12 + 256/2},
	TypeQ5_K:    {"Q5_K", 256, 2 + 2 + 12 + 256/8 + 256/2},
	TypeQ6_K:    {"Q6_K", 256, 256/2 + 256/4 + 256/16 + 2},
	TypeQ8_K:    {"Q8_K", 256, 4 + 256 + 256/16*2},
	TypeIQ2_XXS: {"IQ2_XXS", 256, 2 + 256/4},
	TypeIQ2_XS:  {"IQ2_XS", 256, 2 + 256/4 + 256/32},
	TypeIQ3_XXS: {"IQ3_XXS", 256, 2 + 256/4 + 256/8},
	TypeIQ1_S:   {"IQ1_S", 256, 2 + 256/8 + 256/16},
	TypeIQ4_NL:  {"IQ4_NL", 32, 2 + 16},
	TypeIQ3_S:   {"IQ3_S", 256, 2 + 256/4 + 256/8 + 256/32 + 4},
	TypeIQ2_S:   {"IQ2_S", 256, 2 + 256/4 + 256/16},
	TypeIQ4_XS:  {"IQ4_XS", 256, 2 + 2 + 256/2 + 256/64},
	TypeI8:      {"I8", 1, 1},
	TypeI16:     {"I16", 1, 2},
	TypeI32:     {"I32", 1, 4},
	TypeI64:     {"I64", 1, 8},
	TypeF64:     {"F64", 1, 8},
	TypeIQ1_M:   {"IQ1_M", 256, 256/8 + 256/16 + 256/32},
	TypeBF16:    {"BF16", 1, 2},
	TypeTQ1_0:   {"TQ1_0", 256, 2 + 4*13},
	TypeTQ2_0:   {"TQ2_0", 256, 2 + 64},
	TypeMXFP4:   {"MXFP4", 32, 1 + 16},
	TypeNVFP4:   {"NVFP4", 64, 64/16 + 64/2},
	TypeQ1_0:    {"Q1_0", 128, 2 + 128/8},
	TypeQ2_0:    {"Q2_0", 64, 2 + 64/4},
}

func (t Type) traits() typeTraits {
	if uint64(t) < uint64(len(typeTable)) {
		return typeTable[t]
	}
	return typeTraits{}
}

// Known reports whether t is a ggml type this package knows the sizes of.
func (t Type) Known() bool { return t.traits().block != 0 }

// String returns ggml's name of the type ("Q4_K", "F16"), or "type(99)".
func (t Type) String() string {
	if tr := t.traits(); tr.block != 0 {
		return tr.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize returns the number of elements per block: 1 for F32, F16, BF16
// and the integer types, 32 for Q4_0..Q8_1, IQ4_NL and MXFP4, 64 for NVFP4
// and Q2_0, 128 for Q1_0, 256 for the K-quants, the other IQ types and
// TQ1_0, TQ2_0. It is 0 for an unknown type.
func (t Type) BlockSize() int { return t.traits().block }

// TypeSize returns the number of bytes per block; 0 for an unknown type.
func (t Type) TypeSize() int { return t.traits().size }

// RowSize returns the number of bytes that ne0 consecutive elements take.
// It fails for an unknown type, for ne0 not a multiple of the block size,
// and when the size overflows uint64.
func (t Type) RowSize(ne0 uint64) (uint64, error) {
	tr := t.traits()
	if tr.block == 0 {
		return 0, fmt.Errorf("unknown ggml type %d", uint32(t))
	}
	if ne0%uint64(tr.block) != 0 {
		return 0, fmt.Errorf("row length %d is not a multiple of the %s block size %d", ne0, tr.name, tr.block)
	}
	hi, n := bits.Mul64(ne0/uint64(tr.block), uint64(tr.size))
	if hi != 0 {
		return 0, fmt.Errorf("row of %d %s elements overflows uint64 bytes", ne0, tr.name)
	}
	return n, nil
}
