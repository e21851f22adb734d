package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// Granite Switch (arch graniteswitch) is granite's block and multipliers
// with q, k and v fused in attn_qkv and on every projection a LoRA delta
// per slot (blk.N.<proj>.lora_a, .lora_b: switchAdapters + 1 slots of
// rank switchRank, slot 0 random too, unlike a converted file's zeros, so
// that every token's delta counts); the adapters are switched on by the
// vocabulary's last switchAdapters tokens, whose embeddings are those of
// tokens 1, 2, ...
func (s Shape) graniteSwitch() bool { return s.Arch == "graniteswitch" }

// switchAdapters is adapters.count, switchRank adapters.lora_rank.
const switchAdapters, switchRank = 2, 8

// switchKeys writes the adapters' keys and granite's multipliers.
func (c *Config) switchKeys(w *gguf.Writer) {
	a := c.Arch
	act, sub := make([]int32, switchAdapters), make([]int32, switchAdapters)
	for i := range act {
		act[i], sub[i] = int32(c.Vocab-switchAdapters+i), int32(i+1)
	}
	w.Add(a+".adapters.count", uint32(switchAdapters))
	w.Add(a+".adapters.lora_rank", uint32(switchRank))
	w.Add(a+".adapters.token_ids_activate", act)
	w.Add(a+".adapters.token_ids_substitute", sub)
}

// switchLayer adds layer i's tensors.
func (c *Config) switchLayer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, q, kv, ff, res := uint64(c.Embd), uint64(c.Heads*c.HeadDim), uint64(c.KVHeads*c.HeadDim), uint64(c.FFN), c.Residual
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	add(p+"attn_qkv.weight", []uint64{e, q + 2*kv}, i, c.normal(p+"attn_qkv.weight", 1.2*invSqrt(e)))
	add(p+"attn_output.weight", []uint64{q, e}, i, c.normal(p+"attn_output.weight", res*invSqrt(q)))
	add(p+"ffn_norm.weight", []uint64{e}, i, c.gain(p+"ffn_norm.weight", 1, 0.1))
	add(p+"ffn_gate.weight", []uint64{e, ff}, i, c.normal(p+"ffn_gate.weight", invSqrt(e)))
	add(p+"ffn_up.weight", []uint64{e, ff}, i, c.normal(p+"ffn_up.weight", invSqrt(e)))
	add(p+"ffn_down.weight", []uint64{ff, e}, i, c.normal(p+"ffn_down.weight", res*invSqrt(ff)))
	r, slots := uint64(switchRank), uint64(switchAdapters+1)
	for _, pr := range []struct {
		name    string
		in, out uint64
	}{{"attn_q", e, q}, {"attn_k", e, kv}, {"attn_v", e, kv}, {"attn_output", q, e}, {"ffn_gate", e, ff}, {"ffn_up", e, ff}, {"ffn_down", ff, e}} {
		a, b := p+pr.name+".lora_a", p+pr.name+".lora_b"
		add(a, []uint64{pr.in, r, slots}, i, c.normal(a, invSqrt(pr.in)))
		add(b, []uint64{r, pr.out, slots}, i, c.normal(b, 0.3*invSqrt(r)))
	}
}

// switchParams is Params for graniteswitch.
func (s Shape) switchParams() int64 {
	e, ff := int64(s.Embd), int64(s.FFN)
	q, kv := int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	lora := int64(switchRank) * int64(switchAdapters+1) * (7*e + 2*q + 2*kv + 3*ff) // each projection in + out
	return s.headParams() + int64(s.Layers)*(2*e+e*(q+2*kv)+q*e+3*e*ff+lora)
}
