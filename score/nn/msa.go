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
// ggml's TOP_K keeps (TopKeys).
//
// With ggml the products are ggml's float32 MUL_MAT (ggml_vec_dot_f32, in
// the AVX2 build's order with c.GGMLAVX2), as llama.cpp computes them;
// otherwise Gemm's (one FMA chain over dim each, as LightningTopK's). The
// result has a group per head (KeySet.HasIn).
func MSABlocks(c *Context, q, k []float32, n, heads, dim, block, topK, local int, ggml bool) *KeySet {
	check("MSA indexer q", len(q), n*heads*dim)
	check("MSA indexer k", len(k), n*dim)
	if block <= 0 || topK <= 0 || local < 0 {
		panic("nn: MSA blocks of a non-positive size or count")
	}
	set := NewKeySets(n, heads)
	nblk := (n + block - 1) / block
	np := (n + 31) / 32 * 32
	var kt []float32 // Gemm's panels: kt[d·np + j] = k[j][d], zero past n
	if !ggml {
		mark := c.Mark()
		defer c.Release(mark)
		kt = c.Alloc(dim * np)
		for j := range n {
			for d := range dim {
				kt[d*np+j] = k[j*dim+d]
			}
		}
	}
	c.ParallelDynamic(n, 16, func(_, lo, hi int) { // a row's work grows with it
		sc := make([]float32, heads*np) // sc[g·np + j]: head g's score of key j
		score := make([]float32, nblk)
		order := make([]int32, nblk)
		for i := lo; i < hi; i++ {
			last := i / block // the row's own block
			if last < topK {  // every block
				for g := range heads {
					set.AddKeys(g, i, 0, i+1)
				}
				continue
			}
			if ggml {
				for g := range heads {
					qi := q[(i*heads+g)*dim : (i*heads+g+1)*dim]
					for j := range i + 1 {
						sc[g*np+j] = dotF32(k[j*dim:(j+1)*dim], qi, c.GGMLAVX2)
					}
				}
			} else {
				for z := 0; z <= i; z += 32 {
					Gemm(heads, 32, q[i*heads*dim:], dim, kt[z:], np, dim, sc[z:], np, nil)
				}
			}
			for g := range heads {
				row := sc[g*np : g*np+i+1]
				for b := range last + 1 {
					m := float32(math.Inf(-1))
					for _, s := range row[b*block : min((b+1)*block, i+1)] {
						m = max(m, s)
					}
					if b > last-local {
						m += 1e30
					}
					score[b] = m
				}
				for _, b := range TopKeys(score[:last+1], order[:last+1], topK) {
					set.AddKeys(g, i, int(b)*block, min((int(b)+1)*block, i+1))
				}
			}
		}
	})
	return set
}
