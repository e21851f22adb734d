package model

import (
	"fmt"

	"ppl.dev/score/ml"
)

func init() { Register("hrm_text", newHRMText) }

// hrm_text: DFM-Mimir's hierarchical reasoning model, as llama.cpp 0.7.0
// runs it: two stacks of hrm.layers_per_stack blocks (L: blk.0 on, H: the
// next), each block llama's (NeoX RoPE, a SwiGLU MLP) with RMS norms
// without weights and the attention's output times sigmoid(attn_gate·h)
// per element, each stack ending in an RMS norm without a weight; zH the
// token embeddings times embedding_scale (when not 0), zL hrm.z_l_init in
// every row; hrm.h_cycles times: hrm.l_cycles times zL = L(zH + zL), then
// zH = H(zH + zL); the logits output·zH (tied to the embeddings when the
// file has no output). Every pass attends over the window on its own:
// block_count, which must be layers_per_stack · h_cycles · (l_cycles + 1),
// is the number of passes' layers, each with its own cache.
// hrmMaxLayers is llama.cpp's LLAMA_MAX_LAYERS, which bounds the passes'
// layers.
const hrmMaxLayers = 512

type hrmText struct {
	*decoder
	lps, hc, lc int
	zlInit      *ml.Vector
	ones        *ml.Vector // the stacks' final norms' (no) weights
}

func newHRMText(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	err := m.require("hrm.layers_per_stack", "hrm.h_cycles", "hrm.l_cycles")
	lps, hc, lc := 0, 0, 0
	if err == nil {
		lps, err = m.positive("hrm.layers_per_stack", -1)
	}
	if err == nil {
		hc, err = m.positive("hrm.h_cycles", -1)
	}
	if err == nil {
		lc, err = m.positive("hrm.l_cycles", -1)
	}
	scale := 0.0
	if err == nil {
		scale, err = m.float("embedding_scale", 0)
	}
	if err == nil && (hp.Layers != lps*hc*(lc+1) || hp.Layers > hrmMaxLayers) {
		err = fmt.Errorf("metadata %s.block_count = %d: want layers_per_stack · h_cycles · (l_cycles + 1) = %d · %d · %d, one per pass's layer, at most llama.cpp's %d", hp.Arch, hp.Layers, lps, hc, lc+1, hrmMaxLayers)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	d := l.normlessDecoder(true)
	if l.Err() != nil {
		return nil
	}
	d.embScale = scale
	E, qd, kvd := hp.Embd, hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	ones := l.ones("(no weight)", E)
	blocks := make([]decoderLayer, 2*lps)
	for i := range blocks {
		p := fmt.Sprintf("blk.%d.", i)
		ly := decoderLayer{attnNorm: ones, ffnNorm: ones, o: l.Linear(p+"attn_output", qd, E), gate: l.Linear(p+"attn_gate", E, qd)}
		ly.q, ly.k, ly.v = l.qkv(p, qd, kvd, kvd)
		ly.ffn = l.DenseFFN(p, E, hp.FFN)
		blocks[i] = ly
	}
	h := &hrmText{decoder: d, lps: lps, hc: hc, lc: lc, zlInit: l.Vector("hrm.z_l_init", E), ones: ones}
	if l.Err() != nil {
		return nil
	}
	for pass := range hc * (lc + 1) {
		stack := 0 // L
		if pass%(lc+1) == lc {
			stack = lps // H
		}
		for i := range lps {
			d.layers = append(d.layers, blocks[stack+i])
		}
	}
	return h
}

// Check requires ml.Recurrent's Zero.
func (h *hrmText) Check(b ml.Backend) error {
	if _, ok := b.(ml.Recurrent); !ok {
		return fmt.Errorf("hrm_text needs Zero (ml.Recurrent), which backend %T lacks", b)
	}
	return nil
}

func (h *hrmText) Forward(b ml.Backend, tokens []int32) ml.Tensor {
	hp, n := h.hp, len(tokens)
	rc := b.(ml.Recurrent)
	zh, zl, in := b.Alloc(n, hp.Embd), b.Alloc(n, hp.Embd), b.Alloc(n, hp.Embd)
	b.Embed(zh, h.tokenEmbd, tokens)
	if h.embScale != 0 {
		b.Scale(zh, h.embScale)
	}
	rc.Zero(zl)
	b.AddRows(zl, h.zlInit)
	// stack runs the next pass's layers on zH + zL into dst.
	slot := 0
	stack := func(dst ml.Tensor) {
		rc.Zero(in)
		b.Add(in, zh)
		b.Add(in, zl)
		h.runLayers(b, in, nil, slot, slot+h.lps)
		slot += h.lps
		b.RMSNorm(dst, in, h.ones, hp.Eps)
	}
	for range h.hc {
		for range h.lc {
			stack(zl)
		}
		stack(zh)
	}
	return zh
}
