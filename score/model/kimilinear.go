package model

import (
	"cmp"
	"fmt"
	"slices"

	"ppl.dev/score/ml"
)

// kimi-linear: Moonshot's Kimi-Linear (48B-A3B), as llama.cpp 0.7.0 runs
// it: deepseek2's decoder (deepseek2.go) whose layers with
// attention.head_count_kv 0 (a per-layer array) are Kimi Delta Attention
// (KDA) instead of latent attention, and whose latent attention has no
// RoPE (the rope.dimension_count part of q and k is used as it is); its
// experts routed by expert_gating_func (required), always renormalized (as
// llama.cpp fixes it, whatever expert_weights_norm says) and scaled by
// expert_weights_scale. A KDA layer on the normed rows h:
//
//   - q, k, v = attn_q·h, attn_k·h, attn_v·h (heads of kda.head_dim),
//     each through its own causal convolution of ssm.conv_kernel taps
//     and SiLU (ssm_conv1d_q, _k, _v; no bias), q and k L2-normed per
//     head;
//   - a log-decay per key channel, g = ssm_a[h]·softplus(ssm_dt.bias +
//     ssm_f_b·ssm_f_a·h) (ssm_a holding -exp(A_log), as the converter
//     writes it), and beta = sigmoid(ssm_beta·h);
//   - the gated delta rule with those gates (ml.DeltaRule.KeyGates: each
//     row of the state decays by its own channel's gate);
//   - the output RMS-normed per head (ssm_norm) times
//     sigmoid(ssm_g_b·ssm_g_a·h), then attn_output.
//
// bailingmoe3: Ling 3 (7.9B-A1.3B, 124B-A5.1B), the same hybrid as
// llama.cpp 0.7.0 runs it, with KDA's safe gate g = kda.gate_lower_bound
// · sigmoid((ssm_f_a·h + ssm_dt.bias)·a[h]) (ssm_f_a as wide as the heads:
// no ssm_f_b; kda.safe_gate must not be false and the bound must be below
// 0, as llama.cpp asserts), the output gate sigmoid(ssm_g_a·h) (no
// ssm_g_b), latent attention with RoPE on its rope part (normal pairs, the
// score scale 1/sqrt(key_length_mla) whatever the RoPE's scaling)
// and a sigmoid gate per head (attn_gate) before attn_output, experts
// routed with the selection bias exp_probs_b (required), normed and scaled
// as the file says.
type kimiLinear struct{ *deepseek2 }

// kda is a Kimi Delta Attention layer's weights.
type kda struct {
	q, k, v, o   *ml.Matrix   // attn_q, attn_k, attn_v: (heads·dim, embd); attn_output
	convQ, convK *ml.Vector   // ssm_conv1d_q, _k: channels × taps
	convV        *ml.Vector   // ssm_conv1d_v
	fa, fb       *ml.Matrix   // ssm_f_a: (dim, embd), ssm_f_b: (heads·dim, dim)
	ga, gb       *ml.Matrix   // ssm_g_a, ssm_g_b: the output gate's
	beta         *ml.Matrix   // ssm_beta: (heads, embd)
	a, dt        *ml.Vector   // ssm_a (one per head), ssm_dt.bias (one per channel)
	norm         *ml.Vector   // ssm_norm: dim
	dr           ml.DeltaRule // heads (KHeads = VHeads) of Dim
	dConv        int
	eps          float64 // the output norm's (RMS norms')
	l2eps        float64 // q's and k's L2 norms': the RMS norms', glm5-next's 1e-6
	// lowerBound, when not 0, is the safe gate's bound (bailingmoe3's: fb
	// and gb nil, fa and ga as wide as the heads; kimi-k3's, glm5-next's);
	// aCols holds for each of head h's columns a[h] (bailingmoe3) or -a[h]
	// (kimi-k3, glm5-next, whose graphs negate the product: the same bits).
	lowerBound float32
	aCols      *ml.Vector
}

// kimiKDA reads the KDA layers' shape: which layers are KDA (head_count_kv
// 0), the head size and the convolution's taps; nil after an error.
func (l *Loader) kimiKDA() (kdaLayers []bool, dim, dConv int) {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	kv, err := m.layerInts("attention.head_count_kv", hp.Layers, -1)
	if err == nil {
		dim, err = m.positive("kda.head_dim", -1)
	}
	if err == nil {
		dConv, err = m.positive("ssm.conv_kernel", -1)
	}
	if err == nil && hp.Arch != "glm5-next" {
		err = m.require("expert_gating_func") // llama.cpp requires it (glm5-next's defaults to sigmoid)
	}
	if err != nil {
		l.fail(err)
		return nil, 0, 0
	}
	kdaLayers = make([]bool, hp.Layers)
	for i, n := range kv {
		kdaLayers[i] = n == 0
	}
	return kdaLayers, dim, dConv
}

