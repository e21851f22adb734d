package model

import (
	"fmt"
	"math"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

func init() { Register("graniteswitch", newGraniteSwitch) }

// graniteswitch: IBM's Granite Switch (a Granite model with LoRA adapters
// switched on by tokens), as llama.cpp 0.7.0 runs it: granite's decoder
// and multipliers (logit_scale required; RoPE in every layer, or none when
// rope.scaling.finetuned is false), q, k and v fused in attn_qkv; every
// projection (q, k, v, attn_output, ffn_gate, ffn_up, ffn_down) plus a
// low-rank delta B_s·(A_s·x) of the token's slot s (blk.N.<proj>.lora_a
// and .lora_b, stacks of adapters.count + 1 slots of adapters.lora_rank;
// slot 0 the base's, whatever the file holds there). The slot comes from
// a router attention over the window so far: each token's key is
// +adapters.router_gain (15 when absent) for the adapter tokens
// (adapters.token_ids_activate, adapter i's slot i + 1) and −gain for the
// others, its value its slot (0 for the others), the query 1; the output
// clamped to [0, adapters.count] and rounded (switchSlots). An adapter
// token's embedding is that of its substitute
// (adapters.token_ids_substitute); its target stays itself.
func newGraniteSwitch(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	err := m.require("logit_scale", "adapters.count", "adapters.lora_rank", "adapters.token_ids_activate", "adapters.token_ids_substitute")
	adapters, rank, gain := 0, 0, 0.0
	rope := true
	if err == nil {
		adapters, err = m.int("adapters.count", -1)
	}
	if err == nil {
		rank, err = m.int("adapters.lora_rank", -1)
	}
	if err == nil {
		gain, err = m.float("adapters.router_gain", 15)
	}
	if err == nil {
		rope, err = m.bool("rope.scaling.finetuned", true)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	if adapters < 0 || adapters > 4096 || rank < 0 || rank > 4096 {
		l.Failf("metadata %s.adapters: %d adapters of rank %d (llama.cpp 0.7.0 takes at most 4096 of each)", hp.Arch, adapters, rank)
		return nil
	}
	act, err := l.f.Int32s(hp.Arch + ".adapters.token_ids_activate")
	var sub []int32
	if err == nil {
		sub, err = l.f.Int32s(hp.Arch + ".adapters.token_ids_substitute")
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	if len(act) != adapters || len(sub) != adapters {
		l.Failf("metadata %s.adapters.token_ids_activate and token_ids_substitute: %d and %d token ids for %d adapters", hp.Arch, len(act), len(sub), adapters)
		return nil
	}
	s := &graniteSwitch{slot: map[int32]int32{}, sub: map[int32]int32{}, gain: float32(gain), adapters: adapters}
	for i, t := range act { // a later adapter of the same token wins, as llama.cpp's map
		if sub[i] < 0 || int(sub[i]) >= hp.Vocab {
			l.Failf("metadata %s.adapters.token_ids_substitute: token id %d out of range [0, %d)", hp.Arch, sub[i], hp.Vocab)
			return nil
		}
		s.slot[t], s.sub[t] = int32(i+1), sub[i]
	}
	d := l.baseDecoder(false)
	if l.Err() != nil {
		return nil
	}
	if !l.graniteScales(d, graniteDefaults{}) {
		return nil
	}
	if !l.wholeHeads(d.rope) {
		return nil
	}
	s.decoder = d
	E, F, slots := hp.Embd, hp.FFN, adapters+1
	qd, kvd := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	lora := func(p, proj string, in, out int) *ml.MLP {
		return &ml.MLP{
			Up:   l.StackNamed(p+proj+".lora_a", slots, in, rank),
			Down: l.StackNamed(p+proj+".lora_b", slots, rank, out),
			Act:  ml.Identity,
		}
	}
	net := l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := decoderLayer{attnNorm: l.Norm(p+"attn_norm", E), o: l.Linear(p+"attn_output", qd, E), ffnNorm: l.Norm(p+"ffn_norm", E), noRoPE: !rope}
		if qkv := l.LinearRows(p+"attn_qkv", E, qd, kvd, kvd); qkv != nil {
			ly.q, ly.k, ly.v = qkv[0], qkv[1], qkv[2]
		}
		ly.ffn = l.DenseFFN(p, E, F)
		s.lora = append(s.lora, switchLoRA{
			q: lora(p, "attn_q", E, qd), k: lora(p, "attn_k", E, kvd), v: lora(p, "attn_v", E, kvd), o: lora(p, "attn_output", qd, E),
			gate: lora(p, "ffn_gate", E, F), up: lora(p, "ffn_up", E, F), down: lora(p, "ffn_down", F, E),
		})
		return ly
	})
	if net == nil {
		return nil
	}
	return s
}

// graniteSwitch is granite's decoder with a LoRA delta on every
// projection, its adapter chosen per token (newGraniteSwitch's doc).
type graniteSwitch struct {
	*decoder
	lora      []switchLoRA    // per layer
	slot, sub map[int32]int32 // an adapter token's slot and substitute
	gain      float32         // adapters.router_gain
	adapters  int             // adapters.count
}

// switchLoRA are a layer's adapters: each projection's stacks A (Up) and
// B (Down), one matrix per slot.
type switchLoRA struct{ q, k, v, o, gate, up, down *ml.MLP }

// Check requires GLU (the MLP's activation between its deltas).
func (m *graniteSwitch) Check(b ml.Backend) error {
	if _, ok := b.(ml.Gemma4); !ok {
		return fmt.Errorf("graniteswitch needs a gated activation on its own (ml.Gemma4's GLU), which backend %T lacks", b)
	}
	return nil
}

// switchSlots returns the tokens the embeddings read (adapter tokens'
// substitutes) and each token's slot, as llama.cpp's router computes it:
// its causal attention over the window's keys ±gain and values the slots
// (nn.GGMLScalarAttention: ggml-cpu's flash attention over an F16 cache),
// clamped to [0, adapters] and rounded half away from zero (ggml's
// CLAMP, ROUND, then the cast to int32).
func (m *graniteSwitch) switchSlots(tokens []int32) (emb, slots []int32) {
	n := len(tokens)
	emb, slots = make([]int32, n), make([]int32, n)
	k, v, out := make([]float32, n), make([]float32, n), make([]float32, n)
	for t, tok := range tokens {
		emb[t], k[t] = tok, -m.gain
		if s, ok := m.slot[tok]; ok {
			emb[t], k[t], v[t] = m.sub[tok], m.gain, float32(s)
		}
	}
	nn.GGMLScalarAttention(out, k, v)
	for t, x := range out {
		x = min(max(x, 0), float32(m.adapters))
		slots[t] = int32(math.Round(float64(x)))
	}
	return emb, slots
}

func (m *graniteSwitch) Forward(b ml.Backend, tokens []int32) ml.Tensor {
	hp, n := m.hp, len(tokens)
	emb, slots := m.switchSlots(tokens)
	ones := make([]float32, n)
	for i := range ones {
		ones[i] = 1
	}
	r := &ml.Routing{K: 1, Expert: slots, Weight: ones}
	delta := func(dst, x ml.Tensor, a *ml.MLP) { // dst += B_s·(A_s·x)
		mark := b.Mark()
		d := b.Alloc(x.Rows(), dst.Cols())
		b.Experts(d, x, a, r)
		b.Add(dst, d)
		b.Release(mark)
	}
	x := b.Alloc(n, hp.Embd)
	b.Embed(x, m.tokenEmbd, emb)
	if m.embScale != 0 {
		b.Scale(x, m.embScale)
	}
	qd, kvd := m.attn.Heads*m.attn.HeadDim, m.attn.KVHeads*m.attn.HeadDim
	for i := range m.layers {
		ly, lo := &m.layers[i], &m.lora[i]
		mark := b.Mark()
		h := b.Alloc(n, hp.Embd)
		m.norm(b, h, x, ly.attnNorm, nil)
		q, k, v := b.Alloc(n, qd), b.Alloc(n, kvd), b.Alloc(n, kvd)
		b.Linears([]ml.Tensor{q, k, v}, h, []*ml.Matrix{ly.q, ly.k, ly.v})
		delta(q, h, lo.q)
		delta(k, h, lo.k)
		delta(v, h, lo.v)
		if !ly.noRoPE {
			b.RoPE(q, m.attn.Heads, m.rope)
			b.RoPE(k, m.attn.KVHeads, m.rope)
		}
		att, o := b.Alloc(n, qd), b.Alloc(n, hp.Embd)
		b.Attention(att, q, k, v, i, &m.attn)
		b.Linear(o, att, ly.o)
		delta(o, att, lo.o)
		if m.resScale != 0 {
			b.Scale(o, m.resScale)
		}
		b.Add(x, o)
		m.norm(b, h, x, ly.ffnNorm, nil)
		mlp := &ly.ffn.(*Dense).MLP
		g, u := b.Alloc(n, hp.FFN), b.Alloc(n, hp.FFN)
		b.Linears([]ml.Tensor{g, u}, h, []*ml.Matrix{mlp.Gate, mlp.Up})
		delta(g, h, lo.gate)
		delta(u, h, lo.up)
		b.(ml.Gemma4).GLU(g, g, u, ml.SwiGLU)
		b.Linear(o, g, mlp.Down)
		delta(o, g, lo.down)
		if m.resScale != 0 {
			b.Scale(o, m.resScale)
		}
		b.Add(x, o)
		b.Release(mark)
	}
	m.norm(b, x, x, m.outputNorm, nil)
	return x
}
