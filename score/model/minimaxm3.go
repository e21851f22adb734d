package model

import (
	"cmp"
	"fmt"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// minimax-m3: MiniMax-M3 (428B-A23B), as llama.cpp 0.7.0 runs it with
// flash attention (its CPU default): qwen3's attention (q and k RMS-normed
// per head by one weight row of head_dim, NeoX RoPE over
// rope.dimension_count) and DeepSeek-V3's feed-forward, every MLP gpt-oss's
// clamped SwiGLU (ml.OAISwiGLU: llama.cpp's LLM_FFN_SWIGLU_OAI_MOE, alpha
// 1.702, limit 7): dense MLPs in the leading_dense_block_count first
// layers, then experts routed by expert_gating_func (required, as llama.cpp
// requires it) with the selection bias exp_probs_b, normed and scaled as
// the file says, plus a shared expert (required).
//
// The layers with experts attend sparsely (MiniMax Sparse Attention, MSA):
// an indexer of attention.indexer.head_count heads (one per KV head, as
// llama.cpp asserts) of attention.indexer.key_length, q = q_proj·h and one
// key k = k_proj·h, each RMS-normed per head (q_norm, k_norm) and turned by
// the attention's RoPE, and the key stored in the KV cache's format;
// query i of KV head g reads the keys j <= i of the
// attention.indexer.top_k blocks of attention.indexer.block_size keys
// whose best score q[i,g]·k[j] is highest, its last
// attention.indexer.local_blocks blocks always among them (nn.MSABlocks,
// ml.BlockSparse). A window of at most top_k blocks reads every key.
func newMiniMaxM3(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	err := m.require("expert_gating_func", "expert_shared_count")
	if g, e := m.int("expert_gating_func", 0); err == nil && (e != nil || g == 0) {
		err = cmp.Or(e, fmt.Errorf("metadata %s.expert_gating_func = 0: llama.cpp has no default for minimax-m3 and aborts", hp.Arch))
	}
	var x msaParams
	for _, k := range []struct {
		dst *int
		key string
	}{{&x.heads, "head_count"}, {&x.dim, "key_length"}, {&x.topK, "top_k"}, {&x.block, "block_size"}} {
		if err == nil {
			*k.dst, err = m.positive("attention.indexer."+k.key, -1)
		}
	}
	if err == nil {
		x.local, err = m.int("attention.indexer.local_blocks", -1)
	}
	if err == nil && x.heads != hp.KVHeads {
		err = fmt.Errorf("metadata %s.attention.indexer.head_count = %d: MSA needs one indexer head per KV head (%d), as llama.cpp asserts", hp.Arch, x.heads, hp.KVHeads)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	moe := l.moeParams(moeOpts{gating: ml.GateSigmoid, act: ml.OAISwiGLU})
	if moe == nil {
		return nil
	}
	d := l.baseDecoder(true)
	if l.Err() != nil {
		return nil
	}
	x.rope = d.rope.WithDims(d.rope.Dims, true) // on the indexer's heads
	x.rope.HeadDim = x.dim
	if err := x.rope.Validate(); err != nil {
		l.Failf("metadata %s.attention.indexer.key_length = %d: %v", hp.Arch, x.dim, err)
		return nil
	}
	net := l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := l.preNormLayer(p, "ffn_norm")
		ly.qNorm, ly.kNorm = l.qkNorms(p, false)
		if i < moe.DenseLayers {
			f := l.DenseFFN(p, hp.Embd, hp.FFN)
			f.Act = ml.OAISwiGLU
			ly.ffn = f
			return ly
		}
		f := l.MoE(p, moe)
		if f == nil {
			return ly
		}
		f.Experts.Act = ml.OAISwiGLU
		if f.Shared == nil {
			l.Failf("missing tensor %sffn_up_shexp.weight", p)
		}
		if f.Router.SelBias == nil {
			l.Failf("missing tensor %sexp_probs_b.bias", p)
		}
		ly.ffn = f
		ix := x
		ix.q, ix.k = l.Linear(p+"indexer.q_proj", hp.Embd, x.heads*x.dim), l.Linear(p+"indexer.k_proj", hp.Embd, x.dim)
		ix.qNorm, ix.kNorm = l.Norm(p+"indexer.q_norm", x.dim), l.Norm(p+"indexer.k_norm", x.dim)
		ly.msa = &ix
		return ly
	})
	if net == nil {
		return nil
	}
	return msaDecoder{d, x.reach(), l.Opts.Context}
}

// msaParams is a layer's MSA indexer (msaParams.keys).
type msaParams struct {
	heads, dim, topK, block, local int
	q, k                           *ml.Matrix // indexer.q_proj, k_proj
	qNorm, kNorm                   *ml.Vector // indexer.q_norm, k_norm
	rope                           *nn.RoPE   // the attention's, on heads of dim
}

// reach is the longest window that reads every key: top_k blocks.
func (x *msaParams) reach() int { return x.topK * x.block }

// keys runs the indexer over the layer's normed rows h: the keys each KV
// head's query rows read.
func (x *msaParams) keys(b ml.Backend, bs ml.BlockSparse, h ml.Tensor, eps float64) ml.KeySet {
	n := h.Rows()
	q, k := b.Alloc(n, x.heads*x.dim), b.Alloc(n, x.dim)
	b.Linears([]ml.Tensor{q, k}, h, []*ml.Matrix{x.q, x.k})
	qh := b.View(q, n*x.heads, x.dim)
	b.RMSNorm(qh, qh, x.qNorm, eps)
	b.RMSNorm(k, k, x.kNorm, eps)
	b.RoPE(q, x.heads, x.rope)
	b.RoPE(k, 1, x.rope)
	return bs.BlockKeys(q, k, x.heads, x.block, x.topK, x.local)
}

// msaDecoder is minimax-m3's decoder: windows past sparseFrom tokens (top_k
// blocks) need ml.BlockSparse.
type msaDecoder struct {
	*decoder
	sparseFrom, context int
}

// Check refuses, at load, a backend without ml.BlockSparse for a context
// past top_k blocks.
func (m msaDecoder) Check(b ml.Backend) error {
	if _, ok := b.(ml.BlockSparse); !ok && m.context > m.sparseFrom {
		return fmt.Errorf("%s: windows of %d tokens, past the MSA indexer's %d, need its sparse attention, which the %T backend lacks (ml.BlockSparse); windows of at most %d tokens run on it", m.hp.Arch, m.context, m.sparseFrom, b, m.sparseFrom)
	}
	return nil
}
