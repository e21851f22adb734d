package model

import (
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// Lightning computes MiniMax-01's lightning attention as llama.cpp's graph
// does (nn.Lightning: two float32 matrix products in ggml-cpu's lanes, the
// AVX2 build's with nn.Context.GGMLAVX2; the float32 mode computes as the
// AVX-512 build), heads in parallel.
func (b *cpuBackend) Lightning(dst, qkv ml.Tensor, slopes []float32, scale float32) {
	if err := ml.LightningShapes(dst, qkv, slopes); err != nil {
		panic("cpu backend: " + err.Error())
	}
	o, x := ct(dst), ct(qkv)
	n, heads := o.rows, len(slopes)
	if n == 0 {
		return
	}
	decay := nn.LightningDecay(slopes, scale, n)
	avx2 := b.c.LlamaCPP && b.c.GGMLAVX2
	b.c.Parallel(heads, func(_, lo, hi int) {
		nn.Lightning(o.d, x.d, n, heads, o.cols/heads, decay, lo, hi, avx2)
	})
}
