package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// Talkie (arch talkie) is llama's block without norm weights (the
// embeddings RMS-normed too), NeoX RoPE over the whole head, after RoPE q
// RMS-normed per head times a gain per head (attn_q_norm, one value per
// head) and k without one, the attention's and the MLP's outputs times
// scalar gains (attn_output.scale, ffn_down.scale), each layer's output
// plus the normed embeddings times layer_output_scale, and the logits
// times logit_scale (2: the final norm has no gain).
func (s Shape) talkie() bool { return s.Arch == "talkie" }

// checkTalkie validates talkie's fields.
func (s Shape) checkTalkie() error {
	if s.talkie() && (s.Tied || s.Window != 0) {
		return fmt.Errorf("shape: talkie has an output matrix and no sliding window")
	}
	return nil
}

// talkieKeys writes the logits' multiplier.
func (c *Config) talkieKeys(w *gguf.Writer) {
	w.Add(c.Arch+".logit_scale", float32(2))
}

// talkieLayer adds layer i's tensors.
func (c *Config) talkieLayer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, ff := uint64(c.Embd), uint64(c.FFN)
	c.attnTensors(add, i)
	add(p+"attn_output.scale", []uint64{1}, i, c.gain(p+"attn_output.scale", 1, 0.2))
	add(p+"attn_q_norm.weight", []uint64{1, uint64(c.Heads)}, i, c.gain(p+"attn_q_norm.weight", 1, 0.2))
	add(p+"ffn_gate.weight", []uint64{e, ff}, i, c.normal(p+"ffn_gate.weight", invSqrt(e)))
	add(p+"ffn_up.weight", []uint64{e, ff}, i, c.normal(p+"ffn_up.weight", invSqrt(e)))
	add(p+"ffn_down.weight", []uint64{ff, e}, i, c.normal(p+"ffn_down.weight", c.Residual*invSqrt(ff)))
	add(p+"ffn_down.scale", []uint64{1}, i, c.gain(p+"ffn_down.scale", 1, 0.2))
	add(p+"layer_output_scale.weight", []uint64{1}, i, c.gain(p+"layer_output_scale.weight", 0.3, 0.1))
}

// talkieParams is Params for talkie.
func (s Shape) talkieParams() int64 {
	e, q, kv := int64(s.Embd), int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	n := 2 * int64(s.Vocab) * e // token_embd and output, no output_norm
	return n + int64(s.Layers)*(2*e*q+2*e*kv+1+int64(s.Heads)+3*e*int64(s.FFN)+1+1)
}
