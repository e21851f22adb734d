package model

import (
	"fmt"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// qwen35, qwen35moe (Qwen3.5, 3.6, 3.8) and qwen3next (Qwen3-Next, their
// predecessor: the same block in other GGUF packings). Hybrids of Gated
// DeltaNet (a linear-attention recurrence) and gated full attention, in
// llama's pre-norm block: h = x + mixer(RMSNorm(x)); out = h +
// FFN(RMSNorm(h)), the FFN a SwiGLU MLP (qwen35) or a mixture of experts
// with a sigmoid-gated shared expert (qwen35moe, qwen3next).
//
// Where it differs from llama:
//   - Layer i is Gated DeltaNet iff attention.recurrent_layers[i] (a bool
//     per block) when the file has it, else iff (i+1) %
//     full_attention_interval != 0 (default 4). block_count counts the
//     nextn_predict_layers MTP blocks at the end, which are not run.
//   - Gated DeltaNet: [q | k | v] = attn_qkv·h (H_k, H_k, H_v heads of
//     S = ssm.state_size), z = attn_gate·h; beta = sigmoid(ssm_beta·h), g
//     = ssm_a · softplus(ssm_alpha·h + ssm_dt.bias); [q | k | v] through
//     the causal depthwise conv ssm_conv1d and SiLU; q and k L2-normed per
//     head, q / sqrt(S); the gated delta rule per V head (ml.DeltaRule);
//     y = RMSNorm(o)·ssm_norm·silu(z) per head; out = ssm_out·y.
//   - Gated attention: attn_q gives per head [q | gate]; q/k RMSNorm per
//     head; NeoX RoPE on the first rope.dimension_count dims (Qwen3.5's
//     IMRoPE sections rotate the same pairs by the same angles for text);
//     the attention output × sigmoid(gate), then attn_output.
//
// qwen3next differs from qwen35moe in its packings: beta and alpha come
// fused in ssm_ba, grouped per K head ([beta of its r = H_v/H_k V heads |
// their alpha]); a layer may hold the legacy fused ssm_in instead of
// attn_qkv + attn_gate (per K head [q | k | v of its V heads | z of
// them]); V head h reads K head h div r (Qwen3.5's converter tiles the V
// heads so that V head h reads K head h mod H_k); the shared expert's gate
// is stored ne {n_embd, 1}.
func init() {
	moe := &moeOpts{gating: ml.GateSoftmax, norm: true}
	Register("qwen35", func(l *Loader) Network { return newQwen35(l, qwen35Opts{tiled: true}) })
	Register("qwen35moe", func(l *Loader) Network { return newQwen35(l, qwen35Opts{tiled: true, moe: moe}) })
	Register("qwen3next", func(l *Loader) Network { return newQwen35(l, qwen35Opts{next: true, moe: moe}) })
}

// qwen35Opts: tiled is Qwen3.5's V-head order (ml.DeltaRule.Tiled); next
// is qwen3next's packings (ssm_ba, optional legacy ssm_in); moe makes
// every FFN a mixture of experts; hyper is qwen4exp's layers (qwen4exp.go):
// no output norm, and Gated DeltaNet's output gate a sigmoid.
type qwen35Opts struct {
	tiled, next, hyper bool
	moe                *moeOpts
}

type qwen35 struct {
	hp         HParams
	tokenEmbd  *ml.Matrix
	outputNorm *ml.Vector
	head       Head
	rope       *nn.RoPE
	attn       ml.Attn
	dr         ml.DeltaRule
	dConv      int
	rows       int  // deltaRows; smaller in tests
	sigmoidOut bool // Gated DeltaNet's output gate sigmoid(z), not silu(z)
	layers     []qwen35Layer

	// Column tables for ml.Recurrent.GatherCols.
	qCols, gateCols     []int // attn_q output -> q, gate
	convQ, convK, convV []int // conv output -> q, k, v
	legacyQKV, legacyZ  []int // ssm_in output -> conv input, z
	baBeta, baAlpha     []int // ssm_ba output -> beta, alpha
}

type qwen35Layer struct {
	recurrent          bool
	attnNorm, postNorm *ml.Vector // attn_norm, post_attention_norm

	// Gated attention.
	q, k, v, o   *ml.Matrix // attn_q (q | gate per head), attn_k, attn_v, attn_output
	qNorm, kNorm *ml.Vector // attn_q_norm, attn_k_norm

	// Gated DeltaNet.
	qkv, gate   *ml.Matrix // attn_qkv, attn_gate (split layout)
	in          *ml.Matrix // ssm_in (qwen3next's legacy layout), or nil
	beta, alpha *ml.Matrix // ssm_beta, ssm_alpha
	ba          *ml.Matrix // ssm_ba (qwen3next)
	conv        *ml.Vector // ssm_conv1d: channels × d_conv
	a, dt       *ml.Vector // ssm_a, ssm_dt.bias
	norm        *ml.Vector // ssm_norm
	out         *ml.Matrix // ssm_out

	ffn FFN
}

func newQwen35(l *Loader, o qwen35Opts) *qwen35 {
	q, recurrent := qwen35Base(l, o)
	if q == nil {
		return nil
	}
	var moe *moeParams
	if o.moe != nil {
		moe = l.moeParams(*o.moe)
	}
	for i := range recurrent {
		p := fmt.Sprintf("blk.%d.", i)
		ly := q.mixer(l, i, recurrent[i], o.next)
		ly.attnNorm = l.Norm(p+"attn_norm", q.hp.Embd)
		ly.postNorm = l.Norm(p+"post_attention_norm", q.hp.Embd)
		ly.ffn = q.ffn(l, i, moe)
		q.layers = append(q.layers, ly)
	}
	return q
}

// qwen35Base reads a hybrid's metadata and binds its embeddings, output
// norm (none with o.hyper) and head; it returns which of the blocks run
// (block_count less the MTP blocks) are Gated DeltaNet, and nil after an
// error.
func qwen35Base(l *Loader, o qwen35Opts) (*qwen35, []bool) {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	var err error
	geti := func(key string, def int) int {
		v, e := m.int(key, def)
		if err == nil {
			err = e
		}
		return v
	}
	S := geti("ssm.state_size", -1)
	Hk := geti("ssm.group_count", -1)
	Hv := geti("ssm.time_step_rank", -1)
	dConv := geti("ssm.conv_kernel", -1)
	inner := geti("ssm.inner_size", -1)
	nextn := geti("nextn_predict_layers", 0)
	interval := geti("full_attention_interval", 4)
	if err != nil {
		l.fail(err)
		return nil, nil
	}
	arch := hp.Arch
	dr := ml.DeltaRule{KHeads: Hk, VHeads: Hv, Dim: S, Tiled: o.tiled, State: l.Opts.SSMStateDtype}
	switch {
	case dr.Validate() != nil:
		l.fail(fmt.Errorf("%s.ssm.*: %w", arch, dr.Validate()))
		return nil, nil
	case inner != Hv*S:
		l.Failf("metadata %s.ssm.inner_size = %d, want ssm.time_step_rank × ssm.state_size = %d", arch, inner, Hv*S)
		return nil, nil
	case dConv < 1:
		l.Failf("metadata %s.ssm.conv_kernel = %d, want >= 1", arch, dConv)
		return nil, nil
	case nextn >= hp.Layers:
		l.Failf("metadata %s.nextn_predict_layers = %d with block_count %d", arch, nextn, hp.Layers)
		return nil, nil
	case interval < 1:
		l.Failf("metadata %s.full_attention_interval = %d, want >= 1", arch, interval)
		return nil, nil
	}
	recurrent, e := qwen35Pattern(l, hp.Layers, interval)
	if e != nil {
		l.fail(e)
		return nil, nil
	}
	E, hd, H := hp.Embd, hp.HeadDim, hp.Heads
	q := &qwen35{
		hp:         hp,
		tokenEmbd:  l.Linear("token_embd", E, hp.Vocab),
		head:       Head{Output: l.LinearAlt(E, hp.Vocab, "output", "token_embd")},
		rope:       l.RoPE(true),
		attn:       ml.Attn{Heads: H, KVHeads: hp.KVHeads, HeadDim: hd, Scale: float64(nn.InvSqrtf(hd))},
		dr:         dr,
		dConv:      dConv,
		rows:       deltaRows,
		sigmoidOut: o.hyper,
	}
	if !o.hyper {
		q.outputNorm = l.Norm("output_norm", E)
	}
	for h := range H {
		q.qCols = append(q.qCols, colRange(h*2*hd, hd)...)
		q.gateCols = append(q.gateCols, colRange(h*2*hd+hd, hd)...)
	}
	q.convQ, q.convK, q.convV = colRange(0, Hk*S), colRange(Hk*S, Hk*S), colRange(2*Hk*S, Hv*S)
	r := Hv / Hk
	for g := range Hk {
		base := g * (2*S + 2*r*S)
		q.legacyZ = append(q.legacyZ, colRange(base+2*S+r*S, r*S)...)
	}
	for part := range 3 { // q parts, then k, then v, in K head order
		for g := range Hk {
			base := g * (2*S + 2*r*S)
			switch part {
			case 0:
				q.legacyQKV = append(q.legacyQKV, colRange(base, S)...)
			case 1:
				q.legacyQKV = append(q.legacyQKV, colRange(base+S, S)...)
			case 2:
				q.legacyQKV = append(q.legacyQKV, colRange(base+2*S, r*S)...)
			}
		}
	}
	for h := range Hv {
		q.baBeta = append(q.baBeta, h/r*2*r+h%r)
		q.baAlpha = append(q.baAlpha, h/r*2*r+r+h%r)
	}
	l.passMTP(hp.Layers-nextn, nextn)
	return q, recurrent[:hp.Layers-nextn]
}

// mixer binds layer i's Gated DeltaNet (recurrent) or gated attention;
// next is qwen3next's packings.
func (q *qwen35) mixer(l *Loader, i int, recurrent, next bool) qwen35Layer {
	hp, d := q.hp, q.dr
	E, hd, H, S, Hv := hp.Embd, hp.HeadDim, hp.Heads, d.Dim, d.VHeads
	convDim := 2*d.KHeads*S + Hv*S
	p := fmt.Sprintf("blk.%d.", i)
	ly := qwen35Layer{recurrent: recurrent}
	if recurrent {
		if next && l.Has(p+"ssm_in.weight") {
			ly.in = l.Linear(p+"ssm_in", E, convDim+Hv*S)
		} else {
			ly.qkv = l.Linear(p+"attn_qkv", E, convDim)
			ly.gate = l.Linear(p+"attn_gate", E, Hv*S)
		}
		if next {
			ly.ba = l.Linear(p+"ssm_ba", E, 2*Hv)
		} else {
			ly.beta = l.Linear(p+"ssm_beta", E, Hv)
			ly.alpha = l.Linear(p+"ssm_alpha", E, Hv)
		}
		ly.conv = l.tensorVector(p+"ssm_conv1d.weight", q.dConv, convDim)
		ly.a = l.Vector(p+"ssm_a", Hv)
		ly.dt = l.Vector(p+"ssm_dt.bias", Hv)
		ly.norm = l.Norm(p+"ssm_norm", S)
		ly.out = l.Linear(p+"ssm_out", Hv*S, E)
	} else {
		ly.q = l.Linear(p+"attn_q", E, 2*H*hd)
		ly.k = l.Linear(p+"attn_k", E, hp.KVHeads*hd)
		ly.v = l.Linear(p+"attn_v", E, hp.KVHeads*hd)
		ly.o = l.Linear(p+"attn_output", H*hd, E)
		ly.qNorm = l.Norm(p+"attn_q_norm", hd)
		ly.kNorm = l.Norm(p+"attn_k_norm", hd)
	}
	return ly
}

// ffn binds layer i's MLP, or with moe its experts and the gated shared
// expert they require.
func (q *qwen35) ffn(l *Loader, i int, moe *moeParams) FFN {
	p := fmt.Sprintf("blk.%d.", i)
	if moe == nil {
		return l.DenseFFN(p, q.hp.Embd, q.hp.FFN)
	}
	f := l.MoE(p, moe)
	if l.Err() == nil && (f.Shared == nil || f.SGate == nil) {
		l.Failf("missing tensor %sffn_up_shexp.weight or %sffn_gate_inp_shexp.weight (the gated shared expert)", p, p)
	}
	return f
}

// qwen35Pattern returns which of the blocks are Gated DeltaNet:
// attention.recurrent_layers when present, else every block but each
// interval-th.
func qwen35Pattern(l *Loader, blocks, interval int) ([]bool, error) {
	key := l.HP.Arch + ".attention.recurrent_layers"
	if v, ok := l.f.Lookup(key); ok {
		b, ok := v.Any().([]bool)
		if !ok || len(b) != blocks {
			return nil, fmt.Errorf("metadata %s: want an array of %d bools (one per block)", key, blocks)
		}
		return b, nil
	}
	out := make([]bool, blocks)
	for i := range out {
		out[i] = (i+1)%interval != 0
	}
	return out, nil
}

// colRange returns the columns [c0, c0+n).
func colRange(c0, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = c0 + i
	}
	return out
}

