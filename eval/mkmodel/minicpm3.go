package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// MiniCPM3 (arch minicpm3: MiniCPM3-4B) is llama's block with latent
// attention in its plain (non-absorbed) form: q = attn_q_b·RMSNorm(
// attn_q_a·x), [c | k_pe] = attn_kv_a_mqa·x, [k_nope | v] per head =
// attn_kv_b·RMSNorm(c); key heads of HeadDim unrotated and RopeDims
// rotated values (k_pe shared by all heads), value heads of HeadDim; a
// q rank of half the width and a KV rank of twice the head. llama.cpp
// fixes its multipliers (embeddings × 12, each residual branch ×
// 1.4/sqrt(layers), the final norm's rows × 256/width). With OrigContext,
// LongRoPE's factors over the rotated pairs (phi3.go).
//
// PLM (arch plm: PLM-1.8B) is the same latent attention with q =
// attn_q·x, without the multipliers, with an ungated ReLU² MLP (ffn_up,
// ffn_down) and the output tied to the embeddings (llama.cpp refuses an
// output matrix).
func (s Shape) minicpm3() bool { return s.Arch == "minicpm3" || s.plm() }

func (s Shape) plm() bool { return s.Arch == "plm" }

// minicpm3QRank and minicpm3KVRank are the ranks of q and of the latent.
func (s Shape) minicpm3QRank() int  { return s.Embd / 2 }
func (s Shape) minicpm3KVRank() int { return 2 * s.HeadDim }

// minicpm3Keys writes the latent attention's sizes.
func (c *Config) minicpm3Keys(w *gguf.Writer) {
	a := c.Arch
	if !c.plm() {
		w.Add(a+".attention.q_lora_rank", uint32(c.minicpm3QRank()))
	}
	w.Add(a+".attention.kv_lora_rank", uint32(c.minicpm3KVRank()))
	w.Add(a+".rope.dimension_count", uint32(c.ropeDims()))
	if c.OrigContext > 0 {
		w.Add(a+".rope.scaling.original_context_length", uint32(c.OrigContext))
	}
}

// minicpm3Layer adds layer i's tensors.
func (c *Config) minicpm3Layer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, hd, h, ff, res := uint64(c.Embd), uint64(c.HeadDim), uint64(c.Heads), uint64(c.FFN), c.Residual
	rot, qr, kvr := uint64(c.ropeDims()), uint64(c.minicpm3QRank()), uint64(c.minicpm3KVRank())
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	if c.plm() {
		add(p+"attn_q.weight", []uint64{e, h * (hd + rot)}, i, c.normal(p+"attn_q.weight", 1.2*invSqrt(e)))
	} else {
		add(p+"attn_q_a.weight", []uint64{e, qr}, i, c.normal(p+"attn_q_a.weight", invSqrt(e)))
		add(p+"attn_q_a_norm.weight", []uint64{qr}, i, c.gain(p+"attn_q_a_norm.weight", 1, 0.1))
		add(p+"attn_q_b.weight", []uint64{qr, h * (hd + rot)}, i, c.normal(p+"attn_q_b.weight", 1.2*invSqrt(qr)))
	}
	add(p+"attn_kv_a_mqa.weight", []uint64{e, kvr + rot}, i, c.normal(p+"attn_kv_a_mqa.weight", 1.2*invSqrt(e)))
	add(p+"attn_kv_a_norm.weight", []uint64{kvr}, i, c.gain(p+"attn_kv_a_norm.weight", 1, 0.1))
	add(p+"attn_kv_b.weight", []uint64{kvr, h * 2 * hd}, i, c.normal(p+"attn_kv_b.weight", invSqrt(kvr)))
	add(p+"attn_output.weight", []uint64{h * hd, e}, i, c.normal(p+"attn_output.weight", res*invSqrt(h*hd)))
	add(p+"ffn_norm.weight", []uint64{e}, i, c.gain(p+"ffn_norm.weight", 1, 0.1))
	if !c.plm() {
		add(p+"ffn_gate.weight", []uint64{e, ff}, i, c.normal(p+"ffn_gate.weight", invSqrt(e)))
	}
	add(p+"ffn_up.weight", []uint64{e, ff}, i, c.normal(p+"ffn_up.weight", invSqrt(e)))
	add(p+"ffn_down.weight", []uint64{ff, e}, i, c.normal(p+"ffn_down.weight", res*invSqrt(ff)))
}

// minicpm3Params is Params for minicpm3.
func (s Shape) minicpm3Params() int64 {
	e, hd, h, ff := int64(s.Embd), int64(s.HeadDim), int64(s.Heads), int64(s.FFN)
	rot, qr, kvr := int64(s.ropeDims()), int64(s.minicpm3QRank()), int64(s.minicpm3KVRank())
	n := s.headParams()
	if s.OrigContext > 0 {
		n += rot // the long and short factors, a pair each
	}
	q, mlp := e*qr+qr+qr*h*(hd+rot), 3*e*ff
	if s.plm() {
		q, mlp = e*h*(hd+rot), 2*e*ff
	}
	for range s.Layers {
		n += 2*e + q + e*(kvr+rot) + kvr + kvr*h*2*hd + h*hd*e + mlp
	}
	return n
}
