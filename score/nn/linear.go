package nn

import (
	"fmt"

	"ppl.dev/gguf"
	"ppl.dev/quant"
)

// Linear is a weight matrix stored as GGUF rows, with an optional bias:
// y = x·Wᵀ + b. W has Out rows of In elements (GGUF shape [In, Out], ne0 =
// In); each row is RowBytes bytes of Type, kept where the file maps them.
type Linear struct {
	Name     string    // the weight tensor's name, for messages
	Type     gguf.Type // storage type of W
	In, Out  int       // W is (Out, In)
	Data     []byte    // Out rows of RowBytes bytes
	RowBytes int
	Bias     []float32 // nil, or Out values
}

// NewLinear checks a weight tensor's data and returns it as a Linear.
func NewLinear(name string, typ gguf.Type, in, out int, data []byte) (*Linear, error) {
	if !quant.Supported(typ) {
		return nil, fmt.Errorf("tensor %s: weight type %v not supported", name, typ)
	}
	rb, err := typ.RowSize(uint64(in))
	if err != nil {
		return nil, fmt.Errorf("tensor %s: %w", name, err)
	}
	if uint64(len(data)) != rb*uint64(out) {
		return nil, fmt.Errorf("tensor %s: %d bytes of data, want %d (%d rows of %d %v)", name, len(data), rb*uint64(out), out, in, typ)
	}
	return &Linear{Name: name, Type: typ, In: in, Out: out, Data: data, RowBytes: int(rb)}, nil
}

// linearBlock is how many weight rows a worker dequantizes at a time: enough
// to amortize the call, few enough (16 × In floats) to stay in L1/L2 while
// every token of the window streams past them.
const linearBlock = 16

// Forward computes out = x·Wᵀ + b for n rows of x:
// x (n, In) @ Wᵀ (In, Out) -> out (n, Out).
//
// Workers split W's rows; each dequantizes linearBlock rows into float32 at
// a time and takes their dot products with all n rows of x, so each weight
// row is decoded once per call whatever n is.
func (l *Linear) Forward(c *Context, out, x []float32, n int) {
	check(l.Name+" input", len(x), n*l.In)
	check(l.Name+" output", len(out), n*l.Out)
	if n == 0 {
		return
	}
	nb := (l.Out + linearBlock - 1) / linearBlock
	w := c.Workers(nb)
	per := 2 * linearBlock * l.In // per worker: dequantized rows, and their transpose
	scratch := c.Alloc(w * per)
	c.Parallel(nb, func(worker, lo, hi int) {
		buf := scratch[worker*per : (worker+1)*per]
		for b := lo; b < hi; b++ {
			r0 := b * linearBlock
			r1 := min(r0+linearBlock, l.Out)
			wb := buf[:(r1-r0)*l.In]
			l.dequantize(wb, r0, r1)
			if matMul16 != nil && r1-r0 == 16 {
				matMul16(out[r0:], l.Out, x, n, l.In, wb, buf[linearBlock*l.In:])
			} else {
				MatMulRows(out[r0:], l.Out, x, n, l.In, wb, r1-r0)
			}
			if l.Bias != nil {
				for t := 0; t < n; t++ {
					o := out[t*l.Out+r0 : t*l.Out+r1]
					for r := range o {
						o[r] += l.Bias[r0+r]
					}
				}
			}
		}
	})
}

// dequantize writes rows [r0, r1) of W to dst as float32 ((r1-r0) × In).
func (l *Linear) dequantize(dst []float32, r0, r1 int) {
	// NewLinear checked type and sizes; DequantizeRow panics naming both if not.
	quant.DequantizeRow(l.Type, l.Data[r0*l.RowBytes:r1*l.RowBytes], dst)
}

// Row dequantizes row r of W into dst (In values): an embedding lookup.
func (l *Linear) Row(dst []float32, r int) {
	check(l.Name+" row", len(dst), l.In)
	l.dequantize(dst[:l.In], r, r+1)
}
