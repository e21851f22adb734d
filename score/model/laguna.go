package model

import (
	"cmp"
	"fmt"

	"ppl.dev/gguf"
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

func init() { Register("laguna", newLaguna) }

// laguna: poolside's Laguna (XS.2 30B-A3B, S.2 118B-A8B, M.1 230B-A10B),
// as llama.cpp 0.7.0 runs it: llama's block with NeoX RoPE, q and k
// RMS-normed per head (required); the head counts per layer
// (attention.head_count and head_count_kv, arrays or numbers); with
// attention.sliding_window above 0 (XS.2) every layer but each
// attention.sliding_window_pattern-th from the first (a period, 4 when
// absent) attends to the last that many keys with a plain RoPE (no
// scaling: llama.cpp zeroes YaRN there) of rope.freq_base_swa's base over
// rope.dimension_count_swa dimensions (rope.freq_base and
// rope.dimension_count when absent), the others, and every layer without
// a window (M.1), with the file's RoPE (YaRN where it says) over
// rope.dimension_count; the attention's output times
// softplus(attn_gate·h) before attn_output, attn_gate one row per head
// (XS.2) or per element (M.1), told by its shape as llama.cpp does; dense
// SwiGLU MLPs in the leading_dense_block_count (required) first layers,
// then experts routed by expert_gating_func (sigmoid when absent) with the
// selection bias exp_probs_b.bias (required), normed and scaled as the
// metadata says, plus a shared expert of expert_shared_feed_forward_length
// (an expert's width times expert_shared_count, 1 when absent); the
// output tied to the embeddings when the file has none.
func newLaguna(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	err := m.require("leading_dense_block_count")
	var heads, kv []int
	if err == nil {
		heads, kv, err = m.layerHeads(hp.Layers)
	}
	window := 0
	if err == nil {
		window, err = m.int("attention.sliding_window", 0)
	}
	var slides []bool
	if v, ok := l.f.Lookup(hp.Arch + ".attention.sliding_window_pattern"); ok && v.Type == gguf.ValueArray && err == nil {
		// llama.cpp 0.7.0 reads laguna's as a period, and with an array of
		// flags computes layers of neither reading (probed); the converter
		// writes none.
		err = fmt.Errorf("metadata %s.attention.sliding_window_pattern: an array; laguna's is a period (llama.cpp 0.7.0 reads no flags for it)", hp.Arch)
	}
	if err == nil && window > 0 {
		slides, err = m.slidingLayers(hp.Layers, 4, true)
	}
	baseSWA, dimsSWA := 0.0, 0
	if err == nil {
		baseSWA, dimsSWA, err = m.swaRoPE()
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	moe := l.moeParams(moeOpts{gating: ml.GateSigmoid})
	if moe == nil {
		return nil
	}
	d := l.baseDecoder(true)
	if l.Err() != nil { // d.rope may be missing
		return nil
	}
	local := &nn.RoPE{HeadDim: hp.HeadDim, Dims: cmp.Or(dimsSWA, d.rope.Dims), NeoX: true, Base: cmp.Or(baseSWA, d.rope.Base), FreqScale: 1, AttnFactor: 1}
	if err := local.Validate(); err != nil {
		l.Failf("sliding layers' RoPE: %v", err)
		return nil
	}
	E, hd := hp.Embd, hp.HeadDim
	net := l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := l.headsLayer(d, i, p, heads[i], kv[i])
		a := ly.attn
		if a == nil {
			return ly
		}
		qd := a.Heads * hd
		ly.qNorm, ly.kNorm = l.qkNorms(p, false)
		if slides != nil && slides[i] {
			a.Window, ly.rope = window, local
		}
		ly.gateFn = ml.SoftplusGate
		if t, ok := l.f.Tensor(p + "attn_gate.weight"); ok && len(t.Shape) == 2 && t.Shape[1] == uint64(qd) && qd != a.Heads {
			ly.gate = l.Linear(p+"attn_gate", E, qd) // one per element (M.1)
		} else {
			ly.gate, ly.gateCols = l.Linear(p+"attn_gate", E, a.Heads), spreadCols(a.Heads, hd)
		}
		if i < moe.DenseLayers {
			ly.ffn = l.DenseFFN(p, E, hp.FFN)
			return ly
		}
		e := l.MoE(p, moe)
		switch {
		case e == nil:
		case e.Router.SelBias == nil:
			l.Failf("missing tensor %sexp_probs_b.bias (the selection bias, which llama.cpp 0.7.0 requires)", p)
		case e.Shared == nil:
			l.Failf("missing tensor %sffn_up_shexp.weight (the shared expert)", p)
		default:
			ly.ffn = e
		}
		return ly
	})
	if net == nil {
		return nil
	}
	return gatherDecoder{d}
}
