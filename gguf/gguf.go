// Package gguf reads and writes GGUF, the model file format of llama.cpp
// and ggml.
//
// A GGUF file is a little-endian header followed by the tensor data:
//
//	magic "GGUF", version uint32 (2 or 3), tensor count uint64, metadata count uint64
//	metadata: key (uint64 length + UTF-8 bytes), value type uint32, value
//	tensor infos: name, n_dims uint32 (1..4), ne[n_dims] uint64, ggml type uint32, offset uint64
//	padding to general.alignment (default 32), then the data section
//
// Version 1 (2023) used 32-bit counts and lengths and is not supported;
// version 2 widened them to 64 bits; version 3 only added big-endian files
// (which announce themselves by a byte-swapped version and are refused
// here), so a little-endian v2 file and a v3 file are read the same way.
// Metadata values are scalars, strings or arrays (arrays may nest); the
// tokenizer vocabulary, for instance, is an array of strings, which a
// StringArray holds in its bytes plus 4 bytes a string (millions of tokens
// as a []string would cost 16 bytes a token more).
//
// Why mmap: models are gigabytes, and a tool that scores text needs every
// tensor, but not a copy of it. Open maps the file read-only and parses only
// the header (a few megabytes at most, mostly the vocabulary), so opening a
// 16 GB model reads no tensor data; File.Data returns slices of the mapping
// and the kernel pages weights in, and shares them between processes, as
// they are touched. The slices are read-only: writing to them faults. The
// header's pages, whose contents are copied out, are given back as the
// parser passes them (on Linux), so that a huge vocabulary is not resident
// twice.
//
// Files come from anywhere, so the parser trusts nothing: every count and
// length is checked against the bytes left before anything is allocated,
// shapes and sizes are checked for overflow, and each tensor's data must lie
// inside the file at an aligned offset. A malformed file gives a one-line
// error naming the file and the fault, never a panic. FuzzOpen keeps it so.
//
// A model too large for one file (Hugging Face takes files of up to 50 GB)
// comes split into shards by llama.cpp's gguf-split or gguf-py:
// NAME-00001-of-00003.gguf holds the metadata and the first tensors, the
// others only split.* keys and more tensors. Open takes the first shard and
// gives the whole model as one File, as llama.cpp does (split.go).
//
// Writer builds GGUF files deterministically; the test-model generator and
// tests use it.
package gguf

import (
	"fmt"
	"math"
	"os"
	"slices"
)

// DefaultAlignment is the data alignment when general.alignment is absent.
const DefaultAlignment = 32

// KeyAlignment is the metadata key that sets the data alignment.
const KeyAlignment = "general.alignment"

// KV is one metadata entry.
type KV struct {
	Key   string
	Value Value
}

// Tensor describes one tensor of a file. Its data is File.Data(t).
type Tensor struct {
	Name   string
	Type   Type
	Shape  []uint64 // ne0 first (ne0 = row length, contiguous)
	Offset uint64   // relative to the start of its shard's data section
	Size   uint64   // bytes

	shard int // the index of its file in File.Shards
}

// Elements returns the number of elements, the product of Shape.
func (t *Tensor) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Rows returns the number of rows of Shape[0] elements: Elements()/Shape[0].
// It is 0 when Shape is empty or Shape[0] is 0.
func (t *Tensor) Rows() uint64 {
	if len(t.Shape) == 0 || t.Shape[0] == 0 {
		return 0
	}
	return t.Elements() / t.Shape[0]
}

// File is an open GGUF file, or a model split into shards (Shards). Its
// fields are filled by Open and must not be changed; a File is safe for
// concurrent use until Close.
type File struct {
	Path       string   // the file opened: a split model's first shard
	Shards     []string // every file of the model, Path first: [Path] unless split
	Version    uint32
	Alignment  uint64
	Metadata   []KV      // in file order (of the first shard)
	Tensors    []*Tensor // in file order, shard after shard
	DataOffset uint64    // absolute offset of Path's data section
	FileSize   uint64    // of Path

	data    []byte         // the whole file (mapped)
	release func() error   // unmaps data; nil once closed
	kvIndex map[string]int // key -> index in Metadata
	tensors map[string]*Tensor
	rest    []*File // the other shards, in order
}

