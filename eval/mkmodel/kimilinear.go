package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// Kimi-Linear (arch kimi-linear: Moonshot's Kimi-Linear-48B-A3B) is a
// hybrid of Kimi Delta Attention and latent attention, three KDA layers to
// each MLA one, as Kimi-Linear's: a KDA layer projects q, k and v
// (attn_q, attn_k, attn_v), each through its own short causal convolution
// of SSMConv taps and SiLU (ssm_conv1d_q, _k, _v), q and k L2-normed per
// head; a gate per key channel, g = A[h]·softplus(ssm_f_b·ssm_f_a·x +
// ssm_dt.bias) (ssm_a holding -exp(A_log)), and beta = sigmoid(ssm_beta·x)
// drive the gated delta rule; its output RMS-normed per head (ssm_norm)
// times sigmoid(ssm_g_b·ssm_g_a·x), then attn_output. An MLA layer is
// DeepSeek's latent attention without q compression and without RoPE
// (attn_q; attn_kv_a_mqa, attn_kv_a_norm, attn_k_b, attn_v_b). After
// DenseLead dense layers, sigmoid-routed experts with a selection bias,
// renormalized and scaled, and a shared expert.
//
// Ling 3 (arch bailingmoe3) is the same hybrid with KDA's safe gate, g =
// kda.gate_lower_bound·sigmoid((ssm_f_a·x + ssm_dt.bias)·A[h]) (ssm_f_a
// as wide as the heads, no ssm_f_b), the output gate sigmoid(ssm_g_a·x)
// (no ssm_g_b), and latent attention with RoPE on its rope part and a
// sigmoid gate per head (attn_gate) before attn_output.
//
// Kimi K3 (arch kimi-k3) is kimi-linear's hybrid with KDA's safe gate
// over ssm_f_b·ssm_f_a·x (kda.gate_lower_bound -5), a full-rank output gate
// (ssm_g) and ssm_a a 1-D tensor; latent attention with q compressed to
// half the width (attn_q_a, attn_q_a_norm, attn_q_b) and an elementwise
// sigmoid gate (attn_gate); SiTU (β 1.5, λ 2) in every MLP; the routed
// experts at half the width (expert_latent_length: ffn_routed_down, the
// experts, ffn_routed_norm, ffn_routed_up); and cross-layer residual
// attention over checkpoints banked every k3Block layers, scored by
// attn_res_score, ffn_res_score and output_res_score (small weights, as
// the pseudo-queries K3 learns from zero: a soft mix, not one winner).
func (s Shape) kdaHybrid() bool { return s.Arch == "kimi-linear" || s.ling3() || s.kimiK3() }

// ling3 reports bailingmoe3, kdaHybrid's Ling 3 form.
func (s Shape) ling3() bool { return s.Arch == "bailingmoe3" }

// kimiK3 reports kimi-k3, kdaHybrid's Kimi K3 form.
func (s Shape) kimiK3() bool { return s.Arch == "kimi-k3" }

// k3Block is kimi-k3's attn_res.block_size: checkpoints banked before
// layers 0 and 2.
const k3Block = 2

// k3Latent is kimi-k3's routed experts' width (expert_latent_length).
func (s Shape) k3Latent() int { return s.Embd / 2 }

// kimiMLA reports whether layer i is an MLA layer: every fourth.
func (s Shape) kimiMLA(i int) bool { return (i+1)%4 == 0 }

// kimiKVLora, kimiRope and kimiNope are the MLA layers' latent width and
// the key heads' unrotated and "rotated" parts (Kimi's 512, 64 and 128,
// scaled to the head): the rope part is never rotated.
func (s Shape) kimiKVLora() int { return s.HeadDim }
func (s Shape) kimiRope() int   { return s.HeadDim / 2 }
func (s Shape) kimiNope() int   { return s.HeadDim }

