package nn

import (
	"fmt"
	"math"
	"unsafe"
)

// Attention is causal scaled dot-product attention with grouped KV heads
// (GQA): query head h reads key/value head h / (Heads/KVHeads).
type Attention struct {
	Heads, KVHeads, HeadDim int
	Scale                   float64 // score scale; 1/sqrt(HeadDim) in every model we load
}

// Validate reports head counts that do not group.
func (a *Attention) Validate() error {
	if a.Heads <= 0 || a.KVHeads <= 0 || a.HeadDim <= 0 || a.Heads%a.KVHeads != 0 {
		return fmt.Errorf("attention: %d heads, %d KV heads of size %d (heads must be a multiple of KV heads)", a.Heads, a.KVHeads, a.HeadDim)
	}
	return nil
}

// keyBlock is how many keys the online softmax takes at a time: one
// 32-column tile of scores per query row.
const keyBlock = 32

// Forward computes, for each query row i and head h,
// out[i,h] = Σ_{j<=i} softmax_j(q[i,h]·k[j,g]·Scale) v[j,g], g = h/(Heads/KVHeads):
// q (n, Heads·HeadDim), k, v (n, KVHeads·HeadDim) -> out (n, Heads·HeadDim).
//
// Flash attention on the CPU: the queries of one KV head go in tiles of up
// to 12 rows (the heads sharing the KV head, for a few positions), and each
// tile walks the keys in blocks of 32 with an online softmax (the running
// maximum and sum of softmaxTileGeneric), so scores never exist beyond one
// 12 × 32 tile. Scores are float32 dot products (Gemm over the keys,
// transposed once per call into 32-key panels), the softmax and the
// weighted sum of values (Gemm again, rescaling the partial output by
// alpha) are float32, and each output is divided by its sum at the end.
// Tiles are independent, so workers take them as they finish; every output
// is computed the same way whatever the number of threads.
//
// Head sizes that are not a multiple of 16 take attentionRef, the plain
// float64 loop.
func (a *Attention) Forward(c *Context, out, q, k, v []float32, n int) {
	hd, qs, ks := a.HeadDim, a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	check("attention q", len(q), n*qs)
	check("attention k", len(k), n*ks)
	check("attention v", len(v), n*ks)
	check("attention output", len(out), n*qs)
	if n == 0 {
		return
	}
	if hd%16 != 0 {
		a.attentionRef(c, out, q, k, v, n)
		return
	}
	group := a.Heads / a.KVHeads
	nb := (n + keyBlock - 1) / keyBlock

	// Keys, transposed: kt[g][b] is a hd × 32 panel of keys 32b..32b+31.
	kt := c.Alloc(a.KVHeads * nb * hd * keyBlock)
	c.Parallel(a.KVHeads*nb, func(_, lo, hi int) {
		for it := lo; it < hi; it++ {
			g, b := it/nb, it%nb
			panel := kt[it*hd*keyBlock : (it+1)*hd*keyBlock]
			j0 := b * keyBlock
			for jj := range keyBlock {
				j := j0 + jj
				if j >= n {
					for d := range hd {
						panel[d*keyBlock+jj] = 0
					}
					continue
				}
				kj := k[j*ks+g*hd : j*ks+(g+1)*hd]
				for d, x := range kj {
					panel[d*keyBlock+jj] = x
				}
			}
		}
	})

	// Tiles: tpt positions × hpt heads of one KV head's group, <= 12 rows.
	hpt := min(group, gemmTileRows)
	tpt := max(1, gemmTileRows/hpt)
	hchunks := (group + hpt - 1) / hpt
	ttiles := (n + tpt - 1) / tpt
	perKV := ttiles * hchunks
	const R = gemmTileRows
	per := R*hd + R*keyBlock + R*hd + 4*R // queries, scores, outputs, m, l, alpha, limits
	w := c.Workers(a.KVHeads * perKV)
	scratch := c.Alloc(max(w, 1) * per)
	scale := float32(a.Scale)
	c.ParallelDynamic(a.KVHeads*perKV, 1, func(worker, lo, hi int) {
		buf := scratch[worker*per : (worker+1)*per]
		qb, sb, ob := buf[:R*hd], buf[R*hd:R*hd+R*keyBlock], buf[R*hd+R*keyBlock:2*R*hd+R*keyBlock]
		st := buf[2*R*hd+R*keyBlock:]
		m, l, alpha := st[:R], st[R:2*R], st[2*R:3*R]
		var lim [R]int32
		for it := lo; it < hi; it++ {
			g, rest := it/perKV, it%perKV
			i0 := (rest / hchunks) * tpt
			i1 := min(i0+tpt, n)
			h0 := (rest % hchunks) * hpt
			h1 := min(h0+hpt, group)
			nh := h1 - h0
			rows := (i1 - i0) * nh
			for i := i0; i < i1; i++ {
				for h := h0; h < h1; h++ {
					r := (i-i0)*nh + h - h0
					qh := g*group + h
					copy(qb[r*hd:(r+1)*hd], q[i*qs+qh*hd:i*qs+(qh+1)*hd])
				}
			}
			for r := range rows {
				m[r], l[r] = float32(math.Inf(-1)), 0
			}
			// The kernels directly, with bounds checked once per tile: the
			// loop runs once per 32 keys.
			qk, pv := tileKernels(rows)
			_ = kt[(g*nb+(i1-1)/keyBlock+1)*hd*keyBlock-1]
			_ = sb[rows*keyBlock-1]
			_ = ob[rows*hd-1]
			for b := 0; b*keyBlock < i1; b++ {
				j0 := b * keyBlock
				qk(&qb[0], hd, &kt[(g*nb+b)*hd*keyBlock], keyBlock, hd, &sb[0], keyBlock, nil)
				if j0+keyBlock > i0 || b == 0 { // the diagonal blocks (and the first) have masked keys
					for r := range rows {
						i := i0 + r/nh
						lim[r] = int32(min(keyBlock, max(0, i+1-j0)))
					}
				}
				kern.softmax(&sb[0], rows, &lim[0], scale, &m[0], &l[0], &alpha[0])
				kk := min(keyBlock, n-j0)
				var al *float32
				if b > 0 {
					al = &alpha[0]
				}
				vb := v[j0*ks+g*hd : (j0+kk-1)*ks+(g+1)*hd]
				for d0 := 0; d0 < hd; {
					nr := 32
					if hd-d0 < 32 {
						nr = 16
					}
					pv[nr/16-1](&sb[0], keyBlock, &vb[d0], ks, kk, &ob[d0], hd, al)
					d0 += nr
				}
			}
			for i := i0; i < i1; i++ {
				for h := h0; h < h1; h++ {
					r := (i-i0)*nh + h - h0
					qh := g*group + h
					o := out[i*qs+qh*hd : i*qs+(qh+1)*hd]
					for d, x := range ob[r*hd : (r+1)*hd] {
						o[d] = x / l[r]
					}
				}
			}
		}
	})
}

