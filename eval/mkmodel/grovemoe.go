package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// GroveMoE (arch grovemoe) is qwen3moe's block whose experts come with
// chunk experts, one per groveGroup experts, as wide as a head (the file
// leaves out expert_chunk_feed_forward_length, whose default llama.cpp
// takes), their output times groveScale.
func (s Shape) grove() bool { return s.Arch == "grovemoe" }

// groveScale is expert_group_scale.
const groveScale = 0.5

// groveGroup is experts_per_group: pairs of experts, or single experts
// when more than half of them are used per token (llama.cpp aborts on
// files with more experts used than chunks).
func (s Shape) groveGroup() int {
	if s.Experts%2 == 0 && 2*s.ExpertsUsed <= s.Experts {
		return 2
	}
	return 1
}

// checkGrove validates grovemoe's fields.
func (s Shape) checkGrove() error {
	if s.grove() && (s.Experts == 0 || s.DenseLead != 0) {
		return fmt.Errorf("shape: grovemoe needs experts in every layer (%d, %d dense)", s.Experts, s.DenseLead)
	}
	return nil
}

// groveKeys writes the chunk experts' group size and scale.
func (c *Config) groveKeys(w *gguf.Writer) {
	w.Add(c.Arch+".experts_per_group", uint32(c.groveGroup()))
	w.Add(c.Arch+".expert_group_scale", float32(groveScale))
}

// groveTensors adds layer i's chunk experts.
func (c *Config) groveTensors(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, n, f := uint64(c.Embd), uint64(c.Experts/c.groveGroup()), uint64(c.HeadDim)
	add(p+"ffn_gate_chexps.weight", []uint64{e, f, n}, i, c.normal(p+"ffn_gate_chexps.weight", invSqrt(e)))
	add(p+"ffn_up_chexps.weight", []uint64{e, f, n}, i, c.normal(p+"ffn_up_chexps.weight", invSqrt(e)))
	add(p+"ffn_down_chexps.weight", []uint64{f, e, n}, i, c.normal(p+"ffn_down_chexps.weight", c.Residual*invSqrt(f)))
}

// groveParams is the chunk experts' parameters in a layer.
func (s Shape) groveParams() int64 {
	return 3 * int64(s.Embd) * int64(s.HeadDim) * int64(s.Experts/s.groveGroup())
}
