package cuda

import (
	"errors"
	"fmt"
	"math"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// The GPU's sparse attention (ml.Sparse: DeepSeek-V3.2's and GLM-5's DSA;
// ml.BlockSparse: MiniMax-M3's MSA; ml.PooledSparse: Qwen3.8's QSA and
// GLM5-Next's k-pool indexer) and n-gram gate (ml.PLE). The attention
// runs on the device: every attention kernel reads the chosen keys' set
// where the indexer left it (deviceKeys, in nn.KeySet.Words' layout) and
// masks the keys a query row leaves out, skipping whole the key tiles
// (flash) or chunks (plain, latent) no row of it reads. The indexers'
// scores are the device's too (kernels/sparse.cu: a GEMM of the
// indexer's queries with its keys per chunk of rows, then DSA's
// relu-weighted sums over the heads, MSA's block maxima, QSA's weighted
// sums over pooled keys), and so is each row's choice (top_keys) but for
// the rows whose last place more equal scores contend for than it holds:
// the host reads back a flag a row and chooses those rows from their
// scores read back, ties broken as ggml's TOP_K (nn.TopKeys). The
// products are cuBLAS's float32 ones, so near ties may go another way
// than the CPU's (ggml's products in the int8 mode); every sum after them
// is the CPU's. The keys are rounded
// through the KV cache's key format, as llama.cpp stores them. The pools
// are the device's (qsa_pool; gated_pool, GLM5-Next's and DeepSeek-V4's,
// in the int8 mode with llama.cpp's softmax: ggml_v_expf in the CPU int8
// mode's build's lanes, glibc's expf past them), and so is PLEGate's gate
// (ple_gate), in the int8 mode with the CPU int8 mode's arithmetic.

var (
	_ ml.Sparse       = (*gpuBackend)(nil)
	_ ml.BlockSparse  = (*gpuBackend)(nil)
	_ ml.PooledSparse = (*gpuBackend)(nil)
	_ ml.PLE          = (*gpuBackend)(nil)
)

func init() {
	kernelModules["sparse"] = []string{"lid_scores", "top_keys", "msa_scores", "qsa_scores", "block_keys", "qsa_pool", "gated_pool", "ple_gate", "layout_keys"}
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

// indexerProducts bounds the products a chunk of a sparse indexer's query
// rows holds at once (rows·heads·n float32s for DSA and MSA, rows·heads·
// n/block for QSA): 256 MiB. A variable for the tests.
var indexerProducts = 64 << 20

// IndexKeys is ml.Sparse's, on the device: chooseBlocks with blocks of
// one key, q and k Hadamard-rotated with rotate, a chunk's scores one GEMM
// of every head's q·k and lid_scores' relu-weighted sums over the heads.
// Rows below top_k read every key.
func (b *gpuBackend) IndexKeys(q, k, w ml.Tensor, heads, topK int, rotate bool) ml.KeySet {
	if err := ml.IndexShapes(q, k, w, heads); err != nil {
		panic("cuda backend: " + err.Error())
	}
	qq, kk, ww := g(q), g(k), g(w)
	n, dim := qq.rows, kk.cols
	ch := blockChoice{n: n, block: 1, top: topK, first: min(n, topK), ld: n, c: candidates{1, 0, 1},
		q: qq.p, k: kk.p, heads: heads, dim: dim, cols: n, rotate: rotate}
	return b.chooseBlocks("lightning indexer", ch, func(r0, r1 int, q, k, qk, out ptr) error {
		m := r1 - r0
		err := b.e.gemm(qk, f32, n, q, dim, k, f32, m*heads, dim, r1, 0)
		if err == nil {
			err = b.e.launch("lid_scores", gridFor(int64(m)*int64(n)), block256, out, qk, ww.p, m, heads, n, r0)
		}
		return err
	})
}

// candidates says how many of a score row's entries top_keys chooses
// from: (i + 1 + add)/div for window row i (DSA's keys j <= i; MSA's
// blocks up to i's own; QSA's whole blocks), groups score rows a window
// row (MSA's indexer heads, else 1).
type candidates struct{ groups, add, div int }

func (c candidates) of(i int) int { return (i + 1 + c.add) / c.div }

// topKeys launches top_keys: the bitmaps (rows of nwords words at words)
// of the topK best candidates (c) of the rows score rows at sc (rows of
// ld) from window row r0, and each row's flag (int32s at flags) of a
// choice left to the host.
func (e *Engine) topKeys(words, flags, sc ptr, rows, ld, nwords, r0, topK int, c candidates) error {
	return e.launch("top_keys", dim3{uint32(rows), 1, 1}, block256, words, flags, sc, rows, ld, nwords, r0, topK, c.groups, c.add, c.div)
}

// blockChoice is a sparse indexer's choice of keys on the device (DSA's,
// MSA's, QSA's) for a window of n rows: from row first, the top best of
// each row's candidate blocks (of block keys; c), ld scores a score row;
// with tail a row also reads the keys after its last whole block; a row
// before first reads every key. Its queries q (n, heads·dim) and keys k
// (n, dim) are turned by the Hadamard matrix with rotate; a window row's
// products are heads·cols float32s.
type blockChoice struct {
	n, block, top, first, ld int
	c                        candidates
	tail                     bool
	q, k                     ptr
	heads, dim, cols         int
	rotate                   bool
}

// chooseBlocks runs ch: the keys (rotated with ch.rotate, as the queries)
// rounded through the KV cache's key format (roundKeys), then per chunk
// of window rows [r0, r1) (chunkRows) scores writes the block scores at
// out (score rows of ch.ld, ch.c.groups a window row) from the chunk's
// queries q, the keys k and room qk for the chunk's products; top_keys
// chooses their blocks (a row it leaves to the host chosen there from its
// scores read back: nn.TopKeys, ggml's TOP_K's ties, and its bitmap
// copied back), and block_keys spreads the chosen blocks over their keys
// into the set, which stays on the device (keysBuf, deviceKeys).
func (b *gpuBackend) chooseBlocks(what string, ch blockChoice, scores func(r0, r1 int, q, k, qk, out ptr) error) ml.KeySet {
	g := ch.c.groups
	set := &deviceKeys{b, ch.n, g}
	b.do(what, func() (err error) {
		e := b.e
		mark := b.Mark()
		defer b.Release(mark)
		alloc := func(bytes int) (p ptr) { // scratch, once err is nil
			if err == nil {
				p, err = b.scratchBytes(int64(max(bytes, 8)))
			}
			return p
		}
		nw, nbw, sparse := (ch.n+63)/64, (ch.ld+63)/64, max(0, ch.n-ch.first)
		rows := chunkRows(sparse, ch.heads*ch.cols)
		bw, sc, fl := alloc(8*sparse*g*nbw), alloc(4*rows*g*ch.ld), alloc(4*rows*g)
		var sd, q, k, qk ptr
		if err == nil {
			sd, err = b.keysBuf(8 * int64(g) * int64(ch.n) * int64(nw))
		}
		if err == nil && sparse > 0 {
			q, k = ch.q, ch.k
			if ch.rotate {
				q, k, err = b.rotated(q, k, ch.n, ch.heads, ch.dim)
			}
			if err == nil {
				k, err = b.roundKeys(k, ch.n, ch.dim)
			}
			qk = alloc(4 * rows * ch.heads * ch.cols)
		}
		flags, row, order, bits := make([]int32, rows*g), make([]float32, ch.ld), make([]int32, ch.ld), make([]uint64, nbw)
		for r0 := ch.first; r0 < ch.n && err == nil; r0 += rows {
			r1 := min(ch.n, r0+rows)
			m, wr := (r1-r0)*g, bw+ptr(8*(r0-ch.first)*g*nbw)
			err = scores(r0, r1, q+ptr(4*int64(r0)*int64(ch.heads*ch.dim)), k, qk, sc)
			if err == nil {
				err = e.topKeys(wr, fl, sc, m, ch.ld, nbw, r0, ch.top, ch.c)
			}
			if err == nil {
				err = download(e, flags[:m], fl)
			}
			for r := 0; r < m && err == nil; r++ {
				if flags[r] == 0 {
					continue
				}
				cands := ch.c.of(r0 + r/g)
				if err = download(e, row[:cands], sc+ptr(4*r*ch.ld)); err == nil {
					clear(bits)
					for _, j := range nn.TopKeys(row[:cands], order[:cands], ch.top) {
						bits[j/64] |= 1 << (j % 64)
					}
					err = upload(e, wr+ptr(8*r*nbw), bits)
				}
			}
			if err != nil {
				err = fmt.Errorf("rows %d to %d: %w", r0, r1-1, err)
			}
		}
		if err == nil {
			err = e.launch("block_keys", gridFor(int64(g)*int64(ch.n)*int64(nw)), block256, sd, bw, ch.n, g, nw, nbw, ch.first, ch.block, b2i(ch.tail))
		}
		if err == nil {
			b.keysOf = set
		}
		return err
	})
	return set
}

// chunkRows is how many window rows of a window of n a chunk of sparse
// indexer products holds: rows·perRow float32s at most indexerProducts, at
// least 1, at most n.
func chunkRows(n, perRow int) int { return max(1, min(n, indexerProducts/max(1, perRow))) }

// BlockKeys is ml.BlockSparse's, on the device: chooseBlocks, a chunk's
// scores one GEMM of every indexer head's q·k and msa_scores' block
// maxima (the local blocks first). The products are cuBLAS's, float32:
// near ties may go another way than the CPU's (nn.MSABlocks).
func (b *gpuBackend) BlockKeys(q, k ml.Tensor, heads, block, topK, local int) ml.KeySet {
	qq, kk := g(q), g(k)
	n, dim := qq.rows, kk.cols
	gshape("MSA indexer keys", kk, n, dim)
	gshape("MSA indexer queries", qq, n, heads*dim)
	if block <= 0 || topK <= 0 || local < 0 {
		panic(fmt.Sprintf("cuda backend: MSA blocks of %d, top %d, local %d", block, topK, local))
	}
	ch := blockChoice{n: n, block: block, top: topK, first: min(n, topK*block), ld: (n + block - 1) / block,
		c: candidates{heads, block - 1, block}, q: qq.p, k: kk.p, heads: heads, dim: dim, cols: n}
	return b.chooseBlocks("MSA indexer", ch, func(r0, r1 int, q, k, qk, out ptr) error {
		m := r1 - r0
		err := b.e.gemm(qk, f32, r1, q, dim, k, f32, m*heads, dim, r1, 0)
		if err == nil {
			err = b.e.launch("msa_scores", gridFor(int64(m)*int64(heads)*int64(ch.ld)), block256, out, qk, m, heads, r1, ch.ld, r0, block, local)
		}
		return err
	})
}

// PoolKeys is ml.PooledSparse's, on the device: k (and the gates)
// rounded through the key format, then qsa_pool (nn.QSAPool's float32
// sums) or, with gates, gatedPool.
func (b *gpuBackend) PoolKeys(dst, k, gt ml.Tensor, ape *ml.Vector, block int) {
	d, kk := g(dst), g(k)
	gshape("pooled keys", d, kk.rows, kk.cols)
	if gt != nil {
		gshape("pool gates", g(gt), kk.rows, kk.cols)
	}
	b.do("pooled keys", func() error {
		mark := b.Mark()
		defer b.Release(mark)
		kd, err := b.roundKeys(kk.p, kk.rows, kk.cols)
		if err != nil {
			return err
		}
		if gt == nil {
			return b.e.launch("qsa_pool", gridFor(int64(d.count())), block256, d.p, kd, kk.rows, kk.cols, block)
		}
		gd, err := b.roundKeys(g(gt).p, kk.rows, kk.cols)
		if err != nil {
			return err
		}
		return b.gatedPool(d.p, kd, gd, gv(ape), kk.rows, kk.cols, block, false)
	})
}

// gatedPool launches gated_pool: dst (n, dim) the gated pools of k and g
// (n, dim; with overlap 2·dim) with the bias ape by blocks of block, in
// the int8 mode as llama.cpp's AVX-512 build (the CPU int8 mode's; the GPU
// refuses int8-avx2); on the engine's thread.
func (b *gpuBackend) gatedPool(dst, k, g, ape ptr, n, dim, block int, overlap bool) error {
	return b.e.launch("gated_pool", gridFor(int64(n)*int64(dim)), block256, dst, k, g, ape, n, dim, block,
		b2i(overlap), b2i(b.prec.Int8), 0)
}

// PooledKeys is ml.PooledSparse's, on the device (pooledChoice).
func (b *gpuBackend) PooledKeys(q, p, w ml.Tensor, heads, block, topK int) ml.KeySet {
	qq, pp := g(q), g(p)
	n, dim := pp.rows, pp.cols
	gshape("pooled keys' queries", qq, n, heads*dim)
	var wp ptr
	if w != nil {
		gshape("pooled keys' head weights", g(w), n, heads)
		wp = g(w).p
	}
	return b.pooledChoice("QSA indexer", qq.p, pp.p, wp, n, heads, dim, block, topK, false)
}

// pooledChoice chooses QSA's blocks (nn.QSABlocks) on the device:
// chooseBlocks over q (n, heads·dim) and the pooled keys p (n, dim),
// Hadamard-rotated with rotate (DeepSeek-V4's indexer), a chunk's scores
// one GEMM of every head's q with the blocks' pooled keys (gemmRows: p's
// rows b·block) and qsa_scores' weighted sums
// (w's, or 1/sqrt(dim) where wp is 0; the int8 mode's fused in float32 as
// llama.cpp's, else in float64 as nn.QSABlocks'). The
// products are cuBLAS's, float32: near ties may go another way than the
// CPU's.
func (b *gpuBackend) pooledChoice(what string, qp, pp, wp ptr, n, heads, dim, block, topK int, rotate bool) ml.KeySet {
	if block <= 1 || topK < block || topK%block != 0 {
		panic(fmt.Sprintf("cuda backend: %s: blocks of %d for a budget of %d keys", what, block, topK))
	}
	nb := n / block
	ch := blockChoice{n: n, block: block, top: topK / block, first: min(n, topK+block-1), ld: max(1, nb),
		c: candidates{1, 0, block}, tail: true, q: qp, k: pp, heads: heads, dim: dim, cols: max(1, nb), rotate: rotate}
	scale := 1 / float32(math.Sqrt(float64(dim)))
	return b.chooseBlocks(what, ch, func(r0, r1 int, q, p, qk, out ptr) error {
		m := r1 - r0
		err := b.e.gemmRows(qk, f32, nb, q, dim, p, block*dim, f32, m*heads, dim, nb, 0)
		if err == nil {
			err = b.e.launch("qsa_scores", gridFor(int64(m)*int64(nb)), block256, out, qk, wp, m, heads, nb, r0, block, scale, dim, b2i(b.prec.Int8))
		}
		return err
	})
}

// rotated returns q (n, heads·dim) and k (n, dim) times the Hadamard
// matrix of dim (nn.HadamardMatrix, one GEMM each) in scratch memory, as
// llama.cpp turns the lightning indexers' queries and keys.
func (b *gpuBackend) rotated(q, k ptr, n, heads, dim int) (qr, kr ptr, err error) {
	h, err := scratchCopy(b, nn.HadamardMatrix(dim).Data)
	if err == nil {
		qr, err = b.scratchBytes(4 * int64(n) * int64(heads*dim))
	}
	if err == nil {
		kr, err = b.scratchBytes(4 * int64(n) * int64(dim))
	}
	if err == nil {
		err = b.e.gemm(qr, f32, dim, q, dim, h, f32, n*heads, dim, dim, 0)
	}
	if err == nil {
		err = b.e.gemm(kr, f32, dim, k, dim, h, f32, n, dim, dim, 0)
	}
	return qr, kr, err
}

// PLEGate is ml.PLE's, on the device (ple_gate): nn.PLEGate, in the int8
// mode nn.GGMLPLEGate (llama.cpp's roundings, as the CPU's int8 mode).
func (b *gpuBackend) PLEGate(dst, key, query ml.Tensor, scale float64) {
	d, k, q := g(dst), g(key), g(query)
	gshape("n-gram embeddings' query", q, k.rows, k.cols)
	if d.rows != k.rows || d.cols == 0 || k.cols%d.cols != 0 {
		panic(fmt.Sprintf("cuda backend: n-gram gate of %d×%d from %d×%d keys", d.rows, d.cols, k.rows, k.cols))
	}
	b.do("n-gram gate", func() error {
		return b.e.launch("ple_gate", gridFor(d.count()), block256, d.p, k.p, q.p, d.rows, d.cols, k.cols/d.cols, scale, b2i(b.prec.Int8))
	})
}

// keySet returns a.Keys's bitmap, of a window of n rows, on the device
// (deviceSet), with its group count: 1 (every KV head's) or one per KV
// head.
func (b *gpuBackend) keySet(a *ml.Attn, n int) (ptr, int, error) {
	gr := a.Keys.Groups()
	if gr != 1 && gr != a.KVHeads {
		return 0, 0, fmt.Errorf("cuda: a key set of %d groups for %d KV heads", gr, a.KVHeads)
	}
	p, err := b.deviceSet(a.Keys, n)
	return p, gr, err
}

// deviceKeys is a key set chooseBlocks left on the device, in the keysBuf
// of the backend of: n rows in groups, valid while it is the set there
// (keysOf).
type deviceKeys struct {
	of        *gpuBackend
	n, groups int
}

func (s *deviceKeys) Groups() int { return s.groups }

// deviceSet returns the bitmap of s, a set of n rows, on the device: the
// set chooseBlocks made last where it left it (keysBuf), a host's
// *nn.KeySet copied into scratch memory. An older set of this backend's
// is gone (ml.KeySet's lifetime): an error, not another set's keys. On the
// engine's thread.
func (b *gpuBackend) deviceSet(s ml.KeySet, n int) (ptr, error) {
	switch s := s.(type) {
	case *deviceKeys:
		if s.of != b {
			return 0, errors.New("cuda: a key set another engine chose")
		}
		if s != b.keysOf {
			return 0, errors.New("cuda: a key set chosen before the last one, whose buffer holds another now")
		}
		if s.n != n {
			return 0, fmt.Errorf("cuda: a key set of %d rows for %d", s.n, n)
		}
		return b.keys.p, nil
	case *nn.KeySet:
		if want := s.Groups() * n * ((n + 63) / 64); len(s.Words()) != want {
			return 0, fmt.Errorf("cuda: a key set of %d words for %d rows in %d groups, want %d", len(s.Words()), n, s.Groups(), want)
		}
		return scratchCopy(b, s.Words())
	}
	return 0, fmt.Errorf("cuda: a key set of another backend (%T)", s)
}

// keysBuf returns the device buffer of the key set chooseBlocks writes,
// grown to bytes, and forgets the set it held; on the engine's thread.
// The buffer outlives the call: the set stays there for the attentions
// that read it (deviceSet) until the next is chosen, never copied to the
// host: n²/8 bytes a group, 1 GiB for MiniMax-M3's 8 groups at 32,768
// tokens.
func (b *gpuBackend) keysBuf(bytes int64) (ptr, error) {
	b.keysOf = nil
	if err := b.e.grow(&b.keys, bytes, "key set's buffer"); err != nil {
		return 0, err
	}
	return b.keys.p, nil
}
