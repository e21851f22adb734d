package nn

import (
	"fmt"
	"math"
	"unsafe"

	"ppl.dev/gguf"
)

// Attention is causal scaled dot-product attention with grouped KV heads
// (GQA): query head h reads key/value head h / (Heads/KVHeads).
type Attention struct {
	Heads, KVHeads, HeadDim int
	Scale                   float64 // score scale
	// Window > 0 restricts query i to keys j with i - j < Window (sliding
	// window attention).
	Window int
	// Sinks, one logit per query head, join each softmax's denominator
	// only: exp(Sinks[h]) is added to the sum (gpt-oss).
	Sinks []float32
	// SoftCap > 0 caps each scaled score s to SoftCap·tanh(s/SoftCap)
	// before the softmax (Gemma 2's attn_logit_softcapping).
	SoftCap float64
	// Slopes, one per query head, add ALiBi's linear bias (Bloom, MPT,
	// Jais; ALiBiSlopes): query row i's scaled (and capped) score of key j
	// gets Slopes[h]·(j − i), a float32 product added in float32 (float64
	// in Exact). With GGMLF16 the distance is first rounded to float16, as
	// llama.cpp's flash attention reads it from its F16 mask (exact up to
	// 2048; a distance past 65504 is -Inf there, its key unseen).
	Slopes []float32
	// GGMLF16 computes as llama.cpp's CPU flash attention over an F16
	// cache (ggmlAttention): the int8 mode with an f16 KV cache.
	GGMLF16 bool
	// KeyBlocks, with KeyType, computes as llama.cpp's CPU flash
	// attention over a cache of keys of that ggml block type (Q8_0, Q4_0,
	// Q4_1, Q5_0, Q5_1, IQ4_NL; ggmlBlockAttention): the keys' blocks as the
	// cache stores them (n tokens × KVHeads × HeadDim/32 blocks), v their
	// values decoded (HeadDim a multiple of 32): the int8 modes with such a
	// KV cache.
	KeyBlocks []byte
	KeyType   gguf.Type
	// MatMul, with GGMLF16, computes as llama.cpp's attention without
	// flash attention instead (ggmlMatMulAttention: KQ and KQV as F16
	// matrix products, SOFT_MAX between them), which llama.cpp 0.7.0 takes
	// for Grok whatever its flash-attention setting. It takes no Sinks
	// and no Slopes.
	MatMul bool
	// Keys, when not nil, restricts query row i further to the keys j with
	// Keys.Has(i, j) (DeepSeek's sparse attention: the keys its lightning
	// indexer selects), or, with a set of a group per KV head, KV head g's
	// heads the keys Keys.HasIn(g, i, j) (MiniMax's sparse attention: each
	// KV head's blocks).
	Keys *KeySet
	// Chunk > 0 restricts query row i to the keys of its chunk, j >=
	// floor(i/Chunk)·Chunk (Llama 4's chunked attention).
	Chunk int
	// Placeholders, when above 0, is how many of the first rows of q are
	// not queries: their outputs are left undefined, and llama.cpp's
	// flash-attention kernel is chosen by the count of the others
	// (DeepSeek-V4's attention, whose compressed keys, and the raw cache's
	// padding, precede its queries' rows: ml.Compressed).
	Placeholders int
	// ValueDim, when not 0, is how many leading elements of each value
	// and output head the caller uses (multi-head latent attention's values
	// are its keys' first ValueDim elements); the others of the output are
	// left undefined. With GGMLF16 it is ggml's DV, which decides its
	// kernel.
	ValueDim int
}

// KeySet is a set of (query row, key) pairs of n rows, a bit each, in
// one group or in several (one per KV head) of n rows each.
type KeySet struct {
	words  int // per row
	rows   int // per group
	groups int
	bits   []uint64
}

// NewKeySet returns an empty set for n rows of n keys.
func NewKeySet(n int) *KeySet { return NewKeySets(n, 1) }

// NewKeySets returns an empty set of groups of n rows of n keys.
func NewKeySets(n, groups int) *KeySet {
	w := (n + 63) / 64
	return &KeySet{words: w, rows: n, groups: groups, bits: make([]uint64, groups*n*w)}
}

