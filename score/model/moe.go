package model

import (
	"cmp"
	"fmt"

	"ppl.dev/score/ml"
)

// FFN is a layer's feed-forward block: a dense gated MLP or a mixture of
// experts, chosen per layer when the model is bound.
type FFN interface {
	// Forward computes dst = FFN(x): x, dst (n, Embd).
	Forward(b ml.Backend, dst, x ml.Tensor)
}

// Dense is a SwiGLU MLP as an FFN.
type Dense struct{ ml.MLP }

func (d *Dense) Forward(b ml.Backend, dst, x ml.Tensor) { b.MLP(dst, x, &d.MLP) }

// DenseFFN binds prefix+"ffn_gate", "ffn_up" and "ffn_down", a SwiGLU MLP
// of width ff.
func (l *Loader) DenseFFN(prefix string, embd, ff int) *Dense {
	return &Dense{ml.MLP{
		Gate: l.Linear(prefix+"ffn_gate", embd, ff),
		Up:   l.Linear(prefix+"ffn_up", embd, ff),
		Down: l.Linear(prefix+"ffn_down", ff, embd),
	}}
}

// moeOpts are what an architecture fixes about its experts (llama.cpp
// passes them to build_moe_ffn in each model's graph): the gating function
// when the file does not say, and whether weights are renormalized.
type moeOpts struct {
	gating ml.Gating
	norm   bool
	ffn    int // the experts' width when the file has no expert_feed_forward_length (Mixtral's llama files); 0: required
	// sharedFFN is the shared expert's width when the file has no
	// expert_shared_feed_forward_length; 0: an expert's times
	// expert_shared_count.
	sharedFFN int
	act       ml.Act // the experts' activation: SwiGLU (the zero Act), or ReLUSqr for ungated experts (ffn_up_exps, ffn_down_exps; nemotron_h_moe)
	// latent is the experts' latent width's metadata key, read for
	// nemotron_h_moe and maion-coder (moe_latent_size: ffn_latent_down,
	// ffn_latent_up) and kimi-k3 (expert_latent_length: ffn_routed_down,
	// ffn_routed_up and an optional ffn_routed_norm), as llama.cpp reads it
	// for no other architecture; "": none.
	latent string
}

// routingKey is one of the routing keys of the file llama.cpp's graph may
// or may not read: expert_gating_func, expert_weights_norm,
// expert_weights_scale.
type routingKey uint8

const (
	keyGating routingKey = 1 << iota
	keyNorm
	keyScale

	allRoutingKeys = keyGating | keyNorm | keyScale
)

// routingIgnored is, for the architectures whose llama.cpp 0.7.0 graph
// passes build_moe_ffn routing arguments of its own, the keys of the file
// it does not read: there ppl takes moeOpts' gating and renormalization,
// and no scale. Each was probed: a file with the key set otherwise gives
// llama.cpp's log-probs bit for bit, and one it reads changes them
// (TestRoutingKeysRead). deepseek reads expert_weights_scale alone.
var routingIgnored = map[string]routingKey{
	"arctic":       allRoutingKeys,
	"dbrx":         allRoutingKeys,
	"gemma4":       allRoutingKeys,
	"gpt-oss":      allRoutingKeys,
	"granitemoe":   allRoutingKeys,
	"grok":         allRoutingKeys,
	"hunyuan-moe":  allRoutingKeys,
	"llama4":       allRoutingKeys,
	"olmoe":        allRoutingKeys,
	"phimoe":       allRoutingKeys,
	"qwen2moe":     allRoutingKeys,
	"qwen3moe":     allRoutingKeys,
	"qwen35moe":    allRoutingKeys,
	"qwen3next":    allRoutingKeys,
	"qwen4exp":     allRoutingKeys,
	"bailingmoe":   keyGating,
	"ernie4_5-moe": keyGating,
	"deepseek":     keyGating | keyNorm,
	"lfm2moe":      keyNorm | keyScale,
	"minimax-m2":   keyNorm | keyScale,
	"mellum":       keyScale,
}

