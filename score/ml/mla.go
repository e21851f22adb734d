package ml

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
	LatentAttention(dst, q, k Tensor, layer int, a *Attn, valueDim int)
}
