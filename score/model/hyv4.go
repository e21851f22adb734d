package model

import (
	"fmt"
	"slices"

	"ppl.dev/score/ml"
)

// hy_v4: Tencent's Hunyuan 4, as llama.cpp 0.7.0 runs it: deepseek2's
// latent attention with q compression (deepseek2.go) in every layer, with
// attention sinks (attn_sinks) and an elementwise gate sigmoid(attn_gate·h)
// on the heads' outputs before attn_output, the score scale
// 1/sqrt(key_length_mla); with attention.indexer.top_k, DSA as deepseek32's
// but for its indexer: RoPE on the last rope.dimension_count elements of
// its heads (their layout the attention's), no Hadamard rotation, the key's
// LayerNorm with the RMS norms' epsilon, and layers flagged 0 in
// attention.indexer.types reusing the previous layer's keys.
//
// The residual is hyper_connection.count streams (iHC: hyper-connections
// without the streams' mixing matrix). Around the attention and around the
// FFN, with x the streams (n, streams·embd):
//
//   - m = hc_*_fn·rmsnorm(x) (no weight), per row 2·streams values;
//   - pre = sigmoid(m[:S]·s0 + base[:S]) + ε, post = magnitude ·
//     sigmoid(m[S:]·s1 + base[S:]) + ε (s = hc_*_scale, base = hc_*_base,
//     ε = hyper_connection.epsilon, magnitude hyper_connection.magnitude);
//   - the block reads Σ_i pre_i·x_i (then its own RMS norm), and stream i
//     becomes x_i + post_i·(the block's output), all in float32 in that
//     order, as llama.cpp's graph;
//
// before the final norm the streams are reduced as by pre, from output_hc_*
// (streams values, one scale). The experts are routed by
// expert_gating_func (required: llama.cpp has no default for hy_v4),
// exp_probs_b.bias where present, normed and scaled as the file says; the
// routed experts' SwiGLUs clamped by swiglu_clamp_exp (the shared expert's
// and dense MLPs' never); the output matrix is required.
type hyV4 struct {
	*deepseek2
	hcStreams
	hc   []hcLayer // per layer
	head hcMix     // output_hc_*
}

// hcStreams are a decoder's residual streams (hyper-connections): streams
// copies of the residual, each embd wide, side by side in a row; the RMS
// norms' epsilon eps (the mixes'); cols[i] embd copies of column i, which
// spread a stream's weight (column i of (rows, streams)) over its row
// (mhc's Sinkhorn matrix needs streams² of them).
type hcStreams struct {
	embd, streams int
	eps           float64
	cols          [][]int
}

// hcLayer is a layer's two mixes: around the attention and the FFN.
type hcLayer struct{ attn, ffn hcMix }

// hcMix is one reduction of the streams (and, but for the head, the gates
// of the block's output back into them).
type hcMix struct {
	fn        *ml.Matrix // (2·streams, or streams for the head, streams·embd)
	pre, post hcGate
}

// hcGate is sigmoid(m·scale + base)·mag + ε over streams columns of m.
type hcGate struct {
	col        int        // first column of m
	scale, mag float64    // float32 values; mag 0: none
	base, eps  *ml.Vector // streams values each; eps nil: none
}

// bindHC reads hy_v4's streams and binds their weights; nil after an error.
func (l *Loader) bindHC(d *deepseek2) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	S, err := m.positive("hyper_connection.count", -1)
	var eps, mag float64
	if err == nil {
		err = m.require("hyper_connection.epsilon", "hyper_connection.magnitude")
	}
	if err == nil {
		eps, err = m.float("hyper_connection.epsilon", 0)
	}
	if err == nil {
		mag, err = m.float("hyper_connection.magnitude", 0)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	epsV := l.constVector("hyper_connection.epsilon", slices.Repeat([]float32{float32(eps)}, S))
	v := hyV4{deepseek2: d, hcStreams: hcStreams{embd: hp.Embd, streams: S, eps: hp.Eps, cols: streamCols(S, hp.Embd)},
		head: l.hcMix("output_hc", S, 1, 0, epsV)}
	for i := range d.layers {
		p := fmt.Sprintf("blk.%d.hc_", i)
		v.hc = append(v.hc, hcLayer{attn: l.hcMix(p+"attn", S, 2, mag, epsV), ffn: l.hcMix(p+"ffn", S, 2, mag, epsV)})
	}
	if l.Err() != nil {
		return nil
	}
	return v
}

