package model

import (
	"fmt"
	"math"

	"ppl.dev/score/ml"
)

// rwkv6: RWKV-6 "Finch" (the RWKV-6 World models), as llama.cpp 0.7.0 runs
// it: rwkv7's layout (token_embd_norm, LayerNorms with biases, a time mix
// and a channel mix each on a blend of its normed input and the previous
// token's) with RWKV-6's mixes. The time mix (llama.cpp's
// build_rwkv6_time_mix): with sx = x_prev - x, one blend x + sx·lerp_x
// feeds tanh(time_mix_w1·) and, per fifth of that, time_mix_w2's five
// matrices; adding the rows of time_mix_lerp_fused (or the older files'
// lerp_w, k, v, r, g) gives five data-dependent blends (d + μ)·sx + x, in
// the order w, k, v, r, g. r, k, v = time_mix_receptance, key, value of
// theirs, the gate silu(time_mix_gate·), the decay exp(-exp(decay +
// decay_w2·tanh(decay_w1·))); the recurrence over heads of wkv.head_size
// with the bonus time_mix_first (ml.RWKV.WKV6), LayerNormed per head
// (epsilon 64e-5) by time_mix_ln and its bias, times the gate,
// time_mix_output. The channel mix: sigmoid(channel_mix_receptance · blend
// by lerp_r) ⊙ channel_mix_value·relu(channel_mix_key · blend by lerp_k)².
// Every rescale_every_n_layers-th layer's output is halved (the converter
// divides the weights to match).
//
// rwkv6qwen2 (QRWKV6: Qwen 2.5 with RWKV-6 time mixing): RMS norms
// (attn_norm, ffn_norm, output_norm with an optional bias), no embedding
// norm, a SwiGLU MLP; the time mix without time_mix_first is gated linear
// attention (WKV6 without a bonus, r scaled by head_size^-½, k ← k - k·w
// first), with a sigmoid gate and no norm per head; keys and values may
// have attention.head_count_kv heads, each shared by consecutive heads;
// their biases optional. A file with time_mix_first llama.cpp 0.7.0
// cannot run (it would need time_mix_ln, which it does not bind): refused.
func init() {
	Register("rwkv6", func(l *Loader) Network { return newRWKV6(l, false) })
	Register("rwkv6qwen2", func(l *Loader) Network { return newRWKV6(l, true) })
}

type rwkv6Layer struct {
	rwkvLayer
	lerpX           *ml.Vector
	mix             [5]*ml.Vector // w, k, v, r, g
	w1              *ml.Matrix
	w2              []*ml.Matrix // 5: the blends' maps
	first           *ml.Vector   // nil: gated linear attention (rwkv6qwen2)
	decay           *ml.Vector
	dw1, dw2        *ml.Matrix
	r, k, v, g, out *ml.Matrix
	ln, lnB         *ml.Vector // nil: no norm per head (rwkv6qwen2)
	cmixR           *ml.Vector // channel_mix_lerp_r (with cmixK)
	cr              *ml.Matrix // channel_mix_receptance
}

type rwkv6 struct {
	*rwkvModel // with RMS norms in rwkv6qwen2
	layers     []rwkv6Layer
	rescale    int      // rescale_every_n_layers; 0: none
	parts      [5][]int // the columns of each fifth of time_mix_w1's output
	kvCols     []int    // the key and value columns each head reads; nil: its own
}

