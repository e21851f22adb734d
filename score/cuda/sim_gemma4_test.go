package cuda

import (
	"fmt"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// The emulation of kernels/gemma4.cu: cpuBackend.GLU (the nn activations).
func init() {
	simKernels["glu_f32"] = simKernel{5, func(s *simDevice, a *simArgs, grid dim3) error {
		out, gate, up, n, act := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2)), a.i64(3), a.int(4)
		if a.err != nil {
			return a.err
		}
		var fn func(out, gate, up []float32)
		switch ml.Act(act) {
		case ml.SwiGLU:
			fn = nn.SwiGLU
		case ml.GeGLU:
			fn = nn.GeGLU
		case ml.OAISwiGLU:
			fn = nn.OAISwiGLU
		default:
			return fmt.Errorf("glu_f32: activation %d", act)
		}
		fn(out[:n], gate[:n], up[:n])
		return nil
	}}
}
