package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// seq returns n bytes 0, 1, 2, ... (mod 251), distinct enough to catch
// misplaced tensor data.
func seq(n int, start byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = start + byte(i%251)
	}
	return b
}

// allValues is one metadata entry of every value type, nested arrays
// included, in the order written.
func allValues() []KV {
	mk := func(x any) Value {
		v, err := NewValue(x)
		if err != nil {
			panic(err)
		}
		return v
	}
	return []KV{
		{"general.architecture", mk("llama")},
		{"t.u8", mk(uint8(200))},
		{"t.i8", mk(int8(-100))},
		{"t.u16", mk(uint16(60000))},
		{"t.i16", mk(int16(-30000))},
		{"t.u32", mk(uint32(4000000000))},
		{"t.i32", mk(int32(-2000000000))},
		{"t.f32", mk(float32(1.5e-5))},
		{"t.bool", mk(true)},
		{"t.false", mk(false)},
		{"t.str", mk("héllo\x00wörld")},
		{"t.empty", mk("")},
		{"t.u64", mk(uint64(math.MaxUint64))},
		{"t.i64", mk(int64(math.MinInt64))},
		{"t.f64", mk(math.Pi)},
		{"t.nan", mk(math.Float32frombits(0x7fc00001))},
		{"t.a.u8", mk([]uint8{0, 255})},
		{"t.a.i8", mk([]int8{-128, 127})},
		{"t.a.u16", mk([]uint16{1, 65535})},
		{"t.a.i16", mk([]int16{-32768, 32767})},
		{"t.a.u32", mk([]uint32{0, math.MaxUint32})},
		{"t.a.i32", mk([]int32{1, 2, 6, -3})},
		{"t.a.f32", mk([]float32{-0.5, 0, 1e30})},
		{"t.a.bool", mk([]bool{true, false, true})},
		{"t.a.str", mk([]string{"<unk>", "", "▁the", "\xff"})},
		{"t.a.u64", mk([]uint64{math.MaxUint64})},
		{"t.a.i64", mk([]int64{math.MinInt64, -1})},
		{"t.a.f64", mk([]float64{math.Inf(-1), 2.5})},
		{"t.a.none", mk([]string{})},
		{"t.a.nested", mk([]any{[]int32{1, 2}, []string{"x"}, []any{[]uint8{}, []any{uint16(7)}}})},
		{"t.a.any", mk([]any{"a", "b"})},
		{"t.a.f32s", mk([]any{float32(1), float32(2)})},
	}
}

