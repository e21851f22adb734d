package gguf

import (
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
)

func TestStringArray(t *testing.T) {
	in := []string{"<unk>", "", "▁the", "\xff", "a b"}
	w := NewWriter()
	w.Add("t.a.str", in)
	f, err := parse("m.gguf", writeBytes(t, w))
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.StringArray("t.a.str")
	if err != nil {
		t.Fatal(err)
	}
	if a.Len() != len(in) {
		t.Fatalf("Len = %d, want %d", a.Len(), len(in))
	}
	for i, s := range in {
		if a.At(i) != s {
			t.Errorf("At(%d) = %q, want %q", i, a.At(i), s)
		}
	}
	data, offs := a.Arena()
	if string(data) != "<unk>▁the\xffa b" || !reflect.DeepEqual(offs, []uint32{0, 5, 5, 11, 12, 15}) {
		t.Errorf("Arena = %q, %v", data, offs)
	}
	v, _ := f.Lookup("t.a.str")
	if got, ok := v.StringArray(); !ok || got != a {
		t.Errorf("Value.StringArray = %p, %v, want the file's %p", got, ok, a)
	}
	if !reflect.DeepEqual(v.Any(), in) || v.Len() != len(in) {
		t.Errorf("Any = %#v, Len = %d", v.Any(), v.Len())
	}
	// A Value of a *StringArray shares it, and writes the same bytes.
	if v2, err := NewValue(a); err != nil || v2.v != any(a) {
		t.Errorf("NewValue(*StringArray) = %v, %v", v2, err)
	}
	w2 := NewWriter()
	w2.Add("t.a.str", a)
	if string(writeBytes(t, w2)) != string(writeBytes(t, w)) {
		t.Errorf("a *StringArray writes other bytes than its []string")
	}
	if _, err := NewValue((*StringArray)(nil)); err == nil {
		t.Errorf("NewValue(nil *StringArray) accepted")
	}
	if _, err := f.StringArray("t.missing"); err == nil {
		t.Errorf("StringArray of a missing key")
	}
	var nilArr *StringArray
	if d, o := nilArr.Arena(); nilArr.Len() != 0 || len(d) != 0 || !reflect.DeepEqual(o, []uint32{0}) {
		t.Errorf("nil array: Len %d, Arena %q %v", nilArr.Len(), d, o)
	}
}

// TestStringArrayMemory holds a parsed string array to its bytes plus a
// 4-byte offset each (it was a copy of the array with its 8-byte length
// prefixes plus a 16-byte string header each: 24 bytes more a string).
func TestStringArrayMemory(t *testing.T) {
	const n = 200_000
	in := make([]string, n)
	text := 0
	for i := range in {
		in[i] = fmt.Sprintf("tok%d", i)
		text += len(in[i])
	}
	w := NewWriter()
	w.Add("t.a.str", in)
	b := writeBytes(t, w)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	f, err := parse("m.gguf", b)
	runtime.ReadMemStats(&m1)
	if err != nil {
		t.Fatal(err)
	}
	got := m1.TotalAlloc - m0.TotalAlloc
	want := uint64(text + 4*(n+1) + 16<<10) // and the header's few small allocations
	t.Logf("%d strings of %d bytes: %d bytes allocated (%.1f a string)", n, text, got, float64(got)/n)
	if got > want {
		t.Errorf("parsing %d strings of %d bytes allocated %d bytes, want at most %d", n, text, got, want)
	}
	runtime.KeepAlive(f)
}

// TestOpenLargeHeader opens a file whose metadata spans megabytes, so that
// Open gives header pages back while it parses (pageDropper): every value
// and the tensor data must read back, and the header bytes too.
func TestOpenLargeHeader(t *testing.T) {
	const n = 300_000
	toks := make([]string, n)
	for i := range toks {
		toks[i] = fmt.Sprintf("token-%d", i)
	}
	scores := make([]float32, n)
	for i := range scores {
		scores[i] = float32(i)
	}
	w := NewWriter()
	w.Add("t.a.str", toks)
	w.Add("t.a.f32", scores)
	w.Add("t.after", "end")
	data := seq(4096, 7)
	if err := w.AddTensor("x", TypeF32, []uint64{1024}, data); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "big.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.DataOffset < 4<<20 {
		t.Fatalf("header of %d bytes, want megabytes", f.DataOffset)
	}
	a, err := f.StringArray("t.a.str")
	if err != nil || a.Len() != n || a.At(0) != "token-0" || a.At(n-1) != fmt.Sprintf("token-%d", n-1) {
		t.Fatalf("t.a.str: %v, %d strings", err, a.Len())
	}
	if s, err := f.Float32s("t.a.f32"); err != nil || len(s) != n || s[n-1] != n-1 {
		t.Fatalf("t.a.f32: %v", err)
	}
	if s, err := f.String("t.after"); err != nil || s != "end" {
		t.Fatalf("t.after = %q, %v", s, err)
	}
	x, _ := f.Tensor("x")
	if got := f.Data(x); !reflect.DeepEqual(got, data) {
		t.Errorf("tensor data differs")
	}
	if string(f.data[:4]) != "GGUF" {
		t.Errorf("header bytes after Open = %q", f.data[:4])
	}
}
