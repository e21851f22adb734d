package model

import (
	"fmt"

	"ppl.dev/score/ml"
)

// mamba and mamba2: the state-space models of recurrent layers alone, as
// llama.cpp 0.7.0 runs them: x += mixer(RMSNorm(x)) in every layer
// (attn_norm), no attention and no FFN, then the output norm and the head
// (output, or the tied token_embd). mamba2's mixer is Mamba-2's
// (granitehybrid.go: Mamba-Codestral, the mamba2-* models), mamba's is
// Mamba-1's (mamba1: the mamba-* models, Falcon-Mamba). Their files give
// attention.head_count and feed_forward_length as 0 (attentionFree).
func init() {
	Register("mamba", newMamba)
	Register("mamba2", newMamba2)
}

// mamba1 is one layer's Mamba-1 mixer (llama.cpp's build_mamba_layer):
// [x | z] = ssm_in·h (ssm.inner_size = d values each); x through the
// causal depthwise convolution ssm_conv1d (ssm.conv_kernel taps) plus its
// bias, then SiLU (u); [dt | B | C] = ssm_x·u (ssm.time_step_rank = R
// values of dt, ssm.state_size = N of B and of C); where the model norms
// them, dt, B and C RMS-normed apart (Falcon-Mamba's ssm.dt_b_c_rms:
// without weights; jamba's ssm_dt_norm, ssm_b_norm, ssm_c_norm); dt =
// ssm_dt·dt; the selective scan with a decay per state column (ml.SSM,
// StateDecays: d heads of one channel, decays ssm_a of N per channel, skip
// ssm_d, dt bias ssm_dt.bias); y ⊙ silu(z); out = ssm_out·y. PLaMo-2's
// mixer is the same with its own columns, no convolution bias and
// Mamba-2's scan (plamo2.go).
type mamba1 struct {
	in, x, dt, out       *ml.Matrix // ssm_in, ssm_x, ssm_dt, ssm_out
	conv, convBias       *ml.Vector // ssm_conv1d: channels × kernel; its bias, or nil
	normed               bool       // dt, B and C RMS-normed
	dtNorm, bNorm, cNorm *ml.Vector // their weights; nil: none (normed, Falcon-Mamba)
	ssm                  ml.SSM     // with the layer's ssm_a, ssm_d, ssm_dt.bias
	cols                 *mamba1Cols
	eps                  float64
	rows                 int // deltaRows; smaller in tests
}

// mamba1Cols are the column tables every Mamba-1 layer of a model shares
// (ml.Recurrent.GatherCols), and the convolution's kernel.
type mamba1Cols struct {
	x, z, dt, b, c []int
	kernel         int
}

// mamba1Params reads the ssm.* metadata of a Mamba-1 model (d_inner,
// d_state, dt_rank, the convolution's kernel) into the mixer every layer
// copies before it binds its weights (mamba1). llama.cpp allows only
// d_inner = 2·embedding_length; any width computes here.
func (l *Loader) mamba1Params() *mamba1 {
	hp := l.HP
	sz := l.ssmSizes("conv_kernel", "inner_size", "state_size", "time_step_rank")
	if sz == nil {
		return nil
	}
	K, d, N, R := sz[0], sz[1], sz[2], sz[3]
	return &mamba1{
		ssm:  ml.SSM{Heads: d, HeadDim: 1, Groups: 1, State: N, StateDecays: true, StateDtype: l.Opts.SSMStateDtype},
		cols: &mamba1Cols{x: colRange(0, d), z: colRange(d, d), dt: colRange(0, R), b: colRange(R, N), c: colRange(R+N, N), kernel: K},
		eps:  hp.Eps,
		rows: deltaRows,
	}
}

// mamba1 binds prefix's Mamba-1 mixer of proto's shape; with weighted its
// dt, B and C norms' weights (ssm_dt_norm, ssm_b_norm, ssm_c_norm: jamba).
func (l *Loader) mamba1(p string, proto *mamba1, weighted bool) *mamba1 {
	m := l.xprojMixer(p, proto, true)
	if weighted {
		R, N := len(m.cols.dt), m.ssm.State
		m.normed = true
		m.dtNorm, m.bNorm, m.cNorm = l.Norm(p+"ssm_dt_norm", R), l.Norm(p+"ssm_b_norm", N), l.Norm(p+"ssm_c_norm", N)
	}
	return m
}

