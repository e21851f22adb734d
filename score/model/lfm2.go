package model

import (
	"fmt"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// lfm2, lfm2moe: Liquid AI's LFM2 (350M to 2.6B), LFM2.5 and LFM2-8B-A1B,
// as llama.cpp 0.7.0 runs them: llama's pre-norm block (attn_norm, then
// ffn_norm and a SwiGLU MLP, or in lfm2moe from
// leading_dense_block_count on a mixture of experts routed by
// expert_gating_func with the selection bias exp_probs_b, renormalized
// and scaled by expert_weights_scale) whose mixer is, where
// attention.head_count_kv (per layer) is 0, a short convolution:
// [B | C | x] = shortconv.in_proj·h, y = C ⊙ conv(B ⊙ x) with the causal
// depthwise shortconv.conv of shortconv.l_cache taps (no bias, no
// activation), out = shortconv.out_proj·y; else attention with q and k
// RMS-normed per head and NeoX RoPE, over a sliding window when
// attention.sliding_window is set (lfm2 alone: llama.cpp reads no window
// for lfm2moe). The final norm is token_embd_norm.
func init() {
	Register("lfm2", func(l *Loader) Network { return newLFM2(l, false) })
	Register("lfm2moe", func(l *Loader) Network { return newLFM2(l, true) })
}

// shortConv is one layer's LFM2 short convolution.
type shortConv struct {
	in, out *ml.Matrix // shortconv.in_proj ([B | C | x]), shortconv.out_proj
	conv    *ml.Vector // shortconv.conv: channels × taps
	taps    int
	cols    *[3][]int // in_proj's columns of B, C and x
	rows    int       // deltaRows; smaller in tests
}

func newLFM2(l *Loader, experts bool) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	taps, err := m.positive("shortconv.l_cache", -1)
	if err != nil {
		l.fail(err)
		return nil
	}
	if taps < 2 {
		l.Failf("metadata %s.shortconv.l_cache = %d, want at least 2", hp.Arch, taps)
		return nil
	}
	window := 0
	if !experts { // llama.cpp 0.7.0 reads no window for lfm2moe (probed)
		window, err = m.int("attention.sliding_window", 0)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	kv := l.kvHeads()
	if kv == nil {
		return nil
	}
	var moe *moeParams
	if experts {
		if moe = l.moeParams(moeOpts{gating: ml.GateSoftmax, norm: true}); moe == nil {
			return nil
		}
	}
	E := hp.Embd
	cols := &[3][]int{colRange(0, E), colRange(E, E), colRange(2*E, E)}
	dec := &decoder{
		hp:         hp,
		tokenEmbd:  l.Linear("token_embd", E, hp.Vocab),
		outputNorm: l.Norm("token_embd_norm", E),
		head:       Head{Output: l.LinearAlt(E, hp.Vocab, "output", "token_embd")},
		rope:       l.RoPE(true),
		attn: ml.Attn{Heads: hp.Heads, KVHeads: hp.KVHeads, HeadDim: hp.HeadDim, Scale: float64(nn.InvSqrtf(hp.HeadDim)),
			Window: max(window, 0)},
	}
	net := l.bindLayers(dec, func(i int, p string) decoderLayer {
		ly := decoderLayer{attnNorm: l.Norm(p+"attn_norm", E), ffnNorm: l.Norm(p+"ffn_norm", E)}
		if kv[i] == 0 {
			ly.mixer = &shortConv{
				in:   l.Linear(p+"shortconv.in_proj", E, 3*E),
				conv: l.tensorVector(p+"shortconv.conv.weight", taps, E),
				out:  l.Linear(p+"shortconv.out_proj", E, E),
				taps: taps, cols: cols, rows: deltaRows,
			}
		} else {
			qd, kvd := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
			ly.q, ly.k, ly.v = l.Linear(p+"attn_q", E, qd), l.Linear(p+"attn_k", E, kvd), l.Linear(p+"attn_v", E, kvd)
			ly.o = l.Linear(p+"attn_output", qd, E)
			ly.qNorm, ly.kNorm = l.qkNorms(p, false)
		}
		if moe != nil && i >= moe.DenseLayers {
			mo := l.MoE(p, moe)
			if l.Err() == nil && mo.Router.SelBias == nil {
				l.Failf("missing tensor %sexp_probs_b.bias", p)
			}
			ly.ffn = mo
		} else {
			ly.ffn = l.DenseFFN(p, E, hp.FFN)
		}
		return ly
	})
	if net == nil {
		return nil
	}
	return shortConvDecoder{dec}
}

// shortConvDecoder is a decoder some of whose mixers are short
// convolutions: it needs ml.Recurrent.
type shortConvDecoder struct{ *decoder }

func (m shortConvDecoder) Check(b ml.Backend) error {
	if _, ok := b.(ml.Recurrent); !ok {
		return fmt.Errorf("%s needs the recurrent operations (ml.Recurrent: GatherCols, Conv, Mul, Zero), which backend %T lacks", m.hp.Arch, b)
	}
	return nil
}

// forward computes the mixer for a window's rows h into dst, m.rows rows
// at a time, from a zero convolution history.
func (m *shortConv) forward(b ml.Backend, dst, h ml.Tensor) {
	n, E := h.Rows(), len(m.cols[0])
	rc := b.(ml.Recurrent)
	mark := b.Mark()
	hist := b.Alloc(m.taps-1, E)
	rc.Zero(hist)
	for r0 := 0; r0 < n; r0 += m.rows {
		r1 := min(n, r0+m.rows)
		m.block(b, b.Slice(dst, r0, r1), b.Slice(h, r0, r1), hist)
	}
	b.Release(mark)
}

// block computes the mixer for consecutive rows of a window.
func (m *shortConv) block(b ml.Backend, dst, h, hist ml.Tensor) {
	n, E := h.Rows(), len(m.cols[0])
	rc := b.(ml.Recurrent)
	mark := b.Mark()
	bcx := b.Alloc(n, 3*E)
	b.Linear(bcx, h, m.in)
	bm, c, x, y := b.Alloc(n, E), b.Alloc(n, E), b.Alloc(n, E), b.Alloc(n, E)
	rc.GatherCols(bm, bcx, m.cols[0])
	rc.GatherCols(c, bcx, m.cols[1])
	rc.GatherCols(x, bcx, m.cols[2])
	rc.Mul(x, bm, x)
	rc.Conv(y, x, hist, m.conv)
	rc.Mul(y, c, y)
	b.Linear(dst, y, m.out)
	b.Release(mark)
}
