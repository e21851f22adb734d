package cuda

import (
	"errors"
	"fmt"

	"ppl.dev/score/nn"
)

// The emulation of kernels/latent.cu: cpuBackend.Columns (a copy) and
// cpuBackend.LatentAttention (nn.Attention over the decoded keys, the keys
// as values).
func init() {
	simKernels["attn_latent"] = simKernel{17, func(s *simDevice, a *simArgs, grid dim3) error {
		out, q, n, heads, kvheads, hd, vd := u16s(a.ptr(0)), f32s(a.ptr(1)), a.int(2), a.int(3), a.int(4), a.int(5), a.int(6)
		scale, window := a.f32(7), a.int(8)
		K := simPlanes{format: a.int(10), data: a.ptr(11), scales: a.ptr(12), tscale: a.ptr(13), heads: kvheads, hd: hd}
		f16 := a.int(14)
		var sinks []float32
		if p := a.ptr(9); p != nil {
			sinks = f32s(p)[:heads]
		}
		if err := errors.Join(covers(grid[0], n, "queries"), covers(grid[1], heads, "heads")); err != nil || a.err != nil {
			return errors.Join(err, a.err)
		}
		if hd > latentMaxDim || vd > hd {
			return fmt.Errorf("attn_latent: keys of %d, values of %d", hd, vd)
		}
		ks := make([]float32, n*kvheads*hd)
		for t := range n {
			for h := range kvheads {
				for i := range hd {
					ks[(t*kvheads+h)*hd+i] = K.decode(t, h, i)
				}
			}
		}
		full := make([]float32, n*heads*hd)
		att := nn.Attention{Heads: heads, KVHeads: kvheads, HeadDim: hd, Scale: float64(scale), Window: window, Sinks: sinks, Keys: simKeys(a, 15, n)}
		att.Forward(nn.NewContext(0), full, q[:n*heads*hd], ks, ks, n)
		for r := range n * heads {
			for i := range vd {
				out[r*vd+i] = f32ToHalf(full[r*hd+i], f16)
			}
		}
		return nil
	}}
	simKernels["copy_cols"] = simKernel{8, func(s *simDevice, a *simArgs, grid dim3) error {
		dst, dcols, dc, x, xcols, xc, width, rows := f32s(a.ptr(0)), a.int(1), a.int(2), f32s(a.ptr(3)), a.int(4), a.int(5), a.int(6), a.int(7)
		if a.err != nil {
			return a.err
		}
		if dc+width > dcols || xc+width > xcols {
			return fmt.Errorf("copy_cols: columns [%d, %d) of %d into [%d, %d) of %d", xc, xc+width, xcols, dc, dc+width, dcols)
		}
		for r := range rows {
			copy(dst[r*dcols+dc:r*dcols+dc+width], x[r*xcols+xc:r*xcols+xc+width])
		}
		return nil
	}}
}
