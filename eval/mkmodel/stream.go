package mkmodel

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"ppl.dev/gguf"
	"ppl.dev/quant"
)

// RowFunc writes row r of a tensor, len(dst) = shape[0] values. It must
// be deterministic and safe to call concurrently for different rows.
type RowFunc func(r int, dst []float32)

// streamTensor is a tensor whose data is produced row by row when written.
type streamTensor struct {
	name  string
	typ   gguf.Type
	shape []uint64
	rows  int
	size  uint64
	fill  RowFunc
}

// streamWriter writes a GGUF v3 file in the layout gguf.Writer uses
// (metadata in order, tensor infos in order, data aligned to 32 bytes),
// but generates and quantizes tensor data a chunk of rows at a time while
// writing, so a 16 GB model never has to fit in memory. For the same
// metadata and tensor values its output is byte for byte what gguf.Writer
// writes (TestStreamMatchesWriter).
type streamWriter struct {
	kvs     []gguf.KV
	keys    map[string]int
	tensors []*streamTensor
	names   map[string]bool
	err     error
}

const alignment = gguf.DefaultAlignment

func newStreamWriter() *streamWriter {
	return &streamWriter{keys: map[string]int{}, names: map[string]bool{}}
}

// Add sets metadata key to v (any type gguf.NewValue accepts); a key added
// again keeps its position and takes the new value.
func (w *streamWriter) Add(key string, v any) {
	val, ok := v.(gguf.Value)
	if !ok {
		var err error
		if val, err = gguf.NewValue(v); err != nil {
			w.setErr(fmt.Errorf("metadata %q: %w", key, err))
			return
		}
	}
	if i, ok := w.keys[key]; ok {
		w.kvs[i].Value = val
		return
	}
	w.keys[key] = len(w.kvs)
	w.kvs = append(w.kvs, gguf.KV{Key: key, Value: val})
}

func (w *streamWriter) setErr(err error) {
	if w.err == nil {
		w.err = err
	}
}

// AddTensor adds a tensor of type typ and shape (ne0 first) whose rows
// fill produces.
func (w *streamWriter) AddTensor(name string, typ gguf.Type, shape []uint64, fill RowFunc) {
	if w.names[name] {
		w.setErr(fmt.Errorf("tensor %q: duplicate name", name))
		return
	}
	row, err := typ.RowSize(shape[0])
	if err != nil {
		w.setErr(fmt.Errorf("tensor %q: %w", name, err))
		return
	}
	if !quant.CanQuantize(typ) {
		w.setErr(fmt.Errorf("tensor %q: cannot write type %v", name, typ))
		return
	}
	rows := uint64(1)
	for _, d := range shape[1:] {
		rows *= d
	}
	w.names[name] = true
	w.tensors = append(w.tensors, &streamTensor{name: name, typ: typ, shape: append([]uint64(nil), shape...),
		rows: int(rows), size: row * rows, fill: fill})
}

// WriteFile writes the file atomically: to a temporary file in the same
// directory, renamed over path when complete.
func (w *streamWriter) WriteFile(path string) (err error) {
	if w.err != nil {
		return w.err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 4<<20)
	if err = w.writeTo(bw); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func (w *streamWriter) writeTo(out io.Writer) error {
	e := &enc{w: out}
	e.raw([]byte("GGUF"))
	e.u32(3)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		e.str(kv.Key)
		e.u32(uint32(kv.Value.Type))
		if err := e.value(kv.Value.Type, kv.Value.ElemType, kv.Value.Any()); err != nil {
			return fmt.Errorf("metadata %q: %w", kv.Key, err)
		}
	}
	var off uint64
	for _, t := range w.tensors {
		e.str(t.name)
		e.u32(uint32(len(t.shape)))
		for _, d := range t.shape {
			e.u64(d)
		}
		e.u32(uint32(t.typ))
		e.u64(off)
		off += pad(t.size)
	}
	e.zeros(pad(e.n) - e.n)
	for _, t := range w.tensors {
		if e.err != nil {
			break
		}
		if err := writeTensor(e, t); err != nil {
			return fmt.Errorf("tensor %s: %w", t.name, err)
		}
		e.zeros(pad(t.size) - t.size)
	}
	return e.err
}

func pad(n uint64) uint64 { return (n + alignment - 1) &^ (alignment - 1) }

