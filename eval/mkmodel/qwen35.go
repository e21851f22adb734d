package mkmodel

import (
	"fmt"
	"math"

	"ppl.dev/gguf"
)

// Qwen3.5 hybrids (qwen35, qwen35moe): Gated DeltaNet layers with every
// AttnInterval-th layer gated full attention, written as the Qwen3.5
// converter writes them (the V heads in tiled order, attn_q holding
// [q | gate] per head, the attention norms as post_attention_norm, no MTP
// block). Their shape fields:
//
//	SSMState      ssm.state_size: the head size of q, k and v (S)
//	SSMKHeads     ssm.group_count: query/key heads (H_k)
//	SSMVHeads     ssm.time_step_rank: value heads (H_v, a multiple of H_k)
//	SSMConv       ssm.conv_kernel
//	AttnInterval  full_attention_interval
//	RopeDims      rope.dimension_count (partial rotary: RopeDims < HeadDim)
//	SharedFFN     qwen35moe: the shared expert's width

// Qwen35Presets are the shapes of Qwen3.5-0.8B, Qwen3.5-27B (qwen35) and
// Qwen3.5-35B-A3B (qwen35moe), from their published configurations, with
// Qwen3.5's 248,320-token vocabulary.
var Qwen35Presets = []Preset{
	{"0.8B", Shape{Arch: "qwen35", Embd: 1024, Layers: 24, Heads: 8, KVHeads: 2, HeadDim: 256, FFN: 3584,
		Context: 262144, Vocab: 248320, RopeBase: 1e7, Eps: 1e-6, Tied: true,
		SSMState: 128, SSMKHeads: 16, SSMVHeads: 16, SSMConv: 4, AttnInterval: 4, RopeDims: 64}},
	{"27B", Shape{Arch: "qwen35", Embd: 5120, Layers: 64, Heads: 24, KVHeads: 4, HeadDim: 256, FFN: 17408,
		Context: 262144, Vocab: 248320, RopeBase: 1e7, Eps: 1e-6,
		SSMState: 128, SSMKHeads: 16, SSMVHeads: 48, SSMConv: 4, AttnInterval: 4, RopeDims: 64}},
}

// Qwen35MoEPresets: Qwen3.5-35B-A3B.
var Qwen35MoEPresets = []Preset{
	{"35B-A3B", Shape{Arch: "qwen35moe", Embd: 2048, Layers: 40, Heads: 16, KVHeads: 2, HeadDim: 256, FFN: 512,
		Context: 262144, Vocab: 248320, RopeBase: 1e7, Eps: 1e-6,
		Experts: 256, ExpertsUsed: 8, ExpertFFN: 512, SharedFFN: 512,
		SSMState: 128, SSMKHeads: 16, SSMVHeads: 32, SSMConv: 4, AttnInterval: 4, RopeDims: 64}},
}

// hybrid reports a Qwen3.5 Gated DeltaNet hybrid (qwen4exp's layers are
// Qwen3.5's too).
func (s Shape) hybrid() bool { return s.Arch == "qwen35" || s.Arch == "qwen35moe" || s.qwen4exp() }

// moe reports an architecture whose FFNs are mixtures of experts.
// llama's are Mixtral's layout: a llama file with expert_count.
func (s Shape) moe() bool {
	return s.Arch == "qwen3moe" || s.Arch == "grovemoe" || s.Arch == "k2-horizon" || s.Arch == "hy_v3" || s.Arch == "maple" || s.Arch == "qwen35moe" || s.qwen4exp() || s.Arch == "qwen2moe" || s.Arch == "olmoe" || s.Arch == "granitemoe" || s.Arch == "phimoe" || s.Arch == "deepseek" || s.Arch == "deepseek2-ocr" || s.Arch == "minimax-01" || s.Arch == "hunyuan-moe" || s.Arch == "bailingmoe2" || s.Arch == "afmoe" || s.Arch == "exaone-moe" || s.Arch == "cohere2moe" || s.Arch == "minimax-m2" || s.Arch == "ernie4_5-moe" || s.Arch == "dots1" || s.Arch == "nemotron_h_moe" || s.Arch == "lfm2moe" || s.Arch == "llama4" || s.Arch == "dbrx" || s.Arch == "bailingmoe" || s.Arch == "mellum" || s.Arch == "mimo2" || s.Arch == "step35" || s.Arch == "laguna" || s.Arch == "maion-coder" || s.Arch == "kimi-linear" || s.Arch == "bailingmoe3" || s.Arch == "kimi-k3" || s.Arch == "dots3note" || s.Arch == "hy_v4" || s.glm5Next() || s.deepseek4() || s.Arch == "minimax-m3" || s.Arch == "smallthinker" || s.Arch == "grok" || s.Arch == "arctic" || (s.Arch == "llama" || s.Arch == "granitehybrid" || s.Arch == "jamba") && s.Experts > 0
}

