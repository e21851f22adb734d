package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// malformedBase is the file the malformed cases corrupt. Its layout (see
// TestMalformedBaseLayout): header [0,24), six metadata entries [24,196),
// the tensor infos of a.weight (F32 [4 2], offset 0) [196,244) and b.weight
// (Q8_0 [32 2], offset 32) [244,292), padding to 320, then a.weight's data
// [320,352) and b.weight's [352,420), padded to 448.
func malformedBase(t testing.TB, extra ...KV) []byte {
	t.Helper()
	w := NewWriter()
	w.Add("general.architecture", "llama")
	w.Add("t.k1", uint32(7))
	w.Add("t.k2", uint32(8))
	w.Add("t.toks", []string{"a", "bc"})
	w.Add("t.flag", true)
	w.Add("t.deep", int8(1))
	for _, kv := range extra {
		w.Add(kv.Key, kv.Value)
	}
	if err := w.AddTensor("a.weight", TypeF32, []uint64{4, 2}, seq(32, 1)); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("b.weight", TypeQ8_0, []uint64{32, 2}, seq(68, 2)); err != nil {
		t.Fatal(err)
	}
	return writeBytes(t, w)
}

// at returns the offset of the only occurrence of s in b.
func at(t testing.TB, b []byte, s string) int {
	t.Helper()
	i := bytes.Index(b, []byte(s))
	if i < 0 || bytes.Count(b, []byte(s)) != 1 {
		t.Fatalf("%q occurs %d times", s, bytes.Count(b, []byte(s)))
	}
	return i
}

func put32(b []byte, off int, v uint32) { binary.LittleEndian.PutUint32(b[off:], v) }
func put64(b []byte, off int, v uint64) { binary.LittleEndian.PutUint64(b[off:], v) }

func TestMalformedBaseLayout(t *testing.T) {
	b := malformedBase(t)
	f, err := parse("m.gguf", b)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 448 || f.DataOffset != 320 || f.Tensors[1].Offset != 32 || f.Tensors[1].Size != 68 {
		t.Fatalf("base: %d bytes, data offset %d, b.weight at %d size %d", len(b), f.DataOffset, f.Tensors[1].Offset, f.Tensors[1].Size)
	}
}

