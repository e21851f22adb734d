package model

import (
	"fmt"
	"math"

	"ppl.dev/gguf"
	"ppl.dev/score/ml"
)

// dots3note: rednote's dots3-note (288B-A19B), as llama.cpp 0.7.0 runs it:
// deepseek2's decoder (deepseek2.go) with q compression in every layer,
// whose layers are of two kinds, told by attention.sliding_window_pattern
// (an array of a flag per layer):
//
//   - full layers: DeepSeek-V3.2's sparse attention (DSA): past
//     attention.indexer.top_k tokens each query reads the keys its
//     lightning indexer scores highest (NeoX RoPE on the indexer's heads,
//     its key LayerNormed with epsilon 1e-6, as deepseek32's);
//     attention.indexer.types must flag each of them (llama.cpp binds the
//     indexer there only);
//   - sliding layers: the last attention.sliding_window keys, no indexer,
//     a latent of their own sizes (attention.kv_lora_rank_swa,
//     key_length_mla_swa, value_length_mla_swa) and RoPE of base
//     rope.freq_base_swa.
//
// In both, the shared rope key k_pe is RMS-normed (attn_k_norm) before
// RoPE, the heads' outputs are gated by sigmoid(attn_gate·h) per head
// before attn_output (as bailingmoe3's), the scores scaled by
// 1/sqrt(the layer's key_length_mla) whatever the RoPE's scaling, which
// turns q and k as it stands (the sliding layers' too). The experts are routed by
// expert_gating_func (required) with exp_probs_b (required), normed and
// scaled as the file says, plus expert_shared_count shared experts as one
// MLP of that many experts' width; the trailing nextn_predict_layers blocks
// are not run.

// dots3Sliding reads dots3note's sliding layers (of hp.Layers, after the
// NextN blocks) and returns their latent geometry, beside d's full layers'
// (whose indexers full flags); nil after an error.
func (l *Loader) dots3Sliding(d *deepseek2, full []bool) (*mlaGeom, []bool) {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	key := hp.Arch + ".attention.sliding_window_pattern"
	var sliding []bool
	var window, kvr, dk, vhead, blocks int
	var base float64
	err := m.require("attention.sliding_window_pattern", "rope.freq_base_swa")
	if v, ok := l.f.Lookup(key); ok && v.Type != gguf.ValueArray {
		err = fmt.Errorf("metadata %s: want an array of a flag per layer (llama.cpp reads no period for dots3note)", key)
	}
	geti := func(dst *int, key string) {
		if err == nil {
			*dst, err = m.positive(key, -1)
		}
	}
	geti(&blocks, "block_count")
	geti(&window, "attention.sliding_window")
	geti(&kvr, "attention.kv_lora_rank_swa")
	geti(&dk, "attention.key_length_mla_swa")
	geti(&vhead, "attention.value_length_mla_swa")
	if err == nil {
		base, err = m.float("rope.freq_base_swa", 0)
	}
	if err == nil {
		sliding, err = m.layerFlags("attention.sliding_window_pattern", blocks, false)
	}
	switch {
	case err != nil:
		l.fail(err)
		return nil, nil
	case dk <= d.rot:
		l.Failf("metadata %s.attention.key_length_mla_swa = %d: want above rope.dimension_count = %d", hp.Arch, dk, d.rot)
		return nil, nil
	case base <= 0:
		l.Failf("metadata %s.rope.freq_base_swa = %g, want > 0", hp.Arch, base)
		return nil, nil
	}
	sliding = sliding[:hp.Layers]
	for i, s := range sliding {
		if !s && !full[i] {
			l.Failf("metadata %s.attention.indexer.types: full layer %d has no indexer, which llama.cpp would run without its tensors", hp.Arch, i)
			return nil, nil
		}
	}
	H := hp.Heads
	return &mlaGeom{kvr: kvr, nope: dk - d.rot, vhead: vhead, rope: d.full.rope.WithBase(base), headCols: spreadCols(H, vhead),
		attn: ml.Attn{Heads: H, KVHeads: 1, HeadDim: kvr + d.rot, Scale: float64(1 / float32(math.Sqrt(float64(dk)))), Window: window}}, sliding
}