// checkKimiLinear validates kimi-linear's fields.
func (s Shape) checkKimiLinear() error {
	if s.kdaHybrid() && (s.SSMConv < 2 || s.HeadDim%2 != 0 || s.Experts == 0 || s.SharedFFN != s.ExpertFFN) {
		return fmt.Errorf("shape: %s needs --ssm-conv taps (%d), an even head size (%d), experts and a shared expert as wide as one (%d, %d)", s.Arch, s.SSMConv, s.HeadDim, s.SharedFFN, s.ExpertFFN)
	}
	return nil
}

// kimiKeys writes kimi-linear's metadata: the per-layer KV heads (0 for
// the KDA layers), the MLA and KDA sizes and the routing.
func (c *Config) kimiKeys(w *gguf.Writer) {
	a := c.Arch
	kv := make([]int32, c.Layers)
	for i := range c.Layers {
		if c.kimiMLA(i) {
			kv[i] = 1 // one latent KV head (attn_k_b, attn_v_b: the absorbed form)
		}
	}
	w.Add(a+".attention.head_count_kv", kv)
	w.Add(a+".attention.kv_lora_rank", uint32(c.kimiKVLora()))
	w.Add(a+".attention.key_length_mla", uint32(c.kimiNope()+c.kimiRope()))
	w.Add(a+".attention.value_length_mla", uint32(c.HeadDim))
	w.Add(a+".rope.dimension_count", uint32(c.kimiRope()))
	w.Add(a+".ssm.conv_kernel", uint32(c.SSMConv))
	w.Add(a+".kda.head_dim", uint32(c.HeadDim))
	w.Add(a+".leading_dense_block_count", uint32(c.DenseLead))
	w.Add(a+".expert_shared_count", uint32(1))
	w.Add(a+".expert_gating_func", uint32(2)) // sigmoid
	w.Add(a+".expert_weights_norm", true)
	w.Add(a+".expert_weights_scale", float32(2.446))
	if c.ling3() || c.kimiK3() {
		w.Add(a+".kda.gate_lower_bound", float32(-5))
	}
	if c.kimiK3() {
		w.Add(a+".attention.q_lora_rank", uint32(c.Embd/2))
		w.Add(a+".activation.situ_beta", float32(1.5))
		w.Add(a+".activation.situ_linear_beta", float32(2))
		w.Add(a+".expert_latent_length", uint32(c.k3Latent()))
		w.Add(a+".attn_res.block_size", uint32(k3Block))
	}
}

// k3Head adds kimi-k3's final residual attention's scores.
func (c *Config) k3Head(add func(name string, shape []uint64, layer int, fill RowFunc)) {
	add("output_res_score.weight", []uint64{uint64(c.Embd)}, -1, c.normal("output_res_score.weight", 0.1))
}

