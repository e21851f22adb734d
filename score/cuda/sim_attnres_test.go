package cuda

import (
	"errors"

	"ppl.dev/score/nn"
)

// The emulation of kernels/attnres.cu: nn.ResMix per token, the CPU's
// arithmetic outside its int8 modes (cpu_attnres.go).
func init() {
	simKernels["res_mix"] = simKernel{8, func(s *simDevice, a *simArgs, grid dim3) error {
		out, ck, cur, w := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2)), f32s(a.ptr(3))
		n, C, d, eps := a.int(4), a.int(5), a.int(6), a.f64(7)
		if err := covers(grid[0], n, "tokens"); err != nil || a.err != nil {
			return errors.Join(err, a.err)
		}
		rows := make([][]float32, C)
		for t := range n {
			for c := range rows {
				rows[c] = ck[(c*n+t)*d : (c*n+t+1)*d]
			}
			nn.ResMix(out[t*d:(t+1)*d], rows, cur[t*d:(t+1)*d], w[:d], eps)
		}
		return nil
	}}
}
