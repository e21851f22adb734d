package nn

import "math"

// QSABlocks is the key selection of Qwen3.8's sparse attention (QSA:
// qwen4exp), as llama.cpp 0.7.0 runs it. The keys are grouped in blocks
// of block in window order, and block b is scored by one pooled key,
// p[b·block] (p (n, dim): the indexer's mean key of rows [r, r+block) at
// row r, normed and turned by RoPE to r, as the caller made it; other
// rows are not read). Row i scores each whole block b ((b+1)·block <= i+1)
// by
//
//	s_b = Σ_h max(q[i,h]·p[b·block], 0) · 1/sqrt(dim)
//
// (q (n, heads·dim)) and reads the keys of the topK/block blocks that
// score highest, among equal scores those ggml's TOP_K keeps (topKeys),
// and the keys of its own unfinished block, [block·((i+1)/block), i]. A
// row of at most topK/block whole blocks reads every key j <= i.
//
// With ggml the sums are llama.cpp's LIGHTNING_INDEXER's: the products
// ggml_vec_dot_f32's (the AVX2 build's lane order with c.GGMLAVX2), each
// head's term max(q·p, 0)·w fused into the float32 sum in head order (its
// compiler contracts the statement to an FMA); otherwise float64 sums
// rounded once.
func QSABlocks(c *Context, q, p []float32, n, heads, dim, block, topK int, ggml bool) *KeySet {
	check("QSA indexer q", len(q), n*heads*dim)
	check("QSA pooled keys", len(p), n*dim)
	if block <= 1 || topK < block || topK%block != 0 {
		panic("nn: QSA blocks of a size that does not divide its budget")
	}
	set := NewKeySet(n)
	top := topK / block
	w := 1 / float32(math.Sqrt(float64(dim)))
	c.ParallelDynamic(n, 16, func(_, lo, hi int) { // a row's work grows with it
		score := make([]float32, n/block+1)
		order := make([]int32, n/block+1)
		for i := lo; i < hi; i++ {
			whole := (i + 1) / block
			if whole <= top {
				for j := range i + 1 {
					set.Add(i, j)
				}
				continue
			}
			for b := range whole {
				k := p[b*block*dim : (b*block+1)*dim]
				if ggml {
					var s float32
					for h := range heads {
						qk := dotF32(q[(i*heads+h)*dim:(i*heads+h+1)*dim], k, c.GGMLAVX2)
						s = fma32(max(qk, 0), w, s)
					}
					score[b] = s
					continue
				}
				var s float64
				for h := range heads {
					var qk float64
					for d, x := range q[(i*heads+h)*dim : (i*heads+h+1)*dim] {
						qk += float64(x) * float64(k[d])
					}
					s += max(qk, 0)
				}
				score[b] = float32(s / math.Sqrt(float64(dim)))
			}
			for _, b := range topKeys(score[:whole], order[:whole], top) {
				for j := int(b) * block; j < (int(b)+1)*block; j++ {
					set.Add(i, j)
				}
			}
			for j := whole * block; j <= i; j++ {
				set.Add(i, j)
			}
		}
	})
	return set
}

// QSAPool sets row r of dst (n, dim) to the mean of k's rows [r, r+block)
// as llama.cpp pools them: summed in float32 in row order, then times
// 1/block in float32; rows past n-block are zero.
func QSAPool(dst, k []float32, n, dim, block int) {
	check("QSA pool", len(dst), n*dim)
	check("QSA pool keys", len(k), n*dim)
	inv := 1 / float32(block)
	clear(dst[max(0, n-block+1)*dim:])
	for r := 0; r+block <= n; r++ {
		out := dst[r*dim : (r+1)*dim]
		copy(out, k[r*dim:(r+1)*dim])
		for m := r + 1; m < r+block; m++ {
			for d, x := range k[m*dim : (m+1)*dim] {
				out[d] += x
			}
		}
		for d := range out {
			out[d] *= inv
		}
	}
}