// Open maps the GGUF file at path read-only and parses its header; for the
// first shard of a split model, those of every shard (split.go). The File
// must be closed to release the mappings.
func Open(path string) (*File, error) {
	f, err := openFile(path)
	if err != nil {
		return nil, err
	}
	if err := f.openShards(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// openFile maps and parses one file.
func openFile(path string) (*File, error) {
	// Refuse a FIFO or device before opening it: opening a FIFO blocks.
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf: %s: not a regular file", path)
	}
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fd.Close() // the mapping outlives the descriptor
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf: %s: not a regular file", path)
	}
	data, release, err := mapFile(fd, st.Size())
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	d := newPageDropper(data)
	f, err := parseWith(path, data, func(off uint64) { d.upTo(off, 1<<20) })
	if err != nil {
		release()
		return nil, err
	}
	d.upTo(f.DataOffset, 0)
	f.release = release
	return f, nil
}

// Close unmaps the file (every shard). Slices returned by Data must not be
// used after Close (reading them faults). Close is idempotent.
func (f *File) Close() error {
	var first error
	for _, s := range f.rest {
		if err := s.Close(); err != nil && first == nil {
			first = err
		}
	}
	f.rest = nil
	rel := f.release
	f.release, f.data = nil, nil
	if rel == nil {
		return first
	}
	if err := rel(); err != nil {
		return fmt.Errorf("gguf: %s: unmap: %w", f.Path, err)
	}
	return first
}

// Data returns the bytes of t, a read-only slice of the mapped file (of
// t's shard) with len == t.Size. It returns nil for a tensor that does not
// lie in the file (one of another File, say) and after Close.
func (f *File) Data(t *Tensor) []byte {
	if t.shard > 0 {
		if t.shard > len(f.rest) {
			return nil
		}
		f = f.rest[t.shard-1]
	}
	start := f.DataOffset + t.Offset
	end := start + t.Size
	if start < f.DataOffset || end < start || end > uint64(len(f.data)) {
		return nil
	}
	return f.data[start:end:end]
}

// Tensor returns the tensor called name.
func (f *File) Tensor(name string) (*Tensor, bool) {
	t, ok := f.tensors[name]
	return t, ok
}

// Lookup returns the metadata value of key.
func (f *File) Lookup(key string) (Value, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return Value{}, false
	}
	return f.Metadata[i].Value, true
}

func (f *File) get(key string) (Value, error) {
	v, ok := f.Lookup(key)
	if !ok {
		return v, fmt.Errorf("gguf: %s: metadata %q: missing", f.Path, key)
	}
	return v, nil
}

func (f *File) typeErr(key string, v Value, want string) error {
	return fmt.Errorf("gguf: %s: metadata %q: is %s, want %s", f.Path, key, v.typeName(), want)
}

// typed returns the value of key when it holds a T, else an error that
// says what was wanted.
func typed[T any](f *File, key, want string) (T, error) {
	var zero T
	v, err := f.get(key)
	if err != nil {
		return zero, err
	}
	x, ok := v.v.(T)
	if !ok {
		return zero, f.typeErr(key, v, want)
	}
	return x, nil
}

// integer returns the value of key, which may have any integer type, as
// asInt splits it, else an error that says what was wanted.
func (f *File) integer(key, want string) (i int64, u uint64, big bool, err error) {
	v, err := f.get(key)
	if err != nil {
		return 0, 0, false, err
	}
	i, u, big, ok := v.asInt()
	if !ok {
		return 0, 0, false, f.typeErr(key, v, want)
	}
	return i, u, big, nil
}

// String returns the string value of key.
func (f *File) String(key string) (string, error) { return typed[string](f, key, "string") }

// Uint returns the value of key, which may have any integer type, as a
// uint64; it fails for a negative value.
func (f *File) Uint(key string) (uint64, error) {
	i, u, big, err := f.integer(key, "an unsigned integer")
	switch {
	case err != nil:
		return 0, err
	case big:
		return u, nil
	case i < 0:
		return 0, fmt.Errorf("gguf: %s: metadata %q: %d is negative, want an unsigned integer", f.Path, key, i)
	}
	return uint64(i), nil
}

