package model

import (
	"fmt"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// The CPU's ml.Latent operations (multi-head latent attention).

func (b *cpuBackend) Columns(dst ml.Tensor, dc int, x ml.Tensor, xc, width int) {
	d, s := ct(dst), ct(x)
	if d.rows != s.rows || dc < 0 || xc < 0 || width < 0 || dc+width > d.cols || xc+width > s.cols {
		panic(fmt.Sprintf("cpu backend: columns [%d, %d) of %d×%d into [%d, %d) of %d×%d",
			xc, xc+width, s.rows, s.cols, dc, dc+width, d.rows, d.cols))
	}
	b.parallelRows(d.rows, width, 1, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			copy(d.d[r*d.cols+dc:r*d.cols+dc+width], s.d[r*s.cols+xc:r*s.cols+xc+width])
		}
	})
}

// HeadLinear gathers each head's columns into one matrix, runs the head's
// nn.Linear over it and scatters the result.
func (b *cpuBackend) HeadLinear(dst, x ml.Tensor, w *ml.Matrix) {
	d, s := ct(dst), ct(x)
	heads, in, out := max(w.Experts, 1), w.In, w.Out
	n := s.rows
	shape(w.Name+" input", s, n, heads*in)
	shape(w.Name+" output", d, n, heads*out)
	ls := w.Impl.([]*nn.Linear)
	mark := b.c.Mark()
	xh, yh := b.c.Alloc(n*in), b.c.Alloc(n*out)
	for h := range heads {
		for r := range n {
			copy(xh[r*in:(r+1)*in], s.d[r*heads*in+h*in:r*heads*in+(h+1)*in])
		}
		ls[h].Forward(b.c, yh, xh, n)
		for r := range n {
			copy(d.d[r*heads*out+h*out:r*heads*out+(h+1)*out], yh[r*out:(r+1)*out])
		}
	}
	b.c.Release(mark)
}

// LatentAttention runs nn.Attention with the keys as values (each output
// head then holds HeadDim values, of which it keeps the first valueDim):
// the flash path when the key size is a multiple of 16, with neither window
// nor sinks, else the plain loop; in the int8 modes with an f16 cache
// llama.cpp's flash attention with values of valueDim (ggml's DV).
func (b *cpuBackend) LatentAttention(dst, q, k ml.Tensor, layer int, a *ml.Attn, valueDim int) {
	o, qq, kk := ct(dst), ct(q), ct(k)
	n := qq.rows
	hd, vd := a.HeadDim, valueDim
	if vd <= 0 || vd > hd {
		panic(fmt.Sprintf("cpu backend: latent attention values of %d of %d key elements", vd, hd))
	}
	shape("latent attention q", qq, n, a.Heads*hd)
	shape("latent attention k", kk, n, a.KVHeads*hd)
	shape("latent attention output", o, n, a.Heads*vd)
	at := b.nnAttention(a)
	at.ValueDim = vd
	at.KeyBlocks, at.KeyType = b.keyBlocks(kk.d[:n*a.KVHeads*hd], n, a)
	b.storeKeys(kk.d, n, a.KVHeads, hd)
	mark := b.c.Mark()
	full := b.c.Alloc(n * a.Heads * hd)
	at.Forward(b.c, full, qq.d, kk.d, kk.d, n)
	for r := range n * a.Heads {
		copy(o.d[r*vd:(r+1)*vd], full[r*hd:r*hd+vd])
	}
	b.c.Release(mark)
}

// storeKeys passes one layer's keys (tokens, heads, headDim) through the
// KV cache's key format: the cache a latent attention layer keeps.
func (b *cpuBackend) storeKeys(k []float32, n, heads, hd int) {
	switch s := b.c.KV.(type) {
	case nil:
	case *kvStore:
		if s.format.Name != "f32" {
			s.kb = roundTrip(s.c, s.format.K, s.kb, k, n, heads, hd)
		}
	default:
		panic(fmt.Sprintf("cpu backend: KV store %T cannot hold keys alone", s))
	}
}

// The CPU's ml.Sparse operations (DeepSeek's sparse attention).

