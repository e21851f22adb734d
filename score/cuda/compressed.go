package cuda

import (
	"fmt"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// The GPU's ml.Compressed (DeepSeek-V4), on the device: the compressed
// keys (gated_pool, nn.GatedPool's and nn.OverlapPool's arithmetic, in the
// int8 mode llama.cpp's as the CPU int8 mode's), the indexer's choice of
// blocks (pooledChoice, QSA's) and the attention, its queries and keys
// laid out as nn.CompressedLayout and the flash kernel reading the
// layout's key set, built on the device.

var _ ml.Compressed = (*gpuBackend)(nil)

// CompressKeys is ml.Compressed's, on the device (gatedPool).
func (b *gpuBackend) CompressKeys(dst, k, gate ml.Tensor, ape *ml.Vector, ratio int, overlap bool) {
	d := g(dst)
	n, dim := d.rows, d.cols
	w := dim
	if overlap {
		w = 2 * dim
	}
	gshape("compressor values", g(k), n, w)
	gshape("compressor gates", g(gate), n, w)
	b.do("compressed keys", func() error { return b.gatedPool(d.p, g(k).p, g(gate).p, gv(ape), n, dim, ratio, overlap) })
}

// IndexBlocks is ml.Compressed's, on the device: QSA's choice over the
// compressed keys, q and p turned by the Hadamard matrix of their heads'
// size (pooledChoice).
func (b *gpuBackend) IndexBlocks(q, p, w ml.Tensor, heads, ratio, topK int) ml.KeySet {
	pp := g(p)
	n, dim := pp.rows, pp.cols
	gshape("indexer queries", g(q), n, heads*dim)
	gshape("indexer head weights", g(w), n, heads)
	return b.pooledChoice("compressed keys' indexer", g(q).p, pp.p, g(w).p, n, heads, dim, ratio, topK*ratio, true)
}

// CompressedAttention is ml.Compressed's: Attention over the window laid
// out as nn.CompressedLayout on the device (zeros, then the raw keys, the
// blocks' compressed keys and the queries copied to their rows: copy_cols),
// the placeholders' rows computed and left; the layout's key set built on
// the device too (layout_keys, from the indexer's set where it left it),
// N²/8 bytes for N ≈ 2.25·n rows: 680 MB a layer at 32,768 tokens, which
// the host built and copied until 2026-12-07.
func (b *gpuBackend) CompressedAttention(dst, q, k, c ml.Tensor, ratio, layer int, a *ml.Attn, vis ml.KeySet) {
	o, qq, kk, cc := g(dst), g(q), g(k), g(c)
	n, D, H := o.rows, a.HeadDim, a.Heads
	gshape("compressed attention q", qq, n, H*D)
	gshape("compressed attention keys", kk, n, D)
	gshape("compressed keys", cc, n, D)
	gshape("compressed attention output", o, n, H*D)
	if vis != nil && vis.Groups() != 1 {
		panic(fmt.Sprintf("cuda backend: compressed attention over a key set of %d groups", vis.Groups()))
	}
	l := nn.CompressedRows(n, ratio)
	mark := b.Mark()
	defer b.Release(mark)
	qt, kt, out := g(b.Alloc(l.N, H*D)), g(b.Alloc(l.N, D)), g(b.Alloc(l.N, H*D))
	var set ptr
	b.do("compressed attention's layout", func() error {
		e := b.e
		err := e.dev.memsetD32(kt.p, 0, kt.count())
		if err == nil {
			err = e.dev.memsetD32(qt.p, 0, int64(l.P)*int64(H*D))
		}
		if err == nil {
			err = e.copyCols(kt.p, D, 0, kk.p, D, 0, D, n)
		}
		if err == nil && l.M > 0 { // block b's key at c's row b·ratio
			err = e.copyCols(kt.p+ptr(4*int64(l.R)*int64(D)), D, 0, cc.p, ratio*D, 0, D, l.M)
		}
		if err == nil {
			err = e.copyCols(qt.p+ptr(4*int64(l.P)*int64(H*D)), H*D, 0, qq.p, H*D, 0, H*D, n)
		}
		if err == nil {
			set, err = b.layoutKeys(l, n, ratio, a.Window, vis)
		}
		return err
	})
	at := *a
	at.Window, at.Keys = 0, nil
	b.attention(out, qt, kt, kt, layer, &at, false, set)
	b.do("compressed attention's output", func() error {
		return b.e.copyCols(o.p, H*D, 0, out.p+ptr(4*int64(l.P)*int64(H*D)), H*D, 0, H*D, n)
	})
}

// layoutKeys returns scratch memory holding l's key set (layout_keys) for
// a window of n queries: the raw keys of each query's window and the
// compressed keys of its whole blocks that vis holds (all where vis is
// nil); on the engine's thread.
func (b *gpuBackend) layoutKeys(l *nn.CompressedLayout, n, ratio, window int, vis ml.KeySet) (ptr, error) {
	var vp ptr
	if vis != nil {
		var err error
		if vp, err = b.deviceSet(vis, n); err != nil {
			return 0, err
		}
	}
	words := int64(l.N) * int64((l.N+63)/64)
	set, err := b.scratchBytes(8 * words)
	if err != nil {
		return 0, err
	}
	return set, b.e.launch("layout_keys", gridFor(words), block256, set, vp, l.N, l.P, l.R, window, ratio, (n+63)/64)
}
