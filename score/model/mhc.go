package model

import (
	"slices"

	"ppl.dev/score/ml"
)

// mhc is manifold-constrained hyper-connections (mHC, DeepSeek-V4's: the
// residual of deepseek4 and glm5-next): the streams, which a block reads
// by sigmoid weights of their normed mixes and writes back by others and
// by a matrix of the streams made doubly stochastic by iters Sinkhorn
// iterations of epsilon hcEps (hyper_connection.*; read, write); cols
// holds streams² columns' copies (the matrix's entries).
type mhc struct {
	hcStreams
	iters int
	hcEps float32
}

// mhcLayer is a layer's two mixes: around the mixer and the FFN.
type mhcLayer struct{ attn, ffn mhcMix }

// mhcMix is one mHC mix: hy_v4's read and write gates and the streams'
// mixing matrix, from hc_*_scale[2] and hc_*_base[8:24].
type mhcMix struct {
	hcMix
	combScale float32
	combBase  *ml.Vector // streams² values
}

// mhcParams reads the streams of mHC (hyper_connection.count,
// sinkhorn_iterations, epsilon) and the constant ε of its gates; ok false
// after an error.
func (l *Loader) mhcParams() (v mhc, epsV *ml.Vector, ok bool) {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	err := m.require("hyper_connection.count", "hyper_connection.sinkhorn_iterations", "hyper_connection.epsilon")
	var S, iters int
	var eps float64
	if err == nil {
		S, err = m.int("hyper_connection.count", 0)
	}
	if err == nil {
		iters, err = m.int("hyper_connection.sinkhorn_iterations", 0)
	}
	if err == nil {
		eps, err = m.float("hyper_connection.epsilon", 0)
	}
	switch {
	case err != nil:
		l.fail(err)
	case S != 4:
		l.Failf("metadata %s.hyper_connection.count = %d: llama.cpp runs mHC of 4 streams only (it asserts it)", hp.Arch, S)
	case iters < 1:
		l.Failf("metadata %s.hyper_connection.sinkhorn_iterations = %d, want at least 1 (llama.cpp asserts it)", hp.Arch, iters)
	}
	if l.Err() != nil {
		return mhc{}, nil, false
	}
	v = mhc{hcStreams: hcStreams{embd: hp.Embd, streams: S, eps: hp.Eps, cols: streamCols(S*S, hp.Embd)}, iters: iters, hcEps: float32(eps)}
	return v, l.constVector("hyper_connection.epsilon", slices.Repeat([]float32{float32(eps)}, S)), true
}

// mhcMix binds the mix p+"_fn", "_base" and "_scale" of mHC's S streams.
func (l *Loader) mhcMix(p string, S int, epsV *ml.Vector) mhcMix {
	mixes := (2 + S) * S
	x := mhcMix{hcMix: hcMix{fn: l.Linear(p+"_fn", S*l.HP.Embd, mixes)}}
	base := l.Vector(p+"_base.weight", mixes)
	scale := l.Vector(p+"_scale.weight", 3)
	if base == nil || scale == nil {
		return x
	}
	x.pre = hcGate{scale: float64(scale.V[0]), base: l.constVector(p+"_base (pre)", base.V[:S]), eps: epsV}
	x.post = hcGate{col: S, scale: float64(scale.V[1]), mag: 2, base: l.constVector(p+"_base (post)", base.V[S:2*S])}
	x.combScale, x.combBase = scale.V[2], l.constVector(p+"_base (comb)", base.V[2*S:])
	return x
}

// read returns Σ_s pre_s·x_s (n, embd) by mx's weights of the normed
// streams x, and sets post (n, streams) and comb (n, streams²) to mx's
// write gates and mixing matrix.
func (v mhc) read(b ml.Backend, x ml.Tensor, mx *mhcMix, post, comb ml.Tensor) ml.Tensor {
	n, S := x.Rows(), v.streams
	m := v.mixes(b, x, mx.fn)
	v.gate(b, post, m, &mx.post)
	b.(ml.MHC).SinkhornMix(comb, m, S, 2*S, mx.combScale, mx.combBase, v.hcEps, v.iters)
	pre := b.Alloc(n, S)
	v.gate(b, pre, m, &mx.pre)
	return v.weigh(b, x, pre)
}

// write makes the streams x_d = post_d·out + Σ_s comb[d + streams·s]·x_s
// (llama.cpp's fused DSV4_HC_POST: the products rounded to float32 and
// summed in that order).
func (v mhc) write(b ml.Backend, x, out, post, comb ml.Tensor) {
	n, E, S := x.Rows(), v.embd, v.streams
	lb, rc := b.(ml.Latent), b.(ml.Recurrent)
	mark := b.Mark()
	xs := make([]ml.Tensor, S)
	for s := range xs {
		xs[s] = b.Alloc(n, E)
		lb.Columns(xs[s], 0, x, s*E, E)
	}
	t, u, wide := b.Alloc(n, E), b.Alloc(n, E), b.Alloc(n, E)
	for d := range S {
		rc.GatherCols(wide, post, v.cols[d])
		rc.Mul(t, out, wide)
		for s := range S {
			rc.GatherCols(wide, comb, v.cols[d+S*s])
			rc.Mul(u, xs[s], wide)
			b.Add(t, u)
		}
		lb.Columns(x, d*E, t, 0, E)
	}
	b.Release(mark)
}
