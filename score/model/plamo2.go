package model

import (
	"cmp"
	"fmt"

	"ppl.dev/score/ml"
)

// plamo2: PFN's PLaMo 2 (1B, 2B, 8B), as llama.cpp 0.7.0 runs it: every
// layer's mixer and its SwiGLU MLP (gate and up in one ffn_up) both sit
// between a pre-norm and a post-norm (attn_norm, post_attention_norm;
// ffn_norm, post_ffw_norm: the post-norms bound without ".weight", or
// with it: bareNorm). The mixer is attention where
// attention.head_count_kv (per layer) is not 0: q, k and v in attn_qkv, q
// and k RMS-normed per head with a weight row per head (attn_q_norm,
// attn_k_norm), NeoX RoPE. Elsewhere it is PLaMo-2's Mamba (mamba.go's
// mixer with its own layout): [z | x] = ssm_in·h interleaved by head (head
// h's z, then its x; ssm.time_step_rank heads of ssm.inner_size/heads),
// x through ssm_conv1d without bias and SiLU (u); [B | C | dt] = ssm_x·u
// (ssm.state_size values of B and C, dt of max(64, width/16), llama.cpp's
// fixed width), each RMS-normed by ssm_b_norm, ssm_c_norm, ssm_dt_norm
// (without ".weight", as llama.cpp binds them); dt = ssm_dt·dt, one per
// head; Mamba-2's scan in one group (ssm.group_count 0, as llama.cpp
// requires; decays ssm_a, skip ssm_d, dt bias ssm_dt.bias); y ⊙ silu(z);
// ssm_out·y.
func init() { Register("plamo2", newPlamo2) }

func newPlamo2(l *Loader) Network {
	hp := l.HP
	proto, kv := l.plamo2Params(), l.kvHeads()
	if proto == nil || kv == nil {
		return nil
	}
	d := l.baseDecoder(true)
	d.qkNormHeads = true
	qd, kvd := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	net := l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := decoderLayer{
			attnNorm:     l.Norm(p+"attn_norm", hp.Embd),
			postAttnNorm: l.bareNorm(p+"post_attention_norm", hp.Embd),
			ffnNorm:      l.Norm(p+"ffn_norm", hp.Embd),
			postFFNNorm:  l.bareNorm(p+"post_ffw_norm", hp.Embd),
			ffn:          l.fusedFFN(p, hp.Embd, hp.FFN),
		}
		if kv[i] == 0 {
			m := l.xprojMixer(p, proto, false)
			R, N := len(m.cols.dt), m.ssm.State
			m.dtNorm, m.bNorm, m.cNorm = l.bareNorm(p+"ssm_dt_norm", R), l.bareNorm(p+"ssm_b_norm", N), l.bareNorm(p+"ssm_c_norm", N)
			ly.mixer = m
			return ly
		}
		ly.q, ly.k, ly.v = l.qkv(p, qd, kvd, kvd)
		ly.o = l.Linear(p+"attn_output", qd, hp.Embd)
		ly.qNorm = l.tensorVector(p+"attn_q_norm.weight", hp.HeadDim, hp.Heads)
		ly.kNorm = l.tensorVector(p+"attn_k_norm.weight", hp.HeadDim, hp.KVHeads)
		return ly
	})
	if net == nil {
		return nil
	}
	return ssmDecoder{d, l.Opts.SSMStateDtype}
}

// plamo2Params reads PLaMo-2's ssm.* metadata into the mixer every Mamba
// layer copies before it binds its weights: heads of inner_size /
// time_step_rank channels, z and x interleaved by head in ssm_in's rows,
// [B | C | dt] in ssm_x's.
func (l *Loader) plamo2Params() *mamba1 {
	hp := l.HP
	sz := l.ssmSizes("conv_kernel", "inner_size", "state_size", "time_step_rank")
	if sz == nil {
		return nil
	}
	K, d, N, H := sz[0], sz[1], sz[2], sz[3]
	if g, err := (meta{l.f, hp.Arch}).int("ssm.group_count", -1); err != nil || g != 0 { // llama.cpp aborts unless 0: its scan has one group
		l.fail(cmp.Or(err, fmt.Errorf("metadata %s.ssm.group_count = %d: PLaMo-2's is 0 (one group of B and C), as llama.cpp requires", hp.Arch, g)))
		return nil
	}
	if d%H != 0 {
		l.Failf("metadata %s.ssm.inner_size = %d is not a multiple of ssm.time_step_rank = %d", hp.Arch, d, H)
		return nil
	}
	P, R := d/H, max(64, hp.Embd/16)
	var z, x []int
	for h := range H {
		z = append(z, colRange(2*h*P, P)...)
		x = append(x, colRange(2*h*P+P, P)...)
	}
	return &mamba1{
		ssm:    ml.SSM{Heads: H, HeadDim: P, Groups: 1, State: N, StateDtype: l.Opts.SSMStateDtype},
		cols:   &mamba1Cols{x: x, z: z, b: colRange(0, N), c: colRange(N, N), dt: colRange(2*N, R), kernel: K},
		normed: true,
		eps:    hp.Eps,
		rows:   deltaRows,
	}
}
