package gguf

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the seed corpus in testdata/fuzz/FuzzOpen")

// FuzzOpen feeds arbitrary bytes to the parser that Open runs over the
// mapped file. Bad input must give a one-line error naming the file; good
// input must describe tensors that lie in the data, and must survive
// re-encoding by the Writer unchanged.
func FuzzOpen(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := parse("fuzz.gguf", data)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "gguf: fuzz.gguf: ") || strings.Contains(msg, "\n") {
				t.Fatalf("bad error message %q", msg)
			}
			return
		}
		checkFile(t, file)
		if file.Alignment > 4096 {
			return // valid, but too much padding to re-encode quickly
		}
		b1 := reencode(t, file)
		f2, err := parse("fuzz2.gguf", b1)
		if err != nil {
			t.Fatalf("re-encoded file does not parse: %v", err)
		}
		checkFile(t, f2)
		if b2 := reencode(t, f2); !bytes.Equal(b1, b2) {
			t.Fatalf("re-encoding is not stable")
		}
	})
}

// checkFile checks the invariants of a parsed file.
func checkFile(t *testing.T, f *File) {
	t.Helper()
	if f.Alignment == 0 || f.Alignment&(f.Alignment-1) != 0 || f.DataOffset%f.Alignment != 0 {
		t.Fatalf("alignment %d, data offset %d", f.Alignment, f.DataOffset)
	}
	for _, kv := range f.Metadata {
		v, ok := f.Lookup(kv.Key)
		if !ok || v.Type != kv.Value.Type || v.Len() != kv.Value.Len() {
			t.Fatalf("Lookup(%q) = %v, %v", kv.Key, v, ok)
		}
		_ = v.Any()
	}
	if len(f.kvIndex) != len(f.Metadata) || len(f.tensors) != len(f.Tensors) {
		t.Fatalf("index sizes %d %d", len(f.kvIndex), len(f.tensors))
	}
	for _, tn := range f.Tensors {
		if got, ok := f.Tensor(tn.Name); !ok || got != tn {
			t.Fatalf("Tensor(%q) = %v", tn.Name, got)
		}
		if d := f.Data(tn); uint64(len(d)) != tn.Size {
			t.Fatalf("tensor %q: Data has %d bytes, Size %d", tn.Name, len(d), tn.Size)
		}
		row, err := tn.Type.RowSize(tn.Shape[0])
		if err != nil || row*tn.Rows() != tn.Size || tn.Offset%f.Alignment != 0 {
			t.Fatalf("tensor %q: %v %v size %d offset %d: %v", tn.Name, tn.Type, tn.Shape, tn.Size, tn.Offset, err)
		}
	}
}

// reencode writes f's metadata and tensors with a Writer.
func reencode(t *testing.T, f *File) []byte {
	t.Helper()
	w := NewWriter()
	for _, kv := range f.Metadata {
		w.Add(kv.Key, kv.Value)
	}
	for _, tn := range f.Tensors {
		if err := w.AddTensor(tn.Name, tn.Type, tn.Shape, f.Data(tn)); err != nil {
			t.Fatalf("AddTensor: %v", err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	return buf.Bytes()
}

type seed struct {
	name string
	data []byte
}

// fuzzSeeds returns small valid files made with the Writer and corrupt
// variants of them; TestFuzzCorpus keeps testdata/fuzz/FuzzOpen in step.
func fuzzSeeds(t testing.TB) []seed {
	minimal := NewWriter()
	minimal.Add("general.architecture", "llama")
	if err := minimal.AddTensor("w", TypeF32, []uint64{2}, []byte{0, 0, 128, 63, 0, 0, 0, 64}); err != nil {
		t.Fatal(err)
	}
	minimalB := writeBytes(t, minimal)

	meta := NewWriter()
	for _, kv := range allValues() {
		meta.Add(kv.Key, kv.Value)
	}
	meta.Add(KeyAlignment, uint32(64))
	metaB := writeBytes(t, meta)

	base := malformedBase(t)
	v2 := bytes.Clone(base)
	binary.LittleEndian.PutUint32(v2[4:], 2)
	hugeCount := bytes.Clone(base)
	binary.LittleEndian.PutUint64(hugeCount[16:], 1<<60)
	misaligned := bytes.Clone(base)
	binary.LittleEndian.PutUint64(misaligned[at(t, base, "b.weight")+32:], 40)
	badType := bytes.Clone(minimalB)
	binary.LittleEndian.PutUint32(badType[bytes.LastIndexByte(badType, 'w')+1+4+8:], 99)

	return []seed{
		{"valid-minimal", minimalB},
		{"valid-metadata", metaB},
		{"valid-tensors", base},
		{"valid-v2", v2},
		{"valid-quant", writeBytes(t, testWriter(t))},
		{"bad-magic", append([]byte("GGML"), minimalB[4:]...)},
		{"bad-truncated", base[:200]},
		{"bad-count", hugeCount},
		{"bad-misaligned", misaligned},
		{"bad-type", badType},
	}
}

// TestFuzzCorpus checks that the committed seed corpus is what fuzzSeeds
// makes (rewrite it with -update), and that each seed is valid or not as
// its name says.
func TestFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzOpen")
	for _, s := range fuzzSeeds(t) {
		_, err := parse(s.name, s.data)
		if strings.HasPrefix(s.name, "valid-") != (err == nil) {
			t.Errorf("seed %s: %v", s.name, err)
		}
		text := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s.data)
		path := filepath.Join(dir, s.name)
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != text {
			t.Errorf("seed %s is stale or missing (%v): run go test -run TestFuzzCorpus -update", path, err)
		}
	}
}
