package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"path/filepath"
)

// Writer builds a GGUF version 3 file in memory order: metadata in the
// order added, then tensors in the order added, each tensor's data at the
// next multiple of the alignment (general.alignment if added, else 32) and
// padded with zeros to it, as llama.cpp and gguf-py write them. The output
// depends only on what was added, so test models are reproducible.
//
// Errors from Add are kept and returned by WriteTo and WriteFile.
//
// Tensor data is either given as bytes (AddTensor) or produced while the
// file is written (AddTensorFunc), so a model of any size can be generated
// with little memory; both give the same bytes.
type Writer struct {
	kvs     []KV
	kvIndex map[string]int
	tensors []*Tensor
	data    [][]byte                // AddTensor's data, nil for AddTensorFunc
	write   []func(io.Writer) error // AddTensorFunc's writers, nil for AddTensor
	names   map[string]bool
	err     error
}

// NewWriter returns an empty Writer.
func NewWriter() *Writer {
	return &Writer{kvIndex: map[string]int{}, names: map[string]bool{}}
}

// Add sets metadata key to v, converted by NewValue: uint8 ... int64,
// float32, float64, bool, string, typed slices ([]string, []float32,
// []int32, []uint32, ...), []any (nested arrays), or a Value. A key added
// again keeps its first position and takes the new value.
func (w *Writer) Add(key string, v any) {
	val, err := NewValue(v)
	if err != nil {
		w.setErr(fmt.Errorf("gguf: writer: metadata %q: %w", key, err))
		return
	}
	if i, ok := w.kvIndex[key]; ok {
		w.kvs[i].Value = val
		return
	}
	w.kvIndex[key] = len(w.kvs)
	w.kvs = append(w.kvs, KV{Key: key, Value: val})
}

func (w *Writer) setErr(err error) {
	if w.err == nil {
		w.err = err
	}
}

// AddTensor adds a tensor of type typ and shape (ne0 first). data must hold
// exactly RowSize(shape[0]) * rows bytes; it is kept, not copied, until the
// file is written.
func (w *Writer) AddTensor(name string, typ Type, shape []uint64, data []byte) error {
	return w.addTensor(name, typ, shape, data, nil)
}

// AddTensorFunc adds a tensor of type typ and shape (ne0 first) whose data
// write produces when the file is written: WriteTo calls it once, in
// tensor order, and it must write exactly RowSize(shape[0]) * rows bytes
// to its argument. An error from write, or a wrong number of bytes, ends
// WriteTo with that error.
func (w *Writer) AddTensorFunc(name string, typ Type, shape []uint64, write func(io.Writer) error) error {
	return w.addTensor(name, typ, shape, nil, write)
}

func (w *Writer) addTensor(name string, typ Type, shape []uint64, data []byte, write func(io.Writer) error) error {
	t := &Tensor{Name: name, Type: typ, Shape: append([]uint64(nil), shape...)}
	err := w.checkTensor(t)
	if err == nil && write == nil && uint64(len(data)) != t.Size {
		err = fmt.Errorf("%s shape %v needs %d bytes of data, got %d", t.Type, t.Shape, t.Size, len(data))
	}
	if err != nil {
		return fmt.Errorf("gguf: writer: tensor %q: %w", name, err)
	}
	w.names[name] = true
	w.tensors = append(w.tensors, t)
	w.data = append(w.data, data)
	w.write = append(w.write, write)
	return nil
}

// checkTensor checks t's name and shape and sets its Size.
func (w *Writer) checkTensor(t *Tensor) error {
	if w.names[t.Name] {
		return errors.New("duplicate name")
	}
	if len(t.Shape) == 0 || len(t.Shape) > maxDims {
		return fmt.Errorf("%d dimensions, want 1 to %d", len(t.Shape), maxDims)
	}
	row, err := t.Type.RowSize(t.Shape[0])
	if err != nil {
		return err
	}
	size := row
	for _, d := range t.Shape[1:] {
		hi, lo := bits.Mul64(size, d)
		if hi != 0 {
			return fmt.Errorf("shape %v overflows uint64 bytes", t.Shape)
		}
		size = lo
	}
	t.Size = size
	return nil
}

// alignment returns general.alignment if added, else DefaultAlignment.
func (w *Writer) alignment() (uint64, error) {
	i, ok := w.kvIndex[KeyAlignment]
	if !ok {
		return DefaultAlignment, nil
	}
	a, err := alignmentOf(w.kvs[i].Value)
	if err == nil && a > maxWriteAlignment {
		err = fmt.Errorf("%d is larger than %d", a, maxWriteAlignment)
	}
	if err != nil {
		return 0, fmt.Errorf("gguf: writer: metadata %q: %w", KeyAlignment, err)
	}
	return a, nil
}

// maxWriteAlignment bounds the padding the Writer emits.
const maxWriteAlignment = 1 << 20

