package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// HRM-Text (arch hrm_text: DFM-Mimir) is two stacks of Layers/2 blocks
// (L: blk.0 on, H: the rest) run hrmHCycles times, each time the L stack
// hrmLCycles times, then the H stack, each pass with its own caches:
// block_count is the passes' layers, Layers/2 · hrmHCycles · (hrmLCycles +
// 1). Each block is llama's without norm weights, with a sigmoid gate per
// element on the attention's output (attn_gate); hrm.z_l_init starts the
// L stream; the embeddings scaled by embedding_scale.
func (s Shape) hrm() bool { return s.Arch == "hrm_text" }

// hrmHCycles and hrmLCycles are hrm.h_cycles and hrm.l_cycles.
const hrmHCycles, hrmLCycles = 2, 1

// hrmSlots is block_count: every pass's layers.
func (s Shape) hrmSlots() int { return s.Layers / 2 * hrmHCycles * (hrmLCycles + 1) }

// checkHRM validates hrm_text's fields.
func (s Shape) checkHRM() error {
	if s.hrm() && (s.Layers%2 != 0 || s.Window != 0) {
		return fmt.Errorf("shape: hrm_text needs an even number of blocks (%d: two stacks) and no window", s.Layers)
	}
	return nil
}

// hrmKeys writes the stacks' sizes and cycles and the embeddings' scale.
func (c *Config) hrmKeys(w *gguf.Writer) {
	a := c.Arch
	w.Add(a+".hrm.layers_per_stack", uint32(c.Layers/2))
	w.Add(a+".hrm.h_cycles", uint32(hrmHCycles))
	w.Add(a+".hrm.l_cycles", uint32(hrmLCycles))
	w.Add(a+".embedding_scale", float32(1.5))
}

// hrmLayer adds block i's tensors, and with block 0 hrm.z_l_init.
func (c *Config) hrmLayer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, q, ff := uint64(c.Embd), uint64(c.Heads*c.HeadDim), uint64(c.FFN)
	if i == 0 {
		add("hrm.z_l_init", []uint64{e}, -1, c.normal("hrm.z_l_init", 0.5))
	}
	c.attnTensors(add, i)
	add(p+"attn_gate.weight", []uint64{e, q}, i, c.normal(p+"attn_gate.weight", invSqrt(e)))
	add(p+"ffn_gate.weight", []uint64{e, ff}, i, c.normal(p+"ffn_gate.weight", invSqrt(e)))
	add(p+"ffn_up.weight", []uint64{e, ff}, i, c.normal(p+"ffn_up.weight", invSqrt(e)))
	add(p+"ffn_down.weight", []uint64{ff, e}, i, c.normal(p+"ffn_down.weight", c.Residual*invSqrt(ff)))
}

// hrmParams is Params for hrm_text.
func (s Shape) hrmParams() int64 {
	e, q, kv := int64(s.Embd), int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	n := s.headParams() // hrm.z_l_init where the others have output_norm
	return n + int64(s.Layers)*(2*e*q+2*e*kv+e*q+3*e*int64(s.FFN))
}
