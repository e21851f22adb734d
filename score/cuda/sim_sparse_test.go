package cuda

import (
	"cmp"
	"errors"
	"math"
	"slices"

	"ppl.dev/score/nn"
)

// The emulation of kernels/sparse.cu: lid_scores in the CPU's float32
// arithmetic (nn.LightningTopK's sums), each product and sum rounded;
// top_keys by its definition (topKeysSettled), not the kernel's radix
// select; msa_scores and qsa_scores as nn.MSABlocks and nn.QSABlocks sum
// the products they are given; block_keys by the key set's definition;
// qsa_pool by nn.QSAPool; gated_pool by nn.GatedPool and nn.OverlapPool;
// ple_gate by nn.PLEGate and nn.GGMLPLEGate; layout_keys by
// nn.NewCompressedLayout.
func init() {
	simKernels["top_keys"] = simKernel{11, func(s *simDevice, a *simArgs, grid dim3) error {
		words, flags, sc := u64s(a.ptr(0)), i32s(a.ptr(1)), f32s(a.ptr(2))
		rows, ld, nwords, r0, topK := a.int(3), a.int(4), a.int(5), a.int(6), a.int(7)
		c := candidates{a.int(8), a.int(9), a.int(10)}
		if err := covers(grid[0], rows, "rows"); err != nil || a.err != nil {
			return errors.Join(err, a.err)
		}
		if c.groups < 1 || c.div < 1 || len(words) < rows*nwords || len(flags) < rows || len(sc) < rows*ld ||
			c.of(r0+(rows-1)/c.groups) > ld || nwords < (ld+63)/64 {
			return errors.New("top_keys: buffers shorter than the rows")
		}
		for r := range rows {
			row := words[r*nwords : (r+1)*nwords]
			clear(row)
			keys := sc[r*ld : r*ld+c.of(r0+r/c.groups)]
			t, ok := topKeysSettled(keys, topK)
			flags[r] = int32(b2i(!ok))
			for j, v := range keys {
				if ok && v >= t {
					row[j/64] |= 1 << (j % 64)
				}
			}
		}
		return nil
	}}
	simKernels["msa_scores"] = simKernel{9, func(s *simDevice, a *simArgs, grid dim3) error {
		out, qk := f32s(a.ptr(0)), f32s(a.ptr(1))
		rows, groups, ld, ldo, r0, block, local := a.int(2), a.int(3), a.int(4), a.int(5), a.int(6), a.int(7), a.int(8)
		if a.err != nil {
			return a.err
		}
		if len(out) < rows*groups*ldo || len(qk) < rows*groups*ld || (r0+rows-1)/block >= ldo || r0+rows > ld {
			return errors.New("msa_scores: buffers shorter than the rows")
		}
		for R := range rows * groups {
			i := r0 + R/groups
			last := i / block
			for b := range ldo {
				m := float32(math.Inf(-1))
				if b <= last {
					for _, v := range qk[R*ld+b*block : R*ld+min((b+1)*block, i+1)] {
						m = max(m, v)
					}
					if b > last-local {
						m += 1e30
					}
				}
				out[R*ldo+b] = m
			}
		}
		return nil
	}}
	simKernels["qsa_scores"] = simKernel{11, func(s *simDevice, a *simArgs, grid dim3) error {
		out, qk, w := f32s(a.ptr(0)), f32s(a.ptr(1)), a.ptr(2)
		rows, heads, ldo, r0, block, scale, dim, fused := a.int(3), a.int(4), a.int(5), a.int(6), a.int(7), a.f32(8), a.int(9), a.int(10)
		if a.err != nil {
			return a.err
		}
		if len(out) < rows*ldo || len(qk) < rows*heads*ldo || (w != nil && len(f32s(w)) < (r0+rows)*heads) {
			return errors.New("qsa_scores: buffers shorter than the rows")
		}
		for r := range rows {
			i := r0 + r
			for b := range ldo {
				if b >= (i+1)/block {
					out[r*ldo+b] = float32(math.Inf(-1))
					continue
				}
				var s32 float32
				var s64 float64
				for h := range heads {
					v := max(qk[(r*heads+h)*ldo+b], 0)
					wt := scale
					if w != nil {
						wt = f32s(w)[i*heads+h]
					}
					if fused != 0 {
						s32 = float32(math.FMA(float64(v), float64(wt), float64(s32)))
					} else if w != nil {
						s64 += float64(v) * float64(wt)
					} else {
						s64 += float64(v)
					}
				}
				if fused == 0 {
					if w == nil {
						s64 /= math.Sqrt(float64(dim))
					}
					s32 = float32(s64)
				}
				out[r*ldo+b] = s32
			}
		}
		return nil
	}}
	simKernels["block_keys"] = simKernel{9, func(s *simDevice, a *simArgs, grid dim3) error {
		set, bw := u64s(a.ptr(0)), u64s(a.ptr(1))
		n, groups, nwords, nbw, r0, block, tail := a.int(2), a.int(3), a.int(4), a.int(5), a.int(6), a.int(7), a.int(8)
		if a.err != nil {
			return a.err
		}
		if len(set) < groups*n*nwords || nwords < (n+63)/64 || (n > r0 && len(bw) < (n-r0)*groups*nbw) {
			return errors.New("block_keys: buffers shorter than the rows")
		}
		for g := range groups {
			for i := range n {
				row := set[(g*n+i)*nwords : (g*n+i+1)*nwords]
				clear(row)
				for j := 0; j <= i; j++ {
					b := j / block
					if i < r0 || (tail != 0 && j >= (i+1)/block*block) || bw[((i-r0)*groups+g)*nbw+b/64]>>(b%64)&1 != 0 {
						row[j/64] |= 1 << (j % 64)
					}
				}
			}
		}
		return nil
	}}
	simKernels["gated_pool"] = simKernel{10, func(s *simDevice, a *simArgs, grid dim3) error {
		dst, k, g, ape := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2)), f32s(a.ptr(3))
		n, dim, block, overlap, ggml, avx2 := a.int(4), a.int(5), a.int(6), a.int(7) != 0, a.int(8) != 0, a.int(9) != 0
		if a.err != nil {
			return a.err
		}
		w := dim
		if overlap {
			w = 2 * dim
		}
		if len(dst) < n*dim || len(k) < n*w || len(g) < n*w || len(ape) < block*w {
			return errors.New("gated_pool: buffers shorter than the rows")
		}
		if overlap {
			nn.OverlapPool(dst[:n*dim], k[:n*w], g[:n*w], ape[:block*w], n, dim, block, ggml, avx2)
		} else {
			nn.GatedPool(dst[:n*dim], k[:n*w], g[:n*w], ape[:block*w], n, dim, block, ggml, avx2)
		}
		return nil
	}}
	simKernels["ple_gate"] = simKernel{8, func(s *simDevice, a *simArgs, grid dim3) error {
		dst, key, query := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2))
		n, S, E, scale, ggml := a.int(3), a.int(4), a.int(5), a.f64(6), a.int(7) != 0
		if a.err != nil {
			return a.err
		}
		if len(dst) < n*S || len(key) < n*S*E || len(query) < n*S*E {
			return errors.New("ple_gate: buffers shorter than the rows")
		}
		for t := range n {
			o, k, q := dst[t*S:(t+1)*S], key[t*S*E:(t+1)*S*E], query[t*S*E:(t+1)*S*E]
			if ggml {
				nn.GGMLPLEGate(o, k, q, float32(scale))
			} else {
				nn.PLEGate(o, k, q, scale)
			}
		}
		return nil
	}}
	simKernels["layout_keys"] = simKernel{8, func(s *simDevice, a *simArgs, grid dim3) error {
		set, vb := u64s(a.ptr(0)), a.ptr(1)
		N, P, R, window, ratio, nvis := a.int(2), a.int(3), a.int(4), a.int(5), a.int(6), a.int(7)
		if a.err != nil {
			return a.err
		}
		n := N - P
		l := nn.CompressedRows(n, ratio)
		if l.N != N || l.P != P || l.R != R || len(set) < N*((N+63)/64) || nvis != (n+63)/64 || vb != nil && len(vb) < 8*n*nvis {
			return errors.New("layout_keys: a layout not nn.CompressedRows's, or buffers shorter than its rows")
		}
		var vs *nn.KeySet
		if vb != nil {
			vs = nn.NewKeySet(n)
			copy(vs.Words(), u64s(vb))
		}
		copy(set, nn.NewCompressedLayout(nn.NewContext(0), n, ratio, window, vs).Keys.Words())
		return nil
	}}
	simKernels["qsa_pool"] = simKernel{5, func(s *simDevice, a *simArgs, grid dim3) error {
		dst, k := f32s(a.ptr(0)), f32s(a.ptr(1))
		n, dim, block := a.int(2), a.int(3), a.int(4)
		if a.err != nil {
			return a.err
		}
		if len(dst) < n*dim || len(k) < n*dim {
			return errors.New("qsa_pool: buffers shorter than the rows")
		}
		nn.QSAPool(dst[:n*dim], k[:n*dim], n, dim, block)
		return nil
	}}
	simKernels["lid_scores"] = simKernel{7, func(s *simDevice, a *simArgs, grid dim3) error {
		out, qk, w := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2))
		rows, heads, ld, r0 := a.int(3), a.int(4), a.int(5), a.int(6)
		if a.err != nil {
			return a.err
		}
		if len(out) < rows*ld || len(qk) < rows*heads*ld {
			return errors.New("lid_scores: buffers shorter than the rows")
		}
		for r := range rows {
			for j := range ld {
				if j > r0+r {
					out[r*ld+j] = float32(math.Inf(-1))
					continue
				}
				var sum float32
				for h := range heads {
					sum = float32(sum + float32(max(qk[(r*heads+h)*ld+j], 0)*w[(r0+r)*heads+h]))
				}
				out[r*ld+j] = sum
			}
		}
		return nil
	}}
}

// topKeysSettled returns the topK-th highest of score and whether every
// order of comparisons chooses the same topK keys: no NaN, and the scores
// equal to it all fit beside those above it.
func topKeysSettled(score []float32, topK int) (float32, bool) {
	if slices.ContainsFunc(score, func(v float32) bool { return v != v }) {
		return 0, false
	}
	s := slices.Clone(score)
	slices.SortFunc(s, func(a, b float32) int { return cmp.Compare(b, a) })
	t := s[topK-1]
	return t, len(s) == topK || s[topK] < t
}
