package nn

import "fmt"

// ggmlBlockAttention is ggml-cpu's FLASH_ATTN_EXT over keys of a ggml
// block type (KeyType: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, their blocks
// in KeyBlocks as the cache stores them) and values decoded from the
// cache (v), which always takes
// ggml_compute_forward_flash_attn_ext_f16_one_chunk: each score
// ggml_vec_dot of the key's blocks with the query quantized to the type's
// vec_dot_type (Q8_0 as ggml-cpu quantizes activations, or Q8_1 for Q4_1
// and Q5_1: quantizeActs with ggml's lanes' sums and Q8_1's s), in that
// kernel's lanes (panelLanes: the keys of each KV head a Linear whose rows
// are the window's tokens; never the repacked order, which ggml gives
// weights only), a block of query rows at a time; then ggmlRowF32's online
// softmax and float32 accumulator.
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
	// A work item scores rows query rows against every key: 256, or as
	// many as keep its scores within 4 MiB (32 at 32,768 keys).
	rows := min(256, max(32, (1<<20)/n))
	blocks := (n + rows - 1) / rows
	workers := c.Workers(a.Heads * blocks)
	bufs, scores, accs, vss := make([][]float32, workers), make([][]float32, workers), make([][]float32, workers), make([][]float32, workers)
	for w := range workers {
		bufs[w], scores[w], accs[w], vss[w] = make([]float32, int8Scratch(hd, f)), make([]float32, rows*n), make([]float32, hd), make([]float32, n)
	}
	c.ParallelDynamic(a.Heads*blocks, 1, func(w, lo, hi int) {
		for it := lo; it < hi; it++ {
			h, i0 := it/blocks, it%blocks*rows
			i1 := min(n, i0+rows)
			g := h / group
			sub := *acts
			sub.n, sub.buf = i1-i0, acts.buf[(h*n+i0)*acts.rec:(h*n+i1)*acts.rec]
			sc := scores[w][:(i1-i0)*n]
			first := 0 // the block's first visible key, as ggmlOneChunk reads them
			if a.Window > 0 {
				first = max(0, i0-a.Window+1) / panelRows * panelRows
			}
			for r0 := first; r0 < i1; r0 += panelRows {
				keys[g].panelLanes(bufs[w], r0, min(i1, r0+panelRows), &sub, sc)
			}
			for i := i0; i < i1; i++ {
				row := sc[(i-i0)*n : (i-i0+1)*n]
				a.ggmlRowF32(out[i*qs+h*hd:i*qs+(h+1)*hd], accs[w], vss[w], v, i, h, func(j int) float32 { return row[j] })
			}
		}
	})
}

// ggmlRowF32 is query row i's output for head h (into out) over values v
// decoded to float32, as ggml's one-chunk flash attention computes it
// for a cache that is not F16: ggmlOneChunk with dot's scores, the
// accumulator acc (HeadDim floats of scratch, HeadDim a multiple of 32)
// rescaled by ms and fma(v, vs, acc) per key (ggml_vec_mad_f32), then
// ggmlFinish. Each run of consecutive keys between rescales is one
// GemmAcc of their weights (in vs, scratch of a float per key) with their
// values: the same chain of FMAs per output, in key order.
func (a *Attention) ggmlRowF32(out, acc, vs, v []float32, i, h int, dot func(j int) float32) {
	hd, ks := a.HeadDim, a.KVHeads*a.HeadDim
	g := h / (a.Heads / a.KVHeads)
	clear(acc)
	j0, run := 0, 0 // the pending run: keys j0..j0+run-1, weights vs[:run]
	flush := func() {
		for c0 := 0; c0 < hd && run > 0; c0 += 32 {
			GemmAcc(1, 32, vs[:run], run, v[j0*ks+g*hd+c0:], ks, run, acc[c0:], hd)
		}
		run = 0
	}
	M, S := a.ggmlOneChunk(i, h, dot,
		func(ms float32) {
			flush()
			for d := range acc {
				acc[d] *= ms
			}
		},
		func(j int, w float32) {
			if run > 0 && j != j0+run {
				flush()
			}
			if run == 0 {
				j0 = j
			}
			vs[run] = w
			run++
		})
	flush()
	a.ggmlFinish(out, acc, h, M, S, false)
}
