package model

import (
	"fmt"
	"slices"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// glm5-next: GLM-5.3-Flash, as llama.cpp 0.7.0 runs it: kimi-linear's
// hybrid (kimilinear.go: Kimi Delta Attention in the layers of
// attention.head_count_kv 0, ssm_a a 1-D tensor, q and k L2-normed with
// FLA's epsilon 1e-6; with kda.gate_lower_bound kimi-k3's safe gate),
// with these differences:
//
//   - the residual is hyper_connection.count (4) streams, mixed by
//     manifold-constrained hyper-connections (mHC, DeepSeek-V4's): before
//     the mixer and the FFN, m = hc_*_fn·rmsnorm(x) (x the streams, (n,
//     4·embd), no weight) gives per row 24 values; the block reads Σ_s
//     pre_s·x_s, pre = sigmoid(m[:4]·scale₀ + base[:4]) + ε, and its
//     output o makes the streams x'_d = post_d·o + Σ_s C[d,s]·x_s, post =
//     2·sigmoid(m[4:8]·scale₁ + base[4:8]), C the matrix of
//     m[8:24]·scale₂ + base[8:24] made doubly stochastic by
//     hyper_connection.sinkhorn_iterations (nn.SinkhornMix: a softmax,
//     then normalizations, with ε = hyper_connection.epsilon). The head
//     reads the streams' mean. Every step in float32 as llama.cpp's fused
//     DSV4_HC ops, the Sinkhorn's multiply-adds fused as its compiler
//     fuses them;
//   - the latent attention has no RoPE (rope.dimension_count 0), q
//     compressed (attn_q_a), the scores scaled by 1/sqrt(key_length_mla);
//   - past the indexer's reach (top_k + kpool - 1 tokens) each query reads
//     only some keys, chosen by a k-pool indexer: the keys
//     LayerNorm(indexer.attn_k·h) (attention.layernorm_epsilon, 0 when
//     absent) are pooled by blocks of attention.indexer.kpool, each
//     channel weighted by the softmax over the block of its gate
//     (indexer_compressor_gate·h) plus its position's bias
//     (indexer_compressor_ape) (nn.GatedPool); each query scores the
//     whole blocks by Σ_h relu(q_h·pool)·w_h (q = indexer.attn_q_b·q_a, w
//     = indexer.proj·h / sqrt(heads·dim)) and reads the top_k/kpool best
//     blocks and the keys after its last whole block (nn.QSABlocks,
//     ml.PooledSparse); layers flagged 0 in attention.indexer.types reuse
//     the previous attention layer's choice;
//   - every SwiGLU is ggml's SWIGLU_CLAMP (ml.SwiGLUClampIn): the routed
//     experts' at swiglu_clamp_exp, the shared expert's and the dense
//     MLPs' at swiglu_clamp_shexp, the experts' limits when it is absent.
//
// The experts are routed by sigmoid unless expert_gating_func says
// otherwise, with the selection bias exp_probs_b (required), normed and
// scaled as the file says; a NextN block (nextn_predict_layers) is not
// run.
type glm5Next struct {
	kimiLinear
	mhc
	hc []mhcLayer // per layer
}

// mhc is manifold-constrained hyper-connections (DeepSeek-V4's): the
// residual streams, mixed around each block by a Sinkhorn matrix of
// iters iterations and epsilon hcEps (hyper_connection.*); cols holds
// streams² columns' copies (the matrix's entries).
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
	combBase  []float32
}

// glm5Indexer reads the k-pool indexer's block (0 after an error) and its
// key norm's epsilon.
func (l *Loader) glm5Indexer(topK int) (kpool int, eps float64) {
	m := meta{l.f, l.HP.Arch}
	kpool, err := m.int("attention.indexer.kpool", -1)
	tail := false
	if err == nil {
		tail, err = m.bool("attention.indexer.kpool_select_tail", false)
	}
	if err == nil {
		eps, err = m.float("attention.layernorm_epsilon", 0)
	}
	switch {
	case err != nil:
		l.fail(err)
	case kpool <= 1 || topK%kpool != 0:
		l.Failf("metadata %s.attention.indexer.kpool = %d: want above 1 and dividing attention.indexer.top_k = %d (llama.cpp asserts it)", l.HP.Arch, kpool, topK)
	case !tail:
		l.Failf("metadata %s.attention.indexer.kpool_select_tail: false or absent, llama.cpp's queries do not read the keys after their last whole block, and its first %d queries of a window read none (NaN)", l.HP.Arch, kpool-1)
	default:
		return kpool, eps
	}
	return 0, 0
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
	x.combScale, x.combBase = scale.V[2], base.V[2*S:]
	return x
}