// latentTensors are the latent projections' names by their width's key.
var latentTensors = map[string]string{"moe_latent_size": "ffn_latent", "expert_latent_length": "ffn_routed"}

// MoEParams are a mixture of experts' hyperparameters, from the
// "<arch>.expert_*" metadata; they go into the model's header.
type MoEParams struct {
	Experts     int     `json:"n_expert"`                  // expert_count
	Used        int     `json:"n_expert_used"`             // expert_used_count
	FFN         int     `json:"n_ff_exp"`                  // expert_feed_forward_length
	Shared      int     `json:"n_expert_shared,omitempty"` // expert_shared_count
	SharedFFN   int     `json:"n_ff_shexp,omitempty"`      // expert_shared_feed_forward_length
	Gating      string  `json:"gating"`                    // expert_gating_func
	Norm        bool    `json:"norm_weights"`              // expert_weights_norm
	Scale       float64 `json:"weights_scale,omitempty"`   // expert_weights_scale
	Groups      int     `json:"n_group,omitempty"`         // expert_group_count
	GroupsUsed  int     `json:"n_group_used,omitempty"`    // expert_group_used_count
	DenseLayers int     `json:"n_dense_lead,omitempty"`    // leading_dense_block_count
	Latent      int     `json:"n_latent,omitempty"`        // moe_latent_size (expert_latent_length): the experts' width in and out (ffn_latent_down, ffn_latent_up; ffn_routed_*); 0: the model's
}

type moeParams struct {
	MoEParams
	gating ml.Gating
	act    ml.Act
	latent string // the latent projections' names' stem (latentTensors)
}

// ungroupedExperts fails l for a file whose experts form groups
// (expert_group_count above 1) in an architecture whose grouped routing
// is not matched to llama.cpp 0.7.0's (llama4, gemma4: a probe found their
// log-probs apart), and reports whether p has none.
func (l *Loader) ungroupedExperts(p *moeParams) bool {
	if p.Groups > 1 {
		l.Failf("metadata %s.expert_group_count = %d: expert groups in %s are not matched to llama.cpp's routing", l.HP.Arch, p.Groups, l.HP.Arch)
		return false
	}
	return true
}

