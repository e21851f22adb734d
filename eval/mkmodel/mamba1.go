package mkmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// The state-space models of recurrent layers alone: mamba (Mamba-1: the
// mamba-* models, Falcon-Mamba with DtBCRMS) and mamba2 (Mamba-2:
// Mamba-Codestral) stack x += mixer(RMSNorm(x)) (attn_norm), with no
// attention and no FFN; their files give attention.head_count and
// feed_forward_length as 0, as the converter writes them. mamba2's mixer
// is mamba2.go's, with SSMState, SSMKHeads, SSMVHeads, SSMHeadDim and
// SSMConv.
//
// Mamba-1's mixer: [x | z] = ssm_in·h (d = 2·Embd values each, the
// expansion llama.cpp requires); x through a causal convolution of SSMConv
// taps with a bias, then SiLU (u); [dt | B | C] = ssm_x·u (dt_rank =
// ceil(Embd/16), Mamba's default, and SSMState values each of B and C);
// with DtBCRMS (ssm.dt_b_c_rms) or in jamba (ssm_dt_norm, ssm_b_norm,
// ssm_c_norm) dt, B and C RMS-normed; dt = ssm_dt·dt; the selective scan
// with a decay per state column (ssm_a: SSMState per channel, -(1..N)
// jittered as Mamba's S4D initialization), skip ssm_d and dt bias
// ssm_dt.bias; y·silu(z); ssm_out·y.
//
// Jamba (arch jamba: AI21's Jamba) is a pre-norm decoder of Mamba-1
// mixers (with the norms' weights) where attention.head_count_kv, written
// per layer, is 0, and attention without positions in every
// AttnInterval-th layer from the middle of the first interval (Jamba's
// period of 8 and offset 4); its FFN a SwiGLU MLP, or with Experts in
// every odd layer (Jamba's expert period of 2 and offset 1) softmax-routed
// experts of the FFN's width.
func (s Shape) mamba1() bool { return s.Arch == "mamba" || s.Arch == "jamba" }

// ssmOnly reports the architectures of mixers alone (mamba, mamba2).
func (s Shape) ssmOnly() bool { return s.Arch == "mamba" || s.Arch == "mamba2" }

// mamba1Inner is Mamba-1's d_inner, mamba1Rank its dt_rank.
func (s Shape) mamba1Inner() int { return 2 * s.Embd }
func (s Shape) mamba1Rank() int  { return (s.Embd + 15) / 16 }

// jambaAttn reports whether jamba's layer i is attention.
func (s Shape) jambaAttn(i int) bool { return i%s.AttnInterval == s.AttnInterval/2 }

// jambaMoE reports whether jamba's layer i has experts.
func (s Shape) jambaMoE(i int) bool { return s.Experts > 0 && i%2 == 1 }

// checkMamba1 validates the fields of mamba and jamba.
func (s Shape) checkMamba1() error {
	if s.DtBCRMS && s.Arch != "mamba" {
		return fmt.Errorf("shape: RMS norms of dt, B and C without weights are mamba's (Falcon-Mamba)")
	}
	if !s.mamba1() {
		return nil
	}
	switch {
	case s.SSMState <= 0 || s.SSMConv <= 0:
		return fmt.Errorf("shape: %s needs a state size and a conv kernel (%d, %d)", s.Arch, s.SSMState, s.SSMConv)
	case s.SSMKHeads != 0 || s.SSMVHeads != 0 || s.SSMHeadDim != 0 || s.Layout != "" || s.NoPE || s.Window != 0 || s.SharedFFN != 0:
		return fmt.Errorf("shape: %s's mixer has no heads or groups, its attention no window and no positions, its experts no shared one", s.Arch)
	case s.Arch == "mamba" && (s.AttnInterval != 0 || s.moe()):
		return fmt.Errorf("shape: mamba has neither attention nor experts")
	case s.Arch == "jamba" && (s.AttnInterval <= 0 || s.AttnInterval/2 >= s.Layers):
		return fmt.Errorf("shape: jamba needs an attention interval whose middle layer (%d) is one of its %d", s.AttnInterval/2, s.Layers)
	}
	return nil
}

// mamba1Keys writes Mamba-1's SSM sizes, Falcon-Mamba's flag and jamba's
// KV heads per layer.
func (c *Config) mamba1Keys(w *gguf.Writer) {
	a := c.Arch
	w.Add(a+".ssm.conv_kernel", uint32(c.SSMConv))
	w.Add(a+".ssm.state_size", uint32(c.SSMState))
	w.Add(a+".ssm.time_step_rank", uint32(c.mamba1Rank()))
	w.Add(a+".ssm.inner_size", uint32(c.mamba1Inner()))
	if c.DtBCRMS {
		w.Add(a+".ssm.dt_b_c_rms", true)
	}
	if a == "jamba" {
		kv := make([]uint32, c.Layers)
		for i := range kv {
			if c.jambaAttn(i) {
				kv[i] = uint32(c.KVHeads)
			}
		}
		w.Add(a+".attention.head_count_kv", kv)
	}
}