// Groups is the number of groups of rows.
func (s *KeySet) Groups() int { return s.groups }

// Words is the set's bitmap, for a device to copy: row i of group g is
// the (n+63)/64 words from (g·n + i)·((n+63)/64), key j its bit j mod 64
// of word j/64.
func (s *KeySet) Words() []uint64 { return s.bits }

// Add puts key j in row i's set (of the first group).
func (s *KeySet) Add(i, j int) { s.AddIn(0, i, j) }

// Has reports whether key j is in row i's set (of the first group).
func (s *KeySet) Has(i, j int) bool { return s.HasIn(0, i, j) }

// AddIn puts key j in row i's set of group g.
func (s *KeySet) AddIn(g, i, j int) { s.bits[(g*s.rows+i)*s.words+j/64] |= 1 << (j % 64) }

// AddKeys puts keys [lo, hi) in row i's set of group g, a word at a time.
func (s *KeySet) AddKeys(g, i, lo, hi int) {
	row := s.bits[(g*s.rows+i)*s.words:]
	for lo < hi {
		b := lo % 64
		m := min(64-b, hi-lo)
		row[lo/64] |= (^uint64(0) >> (64 - m)) << b
		lo += m
	}
}

// HasIn reports whether key j is in row i's set of group g (of the one
// group of a set shared by every KV head).
func (s *KeySet) HasIn(g, i, j int) bool { return s.row(g, i)[j/64]>>(j%64)&1 != 0 }

// any reports whether one of the m rows from i0 of KV head g's group
// holds a key of [t0, t0+n) (t0 and n multiples of 64).
func (s *KeySet) any(g, i0, m, t0, n int) bool {
	for i := i0; i < i0+m; i++ {
		for _, w := range s.row(g, i)[t0/64 : (t0+n)/64] {
			if w != 0 {
				return true
			}
		}
	}
	return false
}

// row is the bits of row i's set in KV head g's group (the one group of a
// set shared by every KV head).
func (s *KeySet) row(g, i int) []uint64 {
	if s.groups == 1 {
		g = 0
	}
	o := (g*s.rows + i) * s.words
	return s.bits[o : o+s.words]
}

// sees reports whether query row i of KV head g reads key j <= i besides
// the window: a set of one group holds every KV head's keys.
func (a *Attention) sees(g, i, j int) bool {
	if a.Keys != nil && !a.Keys.HasIn(g, i, j) {
		return false
	}
	return a.Chunk == 0 || j >= i/a.Chunk*a.Chunk
}

// masks reports whether Keys or Chunk leave some of n rows some of their
// keys (a window within one chunk leaves none).
func (a *Attention) masks(n int) bool { return a.Keys != nil || a.Chunk > 0 && n > a.Chunk }

// valueDim is ValueDim, or HeadDim when it is 0.
func (a *Attention) valueDim() int {
	if a.ValueDim > 0 {
		return a.ValueDim
	}
	return a.HeadDim
}

// Validate reports head counts that do not group.
func (a *Attention) Validate() error {
	if a.Heads <= 0 || a.KVHeads <= 0 || a.HeadDim <= 0 || a.Heads%a.KVHeads != 0 {
		return fmt.Errorf("attention: %d heads, %d KV heads of size %d (heads must be a multiple of KV heads)", a.Heads, a.KVHeads, a.HeadDim)
	}
	if a.Window < 0 || a.Chunk < 0 || (a.Sinks != nil && len(a.Sinks) != a.Heads) || (a.Slopes != nil && len(a.Slopes) != a.Heads) {
		return fmt.Errorf("attention: window %d, chunk %d, %d sinks and %d ALiBi slopes for %d heads", a.Window, a.Chunk, len(a.Sinks), len(a.Slopes), a.Heads)
	}
	if a.SoftCap < 0 || math.IsInf(a.SoftCap, 0) || math.IsNaN(a.SoftCap) {
		return fmt.Errorf("attention: soft-cap %v", a.SoftCap)
	}
	return nil
}

// keyBlock is how many keys the online softmax takes at a time: two
// 32-column tiles of scores per query row.
const keyBlock = 64

