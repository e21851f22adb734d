package gguf

import "testing"

func TestTypeTraits(t *testing.T) {
	// Block and type sizes from ggml.c's type_traits / gguf-py's GGML_QUANT_SIZES.
	tests := []struct {
		typ         Type
		name        string
		block, size int
	}{
		{TypeF32, "F32", 1, 4},
		{TypeF16, "F16", 1, 2},
		{TypeQ4_0, "Q4_0", 32, 18},
		{TypeQ4_1, "Q4_1", 32, 20},
		{TypeQ5_0, "Q5_0", 32, 22},
		{TypeQ5_1, "Q5_1", 32, 24},
		{TypeQ8_0, "Q8_0", 32, 34},
		{TypeQ8_1, "Q8_1", 32, 36},
		{TypeQ2_K, "Q2_K", 256, 84},
		{TypeQ3_K, "Q3_K", 256, 110},
		{TypeQ4_K, "Q4_K", 256, 144},
		{TypeQ5_K, "Q5_K", 256, 176},
		{TypeQ6_K, "Q6_K", 256, 210},
		{TypeQ8_K, "Q8_K", 256, 292},
		{TypeIQ2_XXS, "IQ2_XXS", 256, 66},
		{TypeIQ2_XS, "IQ2_XS", 256, 74},
		{TypeIQ3_XXS, "IQ3_XXS", 256, 98},
		{TypeIQ1_S, "IQ1_S", 256, 50},
		{TypeIQ4_NL, "IQ4_NL", 32, 18},
		{TypeIQ3_S, "IQ3_S", 256, 110},
		{TypeIQ2_S, "IQ2_S", 256, 82},
		{TypeIQ4_XS, "IQ4_XS", 256, 136},
		{TypeI8, "I8", 1, 1},
		{TypeI16, "I16", 1, 2},
		{TypeI32, "I32", 1, 4},
		{TypeI64, "I64", 1, 8},
		{TypeF64, "F64", 1, 8},
		{TypeIQ1_M, "IQ1_M", 256, 56},
		{TypeBF16, "BF16", 1, 2},
		{TypeTQ1_0, "TQ1_0", 256, 54},
		{TypeTQ2_0, "TQ2_0", 256, 66},
		{TypeMXFP4, "MXFP4", 32, 17},
		{TypeNVFP4, "NVFP4", 64, 36},
		{TypeQ1_0, "Q1_0", 128, 18},
		{TypeQ2_0, "Q2_0", 64, 18},
	}
	known := map[Type]bool{}
	for _, tt := range tests {
		known[tt.typ] = true
		if got := tt.typ.String(); got != tt.name {
			t.Errorf("Type(%d).String() = %q, want %q", uint32(tt.typ), got, tt.name)
		}
		if !tt.typ.Known() || tt.typ.BlockSize() != tt.block || tt.typ.TypeSize() != tt.size {
			t.Errorf("%v: known %v block %d size %d, want %d %d", tt.typ, tt.typ.Known(), tt.typ.BlockSize(), tt.typ.TypeSize(), tt.block, tt.size)
		}
	}
	for id := range uint32(64) {
		if typ := Type(id); !known[typ] && (typ.Known() || typ.BlockSize() != 0 || typ.TypeSize() != 0) {
			t.Errorf("Type(%d) should be unknown", id)
		}
	}
	for _, typ := range []Type{4, 5, 31, 33, 36, 38, 99, 1 << 31} {
		if typ.Known() {
			t.Errorf("%d is known", uint32(typ))
		}
	}
	if got := Type(99).String(); got != "type(99)" {
		t.Errorf("Type(99).String() = %q", got)
	}
}

func TestRowSize(t *testing.T) {
	tests := []struct {
		typ     Type
		ne0     uint64
		want    uint64
		wantErr string
	}{
		{TypeF32, 0, 0, ""},
		{TypeF32, 7, 28, ""},
		{TypeF16, 256, 512, ""},
		{TypeBF16, 3, 6, ""},
		{TypeQ8_0, 64, 68, ""},
		{TypeQ4_K, 512, 288, ""},
		{TypeQ6_K, 256, 210, ""},
		{TypeIQ4_NL, 32, 18, ""},
		{TypeQ8_0, 33, 0, "row length 33 is not a multiple of the Q8_0 block size 32"},
		{TypeQ4_K, 128, 0, "row length 128 is not a multiple of the Q4_K block size 256"},
		{Type(4), 32, 0, "unknown ggml type 4"},
		{Type(99), 1, 0, "unknown ggml type 99"},
		{TypeF32, 1 << 62, 0, "row of 4611686018427387904 F32 elements overflows uint64 bytes"},
		{TypeI8, 1<<64 - 1, 1<<64 - 1, ""},
	}
	for _, tt := range tests {
		got, err := tt.typ.RowSize(tt.ne0)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if got != tt.want || gotErr != tt.wantErr {
			t.Errorf("%v.RowSize(%d) = %d, %q; want %d, %q", tt.typ, tt.ne0, got, gotErr, tt.want, tt.wantErr)
		}
	}
}

func TestValueTypeString(t *testing.T) {
	want := "uint8 int8 uint16 int16 uint32 int32 float32 bool string array uint64 int64 float64 valuetype(13)"
	got := ""
	for vt := range ValueType(14) {
		if vt > 0 {
			got += " "
		}
		got += vt.String()
	}
	if got != want {
		t.Errorf("value type names:\n got %s\nwant %s", got, want)
	}
}