// mamba1Mixer adds layer i's Mamba-1 tensors in the converter's shapes;
// dt's bias puts softplus(dt) near 0.001 to 0.1, as Mamba's initialization.
func (c *Config) mamba1Mixer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, d, r, n := uint64(c.Embd), uint64(c.mamba1Inner()), uint64(c.mamba1Rank()), uint64(c.SSMState)
	add(p+"ssm_in.weight", []uint64{e, 2 * d}, i, c.normal(p+"ssm_in.weight", invSqrt(e)))
	add(p+"ssm_conv1d.weight", []uint64{uint64(c.SSMConv), d}, i, c.normal(p+"ssm_conv1d.weight", 1.2*invSqrt(uint64(c.SSMConv))))
	add(p+"ssm_conv1d.bias", []uint64{d}, i, c.normal(p+"ssm_conv1d.bias", 0.1))
	add(p+"ssm_x.weight", []uint64{d, r + 2*n}, i, c.normal(p+"ssm_x.weight", invSqrt(d)))
	if c.Arch == "jamba" {
		add(p+"ssm_dt_norm.weight", []uint64{r}, i, c.gain(p+"ssm_dt_norm.weight", 1, 0.1))
		add(p+"ssm_b_norm.weight", []uint64{n}, i, c.gain(p+"ssm_b_norm.weight", 1, 0.1))
		add(p+"ssm_c_norm.weight", []uint64{n}, i, c.gain(p+"ssm_c_norm.weight", 1, 0.1))
	}
	add(p+"ssm_dt.weight", []uint64{r, d}, i, c.normal(p+"ssm_dt.weight", 0.5*invSqrt(r)))
	add(p+"ssm_dt.bias", []uint64{d}, i, c.uniform(p+"ssm_dt.bias", -6.9, -2.3))
	add(p+"ssm_a", []uint64{n, d}, i, func(row int, dst []float32) {
		rg := c.rng(p+"ssm_a", row)
		for k := range dst {
			dst[k] = -float32(k+1) * float32(0.5+float64(rg.Float64()))
		}
	})
	add(p+"ssm_d", []uint64{d}, i, c.gain(p+"ssm_d", 1, 0.1))
	add(p+"ssm_out.weight", []uint64{d, e}, i, c.normal(p+"ssm_out.weight", c.Residual*invSqrt(d)))
}

// mamba1Params is the Mamba-1 mixer's weights.
func (s Shape) mamba1Params() int64 {
	e, d, r, n := int64(s.Embd), int64(s.mamba1Inner()), int64(s.mamba1Rank()), int64(s.SSMState)
	p := 2*e*d + int64(s.SSMConv)*d + d + d*(r+2*n) + r*d + d + n*d + d + d*e
	if s.Arch == "jamba" {
		p += r + 2*n
	}
	return p
}

// ssmLayer adds layer i of mamba, mamba2 or jamba.
func (c *Config) ssmLayer(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e := uint64(c.Embd)
	add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
	switch {
	case c.Arch == "mamba2":
		c.mambaMixer(add, i)
		return
	case c.Arch == "mamba":
		c.mamba1Mixer(add, i)
		return
	case c.jambaAttn(i):
		c.attnTensors(add, i)
	default:
		c.mamba1Mixer(add, i)
	}
	add(p+"ffn_norm.weight", []uint64{e}, i, c.gain(p+"ffn_norm.weight", 1, 0.1))
	if c.jambaMoE(i) {
		c.expertTensors(add, i)
		return
	}
	ff := uint64(c.FFN)
	add(p+"ffn_gate.weight", []uint64{e, ff}, i, c.normal(p+"ffn_gate.weight", invSqrt(e)))
	add(p+"ffn_up.weight", []uint64{e, ff}, i, c.normal(p+"ffn_up.weight", invSqrt(e)))
	add(p+"ffn_down.weight", []uint64{ff, e}, i, c.normal(p+"ffn_down.weight", c.Residual*invSqrt(ff)))
}

// ssmParams is Params for mamba, mamba2 and jamba.
func (s Shape) ssmParams() int64 {
	e, q, kv := int64(s.Embd), int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	n := s.headParams()
	for i := range s.Layers {
		n += e
		switch {
		case s.Arch == "mamba2":
			n += s.mambaParams()
			continue
		case s.Arch == "mamba":
			n += s.mamba1Params()
			continue
		case s.jambaAttn(i):
			n += 2*e*q + 2*e*kv
		default:
			n += s.mamba1Params()
		}
		n += e
		if s.jambaMoE(i) {
			n += e*int64(s.Experts) + 3*e*int64(s.FFN)*int64(s.Experts)
		} else {
			n += 3 * e * int64(s.FFN)
		}
	}
	return n
}