// xprojMixer binds prefix's mixer of proto's shape whose dt, B and C come
// from ssm_x (Mamba-1's, PLaMo-2's), without the norms of dt, B and C:
// ssm_in, ssm_conv1d (and its bias when convBias), ssm_x, ssm_dt (its
// bias the scan's), ssm_a, ssm_d, ssm_out.
func (l *Loader) xprojMixer(p string, proto *mamba1, convBias bool) *mamba1 {
	hp := l.HP
	m := *proto
	s := &m.ssm
	d, R, N := len(m.cols.x), len(m.cols.dt), s.State
	m.in = l.Linear(p+"ssm_in", hp.Embd, 2*d)
	m.conv = l.tensorVector(p+"ssm_conv1d.weight", m.cols.kernel, d)
	if convBias {
		m.convBias = l.Vector(p+"ssm_conv1d.bias", d)
	}
	m.x = l.Linear(p+"ssm_x", d, R+2*N)
	m.dt = l.Linear(p+"ssm_dt", R, s.Heads)
	if m.dt != nil { // its bias is the scan's, added to dt in the scan as ggml's ADD before SSM_SCAN
		m.dt.Bias = nil
	}
	s.DtBias = l.Vector(p+"ssm_dt.bias", s.Heads)
	if s.StateDecays { // a decay per state column (Mamba-1), else per head (PLaMo-2: a vector)
		s.A = l.tensorVector(p+"ssm_a", N, s.Heads)
	} else {
		s.A = l.tensorVector(p+"ssm_a", s.Heads)
	}
	s.D = l.tensorVector(p+"ssm_d", s.Heads)
	m.out = l.Linear(p+"ssm_out", d, hp.Embd)
	if l.Err() == nil {
		if e := m.ssm.Validate(); e != nil {
			l.fail(fmt.Errorf("%s.ssm.*: %w", hp.Arch, e))
		}
	}
	return &m
}

// forward computes the mixer for a window's rows h into dst, m.rows rows
// at a time, from a zero convolution history and state.
func (m *mamba1) forward(b ml.Backend, dst, h ml.Tensor) {
	s := &m.ssm
	scanBlocks(b, dst, h, m.rows, s.Heads*s.HeadDim, s.State, m.cols.kernel, len(m.cols.x), m.block)
}

// block computes the mixer for consecutive rows of a window.
func (m *mamba1) block(b ml.Backend, dst, h, state, hist ml.Tensor) {
	n, s, c := h.Rows(), &m.ssm, m.cols
	rc := b.(ml.Recurrent)
	d := len(c.x)
	mark := b.Mark()
	z, u := b.Alloc(n, d), b.Alloc(n, d)
	dt, bm, cm := b.Alloc(n, s.Heads), b.Alloc(n, s.State), b.Alloc(n, s.State)
	proj := b.Mark()
	all, x := b.Alloc(n, 2*d), b.Alloc(n, d)
	b.Linear(all, h, m.in)
	rc.GatherCols(x, all, c.x)
	rc.GatherCols(z, all, c.z)
	rc.ConvSiLU(u, x, hist, m.conv, m.convBias)
	b.Release(proj)
	xdb, dtr := b.Alloc(n, m.x.Out), b.Alloc(n, len(c.dt))
	b.Linear(xdb, u, m.x)
	rc.GatherCols(dtr, xdb, c.dt)
	rc.GatherCols(bm, xdb, c.b)
	rc.GatherCols(cm, xdb, c.c)
	if m.normed {
		b.RMSNorm(dtr, dtr, m.dtNorm, m.eps)
		b.RMSNorm(bm, bm, m.bNorm, m.eps)
		b.RMSNorm(cm, cm, m.cNorm, m.eps)
	}
	b.Linear(dt, dtr, m.dt)
	y := b.Alloc(n, d)
	rc.SSMScan(y, u, dt, bm, cm, state, s)
	rc.GatedGroupNorm(y, y, z, nil, d, m.eps)
	b.Linear(dst, y, m.out)
	b.Release(mark)
}

// recurrentDecoder binds a decoder of mixers alone (mamba, mamba2): the
// token embedding, attn_norm and the mixer of each layer, the output norm
// and head; no RoPE, no attention.
func (l *Loader) recurrentDecoder(mixer func(p string) rowMixer) Network {
	hp := l.HP
	d := &decoder{
		hp:         hp,
		tokenEmbd:  l.Linear("token_embd", hp.Embd, hp.Vocab),
		head:       Head{Output: l.LinearAlt(hp.Embd, hp.Vocab, "output", "token_embd")},
		outputNorm: l.Norm("output_norm", hp.Embd),
	}
	net := l.bindLayers(d, func(_ int, p string) decoderLayer {
		return decoderLayer{attnNorm: l.Norm(p+"attn_norm", hp.Embd), mixer: mixer(p)}
	})
	if net == nil {
		return nil
	}
	return ssmDecoder{d, l.Opts.SSMStateDtype}
}

func newMamba(l *Loader) Network {
	proto := l.mamba1Params()
	if proto == nil {
		return nil
	}
	normed, err := meta{l.f, l.HP.Arch}.bool("ssm.dt_b_c_rms", false)
	if err != nil {
		l.fail(err)
		return nil
	}
	proto.normed = normed
	return l.recurrentDecoder(func(p string) rowMixer { return l.mamba1(p, proto, false) })
}

func newMamba2(l *Loader) Network {
	proto := l.mamba2Params()
	if proto == nil {
		return nil
	}
	return l.recurrentDecoder(func(p string) rowMixer { return l.mamba2(p, proto, true, true) })
}