// Forward computes, for each query row i and head h,
// out[i,h] = Σ_{j<=i} softmax_j(q[i,h]·k[j,g]·Scale) v[j,g], g = h/(Heads/KVHeads):
// q (n, Heads·HeadDim), k, v (n, KVHeads·HeadDim) -> out (n, Heads·HeadDim).
//
// Flash attention on the CPU: the queries of one KV head go in tiles of up
// to 12 rows (the heads sharing the KV head, for a few positions), and each
// tile walks the keys in blocks of 64 with an online softmax (the running
// maximum and sum of softmaxTileGeneric), so scores never exist beyond one
// 12 × 64 tile; four consecutive tiles walk the keys together. Scores are
// float32 dot products (Gemm over the keys, transposed once per call into
// 32-key panels), the softmax and the weighted sum of values (Gemm again,
// rescaling the partial output by alpha) are float32, and each output is
// divided by its sum at the end.
// Tiles are independent, so workers take them as they finish; every output
// is computed the same way whatever the number of threads.
//
// A sliding window skips the key blocks before every row's window and
// masks the keys before a row's window start in the blocks it reads with
// a score of -1e30 (its exponential is 0 beside any real score; a block
// wholly masked for a row, read before the row's first real block, leaves
// terms that the first real block's alpha = e^(-1e30 - m) = 0 erases);
// Keys and Chunk mask the keys they leave out the same way.
// Sinks add exp(sink - m) to each row's final sum, in float64. A soft-cap
// replaces a block's scores by SoftCap·tanh(s·Scale/SoftCap), in float64
// rounded once, before the window's masks.
//
// Head sizes that are not a multiple of 16 take attentionRef, the plain
// float64 loop. With GGMLF16 the whole computation is ggmlAttention
// instead: llama.cpp's, to the bit; with KeyBlocks, ggmlBlockAttention.
func (a *Attention) Forward(c *Context, out, q, k, v []float32, n int) {
	hd, qs, ks := a.HeadDim, a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	check("attention q", len(q), n*qs)
	check("attention k", len(k), n*ks)
	check("attention v", len(v), n*ks)
	check("attention output", len(out), n*qs)
	if n == 0 {
		return
	}
	if a.GGMLF16 && a.MatMul {
		a.ggmlMatMulAttention(c, out, q, k, v, n)
		return
	}
	if a.GGMLF16 {
		a.ggmlAttention(c, out, q, k, v, n)
		return
	}
	if a.KeyBlocks != nil {
		a.ggmlBlockAttention(c, out, q, v, n)
		return
	}
	if hd%16 != 0 {
		a.attentionRef(c, out, q, k, v, n)
		return
	}
	group := a.Heads / a.KVHeads
	nb := (n + 31) / 32 // panels of 32 keys

	// Keys, transposed: kt[g][b] is a hd × 32 panel of keys 32b..32b+31.
	kt := c.Alloc(a.KVHeads * nb * hd * 32)
	c.Parallel(a.KVHeads*nb, func(_, lo, hi int) {
		for it := lo; it < hi; it++ {
			g, b := it/nb, it%nb
			panel := kt[it*hd*32 : (it+1)*hd*32]
			j0 := b * 32
			for jj := range 32 {
				j := j0 + jj
				if j >= n {
					for d := range hd {
						panel[d*32+jj] = 0
					}
					continue
				}
				kj := k[j*ks+g*hd : j*ks+(g+1)*hd]
				for d, x := range kj {
					panel[d*32+jj] = x
				}
			}
		}
	})

	// Tiles: tpt positions × hpt heads of one KV head's group, <= 12 rows;
	// a work item is superTile consecutive tiles, which walk the keys
	// together so that each block of keys and values is read from memory
	// once for all of them.
	hpt := min(group, gemmTileRows)
	tpt := max(1, gemmTileRows/hpt)
	hchunks := (group + hpt - 1) / hpt
	ttiles := (n + tpt - 1) / tpt
	supers := (ttiles + superTile - 1) / superTile
	perKV := supers * hchunks
	const R = gemmTileRows
	perTile := 2*R*hd + 4*R // queries, outputs, m, l, alpha, limits
	per := superTile*perTile + R*keyBlock
	w := c.Workers(a.KVHeads * perKV)
	scratch := c.Alloc(max(w, 1) * per)
	scale := float32(a.Scale)
	biased := a.SoftCap > 0 || a.Slopes != nil // scores scaled, capped and biased before the softmax
	if biased {
		scale = 1
	}
	c.ParallelDynamic(a.KVHeads*perKV, 1, func(worker, lo, hi int) {
		buf := scratch[worker*per : (worker+1)*per]
		sb := buf[superTile*perTile:]
		var tiles [superTile]attnTile
		for it := lo; it < hi; it++ {
			g, rest := it/perKV, it%perKV
			h0 := (rest % hchunks) * hpt
			h1 := min(h0+hpt, group)
			nh := h1 - h0
			s0 := (rest / hchunks) * superTile
			nt, iEnd := 0, 0
			for ts := s0; ts < min(s0+superTile, ttiles); ts++ {
				tb := buf[nt*perTile : (nt+1)*perTile]
				tl := &tiles[nt]
				tl.i0 = ts * tpt
				tl.i1 = min(tl.i0+tpt, n)
				tl.rows = (tl.i1 - tl.i0) * nh
				tl.q, tl.o = tb[:R*hd], tb[R*hd:2*R*hd]
				tl.m, tl.l, tl.alpha = tb[2*R*hd:2*R*hd+R], tb[2*R*hd+R:2*R*hd+2*R], tb[2*R*hd+2*R:2*R*hd+3*R]
				for i := tl.i0; i < tl.i1; i++ {
					for h := h0; h < h1; h++ {
						r := (i-tl.i0)*nh + h - h0
						qh := g*group + h
						copy(tl.q[r*hd:(r+1)*hd], q[i*qs+qh*hd:i*qs+(qh+1)*hd])
					}
				}
				for r := range tl.rows {
					tl.m[r], tl.l[r] = float32(math.Inf(-1)), 0
				}
				tl.started = false
				// The kernels directly, with bounds checked once per tile:
				// the loop runs once per 64 keys.
				tl.qk, tl.pv = tileKernels(tl.rows)
				_ = tl.o[tl.rows*hd-1]
				iEnd = tl.i1
				nt++
			}
			_ = kt[(g*nb+(iEnd-1)/32+1)*hd*32-1]
			_ = sb[R*keyBlock-1]
			b0 := 0
			if a.Window > 0 { // the first block in the first row's window
				b0 = max(0, tiles[0].i0-a.Window+1) / keyBlock
			}
			for b := b0; b*keyBlock < iEnd; b++ {
				j0 := b * keyBlock
				kk := min(keyBlock, n-j0)
				vb := v[j0*ks+g*hd : (j0+kk-1)*ks+(g+1)*hd]
				for ti := range nt {
					tl := &tiles[ti]
					if j0 >= tl.i1 {
						continue // past this tile's last position
					}
					if a.Window > 0 && j0+keyBlock <= tl.i0-a.Window+1 {
						continue // before every row's window
					}
					// Scores of the block's two panels of 32 keys (the second
					// may lie past the window: its keys are masked).
					tl.qk(&tl.q[0], hd, &kt[(g*nb+2*b)*hd*32], 32, hd, &sb[0], keyBlock, nil)
					if j0+32 < n {
						tl.qk(&tl.q[0], hd, &kt[(g*nb+2*b+1)*hd*32], 32, hd, &sb[32], keyBlock, nil)
					}
					if biased { // scaled, capped and biased here: the softmax's scale is then 1
						for r := range tl.rows {
							a.bias(sb[r*keyBlock:(r+1)*keyBlock], g*group+h0+r%nh, j0-(tl.i0+r/nh))
						}
					}
					if j0+keyBlock > tl.i0 || !tl.started { // the diagonal blocks (and the first) have masked keys
						for r := range tl.rows {
							i := tl.i0 + r/nh
							tl.lim[r] = int32(min(keyBlock, max(0, i+1-j0)))
						}
					}
					if a.Window > 0 && j0 < tl.i1-a.Window { // some row's window starts after j0
						for r := range tl.rows {
							lo := min(keyBlock, tl.i0+r/nh-a.Window+1-j0)
							for jj := 0; jj < lo; jj++ {
								sb[r*keyBlock+jj] = -1e30
							}
						}
					}
					if a.masks(n) { // the keys a row's set or chunk leaves out, as the window's
						for r := range tl.rows {
							i := tl.i0 + r/nh
							for jj := range min(keyBlock, i+1-j0) {
								if !a.sees(g, i, j0+jj) {
									sb[r*keyBlock+jj] = -1e30
								}
							}
						}
					}
					kern.softmax(&sb[0], tl.rows, &tl.lim[0], scale, &tl.m[0], &tl.l[0], &tl.alpha[0])
					var al *float32
					if tl.started {
						al = &tl.alpha[0]
					}
					tl.started = true
					for d0 := 0; d0 < hd; {
						nr := 32
						if hd-d0 < 32 {
							nr = 16
						}
						tl.pv[nr/16-1](&sb[0], keyBlock, &vb[d0], ks, kk, &tl.o[d0], hd, al)
						d0 += nr
					}
				}
			}
			for ti := range nt {
				tl := &tiles[ti]
				for i := tl.i0; i < tl.i1; i++ {
					for h := h0; h < h1; h++ {
						r := (i-tl.i0)*nh + h - h0
						qh := g*group + h
						o := out[i*qs+qh*hd : i*qs+(qh+1)*hd]
						if a.Sinks != nil {
							sum := float64(tl.l[r]) + math.Exp(float64(a.Sinks[qh])-float64(tl.m[r]))
							for d, x := range tl.o[r*hd : (r+1)*hd] {
								o[d] = float32(float64(x) / sum)
							}
							continue
						}
						for d, x := range tl.o[r*hd : (r+1)*hd] {
							o[d] = x / tl.l[r]
						}
					}
				}
			}
		}
	})
}