// tensorVector binds a tensor of float weights of shape (ne0, ne1, ...),
// trailing ones optional as sameShape allows, as one vector: ne1 rows of
// ne0 values for a matrix.
func (l *Loader) tensorVector(name string, shape ...int) *ml.Vector {
	v := l.floats(name, shape...)
	if v == nil {
		return nil
	}
	w := &ml.Vector{Name: name, V: v}
	l.vecs = append(l.vecs, w)
	return w
}

func (m *qwen35) Head() *Head { return &m.head }

// Check requires the recurrent operations.
func (m *qwen35) Check(b ml.Backend) error {
	if _, ok := b.(ml.Recurrent); !ok {
		return fmt.Errorf("%s needs the recurrent operations (ml.Recurrent: GatherCols, ConvSiLU, Zero, L2Norm, DeltaGates, DeltaNet, GatedRMSNorm), which backend %T lacks", m.hp.Arch, b)
	}
	return nil
}

// recurrentNetwork is a Network with recurrent state, whose dtype Info
// records (Options.SSMStateDtype).
type recurrentNetwork interface{ ssmStateDtype() string }

// ssmStateDtype is the recurrent state dtype, for Info.
func (m *qwen35) ssmStateDtype() string {
	if m.dr.State == "" {
		return "f32"
	}
	return m.dr.State
}