func newRWKV6(l *Loader, qwen bool) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	var sizes [3]int // required, as llama.cpp requires them
	for i, key := range []string{"wkv.head_size", "time_mix_extra_dim", "time_decay_extra_dim"} {
		v, err := m.positive(key, -1)
		if err != nil {
			l.fail(err)
			return nil
		}
		sizes[i] = v
	}
	hs, mix, dd := sizes[0], sizes[1], sizes[2]
	base := l.rwkvModel(hs, qwen, true)
	if base == nil {
		return nil
	}
	e, heads := hp.Embd, base.heads
	rescale, err := m.int("rescale_every_n_layers", 0)
	if err != nil {
		l.fail(err)
		return nil
	}
	net := &rwkv6{rwkvModel: base, rescale: rescale, layers: make([]rwkv6Layer, hp.Layers)}
	for j := range net.parts {
		net.parts[j] = colRange(j*mix, mix)
	}
	kvHeads := heads
	if qwen {
		kv, err := m.maxInt("attention.head_count_kv", 0)
		if err != nil {
			l.fail(err)
			return nil
		}
		if kv != 0 && kv != heads {
			if heads%kv != 0 {
				l.Failf("metadata %s.attention.head_count_kv = %d does not divide the %d heads", hp.Arch, kv, heads)
				return nil
			}
			kvHeads = kv
			net.kvCols = make([]int, e)
			for c := range net.kvCols {
				net.kvCols[c] = c/hs/(heads/kv)*hs + c%hs
			}
		}
	}
	for i := range net.layers {
		p := fmt.Sprintf("blk.%d.", i)
		ly := &net.layers[i]
		ly.rwkvLayer = l.rwkvLayer(p, qwen)
		ly.w1 = l.Linear(p+"time_mix_w1", e, 5*mix)
		ly.w2 = l.Stack(p+"time_mix_w2", 5, mix, e)
		ly.lerpX = l.tensorVector(p+"time_mix_lerp_x.weight", e, 1, 1)
		if fused := p + "time_mix_lerp_fused.weight"; qwen || l.Has(fused) {
			copy(ly.mix[:], l.blends(fused, e, 5))
		} else { // the older files' blends, one tensor each
			for j, b := range []string{"w", "k", "v", "r", "g"} {
				ly.mix[j] = l.tensorVector(p+"time_mix_lerp_"+b+".weight", e, 1, 1)
			}
		}
		ly.decay = l.Vector(p+"time_mix_decay.weight", e)
		ly.dw1, ly.dw2 = l.Linear(p+"time_mix_decay_w1", e, dd), l.Linear(p+"time_mix_decay_w2", dd, e)
		ly.k, ly.v = l.Linear(p+"time_mix_key", e, kvHeads*hs), l.Linear(p+"time_mix_value", e, kvHeads*hs)
		ly.r, ly.g = l.Linear(p+"time_mix_receptance", e, e), l.Linear(p+"time_mix_gate", e, e)
		ly.out = l.Linear(p+"time_mix_output", e, e)
		if qwen {
			if l.Has(p + "time_mix_first.weight") {
				l.Failf("tensor %stime_mix_first.weight: a %s file with RWKV-6's bonus llama.cpp 0.7.0 cannot run (it would need time_mix_ln)", p, hp.Arch)
				return nil
			}
			continue
		}
		ly.first = l.tensorVector(p+"time_mix_first.weight", hs, heads)
		ly.ln, ly.lnB = l.Norm(p+"time_mix_ln", e), l.Vector(p+"time_mix_ln.bias", e)
		ly.cmixR = l.tensorVector(p+"channel_mix_lerp_r.weight", e, 1, 1)
		ly.cr = l.Linear(p+"channel_mix_receptance", e, e)
	}
	if l.Err() != nil {
		return nil
	}
	return net
}

func (m *rwkv6) Forward(b ml.Backend, tokens []int32) ml.Tensor {
	n, e := len(tokens), m.hp.Embd
	rw := b.(ml.RWKV)
	x := m.embed(b, tokens)
	state := b.Alloc(e, m.headSize)
	for i := range m.layers {
		ly := &m.layers[i]
		mark := b.Mark()
		h, sx, y := b.Alloc(n, e), b.Alloc(n, e), b.Alloc(n, e)
		m.norm(b, h, x, ly.attnNorm, ly.attnNormB)
		rw.TokenShift(sx, h)
		m.timeMix(b, y, h, sx, state, ly)
		b.Add(x, y)
		m.norm(b, h, x, ly.ffnNorm, ly.ffnNormB)
		if ly.cmixK == nil {
			b.MLP(y, h, &ly.ffn)
		} else {
			m.channelMix(b, y, h, sx, ly)
		}
		b.Add(x, y)
		if m.rescale > 0 && (i+1)%m.rescale == 0 {
			b.Scale(x, 0.5)
		}
		b.Release(mark)
	}
	m.norm(b, x, x, m.outNorm, m.outNormB)
	return x
}

