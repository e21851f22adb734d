package model

import (
	"cmp"
	"fmt"

	"ppl.dev/gguf"
	"ppl.dev/score/ml"
)

func init() { Register("step35", newStep35) }

// step35: StepFun's Step-3.5-Flash, as llama.cpp 0.7.0 runs it: llama's
// block with NeoX RoPE; the head counts per layer (attention.head_count
// and head_count_kv arrays); q and k RMS-normed per head before RoPE where
// the layer has attn_q_norm and attn_k_norm; the layers
// attention.sliding_window_pattern flags (an array, required) attend to
// the last attention.sliding_window keys (required) with RoPE of
// rope.freq_base_swa's base over rope.dimension_count_swa dimensions
// (rope.dimension_count when absent) and without rope_freqs, the others
// with RoPE over half of rope.dimension_count (llama.cpp halves it for
// them) and the first of rope_freqs' factors; a sigmoid gate per head on
// the attention's output where the layer has attn_gate (one row per
// head); each layer's FFN a SwiGLU MLP, or where it has ffn_gate_inp
// experts routed by expert_gating_func (sigmoid when absent) with the
// selection bias exp_probs_b where given, normed and scaled as
// expert_weights_norm and expert_weights_scale say, plus a shared expert
// of expert_shared_feed_forward_length (required); the experts' SwiGLU
// clamped by swiglu_clamp_exp and the shared expert's and the dense MLPs'
// by swiglu_clamp_shexp, per layer where above 1e-6 (ml.ClampSwiGLU); the
// trailing nextn_predict_layers blocks not run; the output matrix
// required.
func newStep35(l *Loader) Network {
	hp := &l.HP
	if !l.dropNextN() {
		return nil
	}
	m := meta{l.f, hp.Arch}
	heads, kv, window, slides, err := m.slidingHeads(hp.Layers)
	baseSWA, dimsSWA := 0.0, 0
	if err == nil {
		baseSWA, dimsSWA, err = m.swaRoPE()
	}
	var clampExp, clampShexp []float32
	if err == nil {
		clampExp, err = step35Clamps(l, "swiglu_clamp_exp", hp.Layers)
	}
	if err == nil {
		clampShexp, err = step35Clamps(l, "swiglu_clamp_shexp", hp.Layers)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	var moe *moeParams
	experts := m.has("expert_count")
	for i := range hp.Layers {
		experts = experts || l.Has(fmt.Sprintf("blk.%d.ffn_gate_inp.weight", i))
	}
	if experts {
		if err := m.require("expert_shared_feed_forward_length"); err != nil { // llama.cpp runs the shared expert in every MoE layer
			l.fail(err)
			return nil
		}
		if moe = l.moeParams(moeOpts{gating: ml.GateSigmoid}); moe == nil {
			return nil
		}
	}
	d := l.baseDecoder(true)
	if l.Err() != nil { // d.rope may be missing
		return nil
	}
	// llama.cpp 0.7.0's freq_scale_swa is 1 for step35 (probed)
	global, local := d.rope.WithDims(d.rope.Dims/2, true), d.rope.Sliding(cmp.Or(baseSWA, d.rope.Base)).WithDims(cmp.Or(dimsSWA, d.rope.Dims), false)
	for _, r := range []struct {
		what string
		err  error
	}{{"global layers' RoPE (half of rope.dimension_count)", global.Validate()}, {"sliding layers' RoPE", local.Validate()}} {
		if r.err != nil {
			l.Failf("%s: %v", r.what, r.err)
			return nil
		}
	}
	E, hd := hp.Embd, hp.HeadDim
	net := l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := l.headsLayer(d, i, p, heads[i], kv[i])
		a := ly.attn
		if a == nil {
			return ly
		}
		ly.qNorm, ly.kNorm = l.optVector(p+"attn_q_norm.weight", hd), l.optVector(p+"attn_k_norm.weight", hd)
		if (ly.qNorm == nil) != (ly.kNorm == nil) {
			l.Failf("layer %d: attn_q_norm and attn_k_norm must come together", i)
		}
		ly.rope = global
		if slides[i] {
			a.Window, ly.rope = window, local
		}
		if l.Has(p + "attn_gate.weight") {
			ly.gate, ly.gateCols = l.Linear(p+"attn_gate", E, a.Heads), spreadCols(a.Heads, hd)
		}
		f := l.moeOrDense(p, moe)
		if m, ok := f.(*MoE); ok && m.Shared == nil {
			l.Failf("layer %d: experts without a shared expert (%sffn_up_shexp.weight)", i, p)
			return ly
		}
		clampFFN(f, ml.ClampSwiGLU, clampExp[i], clampShexp[i])
		ly.ffn = f
		return ly
	})
	if net == nil {
		return nil
	}
	return gatherDecoder{d}
}