// tileKernels returns the Gemm tile kernels for rows rows and 32 columns,
// and for 16 and 32 columns, or Gemm itself where the level's tiles have
// fewer rows (AVX2).
func tileKernels(rows int) (qk gemmFunc, pv [2]gemmFunc) {
	for z := range 2 {
		if fns := kern.gemm[z]; rows <= len(fns) {
			pv[z] = fns[rows-1]
		} else {
			nr := 16 * (z + 1)
			pv[z] = func(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32) {
				var al []float32
				if alpha != nil {
					al = unsafe.Slice(alpha, rows)
				}
				Gemm(rows, nr, unsafe.Slice(a, (rows-1)*lda+k), lda, unsafe.Slice(b, (k-1)*ldb+nr), ldb, k,
					unsafe.Slice(c, (rows-1)*ldc+nr), ldc, al)
			}
		}
	}
	return pv[1], pv
}

// attentionRef is the plain attention: per query row and head, float32
// scores, then softmax and the weighted sum of values in float64, rounded
// to float32 once per output.
func (a *Attention) attentionRef(c *Context, out, q, k, v []float32, n int) {
	hd, qs, ks := a.HeadDim, a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	group := a.Heads / a.KVHeads
	items := n * a.Heads
	const grain = 8
	w := c.Workers((items + grain - 1) / grain)
	scratch := c.Alloc64(max(w, 1) * (n + hd)) // per worker: n scores, hd sums
	c.ParallelDynamic(items, grain, func(worker, lo, hi int) {
		sc := scratch[worker*(n+hd) : (worker+1)*(n+hd)]
		for it := lo; it < hi; it++ {
			i, h := it/a.Heads, it%a.Heads
			g := h / group
			qi := q[i*qs+h*hd : i*qs+(h+1)*hd]
			s := sc[:i+1]
			m := math.Inf(-1)
			for j := range s {
				s[j] = float64(dot(qi, k[j*ks+g*hd:j*ks+(g+1)*hd])) * a.Scale
				m = math.Max(m, s[j])
			}
			var sum float64
			for j := range s {
				s[j] = math.Exp(s[j] - m)
				sum += s[j]
			}
			acc := sc[n : n+hd]
			clear(acc)
			for j, p := range s {
				vj := v[j*ks+g*hd : j*ks+(g+1)*hd]
				for d := range acc {
					acc[d] += p * float64(vj[d])
				}
			}
			o := out[i*qs+h*hd : i*qs+(h+1)*hd]
			for d := range o {
				o[d] = float32(acc[d] / sum)
			}
		}
	})
}

// dot returns a·b in float32. len(b) >= len(a).
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s float32
	for i, v := range a {
		s += v * b[i]
	}
	return s
}
