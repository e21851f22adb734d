package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// MiniMax-01 (arch minimax-01: MiniMax-Text-01, MiniMax-M1) is lightning
// attention in every layer but each AttnInterval-th, which is softmax
// attention with RoPE over RopeDims of each head (MiniMax's 64 of 128). A
// lightning layer has attn_qkv (per head [q | k | v]), attn_gate and
// attn_norm_2 (over the heads' width) besides attn_output; every layer's
// FFN is Experts softmax-routed experts of the FFN's width (llama.cpp
// shapes them by feed_forward_length); the residual joins scaled by
// residual_scale 0.75 (the keys' full_attention_interval is AttnInterval).
func (s Shape) minimax01() bool { return s.Arch == "minimax-01" }

// checkMiniMax01 validates minimax-01's fields.
func (s Shape) checkMiniMax01() error {
	if s.minimax01() && (s.AttnInterval < 1 || s.Layers < 2 || s.Window != 0) {
		return fmt.Errorf("shape: minimax-01 needs an attention interval (%d), 2 layers or more (%d) and no sliding window", s.AttnInterval, s.Layers)
	}
	return nil
}

// minimax01Lightning reports whether layer i is lightning attention.
func (s Shape) minimax01Lightning(i int) bool { return (i+1)%s.AttnInterval != 0 }

// minimax01Keys writes the residual scale, the attention interval and the
// rotated dimensions.
func (c *Config) minimax01Keys(w *gguf.Writer) {
	w.Add(c.Arch+".residual_scale", float32(0.75))
	w.Add(c.Arch+".full_attention_interval", uint32(c.AttnInterval))
	w.Add(c.Arch+".rope.dimension_count", uint32(c.ropeDims()))
}

// minimax01Layer adds layer i's tensors.
func (c *Config) minimax01Layer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, q := uint64(c.Embd), uint64(c.Heads*c.HeadDim)
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	if c.minimax01Lightning(i) {
		add(p+"attn_qkv.weight", []uint64{e, 3 * q}, i, c.normal(p+"attn_qkv.weight", 1.2*invSqrt(e)))
		add(p+"attn_gate.weight", []uint64{e, q}, i, c.normal(p+"attn_gate.weight", invSqrt(e)))
		add(p+"attn_norm_2.weight", []uint64{q}, i, c.gain(p+"attn_norm_2.weight", 1, 0.1))
		add(p+"attn_output.weight", []uint64{q, e}, i, c.normal(p+"attn_output.weight", c.Residual*invSqrt(q)))
	} else {
		c.attnTensors(add, i)
	}
	add(p+"ffn_norm.weight", []uint64{e}, i, c.gain(p+"ffn_norm.weight", 1, 0.1))
	c.expertTensors(add, i)
}

// minimax01Params is Params for minimax-01.
func (s Shape) minimax01Params() int64 {
	e, q, kv := int64(s.Embd), int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	n := s.headParams()
	for i := range s.Layers {
		n += 2*e + e*int64(s.Experts) + 3*e*int64(s.ExpertFFN)*int64(s.Experts)
		if s.minimax01Lightning(i) {
			n += 3*e*q + e*q + q + q*e
		} else {
			n += e*q + 2*e*kv + q*e
		}
	}
	return n
}
