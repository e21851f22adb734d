package cuda

import (
	"errors"
	"math"
)

// The emulation of kernels/sparse.cu: lid_scores in the CPU's float32
// arithmetic (nn.LightningTopK's sums), each product and sum rounded.
func init() {
	simKernels["lid_scores"] = simKernel{7, func(s *simDevice, a *simArgs, grid dim3) error {
		out, qk, w := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2))
		rows, heads, ld, r0 := a.int(3), a.int(4), a.int(5), a.int(6)
		if a.err != nil {
			return a.err
		}
		if len(out) < rows*ld || len(qk) < rows*heads*ld {
			return errors.New("lid_scores: buffers shorter than the rows")
		}
		for r := range rows {
			for j := range ld {
				if j > r0+r {
					out[r*ld+j] = float32(math.Inf(-1))
					continue
				}
				var sum float32
				for h := range heads {
					sum = float32(sum + float32(max(qk[(r*heads+h)*ld+j], 0)*w[(r0+r)*heads+h]))
				}
				out[r*ld+j] = sum
			}
		}
		return nil
	}}
}
