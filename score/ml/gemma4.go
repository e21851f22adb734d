package ml

// Gemma4 is the extension a backend implements to run Gemma 4 (gemma4):
// its per-layer inputs need a column gather and a gated activation outside
// an MLP, and its last layers attend to the cache of an earlier layer
// (KV sharing). A Network that needs it checks for it at load
// (model.Checker), so a backend without it refuses such a model by name.
//
// Plain definitions, the references the implementations are tested
// against (every tensor is (tokens, columns)):
//
//   - GatherCols: dst[t, j] = x[t, cols[j]] (as Recurrent's).
//   - GLU: dst = act(g) ⊙ u elementwise, the gated activation of an MLP
//     (Act's definitions) on its own; dst may be g or u.
//   - AttentionShared: Attention's result for q over the keys and values
//     that layer src stored earlier in the same pass, storing nothing: k and
//     v are the tensors that layer passed to Attention, still allocated
//     (a backend may read its cache instead). a is this layer's shape and
//     options; its KVHeads and HeadDim must be src's.
type Gemma4 interface {
	GatherCols(dst, x Tensor, cols []int)
	GLU(dst, g, u Tensor, act Act)
	AttentionShared(dst, q, k, v Tensor, src int, a *Attn)
}
