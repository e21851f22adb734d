package cuda

import (
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// The GPU's ml.Compressed (DeepSeek-V4): the compressed keys and the
// indexer's choice of blocks on the host, by the CPU's own functions
// (nn.GatedPool, nn.OverlapPool, nn.QSABlocks) over the device's
// projections read back, in the int8 mode with the CPU int8 mode's
// arithmetic; the attention on the device, its queries and keys laid out
// on the host as nn.CompressedLayout and the flash kernel reading its key
// set. Three round trips a compressed layer: a first version, for a device
// kernel of the pools and of the layout to replace.

var _ ml.Compressed = (*gpuBackend)(nil)

// CompressKeys is ml.Compressed's, on the host.
func (b *gpuBackend) CompressKeys(dst, k, gate ml.Tensor, ape *ml.Vector, ratio int, overlap bool) {
	d := g(dst)
	n, dim := d.rows, d.cols
	w := dim
	if overlap {
		w = 2 * dim
	}
	gshape("compressor values", g(k), n, w)
	gshape("compressor gates", g(gate), n, w)
	out, kh, gh := make([]float32, n*dim), b.Read(k), b.Read(gate)
	if overlap {
		nn.OverlapPool(out, kh, gh, ape.V, n, dim, ratio, b.prec.Int8, b.hostContext().GGMLAVX2)
	} else {
		nn.GatedPool(out, kh, gh, ape.V, n, dim, ratio, b.prec.Int8, b.hostContext().GGMLAVX2)
	}
	b.Write(dst, out)
}

// IndexBlocks is ml.Compressed's: q and p turned by the Hadamard matrix of
// their heads' size on the host, p rounded through the key format on the
// device, then nn.QSABlocks.
func (b *gpuBackend) IndexBlocks(q, p, w ml.Tensor, heads, ratio, topK int) *nn.KeySet {
	pp := g(p)
	n, dim := pp.rows, pp.cols
	gshape("indexer queries", g(q), n, heads*dim)
	gshape("indexer head weights", g(w), n, heads)
	c := b.hostContext()
	h := nn.HadamardMatrix(dim)
	qr, pr := make([]float32, n*heads*dim), make([]float32, n*dim)
	h.Forward(c, qr, b.Read(q), n*heads)
	h.Forward(c, pr, b.Read(p), n)
	mark := b.Mark()
	defer b.Release(mark)
	pt := b.Alloc(n, dim)
	b.Write(pt, pr)
	return nn.QSABlocks(c, qr, b.cachedKeys(g(pt)), b.Read(w), n, heads, dim, ratio, topK*ratio, b.prec.Int8)
}

// CompressedAttention is ml.Compressed's: Attention over the window laid
// out as nn.CompressedLayout (the placeholders' rows computed and left).
func (b *gpuBackend) CompressedAttention(dst, q, k, c ml.Tensor, ratio, layer int, a *ml.Attn, vis *nn.KeySet) {
	o := g(dst)
	n, D, H := o.rows, a.HeadDim, a.Heads
	gshape("compressed attention q", g(q), n, H*D)
	gshape("compressed attention keys", g(k), n, D)
	gshape("compressed keys", g(c), n, D)
	gshape("compressed attention output", o, n, H*D)
	l := nn.NewCompressedLayout(n, ratio, a.Window, vis)
	qs, keys := make([]float32, l.N*H*D), make([]float32, l.N*D)
	l.Place(qs, keys, b.Read(q), b.Read(k), b.Read(c), H, D, ratio)
	mark := b.Mark()
	defer b.Release(mark)
	qt, kt, out := b.Alloc(l.N, H*D), b.Alloc(l.N, D), b.Alloc(l.N, H*D)
	b.Write(qt, qs)
	b.Write(kt, keys)
	at := *a
	at.Window, at.Keys = 0, l.Keys
	b.Attention(out, qt, kt, kt, layer, &at)
	b.Write(dst, b.Read(out)[l.P*H*D:])
}
