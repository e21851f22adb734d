package mkmodel

import (
	"fmt"
	"math"

	"ppl.dev/gguf"
)

// RWKV-7 (arch rwkv7: the RWKV-7 "Goose" models) has no attention: each
// layer mixes over time with a matrix state per head of HeadDim (the
// wkv.head_size; Embd/HeadDim heads) and over channels with a ReLU² MLP of
// FFN, each reading its LayerNormed input blended with the previous
// token's (token shift). Its keys: wkv.head_size, the low-rank widths of
// the decay, the in-context learning rate, the value residual and the
// gate (rwkvRanks), attention.head_count 0 and a LayerNorm epsilon, as
// the converter writes them.
//
// ARWKV-7 (arch arwkv7: ARWKV, RWKV-7 time mixing distilled into Qwen 2.5)
// has RWKV-7's time mix without the gate (lerp_fused of 5 rows, gate rank
// 0, as the converter writes a checkpoint with wkv_has_gate false) between
// RMS norms (attn_norm, ffn_norm, no biases, no norm of the embeddings)
// and a SwiGLU MLP; its files give token_shift_count 1.
func (s Shape) rwkv7() bool { return s.Arch == "rwkv7" || s.Arch == "arwkv7" }

// RWKV7Presets are the shapes of the RWKV-7 G1 models (0.1B to 7.2B: their
// widths, depths and FFNs of 4 widths, heads of 64) with RWKV World's
// 65,536-token vocabulary.
var RWKV7Presets = []Preset{
	{"0.1B", rwkv7Preset(768, 12)},
	{"1.5B", rwkv7Preset(2048, 24)},
	{"2.9B", rwkv7Preset(2560, 32)},
	{"7.2B", rwkv7Preset(4096, 32)},
}

func rwkv7Preset(embd, layers int) Shape {
	return Shape{Arch: "rwkv7", Embd: embd, Layers: layers, Heads: embd / 64, KVHeads: embd / 64, HeadDim: 64, FFN: 4 * embd,
		Context: 1 << 20, Vocab: 65536, RopeBase: 10000, Eps: 1e-5}
}

// rwkvRanks are the low-rank widths of RWKV-7's decay, in-context
// learning rate, value residual and gate, as the converter computes them
// from the width when the checkpoint does not give them (calc_lora_rank:
// max(1, round(width^p · m / 32)) · 32; the 0.1B model's 64, 64, 32, 128);
// arwkv7's converter's fixed 64, 64, 32 and no gate.
func (s Shape) rwkvRanks() (decay, iclr, value, gate int) {
	if s.Arch == "arwkv7" {
		return 64, 64, 32, 0
	}
	r := func(p, m float64) int { return max(1, int(math.RoundToEven(math.Pow(float64(s.Embd), p)*m/32))) * 32 }
	return r(0.5, 1.8), r(0.5, 1.8), r(0.5, 1.3), r(0.8, 0.6)
}

// checkRWKV validates the fields of the RWKV architectures (rwkv7,
// arwkv7; rwkv6, rwkv6qwen2: rwkv6.go).
func (s Shape) checkRWKV() error {
	if !s.rwkv7() && !s.rwkv6() {
		return nil
	}
	switch {
	case s.Embd%s.HeadDim != 0 || s.rwkv7() && s.HeadDim%64 != 0:
		// ggml-cpu's WKV7 steps over 64 columns (AVX-512): smaller heads
		// would read and write past them.
		return fmt.Errorf("shape: %s's heads of %d must divide the width %d (for RWKV-7, be a multiple of 64)", s.Arch, s.HeadDim, s.Embd)
	case s.rwkv6() && s.Heads*s.HeadDim != s.Embd:
		return fmt.Errorf("shape: %s's %d heads of %d must fill the width %d", s.Arch, s.Heads, s.HeadDim, s.Embd)
	case s.Arch != "rwkv6qwen2" && s.rwkv6() && s.KVHeads != s.Heads:
		return fmt.Errorf("shape: %s has no KV groups (%d KV heads for %d heads)", s.Arch, s.KVHeads, s.Heads)
	case s.Tied:
		return fmt.Errorf("shape: %s is untied (llama.cpp's %s requires output.weight)", s.Arch, s.Arch)
	case s.moe() || s.Window != 0 || s.NoPE || s.YaRN != 0:
		return fmt.Errorf("shape: %s has no experts, no window and no positions", s.Arch)
	}
	return nil
}

// rwkv7Keys writes RWKV-7's sizes.
func (c *Config) rwkv7Keys(w *gguf.Writer) {
	a := c.Arch
	dw, da, dv, dg := c.rwkvRanks()
	if a == "arwkv7" { // one token shift (the time mix's)
		w.Add(a+".token_shift_count", uint32(1))
	}
	w.Add(a+".feed_forward_length", uint32(c.FFN))
	w.Add(a+".attention.head_count", uint32(0))
	if a == "rwkv7" { // LayerNorms (arwkv7's RMS norms read layer_norm_rms_epsilon)
		w.Add(a+".attention.layer_norm_epsilon", float32(c.Eps))
	}
	w.Add(a+".wkv.head_size", uint32(c.HeadDim))
	w.Add(a+".attention.decay_lora_rank", uint32(dw))
	w.Add(a+".attention.iclr_lora_rank", uint32(da))
	w.Add(a+".attention.value_residual_mix_lora_rank", uint32(dv))
	w.Add(a+".attention.gate_lora_rank", uint32(dg))
}