// superTile is how many query tiles walk the keys together.
const superTile = 4

// attnTile is one query tile's state in Attention.Forward: up to 12 rows
// (positions [i0, i1) × a chunk of heads), their queries, outputs and
// online-softmax state.
type attnTile struct {
	i0, i1, rows int
	q, o         []float32
	m, l, alpha  []float32
	lim          [gemmTileRows]int32
	started      bool // a block of keys has been read (o and l hold sums)
	qk           gemmFunc
	pv           [2]gemmFunc
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
// to float32 once per output. With a Window, keys before i-Window+1 are
// left out, and with Keys those out of the row's set; with Sinks, exp(sink)
// joins the softmax's sum.
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
			j0 := 0
			if a.Window > 0 {
				j0 = max(0, i-a.Window+1)
			}
			s := sc[j0 : i+1]
			m := math.Inf(-1)
			for j := range s {
				if !a.sees(g, i, j0+j) {
					s[j] = math.Inf(-1) // its exponential is 0
					continue
				}
				s[j] = a.capped(float64(dot(qi, k[(j0+j)*ks+g*hd:(j0+j)*ks+(g+1)*hd])) * a.Scale)
				if a.Slopes != nil {
					s[j] += float64(float64(a.Slopes[h]) * float64(j0+j-i))
				}
				m = math.Max(m, s[j])
			}
			if a.Sinks != nil {
				m = math.Max(m, float64(a.Sinks[h]))
			}
			var sum float64
			for j := range s {
				s[j] = math.Exp(s[j] - m)
				sum += s[j]
			}
			if a.Sinks != nil {
				sum += math.Exp(float64(a.Sinks[h]) - m)
			}
			acc := sc[n : n+hd]
			clear(acc)
			for j, p := range s {
				vj := v[(j0+j)*ks+g*hd : (j0+j)*ks+(g+1)*hd]
				for d := range acc {
					acc[d] += float64(p * float64(vj[d]))
				}
			}
			o := out[i*qs+h*hd : i*qs+(h+1)*hd]
			for d := range o {
				o[d] = float32(acc[d] / sum)
			}
		}
	})
}