// hcMix binds the mix p+"_fn", "_base" and "_scale" of S streams: its
// read gates, and with gates 2 its write gates of magnitude mag, each + ε
// (epsV).
func (l *Loader) hcMix(p string, S, gates int, mag float64, epsV *ml.Vector) hcMix {
	x := hcMix{fn: l.Linear(p+"_fn", S*l.HP.Embd, gates*S)}
	base := l.Vector(p+"_base.weight", gates*S)
	scale := l.Vector(p+"_scale.weight", gates)
	if base == nil || scale == nil {
		return x
	}
	x.pre = hcGate{scale: float64(scale.V[0]), base: l.constVector(p+"_base (pre)", base.V[:S]), eps: epsV}
	if gates == 2 {
		x.post = hcGate{col: S, scale: float64(scale.V[1]), mag: float64(float32(mag)), base: l.constVector(p+"_base (post)", base.V[S:]), eps: epsV}
	}
	return x
}

// streamCols is, for each of n columns i, embd copies of i: the columns
// that spread a stream's weight (column i of (rows, n)) over its row.
func streamCols(n, embd int) [][]int {
	cols := make([][]int, n)
	for i := range cols {
		cols[i] = slices.Repeat([]int{i}, embd)
	}
	return cols
}

// Check requires, besides the latent attention, ml.Recurrent's GatherCols
// and Mul and ml.RWKV's Sigmoid (the streams' weights).
func (v hyV4) Check(b ml.Backend) error {
	if err := v.deepseek2.Check(b); err != nil {
		return err
	}
	_, rc := b.(ml.Recurrent)
	_, rw := b.(ml.RWKV)
	if !rc || !rw {
		return fmt.Errorf("hy_v4's hyper-connections need ml.Recurrent's GatherCols and Mul and ml.RWKV's Sigmoid, which backend %T lacks", b)
	}
	return nil
}

func (v hyV4) Forward(b ml.Backend, tokens []int32) ml.Tensor {
	hp, n, E, S := v.hp, len(tokens), v.hp.Embd, v.streams
	lb := b.(ml.Latent)
	sb, x, h, ok := v.startStreams(b, tokens, S)
	if !ok {
		return h
	}
	var keys ml.KeySet
	for i := range v.layers {
		ly, hc := &v.layers[i], &v.hc[i]
		mark := b.Mark()
		post := b.Alloc(n, S)
		a := v.reduce(b, x, &hc.attn, post)
		b.RMSNorm(a, a, ly.attnNorm, hp.Eps)
		v.spread(b, x, v.attend(b, sb, &keys, i, a), post)
		f := v.reduce(b, x, &hc.ffn, post)
		ff := b.Alloc(n, E)
		b.RMSNorm(f, f, ly.ffnNorm, hp.Eps)
		ly.ffn.Forward(b, ff, f)
		v.spread(b, x, ff, post)
		b.Release(mark)
	}
	mark := b.Mark()
	lb.Columns(h, 0, v.reduce(b, x, &v.head, nil), 0, E)
	b.Release(mark)
	b.RMSNorm(h, h, v.outputNorm, hp.Eps)
	return h
}

// reduce returns Σ_i pre_i·x_i (n, embd) by mx's weights of the normed
// streams x, and sets post to mx's post gates (unless nil).
func (v hcStreams) reduce(b ml.Backend, x ml.Tensor, mx *hcMix, post ml.Tensor) ml.Tensor {
	m := v.mixes(b, x, mx.fn)
	pre := b.Alloc(x.Rows(), v.streams)
	v.gate(b, pre, m, &mx.pre)
	if post != nil {
		v.gate(b, post, m, &mx.post)
	}
	return v.weigh(b, x, pre)
}

