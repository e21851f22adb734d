package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// SmallThinker (arch smallthinker: PowerInfer's SmallThinker) is llama's
// block with NeoX RoPE, 3 layers of every 4 sliding (over llama.cpp's
// fixed 4096 keys) with RoPE of half the base, the fourth, from the
// first, global without RoPE, and in every layer experts whose router
// reads the layer's input before its norm, each a ReGLU (max(gate, 0)·up),
// softmax-routed and renormalized.
func (s Shape) smallThinker() bool { return s.Arch == "smallthinker" }

// smallThinkerKeys writes the sliding window's keys and the routing's.
func (c *Config) smallThinkerKeys(w *gguf.Writer) {
	a := c.Arch
	w.Add(a+".attention.sliding_window", uint32(4096))
	w.Add(a+".attention.sliding_window_pattern", uint32(4))
	w.Add(a+".rope.freq_base_swa", float32(c.RopeBase/2))
	w.Add(a+".expert_gating_func", uint32(1)) // softmax
}

// smallThinkerLayer adds layer i's tensors.
func (c *Config) smallThinkerLayer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e := uint64(c.Embd)
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	c.attnTensors(add, i)
	add(p+"ffn_norm.weight", []uint64{e}, i, c.gain(p+"ffn_norm.weight", 1, 0.1))
	c.expertTensors(add, i)
}

// smallThinkerParams is Params for smallthinker.
func (s Shape) smallThinkerParams() int64 {
	e, q, kv := int64(s.Embd), int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	n := s.headParams()
	for range s.Layers {
		n += 2*e + 2*e*q + 2*e*kv + e*int64(s.Experts) + 3*e*int64(s.ExpertFFN)*int64(s.Experts)
	}
	return n
}