func (m *qwen35) Forward(b ml.Backend, tokens []int32) ml.Tensor {
	hp, n := m.hp, len(tokens)
	x := b.Alloc(n, hp.Embd)
	b.Embed(x, m.tokenEmbd, tokens)
	for i := range m.layers {
		ly := &m.layers[i]
		mark := b.Mark()
		h := b.Alloc(n, hp.Embd)
		mix := b.Alloc(n, hp.Embd)
		b.RMSNorm(h, x, ly.attnNorm, hp.Eps)
		if ly.recurrent {
			m.deltaNet(b, mix, h, ly)
		} else {
			m.gatedAttention(b, mix, h, i, ly, &m.attn)
		}
		b.Add(x, mix)
		b.RMSNorm(h, x, ly.postNorm, hp.Eps)
		ly.ffn.Forward(b, mix, h)
		b.Add(x, mix)
		b.Release(mark)
	}
	b.RMSNorm(x, x, m.outputNorm, hp.Eps)
	return x
}

// gatedAttention computes a gated attention mixer with the attention a
// (m.attn, or with qwen4exp's sparse attention its keys).
func (m *qwen35) gatedAttention(b ml.Backend, dst, h ml.Tensor, layer int, ly *qwen35Layer, a *ml.Attn) {
	hp, n := m.hp, h.Rows()
	rc := b.(ml.Recurrent)
	qd, kvd := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	mark := b.Mark()
	q, gate, k, v := b.Alloc(n, qd), b.Alloc(n, qd), b.Alloc(n, kvd), b.Alloc(n, kvd)
	// The packed [q | gate] projection m.rows rows at a time, so that it
	// costs no memory per token of a long window.
	proj := b.Mark()
	qg := b.Alloc(min(n, m.rows), 2*qd)
	for r0 := 0; r0 < n; r0 += m.rows {
		r1 := min(n, r0+m.rows)
		blk := b.Slice(qg, 0, r1-r0)
		b.Linears([]ml.Tensor{blk, b.Slice(k, r0, r1), b.Slice(v, r0, r1)}, b.Slice(h, r0, r1), []*ml.Matrix{ly.q, ly.k, ly.v})
		rc.GatherCols(b.Slice(q, r0, r1), blk, m.qCols)
		rc.GatherCols(b.Slice(gate, r0, r1), blk, m.gateCols)
	}
	b.Release(proj)
	att := b.Alloc(n, qd)
	qh, kh := b.View(q, n*hp.Heads, hp.HeadDim), b.View(k, n*hp.KVHeads, hp.HeadDim)
	b.RMSNorm(qh, qh, ly.qNorm, hp.Eps)
	b.RMSNorm(kh, kh, ly.kNorm, hp.Eps)
	b.RoPE(q, hp.Heads, m.rope)
	b.RoPE(k, hp.KVHeads, m.rope)
	b.Attention(att, q, k, v, layer, a)
	b.GateMul(att, gate, ml.SigmoidGate)
	b.Linear(dst, att, ly.o)
	b.Release(mark)
}