// kimiLayer adds layer i's tensors.
func (c *Config) kimiLayer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, hd, h := uint64(c.Embd), uint64(c.HeadDim), uint64(c.Heads)
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	if c.kimiK3() {
		for _, n := range []string{"attn_res_score", "ffn_res_score"} {
			add(p+n+".weight", []uint64{e}, i, c.normal(p+n+".weight", 0.1))
		}
	}
	if c.kimiMLA(i) {
		kvr, rot, nope := uint64(c.kimiKVLora()), uint64(c.kimiRope()), uint64(c.kimiNope())
		if c.kimiK3() {
			ql := e / 2
			add(p+"attn_q_a.weight", []uint64{e, ql}, i, c.normal(p+"attn_q_a.weight", invSqrt(e)))
			add(p+"attn_q_a_norm.weight", []uint64{ql}, i, c.gain(p+"attn_q_a_norm.weight", 1, 0.1))
			add(p+"attn_q_b.weight", []uint64{ql, h * (nope + rot)}, i, c.normal(p+"attn_q_b.weight", 1.2*invSqrt(ql)))
		} else {
			add(p+"attn_q.weight", []uint64{e, h * (nope + rot)}, i, c.normal(p+"attn_q.weight", 1.2*invSqrt(e)))
		}
		add(p+"attn_kv_a_mqa.weight", []uint64{e, kvr + rot}, i, c.normal(p+"attn_kv_a_mqa.weight", 1.2*invSqrt(e)))
		add(p+"attn_kv_a_norm.weight", []uint64{kvr}, i, c.gain(p+"attn_kv_a_norm.weight", 1, 0.1))
		add(p+"attn_k_b.weight", []uint64{nope, kvr, h}, i, c.normal(p+"attn_k_b.weight", invSqrt(kvr)))
		add(p+"attn_v_b.weight", []uint64{kvr, hd, h}, i, c.normal(p+"attn_v_b.weight", invSqrt(kvr)))
		if c.ling3() {
			add(p+"attn_gate.weight", []uint64{e, h}, i, c.normal(p+"attn_gate.weight", invSqrt(e)))
		}
		if c.kimiK3() { // elementwise
			add(p+"attn_gate.weight", []uint64{e, h * hd}, i, c.normal(p+"attn_gate.weight", invSqrt(e)))
		}
	} else {
		d := h * hd
		for _, n := range []string{"attn_q", "attn_k", "attn_v"} {
			add(p+n+".weight", []uint64{e, d}, i, c.normal(p+n+".weight", 1.2*invSqrt(e)))
		}
		for _, n := range []string{"ssm_conv1d_q", "ssm_conv1d_k", "ssm_conv1d_v"} {
			add(p+n+".weight", []uint64{uint64(c.SSMConv), 1, d}, i, c.normal(p+n+".weight", 0.5))
		}
		if c.ling3() { // the safe gate's and the output gate's projections, as wide as the heads
			add(p+"ssm_f_a.weight", []uint64{e, d}, i, c.normal(p+"ssm_f_a.weight", invSqrt(e)))
			add(p+"ssm_g_a.weight", []uint64{e, d}, i, c.normal(p+"ssm_g_a.weight", invSqrt(e)))
		} else {
			add(p+"ssm_f_a.weight", []uint64{e, hd}, i, c.normal(p+"ssm_f_a.weight", invSqrt(e)))
			add(p+"ssm_f_b.weight", []uint64{hd, d}, i, c.normal(p+"ssm_f_b.weight", invSqrt(hd)))
		}
		add(p+"ssm_beta.weight", []uint64{e, h}, i, c.normal(p+"ssm_beta.weight", invSqrt(e)))
		if c.kimiK3() || c.glm5Next() {
			add(p+"ssm_a", []uint64{h}, i, c.gain(p+"ssm_a", -0.5, 0.2))
		} else {
			add(p+"ssm_a", []uint64{1, h}, i, c.gain(p+"ssm_a", -0.5, 0.2))
		}
		add(p+"ssm_dt.bias", []uint64{d}, i, c.normal(p+"ssm_dt.bias", 0.5))
		if c.kimiK3() { // the output gate of full rank
			add(p+"ssm_g.weight", []uint64{e, d}, i, c.normal(p+"ssm_g.weight", invSqrt(e)))
		} else if !c.ling3() {
			add(p+"ssm_g_a.weight", []uint64{e, hd}, i, c.normal(p+"ssm_g_a.weight", invSqrt(e)))
			add(p+"ssm_g_b.weight", []uint64{hd, d}, i, c.normal(p+"ssm_g_b.weight", invSqrt(hd)))
		}
		add(p+"ssm_norm.weight", []uint64{hd}, i, c.gain(p+"ssm_norm.weight", 1, 0.1))
	}
	add(p+"attn_output.weight", []uint64{h * hd, e}, i, c.normal(p+"attn_output.weight", c.Residual*invSqrt(h*hd)))
	if c.kimiK3() && i >= c.DenseLead {
		c.k3Experts(add, i)
		return
	}
	c.leadOrExperts(add, i, true)
}