// recurrent reports whether layer i is Gated DeltaNet.
func (s Shape) recurrent(i int) bool { return (i+1)%s.AttnInterval != 0 }

// checkHybrid validates the hybrid fields (and that other architectures
// leave them zero).
func (s Shape) checkHybrid() error {
	if s.mamba() || s.mamba1() || s.lfm2() || s.kdaHybrid() || s.glm5Next() || s.plamo2() {
		return nil // checkMamba, checkMamba1, checkLFM2, checkKimiLinear, checkGLM5Next, checkPlamo2
	}
	if !s.hybrid() {
		if s.SSMState != 0 || s.SSMKHeads != 0 || s.SSMVHeads != 0 || s.SSMConv != 0 || s.AttnInterval != 0 && !s.minimax01() || s.RopeDims != 0 && !s.partialRoPE() || s.SharedFFN != 0 && !s.sharedExpert() {
			return fmt.Errorf("shape: Gated DeltaNet fields are for qwen35 and qwen35moe, not %s", s.Arch)
		}
		return nil
	}
	switch {
	case s.SSMState <= 0 || s.SSMKHeads <= 0 || s.SSMVHeads <= 0 || s.SSMConv <= 0 || s.AttnInterval <= 0:
		return fmt.Errorf("shape: %s needs a state size, key and value heads, a conv kernel and an attention interval (%d, %d, %d, %d, %d)",
			s.Arch, s.SSMState, s.SSMKHeads, s.SSMVHeads, s.SSMConv, s.AttnInterval)
	case s.SSMVHeads%s.SSMKHeads != 0:
		return fmt.Errorf("shape: %d value heads is not a multiple of %d key heads", s.SSMVHeads, s.SSMKHeads)
	case s.RopeDims <= 0 || s.RopeDims%2 != 0 || s.RopeDims > s.HeadDim:
		return fmt.Errorf("shape: rope dims %d (want even, 2..head dimension %d)", s.RopeDims, s.HeadDim)
	case (s.Arch == "qwen35moe" || s.qwen4exp()) && s.SharedFFN <= 0:
		return fmt.Errorf("shape: %s needs a shared expert width", s.Arch)
	case s.Arch == "qwen35" && s.SharedFFN != 0:
		return fmt.Errorf("shape: a shared expert is for qwen35moe")
	}
	return nil
}

// hybridParams is Params for the hybrids.
func (s Shape) hybridParams() int64 {
	e, S := int64(s.Embd), int64(s.SSMState)
	kd, vd := int64(s.SSMKHeads)*S, int64(s.SSMVHeads)*S
	conv := 2*kd + vd
	hv := int64(s.SSMVHeads)
	q, kv := int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	var ffn int64
	if s.moe() {
		ffn = e*int64(s.Experts) + 3*e*int64(s.ExpertFFN)*int64(s.Experts) + e + 3*e*int64(s.SharedFFN)
	} else {
		ffn = 3 * e * int64(s.FFN)
	}
	n := s.headParams()
	for i := range s.Layers {
		n += 2*e + ffn
		if s.recurrent(i) {
			n += e*conv + e*vd + conv*int64(s.SSMConv) + 2*e*hv + 2*hv + S + vd*e
		} else {
			n += 2*e*q + 2*e*kv + q*e + 2*int64(s.HeadDim)
		}
	}
	return n
}

// hybridKeys writes the hybrids' own metadata.
func (c *Config) hybridKeys(w *gguf.Writer) {
	a := c.Arch
	pairs := c.RopeDims / 2
	s0 := (pairs + 2) / 3
	s1 := (pairs - s0 + 1) / 2
	w.Add(a+".rope.dimension_count", uint32(c.RopeDims))
	w.Add(a+".rope.dimension_sections", []int32{int32(s0), int32(s1), int32(pairs - s0 - s1), 0})
	w.Add(a+".ssm.conv_kernel", uint32(c.SSMConv))
	w.Add(a+".ssm.state_size", uint32(c.SSMState))
	w.Add(a+".ssm.group_count", uint32(c.SSMKHeads))
	w.Add(a+".ssm.time_step_rank", uint32(c.SSMVHeads))
	w.Add(a+".ssm.inner_size", uint32(c.SSMVHeads*c.SSMState))
	w.Add(a+".full_attention_interval", uint32(c.AttnInterval))
	if c.moe() {
		w.Add(a+".expert_count", uint32(c.Experts))
		w.Add(a+".expert_used_count", uint32(c.ExpertsUsed))
		w.Add(a+".expert_feed_forward_length", uint32(c.ExpertFFN))
		w.Add(a+".expert_shared_feed_forward_length", uint32(c.SharedFFN))
	}
}

// uniform fills rows with values uniform in [lo, hi).
func (c *Config) uniform(name string, lo, hi float64) RowFunc {
	return func(r int, dst []float32) {
		g := c.rng(name, r)
		for i := range dst {
			dst[i] = float32(lo + float64((hi-lo)*g.Float64()))
		}
	}
}