// deltaRows is how many rows of a window a Gated DeltaNet layer computes
// at a time, the convolution's history and the recurrent state carried
// from one block to the next: its buffers stay bounded however long the
// window (gated attention computes its packed [q | gate] projection in
// blocks of as many rows). A multiple of the CPU's chunk, so that blocks
// do not change the chunks.
const deltaRows = 4096

// deltaNet computes a Gated DeltaNet mixer, m.rows rows at a time, from a
// zero convolution history and state.
func (m *qwen35) deltaNet(b ml.Backend, dst, h ml.Tensor, ly *qwen35Layer) {
	n, d := h.Rows(), m.dr
	rc := b.(ml.Recurrent)
	mark := b.Mark()
	state := b.Alloc(d.VHeads*d.Dim, d.Dim)
	hist := b.Alloc(m.dConv-1, 2*d.KHeads*d.Dim+d.VHeads*d.Dim)
	rc.Zero(state)
	rc.Zero(hist)
	for r0 := 0; r0 < n; r0 += m.rows {
		r1 := min(n, r0+m.rows)
		m.deltaBlock(b, b.Slice(dst, r0, r1), b.Slice(h, r0, r1), ly, state, hist)
	}
	b.Release(mark)
}

// deltaBlock computes the mixer for consecutive rows of a window. The
// projections and the convolution's buffers are released before the scan.
func (m *qwen35) deltaBlock(b ml.Backend, dst, h ml.Tensor, ly *qwen35Layer, state, hist ml.Tensor) {
	n, d := h.Rows(), m.dr
	rc := b.(ml.Recurrent)
	kd, vd := d.KHeads*d.Dim, d.VHeads*d.Dim
	mark := b.Mark()
	z, beta, g := b.Alloc(n, vd), b.Alloc(n, d.VHeads), b.Alloc(n, d.VHeads)
	q, k, v := b.Alloc(n, kd), b.Alloc(n, kd), b.Alloc(n, vd)
	proj := b.Mark()
	mixed := b.Alloc(n, 2*kd+vd)
	if ly.in != nil {
		all := b.Alloc(n, 2*kd+2*vd)
		b.Linear(all, h, ly.in)
		rc.GatherCols(mixed, all, m.legacyQKV)
		rc.GatherCols(z, all, m.legacyZ)
	} else {
		b.Linears([]ml.Tensor{mixed, z}, h, []*ml.Matrix{ly.qkv, ly.gate})
	}
	if ly.ba != nil {
		ba := b.Alloc(n, 2*d.VHeads)
		b.Linear(ba, h, ly.ba)
		rc.GatherCols(beta, ba, m.baBeta)
		rc.GatherCols(g, ba, m.baAlpha)
	} else {
		b.Linears([]ml.Tensor{beta, g}, h, []*ml.Matrix{ly.beta, ly.alpha})
	}
	rc.DeltaGates(beta, g, ly.a, ly.dt)
	u := b.Alloc(n, 2*kd+vd)
	rc.ConvSiLU(u, mixed, hist, ly.conv, nil)
	rc.GatherCols(q, u, m.convQ)
	rc.GatherCols(k, u, m.convK)
	rc.GatherCols(v, u, m.convV)
	b.Release(proj)

	qh, kh := b.View(q, n*d.KHeads, d.Dim), b.View(k, n*d.KHeads, d.Dim)
	rc.L2Norm(qh, qh, m.hp.Eps)
	rc.L2Norm(kh, kh, m.hp.Eps)
	o := b.Alloc(n, vd)
	rc.DeltaNet(o, q, k, v, g, beta, state, &m.dr)
	if m.sigmoidOut { // llama.cpp's graph: RMSNorm·w, then × sigmoid(z)
		oh := b.View(o, n*d.VHeads, d.Dim)
		b.RMSNorm(oh, oh, ly.norm, m.hp.Eps)
		b.GateMul(o, z, ml.SigmoidGate)
	} else {
		rc.GatedRMSNorm(o, o, z, ly.norm, m.hp.Eps)
	}
	b.Linear(dst, o, ly.out)
	b.Release(mark)
}