// rwkv7Layer adds layer i's tensors in the converter's shapes. The blend
// weights are in [0, 1]; w0 keeps the decays exp(-0.606531·sigmoid(w))
// between about 0.55 and 0.95, as trained models' are.
func (c *Config) rwkv7Layer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, f := uint64(c.Embd), uint64(c.FFN)
	dw, da, dv, dg := c.rwkvRanks()
	lora := func(name string, r int, in, out float64) {
		add(p+"time_mix_"+name+"1.weight", []uint64{e, uint64(r)}, i, c.normal(p+"time_mix_"+name+"1.weight", in*invSqrt(e)))
		add(p+"time_mix_"+name+"2.weight", []uint64{uint64(r), e}, i, c.normal(p+"time_mix_"+name+"2.weight", out*invSqrt(uint64(r))))
	}
	arwkv := c.Arch == "arwkv7"
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	if !arwkv {
		add(p+"attn_norm.bias", []uint64{e}, i, c.normal(p+"attn_norm.bias", 0.1))
		add(p+"attn_norm_2.weight", []uint64{e}, i, c.gain(p+"attn_norm_2.weight", 1, 0.1))
		add(p+"attn_norm_2.bias", []uint64{e}, i, c.normal(p+"attn_norm_2.bias", 0.1))
	}
	add(p+"time_mix_w0.weight", []uint64{e}, i, c.normal(p+"time_mix_w0.weight", 1))
	lora("w", dw, 1, 0.5)
	add(p+"time_mix_a0.weight", []uint64{e}, i, c.normal(p+"time_mix_a0.weight", 0.5))
	lora("a", da, 1, 0.5)
	add(p+"time_mix_v0.weight", []uint64{e}, i, c.normal(p+"time_mix_v0.weight", 1))
	if i == 0 { // unused, as in the converter's files, and as wide as the in-context rate's
		lora("v", da, 1, 0.5)
	} else {
		lora("v", dv, 1, 0.5)
	}
	blends := uint64(6)
	if arwkv {
		blends = 5
	} else {
		lora("g", dg, 1, 1)
	}
	add(p+"time_mix_lerp_fused.weight", []uint64{e, 1, 1, blends}, i, c.uniform(p+"time_mix_lerp_fused.weight", 0, 1))
	add(p+"time_mix_k_k.weight", []uint64{e}, i, c.gain(p+"time_mix_k_k.weight", 0.85, 0.1))
	add(p+"time_mix_k_a.weight", []uint64{e}, i, c.gain(p+"time_mix_k_a.weight", 1, 0.1))
	add(p+"time_mix_r_k.weight", []uint64{e}, i, c.normal(p+"time_mix_r_k.weight", 0.5))
	add(p+"time_mix_key.weight", []uint64{e, e}, i, c.normal(p+"time_mix_key.weight", invSqrt(e)))
	add(p+"time_mix_value.weight", []uint64{e, e}, i, c.normal(p+"time_mix_value.weight", invSqrt(e)))
	add(p+"time_mix_receptance.weight", []uint64{e, e}, i, c.normal(p+"time_mix_receptance.weight", invSqrt(e)))
	add(p+"time_mix_ln.weight", []uint64{e}, i, c.gain(p+"time_mix_ln.weight", 1, 0.1))
	add(p+"time_mix_ln.bias", []uint64{e}, i, c.normal(p+"time_mix_ln.bias", 0.1))
	add(p+"time_mix_output.weight", []uint64{e, e}, i, c.normal(p+"time_mix_output.weight", c.Residual*invSqrt(e)))
	if arwkv { // Qwen's SwiGLU MLP
		add(p+"ffn_norm.weight", []uint64{e}, i, c.gain(p+"ffn_norm.weight", 1, 0.1))
		add(p+"ffn_gate.weight", []uint64{e, f}, i, c.normal(p+"ffn_gate.weight", invSqrt(e)))
		add(p+"ffn_down.weight", []uint64{f, e}, i, c.normal(p+"ffn_down.weight", c.Residual*invSqrt(f)))
		add(p+"ffn_up.weight", []uint64{e, f}, i, c.normal(p+"ffn_up.weight", invSqrt(e)))
		return
	}
	add(p+"channel_mix_lerp_k.weight", []uint64{e, 1, 1}, i, c.uniform(p+"channel_mix_lerp_k.weight", 0, 1))
	add(p+"channel_mix_key.weight", []uint64{e, f}, i, c.normal(p+"channel_mix_key.weight", invSqrt(e)))
	add(p+"channel_mix_value.weight", []uint64{f, e}, i, c.normal(p+"channel_mix_value.weight", 2*c.Residual*invSqrt(f)))
}

// rwkv7Params is Params for rwkv7 (the embeddings' LayerNorm and the
// output norm's bias beside headParams) and arwkv7.
func (s Shape) rwkv7Params() int64 {
	e, f := int64(s.Embd), int64(s.FFN)
	dw, da, dv, dg := s.rwkvRanks()
	n := s.headParams()
	norms, blends, ffn := 4*e, 6*e, e+2*e*f // pre-norms, lerp_fused, the channel mix
	if s.Arch == "arwkv7" {
		norms, blends, ffn = 2*e, 5*e, 3*e*f
	} else {
		n += 3 * e
	}
	for i := range s.Layers {
		r := dv
		if i == 0 {
			r = da
		}
		n += norms + 3*e + 2*e*int64(dw+da+r+dg) + blends + 3*e + 4*e*e + 2*e + ffn
	}
	return n
}
