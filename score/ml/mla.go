package ml

import "fmt"

// KeySet is the keys a sparse indexer chose for each query row
// (Sparse.IndexKeys, BlockSparse.BlockKeys, PooledSparse.PooledKeys,
// Compressed.IndexBlocks), in one group or one per KV head, kept where the
// backend that chose it keeps it: model code hands it on, to Attn.Keys or
// Compressed.CompressedAttention, and never reads it. A set of n rows
// is n²/8 bytes a group (1 GiB for MiniMax-M3's 8 groups at 32,768
// tokens), which a device therefore never copies back.
//
// A set is valid until its backend chooses the next one; a backend
// refuses a set it no longer holds. Every backend also takes a host's
// *nn.KeySet.
type KeySet interface {
	// Groups is 1 (one set for every KV head) or the KV heads' count.
	Groups() int
}

// Latent is what multi-head latent attention (DeepSeek-V2/V3's MLA, in
// the absorbed form llama.cpp runs) needs beyond Backend: a per-head
// projection, column copies to assemble heads from their parts, and
// attention whose values are a prefix of its keys (MQA over the
// compressed latent: key = [c | k_pe], value = c).
//
// Plain definitions, which the implementations are tested against:
type Latent interface {
	// Columns copies width columns: dst[r, dc+i] = x[r, xc+i] for every
	// row r and i < width. dst and x have the same rows.
	Columns(dst Tensor, dc int, x Tensor, xc, width int)
	// HeadLinear applies the h-th matrix of the stack w to head h:
	// dst[r, h] = x[r, h]·W_hᵀ (+ bias_h), x (n, w.Experts·w.In) -> dst
	// (n, w.Experts·w.Out), head h being columns [h·In, (h+1)·In) of x and
	// [h·Out, (h+1)·Out) of dst. That is, one Linear per head.
	HeadLinear(dst, x Tensor, w *Matrix)
	// LatentAttention stores k in layer's KV cache (in its format; there
	// is no separate value cache), then computes causal attention as
	// Attention does with values v[j,g] = the first valueDim elements of
	// k[j,g] (as read back from the cache): q (n, Heads·HeadDim), k (n,
	// KVHeads·HeadDim), dst (n, Heads·valueDim), valueDim <= HeadDim.
	// With a.Keys, query row i reads only the keys the set holds for it.
	LatentAttention(dst, q, k Tensor, layer int, a *Attn, valueDim int)
}

// Sparse is what DeepSeek's sparse attention (DSA: DeepSeek-V3.2, GLM-5)
// needs beyond Latent once a window is longer than its lightning indexer's
// top_k: the indexer's key norm and its choice of keys, which Attn.Keys
// carries into LatentAttention.
type Sparse interface {
	LayerNormer
	// IndexKeys is nn.LightningTopK: the topK keys j <= i each query row
	// i reads, by the indexer's scores of q (n, heads·dim) against k (n,
	// dim) weighted by w (n, heads); with rotate q and k Hadamard-rotated
	// first, as llama.cpp stores DeepSeek-V3.2's indexer keys (the scores
	// the same but for roundings).
	IndexKeys(q, k, w Tensor, heads, topK int, rotate bool) KeySet
}

// IndexShapes checks the operands of IndexKeys: as many rows of q, k and
// w, q of heads·dim columns for k's dim, w of heads.
func IndexShapes(q, k, w Tensor, heads int) error {
	n, dim := q.Rows(), k.Cols()
	if k.Rows() != n || w.Rows() != n || w.Cols() != heads || q.Cols() != heads*dim {
		return fmt.Errorf("indexer: queries (%d, %d), keys (%d, %d) and weights (%d, %d) for %d heads", n, q.Cols(), k.Rows(), dim, w.Rows(), w.Cols(), heads)
	}
	return nil
}

// BlockSparse is what MiniMax's sparse attention (MSA: MiniMax-M3) needs
// beyond Backend once a window has more key blocks than its indexer's
// top_k: the indexer's choice of blocks for each KV head, which Attn.Keys
// carries into Attention.
type BlockSparse interface {
	// BlockKeys is nn.MSABlocks over q (n, heads·dim) and k (n, dim), k
	// passed through the KV cache's key format first, as llama.cpp stores
	// the indexer's keys (which changes the scores by rounding only).
	BlockKeys(q, k Tensor, heads, block, topK, local int) KeySet
}

// PooledSparse is what sparse attention over pooled key blocks needs
// beyond Backend (Qwen3.8's QSA: qwen4exp; GLM5-Next's k-pool indexer)
// once a window has more whole key blocks than its indexer's
// top_k/block: the blocks' pooled keys and the choice of blocks, which
// Attn.Keys carries into Attention.
type PooledSparse interface {
	// PoolKeys is nn.QSAPool of k (n, dim), or with gates g (n, dim)
	// nn.GatedPool of k by g and ape (block·dim values), k and g passed
	// through the KV cache's key format first, as llama.cpp stores the
	// indexer's raw keys and gates.
	PoolKeys(dst, k, g Tensor, ape *Vector, block int)
	// PooledKeys is nn.QSABlocks over q (n, heads·dim) and the pooled keys
	// p (n, dim), the heads weighted by w (n, heads; nil: 1/sqrt(dim)), p
	// passed through the KV cache's key format first, as llama.cpp stores
	// them.
	PooledKeys(q, p, w Tensor, heads, block, topK int) KeySet
}

// Compressed is what DeepSeek-V4's attention needs beyond Backend: keys
// compressed from blocks of the window's tokens, a lightning indexer's
// choice among them, and attention over the raw keys of a sliding window
// and the compressed keys a query sees. A compressed key is the row of its
// block's first token in an (n, dim) matrix (the other rows unread), so
// that RoPE turns it to that position.
type Compressed interface {
	// CompressKeys sets row b·ratio of dst (n, dim) to block b's
	// compressed key: nn.GatedPool of k and g (n, dim) by ape (ratio·dim
	// values), or with overlap nn.OverlapPool of k and g (n, 2·dim) by
	// ape (ratio·2·dim values). The other rows are zero.
	CompressKeys(dst, k, g Tensor, ape *Vector, ratio int, overlap bool)
	// IndexBlocks is nn.QSABlocks over q (n, heads·dim) and the compressed
	// keys p (n, dim) of blocks of ratio, the heads weighted by w (n,
	// heads), topK blocks a row: q's heads and p turned by the Hadamard
	// matrix of dim and p passed through the KV cache's key format first,
	// as llama.cpp stores DeepSeek-V4's indexer keys. Row i's set holds
	// key b·ratio for each block b it reads.
	IndexBlocks(q, p, w Tensor, heads, ratio, topK int) KeySet
	// CompressedAttention stores k and c in layer's KV cache (in its
	// format; each key is also its value), then computes attention as
	// Attention does of q (n, Heads·HeadDim) over one KV head: row i reads
	// the raw keys k[j] (n, HeadDim) with i−a.Window < j <= i and the
	// compressed keys c[b·ratio] (c (n, HeadDim)) of its whole blocks,
	// (b+1)·ratio <= i+1, that vis holds (key b·ratio in row i's set;
	// every one when vis is nil); dst (n, Heads·HeadDim).
	CompressedAttention(dst, q, k, c Tensor, ratio, layer int, a *Attn, vis KeySet)
}
