package model

import (
	"fmt"

	"ppl.dev/score/ml"
)

// rwkv7: RWKV-7 "Goose" (the RWKV-7 World and G1 models), an RNN without
// attention, as llama.cpp 0.7.0 runs it. The token embeddings are
// LayerNormed (token_embd_norm, with its bias); each layer adds a time mix
// of its LayerNormed input (attn_norm) and then a channel mix of the
// LayerNormed result (attn_norm_2), both reading each token blended with
// the previous one: x + (x_prev - x)·μ per channel (token shift; the
// previous token of a window's first is zeros, as llama.cpp starts each
// chunk from an empty state).
//
// The time mix (llama.cpp's build_rwkv7_time_mix), from six blends of the
// normed input x by the rows of time_mix_lerp_fused (r, w, k, v, a, g):
//   - r, k, v: time_mix_receptance, key and value of their blends;
//   - the decay w = exp(-0.606531·sigmoid(w0 + w2·tanh(w1·x_w)));
//   - the in-context learning rate a = sigmoid(a0 + a2·(a1·x_a));
//   - from the second layer on, v moved toward the first layer's values:
//     v + (v₀ - v)·sigmoid(v0 + v2·(v1·x_v));
//   - the gate g = g2·sigmoid(g1·x_g);
//   - κ̂ = k ⊙ k_k L2-normed per head, k ← k + (a ⊙ k⊙k_a - k⊙k_a);
//   - the recurrence over heads of wkv.head_size (ml.RWKV.WKV7 with a =
//     -κ̂, b = κ̂ ⊙ a), its output LayerNormed per head (epsilon 64e-5,
//     llama.cpp's) by time_mix_ln and its bias, plus the current-token
//     term (ml.RWKV.Bonus, r_k), times g, then time_mix_output.
//
// The channel mix is an ungated ReLU² MLP (channel_mix_key, then
// channel_mix_value) of one blend (channel_mix_lerp_k). The files give
// attention.head_count as 0; llama.cpp requires the gate's weights.
//
// arwkv7 (ARWKV: RWKV-7's time mix distilled into Qwen 2.5) is rwkv7 with
// RMS norms (attn_norm, ffn_norm, output_norm: no biases, no norm of the
// embeddings) and a SwiGLU MLP (ffn_gate, ffn_up, ffn_down) for the
// channel mix; the gate (time_mix_g1, g2, the sixth blend) and the
// LayerNorm per head (time_mix_ln) are optional, as llama.cpp binds them
// (the converter writes no gate for a checkpoint with wkv_has_gate false:
// 5 blends). Its files give token_shift_count 1.
func init() {
	Register("rwkv7", func(l *Loader) Network { return newRWKV7(l, false) })
	Register("arwkv7", func(l *Loader) Network { return newRWKV7(l, true) })
}

// rwkv7L2Eps is the floor of κ̂'s L2 norm, fixed in llama.cpp.
const rwkv7L2Eps = 1e-12

type rwkv7Layer struct {
	rwkvLayer
	mix                            []*ml.Vector // the rows of time_mix_lerp_fused: r, w, k, v, a and g (with a gate)
	w0, a0, v0                     *ml.Vector
	w1, w2, a1, a2, v1, v2, g1, g2 *ml.Matrix // the low-rank maps; v1, v2 unused in layer 0; g1, g2 nil: no gate (arwkv7)
	kk, ka, rk                     *ml.Vector // time_mix_k_k, k_a, r_k
	r, k, v, out                   *ml.Matrix
	ln, lnB                        *ml.Vector // time_mix_ln: the LayerNorm per head; nil: none (arwkv7)
}

type rwkv7 struct {
	*rwkvModel // with RMS norms in arwkv7
	layers     []rwkv7Layer
}

func newRWKV7(l *Loader, arwkv bool) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	var sizes [4]int // required, as llama.cpp requires them
	for i, key := range []string{"wkv.head_size", "attention.decay_lora_rank", "attention.iclr_lora_rank", "attention.value_residual_mix_lora_rank"} {
		v, err := m.positive(key, -1)
		if err != nil {
			l.fail(err)
			return nil
		}
		sizes[i] = v
	}
	hs, dw, da, dv := sizes[0], sizes[1], sizes[2], sizes[3]
	dg, err := m.int("attention.gate_lora_rank", 0) // 0 without a gate
	if err != nil {
		l.fail(err)
		return nil
	}
	base := l.rwkvModel(hs, arwkv, false)
	if base == nil {
		return nil
	}
	e := hp.Embd
	net := &rwkv7{rwkvModel: base, layers: make([]rwkv7Layer, hp.Layers)}
	for i := range net.layers {
		p := fmt.Sprintf("blk.%d.", i)
		ly := &net.layers[i]
		lora := func(name string, r int) (*ml.Matrix, *ml.Matrix) {
			return l.Linear(p+"time_mix_"+name+"1", e, r), l.Linear(p+"time_mix_"+name+"2", r, e)
		}
		ly.rwkvLayer = l.rwkvLayer(p, arwkv)
		ly.w0 = l.Vector(p+"time_mix_w0.weight", e)
		ly.w1, ly.w2 = lora("w", dw)
		ly.a0 = l.Vector(p+"time_mix_a0.weight", e)
		ly.a1, ly.a2 = lora("a", da)
		ly.v0 = l.Vector(p+"time_mix_v0.weight", e)
		if i == 0 { // bound as llama.cpp binds them (as wide as the in-context rate's), not used
			ly.v1, ly.v2 = lora("v", da)
		} else {
			ly.v1, ly.v2 = lora("v", dv)
		}
		blends := 6
		if !arwkv || l.Has(p+"time_mix_g1.weight") || l.Has(p+"time_mix_g2.weight") {
			ly.g1, ly.g2 = lora("g", dg)
		} else {
			blends = 5
		}
		ly.mix = l.blends(p+"time_mix_lerp_fused.weight", e, blends)
		ly.kk, ly.ka, ly.rk = l.Vector(p+"time_mix_k_k.weight", e), l.Vector(p+"time_mix_k_a.weight", e), l.Vector(p+"time_mix_r_k.weight", e)
		ly.r, ly.k, ly.v = l.Linear(p+"time_mix_receptance", e, e), l.Linear(p+"time_mix_key", e, e), l.Linear(p+"time_mix_value", e, e)
		if !arwkv || l.Has(p+"time_mix_ln.weight") || l.Has(p+"time_mix_ln.bias") {
			ly.ln, ly.lnB = l.Norm(p+"time_mix_ln", e), l.Vector(p+"time_mix_ln.bias", e)
		}
		ly.out = l.Linear(p+"time_mix_output", e, e)
	}
	if l.Err() != nil {
		return nil
	}
	return net
}