// bindKDA binds layer prefix p's KDA weights; lowerBound, when not 0, is
// the safe gate's (bailingmoe3's, kimi-k3's, glm5-next's).
func (l *Loader) bindKDA(p string, heads, dim, dConv int, lowerBound float32) *kda {
	E, C := l.HP.Embd, heads*dim
	ling3, k3 := l.HP.Arch == "bailingmoe3", l.HP.Arch == "kimi-k3"
	neg := k3 || l.HP.Arch == "glm5-next" // ssm_a 1-D, the safe gate's product negated
	x := &kda{dConv: dConv, eps: l.HP.Eps, l2eps: l.HP.Eps, lowerBound: lowerBound,
		dr: ml.DeltaRule{KHeads: heads, VHeads: heads, Dim: dim, KeyGates: true, State: l.Opts.SSMStateDtype}}
	x.q, x.k, x.v = l.Linear(p+"attn_q", E, C), l.Linear(p+"attn_k", E, C), l.Linear(p+"attn_v", E, C)
	x.convQ = l.tensorVector(p+"ssm_conv1d_q.weight", dConv, 1, C)
	x.convK = l.tensorVector(p+"ssm_conv1d_k.weight", dConv, 1, C)
	x.convV = l.tensorVector(p+"ssm_conv1d_v.weight", dConv, 1, C)
	switch {
	case ling3:
		x.fa, x.ga = l.Linear(p+"ssm_f_a", E, C), l.Linear(p+"ssm_g_a", E, C)
	case k3: // the output gate of full rank
		x.fa, x.fb = l.Linear(p+"ssm_f_a", E, dim), l.Linear(p+"ssm_f_b", dim, C)
		x.ga = l.Linear(p+"ssm_g", E, C)
	default:
		x.fa, x.fb = l.Linear(p+"ssm_f_a", E, dim), l.Linear(p+"ssm_f_b", dim, C)
		x.ga, x.gb = l.Linear(p+"ssm_g_a", E, dim), l.Linear(p+"ssm_g_b", dim, C)
	}
	if l.HP.Arch == "glm5-next" { // as FLA, whatever the RMS norms'
		x.l2eps = 1e-6
	}
	x.beta = l.Linear(p+"ssm_beta", E, heads)
	if neg { // one value per head, a 1-D tensor (kimi-linear's is (1, heads))
		x.a = l.tensorVector(p+"ssm_a", heads)
	} else {
		x.a = l.tensorVector(p+"ssm_a", 1, heads)
	}
	if lowerBound != 0 && x.a != nil {
		cols := make([]float32, C)
		for c := range cols {
			cols[c] = x.a.V[c/dim]
			if neg {
				cols[c] = -cols[c]
			}
		}
		x.aCols = l.constVector(x.a.Name, cols)
	}
	x.dt = l.Vector(p+"ssm_dt.bias", C)
	x.norm = l.Norm(p+"ssm_norm", dim)
	x.o = l.Linear(p+"attn_output", C, E)
	if err := x.dr.Validate(); err != nil {
		l.fail(err)
	}
	return x
}

// forward computes the KDA mixer for the normed rows h into dst, deltaRows
// rows at a time from a zero convolution history and state.
func (x *kda) forward(b ml.Backend, dst, h ml.Tensor) {
	rc := b.(ml.Recurrent)
	n, C := h.Rows(), x.dr.VHeads*x.dr.Dim
	mark := b.Mark()
	state := b.Alloc(C, x.dr.Dim)
	hist := [3]ml.Tensor{b.Alloc(x.dConv-1, C), b.Alloc(x.dConv-1, C), b.Alloc(x.dConv-1, C)}
	rc.Zero(state)
	for _, t := range hist {
		rc.Zero(t)
	}
	for r0 := 0; r0 < n; r0 += deltaRows {
		r1 := min(n, r0+deltaRows)
		x.block(b, b.Slice(dst, r0, r1), b.Slice(h, r0, r1), state, hist)
	}
	b.Release(mark)
}

