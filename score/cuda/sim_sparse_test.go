package cuda

import (
	"cmp"
	"errors"
	"math"
	"slices"
)

// The emulation of kernels/sparse.cu: lid_scores in the CPU's float32
// arithmetic (nn.LightningTopK's sums), each product and sum rounded;
// lid_topk by its definition (topKeysSettled), not the kernel's radix
// select.
func init() {
	simKernels["lid_topk"] = simKernel{8, func(s *simDevice, a *simArgs, grid dim3) error {
		words, flags, sc := u64s(a.ptr(0)), i32s(a.ptr(1)), f32s(a.ptr(2))
		rows, ld, nwords, r0, topK := a.int(3), a.int(4), a.int(5), a.int(6), a.int(7)
		if err := covers(grid[0], rows, "rows"); err != nil || a.err != nil {
			return errors.Join(err, a.err)
		}
		if len(words) < rows*nwords || len(flags) < rows || len(sc) < rows*ld || r0+rows > ld || nwords < (ld+63)/64 {
			return errors.New("lid_topk: buffers shorter than the rows")
		}
		for r := range rows {
			row := words[r*nwords : (r+1)*nwords]
			clear(row)
			t, ok := topKeysSettled(sc[r*ld:r*ld+r0+r+1], topK)
			flags[r] = int32(b2i(!ok))
			for j, v := range sc[r*ld : r*ld+r0+r+1] {
				if ok && v >= t {
					row[j/64] |= 1 << (j % 64)
				}
			}
		}
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