// hybridLayer adds layer i of a hybrid, with the oracle's scales
// (make_arch_models.py): decays exp(g) spread over (e^-8, 1), conv taps of
// about 1/sqrt(kernel), projections 1/sqrt(width in).
func (c *Config) hybridLayer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e := uint64(c.Embd)
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	c.hybridMixer(add, i)
	add(p+"post_attention_norm.weight", []uint64{e}, i, c.gain(p+"post_attention_norm.weight", 1, 0.1))
	c.hybridFFN(add, i)
}

// hybridMixer adds layer i's Gated DeltaNet or gated attention tensors.
func (c *Config) hybridMixer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e := uint64(c.Embd)
	res := c.Residual
	if c.recurrent(i) {
		S, hv := uint64(c.SSMState), uint64(c.SSMVHeads)
		kd, vd := uint64(c.SSMKHeads)*S, hv*S
		add(p+"attn_qkv.weight", []uint64{e, 2*kd + vd}, i, c.normal(p+"attn_qkv.weight", invSqrt(e)))
		add(p+"attn_gate.weight", []uint64{e, vd}, i, c.normal(p+"attn_gate.weight", invSqrt(e)))
		add(p+"ssm_conv1d.weight", []uint64{uint64(c.SSMConv), 2*kd + vd}, i, c.normal(p+"ssm_conv1d.weight", 1.2*invSqrt(uint64(c.SSMConv))))
		add(p+"ssm_beta.weight", []uint64{e, hv}, i, c.normal(p+"ssm_beta.weight", invSqrt(e)))
		add(p+"ssm_alpha.weight", []uint64{e, hv}, i, c.normal(p+"ssm_alpha.weight", 0.5*invSqrt(e)))
		add(p+"ssm_dt.bias", []uint64{hv}, i, c.uniform(p+"ssm_dt.bias", -4, -0.5))
		add(p+"ssm_a", []uint64{hv}, i, func(r int, dst []float32) {
			g := c.rng(p+"ssm_a", r)
			for j := range dst {
				dst[j] = float32(-math.Exp(math.Log(8) * g.Float64()))
			}
		})
		add(p+"ssm_norm.weight", []uint64{S}, i, c.gain(p+"ssm_norm.weight", 1, 0.1))
		add(p+"ssm_out.weight", []uint64{vd, e}, i, c.normal(p+"ssm_out.weight", res*invSqrt(vd)))
	} else {
		q, kv := uint64(c.Heads*c.HeadDim), uint64(c.KVHeads*c.HeadDim)
		hd := uint64(c.HeadDim)
		add(p+"attn_q.weight", []uint64{e, 2 * q}, i, c.normal(p+"attn_q.weight", 1.2*invSqrt(e)))
		add(p+"attn_k.weight", []uint64{e, kv}, i, c.normal(p+"attn_k.weight", 1.2*invSqrt(e)))
		add(p+"attn_v.weight", []uint64{e, kv}, i, c.normal(p+"attn_v.weight", invSqrt(e)))
		add(p+"attn_output.weight", []uint64{q, e}, i, c.normal(p+"attn_output.weight", res*invSqrt(q)))
		add(p+"attn_q_norm.weight", []uint64{hd}, i, c.gain(p+"attn_q_norm.weight", 1, 0.2))
		add(p+"attn_k_norm.weight", []uint64{hd}, i, c.gain(p+"attn_k_norm.weight", 1, 0.2))
	}
}

// hybridFFN adds layer i's MLP, or its experts and gated shared expert.
func (c *Config) hybridFFN(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e := uint64(c.Embd)
	res := c.Residual
	if !c.moe() {
		ff := uint64(c.FFN)
		add(p+"ffn_gate.weight", []uint64{e, ff}, i, c.normal(p+"ffn_gate.weight", invSqrt(e)))
		add(p+"ffn_up.weight", []uint64{e, ff}, i, c.normal(p+"ffn_up.weight", invSqrt(e)))
		add(p+"ffn_down.weight", []uint64{ff, e}, i, c.normal(p+"ffn_down.weight", res*invSqrt(ff)))
		return
	}
	sf := uint64(c.SharedFFN)
	c.expertTensors(add, i)
	add(p+"ffn_gate_inp_shexp.weight", []uint64{e}, i, c.normal(p+"ffn_gate_inp_shexp.weight", 1.5*invSqrt(e)))
	add(p+"ffn_gate_shexp.weight", []uint64{e, sf}, i, c.normal(p+"ffn_gate_shexp.weight", invSqrt(e)))
	add(p+"ffn_up_shexp.weight", []uint64{e, sf}, i, c.normal(p+"ffn_up_shexp.weight", invSqrt(e)))
	add(p+"ffn_down_shexp.weight", []uint64{sf, e}, i, c.normal(p+"ffn_down_shexp.weight", res*invSqrt(sf)))
}
