package cuda

import (
	"errors"

	"ppl.dev/score/nn"
)

// The emulation of kernels/mhc.cu: nn.SinkhornMix, the CPU's arithmetic
// in every mode.
func init() {
	simKernels["sinkhorn_mix"] = simKernel{10, func(s *simDevice, a *simArgs, grid dim3) error {
		dst, m, base := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2))
		n, cols, off, S, scale, eps, iters := a.int(3), a.int(4), a.int(5), a.int(6), a.f32(7), a.f32(8), a.int(9)
		if a.err != nil {
			return a.err
		}
		if len(dst) < n*S*S || len(m) < n*cols || len(base) < S*S {
			return errors.New("sinkhorn_mix: buffers shorter than the rows")
		}
		nn.SinkhornMix(dst[:n*S*S], m[:n*cols], n, cols, off, S, scale, base[:S*S], eps, iters)
		return nil
	}}
}
