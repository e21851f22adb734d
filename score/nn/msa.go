package nn

import "math"

// MSABlocks is the key selection of MiniMax's sparse attention (MSA:
// MiniMax-M3). Its indexer has one head per KV head; head g scores key j
// for query row i as the dot product q[i,g]·k[j] (q (n, heads·dim), k (n,
// dim): one key head, as the caller stored it), and the keys are grouped
// in blocks of block. Row i of KV head g reads the keys j <= i of the topK
// blocks whose best score
//
//	s_b = max over j in block b, j <= i, of q[i,g]·k[j]
//
// is highest, the last local blocks up to i's own always among them (they
// rank first: llama.cpp adds 1e30 to their scores, in float32). A row of
// at most topK blocks reads all of its keys. Among equal scores the blocks
// ggml's TOP_K keeps (topKeys).
//
// With ggml the products are ggml's float32 MUL_MAT (ggml_vec_dot_f32, in
// the AVX2 build's order with c.GGMLAVX2), as llama.cpp computes them;
// otherwise float64 sums rounded to float32. The result has a group per
// head (KeySet.HasIn).
func MSABlocks(c *Context, q, k []float32, n, heads, dim, block, topK, local int, ggml bool) *KeySet {
	check("MSA indexer q", len(q), n*heads*dim)
	check("MSA indexer k", len(k), n*dim)
	if block <= 0 || topK <= 0 || local < 0 {
		panic("nn: MSA blocks of a non-positive size or count")
	}
	set := NewKeySets(n, heads)
	nblk := (n + block - 1) / block
	c.Parallel(n, func(_, lo, hi int) {
		score := make([]float32, nblk)
		order := make([]int32, nblk)
		for i := lo; i < hi; i++ {
			last := i / block // the row's own block
			for g := range heads {
				if last < topK { // every block
					for j := range i + 1 {
						set.AddIn(g, i, j)
					}
					continue
				}
				qi := q[(i*heads+g)*dim : (i*heads+g+1)*dim]
				for b := range last + 1 {
					m := float32(math.Inf(-1))
					for j := b * block; j < min((b+1)*block, i+1); j++ {
						kj := k[j*dim : (j+1)*dim]
						var s float32
						if ggml {
							s = dotF32(kj, qi, c.GGMLAVX2)
						} else {
							s = dot64(kj, qi)
						}
						m = max(m, s)
					}
					if b > last-local {
						m += 1e30
					}
					score[b] = m
				}
				for _, b := range topKeys(score[:last+1], order[:last+1], topK) {
					for j := int(b) * block; j < min((int(b)+1)*block, i+1); j++ {
						set.AddIn(g, i, j)
					}
				}
			}
		}
	})
	return set
}

// dot64 is x·y summed in float64, rounded to float32.
func dot64(x, y []float32) float32 {
	var s float64
	for i, v := range x {
		s += float64(v) * float64(y[i])
	}
	return float32(s)
}