// block computes the mixer for consecutive rows of a window.
func (x *kda) block(b ml.Backend, dst, h, state ml.Tensor, hist [3]ml.Tensor) {
	rc := b.(ml.Recurrent)
	n, H, D := h.Rows(), x.dr.VHeads, x.dr.Dim
	C := H * D
	mark := b.Mark()
	qkv := [3]ml.Tensor{b.Alloc(n, C), b.Alloc(n, C), b.Alloc(n, C)}
	proj := b.Mark()
	raw := [3]ml.Tensor{b.Alloc(n, C), b.Alloc(n, C), b.Alloc(n, C)}
	b.Linears(raw[:], h, []*ml.Matrix{x.q, x.k, x.v})
	for i, w := range []*ml.Vector{x.convQ, x.convK, x.convV} {
		rc.ConvSiLU(qkv[i], raw[i], hist[i], w, nil)
	}
	b.Release(proj)
	q, k, v := qkv[0], qkv[1], qkv[2]
	qh, kh := b.View(q, n*H, D), b.View(k, n*H, D)
	rc.L2Norm(qh, qh, x.l2eps)
	rc.L2Norm(kh, kh, x.l2eps)

	g, beta := b.Alloc(n, C), b.Alloc(n, H)
	low := b.Alloc(n, D)
	b.Linear(beta, h, x.beta)
	if x.fb != nil {
		b.Linear(low, h, x.fa)
		b.Linear(g, low, x.fb)
	} else {
		b.Linear(g, h, x.fa)
	}
	if x.lowerBound != 0 { // bound · sigmoid((g + dt)·aCols), beta = sigmoid(beta), op by op as llama.cpp
		rw := b.(ml.RWKV)
		b.AddRows(g, x.dt)
		b.(ml.AltUp).MulCols(g, g, x.aCols)
		rw.Sigmoid(g)
		b.Scale(g, float64(x.lowerBound))
		rw.Sigmoid(beta)
	} else {
		rc.DeltaGates(beta, g, x.a, x.dt)
	}
	o := b.Alloc(n, C)
	rc.DeltaNet(o, q, k, v, g, beta, state, &x.dr)

	oh := b.View(o, n*H, D)
	b.RMSNorm(oh, oh, x.norm, x.eps)
	if x.gb != nil {
		b.Linear(low, h, x.ga)
		b.Linear(g, low, x.gb)
	} else {
		b.Linear(g, h, x.ga)
	}
	b.GateMul(o, g, ml.SigmoidGate)
	b.Linear(dst, o, x.o)
	b.Release(mark)
}

// Check requires the latent attention and the recurrent operations
// (bailingmoe3: also ml.AltUp's MulCols and ml.RWKV's Sigmoid).
func (m kimiLinear) Check(b ml.Backend) error {
	if err := m.deepseek2.Check(b); err != nil {
		return err
	}
	_, rc := b.(ml.Recurrent)
	_, au := b.(ml.AltUp)
	_, rw := b.(ml.RWKV)
	safe := slices.ContainsFunc(m.layers, func(ly mlaLayer) bool { return ly.kda != nil && ly.kda.lowerBound != 0 })
	if !rc || safe && (!au || !rw) {
		return fmt.Errorf("%s needs the recurrent operations (ml.Recurrent: ConvSiLU, Zero, L2Norm, DeltaGates, DeltaNet, GatherCols; ml.AltUp's MulCols and ml.RWKV's Sigmoid for KDA's safe gate), which backend %T lacks", m.hp.Arch, b)
	}
	return nil
}

// ssmStateDtype is the KDA layers' state dtype, for Info.
func (m kimiLinear) ssmStateDtype() string {
	for _, ly := range m.layers {
		if ly.kda != nil {
			return cmp.Or(ly.kda.dr.State, "f32")
		}
	}
	return "f32"
}

// positions: no layer of Kimi-Linear turns q and k; Ling 3's latent
// attention does.
func (m kimiLinear) positions() string {
	if !m.noRoPE {
		return ""
	}
	return "none (Kimi Delta Attention, and latent attention without RoPE)"
}

// kdaBound reads KDA's optional safe gate (kimi-k3's, glm5-next's): its
// lower bound, below 0, or 0 for kimi-linear's gate.
func (l *Loader) kdaBound() (float32, error) {
	m := meta{l.f, l.HP.Arch}
	if !m.has("kda.gate_lower_bound") {
		return 0, nil
	}
	lb, err := m.float("kda.gate_lower_bound", 0)
	if err == nil && !(lb < 0) {
		err = fmt.Errorf("metadata %s.kda.gate_lower_bound = %g, want below 0 (the bound of the decay's log-gate)", l.HP.Arch, lb)
	}
	return float32(lb), err
}

// ling3Hparams reads bailingmoe3's safe gate: its lower bound, or 0 after
// an error.
func (l *Loader) ling3Hparams() float32 {
	m := meta{l.f, l.HP.Arch}
	safe, err := m.bool("kda.safe_gate", true)
	lb := 0.0
	if err == nil {
		err = m.require("kda.gate_lower_bound")
	}
	if err == nil {
		lb, err = m.float("kda.gate_lower_bound", 0)
	}
	switch {
	case err != nil:
		l.fail(err)
	case !safe:
		l.Failf("metadata %s.kda.safe_gate = false: llama.cpp 0.7.0 runs only the safe gate (it asserts it)", l.HP.Arch)
	case lb >= 0:
		l.Failf("metadata %s.kda.gate_lower_bound = %g, want below 0 (llama.cpp asserts it)", l.HP.Arch, lb)
	default:
		return float32(lb)
	}
	return 0
}
