package model

import (
	"fmt"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// minimax-01: MiniMax-Text-01 and MiniMax-M1 (456B-A45.9B), as llama.cpp
// 0.7.0 runs them: most layers are lightning attention, a linear attention
// without softmax, every full_attention_interval-th (8 when absent; or
// those attention.recurrent_layers marks false) softmax attention. A layer
// on the residual stream x, with h = RMSNorm(x)·attn_norm:
//
//   - lightning attention: q, k and v = silu(attn_qkv·h), per head [q | k
//     | v]; o = Lightning(q, k, v) (ml.Lightning: each query sums the
//     earlier keys' values weighted by q·k times exp(−s_h·c·distance),
//     s_h the ALiBi-like slope of head h, c = 1 − layer/(layers−1) +
//     1e-5); o RMS-normed over the row by attn_norm_2, times
//     sigmoid(attn_gate·h), then attn_output;
//   - softmax attention: attn_q, attn_k, attn_v (grouped KV heads), RoPE
//     over rope.dimension_count of each head (NeoX pairs), attn_output;
//   - the residual is h, not x: y = mixer(h) + r·h, then with g =
//     RMSNorm(y)·ffn_norm, x' = MoE(g) + r·g, r = residual_scale
//     (required); the experts softmax-routed and renormalized whatever the
//     file says (llama.cpp reads no gating, norm or scale for it).
//
// The output matrix, or the tied embedding. llama.cpp computes a window in
// one ubatch from a zero state (n_ubatch at least the window, as the
// oracle's and llama-perplexity's defaults give); ppl computes that form.
func init() { Register("minimax-01", newMiniMax01) }

type minimax01 struct {
	*decoder
	resScale float64
}

// lightningMixer is a lightning attention layer's weights (rowMixer).
type lightningMixer struct {
	qkv, gate, o *ml.Matrix // attn_qkv: (heads·3d, embd); attn_gate: (heads·d, embd); attn_output
	norm         *ml.Vector // attn_norm_2: heads·d
	slopes       []float32  // per head (nn.LightningSlopes)
	scale        float32    // the layer's slope scale (nn.LightningScale)
	eps          float64
}

func newMiniMax01(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	err := m.require("residual_scale")
	res, interval := 0.0, 0
	if err == nil {
		res, err = m.float("residual_scale", 0)
	}
	if err == nil {
		interval, err = m.int("full_attention_interval", 8)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	switch {
	case interval < 1:
		l.Failf("metadata %s.full_attention_interval = %d, want >= 1", hp.Arch, interval)
		return nil
	case hp.Layers < 2:
		l.Failf("metadata %s.block_count = %d: minimax-01's slope scales need 2 layers or more", hp.Arch, hp.Layers)
		return nil
	}
	if d := l.Opts.SSMStateDtype; d != "" && d != "f32" {
		l.Failf("%s's lightning attention runs each window from a zero state in one pass, as llama.cpp does: a state dtype of %s would change nothing", hp.Arch, d)
		return nil
	}
	lightning, err := qwen35Pattern(l, hp.Layers, interval)
	if err != nil {
		l.fail(err)
		return nil
	}
	moe := l.moeParams(moeOpts{gating: ml.GateSoftmax, ffn: hp.FFN})
	if moe == nil {
		return nil
	}
	moe.gating, moe.Gating, moe.Norm, moe.Scale, moe.FFN = ml.GateSoftmax, ml.GateSoftmax.String(), true, 0, hp.FFN
	d := l.baseDecoder(true)
	if l.Err() != nil {
		return nil
	}
	E, qd, kvd := hp.Embd, hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	slopes := nn.LightningSlopes(hp.Heads)
	for i := range hp.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		ly := decoderLayer{attnNorm: l.Norm(p+"attn_norm", E), o: l.Linear(p+"attn_output", qd, E), ffnNorm: l.Norm(p+"ffn_norm", E)}
		if lightning[i] {
			ly.mixer = &lightningMixer{qkv: l.Linear(p+"attn_qkv", E, 3*qd), gate: l.Linear(p+"attn_gate", E, qd), o: ly.o,
				norm: l.Norm(p+"attn_norm_2", qd), slopes: slopes, scale: nn.LightningScale(i, hp.Layers), eps: hp.Eps}
			ly.o = nil
		} else {
			ly.q, ly.k, ly.v = l.Linear(p+"attn_q", E, qd), l.Linear(p+"attn_k", E, kvd), l.Linear(p+"attn_v", E, kvd)
		}
		if l.Has(p + "exp_probs_b.bias") {
			l.Failf("tensor %sexp_probs_b.bias: llama.cpp's minimax-01 routes without a selection bias (it refuses the file)", p)
		}
		if l.Err() == nil && !l.Has(p+"ffn_gate_exps.weight") {
			l.Failf("missing tensor %sffn_gate_exps.weight", p)
		}
		ly.ffn = l.MoE(p, moe)
		d.layers = append(d.layers, ly)
	}
	if l.Err() != nil {
		return nil
	}
	return &minimax01{decoder: d, resScale: res}
}

// Check requires the lightning attention and the operations around it.
func (m *minimax01) Check(b ml.Backend) error {
	_, lt := b.(ml.Lightning)
	_, rw := b.(ml.RWKV)
	_, rc := b.(ml.Recurrent)
	if !lt || !rw || !rc {
		return fmt.Errorf("%s needs lightning attention (ml.Lightning, ml.RWKV's SiLU and Sigmoid, ml.Recurrent's Mul), which backend %T lacks", m.hp.Arch, b)
	}
	return nil
}

func (m *minimax01) Forward(b ml.Backend, tokens []int32) ml.Tensor {
	E, n := m.hp.Embd, len(tokens)
	x := b.Alloc(n, E) // the residual stream
	b.Embed(x, m.tokenEmbd, tokens)
	for i := range m.layers {
		ly := &m.layers[i]
		mark := b.Mark()
		h, y := b.Alloc(n, E), b.Alloc(n, E)
		m.norm(b, h, x, ly.attnNorm, nil)
		if ly.mixer != nil {
			ly.mixer.forward(b, y, h)
		} else {
			m.attention(b, y, h, i, ly)
		}
		b.Scale(h, m.resScale)
		b.Add(y, h)
		m.norm(b, h, y, ly.ffnNorm, nil)
		ly.ffn.Forward(b, x, h)
		b.Scale(h, m.resScale)
		b.Add(x, h)
		b.Release(mark)
	}
	m.norm(b, x, x, m.outputNorm, nil)
	return x
}

// forward is a lightning attention layer on the normed rows h.
func (m *lightningMixer) forward(b ml.Backend, dst, h ml.Tensor) {
	n, qd := h.Rows(), m.gate.Out
	mark := b.Mark()
	qkv, att, g := b.Alloc(n, 3*qd), b.Alloc(n, qd), b.Alloc(n, qd)
	b.Linear(qkv, h, m.qkv)
	b.(ml.RWKV).SiLU(qkv)
	b.(ml.Lightning).Lightning(att, qkv, m.slopes, m.scale)
	b.RMSNorm(att, att, m.norm, m.eps)
	b.Linear(g, h, m.gate)
	b.(ml.RWKV).Sigmoid(g)
	b.(ml.Recurrent).Mul(att, g, att)
	b.Linear(dst, att, m.o)
	b.Release(mark)
}