// bias scales a row of scores of query head h, of keys d, d+1, ...
// positions from the query: float32(a.Scale) times each, as the softmax
// kernel scales, or with a soft-cap SoftCap·tanh(s·Scale/SoftCap) in
// float64 rounded once (TanhCaps); then adds ALiBi's Slopes[h]·(d + j),
// the product and the sum each rounded to float32 (0 without Slopes).
func (a *Attention) bias(row []float32, h, d int) {
	scale, sl := float32(a.Scale), float32(0)
	if a.Slopes != nil {
		sl = a.Slopes[h]
	}
	if a.SoftCap > 0 {
		TanhCaps(row, row, a.Scale, a.SoftCap)
	}
	for j, s := range row {
		if a.SoftCap == 0 {
			s *= scale
		}
		row[j] = s + float32(sl*float32(d+j))
	}
}

// ALiBiSlopes are ggml's ALiBi slopes for heads query heads and the
// maximum bias maxBias (llama.cpp's f_max_alibi_bias, 8 in Bloom): with n
// the largest power of two at most heads, m0 = 2^(-maxBias/n) and m1 =
// 2^(-maxBias/2/n), head h < n gets m0^(h+1) and the others
// m1^(2(h-n)+1), float32 powers as ggml computes them with glibc's powf.
func ALiBiSlopes(heads int, maxBias float32) []float32 {
	n := 1 << int(math.Floor(math.Log2(float64(heads))))
	m0, m1 := libcPowf(2, -maxBias/float32(n)), libcPowf(2, -(maxBias/2)/float32(n))
	s := make([]float32, heads)
	for h := range s {
		if h < n {
			s[h] = libcPowf(m0, float32(h+1))
		} else {
			s[h] = libcPowf(m1, float32(2*(h-n)+1))
		}
	}
	return s
}

