package model

// plamo: PFN's PLaMo-13B (the first PLaMo), as llama.cpp 0.7.0 runs it:
// llama's attention (NeoX RoPE) and SwiGLU MLP in a parallel block on the
// same normed rows (attn_norm alone, no FFN norm), x + (MLP + attention);
// the output matrix required.
func init() { Register("plamo", newPlamo) }

func newPlamo(l *Loader) Network {
	d := l.baseDecoder(true)
	return l.bindLayers(d, func(_ int, p string) decoderLayer {
		ly := l.attnLayer(p)
		ly.ffn = l.DenseFFN(p, l.HP.Embd, l.HP.FFN)
		ly.parallel = parallelSum
		return ly
	})
}
