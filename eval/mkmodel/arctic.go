package mkmodel

import "fmt"

// Arctic (arch arctic: Snowflake Arctic) is llama's block whose SwiGLU MLP
// is as wide as the model, with beside each layer softmax-routed experts
// of feed_forward_length (ExpertFFN = FFN) reading the layer's input
// normed by ffn_norm_exps.
func (s Shape) arctic() bool { return s.Arch == "arctic" }

// arcticLayer adds layer i's tensors.
func (c *Config) arcticLayer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e := uint64(c.Embd)
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	c.attnTensors(add, i)
	add(p+"ffn_norm.weight", []uint64{e}, i, c.gain(p+"ffn_norm.weight", 1, 0.1))
	add(p+"ffn_gate.weight", []uint64{e, e}, i, c.normal(p+"ffn_gate.weight", invSqrt(e)))
	add(p+"ffn_up.weight", []uint64{e, e}, i, c.normal(p+"ffn_up.weight", invSqrt(e)))
	add(p+"ffn_down.weight", []uint64{e, e}, i, c.normal(p+"ffn_down.weight", c.Residual*invSqrt(e)))
	add(p+"ffn_norm_exps.weight", []uint64{e}, i, c.gain(p+"ffn_norm_exps.weight", 1, 0.1))
	c.expertTensors(add, i)
}

// arcticParams is Params for arctic.
func (s Shape) arcticParams() int64 {
	e, q, kv := int64(s.Embd), int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	n := s.headParams()
	for range s.Layers {
		n += 3*e + 2*e*q + 2*e*kv + 3*e*e + e*int64(s.Experts) + 3*e*int64(s.ExpertFFN)*int64(s.Experts)
	}
	return n
}
