package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// OpenELM (arch openelm: Apple's OpenELM 270M to 3B) is llama's block with
// its width scaled per layer: head_count, head_count_kv and
// feed_forward_length are arrays (here Heads in even layers and twice it in
// odd ones, KVHeads in all, FFN plus 64 times i mod 3), q, k and v fused
// in attn_qkv, q and k RMS-normed per head before NeoX RoPE, and the
// output the token embedding (tied, always).
func (s Shape) openelm() bool { return s.Arch == "openelm" }

// openelmHeads is layer i's heads, KV heads and MLP width.
func (s Shape) openelmHeads(i int) (heads, kv, ffn int) {
	return s.Heads * (1 + i%2), s.KVHeads, s.FFN + 64*(i%3)
}

// openelmKeys writes openelm's per-layer head counts and widths.
func (c *Config) openelmKeys(w *gguf.Writer) {
	a := c.Arch
	heads, kv, ffn := make([]int32, c.Layers), make([]int32, c.Layers), make([]int32, c.Layers)
	for i := range c.Layers {
		h, k, f := c.openelmHeads(i)
		heads[i], kv[i], ffn[i] = int32(h), int32(k), int32(f)
	}
	w.Add(a+".attention.head_count", heads)
	w.Add(a+".attention.head_count_kv", kv)
	w.Add(a+".feed_forward_length", ffn)
}

// openelmLayer adds layer i's tensors.
func (c *Config) openelmLayer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	h, kv, f := c.openelmHeads(i)
	e, hd, ff := uint64(c.Embd), uint64(c.HeadDim), uint64(f)
	q, qkv := uint64(h)*hd, uint64(h+2*kv)*hd
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	add(p+"attn_qkv.weight", []uint64{e, qkv}, i, c.normal(p+"attn_qkv.weight", 1.2*invSqrt(e)))
	add(p+"attn_q_norm.weight", []uint64{hd}, i, c.gain(p+"attn_q_norm.weight", 1, 0.2))
	add(p+"attn_k_norm.weight", []uint64{hd}, i, c.gain(p+"attn_k_norm.weight", 1, 0.2))
	add(p+"attn_output.weight", []uint64{q, e}, i, c.normal(p+"attn_output.weight", c.Residual*invSqrt(q)))
	add(p+"ffn_norm.weight", []uint64{e}, i, c.gain(p+"ffn_norm.weight", 1, 0.1))
	add(p+"ffn_gate.weight", []uint64{e, ff}, i, c.normal(p+"ffn_gate.weight", invSqrt(e)))
	add(p+"ffn_up.weight", []uint64{e, ff}, i, c.normal(p+"ffn_up.weight", invSqrt(e)))
	add(p+"ffn_down.weight", []uint64{ff, e}, i, c.normal(p+"ffn_down.weight", c.Residual*invSqrt(ff)))
}

// openelmParams is Params for openelm.
func (s Shape) openelmParams() int64 {
	e, hd := int64(s.Embd), int64(s.HeadDim)
	n := s.headParams()
	for i := range s.Layers {
		h, kv, f := s.openelmHeads(i)
		n += 2*e + e*int64(h+2*kv)*hd + 2*hd + int64(h)*hd*e + 3*e*int64(f)
	}
	return n
}
