package model

import "ppl.dev/score/ml"

func init() { Register("smallthinker", newSmallThinker) }

// smallthinker: SmallThinker (4B-A0.6B, 21B-A3B), as llama.cpp 0.7.0 runs
// it: llama's block with NeoX RoPE; in files with
// attention.sliding_window above 0, layers attend to the last 4096 keys
// (llama.cpp's fixed window, whatever the key says) but every
// attention.sliding_window_pattern-th from the first (4 when absent), with
// RoPE of rope.freq_base_swa's base where given, and every fourth layer
// from the first has no RoPE (llama.cpp's step, which a model of 4 layers
// never takes: all its layers turn q and k); without, every layer is
// global with RoPE. Each layer's FFN is experts (ffn_gate_inp, and
// ffn_gate_exps, ffn_up_exps, ffn_down_exps of expert_feed_forward_length)
// whose router reads the layer's input, before the attention norm; routed
// by expert_gating_func (required: llama.cpp aborts without it),
// renormalized and never scaled (llama.cpp fixes both), each expert a
// ReGLU, max(gate, 0)·up.
func newSmallThinker(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	window, err := m.int("attention.sliding_window", 0)
	period := 4
	if err == nil {
		period, err = m.int("attention.sliding_window_pattern", 4)
	}
	baseSWA := 0.0
	if err == nil {
		baseSWA, err = m.float("rope.freq_base_swa", 0)
	}
	if err == nil {
		err = m.require("expert_gating_func")
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	moe := l.moeParams(moeOpts{gating: ml.GateSoftmax, norm: true})
	if moe == nil {
		return nil
	}
	moe.Norm, moe.Scale = true, 0 // whatever the file says
	d := l.baseDecoder(true)
	if l.Err() != nil { // d.rope may be missing
		return nil
	}
	local, localRoPE := d.sliding(smallThinkerWindow, baseSWA)
	return l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := l.preNormLayer(p, "ffn_norm")
		if window > 0 {
			if period == 0 || i%period != 0 {
				ly.attn, ly.rope = local, localRoPE
			}
			ly.noRoPE = hp.Layers != 4 && i%4 == 0 // llama.cpp's step of 4, unless it is the depth
		}
		e := l.MoE(p, moe)
		if e == nil {
			return ly
		}
		e.Experts.Act = ml.ReGLU
		ly.ffn, ly.rawRouter = e, true
		return ly
	})
}

// smallThinkerWindow is llama.cpp's sliding window for SmallThinker, which
// it sets whatever attention.sliding_window says.
const smallThinkerWindow = 4096