// swaRoPE reads the sliding layers' RoPE base and dimensions,
// rope.freq_base_swa and rope.dimension_count_swa, 0 where absent (the
// global layers' then).
func (m meta) swaRoPE() (base float64, dims int, err error) {
	base, err = m.float("rope.freq_base_swa", 0)
	if err == nil {
		dims, err = m.int("rope.dimension_count_swa", 0)
	}
	return base, dims, err
}

// step35Clamps reads the SwiGLU limits of key: one value or one per layer
// (perLayerLen), none when absent; NaN, infinite or negative limits
// refused.
func step35Clamps(l *Loader, key string, n int) ([]float32, error) {
	full := l.HP.Arch + "." + key
	v, ok := l.f.Lookup(full)
	if !ok {
		return make([]float32, n), nil
	}
	layers := n
	if v.Type == gguf.ValueArray && (meta{l.f, l.HP.Arch}).perLayerLen(v.Len(), n) {
		layers = v.Len()
	}
	out, err := layerFloats(l, full, layers)
	if err != nil {
		return nil, err
	}
	for i, x := range out {
		if x < 0 {
			return nil, fmt.Errorf("metadata %s: value %d is %v", full, i, x)
		}
	}
	return out[:n], nil
}

// sharedClamps reads swiglu_clamp_exp (step35Clamps) and
// swiglu_clamp_shexp, which is the experts' limits when absent, as
// llama.cpp reads them for glm5-next and deepseek4.
func sharedClamps(l *Loader, n int) (exp, shexp []float32, err error) {
	if exp, err = step35Clamps(l, "swiglu_clamp_exp", n); err != nil {
		return nil, nil, err
	}
	if !(meta{l.f, l.HP.Arch}).has("swiglu_clamp_shexp") {
		return exp, exp, nil
	}
	shexp, err = step35Clamps(l, "swiglu_clamp_shexp", n)
	return exp, shexp, err
}

// clampFFN clamps a layer's SwiGLUs as llama.cpp's swiglu_clamp_exp and
// swiglu_clamp_shexp say (the clamped SwiGLU act: ml.ClampSwiGLU or
// ml.SwiGLUClampIn; clampGLU): the experts' by exp, the shared expert's and
// a dense MLP's by shexp.
func clampFFN(f FFN, act ml.Act, exp, shexp float32) {
	switch f := f.(type) {
	case *MoE:
		clampGLU(&f.Experts, act, exp)
		if f.Shared != nil {
			clampGLU(f.Shared, act, shexp)
		}
	case *Dense:
		clampGLU(&f.MLP, act, shexp)
	}
}

// clampGLU makes m's SwiGLU the clamped one act of limit, where above
// llama.cpp's 1e-6 (a smaller limit leaves the plain SwiGLU, as llama.cpp
// does for Step-3.5 and Maple alike).
func clampGLU(m *ml.MLP, act ml.Act, limit float32) {
	if limit > 1e-6 {
		m.Act, m.Limit = act, limit
	}
}

// spreadCols are the columns that spread one value per head to each of
// the head's width columns: h repeated width times, for each head h.
func spreadCols(heads, width int) []int {
	cols := make([]int, 0, heads*width)
	for h := range heads {
		for range width {
			cols = append(cols, h)
		}
	}
	return cols
}
