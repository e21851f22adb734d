package cuda

import (
	"errors"
	"fmt"
	"math"

	"ppl.dev/score/nn"
)

// The emulation of kernels/latent.cu: cpuBackend.Columns (a copy) and
// cpuBackend.LatentAttention (nn.Attention over the decoded keys, the keys
// as values), also for attention.cu's attn_fl576.
func init() {
	simKernels["attn_latent"] = simKernel{17, func(s *simDevice, a *simArgs, grid dim3) error {
		if err := errors.Join(covers(grid[0], a.int(2), "queries"), covers(grid[1], a.int(3), "heads")); err != nil {
			return err
		}
		return simLatent(a, a.int(5), a.int(6), a.f32(7), 8, a.int(14), 15)
	}}
	// attn_fl576 and attn_flx576, the tensor-core kernels, by the same
	// definition.
	simKernels["attn_fl576"] = simKernel{15, func(s *simDevice, a *simArgs, grid dim3) error {
		if err := simLatentGrid(a, grid); err != nil {
			return err
		}
		return simLatent(a, 576, 512, float32(float64(a.f32(5))/math.Log2E), 6, a.int(12), 13)
	}}
	simKernels["attn_flx576"] = simKernel{14, func(s *simDevice, a *simArgs, grid dim3) error {
		if err := simLatentGrid(a, grid); err != nil {
			return err
		}
		return simLatent(a, 576, 512, float32(float64(a.f32(5))/math.Log2E), 6, otypeF32, 12)
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

// simLatentGrid checks the grid of attn_flHD and attn_flxHD: a block per
// 64 queries, head and 256 of the 512 output dims.
func simLatentGrid(a *simArgs, grid dim3) error {
	n, heads := a.int(2), a.int(3)
	return errors.Join(covers(grid[0], (n+63)/64, "query tiles"), covers(grid[1], heads, "heads"), covers(grid[2], 2, "output dims"))
}

// simLatent is latent attention by its definition (nn.Attention over the
// decoded keys, the keys as values, the first vd elements of each head's
// output in otype) for the arguments of attn_latent, attn_flHD and
// attn_flxHD: out, q, n, heads, kvheads, then from argument w the window,
// the sinks and the key planes (4), the key set (2) from argument keysAt.
func simLatent(a *simArgs, hd, vd int, scale float32, w, otype, keysAt int) error {
	q, n, heads, kvheads := f32s(a.ptr(1)), a.int(2), a.int(3), a.int(4)
	window, sinks := a.int(w), simPerHead(a, w+1, heads)
	K := simPlanes{format: a.int(w + 2), data: a.ptr(w + 3), scales: a.ptr(w + 4), tscale: a.ptr(w + 5), heads: kvheads, hd: hd}
	keys := simKeys(a, keysAt, n)
	if a.err != nil {
		return a.err
	}
	if hd > latentMaxDim || vd > hd {
		return fmt.Errorf("latent attention: keys of %d, values of %d", hd, vd)
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
	att := nn.Attention{Heads: heads, KVHeads: kvheads, HeadDim: hd, Scale: float64(scale), Window: window, Sinks: sinks, Keys: keys}
	att.Forward(nn.NewContext(0), full, q[:n*heads*hd], ks, ks, n)
	out := a.ptr(0)
	for r := range n * heads {
		for i := range vd {
			if v := full[r*hd+i]; otype == otypeF32 {
				f32s(out)[r*vd+i] = v
			} else {
				u16s(out)[r*vd+i] = f32ToHalf(v, otype)
			}
		}
	}
	return nil
}
