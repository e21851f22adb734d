package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// Spark-X2.5 (arch spark2_5) is Step-3.5's attention without q/k norms
// and without experts: q, k and v fused in attn_qkv, head counts per
// layer (half again as many in sliding layers), a sigmoid gate per head
// on the attention's output, the layers flagged by
// attention.sliding_window_pattern (an array: all but every fourth from
// the first) sliding over Window keys with RoPE of half the base over the
// whole head (rope.dimension_count_swa), the others with RoPE over half
// the head (rope.dimension_count); a dense GeGLU MLP.
func (s Shape) spark() bool { return s.Arch == "spark2_5" }

// checkSpark validates spark2_5's fields.
func (s Shape) checkSpark() error {
	if s.spark() && (s.Heads%(2*s.KVHeads) != 0 || s.Window <= 0 || s.HeadDim%4 != 0 || s.moe()) {
		return fmt.Errorf("shape: spark2_5 needs heads a multiple of twice the KV heads (%d, %d), a window (%d), a head size a multiple of 4 (%d) and no experts", s.Heads, s.KVHeads, s.Window, s.HeadDim)
	}
	return nil
}

// sparkKeys writes the per-layer head counts, the sliding layers and
// RoPE's dimensions.
func (c *Config) sparkKeys(w *gguf.Writer) {
	a := c.Arch
	slides := c.step35HeadKeys(w)
	w.Add(a+".attention.sliding_window_pattern", slides)
	w.Add(a+".rope.dimension_count", uint32(c.HeadDim/2))
	w.Add(a+".rope.dimension_count_swa", uint32(c.HeadDim))
}

// sparkLayer adds layer i's tensors.
func (c *Config) sparkLayer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, hd, ff := uint64(c.Embd), uint64(c.HeadDim), uint64(c.FFN)
	h := uint64(c.step35Heads(i))
	q, kv := h*hd, uint64(c.KVHeads)*hd
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	qk, v := c.normal(p+"attn_qkv.weight", 1.2*invSqrt(e)), c.normal(p+"attn_qkv.weight", invSqrt(e))
	add(p+"attn_qkv.weight", []uint64{e, q + 2*kv}, i, func(r int, dst []float32) {
		if uint64(r) < q+kv {
			qk(r, dst)
		} else {
			v(r, dst)
		}
	})
	add(p+"attn_gate.weight", []uint64{e, h}, i, c.normal(p+"attn_gate.weight", 2*invSqrt(e)))
	add(p+"attn_output.weight", []uint64{q, e}, i, c.normal(p+"attn_output.weight", c.Residual*invSqrt(q)))
	add(p+"ffn_norm.weight", []uint64{e}, i, c.gain(p+"ffn_norm.weight", 1, 0.1))
	add(p+"ffn_gate.weight", []uint64{e, ff}, i, c.normal(p+"ffn_gate.weight", invSqrt(e)))
	add(p+"ffn_up.weight", []uint64{e, ff}, i, c.normal(p+"ffn_up.weight", invSqrt(e)))
	add(p+"ffn_down.weight", []uint64{ff, e}, i, c.normal(p+"ffn_down.weight", c.Residual*invSqrt(ff)))
}

// sparkParams is Params for spark2_5.
func (s Shape) sparkParams() int64 {
	e, hd := int64(s.Embd), int64(s.HeadDim)
	n := s.headParams()
	for i := range s.Layers {
		h, kv := int64(s.step35Heads(i)), int64(s.KVHeads)
		n += 2*e + e*(h+2*kv)*hd + e*h + h*hd*e + 3*e*int64(s.FFN)
	}
	return n
}