// capped is the soft-capped score s (SoftCap·tanh(s/SoftCap)), or s.
func (a *Attention) capped(s float64) float64 {
	if a.SoftCap > 0 {
		return a.SoftCap * math.Tanh(s/a.SoftCap)
	}
	return s
}

// dot returns a·b in float32. len(b) >= len(a).
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s float32
	for i, v := range a {
		s += float32(v * b[i])
	}
	return s
}

// Exact is Forward's definition in float64 over n rows of q and of k and
// v (the keys and values as the cache gives them back): for each query
// row i and head h, Σ_j softmax_j(q·k_j·Scale) v_j over the keys the
// window and Keys leave (the scores soft-capped when SoftCap > 0), with the head's
// sink in the denominator. It is the
// reference the CPU's and the GPU's attention kernels are tested against.
func (a *Attention) Exact(q, k, v []float32, n int) []float64 {
	heads, kvheads, hd := a.Heads, a.KVHeads, a.HeadDim
	out := make([]float64, n*heads*hd)
	s := make([]float64, n)
	for i := range n {
		lo := 0
		if a.Window > 0 {
			lo = max(0, i-a.Window+1)
		}
		for h := range heads {
			g := h / (heads / kvheads)
			m := math.Inf(-1)
			if a.Sinks != nil {
				m = float64(a.Sinks[h])
			}
			for j := lo; j <= i; j++ {
				if !a.sees(g, i, j) {
					continue
				}
				var d float64
				for x := range hd {
					d += float64(float64(q[(i*heads+h)*hd+x]) * float64(k[(j*kvheads+g)*hd+x]))
				}
				s[j] = a.capped(d * a.Scale)
				if a.Slopes != nil {
					s[j] += float64(float64(a.Slopes[h]) * float64(j-i))
				}
				m = max(m, s[j])
			}
			var l float64
			if a.Sinks != nil {
				l = math.Exp(float64(a.Sinks[h]) - m)
			}
			o := out[(i*heads+h)*hd : (i*heads+h+1)*hd]
			for j := lo; j <= i; j++ {
				if !a.sees(g, i, j) {
					continue
				}
				p := math.Exp(s[j] - m)
				l += p
				for x := range o {
					o[x] += float64(p * float64(v[(j*kvheads+g)*hd+x]))
				}
			}
			for x := range o {
				o[x] /= l
			}
		}
	}
	return out
}
