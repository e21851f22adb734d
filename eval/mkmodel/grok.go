package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// Grok (arch grok: xAI's Grok-1, Grok-2) is llama's block with RMS norms
// after the attention (attn_output_norm) and after the FFN
// (layer_output_norm), its FFN softmax-routed GELU experts of ExpertFFN
// (renormalized), with SharedFFN (which must be FFN) a dense GELU MLP of
// feed_forward_length beside them (Grok-2), their sum scaled by
// 1/sqrt(2); the attention's scores
// multiplied by attention.output_scale and soft-capped at
// attn_logit_softcapping, the logits scaled by logit_scale and soft-capped
// at final_logit_softcapping (Grok-2's values).
func (s Shape) grok() bool { return s.Arch == "grok" }

// checkGrok validates grok's fields.
func (s Shape) checkGrok() error {
	if s.grok() && s.SharedFFN != 0 && s.SharedFFN != s.FFN {
		return fmt.Errorf("shape: grok's dense MLP is feed_forward_length wide (%d != %d)", s.SharedFFN, s.FFN)
	}
	return nil
}

// grokKeys writes Grok's multipliers and soft-caps.
func (c *Config) grokKeys(w *gguf.Writer) {
	a := c.Arch
	w.Add(a+".rope.dimension_count", uint32(c.HeadDim))
	w.Add(a+".attention.output_scale", float32(0.0883883461356163))
	w.Add(a+".attn_logit_softcapping", float32(30))
	w.Add(a+".router_logit_softcapping", float32(30))
	w.Add(a+".final_logit_softcapping", float32(50))
	w.Add(a+".logit_scale", float32(0.5773502691896257))
	w.Add(a+".embedding_scale", float32(78.38367176906169))
}

// grokLayer adds layer i's tensors.
func (c *Config) grokLayer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, res := uint64(c.Embd), c.Residual
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	c.attnTensors(add, i)
	add(p+"attn_output_norm.weight", []uint64{e}, i, c.gain(p+"attn_output_norm.weight", res, 0.1*res))
	add(p+"ffn_norm.weight", []uint64{e}, i, c.gain(p+"ffn_norm.weight", 1, 0.1))
	if c.SharedFFN > 0 { // Grok-2's dense MLP, of feed_forward_length
		sf := uint64(c.FFN)
		add(p+"ffn_gate.weight", []uint64{e, sf}, i, c.normal(p+"ffn_gate.weight", invSqrt(e)))
		add(p+"ffn_up.weight", []uint64{e, sf}, i, c.normal(p+"ffn_up.weight", invSqrt(e)))
		add(p+"ffn_down.weight", []uint64{sf, e}, i, c.normal(p+"ffn_down.weight", res*invSqrt(sf)))
	}
	c.expertTensors(add, i)
	add(p+"layer_output_norm.weight", []uint64{e}, i, c.gain(p+"layer_output_norm.weight", res, 0.1*res))
}

// grokParams is Params for grok.
func (s Shape) grokParams() int64 {
	e, q, kv := int64(s.Embd), int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	n := s.headParams()
	for range s.Layers {
		n += 4*e + 2*e*q + 2*e*kv + 3*e*int64(s.SharedFFN) + e*int64(s.Experts) + 3*e*int64(s.ExpertFFN)*int64(s.Experts) // SharedFFN: 0 or FFN
	}
	return n
}