// LayerNorm is ml.LayerNormer's: in the int8 modes ggml's NORM, MUL and ADD
// (nn.GGMLLayerNorm).
func (b *cpuBackend) LayerNorm(dst, x ml.Tensor, w, bias *ml.Vector, eps float64) {
	d, s := ct(dst), ct(x)
	shape("layer norm output", d, s.rows, s.cols)
	var bv []float32
	if bias != nil {
		bv = bias.V
	}
	c := s.cols
	unit := max(1, len(w.V)/c) // rows per cycle of the weights (a norm per head)
	b.parallelRows(s.rows, c, unit, func(lo, hi int) {
		o, x := d.d[lo*c:hi*c], s.d[lo*c:hi*c]
		if b.c.LlamaCPP {
			nn.GGMLLayerNorm(o, x, w.V, bv, float32(eps), hi-lo, c, b.c.GGMLAVX2)
			return
		}
		nn.LayerNorm(o, x, w.V, bv, eps, hi-lo, c)
	})
}

// IndexKeys rotates q and k by the Hadamard matrix (with rotate) and
// passes k through the KV cache's key format, as llama.cpp stores the
// indexer's keys: neither changes the scores but by rounding, which decides
// near ties.
func (b *cpuBackend) IndexKeys(q, k, w ml.Tensor, heads, topK int, rotate bool) ml.KeySet {
	if err := ml.IndexShapes(q, k, w, heads); err != nil {
		panic("cpu backend: " + err.Error())
	}
	qq, kk, ww := ct(q), ct(k), ct(w)
	n, dim := qq.rows, kk.cols
	mark := b.c.Mark()
	defer b.c.Release(mark)
	qr, kr := qq.d[:n*heads*dim], b.c.Alloc(n*dim)
	if rotate {
		rot := nn.HadamardMatrix(dim)
		qr = b.c.Alloc(n * heads * dim)
		rot.Forward(b.c, qr, qq.d, n*heads)
		rot.Forward(b.c, kr, kk.d, n)
	} else {
		copy(kr, kk.d[:n*dim])
	}
	b.storeKeys(kr, n, 1, dim)
	return nn.LightningTopK(b.c, qr, kr, ww.d, n, heads, dim, topK)
}

// BlockKeys passes k through the KV cache's key format, as llama.cpp
// stores MSA's indexer keys, and scores them as llama.cpp does in the int8
// modes (ggml's float32 products), by Gemm otherwise.
func (b *cpuBackend) BlockKeys(q, k ml.Tensor, heads, block, topK, local int) ml.KeySet {
	qq, kk := ct(q), ct(k)
	n, dim := qq.rows, kk.cols
	shape("MSA indexer keys", kk, n, dim)
	shape("MSA indexer queries", qq, n, heads*dim)
	mark := b.c.Mark()
	defer b.c.Release(mark)
	return nn.MSABlocks(b.c, qq.d[:n*heads*dim], b.cachedKeys(kk), n, heads, dim, block, topK, local, b.c.LlamaCPP)
}

// cachedKeys returns a copy of k (one head a row), from b's scratch memory,
// rounded through the KV cache's key format, as llama.cpp stores an
// indexer's keys.
func (b *cpuBackend) cachedKeys(k *cpuT) []float32 {
	kr := b.c.Alloc(k.rows * k.cols)
	copy(kr, k.d[:len(kr)])
	b.storeKeys(kr, k.rows, 1, k.cols)
	return kr
}

// PoolKeys is ml.PooledSparse's: the keys (and gates) rounded through the
// KV cache's format, then nn.QSAPool (nn.GatedPool, with llama.cpp's
// arithmetic in the int8 modes).
func (b *cpuBackend) PoolKeys(dst, k, g ml.Tensor, ape *ml.Vector, block int) {
	d, kk := ct(dst), ct(k)
	n, dim := kk.rows, kk.cols
	shape("pooled keys", d, n, dim)
	mark := b.c.Mark()
	defer b.c.Release(mark)
	if g == nil {
		nn.QSAPool(d.d[:n*dim], b.cachedKeys(kk), n, dim, block)
		return
	}
	gg := ct(g)
	shape("pool gates", gg, n, dim)
	nn.GatedPool(d.d[:n*dim], b.cachedKeys(kk), b.cachedKeys(gg), ape.V, n, dim, block, b.c.LlamaCPP, b.c.GGMLAVX2)
}

// PooledKeys is ml.PooledSparse's: the pooled keys rounded through the KV
// cache's format, then nn.QSABlocks (ggml's products in the int8 modes).
func (b *cpuBackend) PooledKeys(q, p, w ml.Tensor, heads, block, topK int) ml.KeySet {
	qq, pp := ct(q), ct(p)
	n, dim := pp.rows, pp.cols
	shape("pooled keys' queries", qq, n, heads*dim)
	var wv []float32
	if w != nil {
		ww := ct(w)
		shape("pooled keys' head weights", ww, n, heads)
		wv = ww.d[:n*heads]
	}
	mark := b.c.Mark()
	defer b.c.Release(mark)
	return nn.QSABlocks(b.c, qq.d[:n*heads*dim], b.cachedKeys(pp), wv, n, heads, dim, block, topK, b.c.LlamaCPP)
}