func TestMalformed(t *testing.T) {
	// Offsets into the tensor info of b.weight (name at i): n_dims i+8,
	// ne0 i+12, ne1 i+20, type i+28, offset i+32.
	tensorB := func(t testing.TB, b []byte) int { return at(t, b, "b.weight") }
	tensorA := func(t testing.TB, b []byte) int { return at(t, b, "a.weight") }
	tests := []struct {
		name    string
		extra   []KV // added to the base file's metadata
		corrupt func(t testing.TB, b []byte) []byte
		wantErr string
	}{
		{"empty", nil, func(t testing.TB, b []byte) []byte { return b[:0] },
			`not a GGUF file: magic "", want "GGUF"`},
		{"short magic", nil, func(t testing.TB, b []byte) []byte { return b[:3] },
			`not a GGUF file: magic "GGU", want "GGUF"`},
		{"wrong magic", nil, func(t testing.TB, b []byte) []byte { copy(b, "GGML"); return b },
			`not a GGUF file: magic "GGML", want "GGUF"`},
		{"version 1", nil, func(t testing.TB, b []byte) []byte { put32(b, 4, 1); return b },
			`GGUF version 1 is not supported (only versions 2 and 3)`},
		{"version 4", nil, func(t testing.TB, b []byte) []byte { put32(b, 4, 4); return b },
			`unsupported GGUF version 4 (want 2 or 3)`},
		{"big-endian", nil, func(t testing.TB, b []byte) []byte { binary.BigEndian.PutUint32(b[4:], 3); return b },
			`big-endian GGUF (version 3) is not supported`},
		{"truncated version", nil, func(t testing.TB, b []byte) []byte { return b[:6] },
			`truncated file: version needs 4 bytes at offset 4, file size 6`},
		{"truncated counts", nil, func(t testing.TB, b []byte) []byte { return b[:20] },
			`truncated file: metadata count needs 8 bytes at offset 16, file size 20`},
		{"truncated key", nil, func(t testing.TB, b []byte) []byte { return b[:at(t, b, "t.toks")+3] },
			`metadata key 3: string length 6 at offset 109 exceeds the 3 bytes left in the file`},
		{"truncated value", nil, func(t testing.TB, b []byte) []byte { return b[:at(t, b, "t.deep")+10] },
			`truncated file: metadata "t.deep" needs 1 bytes at offset 195, file size 195`},
		{"truncated array", nil, func(t testing.TB, b []byte) []byte { return b[:at(t, b, "bc")-1] },
			`truncated file: metadata "t.toks"[1] length needs 8 bytes at offset 148, file size 155`},
		{"truncated array count", nil, func(t testing.TB, b []byte) []byte { return b[:at(t, b, "bc")-4] },
			`metadata "t.toks" array of string: count 2 at offset 131 needs at least 8 bytes per entry, only 13 bytes left in the file`},
		{"truncated tensor info", nil, func(t testing.TB, b []byte) []byte { return b[:tensorB(t, b)+16] },
			`truncated file: tensor "b.weight" dimension 0 needs 8 bytes at offset 264, file size 268`},
		{"truncated data", nil, func(t testing.TB, b []byte) []byte { return b[:len(b)-40] },
			`tensor "b.weight": data [352,420) beyond end of file (size 408)`},
		{"metadata count", nil, func(t testing.TB, b []byte) []byte { put64(b, 16, 1<<60); return b },
			`metadata count 1152921504606846976 at offset 16 needs at least 13 bytes per entry, only 424 bytes left in the file`},
		{"tensor count", nil, func(t testing.TB, b []byte) []byte { put64(b, 8, 1<<40); return b },
			`tensor count 1099511627776 needs at least 32 bytes per tensor, only 424 bytes left in the file`},
		{"tensor count after metadata", nil, func(t testing.TB, b []byte) []byte { put64(b, 8, 8); return b },
			`tensor count 8 needs at least 32 bytes per tensor, only 252 bytes left in the file`},
		{"key length", nil, func(t testing.TB, b []byte) []byte { put64(b, at(t, b, "t.k1")-8, 1<<62); return b },
			`metadata key 1: string length 4611686018427387904 at offset 69 exceeds the 371 bytes left in the file`},
		{"string length", nil, func(t testing.TB, b []byte) []byte { put64(b, at(t, b, "llama")-8, 1<<63+5); return b },
			`metadata "general.architecture": string length 9223372036854775813 at offset 56 exceeds the 384 bytes left in the file`},
		{"array count", nil, func(t testing.TB, b []byte) []byte { put64(b, at(t, b, "t.toks")+14, 1<<61); return b },
			`metadata "t.toks" array of string: count 2305843009213693952 at offset 131 needs at least 8 bytes per entry, only 309 bytes left in the file`},
		{"array count beyond elements", nil, func(t testing.TB, b []byte) []byte { put64(b, at(t, b, "t.toks")+14, 20); return b },
			`metadata "t.toks"[3]: string length 6601364733959 at offset 172 exceeds the 268 bytes left in the file`},
		{"value type", nil, func(t testing.TB, b []byte) []byte { put32(b, at(t, b, "t.k1")+4, 13); return b },
			`metadata "t.k1": unknown value type 13`},
		{"array element type", nil, func(t testing.TB, b []byte) []byte { put32(b, at(t, b, "t.toks")+10, 99); return b },
			`metadata "t.toks": unknown array element type 99`},
		{"bool", nil, func(t testing.TB, b []byte) []byte { b[at(t, b, "t.flag")+10] = 2; return b },
			`metadata "t.flag": bool byte 2 at offset 176, want 0 or 1`},
		{"bool array", []KV{{"t.bools", mustValue([]bool{false, true})}}, func(t testing.TB, b []byte) []byte {
			b[at(t, b, "t.bools")+7+4+4+8+1] = 3 // key, type, element type, count, [0]
			return b
		}, `metadata "t.bools"[1]: bool byte 3 at offset 228, want 0 or 1`},
		{"nesting", []KV{{"t.nest", mustValue(nest(maxArrayDepth + 1))}}, nil,
			`metadata "t.nest"[0][0][0][0][0][0][0][0]: arrays nested deeper than 8`},
		{"duplicate key", nil, func(t testing.TB, b []byte) []byte { copy(b[at(t, b, "t.k2"):], "t.k1"); return b },
			`metadata "t.k1": duplicate key (entries 1 and 2)`},
		{"duplicate tensor", nil, func(t testing.TB, b []byte) []byte { copy(b[tensorB(t, b):], "a.weight"); return b },
			`tensor "a.weight": duplicate name (tensor 1)`},
		{"n_dims 5", nil, func(t testing.TB, b []byte) []byte { put32(b, tensorB(t, b)+8, 5); return b },
			`tensor "b.weight": 5 dimensions, want 1 to 4`},
		{"n_dims 0", nil, func(t testing.TB, b []byte) []byte { put32(b, tensorB(t, b)+8, 0); return b },
			`tensor "b.weight": 0 dimensions, want 1 to 4`},
		{"elements overflow", nil, func(t testing.TB, b []byte) []byte {
			i := tensorB(t, b)
			put64(b, i+12, 1<<32)
			put64(b, i+20, 1<<32)
			return b
		}, `tensor "b.weight": shape [4294967296 4294967296] overflows uint64 elements`},
		{"bytes overflow", nil, func(t testing.TB, b []byte) []byte {
			i := tensorA(t, b)
			put64(b, i+12, 1<<31)
			put64(b, i+20, 1<<31)
			return b
		}, `tensor "a.weight": F32 shape [2147483648 2147483648] overflows uint64 bytes`},
		{"row overflow", nil, func(t testing.TB, b []byte) []byte {
			i := tensorA(t, b)
			put64(b, i+12, 1<<62)
			put64(b, i+20, 1)
			return b
		}, `tensor "a.weight": shape [4611686018427387904 1]: row of 4611686018427387904 F32 elements overflows uint64 bytes`},
		{"block multiple", nil, func(t testing.TB, b []byte) []byte { put64(b, tensorB(t, b)+12, 48); return b },
			`tensor "b.weight": shape [48 2]: row length 48 is not a multiple of the Q8_0 block size 32`},
		{"unknown type", nil, func(t testing.TB, b []byte) []byte { put32(b, tensorB(t, b)+28, 99); return b },
			`tensor "b.weight": unknown ggml type 99`},
		{"removed type", nil, func(t testing.TB, b []byte) []byte { put32(b, tensorB(t, b)+28, 31); return b },
			`tensor "b.weight": unknown ggml type 31`},
		{"misaligned offset", nil, func(t testing.TB, b []byte) []byte { put64(b, tensorB(t, b)+32, 40); return b },
			`tensor "b.weight": offset 40 is not a multiple of the alignment 32`},
		{"data beyond end", nil, func(t testing.TB, b []byte) []byte { put64(b, tensorB(t, b)+32, 1<<20); return b },
			`tensor "b.weight": data [1048896,1048964) beyond end of file (size 448)`},
		{"huge tensor", nil, func(t testing.TB, b []byte) []byte {
			i := tensorA(t, b)
			put64(b, i+12, 1<<31)
			put64(b, i+20, 1<<30)
			return b
		}, `tensor "a.weight": data [320,9223372036854776128) beyond end of file (size 448)`},
		{"offset overflow", nil, func(t testing.TB, b []byte) []byte { put64(b, tensorB(t, b)+32, 1<<64-32); return b },
			`tensor "b.weight": data offset 18446744073709551584 + size 68 overflows`},
		{"alignment 24", []KV{{KeyAlignment, mustValue(uint32(32))}}, func(t testing.TB, b []byte) []byte {
			put32(b, at(t, b, KeyAlignment)+len(KeyAlignment)+4, 24)
			return b
		}, `metadata "general.alignment": 24 is not a power of two`},
		{"alignment 0", []KV{{KeyAlignment, mustValue(uint32(32))}}, func(t testing.TB, b []byte) []byte {
			put32(b, at(t, b, KeyAlignment)+len(KeyAlignment)+4, 0)
			return b
		}, `metadata "general.alignment": 0 is not a power of two`},
		{"alignment 64", []KV{{KeyAlignment, mustValue(uint32(32))}}, func(t testing.TB, b []byte) []byte {
			put32(b, at(t, b, KeyAlignment)+len(KeyAlignment)+4, 64)
			return b
		}, `tensor "b.weight": offset 32 is not a multiple of the alignment 64`},
		{"alignment negative", []KV{{"general.alignmenX", mustValue(int32(-32))}}, func(t testing.TB, b []byte) []byte {
			copy(b[at(t, b, "general.alignmenX"):], KeyAlignment)
			return b
		}, `metadata "general.alignment": -32 is not a power of two`},
		{"alignment uint64", []KV{{"general.alignmenX", mustValue(uint64(1 << 63))}}, func(t testing.TB, b []byte) []byte {
			copy(b[at(t, b, "general.alignmenX"):], KeyAlignment)
			return b
		}, `tensor "b.weight": offset 32 is not a multiple of the alignment 9223372036854775808`},
		{"alignment string", []KV{{"general.alignmenX", mustValue("32")}}, func(t testing.TB, b []byte) []byte {
			copy(b[at(t, b, "general.alignmenX"):], KeyAlignment)
			return b
		}, `metadata "general.alignment": is string, want an unsigned integer`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := malformedBase(t, tt.extra...)
			if tt.corrupt != nil {
				b = tt.corrupt(t, b)
			}
			f, err := parse("path/m.gguf", b)
			want := "gguf: path/m.gguf: " + tt.wantErr
			if err == nil || err.Error() != want {
				t.Errorf("parse = %v, %v\n want error %s", f, err, want)
			}
		})
	}
}

