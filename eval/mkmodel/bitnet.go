package mkmodel

import "fmt"

// BitNet (arch bitnet: BitNet b1.58) is llama's block with NeoX RoPE, an
// RMS norm of the attention's output before attn_output (attn_sub_norm)
// and of the MLP's gated activation before ffn_down (ffn_sub_norm), a
// scale per projection (<name>.scale, one value: the ternary weights'
// absmean), and the output the token embedding (tied, always).
func (s Shape) bitnet() bool { return s.Arch == "bitnet" }

// bitnetLayer adds layer i's tensors.
func (c *Config) bitnetLayer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, q, kv, ff := uint64(c.Embd), uint64(c.Heads*c.HeadDim), uint64(c.KVHeads*c.HeadDim), uint64(c.FFN)
	scale := func(name string, v float32) {
		add(p+name+".scale", []uint64{1}, i, func(_ int, dst []float32) { dst[0] = v })
	}
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	add(p+"attn_q.weight", []uint64{e, q}, i, c.normal(p+"attn_q.weight", invSqrt(e)))
	scale("attn_q", 1.2)
	add(p+"attn_k.weight", []uint64{e, kv}, i, c.normal(p+"attn_k.weight", invSqrt(e)))
	scale("attn_k", 1.2)
	add(p+"attn_v.weight", []uint64{e, kv}, i, c.normal(p+"attn_v.weight", invSqrt(e)))
	scale("attn_v", 0.9)
	add(p+"attn_sub_norm.weight", []uint64{q}, i, c.gain(p+"attn_sub_norm.weight", 1, 0.1))
	add(p+"attn_output.weight", []uint64{q, e}, i, c.normal(p+"attn_output.weight", invSqrt(q)))
	scale("attn_output", float32(c.Residual))
	add(p+"ffn_norm.weight", []uint64{e}, i, c.gain(p+"ffn_norm.weight", 1, 0.1))
	add(p+"ffn_gate.weight", []uint64{e, ff}, i, c.normal(p+"ffn_gate.weight", invSqrt(e)))
	scale("ffn_gate", 1.1)
	add(p+"ffn_up.weight", []uint64{e, ff}, i, c.normal(p+"ffn_up.weight", invSqrt(e)))
	scale("ffn_up", 0.8)
	add(p+"ffn_sub_norm.weight", []uint64{ff}, i, c.gain(p+"ffn_sub_norm.weight", 1, 0.1))
	add(p+"ffn_down.weight", []uint64{ff, e}, i, c.normal(p+"ffn_down.weight", invSqrt(ff)))
	scale("ffn_down", float32(c.Residual))
}

// bitnetParams is a bitnet layer's weights beyond llama's: the two sub
// norms and the 7 scales.
func (s Shape) bitnetParams() int64 { return int64(s.Heads*s.HeadDim+s.FFN) + 7 }