// bindMHC binds glm5-next's streams; nil after an error.
func (l *Loader) bindMHC(d *deepseek2) Network {
	hp := l.HP
	for i := range d.layers {
		if d.layers[i].kda != nil {
			continue
		}
		if d.layers[i].idx == nil {
			l.Failf("metadata %s.attention.indexer.types: the first attention layer, %d, must run its indexer (llama.cpp asserts it)", hp.Arch, i)
			return nil
		}
		break
	}
	h, epsV, ok := l.mhcParams()
	if !ok {
		return nil
	}
	v := glm5Next{kimiLinear: kimiLinear{d}, mhc: h}
	for i := range d.layers {
		p := fmt.Sprintf("blk.%d.hc_", i)
		v.hc = append(v.hc, mhcLayer{attn: l.mhcMix(p+"attn", h.streams, epsV), ffn: l.mhcMix(p+"ffn", h.streams, epsV)})
	}
	if l.Err() != nil {
		return nil
	}
	return v
}

// Check requires, besides kimi-linear's operations, ml.RWKV's Sigmoid
// (the streams' gates).
func (v glm5Next) Check(b ml.Backend) error {
	if err := v.kimiLinear.Check(b); err != nil {
		return err
	}
	if _, ok := b.(ml.RWKV); !ok {
		return fmt.Errorf("glm5-next's hyper-connections need ml.RWKV's Sigmoid, which backend %T lacks", b)
	}
	return nil
}

func (v glm5Next) Forward(b ml.Backend, tokens []int32) ml.Tensor {
	hp, n, E, S := v.hp, len(tokens), v.hp.Embd, v.streams
	sb, x, h, ok := v.startStreams(b, tokens, S)
	if !ok {
		return h
	}
	var keys *nn.KeySet
	for i := range v.layers {
		ly, hc := &v.layers[i], &v.hc[i]
		mark := b.Mark()
		post, comb := b.Alloc(n, S), b.Alloc(n, S*S)
		a := v.read(b, x, &hc.attn, post, comb)
		b.RMSNorm(a, a, ly.attnNorm, hp.Eps)
		out := b.Alloc(n, E)
		if ly.kda != nil {
			ly.kda.forward(b, out, a)
		} else {
			out = v.attend(b, sb, &keys, i, a)
		}
		v.write(b, x, out, post, comb)
		f := v.read(b, x, &hc.ffn, post, comb)
		b.RMSNorm(f, f, ly.ffnNorm, hp.Eps)
		ly.ffn.Forward(b, out, f)
		v.write(b, x, out, post, comb)
		b.Release(mark)
	}
	lb := b.(ml.Latent) // the streams' mean, summed in order
	mark := b.Mark()
	xs := b.Alloc(n, E)
	lb.Columns(h, 0, x, 0, E)
	for s := 1; s < S; s++ {
		lb.Columns(xs, 0, x, s*E, E)
		b.Add(h, xs)
	}
	b.Release(mark)
	b.Scale(h, 1/float64(S))
	b.RMSNorm(h, h, v.outputNorm, hp.Eps)
	return h
}

// read returns Σ_s pre_s·x_s (n, embd) by mx's weights of the normed
// streams x, and sets post (n, streams) and comb (n, streams²) to mx's
// write gates and mixing matrix.
func (v mhc) read(b ml.Backend, x ml.Tensor, mx *mhcMix, post, comb ml.Tensor) ml.Tensor {
	n, S := x.Rows(), v.streams
	m := v.mixes(b, x, mx.fn)
	v.gate(b, post, m, &mx.post)
	c := make([]float32, n*S*S) // on the host: 16 values a row
	nn.SinkhornMix(c, b.Read(m), n, mx.fn.Out, 2*S, S, mx.combScale, mx.combBase, v.hcEps, v.iters)
	b.Write(comb, c)
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