func (m *rwkv7) Forward(b ml.Backend, tokens []int32) ml.Tensor {
	n, e := len(tokens), m.hp.Embd
	rw := b.(ml.RWKV)
	x := m.embed(b, tokens)
	first := b.Alloc(n, e) // the first layer's values
	state := b.Alloc(e, m.headSize)
	for i := range m.layers {
		ly := &m.layers[i]
		mark := b.Mark()
		h, sx, y := b.Alloc(n, e), b.Alloc(n, e), b.Alloc(n, e)
		m.norm(b, h, x, ly.attnNorm, ly.attnNormB)
		rw.TokenShift(sx, h)
		m.timeMix(b, y, h, sx, first, state, ly, i == 0)
		b.Add(x, y)
		m.norm(b, h, x, ly.ffnNorm, ly.ffnNormB)
		in := h
		if ly.cmixK != nil {
			rw.TokenShift(sx, h)
			blend(b, sx, sx, h, ly.cmixK)
			in = sx
		}
		b.MLP(y, in, &ly.ffn)
		b.Add(x, y)
		b.Release(mark)
	}
	m.norm(b, x, x, m.outNorm, m.outNormB)
	return x
}

// timeMix computes layer ly's time mix of the normed rows h (sx: their
// token shift) into dst; first holds the first layer's values, which
// layer 0 (isFirst) writes and the others read.
func (m *rwkv7) timeMix(b ml.Backend, dst, h, sx, first, state ml.Tensor, ly *rwkv7Layer, isFirst bool) {
	n, e := h.Rows(), m.hp.Embd
	rw, rc, au := b.(ml.RWKV), b.(ml.Recurrent), b.(ml.AltUp)
	mark := b.Mark()
	xs := make([]ml.Tensor, len(ly.mix))
	for j := range xs {
		xs[j] = b.Alloc(n, e)
		blend(b, xs[j], sx, h, ly.mix[j])
	}
	xr, xw, xk, xv, xa := xs[0], xs[1], xs[2], xs[3], xs[4]
	// lowRank sets out = m2·f(m1·x) (f nil: none).
	lowRank := func(out, x ml.Tensor, m1, m2 *ml.Matrix, f func(ml.Tensor)) {
		mk := b.Mark()
		t := b.Alloc(n, m1.Out)
		b.Linear(t, x, m1)
		if f != nil {
			f(t)
		}
		b.Linear(out, t, m2)
		b.Release(mk)
	}
	r, w, k, a := b.Alloc(n, e), b.Alloc(n, e), b.Alloc(n, e), b.Alloc(n, e)
	b.Linear(r, xr, ly.r)
	lowRank(w, xw, ly.w1, ly.w2, au.Tanh)
	b.AddRows(w, ly.w0)
	rw.Decay(w, ml.DecaySigmoid)
	b.Linear(k, xk, ly.k)
	lowRank(a, xa, ly.a1, ly.a2, nil)
	b.AddRows(a, ly.a0)
	rw.Sigmoid(a)
	kk, ka := b.Alloc(n, e), b.Alloc(n, e)
	au.MulCols(kk, k, ly.kk)
	au.MulCols(ka, k, ly.ka)
	rc.Mul(xw, a, ka) // xw, xa, xk: free from here
	rw.Sub(xw, xw, ka)
	b.Add(k, xw)
	v := first
	if !isFirst {
		v = b.Alloc(n, e)
	}
	b.Linear(v, xv, ly.v)
	if !isFirst {
		mix, d := xa, xk
		lowRank(mix, xv, ly.v1, ly.v2, nil)
		b.AddRows(mix, ly.v0)
		rw.Sigmoid(mix)
		rw.Sub(d, first, v)
		rc.Mul(d, d, mix)
		b.Add(v, d)
	}
	heads := b.View(kk, n*m.heads, m.headSize)
	rc.L2Norm(heads, heads, rwkv7L2Eps)
	kb := xa
	rc.Mul(kb, kk, a)
	b.Scale(kk, -1)
	rc.Zero(state)
	y := xw
	rw.WKV7(y, r, w, k, v, kk, kb, state, m.heads)
	if ly.ln != nil {
		heads = b.View(y, n*m.heads, m.headSize)
		b.(ml.LayerNormer).LayerNorm(heads, heads, ly.ln, ly.lnB, rwkvGroupNormEps)
	}
	rw.Bonus(y, r, k, v, ly.rk, m.heads)
	if ly.g1 != nil {
		g := xv // free once v's mix is done
		lowRank(g, xs[5], ly.g1, ly.g2, rw.Sigmoid)
		rc.Mul(y, y, g)
	}
	b.Linear(dst, y, ly.out)
	b.Release(mark)
}
