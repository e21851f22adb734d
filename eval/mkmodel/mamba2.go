package mkmodel

import (
	"fmt"
	"math"
	"strings"

	"ppl.dev/gguf"
)

// Granite 4.0's hybrids (arch granitehybrid): granite's block (its four
// multipliers, a SwiGLU MLP or a mixture of experts with a shared expert)
// whose mixer is Mamba-2 in every layer but each AttnInterval-th, which is
// attention (head_count_kv is written per layer, 0 for the Mamba-2
// layers, as the converter writes it). Their shape fields:
//
//	SSMState      ssm.state_size: the state per head row (N)
//	SSMKHeads     ssm.group_count: groups of B and C (G)
//	SSMVHeads     ssm.time_step_rank: heads (H, a multiple of G)
//	SSMHeadDim    the head size (P): ssm.inner_size = H·P
//	SSMConv       ssm.conv_kernel
//	AttnInterval  every AttnInterval-th layer is attention
//	NoPE          rope.scaling.finetuned = false: attention without
//	              positions (Granite 4.0-H); else adjacent-pair RoPE
//	SharedFFN     with experts, the shared expert's width
//
// Nemotron-H (arch nemotron_h: Nemotron-H, Nemotron Nano 2; nemotron_h_moe:
// Nemotron 3 Nano) stacks blocks of one kind each, x += f(RMSNorm(x)),
// f a Mamba-2 mixer, attention without positions, or a ReLU² MLP (up,
// relu², down; for nemotron_h_moe experts of that form routed by sigmoid
// with a selection bias, plus a shared one). Layout names the blocks, one
// letter each: M (Mamba-2), A (attention), F (the MLP or the experts);
// head_count_kv and feed_forward_length are written per layer (0 where the
// block has none), as the converter writes them.
//
// Falcon-H1 (arch falcon-h1) runs attention (NeoX RoPE) and a Mamba-2 mixer
// side by side in every layer on the same normed rows, then a SwiGLU MLP;
// with SSMNoNorm its mixers have no ssm_norm (the gate alone).
func (s Shape) mamba() bool {
	return s.Arch == "granitehybrid" || s.nemotron() || s.falconH1() || s.Arch == "mamba2"
}

// falconH1 reports Falcon-H1.
func (s Shape) falconH1() bool { return s.Arch == "falcon-h1" }

// nemotron reports a Nemotron-H hybrid.
func (s Shape) nemotron() bool { return s.Arch == "nemotron_h" || s.Arch == "nemotron_h_moe" }

// checkMamba validates the Mamba-2 fields.
func (s Shape) checkMamba() error {
	if !s.mamba() {
		if s.SSMHeadDim != 0 && !s.plamo2() || s.NoPE || s.Layout != "" && !s.deci() || s.MoELatent != 0 || s.SSMNoNorm {
			return fmt.Errorf("shape: Mamba-2 fields are for granitehybrid, nemotron_h, nemotron_h_moe and falcon-h1, not %s", s.Arch)
		}
		return nil
	}
	if s.SSMNoNorm && !s.falconH1() {
		return fmt.Errorf("shape: mixers without ssm_norm are falcon-h1's")
	}
	switch {
	case s.SSMState <= 0 || s.SSMKHeads <= 0 || s.SSMVHeads <= 0 || s.SSMHeadDim <= 0 || s.SSMConv <= 0:
		return fmt.Errorf("shape: %s needs a state size, groups, heads, a head size and a conv kernel (%d, %d, %d, %d, %d)",
			s.Arch, s.SSMState, s.SSMKHeads, s.SSMVHeads, s.SSMHeadDim, s.SSMConv)
	case s.SSMVHeads%s.SSMKHeads != 0:
		return fmt.Errorf("shape: %d heads is not a multiple of %d groups", s.SSMVHeads, s.SSMKHeads)
	case s.RopeDims != 0:
		return fmt.Errorf("shape: %s rotates whole heads, if at all", s.Arch)
	case s.moe() != (s.SharedFFN > 0):
		return fmt.Errorf("shape: %s's experts come with a shared expert (%d experts, shared width %d)", s.Arch, s.Experts, s.SharedFFN)
	}
	if s.nemotron() {
		switch {
		case len(s.Layout) != s.Layers || strings.Trim(s.Layout, "MAF") != "":
			return fmt.Errorf("shape: %s's layout %q: want one of M, A, F per layer (%d)", s.Arch, s.Layout, s.Layers)
		case !strings.Contains(s.Layout, "A"):
			return fmt.Errorf("shape: %s's layout %q has no attention layer", s.Arch, s.Layout)
		case s.AttnInterval != 0 || s.NoPE:
			return fmt.Errorf("shape: %s places its attention by its layout and never rotates", s.Arch)
		case s.MoELatent < 0 || s.MoELatent > 0 && !s.moe():
			return fmt.Errorf("shape: a latent width (%d) is for nemotron_h_moe's experts", s.MoELatent)
		}
		return nil
	}
	if s.MoELatent != 0 {
		return fmt.Errorf("shape: a latent width is for nemotron_h_moe")
	}
	if s.Arch == "mamba2" {
		if s.AttnInterval != 0 || s.Layout != "" || s.NoPE || s.moe() {
			return fmt.Errorf("shape: mamba2 has neither attention nor experts")
		}
		return nil
	}
	if s.falconH1() {
		if s.AttnInterval != 0 || s.Layout != "" || s.NoPE || s.moe() {
			return fmt.Errorf("shape: falcon-h1 has attention and a mixer in every layer, with RoPE, and no experts")
		}
		return nil
	}
	switch {
	case s.AttnInterval <= 0:
		return fmt.Errorf("shape: granitehybrid needs an attention interval")
	case s.Layers < s.AttnInterval:
		return fmt.Errorf("shape: %d layers with attention every %d-th: granitehybrid needs an attention layer", s.Layers, s.AttnInterval)
	case s.Layout != "":
		return fmt.Errorf("shape: granitehybrid places its attention every --attn-interval-th layer, not by a layout")
	}
	return nil
}