// writeTensor generates, quantizes and writes t in chunks of rows, each
// chunk split among the CPUs. Rows are generated independently, so the
// bytes do not depend on the chunking or the number of CPUs.
func writeTensor(e *enc, t *streamTensor) error {
	ne0 := int(t.shape[0])
	rowBytes := int(t.size) / t.rows
	chunk := max(1, min(t.rows, (32<<20)/(4*ne0)))
	workers := runtime.GOMAXPROCS(0)
	buf := make([]byte, chunk*rowBytes)
	srcs := make([][]float32, workers)
	for i := range srcs {
		srcs[i] = make([]float32, ne0)
	}
	errs := make([]error, workers)
	for r0 := 0; r0 < t.rows; r0 += chunk {
		n := min(chunk, t.rows-r0)
		var wg sync.WaitGroup
		for k := 0; k < workers; k++ {
			lo, hi := n*k/workers, n*(k+1)/workers
			if lo == hi {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				src := srcs[k]
				for r := lo; r < hi; r++ {
					clear(src)
					t.fill(r0+r, src)
					if err := quant.Quantize(t.typ, src, buf[r*rowBytes:(r+1)*rowBytes]); err != nil && errs[k] == nil {
						errs[k] = fmt.Errorf("row %d: %w", r0+r, err)
					}
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		e.raw(buf[:n*rowBytes])
	}
	return nil
}

// enc writes little-endian GGUF values, counting bytes and keeping the
// first error.
type enc struct {
	w   io.Writer
	n   uint64
	err error
	b   [8]byte
}

func (e *enc) raw(b []byte) {
	if e.err != nil {
		return
	}
	n, err := e.w.Write(b)
	e.n += uint64(n)
	e.err = err
}

func (e *enc) zeros(n uint64) {
	var z [64]byte
	for n > 0 {
		k := min(n, uint64(len(z)))
		e.raw(z[:k])
		n -= k
	}
}

func (e *enc) u8(v uint8)   { e.b[0] = v; e.raw(e.b[:1]) }
func (e *enc) u16(v uint16) { binary.LittleEndian.PutUint16(e.b[:], v); e.raw(e.b[:2]) }
func (e *enc) u32(v uint32) { binary.LittleEndian.PutUint32(e.b[:], v); e.raw(e.b[:4]) }
func (e *enc) u64(v uint64) { binary.LittleEndian.PutUint64(e.b[:], v); e.raw(e.b[:8]) }
func (e *enc) str(s string) { e.u64(uint64(len(s))); e.raw([]byte(s)) }

// value writes x, a value of type t (arrays: element type et), without its
// type tag.
func (e *enc) value(t, et gguf.ValueType, x any) error {
	switch v := x.(type) {
	case uint8:
		e.u8(v)
	case int8:
		e.u8(uint8(v))
	case uint16:
		e.u16(v)
	case int16:
		e.u16(uint16(v))
	case uint32:
		e.u32(v)
	case int32:
		e.u32(uint32(v))
	case float32:
		e.u32(math.Float32bits(v))
	case bool:
		if v {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case string:
		e.str(v)
	case uint64:
		e.u64(v)
	case int64:
		e.u64(uint64(v))
	case float64:
		e.u64(math.Float64bits(v))
	default:
		if t != gguf.ValueArray {
			return fmt.Errorf("unsupported value %T", x)
		}
		return e.array(et, x)
	}
	return nil
}

func (e *enc) array(et gguf.ValueType, x any) error {
	e.u32(uint32(et))
	switch s := x.(type) {
	case []uint8:
		e.u64(uint64(len(s)))
		e.raw(s)
	case []int8:
		e.u64(uint64(len(s)))
		for _, v := range s {
			e.u8(uint8(v))
		}
	case []uint16:
		e.u64(uint64(len(s)))
		for _, v := range s {
			e.u16(v)
		}
	case []int16:
		e.u64(uint64(len(s)))
		for _, v := range s {
			e.u16(uint16(v))
		}
	case []uint32:
		e.u64(uint64(len(s)))
		for _, v := range s {
			e.u32(v)
		}
	case []int32:
		e.u64(uint64(len(s)))
		for _, v := range s {
			e.u32(uint32(v))
		}
	case []float32:
		e.u64(uint64(len(s)))
		for _, v := range s {
			e.u32(math.Float32bits(v))
		}
	case []bool:
		e.u64(uint64(len(s)))
		for _, v := range s {
			if v {
				e.u8(1)
			} else {
				e.u8(0)
			}
		}
	case []string:
		e.u64(uint64(len(s)))
		for _, v := range s {
			e.str(v)
		}
	case []uint64:
		e.u64(uint64(len(s)))
		for _, v := range s {
			e.u64(v)
		}
	case []int64:
		e.u64(uint64(len(s)))
		for _, v := range s {
			e.u64(uint64(v))
		}
	case []float64:
		e.u64(uint64(len(s)))
		for _, v := range s {
			e.u64(math.Float64bits(v))
		}
	default:
		return fmt.Errorf("unsupported array %T (nested arrays are not written)", x)
	}
	return nil
}
