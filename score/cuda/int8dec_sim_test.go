package cuda

import (
	"fmt"

	"ppl.dev/gguf"
	"ppl.dev/quant"
)

// The emulation of the i8dec_* kernels of kernels/dequant.cu:
// quant.DecodeInt8 of each row, its bytes less the format's Offset. As
// with the dequantization kernels, on the emulator the parity test checks
// the plumbing; on a GPU and on the host device, the CUDA C.
func init() {
	for typ, k := range int8DecodeKernels {
		simKernels[k.name] = simKernel{9, simInt8Decode(typ)}
	}
}

func simInt8Decode(typ gguf.Type) func(s *simDevice, a *simArgs, grid dim3) error {
	return func(s *simDevice, a *simArgs, grid dim3) error {
		q, sp, mp, w := a.ptr(0), a.ptr(1), a.ptr(2), a.ptr(3)
		row0, rows, in, rb := a.i64(4), a.int(5), a.int(6), a.i64(7)
		a.ptr(8) // the lattices: the Go decoder has its own
		if a.err != nil {
			return a.err
		}
		f, _ := quant.Int8FormatOf(typ)
		want, err := typ.RowSize(uint64(in))
		groups := in / f.Group
		switch {
		case err != nil:
			return err
		case in%32 != 0:
			return fmt.Errorf("rows of %d weights, not a multiple of 32", in)
		case int64(want) != rb:
			return fmt.Errorf("row of %d %v weights is %d bytes, kernel told %d", in, typ, want, rb)
		case len(q) < rows*in:
			return fmt.Errorf("q of %d bytes for %d rows of %d", len(q), rows, in)
		case len(sp) < 4*rows*groups:
			return fmt.Errorf("s of %d bytes for %d rows of %d groups", len(sp), rows, groups)
		case f.HasMin && len(mp) < 4*rows*groups:
			return fmt.Errorf("m of %d bytes for %d rows of %d groups", len(mp), rows, groups)
		case (row0+int64(rows))*rb > int64(len(w)):
			return fmt.Errorf("rows [%d, %d) of a matrix of %d bytes", row0, row0+int64(rows), len(w))
		}
		sv := f32s(sp)
		var mv []float32
		if f.HasMin {
			mv = f32s(mp)
		}
		for r := range rows {
			src := row0 + int64(r)
			qr := q[r*in : (r+1)*in]
			var mr []float32
			if mv != nil {
				mr = mv[r*groups : (r+1)*groups]
			}
			quant.DecodeInt8(typ, w[src*rb:(src+1)*rb], qr, sv[r*groups:(r+1)*groups], mr)
			for i := range qr {
				qr[i] -= byte(f.Offset)
			}
		}
		return nil
	}
}
