package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// Maion-Coder (arch maion-coder) is qwen3's attention (q/k RMS norms per
// head, NeoX RoPE) in llama.cpp's sandwich of norms (post_attention_norm,
// post_ffw_norm) whose layers flagged by attention.sliding_window_pattern
// (three of every four, the fourth global and without RoPE) attend to the
// last Window keys, and every maionStep-th FFN softmax-routed experts
// computed at a latent width of half the model's (ffn_latent_down,
// ffn_latent_up), the others dense SwiGLU MLPs.
func (s Shape) maion() bool { return s.Arch == "maion-coder" }

// maionStep is interleave_moe_layer_step: the experts in every second layer.
const maionStep = 2

// maionSliding reports whether layer i slides.
func (s Shape) maionSliding(i int) bool { return (i+1)%4 != 0 }

// maionExperts reports whether layer i's FFN is the experts.
func (s Shape) maionExperts(i int) bool { return (i+1)%maionStep == 0 }

// maionLatent is the experts' latent width, moe_latent_size.
func (s Shape) maionLatent() int { return s.Embd / 2 }

// checkMaion validates maion-coder's fields.
func (s Shape) checkMaion() error {
	if s.maion() && (s.Window <= 0 || s.Tied || s.Experts == 0) {
		return fmt.Errorf("shape: maion-coder needs a sliding window (%d), an output matrix and experts (%d)", s.Window, s.Experts)
	}
	return nil
}

// maionKeys writes the sliding layers, the experts' step and latent width.
func (c *Config) maionKeys(w *gguf.Writer) {
	a := c.Arch
	slides := make([]bool, c.Layers)
	for i := range slides {
		slides[i] = c.maionSliding(i)
	}
	w.Add(a+".attention.sliding_window_pattern", slides)
	w.Add(a+".interleave_moe_layer_step", uint32(maionStep))
	w.Add(a+".moe_latent_size", uint32(c.maionLatent()))
}

// maionLayer adds layer i's tensors.
func (c *Config) maionLayer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, hd, ff, res := uint64(c.Embd), uint64(c.HeadDim), uint64(c.FFN), c.Residual
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	c.attnTensors(add, i)
	add(p+"attn_q_norm.weight", []uint64{hd}, i, c.gain(p+"attn_q_norm.weight", 1, 0.2))
	add(p+"attn_k_norm.weight", []uint64{hd}, i, c.gain(p+"attn_k_norm.weight", 1, 0.2))
	add(p+"post_attention_norm.weight", []uint64{e}, i, c.gain(p+"post_attention_norm.weight", res, 0.1*res))
	add(p+"ffn_norm.weight", []uint64{e}, i, c.gain(p+"ffn_norm.weight", 1, 0.1))
	if c.maionExperts(i) {
		nx, fx, x := uint64(c.Experts), uint64(c.ExpertFFN), uint64(c.maionLatent())
		add(p+"ffn_gate_inp.weight", []uint64{e, nx}, i, c.normal(p+"ffn_gate_inp.weight", invSqrt(e)))
		add(p+"ffn_latent_down.weight", []uint64{e, x}, i, c.normal(p+"ffn_latent_down.weight", invSqrt(e)))
		add(p+"ffn_gate_exps.weight", []uint64{x, fx, nx}, i, c.normal(p+"ffn_gate_exps.weight", invSqrt(x)))
		add(p+"ffn_up_exps.weight", []uint64{x, fx, nx}, i, c.normal(p+"ffn_up_exps.weight", invSqrt(x)))
		add(p+"ffn_down_exps.weight", []uint64{fx, x, nx}, i, c.normal(p+"ffn_down_exps.weight", invSqrt(fx)))
		add(p+"ffn_latent_up.weight", []uint64{x, e}, i, c.normal(p+"ffn_latent_up.weight", res*invSqrt(x)))
	} else {
		add(p+"ffn_gate.weight", []uint64{e, ff}, i, c.normal(p+"ffn_gate.weight", invSqrt(e)))
		add(p+"ffn_up.weight", []uint64{e, ff}, i, c.normal(p+"ffn_up.weight", invSqrt(e)))
		add(p+"ffn_down.weight", []uint64{ff, e}, i, c.normal(p+"ffn_down.weight", res*invSqrt(ff)))
	}
	add(p+"post_ffw_norm.weight", []uint64{e}, i, c.gain(p+"post_ffw_norm.weight", res, 0.1*res))
}

// maionParams is Params for maion-coder.
func (s Shape) maionParams() int64 {
	e, hd := int64(s.Embd), int64(s.HeadDim)
	q, kv := int64(s.Heads)*hd, int64(s.KVHeads)*hd
	n := s.headParams()
	for i := range s.Layers {
		n += 4*e + 2*hd + 2*e*q + 2*e*kv
		if s.maionExperts(i) {
			nx, x := int64(s.Experts), int64(s.maionLatent())
			n += e*nx + 2*e*x + 3*x*int64(s.ExpertFFN)*nx
		} else {
			n += 3 * e * int64(s.FFN)
		}
	}
	return n
}
