package model

import "ppl.dev/score/ml"

func init() { Register("k2-horizon", newK2Horizon) }

// k2-horizon: K2-Horizon, as llama.cpp 0.7.0 runs it: llama's block with
// NeoX RoPE whose RMS norms (attn_norm, ffn_norm, output_norm) norm each
// row's attention.group_norm_groups equal slices apart (1 when absent; the
// weight spans the row); q and k from attn_q and attn_k, RMS-normed per
// head before RoPE where the file has attn_q_norm and attn_k_norm, each
// head by its own weights (a row per head, flat or [head, heads]); the
// attention's output times log2(1 + 2^(attn_gate·h)) per element where the
// file has attn_gate (ml.Softplus2Gate, as llama.cpp computes it:
// softplus(g·ln 2)/ln 2), before attn_output. With expert_count, the layers
// from leading_dense_block_count on are mixtures: experts routed by
// expert_gating_func (sigmoid when absent) with exp_probs_b.bias where
// given, normed and scaled as the file says, a shared expert where
// expert_shared_count says; and with attention.value_expert_count their
// values are MoVA's: value_expert_used_count value experts (attn_v_exps)
// routed by attn_v_gate with the same gating, normed and scaled, and
// attn_v_gate.bias as their selection bias, each silu(W·h), weighted and
// summed. The dense layers' FFN is a SwiGLU MLP, their values attn_v.
func newK2Horizon(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	groups, err := m.int("attention.group_norm_groups", 0)
	nv, nvUsed := 0, 0
	if err == nil {
		nv, err = m.int("attention.value_expert_count", 0)
	}
	if err == nil {
		nvUsed, err = m.int("attention.value_expert_used_count", 0)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	groups = max(groups, 1) // llama.cpp reads 0 as 1
	switch {
	case hp.Embd%groups != 0:
		l.Failf("metadata %s.attention.group_norm_groups = %d does not divide the width %d", hp.Arch, groups, hp.Embd)
		return nil
	case nv < 0 || nvUsed < 0 || nv > 0 && (nvUsed == 0 || nvUsed > nv) || nv == 0 && nvUsed != 0:
		l.Failf("metadata %s.attention.value_expert_used_count = %d of %d value experts (llama.cpp 0.7.0 asserts at least 1 and at most all when there are value experts, else 0)", hp.Arch, nvUsed, nv)
		return nil
	}
	var moe *moeParams
	if m.has("expert_count") {
		if moe = l.moeParams(moeOpts{gating: ml.GateSigmoid}); moe == nil {
			return nil
		}
		if nv > 0 && moe.gating == ml.GateSoftmaxSelected {
			l.Failf("metadata %s.expert_gating_func = %d: K2-Horizon's value router takes softmax or sigmoid (llama.cpp 0.7.0 aborts)", hp.Arch, int(moe.gating))
			return nil
		}
	}
	d := l.baseDecoder(true)
	if l.Err() != nil {
		return nil
	}
	d.normGroups, d.qkNormHeads = groups, true
	E, hd := hp.Embd, hp.HeadDim
	qd, kvd := hp.Heads*hd, hp.KVHeads*hd
	return l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := decoderLayer{
			attnNorm: l.Norm(p+"attn_norm", E),
			q:        l.Linear(p+"attn_q", E, qd),
			k:        l.Linear(p+"attn_k", E, kvd),
			o:        l.Linear(p+"attn_output", qd, E),
			ffnNorm:  l.Norm(p+"ffn_norm", E),
		}
		if l.Has(p + "attn_q_norm.weight") {
			ly.qNorm = l.headNorms(p+"attn_q_norm", hp.Heads)
		}
		if l.Has(p + "attn_k_norm.weight") {
			ly.kNorm = l.headNorms(p+"attn_k_norm", hp.KVHeads)
		}
		if l.Has(p + "attn_gate.weight") {
			ly.gate, ly.gateFn = l.Linear(p+"attn_gate", E, qd), ml.Softplus2Gate
		}
		if moe == nil || i < moe.DenseLayers {
			ly.v = l.Linear(p+"attn_v", E, kvd)
			ly.ffn = l.DenseFFN(p, E, hp.FFN)
			return ly
		}
		if nv > 0 {
			ly.values = l.valueExperts(p, moe, nv, nvUsed, kvd)
		} else {
			ly.v = l.Linear(p+"attn_v", E, kvd)
		}
		if e := l.MoE(p, moe); e != nil {
			ly.ffn = e
		}
		return ly
	})
}

// valueExperts binds K2-Horizon's MoVA at prefix: the router attn_v_gate
// whose bias (attn_v_gate.bias) is a selection bias, not the logits', and
// n value experts attn_v_exps of width out, used of them per token, each
// silu(W·x) without a down projection, routed as the layer's experts.
func (l *Loader) valueExperts(prefix string, p *moeParams, n, used, out int) *MoE {
	gate := l.Linear(prefix+"attn_v_gate", l.HP.Embd, n)
	if gate == nil {
		return nil
	}
	sel := gate.Bias
	gate.Bias = nil
	return &MoE{
		Gate:    gate,
		Router:  l.router(ml.Router{Experts: n, K: used, Gating: p.gating, SelBias: sel, Norm: p.Norm, Scale: p.Scale}),
		Experts: ml.MLP{Up: l.Experts(prefix+"attn_v_exps", n, l.HP.Embd, out), Act: ml.SiLU},
	}
}