// CompressKeys is ml.Compressed's: nn.GatedPool or nn.OverlapPool (with
// llama.cpp's arithmetic in the int8 modes); llama.cpp keeps the
// compressors' inputs in float32 state, not in the KV cache.
func (b *cpuBackend) CompressKeys(dst, k, g ml.Tensor, ape *ml.Vector, ratio int, overlap bool) {
	d, kk, gg := ct(dst), ct(k), ct(g)
	n, dim := d.rows, d.cols
	w := dim
	if overlap {
		w = 2 * dim
	}
	shape("compressor values", kk, n, w)
	shape("compressor gates", gg, n, w)
	if overlap {
		nn.OverlapPool(d.d[:n*dim], kk.d[:n*w], gg.d[:n*w], ape.V, n, dim, ratio, b.c.LlamaCPP, b.c.GGMLAVX2)
		return
	}
	nn.GatedPool(d.d[:n*dim], kk.d[:n*w], gg.d[:n*w], ape.V, n, dim, ratio, b.c.LlamaCPP, b.c.GGMLAVX2)
}

// IndexBlocks is ml.Compressed's: q and p turned by the Hadamard matrix
// of their heads' size as ggml-cpu's FWHT turns them (llama.cpp flags
// DeepSeek-V4's rotation, not DSA's), p rounded through the KV cache's
// format, then
// nn.QSABlocks (ggml's products in the int8 modes).
func (b *cpuBackend) IndexBlocks(q, p, w ml.Tensor, heads, ratio, topK int) ml.KeySet {
	qq, pp, ww := ct(q), ct(p), ct(w)
	n, dim := pp.rows, pp.cols
	shape("indexer queries", qq, n, heads*dim)
	shape("indexer head weights", ww, n, heads)
	mark := b.c.Mark()
	defer b.c.Release(mark)
	qr, pr := b.c.Alloc(n*heads*dim), b.c.Alloc(n*dim)
	nn.FWHT(b.c, qr, qq.d[:n*heads*dim], n*heads, dim)
	nn.FWHT(b.c, pr, pp.d[:n*dim], n, dim)
	b.storeKeys(pr, n, 1, dim)
	return nn.QSABlocks(b.c, qr, pr, ww.d[:n*heads], n, heads, dim, ratio, topK*ratio, b.c.LlamaCPP)
}

// CompressedAttention is ml.Compressed's: one attention over the window
// laid out as nn.CompressedLayout, the keys in llama.cpp's order and tiles.
func (b *cpuBackend) CompressedAttention(dst, q, k, c ml.Tensor, ratio, layer int, a *ml.Attn, vis ml.KeySet) {
	o, qq, kk, cc := ct(dst), ct(q), ct(k), ct(c)
	n, D, H := qq.rows, a.HeadDim, a.Heads
	shape("compressed attention q", qq, n, H*D)
	shape("compressed attention keys", kk, n, D)
	shape("compressed keys", cc, n, D)
	shape("compressed attention output", o, n, H*D)
	l := nn.NewCompressedLayout(b.c, n, ratio, a.Window, hostKeys(vis))
	mark := b.c.Mark()
	defer b.c.Release(mark)
	keys, qs, out := b.c.Alloc(l.N*D), b.c.Alloc(l.N*H*D), b.c.Alloc(l.N*H*D)
	l.Place(qs, keys, qq.d, kk.d, cc.d, H, D, ratio)
	// llama.cpp's turn before a quantized cache, the values being the
	// keys: q and the keys by kr, the output back.
	kr, _, _ := b.kvTurns(a)
	if kr != 0 {
		nn.FWHT(b.c, qs, qs, len(qs)/kr, kr)
		nn.FWHT(b.c, keys, keys, len(keys)/kr, kr)
	}
	at := b.nnAttention(a)
	at.KeyBlocks, at.KeyType = b.keyBlocks(keys, l.N, a)
	if layer >= 0 {
		b.c.StoreKV(layer, keys, keys, l.N, 1, D)
	}
	at.Window, at.Keys, at.Placeholders = 0, l.Keys, l.P
	at.Forward(b.c, out, qs, keys, keys, l.N)
	got := out[l.P*H*D:]
	if kr != 0 {
		nn.FWHT(b.c, o.d[:len(got)], got, len(got)/kr, kr)
		return
	}
	copy(o.d, got)
}
