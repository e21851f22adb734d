package cuda

import (
	"fmt"

	"ppl.dev/score/ml"
)

// The GPU's ml.Gemma4 (gemma4). GatherCols is Recurrent's (recurrent.go);
// GLU is glu_f32 (kernels/gemma4.cu); AttentionShared stores the source
// layer's keys and values again and runs Attention: the cache is one
// tensor pair that every layer reuses, so the source layer's codes are
// gone by then, and encoding the same float32 tensors again gives the same
// codes (the tensors are the ones the source layer passed to Attention,
// which leaves them unchanged here) — the keys and values the CPU reads
// from its cache.

var _ ml.Gemma4 = (*gpuBackend)(nil)

func init() {
	kernelModules["gemma4"] = []string{"glu_f32"}
}

func (b *gpuBackend) GLU(dst, gate, up ml.Tensor, act ml.Act) {
	d, gg, uu := g(dst), g(gate), g(up)
	gshape("glu gate", gg, d.rows, d.cols)
	gshape("glu up", uu, d.rows, d.cols)
	if !gluF32Acts[act] || act.Ungated() || act == ml.ClampSwiGLU || act == ml.SwiGLUClampIn || act == ml.SiTU { // a gated activation without parameters
		panic(fmt.Sprintf("cuda backend: activation %v", act))
	}
	if d.count() == 0 {
		return
	}
	b.do("GLU", func() error { return b.e.gluF32(d.p, gg.p, uu.p, d.count(), act, 0, 0) })
}

// gluF32Acts are the activations glu_f32 computes.
var gluF32Acts = map[ml.Act]bool{ml.SwiGLU: true, ml.GeGLU: true, ml.OAISwiGLU: true, ml.ReLUSqr: true, ml.GELU: true, ml.ClampSwiGLU: true, ml.ReGLU: true, ml.SwiGLUClampIn: true, ml.SiLU: true, ml.SiTU: true}

// gluF32: out = act(gate)·up, count float32s (out may be gate or up), the
// limit ml.ClampSwiGLU's and ml.SwiGLUClampIn's, limit and limit2
// ml.SiTU's β and λ (unused by the others); for the ungated ml.ReLUSqr,
// ml.GELU and ml.SiLU out = act(gate), up unused (0).
func (e *Engine) gluF32(out, gate, up ptr, count int64, act ml.Act, limit, limit2 float32) error {
	if count == 0 {
		return nil
	}
	return e.launch("glu_f32", gridFor(count), block256, out, gate, up, count, int(act), limit, limit2)
}

func (b *gpuBackend) AttentionShared(dst, q, k, v ml.Tensor, src int, a *ml.Attn) {
	b.attention(dst, q, k, v, src, a, true, 0)
}
