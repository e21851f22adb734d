package cuda

import (
	"fmt"

	"ppl.dev/score/kvcache"
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// The GPU's sparse attention (ml.Sparse: DeepSeek-V3.2's and GLM-5's DSA;
// ml.BlockSparse: MiniMax-M3's MSA; ml.PooledSparse: Qwen3.8's QSA) and
// n-gram gate (ml.PLE). The attention runs on the device: the plain
// kernels (attn_simple, attn_latent) read a copy of the chosen keys' set
// (nn.KeySet.Words) and skip the keys, and the chunks of 128 keys, a query
// row leaves out. The choice of keys runs on the host, by the CPU's own
// functions over the device's indexer queries and keys read back (the keys
// rounded through the KV cache's key format, as llama.cpp stores them):
// nn.LightningTopK, nn.MSABlocks, nn.QSAPool and nn.QSABlocks, in the
// int8 mode with the CPU int8 mode's arithmetic (ggml's float32 products,
// the AVX-512 build's order), so a row's keys are the CPU's for the same
// inputs, ties broken as ggml's TOP_K. So is PLEGate, one value per token
// and stream. Plainly right first: the host's scores cost O(n²·heads·dim)
// per layer (DSA's 64 heads of 128 at 4096 tokens: 68 GFLOP and 128 MiB
// of queries read back), which a device indexer would save.

var (
	_ ml.Sparse       = (*gpuBackend)(nil)
	_ ml.BlockSparse  = (*gpuBackend)(nil)
	_ ml.PooledSparse = (*gpuBackend)(nil)
	_ ml.PLE          = (*gpuBackend)(nil)
)

// hostContext is the nn.Context of the host's share, in the int8 mode
// computing as the CPU's int8 mode does.
func (b *gpuBackend) hostContext() *nn.Context {
	if b.host == nil {
		b.host = nn.NewContext(b.threads)
		b.host.Int8, b.host.LlamaCPP = b.prec.Int8, b.prec.Int8
	}
	return b.host
}

// cachedKeys reads k (one head a row) from the device, rounded through the
// KV cache's key format.
func (b *gpuBackend) cachedKeys(k *gt) []float32 {
	x := b.Read(k)
	var blk kvcache.Block
	kvcache.RoundTrip(b.keys, &blk, x, k.rows, 1, k.cols)
	return x
}

// IndexKeys is ml.Sparse's: q and k Hadamard-rotated with rotate, k
// rounded through the key format, then nn.LightningTopK, as the CPU does.
func (b *gpuBackend) IndexKeys(q, k, w ml.Tensor, heads, topK int, rotate bool) *nn.KeySet {
	if err := ml.IndexShapes(q, k, w, heads); err != nil {
		panic("cuda backend: " + err.Error())
	}
	n, dim := q.Rows(), k.Cols()
	c := b.hostContext()
	qh, kh, wh := b.Read(q), b.Read(k), b.Read(w)
	if rotate {
		rot := nn.HadamardMatrix(dim)
		qr, kr := make([]float32, len(qh)), make([]float32, len(kh))
		rot.Forward(c, qr, qh, n*heads)
		rot.Forward(c, kr, kh, n)
		qh, kh = qr, kr
	}
	var blk kvcache.Block
	kvcache.RoundTrip(b.keys, &blk, kh, n, 1, dim)
	return nn.LightningTopK(c, qh, kh, wh, n, heads, dim, topK)
}

// BlockKeys is ml.BlockSparse's: nn.MSABlocks over the keys rounded
// through the key format.
func (b *gpuBackend) BlockKeys(q, k ml.Tensor, heads, block, topK, local int) *nn.KeySet {
	qq, kk := g(q), g(k)
	n, dim := qq.rows, kk.cols
	gshape("MSA indexer keys", kk, n, dim)
	gshape("MSA indexer queries", qq, n, heads*dim)
	return nn.MSABlocks(b.hostContext(), b.Read(q), b.cachedKeys(kk), n, heads, dim, block, topK, local, b.prec.Int8)
}

// PoolKeys is ml.PooledSparse's: nn.QSAPool of the keys rounded through
// the key format.
func (b *gpuBackend) PoolKeys(dst, k ml.Tensor, block int) {
	d, kk := g(dst), g(k)
	gshape("QSA pooled keys", d, kk.rows, kk.cols)
	out := make([]float32, d.count())
	nn.QSAPool(out, b.cachedKeys(kk), kk.rows, kk.cols, block)
	b.Write(dst, out)
}

// PooledKeys is ml.PooledSparse's: nn.QSABlocks over the pooled keys
// rounded through the key format.
func (b *gpuBackend) PooledKeys(q, p ml.Tensor, heads, block, topK int) *nn.KeySet {
	qq, pp := g(q), g(p)
	n, dim := pp.rows, pp.cols
	gshape("QSA indexer queries", qq, n, heads*dim)
	return nn.QSABlocks(b.hostContext(), b.Read(q), b.cachedKeys(pp), n, heads, dim, block, topK, b.prec.Int8)
}

// PLEGate is ml.PLE's, on the host: nn.PLEGate, in the int8 mode
// nn.GGMLPLEGate (llama.cpp's roundings, as the CPU's int8 mode).
func (b *gpuBackend) PLEGate(dst, key, query ml.Tensor, scale float64) {
	d, k, q := g(dst), g(key), g(query)
	gshape("n-gram embeddings' query", q, k.rows, k.cols)
	if d.rows != k.rows || d.cols == 0 || k.cols%d.cols != 0 {
		panic(fmt.Sprintf("cuda backend: n-gram gate of %d×%d from %d×%d keys", d.rows, d.cols, k.rows, k.cols))
	}
	kh, qh, out := b.Read(key), b.Read(query), make([]float32, d.count())
	b.hostContext().Parallel(d.rows, func(_, lo, hi int) {
		for t := lo; t < hi; t++ {
			o, kr, qr := out[t*d.cols:(t+1)*d.cols], kh[t*k.cols:(t+1)*k.cols], qh[t*k.cols:(t+1)*k.cols]
			if b.prec.Int8 {
				nn.GGMLPLEGate(o, kr, qr, float32(scale))
			} else {
				nn.PLEGate(o, kr, qr, scale)
			}
		}
	})
	b.Write(dst, out)
}

// keyGroups is a's key set's group count: 1 (every KV head's) or one per
// KV head.
func keyGroups(a *ml.Attn) int {
	gr := a.Keys.Groups()
	if gr != 1 && gr != a.KVHeads {
		panic(fmt.Sprintf("cuda backend: a key set of %d groups for %d KV heads", gr, a.KVHeads))
	}
	return gr
}

// keySet copies set's bitmap, of windows of n rows, into scratch memory.
func (b *gpuBackend) keySet(set *nn.KeySet, n int) (ptr, error) {
	w := set.Words()
	if want := set.Groups() * n * ((n + 63) / 64); len(w) != want {
		return 0, fmt.Errorf("cuda: a key set of %d words for %d rows, want %d", len(w), n, want)
	}
	p, err := b.scratchBytes(8 * int64(len(w)))
	if err != nil {
		return 0, err
	}
	return p, upload(b.e, p, w)
}
