package cuda

import (
	"fmt"

	"ppl.dev/score/ml"
)

// The GPU's ml.MHC (deepseek4, glm5-next): sinkhorn_mix of kernels/mhc.cu,
// a thread per token, nn.SinkhornMix's float32 arithmetic (ggml's fused
// DSV4_HC_COMB's: the CPU's and llama.cpp's), so the same bits in every
// mode; the mixes no longer go to the host and back, twice a layer.

var _ ml.MHC = (*gpuBackend)(nil)

func init() {
	kernelModules["mhc"] = []string{"sinkhorn_mix"}
}

// mhcMaxStreams is sinkhorn_mix's bound on the streams (MHC_MAX).
const mhcMaxStreams = 8

func (b *gpuBackend) SinkhornMix(dst, m ml.Tensor, S, off int, scale float32, base *ml.Vector, eps float32, iters int) {
	d, x := g(dst), g(m)
	if S < 1 || S > mhcMaxStreams || d.cols != S*S || x.rows != d.rows || off < 0 || off+S*S > x.cols || len(base.V) != S*S || iters < 1 {
		panic(fmt.Sprintf("cuda backend: Sinkhorn mix of %d streams (at most %d), %d×%d, from %d×%d mixes at column %d, %d base values (%s), %d iterations", S, mhcMaxStreams, d.rows, d.cols, x.rows, x.cols, off, len(base.V), base.Name, iters))
	}
	b.do("Sinkhorn mix "+base.Name, func() error {
		return b.e.launch("sinkhorn_mix", gridFor(int64(d.rows)), block256, d.p, x.p, gv(base), d.rows, x.cols, off, S, scale, eps, iters)
	})
}