// testWriter returns a Writer with every value type and tensors of several
// types and ranks.
func testWriter(t testing.TB) *Writer {
	w := NewWriter()
	for _, kv := range allValues() {
		w.Add(kv.Key, kv.Value)
	}
	for _, tn := range []struct {
		name  string
		typ   Type
		shape []uint64
	}{
		{"token_embd.weight", TypeF16, []uint64{8, 3}},
		{"norm.weight", TypeF32, []uint64{5}},
		{"blk.0.q8", TypeQ8_0, []uint64{64, 2, 1}},
		{"blk.0.q4k", TypeQ4_K, []uint64{256, 1, 2, 1}},
		{"empty", TypeF32, []uint64{0, 4}},
	} {
		row, _ := tn.typ.RowSize(tn.shape[0])
		rows := uint64(1)
		for _, d := range tn.shape[1:] {
			rows *= d
		}
		if err := w.AddTensor(tn.name, tn.typ, tn.shape, seq(int(row*rows), byte(len(tn.name)))); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func writeBytes(t testing.TB, w *Writer) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo returned %d, wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	for _, align := range []uint64{0, 1, 64, 4096} {
		w := testWriter(t)
		wantAlign := uint64(DefaultAlignment)
		wantKVs := allValues()
		if align != 0 {
			w.Add(KeyAlignment, uint32(align))
			wantAlign = align
			wantKVs = append(wantKVs, KV{KeyAlignment, Value{Type: ValueUint32, v: uint32(align)}})
		}
		path := filepath.Join(t.TempDir(), "m.gguf")
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if f.Version != 3 || f.Alignment != wantAlign || f.Path != path {
			t.Errorf("align %d: version %d alignment %d path %q", align, f.Version, f.Alignment, f.Path)
		}
		if len(f.Metadata) != len(wantKVs) {
			t.Fatalf("align %d: %d keys, want %d", align, len(f.Metadata), len(wantKVs))
		}
		for i, kv := range f.Metadata {
			want := wantKVs[i]
			if kv.Key == "t.nan" { // NaN != NaN: compare bits
				if b := math.Float32bits(kv.Value.Any().(float32)); b != 0x7fc00001 || kv.Value.Type != ValueFloat32 {
					t.Errorf("t.nan = %v %#x", kv.Value.Type, b)
				}
				continue
			}
			if !reflect.DeepEqual(kv, want) {
				t.Errorf("align %d: metadata %d\n got %#v\nwant %#v", align, i, kv, want)
			}
			if v, ok := f.Lookup(want.Key); !ok || !reflect.DeepEqual(v, want.Value) {
				t.Errorf("Lookup(%q) = %#v, %v", want.Key, v, ok)
			}
		}
		st, _ := os.Stat(path)
		if f.FileSize != uint64(st.Size()) || f.DataOffset%wantAlign != 0 {
			t.Errorf("file size %d (stat %d), data offset %d", f.FileSize, st.Size(), f.DataOffset)
		}
		if len(f.Tensors) != len(w.tensors) {
			t.Fatalf("%d tensors, want %d", len(f.Tensors), len(w.tensors))
		}
		for i, tn := range f.Tensors {
			wt := w.tensors[i]
			if !reflect.DeepEqual(tn, wt) {
				t.Errorf("tensor %d: %+v, want %+v", i, tn, wt)
			}
			if tn.Offset%wantAlign != 0 {
				t.Errorf("tensor %s offset %d not aligned to %d", tn.Name, tn.Offset, wantAlign)
			}
			if got, ok := f.Tensor(wt.Name); !ok || got != tn {
				t.Errorf("Tensor(%q) = %v, %v", wt.Name, got, ok)
			}
			if d := f.Data(tn); !bytes.Equal(d, w.data[i]) || cap(d) != len(d) {
				t.Errorf("tensor %s: data differs", tn.Name)
			}
		}
		// The same writer gives the same bytes, whether to a file or a buffer.
		onDisk, _ := os.ReadFile(path)
		if !bytes.Equal(onDisk, writeBytes(t, w)) {
			t.Errorf("WriteFile and WriteTo differ")
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if d := f.Data(f.Tensors[0]); d != nil {
			t.Errorf("Data after Close = %d bytes", len(d))
		}
	}
}

// TestLayout pins the exact bytes of a small file, so that changes to the
// encoding show up here and not only in llama.cpp.
func TestLayout(t *testing.T) {
	w := NewWriter()
	w.Add("a", uint32(7))
	if err := w.AddTensor("t", TypeF32, []uint64{2}, []byte{1, 2, 3, 4, 5, 6, 7, 8}); err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	var want []byte
	want = append(want, "GGUF"...)
	want = le.AppendUint32(want, 3)
	want = le.AppendUint64(want, 1) // tensors
	want = le.AppendUint64(want, 1) // metadata
	want = le.AppendUint64(want, 1)
	want = append(want, 'a')
	want = le.AppendUint32(want, uint32(ValueUint32))
	want = le.AppendUint32(want, 7)
	want = le.AppendUint64(want, 1)
	want = append(want, 't')
	want = le.AppendUint32(want, 1) // n_dims
	want = le.AppendUint64(want, 2)
	want = le.AppendUint32(want, uint32(TypeF32))
	want = le.AppendUint64(want, 0)          // offset
	want = append(want, make([]byte, 22)...) // header of 74 bytes padded to 96
	want = append(want, 1, 2, 3, 4, 5, 6, 7, 8)
	want = append(want, make([]byte, 24)...) // data padded to 32
	got := writeBytes(t, w)
	if !bytes.Equal(got, want) {
		t.Fatalf("layout\n got % x\nwant % x", got, want)
	}
	f, err := parse("m.gguf", got)
	if err != nil {
		t.Fatal(err)
	}
	if f.DataOffset != 96 || f.Tensors[0].Size != 8 {
		t.Errorf("data offset %d size %d", f.DataOffset, f.Tensors[0].Size)
	}
}

func TestVersion2(t *testing.T) {
	b := writeBytes(t, testWriter(t))
	binary.LittleEndian.PutUint32(b[4:], 2)
	f, err := parse("v2.gguf", b)
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 2 || len(f.Tensors) != 5 || len(f.Metadata) != len(allValues()) {
		t.Errorf("v2: version %d, %d tensors, %d keys", f.Version, len(f.Tensors), len(f.Metadata))
	}
}

func TestNoTensors(t *testing.T) {
	w := NewWriter()
	w.Add("general.name", "empty")
	b := writeBytes(t, w)
	f, err := parse("e.gguf", b)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) != 0 || f.DataOffset != uint64(len(b)) || len(b)%32 != 0 {
		t.Errorf("%d tensors, data offset %d, size %d", len(f.Tensors), f.DataOffset, len(b))
	}
	// A header not padded up to the data section is fine without tensors.
	if _, err := parse("e.gguf", bytes.TrimRight(b, "\x00")); err != nil {
		t.Error(err)
	}
}

func TestAccessors(t *testing.T) {
	f, err := parse("m.gguf", writeBytes(t, testWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		get     func(string) (any, error)
		getName string
		key     string
		want    any
		wantErr string
	}{}
	str := func(k string) (any, error) { return f.String(k) }
	uintf := func(k string) (any, error) { return f.Uint(k) }
	intf := func(k string) (any, error) { return f.Int(k) }
	float := func(k string) (any, error) { return f.Float(k) }
	boolf := func(k string) (any, error) { return f.Bool(k) }
	strs := func(k string) (any, error) { return f.Strings(k) }
	f32s := func(k string) (any, error) { return f.Float32s(k) }
	i32s := func(k string) (any, error) { return f.Int32s(k) }
	u64s := func(k string) (any, error) { return f.Uint64s(k) }
	add := func(get func(string) (any, error), key string, want any, wantErr string) {
		tests = append(tests, struct {
			get     func(string) (any, error)
			getName string
			key     string
			want    any
			wantErr string
		}{get, "", key, want, wantErr})
	}
	add(str, "general.architecture", "llama", "")
	add(str, "t.str", "héllo\x00wörld", "")
	add(str, "t.missing", "", `gguf: m.gguf: metadata "t.missing": missing`)
	add(str, "t.i32", "", `gguf: m.gguf: metadata "t.i32": is int32, want string`)
	add(str, "t.a.str", "", `gguf: m.gguf: metadata "t.a.str": is array of string, want string`)
	add(uintf, "t.u8", uint64(200), "")
	add(uintf, "t.u32", uint64(4000000000), "")
	add(uintf, "t.u64", uint64(math.MaxUint64), "")
	add(uintf, "t.i8", uint64(0), `gguf: m.gguf: metadata "t.i8": -100 is negative, want an unsigned integer`)
	add(uintf, "t.f32", uint64(0), `gguf: m.gguf: metadata "t.f32": is float32, want an unsigned integer`)
	add(uintf, "t.nope", uint64(0), `gguf: m.gguf: metadata "t.nope": missing`)
	add(intf, "t.i64", int64(math.MinInt64), "")
	add(intf, "t.i16", int64(-30000), "")
	add(intf, "t.u16", int64(60000), "")
	add(intf, "t.u64", int64(0), `gguf: m.gguf: metadata "t.u64": 18446744073709551615 overflows int64`)
	add(intf, "t.bool", int64(0), `gguf: m.gguf: metadata "t.bool": is bool, want an integer`)
	add(float, "t.f32", float64(float32(1.5e-5)), "")
	add(float, "t.f64", math.Pi, "")
	add(float, "t.i32", float64(-2000000000), "")
	add(float, "t.u64", float64(math.MaxUint64), "")
	add(float, "t.str", float64(0), `gguf: m.gguf: metadata "t.str": is string, want a number`)
	add(boolf, "t.bool", true, "")
	add(boolf, "t.false", false, "")
	add(boolf, "t.u8", false, `gguf: m.gguf: metadata "t.u8": is uint8, want bool`)
	add(strs, "t.a.str", []string{"<unk>", "", "▁the", "\xff"}, "")
	add(strs, "t.a.none", []string{}, "")
	add(strs, "t.a.any", []string{"a", "b"}, "")
	add(strs, "t.a.i32", []string(nil), `gguf: m.gguf: metadata "t.a.i32": is array of int32, want array of string`)
	add(strs, "t.a.nested", []string(nil), `gguf: m.gguf: metadata "t.a.nested": is array of array, want array of string`)
	add(f32s, "t.a.f32", []float32{-0.5, 0, 1e30}, "")
	add(f32s, "t.a.f32s", []float32{1, 2}, "")
	add(f32s, "t.a.f64", []float32{float32(math.Inf(-1)), 2.5}, "")
	add(f32s, "t.f32", []float32(nil), `gguf: m.gguf: metadata "t.f32": is float32, want array of float32`)
	add(i32s, "t.a.i32", []int32{1, 2, 6, -3}, "")
	add(i32s, "t.a.u8", []int32{0, 255}, "")
	add(i32s, "t.a.i8", []int32{-128, 127}, "")
	add(i32s, "t.a.i16", []int32{-32768, 32767}, "")
	add(i32s, "t.a.u32", []int32(nil), `gguf: m.gguf: metadata "t.a.u32": array of uint32 values out of int32 range`)
	add(i32s, "t.a.i64", []int32(nil), `gguf: m.gguf: metadata "t.a.i64": array of int64 values out of int32 range`)
	add(i32s, "t.a.u64", []int32(nil), `gguf: m.gguf: metadata "t.a.u64": array of uint64 values out of int32 range`)
	add(i32s, "t.a.f32", []int32(nil), `gguf: m.gguf: metadata "t.a.f32": is array of float32, want array of int32`)
	add(u64s, "t.a.u64", []uint64{math.MaxUint64}, "")
	add(u64s, "t.a.u32", []uint64{0, math.MaxUint32}, "")
	add(u64s, "t.a.i32", []uint64(nil), `gguf: m.gguf: metadata "t.a.i32": array of int32 values out of uint64 range`)
	add(u64s, "t.a.i8", []uint64(nil), `gguf: m.gguf: metadata "t.a.i8": array of int8 values out of uint64 range`)
	add(u64s, "t.a.str", []uint64(nil), `gguf: m.gguf: metadata "t.a.str": is array of string, want array of uint64`)
	for _, tt := range tests {
		got, err := tt.get(tt.key)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if gotErr != tt.wantErr || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: got %#v, %q\n want %#v, %q", tt.key, got, gotErr, tt.want, tt.wantErr)
		}
	}

	// Slices are copies: changing them leaves the file's metadata alone.
	s, _ := f.Strings("t.a.str")
	s[0] = "changed"
	if s2, _ := f.Strings("t.a.str"); s2[0] != "<unk>" {
		t.Errorf("Strings shares storage")
	}
	// Any of nested arrays.
	v, _ := f.Lookup("t.a.nested")
	wantAny := []any{[]int32{1, 2}, []string{"x"}, []any{[]uint8{}, []uint16{7}}}
	if v.Type != ValueArray || v.ElemType != ValueArray || v.Len() != 3 || !reflect.DeepEqual(v.Any(), wantAny) {
		t.Errorf("nested = %v %v %d %#v", v.Type, v.ElemType, v.Len(), v.Any())
	}
	if _, ok := f.Lookup("nope"); ok {
		t.Errorf("Lookup(nope) found")
	}
	if _, ok := f.Tensor("nope"); ok {
		t.Errorf("Tensor(nope) found")
	}
}

func TestTensorMethods(t *testing.T) {
	tests := []struct {
		shape       []uint64
		elems, rows uint64
	}{
		{[]uint64{256, 32000}, 256 * 32000, 32000},
		{[]uint64{5}, 5, 1},
		{[]uint64{4, 3, 2, 1}, 24, 6},
		{[]uint64{0, 7}, 0, 0},
		{nil, 1, 0},
	}
	for _, tt := range tests {
		tn := &Tensor{Shape: tt.shape}
		if tn.Elements() != tt.elems || tn.Rows() != tt.rows {
			t.Errorf("%v: elements %d rows %d, want %d %d", tt.shape, tn.Elements(), tn.Rows(), tt.elems, tt.rows)
		}
	}
}

func TestWriterErrors(t *testing.T) {
	tests := []struct {
		name    string
		build   func(w *Writer) error
		wantErr string
	}{
		{"plain int", func(w *Writer) error { w.Add("k", 3); return nil },
			`gguf: writer: metadata "k": unsupported Go type int (use a sized type such as uint32 or int64)`},
		{"struct", func(w *Writer) error { w.Add("k", struct{}{}); return nil },
			`gguf: writer: metadata "k": unsupported Go type struct {}`},
		{"empty any", func(w *Writer) error { w.Add("k", []any{}); return nil },
			`gguf: writer: metadata "k": empty []any has no element type (use a typed slice such as []int32{})`},
		{"mixed any", func(w *Writer) error { w.Add("k", []any{"a", int32(1)}); return nil },
			`gguf: writer: metadata "k": element 1 is int32, element 0 is string: GGUF arrays hold one type`},
		{"bad nested", func(w *Writer) error { w.Add("k", []any{[]any{1}}); return nil },
			`gguf: writer: metadata "k": element 0: element 0: unsupported Go type int (use a sized type such as uint32 or int64)`},
		{"zero Value", func(w *Writer) error { w.Add("k", Value{}); return nil },
			`gguf: writer: metadata "k": invalid Value (type uint8)`},
		{"first error kept", func(w *Writer) error { w.Add("a", 1.5i); w.Add("b", 2); return nil },
			`gguf: writer: metadata "a": unsupported Go type complex128`},
		{"alignment 24", func(w *Writer) error { w.Add(KeyAlignment, uint32(24)); return nil },
			`gguf: writer: metadata "general.alignment": 24 is not a power of two`},
		{"alignment string", func(w *Writer) error { w.Add(KeyAlignment, "32"); return nil },
			`gguf: writer: metadata "general.alignment": is string, want an unsigned integer`},
		{"alignment huge", func(w *Writer) error { w.Add(KeyAlignment, uint64(1<<21)); return nil },
			`gguf: writer: metadata "general.alignment": 2097152 is larger than 1048576`},
		{"size", func(w *Writer) error { return w.AddTensor("x", TypeF32, []uint64{4, 2}, make([]byte, 31)) },
			`gguf: writer: tensor "x": F32 shape [4 2] needs 32 bytes of data, got 31`},
		{"block", func(w *Writer) error { return w.AddTensor("x", TypeQ8_0, []uint64{16}, make([]byte, 17)) },
			`gguf: writer: tensor "x": row length 16 is not a multiple of the Q8_0 block size 32`},
		{"type", func(w *Writer) error { return w.AddTensor("x", Type(5), []uint64{32}, nil) },
			`gguf: writer: tensor "x": unknown ggml type 5`},
		{"no dims", func(w *Writer) error { return w.AddTensor("x", TypeF32, nil, nil) },
			`gguf: writer: tensor "x": 0 dimensions, want 1 to 4`},
		{"5 dims", func(w *Writer) error { return w.AddTensor("x", TypeF32, []uint64{1, 1, 1, 1, 1}, make([]byte, 4)) },
			`gguf: writer: tensor "x": 5 dimensions, want 1 to 4`},
		{"overflow", func(w *Writer) error { return w.AddTensor("x", TypeF32, []uint64{1 << 32, 1 << 32}, nil) },
			`gguf: writer: tensor "x": shape [4294967296 4294967296] overflows uint64 bytes`},
		{"duplicate", func(w *Writer) error {
			if err := w.AddTensor("x", TypeF32, []uint64{1}, make([]byte, 4)); err != nil {
				return err
			}
			return w.AddTensor("x", TypeF32, []uint64{1}, make([]byte, 4))
		}, `gguf: writer: tensor "x": duplicate name`},
		{"func short", func(w *Writer) error {
			return w.AddTensorFunc("x", TypeF32, []uint64{4}, func(out io.Writer) error { _, err := out.Write(make([]byte, 12)); return err })
		}, `gguf: writer: tensor "x": wrote 12 bytes, want 16`},
		{"func error", func(w *Writer) error {
			return w.AddTensorFunc("x", TypeF32, []uint64{4}, func(io.Writer) error { return errors.New("no data") })
		}, `gguf: writer: tensor "x": no data`},
		{"func shape", func(w *Writer) error {
			return w.AddTensorFunc("x", TypeQ8_0, []uint64{16}, func(io.Writer) error { return nil })
		}, `gguf: writer: tensor "x": row length 16 is not a multiple of the Q8_0 block size 32`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWriter()
			err := tt.build(w)
			if err == nil {
				_, err = w.WriteTo(&bytes.Buffer{})
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("error = %v\n want %s", err, tt.wantErr)
			}
		})
	}
}

