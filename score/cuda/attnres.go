package cuda

import (
	"fmt"

	"ppl.dev/score/ml"
)

// The GPU's ml.AttnRes (kimi-k3): res_mix of kernels/attnres.cu, a block
// per token, float64 inside with one rounding to float32, the plain
// definition (nn.ResMix) that the CPU computes outside its int8 modes; the
// int8 mode computes it so too.

var _ ml.AttnRes = (*gpuBackend)(nil)

func init() {
	kernelModules["attnres"] = []string{"res_mix"}
}

// resMixMax is res_mix's bound on the checkpoints and the running row a
// token mixes (RES_MAX).
const resMixMax = 512

func (b *gpuBackend) ResMix(dst, ckpts, cur ml.Tensor, w *ml.Vector, eps float64) {
	d, s, c := g(dst), g(ckpts), g(cur)
	gshape("residual-attention input", c, d.rows, d.cols)
	if d.rows == 0 || s.cols != d.cols || s.rows%d.rows != 0 || s.rows == 0 || len(w.V) != d.cols || s.rows/d.rows+1 > resMixMax {
		panic(fmt.Sprintf("cuda backend: residual attention of %d×%d checkpoints and %d×%d rows scored by %d weights (%s; at most %d checkpoints)", s.rows, s.cols, d.rows, d.cols, len(w.V), w.Name, resMixMax-1))
	}
	b.do("residual attention "+w.Name, func() error {
		return b.e.launch("res_mix", dim3{uint32(d.rows), 1, 1}, normBlock(d.cols), d.p, s.p, c.p, gv(w), d.rows, s.rows/d.rows, d.cols, eps)
	})
}