// WriteTo writes the file to out.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	if w.err != nil {
		return 0, w.err
	}
	align, err := w.alignment()
	if err != nil {
		return 0, err
	}
	e := &encoder{w: bufio.NewWriterSize(out, 1<<20)}
	e.bytes([]byte(magic))
	e.u32(3)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		e.str(kv.Key)
		e.u32(uint32(kv.Value.Type))
		e.value(kv.Value)
	}
	var off uint64
	for _, t := range w.tensors {
		t.Offset = off
		e.str(t.Name)
		e.u32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(off)
		off += pad(t.Size, align)
	}
	e.zeros(pad(uint64(e.n), align) - uint64(e.n))
	for i, t := range w.tensors {
		if w.write[i] != nil {
			if err := e.produce(t, w.write[i]); err != nil {
				return e.n, err
			}
		} else {
			e.bytes(w.data[i])
		}
		e.zeros(pad(t.Size, align) - t.Size)
	}
	if e.err == nil {
		e.err = e.w.Flush()
	}
	return e.n, e.err
}

// WriteFile writes the file to path atomically: to a temporary file in the
// same directory, renamed over path once complete. The temporary name is
// short, so that a path of the longest name the file system allows works.
func (w *Writer) WriteFile(path string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".gguf-tmp-*")
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = w.WriteTo(tmp); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

// pad rounds n up to a multiple of align (a power of two).
func pad(n, align uint64) uint64 { return (n + align - 1) &^ (align - 1) }

// encoder writes little-endian values, counting bytes and keeping the
// first error.
type encoder struct {
	w   *bufio.Writer
	n   int64
	err error
	buf [8]byte
}

func (e *encoder) bytes(b []byte) {
	if e.err != nil {
		return
	}
	n, err := e.w.Write(b)
	e.n += int64(n)
	e.err = err
}

// Write makes the encoder the io.Writer of AddTensorFunc's functions.
func (e *encoder) Write(b []byte) (int, error) {
	e.bytes(b)
	if e.err != nil {
		return 0, e.err
	}
	return len(b), nil
}

// produce writes the data of t with write and checks its size.
func (e *encoder) produce(t *Tensor, write func(io.Writer) error) error {
	start := e.n
	err := write(e)
	if e.err != nil {
		return e.err
	}
	if err == nil && uint64(e.n-start) != t.Size {
		err = fmt.Errorf("wrote %d bytes, want %d", e.n-start, t.Size)
	}
	if err != nil {
		return fmt.Errorf("gguf: writer: tensor %q: %w", t.Name, err)
	}
	return nil
}

func (e *encoder) zeros(n uint64) {
	var z [64]byte
	for n > 0 {
		k := min(n, uint64(len(z)))
		e.bytes(z[:k])
		n -= k
	}
}

func (e *encoder) u8(v uint8)   { e.buf[0] = v; e.bytes(e.buf[:1]) }
func (e *encoder) u16(v uint16) { binary.LittleEndian.PutUint16(e.buf[:], v); e.bytes(e.buf[:2]) }
func (e *encoder) u32(v uint32) { binary.LittleEndian.PutUint32(e.buf[:], v); e.bytes(e.buf[:4]) }
func (e *encoder) u64(v uint64) { binary.LittleEndian.PutUint64(e.buf[:], v); e.bytes(e.buf[:8]) }

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err == nil {
		n, err := e.w.WriteString(s)
		e.n += int64(n)
		e.err = err
	}
}

// value writes v without its type tag (arrays include their element type
// and count).
func (e *encoder) value(v Value) {
	switch x := v.v.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case bool:
		e.u8(b2u(x))
	case string:
		e.str(x)
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	default:
		e.u32(uint32(v.ElemType))
		e.u64(uint64(v.Len()))
		e.array(v)
	}
}

func (e *encoder) array(v Value) {
	switch s := v.v.(type) {
	case []uint8:
		e.bytes(s)
	case []int8:
		for _, x := range s {
			e.u8(uint8(x))
		}
	case []uint16:
		for _, x := range s {
			e.u16(x)
		}
	case []int16:
		for _, x := range s {
			e.u16(uint16(x))
		}
	case []uint32:
		for _, x := range s {
			e.u32(x)
		}
	case []int32:
		for _, x := range s {
			e.u32(uint32(x))
		}
	case []float32:
		for _, x := range s {
			e.u32(math.Float32bits(x))
		}
	case []bool:
		for _, x := range s {
			e.u8(b2u(x))
		}
	case *StringArray:
		for i := range s.Len() {
			e.str(s.At(i))
		}
	case []uint64:
		for _, x := range s {
			e.u64(x)
		}
	case []int64:
		for _, x := range s {
			e.u64(uint64(x))
		}
	case []float64:
		for _, x := range s {
			e.u64(math.Float64bits(x))
		}
	case []Value:
		for _, x := range s {
			e.value(x)
		}
	}
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
