package model

import (
	"fmt"

	"ppl.dev/score/ml"
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
	_, rw := b.(ml.RWKV)
	_, hc := b.(ml.MHC)
	if !rw || !hc {
		return fmt.Errorf("glm5-next's hyper-connections need ml.RWKV's Sigmoid and ml.MHC's SinkhornMix, which backend %T lacks", b)
	}
	return nil
}

func (v glm5Next) Forward(b ml.Backend, tokens []int32) ml.Tensor {
	hp, n, E, S := v.hp, len(tokens), v.hp.Embd, v.streams
	sb, x, h, ok := v.startStreams(b, tokens, S)
	if !ok {
		return h
	}
	var keys ml.KeySet
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
