package cuda

import (
	"errors"

	"ppl.dev/score/nn"
)

// The emulation of kernels/lightning.cu: the CPU's nn.Lightning (its
// AVX-512 build's lanes) over the same decay factors.
func init() {
	simKernels["lightning_attn"] = simKernel{6, func(s *simDevice, a *simArgs, grid dim3) error {
		out, qkv, n, heads, d := f32s(a.ptr(0)), f32s(a.ptr(1)), a.int(2), a.int(3), a.int(4)
		decay := f32s(a.ptr(5))
		if err := errors.Join(covers(grid[0], n, "queries"), covers(grid[1], heads, "heads")); err != nil || a.err != nil {
			return errors.Join(err, a.err)
		}
		nn.Lightning(out, qkv, n, heads, d, decay, 0, heads, false)
		return nil
	}}
}
