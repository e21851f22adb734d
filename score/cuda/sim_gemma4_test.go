package cuda

import (
	"fmt"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// The emulation of kernels/gemma4.cu: cpuBackend.GLU (the nn activations),
// and the ungated ReLU² of MLP's float32 path (nn.ReLUSqr).
func init() {
	simKernels["glu_f32"] = simKernel{7, func(s *simDevice, a *simArgs, grid dim3) error {
		out, gate, upb, n, act, limit, limit2 := f32s(a.ptr(0)), f32s(a.ptr(1)), a.ptr(2), a.i64(3), a.int(4), a.f32(5), a.f32(6)
		if a.err != nil {
			return a.err
		}
		fn, err := simGLU("glu_f32", ml.Act(act), limit, limit2)
		if err != nil {
			return err
		}
		fn(out[:n], gate[:n], simUp(upb, ml.Act(act), int(n)))
		return nil
	}}
}

// simGLU is the nn activation the GLU kernels compute for act (their CPU
// reference, cpuBackend.glu's outside the int8 modes): the gated ones
// act(gate)·up, the ungated ReLU² max(gate, 0)² and GELU gelu(gate) (up
// nil); limit2 is SiTU's λ (limit its β), glu_f32's only.
func simGLU(kernel string, act ml.Act, limit, limit2 float32) (func(out, gate, up []float32), error) {
	switch act {
	case ml.SwiGLU:
		if kernel == "glu_half" { // swiglu_half's
			break
		}
		return nn.SwiGLU, nil
	case ml.GeGLU:
		return nn.GeGLU, nil
	case ml.OAISwiGLU:
		return nn.OAISwiGLU, nil
	case ml.ReLUSqr:
		return nn.ReLUSqr, nil
	case ml.GELU:
		return nn.GELU, nil
	case ml.ClampSwiGLU:
		return nn.ClampSwiGLU(limit), nil
	case ml.SwiGLUClampIn:
		return nn.SwiGLUClampIn(limit), nil
	case ml.ReGLU:
		return nn.ReGLU, nil
	case ml.SiLU:
		return func(out, g, _ []float32) { copy(out, g); nn.SiLU32(out) }, nil
	case ml.SiTU:
		if kernel == "glu_f32" {
			return nn.SiTU{Beta: limit, LinearBeta: limit2}.Ref, nil
		}
	}
	return nil, fmt.Errorf("%s: activation %d", kernel, act)
}

// simUp is a GLU kernel's up operand of n values: nil for the ungated
// activations, which read none (their up pointer may be null).
func simUp(up []byte, act ml.Act, n int) []float32 {
	if act.Ungated() {
		return nil
	}
	return f32s(up)[:n]
}
