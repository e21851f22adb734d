package cuda

import (
	"fmt"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// The GPU's sparse attention (ml.Sparse: DeepSeek-V3.2's and GLM-5's DSA;
// ml.BlockSparse: MiniMax-M3's MSA; ml.PooledSparse: Qwen3.8's QSA and
// GLM5-Next's k-pool indexer) and
// n-gram gate (ml.PLE). The attention runs on the device: every attention
// kernel reads a copy of the chosen keys' set (nn.KeySet.Words) and masks
// the keys a query row leaves out, skipping whole the key tiles (flash) or
// chunks (plain, latent) no row of it reads. DSA's scores are the device's too (IndexKeys:
// kernels/sparse.cu), and so is each row's top_k where equal scores leave
// no choice (lid_topk), read back as the rows' bitmaps (n/8 bytes a row,
// not the 4n of its scores); the rows where they do are chosen on the host
// from their scores read back, ties broken as ggml's TOP_K. The
// blocks of MSA and QSA are chosen on the host by the CPU's own functions
// (nn.MSABlocks, nn.QSAPool, nn.GatedPool, nn.QSABlocks) over the device's indexer
// outputs read back, n/block scores per row. The keys are rounded through
// the KV cache's key format, as llama.cpp stores them; in the int8 mode the
// host computes with the CPU int8 mode's arithmetic (ggml's float32
// products, the AVX-512 build's order), so a row's keys are the CPU's for
// the same inputs, ties broken as ggml's TOP_K. So is PLEGate, one value
// per token and stream.

var (
	_ ml.Sparse       = (*gpuBackend)(nil)
	_ ml.BlockSparse  = (*gpuBackend)(nil)
	_ ml.PooledSparse = (*gpuBackend)(nil)
	_ ml.PLE          = (*gpuBackend)(nil)
)

func init() {
	kernelModules["sparse"] = []string{"lid_scores", "lid_topk"}
}

// hostContext is the nn.Context of the host's share, in the int8 mode
// computing as the CPU's int8 mode does.
func (b *gpuBackend) hostContext() *nn.Context {
	if b.host == nil {
		b.host = nn.NewContext(b.threads)
		b.host.Int8, b.host.LlamaCPP = b.prec.Int8, b.prec.Int8
	}
	return b.host
}

// roundKeys returns scratch memory holding the n keys of dim values at x
// (one head a row) passed through the KV cache's key format (kv_store,
// kv_decode), as llama.cpp stores an indexer's keys; on the engine's
// thread.
func (b *gpuBackend) roundKeys(x ptr, n, dim int) (ptr, error) {
	kt, err := b.e.newKV(b.kvK, int64(n), dim)
	if err != nil {
		return 0, err
	}
	defer b.e.freeKV(kt)
	kd, err := b.scratchBytes(4 * int64(n) * int64(dim))
	if err == nil {
		err = b.e.kvStore(kt, x, n, 1, dim)
	}
	if err == nil {
		err = b.e.kvDecode(kd, kt, n, 1)
	}
	return kd, err
}

// cachedKeys reads k (one head a row) from the device, rounded through the
// KV cache's key format (roundKeys).
func (b *gpuBackend) cachedKeys(k *gt) []float32 {
	out := make([]float32, k.count())
	b.do("indexer keys", func() error {
		mark := b.Mark()
		defer b.Release(mark)
		kd, err := b.roundKeys(k.p, k.rows, k.cols)
		if err == nil {
			err = download(b.e, out, kd)
		}
		return err
	})
	return out
}

// lidProducts bounds the indexer's products a block of query rows holds
// at once: rows·heads·n float32s (256 MiB). A variable for the tests.
var lidProducts = 64 << 20

// IndexKeys is ml.Sparse's: the scores on the device, q and k
// Hadamard-rotated with rotate (a product with nn.HadamardMatrix), k
// rounded through the cache's key format (roundKeys), then per
// block of query rows one GEMM of every head's q·k, lid_scores'
// relu-weighted sums over the heads and lid_topk's choice of each row's
// top_k, read back into the set's bitmap; a row lid_topk leaves to the
// host (equal scores at the last place, a NaN) is chosen there from its
// scores read back (nn.AddTopKeys: ggml's TOP_K's ties). Rows below top_k
// read every key.
func (b *gpuBackend) IndexKeys(q, k, w ml.Tensor, heads, topK int, rotate bool) *nn.KeySet {
	if err := ml.IndexShapes(q, k, w, heads); err != nil {
		panic("cuda backend: " + err.Error())
	}
	qq, kk, ww := g(q), g(k), g(w)
	n, dim := qq.rows, kk.cols
	set := nn.NewKeySet(n)
	for i := range min(n, topK) {
		for j := 0; j <= i; j++ {
			set.Add(i, j)
		}
	}
	if n <= topK {
		return set
	}
	b.do("lightning indexer", func() (err error) {
		e := b.e
		mark := b.Mark()
		defer b.Release(mark)
		f32s := func(count int) (p ptr) { // scratch, once err is nil
			if err == nil {
				p, err = b.scratchBytes(4 * int64(count))
			}
			return p
		}
		qp, kp := qq.p, kk.p
		if rotate {
			var h ptr
			if h, err = scratchCopy(b, nn.HadamardMatrix(dim).Data); err != nil {
				return err
			}
			qr, kr := f32s(n*heads*dim), f32s(n*dim)
			if err == nil {
				err = e.gemm(qr, f32, dim, qp, dim, h, f32, n*heads, dim, dim, 0)
			}
			if err == nil {
				err = e.gemm(kr, f32, dim, kp, dim, h, f32, n, dim, dim, 0)
			}
			qp, kp = qr, kr
		}
		rows := min(n-topK, max(1, lidProducts/(heads*n)))
		words := (n + 63) / 64
		qk, sc, wd, fl := f32s(rows*heads*n), f32s(rows*n), f32s(2*rows*words), f32s(rows) // wd: uint64 words
		var kd ptr
		if err == nil {
			kd, err = b.roundKeys(kp, n, dim)
		}
		if err != nil {
			return err
		}
		bits, flags, scores, order := set.Words(), make([]int32, rows), make([]float32, n), make([]int32, n)
		for r0 := topK; r0 < n; r0 += rows {
			r1 := min(n, r0+rows)
			m := r1 - r0
			err := e.gemm(qk, f32, r1, qp+ptr(4*int64(r0)*int64(heads*dim)), dim, kd, f32, m*heads, dim, r1, 0)
			if err == nil {
				err = e.launch("lid_scores", gridFor(int64(m)*int64(r1)), block256, sc, qk, ww.p, m, heads, r1, r0)
			}
			if err == nil {
				err = e.topKeys(wd, fl, sc, m, r1, words, r0, topK)
			}
			if err == nil {
				err = download(e, bits[r0*words:r1*words], wd)
			}
			if err == nil {
				err = download(e, flags[:m], fl)
			}
			for r := 0; r < m && err == nil; r++ {
				if flags[r] != 0 {
					if err = download(e, scores[:r1], sc+ptr(4*int64(r)*int64(r1))); err == nil {
						nn.AddTopKeys(set, r0+r, scores[:r1], order, topK)
					}
				}
			}
			if err != nil {
				return fmt.Errorf("indexer rows %d to %d: %w", r0, r1-1, err)
			}
		}
		return nil
	})
	return set
}

// topKeys launches lid_topk: the bitmaps (rows of nwords words at words)
// of the top_k keys of the rows rows of scores at sc (rows of ld) from
// window row r0, and each row's flag (int32s at flags) of a choice left
// to the host.
func (e *Engine) topKeys(words, flags, sc ptr, rows, ld, nwords, r0, topK int) error {
	return e.launch("lid_topk", dim3{uint32(rows), 1, 1}, block256, words, flags, sc, rows, ld, nwords, r0, topK)
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

// PoolKeys is ml.PooledSparse's: nn.QSAPool (with gates nn.GatedPool) of
// the keys rounded through the key format, on the host.
func (b *gpuBackend) PoolKeys(dst, k, gt ml.Tensor, ape *ml.Vector, block int) {
	d, kk := g(dst), g(k)
	gshape("pooled keys", d, kk.rows, kk.cols)
	out := make([]float32, d.count())
	if gt == nil {
		nn.QSAPool(out, b.cachedKeys(kk), kk.rows, kk.cols, block)
	} else {
		gg := g(gt)
		gshape("pool gates", gg, kk.rows, kk.cols)
		nn.GatedPool(out, b.cachedKeys(kk), b.cachedKeys(gg), ape.V, kk.rows, kk.cols, block, b.prec.Int8, b.hostContext().GGMLAVX2)
	}
	b.Write(dst, out)
}

// PooledKeys is ml.PooledSparse's: nn.QSABlocks over the pooled keys
// rounded through the key format.
func (b *gpuBackend) PooledKeys(q, p, w ml.Tensor, heads, block, topK int) *nn.KeySet {
	qq, pp := g(q), g(p)
	n, dim := pp.rows, pp.cols
	gshape("pooled keys' queries", qq, n, heads*dim)
	var wv []float32
	if w != nil {
		gshape("pooled keys' head weights", g(w), n, heads)
		wv = b.Read(w)
	}
	return nn.QSABlocks(b.hostContext(), b.Read(q), b.cachedKeys(pp), wv, n, heads, dim, block, topK, b.prec.Int8)
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

// keySet copies a.Keys's bitmap, of a window of n rows, into scratch
// memory and returns it with its group count: 1 (every KV head's) or one
// per KV head.
func (b *gpuBackend) keySet(a *ml.Attn, n int) (ptr, int, error) {
	gr, w := a.Keys.Groups(), a.Keys.Words()
	if gr != 1 && gr != a.KVHeads {
		return 0, 0, fmt.Errorf("cuda: a key set of %d groups for %d KV heads", gr, a.KVHeads)
	}
	if want := gr * n * ((n + 63) / 64); len(w) != want {
		return 0, 0, fmt.Errorf("cuda: a key set of %d words for %d rows, want %d", len(w), n, want)
	}
	p, err := scratchCopy(b, w)
	return p, gr, err
}