// layerKind is layer i's block: 'M' (Mamba-2), 'A' (attention: in
// Falcon-H1 with a mixer beside it) or, in Nemotron-H, 'F' (the MLP or the
// experts).
func (s Shape) layerKind(i int) byte {
	if s.Layout != "" {
		return s.Layout[i]
	}
	if s.falconH1() {
		return 'A'
	}
	if s.Arch == "mamba2" || s.recurrent(i) {
		return 'M'
	}
	return 'A'
}

// mambaInner is d_inner = H·P; mambaConv the convolved channels [x | B | C].
func (s Shape) mambaInner() int { return s.SSMVHeads * s.SSMHeadDim }
func (s Shape) mambaConv() int  { return s.mambaInner() + 2*s.SSMKHeads*s.SSMState }

// mambaParams is the Mamba-2 mixer's weights, replacing attention's in a
// layer.
func (s Shape) mambaParams() int64 {
	e, d, conv, h := int64(s.Embd), int64(s.mambaInner()), int64(s.mambaConv()), int64(s.SSMVHeads)
	n := e*(d+conv+h) + conv*int64(s.SSMConv+1) + 3*h + d + d*e
	if s.SSMNoNorm {
		n -= d
	}
	return n
}

// mambaKeys writes the Mamba-2 hybrids' own metadata: the SSM sizes, the
// KV heads per layer; granitehybrid's Granite-4.0-H multipliers (its
// attention's 1/head); Nemotron-H's FFN widths per layer and routing.
func (c *Config) mambaKeys(w *gguf.Writer) {
	a := c.Arch
	w.Add(a+".ssm.conv_kernel", uint32(c.SSMConv))
	w.Add(a+".ssm.state_size", uint32(c.SSMState))
	w.Add(a+".ssm.group_count", uint32(c.SSMKHeads))
	w.Add(a+".ssm.time_step_rank", uint32(c.SSMVHeads))
	w.Add(a+".ssm.inner_size", uint32(c.mambaInner()))
	if a == "mamba2" { // no attention
		return
	}
	kv, ff := make([]uint32, c.Layers), make([]uint32, c.Layers)
	for i := range kv {
		switch c.layerKind(i) {
		case 'A':
			kv[i] = uint32(c.KVHeads)
		case 'F':
			ff[i] = uint32(c.FFN)
		}
	}
	w.Add(a+".attention.head_count_kv", kv)
	if c.nemotron() {
		w.Add(a+".feed_forward_length", ff)
		w.Add(a+".attention.layer_norm_epsilon", float32(1e-3)) // llama.cpp 0.7.0 requires it; its norms are RMS norms of layer_norm_rms_epsilon
		if c.moe() {                                            // Nemotron 3 Nano's routing: normalized, scaled by 2.5
			w.Add(a+".expert_shared_feed_forward_length", uint32(c.SharedFFN))
			w.Add(a+".expert_weights_norm", true)
			w.Add(a+".expert_weights_scale", float32(2.5))
			if c.MoELatent > 0 {
				w.Add(a+".moe_latent_size", uint32(c.MoELatent))
			}
		}
		return
	}
	w.Add(a+".rope.dimension_count", uint32(c.HeadDim))
	if c.falconH1() {
		return
	}
	if c.NoPE {
		w.Add(a+".rope.scaling.finetuned", false)
	}
	w.Add(a+".embedding_scale", float32(12))
	w.Add(a+".residual_scale", float32(0.22))
	w.Add(a+".attention.scale", float32(1/float64(c.HeadDim)))
	w.Add(a+".logit_scale", float32(6))
	if c.moe() {
		w.Add(a+".expert_shared_feed_forward_length", uint32(c.SharedFFN))
	}
}