// mixes returns fn·rmsnorm(x) of the streams x (no weight): their mixes'
// logits.
func (v hcStreams) mixes(b ml.Backend, x ml.Tensor, fn *ml.Matrix) ml.Tensor {
	flat := b.Alloc(x.Rows(), x.Cols())
	b.RMSNorm(flat, x, nil, v.eps)
	m := b.Alloc(x.Rows(), fn.Out)
	b.Linear(m, flat, fn)
	return m
}

// weigh returns Σ_i pre_i·x_i (n, embd) of the streams x, each product and
// sum rounded to float32 in stream order (llama.cpp's fused HC pre's bits).
func (v hcStreams) weigh(b ml.Backend, x, pre ml.Tensor) ml.Tensor {
	n, E := x.Rows(), v.embd
	lb, rc := b.(ml.Latent), b.(ml.Recurrent)
	acc, tmp, wide := b.Alloc(n, E), b.Alloc(n, E), b.Alloc(n, E)
	for i := range v.streams {
		dst := tmp
		if i == 0 {
			dst = acc
		}
		lb.Columns(dst, 0, x, i*E, E)
		rc.GatherCols(wide, pre, v.cols[i])
		rc.Mul(dst, dst, wide)
		if i > 0 {
			b.Add(acc, tmp)
		}
	}
	return acc
}

// gate sets dst (n, streams) to g's gates of the mixes m.
func (v hcStreams) gate(b ml.Backend, dst, m ml.Tensor, g *hcGate) {
	b.(ml.Latent).Columns(dst, 0, m, g.col, v.streams)
	b.Scale(dst, g.scale)
	b.AddRows(dst, g.base)
	b.(ml.RWKV).Sigmoid(dst)
	if g.mag != 0 {
		b.Scale(dst, g.mag)
	}
	if g.eps != nil {
		b.AddRows(dst, g.eps)
	}
}

// spread adds the block's output out (n, embd) to each stream of x times
// its post gate.
func (v hcStreams) spread(b ml.Backend, x, out, post ml.Tensor) {
	addStreams(b, x, out, post, v.cols[:v.streams])
}

// startStreams begins a forward pass of a decoder of streams residual
// streams: the sparse attention a window of the tokens needs (nil: dense),
// the streams x (embedStreams) and h, the embeddings; with ok false, b has
// failed (the window needs what b lacks) and h is the pass's result.
func (d *deepseek2) startStreams(b ml.Backend, tokens []int32, streams int) (sb ml.Sparse, x, h ml.Tensor, ok bool) {
	sb, err := d.sparse(b, len(tokens))
	if err != nil {
		b.Fail(err)
		return nil, nil, b.Alloc(len(tokens), d.hp.Embd), false
	}
	x, h = embedStreams(b, d.tokenEmbd, tokens, streams)
	return sb, x, h, true
}

// embedStreams returns the streams x (n, streams·embd), each a copy of the
// tokens' embeddings, and h (n, embd), which holds the embeddings.
func embedStreams(b ml.Backend, w *ml.Matrix, tokens []int32, streams int) (x, h ml.Tensor) {
	n, E := len(tokens), w.In
	x, h = b.Alloc(n, streams*E), b.Alloc(n, E)
	b.Embed(h, w, tokens)
	for i := range streams {
		b.(ml.Latent).Columns(x, i*E, h, 0, E)
	}
	return x, h
}

// addStreams adds out (n, embd) times column s of w to each stream s of x
// (n, streams·embd), each product and sum rounded to float32 (llama.cpp's
// MUL and ADD, and its fused HC post's bits); cols[s] is embd copies of s.
func addStreams(b ml.Backend, x, out, w ml.Tensor, cols [][]int) {
	n, E := out.Rows(), out.Cols()
	lb, rc := b.(ml.Latent), b.(ml.Recurrent)
	xi, tmp, wide := b.Alloc(n, E), b.Alloc(n, E), b.Alloc(n, E)
	for i := range cols {
		rc.GatherCols(wide, w, cols[i])
		rc.Mul(tmp, out, wide)
		lb.Columns(xi, 0, x, i*E, E)
		b.Add(xi, tmp)
		lb.Columns(x, i*E, xi, 0, E)
	}
}