// k3Experts adds kimi-k3's layer i's mixture: the router and its bias,
// the routed experts at k3Latent with its projections and norm, the
// shared expert at the full width.
func (c *Config) k3Experts(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, l, nx, fx, sf := uint64(c.Embd), uint64(c.k3Latent()), uint64(c.Experts), uint64(c.ExpertFFN), uint64(c.SharedFFN)
	add(p+"ffn_norm.weight", []uint64{e}, i, c.gain(p+"ffn_norm.weight", 1, 0.1))
	add(p+"ffn_gate_inp.weight", []uint64{e, nx}, i, c.normal(p+"ffn_gate_inp.weight", invSqrt(e)))
	add(p+"exp_probs_b.bias", []uint64{nx}, i, c.normal(p+"exp_probs_b.bias", 0.1))
	add(p+"ffn_routed_down.weight", []uint64{e, l}, i, c.normal(p+"ffn_routed_down.weight", invSqrt(e)))
	add(p+"ffn_gate_exps.weight", []uint64{l, fx, nx}, i, c.normal(p+"ffn_gate_exps.weight", invSqrt(l)))
	add(p+"ffn_up_exps.weight", []uint64{l, fx, nx}, i, c.normal(p+"ffn_up_exps.weight", invSqrt(l)))
	add(p+"ffn_down_exps.weight", []uint64{fx, l, nx}, i, c.normal(p+"ffn_down_exps.weight", invSqrt(fx)))
	add(p+"ffn_routed_norm.weight", []uint64{l}, i, c.gain(p+"ffn_routed_norm.weight", 1, 0.1))
	add(p+"ffn_routed_up.weight", []uint64{l, e}, i, c.normal(p+"ffn_routed_up.weight", c.Residual*invSqrt(l)))
	add(p+"ffn_gate_shexp.weight", []uint64{e, sf}, i, c.normal(p+"ffn_gate_shexp.weight", invSqrt(e)))
	add(p+"ffn_up_shexp.weight", []uint64{e, sf}, i, c.normal(p+"ffn_up_shexp.weight", invSqrt(e)))
	add(p+"ffn_down_shexp.weight", []uint64{sf, e}, i, c.normal(p+"ffn_down_shexp.weight", c.Residual*invSqrt(sf)))
}

// kimiParams is Params for kimi-linear.
func (s Shape) kimiParams() int64 {
	e, hd, h, k := int64(s.Embd), int64(s.HeadDim), int64(s.Heads), int64(s.SSMConv)
	kvr, rot, nope := int64(s.kimiKVLora()), int64(s.kimiRope()), int64(s.kimiNope())
	n := s.headParams()
	if s.kimiK3() {
		n += e // output_res_score
	}
	for i := range s.Layers {
		n += e + h*hd*e
		if s.kimiK3() && i >= s.DenseLead {
			l, nx := int64(s.k3Latent()), int64(s.Experts)
			n += e + e*nx + nx + e*l + 3*l*int64(s.ExpertFFN)*nx + l + l*e + 3*e*int64(s.SharedFFN)
		} else {
			n += s.leadOrExpertsParams(i, true)
		}
		d := h * hd
		switch {
		case s.kimiMLA(i) && s.kimiK3():
			ql := e / 2
			n += 2*e + e*ql + ql + ql*h*(nope+rot) + e*(kvr+rot) + kvr + nope*kvr*h + kvr*hd*h + e*h*hd
		case s.kimiK3():
			n += 2*e + 3*e*d + 3*k*d + e*hd + hd*d + e*h + h + d + e*d + hd
		case s.kimiMLA(i) && s.ling3():
			n += e*h*(nope+rot) + e*(kvr+rot) + kvr + nope*kvr*h + kvr*hd*h + e*h
		case s.kimiMLA(i):
			n += e*h*(nope+rot) + e*(kvr+rot) + kvr + nope*kvr*h + kvr*hd*h
		case s.ling3():
			n += 3*e*d + 3*k*d + 2*e*d + e*h + h + d + hd
		default:
			n += 3*e*d + 3*k*d + 2*(e*hd+hd*d) + e*h + h + d + hd
		}
	}
	return n
}
