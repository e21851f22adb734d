package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// Step-3.5 (arch step35: StepFun's Step-3.5-Flash) is llama's block with
// per-head q/k RMS norms before NeoX RoPE, a sigmoid gate per head on the
// attention's output (attn_gate, one row per head), three layers of every
// four sliding over Window keys with half again as many heads, RoPE over
// the whole head and RoPE of half the base, the fourth global with RoPE
// over half the head (llama.cpp halves rope.dimension_count there), and
// after DenseLead dense layers sigmoid-routed experts with a selection
// bias, renormalized and scaled, beside a shared expert; the experts' and
// the shared expert's SwiGLU clamped per layer (swiglu_clamp_exp,
// swiglu_clamp_shexp: min(silu(gate), L) · clamp(up, -L, L)).
//
// Laguna (arch laguna: poolside's Laguna XS.2, M.1) is Step-3.5's layout
// without the clamps: the gate softplus instead of the sigmoid, one row
// per head with a Window (XS.2) and one per element without (M.1, all
// global); RoPE over half the head in global layers (rope.dimension_count
// itself) and with YaRN, over the whole head (rope.dimension_count_swa)
// in sliding ones; the sliding layers by llama.cpp's default period of 4
// from a global first, as XS.2's.
func (s Shape) step35() bool { return s.Arch == "step35" || s.laguna() }

func (s Shape) laguna() bool { return s.Arch == "laguna" }

// step35Sliding reports whether layer i slides: all but every fourth,
// from the first (Step-3.5-Flash's layer_types), where there is a window.
func (s Shape) step35Sliding(i int) bool { return i%4 != 0 && s.Window > 0 }

// step35Gates is layer i's attention gate rows: one per head, or for
// Laguna without a window (M.1) one per element.
func (s Shape) step35Gates(i int) int {
	if s.laguna() && s.Window == 0 {
		return s.step35Heads(i) * s.HeadDim
	}
	return s.step35Heads(i)
}

// step35Heads is layer i's query heads: half again as many where it
// slides (Step-3.5-Flash's 96 of 64).
func (s Shape) step35Heads(i int) int {
	if s.step35Sliding(i) {
		return s.Heads * 3 / 2
	}
	return s.Heads
}

// step35Clamps are the experts' and the shared expert's (and a dense
// layer's) SwiGLU limits per layer: low enough to bite the generated
// activations, none in the last layer.
func (s Shape) step35Clamps() (exp, shexp []float32) {
	exp, shexp = make([]float32, s.Layers), make([]float32, s.Layers)
	for i := range s.Layers - 1 {
		exp[i], shexp[i] = 0.25, 0.375
	}
	return exp, shexp
}

// checkStep35 validates step35's fields.
func (s Shape) checkStep35() error {
	if s.step35() && (s.Heads%(2*s.KVHeads) != 0 || s.Window <= 0 && !s.laguna() || s.HeadDim%4 != 0) {
		return fmt.Errorf("shape: %s needs heads a multiple of twice the KV heads (%d, %d), a window (%d) and a head size a multiple of 4 (%d)", s.Arch, s.Heads, s.KVHeads, s.Window, s.HeadDim)
	}
	return nil
}

// step35Keys writes step35's and laguna's per-layer head counts, sliding
// layers, RoPE's dimensions, step35's SwiGLU limits and the routing's
// keys.
func (c *Config) step35Keys(w *gguf.Writer) {
	a := c.Arch
	slides := c.step35HeadKeys(w)
	scale := float32(3)
	if c.laguna() { // the sliding layers by llama.cpp's default period
		w.Add(a+".rope.dimension_count", uint32(c.HeadDim/2))
		if c.Window > 0 {
			w.Add(a+".rope.dimension_count_swa", uint32(c.HeadDim))
		}
		scale = 2.5
	} else {
		w.Add(a+".attention.sliding_window_pattern", slides)
		w.Add(a+".rope.dimension_count", uint32(c.HeadDim))
		exp, shexp := c.step35Clamps()
		w.Add(a+".swiglu_clamp_exp", exp)
		w.Add(a+".swiglu_clamp_shexp", shexp)
	}
	w.Add(a+".leading_dense_block_count", uint32(c.DenseLead))
	w.Add(a+".expert_shared_feed_forward_length", uint32(c.SharedFFN))
	w.Add(a+".expert_gating_func", uint32(2)) // sigmoid
	w.Add(a+".expert_weights_norm", true)
	w.Add(a+".expert_weights_scale", scale)
}

// step35HeadKeys writes the per-layer head counts (step35's, laguna's,
// spark2_5's) and returns the sliding layers' flags.
func (c *Config) step35HeadKeys(w *gguf.Writer) []bool {
	heads, kv, slides := make([]int32, c.Layers), make([]int32, c.Layers), make([]bool, c.Layers)
	for i := range c.Layers {
		heads[i], kv[i], slides[i] = int32(c.step35Heads(i)), int32(c.KVHeads), c.step35Sliding(i)
	}
	w.Add(c.Arch+".attention.head_count", heads)
	w.Add(c.Arch+".attention.head_count_kv", kv)
	return slides
}

// step35Layer adds layer i's tensors.
func (c *Config) step35Layer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, hd := uint64(c.Embd), uint64(c.HeadDim)
	h := uint64(c.step35Heads(i))
	q, kv := h*hd, uint64(c.KVHeads)*hd
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	add(p+"attn_q.weight", []uint64{e, q}, i, c.normal(p+"attn_q.weight", 1.2*invSqrt(e)))
	add(p+"attn_k.weight", []uint64{e, kv}, i, c.normal(p+"attn_k.weight", 1.2*invSqrt(e)))
	add(p+"attn_v.weight", []uint64{e, kv}, i, c.normal(p+"attn_v.weight", invSqrt(e)))
	add(p+"attn_q_norm.weight", []uint64{hd}, i, c.gain(p+"attn_q_norm.weight", 1, 0.2))
	add(p+"attn_k_norm.weight", []uint64{hd}, i, c.gain(p+"attn_k_norm.weight", 1, 0.2))
	add(p+"attn_gate.weight", []uint64{e, uint64(c.step35Gates(i))}, i, c.normal(p+"attn_gate.weight", 2*invSqrt(e)))
	add(p+"attn_output.weight", []uint64{q, e}, i, c.normal(p+"attn_output.weight", c.Residual*invSqrt(q)))
	c.leadOrExperts(add, i, true)
}

// step35Params is Params for step35.
func (s Shape) step35Params() int64 {
	e, hd := int64(s.Embd), int64(s.HeadDim)
	n := s.headParams()
	for i := range s.Layers {
		h, kv := int64(s.step35Heads(i)), int64(s.KVHeads)
		n += e + 2*hd + e*h*hd + 2*e*kv*hd + h*hd*e + e*int64(s.step35Gates(i)) + s.leadOrExpertsParams(i, true)
	}
	return n
}
