package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// minimax-m3 (MiniMax-M3, 428B-A23B) is MiniMax-M2's attention with q and
// k RMS-normed per head (one weight row of HeadDim for every head) before
// NeoX RoPE over half of each head, and DeepSeek-V3's feed-forward:
// DenseLead dense layers, then sigmoid-routed experts with a selection
// bias, renormalized and scaled by 2.5, and a shared expert as wide as an
// expert; every MLP gpt-oss's clamped SwiGLU. The layers with experts
// attend sparsely (MiniMax Sparse Attention): an indexer of one head per
// KV head (indexer.q_proj, k_proj, q_norm, k_norm; heads of 2·HeadDim,
// turned by the attention's RoPE over its first HeadDim/2)
// scores the keys, and each KV head's queries read the m3TopK blocks of
// m3Block keys that score highest, the m3Local last ones always among
// them.
func (s Shape) minimaxM3() bool { return s.Arch == "minimax-m3" }

// m3Block, m3TopK and m3Local are the sparse attention's block size, the
// blocks each query reads, and the last blocks it always reads: a window
// of 128 tokens reads 64 of its keys at most.
const m3Block, m3TopK, m3Local = 16, 4, 2

// checkMiniMaxM3 validates minimax-m3's fields.
func (s Shape) checkMiniMaxM3() error {
	if s.minimaxM3() && (s.HeadDim%4 != 0 || s.Experts == 0 || s.SharedFFN != s.ExpertFFN || s.DenseLead >= s.Layers) {
		return fmt.Errorf("shape: minimax-m3 needs a head size that is a multiple of 4 (%d), experts, a shared expert as wide as one (%d, %d) and a layer with experts past the %d dense ones", s.HeadDim, s.SharedFFN, s.ExpertFFN, s.DenseLead)
	}
	return nil
}

// m3Dim is the indexer's head size.
func (s Shape) m3Dim() int { return 2 * s.HeadDim }

// m3Keys writes minimax-m3's metadata: the indexer and the routing
// (sigmoidRoutingKeys).
func (c *Config) m3Keys(w *gguf.Writer) {
	a := c.Arch
	w.Add(a+".rope.dimension_count", uint32(c.ropeDims()))
	w.Add(a+".attention.indexer.head_count", uint32(c.KVHeads))
	w.Add(a+".attention.indexer.key_length", uint32(c.m3Dim()))
	w.Add(a+".attention.indexer.top_k", uint32(m3TopK))
	w.Add(a+".attention.indexer.block_size", uint32(m3Block))
	w.Add(a+".attention.indexer.local_blocks", uint32(m3Local))
	c.sigmoidRoutingKeys(w)
}

// m3Layer adds layer i's tensors.
func (c *Config) m3Layer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, hd := uint64(c.Embd), uint64(c.HeadDim)
	q, kv := uint64(c.Heads)*hd, uint64(c.KVHeads)*hd
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	add(p+"attn_q.weight", []uint64{e, q}, i, c.normal(p+"attn_q.weight", 1.2*invSqrt(e)))
	add(p+"attn_k.weight", []uint64{e, kv}, i, c.normal(p+"attn_k.weight", 1.2*invSqrt(e)))
	add(p+"attn_v.weight", []uint64{e, kv}, i, c.normal(p+"attn_v.weight", invSqrt(e)))
	add(p+"attn_output.weight", []uint64{q, e}, i, c.normal(p+"attn_output.weight", c.Residual*invSqrt(q)))
	add(p+"attn_q_norm.weight", []uint64{hd}, i, c.gain(p+"attn_q_norm.weight", 1, 0.2))
	add(p+"attn_k_norm.weight", []uint64{hd}, i, c.gain(p+"attn_k_norm.weight", 1, 0.2))
	if i >= c.DenseLead {
		x, d := p+"indexer.", uint64(c.m3Dim())
		add(x+"q_proj.weight", []uint64{e, uint64(c.KVHeads) * d}, i, c.normal(x+"q_proj.weight", 1.2*invSqrt(e)))
		add(x+"k_proj.weight", []uint64{e, d}, i, c.normal(x+"k_proj.weight", 1.2*invSqrt(e)))
		add(x+"q_norm.weight", []uint64{d}, i, c.gain(x+"q_norm.weight", 1, 0.2))
		add(x+"k_norm.weight", []uint64{d}, i, c.gain(x+"k_norm.weight", 1, 0.2))
	}
	c.leadOrExperts(add, i, true)
}

// m3Params is Params for minimax-m3.
func (s Shape) m3Params() int64 {
	e, hd := int64(s.Embd), int64(s.HeadDim)
	q, kv := int64(s.Heads)*hd, int64(s.KVHeads)*hd
	n := s.headParams()
	for i := range s.Layers {
		n += e + e*q + 2*e*kv + q*e + 2*hd + s.leadOrExpertsParams(i, true)
		if i >= s.DenseLead {
			d := int64(s.m3Dim())
			n += e*int64(s.KVHeads)*d + e*d + 2*d
		}
	}
	return n
}