// channelMix computes RWKV-6's channel mix of the normed rows h into dst,
// sx its scratch for their token shift.
func (m *rwkv6) channelMix(b ml.Backend, dst, h, sx ml.Tensor, ly *rwkv6Layer) {
	n, e := h.Rows(), m.hp.Embd
	rw := b.(ml.RWKV)
	mark := b.Mark()
	xk, xr := b.Alloc(n, e), b.Alloc(n, e)
	rw.TokenShift(sx, h)
	blend(b, xk, sx, h, ly.cmixK)
	blend(b, xr, sx, h, ly.cmixR)
	b.Linear(sx, xr, ly.cr)
	rw.Sigmoid(sx)
	b.MLP(dst, xk, &ly.ffn)
	b.(ml.Recurrent).Mul(dst, sx, dst)
	b.Release(mark)
}

// timeMix computes layer ly's time mix of the normed rows h (sx: their
// token shift) into dst.
func (m *rwkv6) timeMix(b ml.Backend, dst, h, sx, state ml.Tensor, ly *rwkv6Layer) {
	n, e := h.Rows(), m.hp.Embd
	rw, rc := b.(ml.RWKV), b.(ml.Recurrent)
	mark := b.Mark()
	var xs [5]ml.Tensor // the blends w, k, v, r, g: (d + μ)·sx + h
	for j := range xs {
		xs[j] = b.Alloc(n, e)
	}
	mk := b.Mark()
	xx, t, part := b.Alloc(n, e), b.Alloc(n, ly.w1.Out), b.Alloc(n, len(m.parts[0]))
	blend(b, xx, sx, h, ly.lerpX)
	b.Linear(t, xx, ly.w1)
	b.(ml.AltUp).Tanh(t)
	for j := range xs {
		rc.GatherCols(part, t, m.parts[j])
		b.Linear(xs[j], part, ly.w2[j])
		b.AddRows(xs[j], ly.mix[j])
		rc.Mul(xs[j], xs[j], sx)
		b.Add(xs[j], h)
	}
	b.Release(mk)
	xw, xk, xv, xr, xg := xs[0], xs[1], xs[2], xs[3], xs[4]
	r, k, v, w := b.Alloc(n, e), b.Alloc(n, e), b.Alloc(n, e), b.Alloc(n, e)
	b.Linear(r, xr, ly.r)
	m.keysValues(b, k, xk, ly.k)
	m.keysValues(b, v, xv, ly.v)
	b.Linear(xr, xg, ly.g) // the gate, in xr
	if ly.first == nil {
		rw.Sigmoid(xr)
	} else {
		rw.SiLU(xr)
	}
	mk = b.Mark()
	t = b.Alloc(n, ly.dw1.Out)
	b.Linear(t, xw, ly.dw1)
	b.(ml.AltUp).Tanh(t)
	b.Linear(w, t, ly.dw2)
	b.Release(mk)
	b.AddRows(w, ly.decay)
	rw.Decay(w, ml.DecayExp)
	y := xw
	if ly.first == nil { // gated linear attention: k - k·w, r scaled
		rc.Mul(xk, k, w)
		rw.Sub(k, k, xk)
		b.Scale(r, float64(float32(math.Pow(float64(m.headSize), -0.5))))
	}
	rc.Zero(state)
	rw.WKV6(y, r, k, v, w, state, ly.first, m.heads)
	if ly.ln != nil {
		heads := b.View(y, n*m.heads, m.headSize)
		b.(ml.LayerNormer).LayerNorm(heads, heads, ly.ln, ly.lnB, rwkvGroupNormEps)
	}
	rc.Mul(y, y, xr)
	b.Linear(dst, y, ly.out)
	b.Release(mark)
}

// keysValues computes x·w into dst, repeating the KV heads over their
// groups of heads when there are fewer (rwkv6qwen2).
func (m *rwkv6) keysValues(b ml.Backend, dst, x ml.Tensor, w *ml.Matrix) {
	if m.kvCols == nil {
		b.Linear(dst, x, w)
		return
	}
	mk := b.Mark()
	t := b.Alloc(x.Rows(), w.Out)
	b.Linear(t, x, w)
	b.(ml.Recurrent).GatherCols(dst, t, m.kvCols)
	b.Release(mk)
}