func mustValue(x any) Value {
	v, err := NewValue(x)
	if err != nil {
		panic(err)
	}
	return v
}

// nest returns depth arrays nested in each other around an int32.
func nest(depth int) any {
	var v any = []int32{1}
	for range depth - 1 {
		v = []any{v}
	}
	return v
}

func TestNestingLimit(t *testing.T) {
	w := NewWriter()
	w.Add("ok", nest(maxArrayDepth))
	f, err := parse("m.gguf", writeBytes(t, w))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := f.Lookup("ok")
	for range maxArrayDepth - 1 {
		v = v.v.([]Value)[0]
	}
	if s, ok := v.Any().([]int32); !ok || len(s) != 1 || s[0] != 1 {
		t.Errorf("innermost array = %#v", v.Any())
	}
}

// TestMalformedOpen checks that Open reports the path it was given.
func TestMalformedOpen(t *testing.T) {
	b := malformedBase(t)
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(path, b[:len(b)-40], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path)
	want := fmt.Sprintf(`gguf: %s: tensor "b.weight": data [352,420) beyond end of file (size 408)`, path)
	if err == nil || err.Error() != want {
		t.Errorf("Open: %v\n want %s", err, want)
	}
}

// TestTruncatedEverywhere cuts the base file at every length: each must
// fail with one line that names the file, except lengths that keep the
// last tensor's data (the trailing padding is optional).
func TestTruncatedEverywhere(t *testing.T) {
	b := malformedBase(t)
	for n := range len(b) {
		_, err := parse("m.gguf", b[:n])
		if n >= 420 {
			if err != nil {
				t.Errorf("cut at %d: %v", n, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("cut at %d: no error", n)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "gguf: m.gguf: ") || strings.Contains(msg, "\n") {
			t.Errorf("cut at %d: %q", n, msg)
		}
	}
}