// Int returns the value of key, which may have any integer type, as an
// int64; it fails for a uint64 beyond math.MaxInt64.
func (f *File) Int(key string) (int64, error) {
	i, u, big, err := f.integer(key, "an integer")
	switch {
	case err != nil:
		return 0, err
	case big:
		return 0, fmt.Errorf("gguf: %s: metadata %q: %d overflows int64", f.Path, key, u)
	}
	return i, nil
}

// Float returns the value of key, a float32, float64 or integer, as a
// float64 (integers beyond 2^53 round).
func (f *File) Float(key string) (float64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	switch x := v.v.(type) {
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	}
	i, u, big, ok := v.asInt()
	switch {
	case !ok:
		return 0, f.typeErr(key, v, "a number")
	case big:
		return float64(u), nil
	}
	return float64(i), nil
}

// Bool returns the bool value of key.
func (f *File) Bool(key string) (bool, error) { return typed[bool](f, key, "bool") }

// Strings returns the string array of key as a new []string (whose
// strings share the file's copy of the array).
func (f *File) Strings(key string) ([]string, error) {
	a, err := f.StringArray(key)
	if err != nil {
		return nil, err
	}
	return a.Strings(), nil
}

// StringArray returns the string array of key without a copy: what a
// reader of a large vocabulary keeps (see StringArray).
func (f *File) StringArray(key string) (*StringArray, error) {
	return typed[*StringArray](f, key, "array of string")
}

// Float32s returns a copy of the float32 array of key (a float64 array is
// converted).
func (f *File) Float32s(key string) ([]float32, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	switch s := v.v.(type) {
	case []float32:
		return slices.Clone(s), nil
	case []float64:
		out := make([]float32, len(s))
		for i, x := range s {
			out[i] = float32(x)
		}
		return out, nil
	}
	return nil, f.typeErr(key, v, "array of float32")
}

// Int32s returns a copy of the int32 array of key. Arrays of other integer
// types are converted when every value fits in an int32.
func (f *File) Int32s(key string) ([]int32, error) { return intArray[int32](f, key, "int32") }

// Uint64s returns a copy of the uint64 array of key. Arrays of other
// integer types are converted when no value is negative.
func (f *File) Uint64s(key string) ([]uint64, error) { return intArray[uint64](f, key, "uint64") }

// intArray is Int32s and Uint64s: the integer array of key as T's, named
// name in errors.
func intArray[T int32 | uint64](f *File, key, name string) ([]T, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	var out []T
	switch s := v.v.(type) {
	case []uint8:
		out = convertInts[T](s)
	case []int8:
		out = convertInts[T](s)
	case []uint16:
		out = convertInts[T](s)
	case []int16:
		out = convertInts[T](s)
	case []uint32:
		out = convertInts[T](s)
	case []int32:
		out = convertInts[T](s)
	case []uint64:
		out = convertInts[T](s)
	case []int64:
		out = convertInts[T](s)
	default:
		return nil, f.typeErr(key, v, "array of "+name)
	}
	if out == nil {
		return nil, fmt.Errorf("gguf: %s: metadata %q: %s values out of %s range", f.Path, key, v.typeName(), name)
	}
	return out, nil
}

type integer interface {
	~uint8 | ~int8 | ~uint16 | ~int16 | ~uint32 | ~int32 | ~uint64 | ~int64
}

// convertInts converts s to T's (a new slice, empty for an empty s), or
// returns nil if a value does not fit.
func convertInts[T int32 | uint64, E integer](s []E) []T {
	lo, hi := int64(math.MinInt32), uint64(math.MaxInt32)
	if _, ok := any(T(0)).(uint64); ok {
		lo, hi = 0, math.MaxUint64
	}
	out := make([]T, len(s))
	for i, x := range s {
		if x < 0 && int64(x) < lo || x > 0 && uint64(x) > hi {
			return nil
		}
		out[i] = T(x)
	}
	return out
}
