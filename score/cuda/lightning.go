package cuda

import (
	"fmt"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// The GPU's ml.Lightning (minimax-01's lightning attention):
// lightning_attn of kernels/lightning.cu, one block per query and head,
// the decay factors the host's (nn.LightningDecay, glibc's expf, as the
// CPU and llama.cpp take them), float32 scores and sums in key order:
// plainly right, O(n²·d) per head on the CUDA cores, rereading the keys
// and values for every query, as attn_simple does. MiniMax-Text-01's
// heads are 128; at most 512.

var _ ml.Lightning = (*gpuBackend)(nil)

func init() {
	kernelModules["lightning"] = []string{"lightning_attn"}
}

// lightningMaxDim is lightning_attn's largest head (LIGHT_MAXD).
const lightningMaxDim = 512

func (b *gpuBackend) Lightning(dst, qkv ml.Tensor, slopes []float32, scale float32) {
	if err := ml.LightningShapes(dst, qkv, slopes); err != nil {
		panic("cuda backend: " + err.Error())
	}
	o, x := g(dst), g(qkv)
	n, heads := o.rows, len(slopes)
	d := o.cols / heads
	if n == 0 || b.err != nil {
		return
	}
	if d > lightningMaxDim {
		b.Fail(fmt.Errorf("cuda: lightning attention with heads of %d: at most %d", d, lightningMaxDim))
		return
	}
	decay := nn.LightningDecay(slopes, scale, n)
	b.do("lightning attention", func() error {
		mark := b.Mark()
		defer b.Release(mark)
		p, err := scratchCopy(b, decay)
		if err != nil {
			return err
		}
		return b.e.launch("lightning_attn", dim3{uint32(n), uint32(heads), 1}, dim3{128, 1, 1}, o.p, x.p, n, heads, d, p)
	})
}