// TestAddTensorFunc checks that tensors whose data is produced while
// writing, in pieces of any size, give the bytes of AddTensor.
func TestAddTensorFunc(t *testing.T) {
	want := writeBytes(t, testWriter(t))
	w := NewWriter()
	for _, kv := range allValues() {
		w.Add(kv.Key, kv.Value)
	}
	src := testWriter(t)
	for i, tn := range src.tensors {
		data := src.data[i]
		if err := w.AddTensorFunc(tn.Name, tn.Type, tn.Shape, func(out io.Writer) error {
			for b := data; len(b) > 0; {
				k := min(len(b), 7)
				if _, err := out.Write(b[:k]); err != nil {
					return err
				}
				b = b[k:]
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if got := writeBytes(t, w); !bytes.Equal(got, want) {
		t.Errorf("AddTensorFunc wrote %d bytes that differ from AddTensor's %d", len(got), len(want))
	}
}

func TestWriterReplace(t *testing.T) {
	w := NewWriter()
	w.Add("a", uint32(1))
	w.Add("b", "x")
	w.Add("a", "again")
	f, err := parse("m.gguf", writeBytes(t, w))
	if err != nil {
		t.Fatal(err)
	}
	want := []KV{{"a", Value{Type: ValueString, v: "again"}}, {"b", Value{Type: ValueString, v: "x"}}}
	if !reflect.DeepEqual(f.Metadata, want) {
		t.Errorf("metadata %v, want %v", f.Metadata, want)
	}
	// Adding a slice copies it.
	s := []int32{1, 2}
	w.Add("s", s)
	s[0] = 9
	v := w.kvs[w.kvIndex["s"]].Value.Any().([]int32)
	if v[0] != 1 {
		t.Errorf("Add kept the caller's slice")
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := NewWriter()
	w.Add("k", 1) // unsupported: the write fails
	if err := w.WriteFile(path); err == nil {
		t.Fatal("WriteFile succeeded")
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("failed WriteFile changed the file: %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temp file left behind: %v", ents)
	}
	if err := testWriter(t).WriteFile(filepath.Join(dir, "no", "such", "dir.gguf")); err == nil ||
		!strings.HasPrefix(err.Error(), "gguf: open "+dir+"/no/such/.gguf-tmp-") {
		t.Errorf("WriteFile into a missing dir: %v", err)
	}
}

// A file name of 255 bytes, the longest most file systems allow, can be
// written: the temporary name does not grow from it.
func TestWriteFileLongName(t *testing.T) {
	p := filepath.Join(t.TempDir(), strings.Repeat("m", 250)+".gguf")
	if err := testWriter(t).WriteFile(p); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.gguf")
	os.WriteFile(empty, nil, 0o644)
	short := filepath.Join(dir, "short.gguf")
	os.WriteFile(short, []byte("GGUF\x03\x00"), 0o644)
	tests := []struct{ path, want string }{
		{filepath.Join(dir, "missing.gguf"), "gguf: open " + dir + "/missing.gguf: no such file or directory"},
		{dir, "gguf: " + dir + ": not a regular file"},
		{empty, "gguf: " + empty + `: not a GGUF file: magic "", want "GGUF"`},
		{short, "gguf: " + short + ": truncated file: version needs 4 bytes at offset 4, file size 6"},
	}
	// A FIFO is refused before it is opened: opening it would block.
	if fifo := filepath.Join(dir, "fifo.gguf"); syscall.Mkfifo(fifo, 0o644) == nil {
		tests = append(tests, struct{ path, want string }{fifo, "gguf: " + fifo + ": not a regular file"})
	}
	for _, tt := range tests {
		f, err := Open(tt.path)
		if err == nil || err.Error() != tt.want {
			t.Errorf("Open(%s) = %v, %v\n want error %s", tt.path, f, err, tt.want)
		}
	}
}

// TestNewValueAny checks that []any of one scalar type packs into the typed
// slice of that type, as the reader produces it.
func TestNewValueAny(t *testing.T) {
	tests := []struct {
		in   []any
		want any
		et   ValueType
	}{
		{[]any{uint8(1)}, []uint8{1}, ValueUint8},
		{[]any{int8(-1)}, []int8{-1}, ValueInt8},
		{[]any{uint16(2)}, []uint16{2}, ValueUint16},
		{[]any{int16(-2)}, []int16{-2}, ValueInt16},
		{[]any{uint32(3)}, []uint32{3}, ValueUint32},
		{[]any{int32(-3), int32(4)}, []int32{-3, 4}, ValueInt32},
		{[]any{float32(0.5)}, []float32{0.5}, ValueFloat32},
		{[]any{true, false}, []bool{true, false}, ValueBool},
		{[]any{"a", ""}, []string{"a", ""}, ValueString},
		{[]any{uint64(5)}, []uint64{5}, ValueUint64},
		{[]any{int64(-5)}, []int64{-5}, ValueInt64},
		{[]any{2.5}, []float64{2.5}, ValueFloat64},
		{[]any{[]any{"x"}, []uint8{}}, []any{[]string{"x"}, []uint8{}}, ValueArray},
		{[]any{mustValue(uint16(9))}, []uint16{9}, ValueUint16},
	}
	for _, tt := range tests {
		v, err := NewValue(tt.in)
		if err != nil || v.Type != ValueArray || v.ElemType != tt.et || !reflect.DeepEqual(v.Any(), tt.want) {
			t.Errorf("NewValue(%#v) = %v %v %#v, %v; want %v %#v", tt.in, v.Type, v.ElemType, v.Any(), err, tt.et, tt.want)
			continue
		}
		w := NewWriter()
		w.Add("k", tt.in)
		f, err := parse("m.gguf", writeBytes(t, w))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := f.Lookup("k"); !reflect.DeepEqual(got, v) {
			t.Errorf("%#v: read back %#v, want %#v", tt.in, got, v)
		}
	}
	if v, err := NewValue([]Value{mustValue("a"), mustValue("b")}); err != nil || !reflect.DeepEqual(v.Any(), []string{"a", "b"}) {
		t.Errorf("NewValue([]Value) = %#v, %v", v.Any(), err)
	}
}