// moeParams reads the experts' hyperparameters (and records them in HP).
func (l *Loader) moeParams(o moeOpts) *moeParams {
	if l.err != nil {
		return nil
	}
	m := meta{l.f, l.HP.Arch}
	p := &moeParams{gating: o.gating, act: o.act, latent: latentTensors[o.latent]}
	var err error
	geti := func(dst *int, key string, def int) {
		if err == nil {
			*dst, err = m.int(key, def)
		}
	}
	geti(&p.Experts, "expert_count", -1)
	geti(&p.Used, "expert_used_count", -1)
	geti(&p.FFN, "expert_feed_forward_length", cmp.Or(o.ffn, -1))
	geti(&p.Shared, "expert_shared_count", 0)
	geti(&p.SharedFFN, "expert_shared_feed_forward_length", cmp.Or(o.sharedFFN, p.FFN*max(p.Shared, 1)))
	geti(&p.Groups, "expert_group_count", 0)
	geti(&p.GroupsUsed, "expert_group_used_count", 0)
	geti(&p.DenseLayers, "leading_dense_block_count", 0)
	if o.latent != "" {
		geti(&p.Latent, o.latent, 0)
	}
	ignored := routingIgnored[l.HP.Arch]
	g := int(o.gating)
	if ignored&keyGating == 0 {
		geti(&g, "expert_gating_func", g)
	}
	if g == 0 { // LLAMA_EXPERT_GATING_FUNC_TYPE_NONE: llama.cpp takes the architecture's default
		g = int(o.gating)
	}
	p.gating = ml.Gating(g)
	p.Norm = o.norm
	if err == nil && ignored&keyScale == 0 {
		p.Scale, err = m.float("expert_weights_scale", 0)
	}
	if err == nil && ignored&keyNorm == 0 {
		p.Norm, err = m.bool("expert_weights_norm", o.norm)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	p.Gating = p.gating.String()
	r := ml.Router{Experts: p.Experts, K: p.Used, Gating: p.gating, Groups: p.Groups, GroupsUsed: p.GroupsUsed, Scale: p.Scale}
	if err := r.Validate(); err != nil {
		l.fail(err)
		return nil
	}
	if p.FFN <= 0 || p.DenseLayers > l.HP.Layers || p.Latent < 0 {
		l.Failf("moe: expert FFN %d, %d leading dense layers of %d, latent width %d", p.FFN, p.DenseLayers, l.HP.Layers, p.Latent)
		return nil
	}
	l.HP.MoE = &p.MoEParams
	return p
}

// MoE is a mixture-of-experts FFN (llama.cpp's build_moe_ffn): router
// logits = ffn_gate_inp·x (+ bias), routed by Router (ml.Router's doc),
// each token's chosen experts (SwiGLU, or ungated ReLU²) weighted and
// summed (Backend.Experts),
// plus an optional shared expert, itself optionally scaled by
// sigmoid(ffn_gate_inp_shexp·x) per token.
type MoE struct {
	Gate    *ml.Matrix // ffn_gate_inp: (Experts, Embd)
	Router  ml.Router
	Experts ml.MLP     // ffn_gate_exps, ffn_up_exps, ffn_down_exps: stacks of Experts
	Shared  *ml.MLP    // ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp, or nil
	SGate   *ml.Matrix // ffn_gate_inp_shexp: (1, Embd), or nil
	// SGateFn is the gate's function: the sigmoid, or as llama.cpp writes
	// it for qwen2moe, silu(g)/g (ml.SiLUDivGate).
	SGateFn ml.GateFn
	// LatentDown and LatentUp, when set (moe_latent_size), take the
	// experts' input to their latent width and their sum back (Nemotron 3
	// Super: ffn_latent_down, ffn_latent_up; Kimi K3: ffn_routed_down,
	// ffn_routed_up), the sum RMS-normed by LatentNorm (ffn_routed_norm,
	// epsilon LatentEps) first when set; the router and the shared expert
	// read the layer's input.
	LatentDown, LatentUp *ml.Matrix
	LatentNorm           *ml.Vector
	LatentEps            float64
}

// MoE binds prefix's experts.
func (l *Loader) MoE(prefix string, p *moeParams) *MoE {
	if p == nil {
		return nil
	}
	E, F, N := l.HP.Embd, p.FFN, p.Experts
	m := &MoE{
		Gate:   l.Linear(prefix+"ffn_gate_inp", E, N),
		Router: l.router(ml.Router{Experts: N, K: p.Used, Gating: p.gating, Groups: p.Groups, GroupsUsed: p.GroupsUsed, Norm: p.Norm, Scale: p.Scale}),
	}
	X := E // the experts' input and output width
	if p.Latent > 0 {
		X = p.Latent
		m.LatentDown, m.LatentUp = l.Linear(prefix+p.latent+"_down", E, X), l.Linear(prefix+p.latent+"_up", X, E)
		if l.Has(prefix + p.latent + "_norm.weight") {
			m.LatentNorm, m.LatentEps = l.Norm(prefix+p.latent+"_norm", X), l.HP.Eps
		}
	}
	if p.act == ml.ReLUSqr {
		m.Experts = ml.MLP{Up: l.Experts(prefix+"ffn_up_exps", N, X, F), Down: l.Experts(prefix+"ffn_down_exps", N, F, X), Act: ml.ReLUSqr}
	} else {
		m.Experts = l.ExpertMLP(prefix, N, X, F)
	}
	if l.Has(prefix + "exp_probs_b.bias") {
		m.Router.SelBias = l.floats(prefix+"exp_probs_b.bias", N)
	}
	if p.Shared > 0 || l.Has(prefix+"ffn_up_shexp.weight") { // required when expert_shared_count says so
		sf := p.SharedFFN
		m.Shared = &ml.MLP{Act: p.act}
		if p.act != ml.ReLUSqr {
			m.Shared.Gate = l.Linear(prefix+"ffn_gate_shexp", E, sf)
		}
		m.Shared.Up, m.Shared.Down = l.Linear(prefix+"ffn_up_shexp", E, sf), l.Linear(prefix+"ffn_down_shexp", sf, E)
		if l.Has(prefix + "ffn_gate_inp_shexp.weight") {
			m.SGate = l.Linear(prefix+"ffn_gate_inp_shexp", E, 1)
		}
	}
	return m
}

// router returns r routing in the model's arithmetic: in the int8 modes as
// llama.cpp's CPU build computes (ml.Router.GGML), so that near ties choose
// its experts and the weights are its bits.
func (l *Loader) router(r ml.Router) ml.Router {
	a := l.Opts.Activations
	r.GGML = a == ActInt8 || a == ActInt8AVX2 || a == ActInt8AMX
	r.GGMLAVX2 = a == ActInt8AVX2
	return r
}

// ExpertMLP binds prefix's n SwiGLU experts of width ff: the stacks
// ffn_gate_exps, ffn_up_exps and ffn_down_exps, or ffn_gate_up_exps (per
// expert its gate rows, then its up rows) for the first two.
func (l *Loader) ExpertMLP(prefix string, n, embd, ff int) ml.MLP {
	var m ml.MLP
	if l.Has(prefix + "ffn_gate_up_exps.weight") {
		m.Gate, m.Up = l.splitGateUp(prefix+"ffn_gate_up_exps", n, embd, ff)
	} else {
		m.Gate = l.Experts(prefix+"ffn_gate_exps", n, embd, ff)
		m.Up = l.Experts(prefix+"ffn_up_exps", n, embd, ff)
	}
	m.Down = l.Experts(prefix+"ffn_down_exps", n, ff, embd)
	return m
}

func (m *MoE) Forward(b ml.Backend, dst, x ml.Tensor) {
	mark := b.Mark()
	logits := b.Alloc(x.Rows(), m.Router.Experts)
	b.Linear(logits, x, m.Gate)
	m.forwardLogits(b, dst, x, logits)
	b.Release(mark)
}

// route routes logits by r, or fails b naming the router and returns nil.
func (m *MoE) route(b ml.Backend, r *ml.Router, logits ml.Tensor) *ml.Routing {
	rt, err := b.Route(logits, r)
	if err != nil {
		b.Fail(fmt.Errorf("%s: %w", m.Gate.Name, err))
		return nil
	}
	return rt
}

// forwardLogits is Forward with the router's logits given (smallthinker's
// router reads the layer's input, not x).
func (m *MoE) forwardLogits(b ml.Backend, dst, x, logits ml.Tensor) {
	n := x.Rows()
	mark := b.Mark()
	if b.Err() != nil {
		b.Release(mark)
		return
	}
	r := m.route(b, &m.Router, logits)
	if r == nil {
		b.Release(mark)
		return
	}
	if m.LatentDown == nil {
		b.Experts(dst, x, &m.Experts, r)
	} else {
		xl, yl := b.Alloc(n, m.LatentDown.Out), b.Alloc(n, m.LatentDown.Out)
		b.Linear(xl, x, m.LatentDown)
		b.Experts(yl, xl, &m.Experts, r)
		if m.LatentNorm != nil {
			b.RMSNorm(yl, yl, m.LatentNorm, m.LatentEps)
		}
		b.Linear(dst, yl, m.LatentUp)
	}
	if m.Shared != nil {
		s := b.Alloc(n, dst.Cols())
		b.MLP(s, x, m.Shared)
		if m.SGate != nil {
			g := b.Alloc(n, 1)
			b.Linear(g, x, m.SGate)
			b.GateMul(s, g, m.SGateFn)
		}
		b.Add(dst, s)
	}
	b.Release(mark)
}
