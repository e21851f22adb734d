package nn

import "fmt"

// ggmlBlockAttention is ggml-cpu's FLASH_ATTN_EXT over keys of a ggml
// block type other than Q8_0 (KeyType: Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL,
// their blocks in KeyBlocks as the cache stores them) and values decoded
// from the cache (v): ggmlQ8Attention's online softmax and float32
// accumulator, each score ggml_vec_dot of the key's blocks with the query
// quantized to the type's vec_dot_type (Q8_0, or Q8_1 for Q4_1 and Q5_1:
// quantizeActs with ggml's lanes' sums and Q8_1's s), in that kernel's
// lanes (panelLanes: the keys of each KV head a Linear whose rows are the
// window's tokens; never the repacked order, which ggml gives weights
// only), for a block of query rows at a time.
func (a *Attention) ggmlBlockAttention(c *Context, out, q, v []float32, n int) {
	hd, qs := a.HeadDim, a.Heads*a.HeadDim
	group := a.Heads / a.KVHeads
	ts := a.KeyType.TypeSize()
	nb := hd / 32
	check("attention key blocks", len(a.KeyBlocks), n*a.KVHeads*nb*ts)
	// Each KV head's keys as a Linear of n rows.
	keys := make([]*Linear, a.KVHeads)
	for g := range keys {
		data := make([]byte, n*nb*ts)
		for j := range n {
			o := (j*a.KVHeads + g) * nb * ts
			copy(data[j*nb*ts:(j+1)*nb*ts], a.KeyBlocks[o:o+nb*ts])
		}
		l, err := NewLinear(fmt.Sprintf("(keys of KV head %d)", g), a.KeyType, hd, n, data)
		if err != nil {
			panic("nn: " + err.Error())
		}
		keys[g] = l
	}
	f, ok := keys[0].int8Able()
	if !ok {
		panic(fmt.Sprintf("nn: attention over %v keys", a.KeyType))
	}
	// The queries head by head (rows h·n + i), quantized once.
	mark := c.Mark()
	defer c.Release(mark)
	qh := c.Alloc(n * qs)
	c.Parallel(n, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			for h := range a.Heads {
				copy(qh[(h*n+i)*hd:(h*n+i+1)*hd], q[i*qs+h*hd:i*qs+(h+1)*hd])
			}
		}
	})
	acts := &qacts{actBlock: 32, sums4: true, mins: f.HasMin, avx2: c.GGMLAVX2}
	c.quantizeActs(acts, qh, a.Heads*n, hd, 32)
	const rows = 64 // query rows a work item scores
	blocks := (n + rows - 1) / rows
	c.ParallelDynamic(a.Heads*blocks, 1, func(_, lo, hi int) {
		buf := make([]float32, ggmlScratch(hd, f))
		scores := make([]float32, rows*n)
		acc := make([]float32, hd)
		for it := lo; it < hi; it++ {
			h, i0 := it/blocks, it%blocks*rows
			i1 := min(n, i0+rows)
			g := h / group
			sub := *acts
			sub.n, sub.buf = i1-i0, acts.buf[(h*n+i0)*acts.rec:(h*n+i1)*acts.rec]
			sc := scores[:(i1-i0)*n]
			for r0 := 0; r0 < i1; r0 += panelRows {
				keys[g].panelLanes(buf, r0, min(i1, r0+panelRows), &sub, sc)
			}
			for i := i0; i < i1; i++ {
				row := sc[(i-i0)*n : (i-i0+1)*n]
				a.ggmlRowF32(out[i*qs+h*hd:i*qs+(h+1)*hd], acc, v, i, h, func(j int) float32 { return row[j] })
			}
		}
	})
}
