package mkmodel

import (
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"sync"

	"ppl.dev/gguf"
	"ppl.dev/quant"
)

// RowFunc writes row r of a tensor, len(dst) = shape[0] values. It must
// be deterministic and safe to call concurrently for different rows.
type RowFunc func(r int, dst []float32)

// addRows adds to w a tensor of type typ and shape (ne0 first) whose rows
// fill produces: gguf.Writer's AddTensorFunc generates and quantizes them
// a chunk at a time while the file is written, so a 16 GB model never has
// to fit in memory. The bytes are those of quantizing every row into one
// buffer and calling AddTensor (TestStreamMatchesWriter).
func addRows(w *gguf.Writer, name string, typ gguf.Type, shape []uint64, fill RowFunc) error {
	if !quant.CanQuantize(typ) && typ != gguf.TypeI32 {
		return fmt.Errorf("tensor %q: cannot write type %v", name, typ)
	}
	return w.AddTensorFunc(name, typ, shape, func(out io.Writer) error {
		return writeRows(out, typ, shape, fill)
	})
}

// writeRows generates, quantizes and writes a tensor in chunks of rows,
// each chunk split among the CPUs. Rows are generated independently, so
// the bytes do not depend on the chunking or the number of CPUs.
func writeRows(out io.Writer, typ gguf.Type, shape []uint64, fill RowFunc) error {
	ne0 := int(shape[0])
	rows := 1
	for _, d := range shape[1:] {
		rows *= int(d)
	}
	rs, err := typ.RowSize(shape[0])
	if err != nil {
		return err
	}
	rowBytes := int(rs)
	chunk := max(1, min(rows, (32<<20)/(4*ne0)))
	workers := runtime.GOMAXPROCS(0)
	buf := make([]byte, chunk*rowBytes)
	srcs := make([][]float32, workers)
	for i := range srcs {
		srcs[i] = make([]float32, ne0)
	}
	errs := make([]error, workers)
	for r0 := 0; r0 < rows; r0 += chunk {
		n := min(chunk, rows-r0)
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
					fill(r0+r, src)
					if err := encodeRow(typ, src, buf[r*rowBytes:(r+1)*rowBytes]); err != nil && errs[k] == nil {
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
		if _, err := out.Write(buf[:n*rowBytes]); err != nil {
			return err
		}
	}
	return nil
}

// encodeRow writes src in type typ to dst: quantized, or for I32 (expert
// ids) each value as an integer.
func encodeRow(typ gguf.Type, src []float32, dst []byte) error {
	if typ != gguf.TypeI32 {
		return quant.Quantize(typ, src, dst)
	}
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], uint32(int32(v)))
	}
	return nil
}