// mambaMixer adds layer i's Mamba-2 tensors, in the converter's shapes: the
// input projection to [z | x | B | C | dt], the convolution's taps and
// bias, dt's bias (dt = softplus of it near 0.001 to 0.1), the decays A =
// -exp(A_log) with A_log in [0, ln 16], the skip D, the grouped norm and
// the output projection.
func (c *Config) mambaMixer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, d, conv, h := uint64(c.Embd), uint64(c.mambaInner()), uint64(c.mambaConv()), uint64(c.SSMVHeads)
	g := uint64(c.SSMKHeads)
	add(p+"ssm_in.weight", []uint64{e, 2*d + 2*g*uint64(c.SSMState) + h}, i, c.normal(p+"ssm_in.weight", invSqrt(e)))
	add(p+"ssm_conv1d.weight", []uint64{uint64(c.SSMConv), conv}, i, c.normal(p+"ssm_conv1d.weight", 1.2*invSqrt(uint64(c.SSMConv))))
	add(p+"ssm_conv1d.bias", []uint64{conv}, i, c.normal(p+"ssm_conv1d.bias", 0.1))
	add(p+"ssm_dt.bias", []uint64{h}, i, c.uniform(p+"ssm_dt.bias", -6.9, -2.3))
	add(p+"ssm_a", []uint64{1, h}, i, func(r int, dst []float32) {
		rg := c.rng(p+"ssm_a", r)
		for j := range dst {
			dst[j] = float32(-math.Exp(math.Log(16) * rg.Float64()))
		}
	})
	add(p+"ssm_d", []uint64{1, h}, i, c.gain(p+"ssm_d", 1, 0.1))
	if !c.SSMNoNorm {
		add(p+"ssm_norm.weight", []uint64{d / g, g}, i, c.gain(p+"ssm_norm.weight", 1, 0.1))
	}
	add(p+"ssm_out.weight", []uint64{d, e}, i, c.normal(p+"ssm_out.weight", c.Residual*invSqrt(d)))
}

// nemotronLayer adds layer i of a Nemotron-H hybrid: its norm and the
// tensors of its block.
func (c *Config) nemotronLayer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e := uint64(c.Embd)
	res := c.Residual
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	switch c.layerKind(i) {
	case 'M':
		c.mambaMixer(add, i)
	case 'A':
		c.attnTensors(add, i)
	case 'F':
		if !c.moe() {
			ff := uint64(c.FFN)
			add(p+"ffn_up.weight", []uint64{e, ff}, i, c.normal(p+"ffn_up.weight", 1.5*invSqrt(e)))
			add(p+"ffn_down.weight", []uint64{ff, e}, i, c.normal(p+"ffn_down.weight", res*invSqrt(ff)))
			return
		}
		nx, fx, sf := uint64(c.Experts), uint64(c.ExpertFFN), uint64(c.SharedFFN)
		add(p+"ffn_gate_inp.weight", []uint64{e, nx}, i, c.normal(p+"ffn_gate_inp.weight", invSqrt(e)))
		add(p+"exp_probs_b.bias", []uint64{nx}, i, c.normal(p+"exp_probs_b.bias", 0.1))
		x := e // the experts' width
		if c.MoELatent > 0 {
			x = uint64(c.MoELatent)
			add(p+"ffn_latent_down.weight", []uint64{e, x}, i, c.normal(p+"ffn_latent_down.weight", invSqrt(e)))
			add(p+"ffn_latent_up.weight", []uint64{x, e}, i, c.normal(p+"ffn_latent_up.weight", invSqrt(x)))
		}
		add(p+"ffn_up_exps.weight", []uint64{x, fx, nx}, i, c.normal(p+"ffn_up_exps.weight", 1.5*invSqrt(x)))
		add(p+"ffn_down_exps.weight", []uint64{fx, x, nx}, i, c.normal(p+"ffn_down_exps.weight", res*invSqrt(fx)))
		add(p+"ffn_up_shexp.weight", []uint64{e, sf}, i, c.normal(p+"ffn_up_shexp.weight", 1.5*invSqrt(e)))
		add(p+"ffn_down_shexp.weight", []uint64{sf, e}, i, c.normal(p+"ffn_down_shexp.weight", res*invSqrt(sf)))
	}
}

// nemotronParams is Params for Nemotron-H.
func (s Shape) nemotronParams() int64 {
	e, q, kv := int64(s.Embd), int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	n := s.headParams()
	for i := range s.Layers {
		n += e
		switch s.layerKind(i) {
		case 'M':
			n += s.mambaParams()
		case 'A':
			n += 2*e*q + 2*e*kv
		case 'F':
			if s.moe() {
				nx, x := int64(s.Experts), e
				if s.MoELatent > 0 {
					x = int64(s.MoELatent)
					n += 2 * e * x
				}
				n += e*nx + nx + 2*x*int64(s.ExpertFFN)*nx + 2*e*int64(s.SharedFFN)
			} else {
				n += 2 * e * int64(s.FFN)
			}
		}
	}
	return n
}
