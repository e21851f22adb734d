package model

import "ppl.dev/score/ml"

func init() { Register("grovemoe", newGroveMoE) }

// grovemoe: inclusionAI's GroveMoE (GroveMoE-Base, -Inst: 33B-A3B), as
// llama.cpp 0.7.0 runs it: qwen3moe's block (q, k and v fused in attn_qkv
// or apart, q and k RMS-normed per head before NeoX RoPE over the whole
// head, which rope.dimension_count must be, as llama.cpp asserts) whose FFN
// is two mixtures over one router's logits (groveMoE): the experts, and
// the chunk experts, one per experts_per_group experts (required), of
// expert_chunk_feed_forward_length (the head size when absent), the
// second's output times expert_group_scale (required); expert_used_count
// at most the chunk experts' count (llama.cpp aborts past it). Softmax weights,
// renormalized and never scaled: llama.cpp reads neither
// expert_gating_func nor expert_weights_scale for it; expert_group_count
// above 1 is refused (llama.cpp's graph then fails a reshape).
func newGroveMoE(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	err := m.require("expert_group_scale", "experts_per_group", "expert_feed_forward_length")
	per, chunkFF := 0, 0
	scale := 0.0
	if err == nil {
		per, err = m.positive("experts_per_group", -1)
	}
	if err == nil {
		chunkFF, err = m.positive("expert_chunk_feed_forward_length", hp.HeadDim)
	}
	if err == nil {
		scale, err = m.float("expert_group_scale", -1)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	moe := l.moeParams(moeOpts{gating: ml.GateSoftmax, norm: true})
	if moe == nil {
		return nil
	}
	if moe.Groups > 1 {
		l.Failf("metadata %s.expert_group_count = %d: llama.cpp 0.7.0 cannot run grovemoe's chunk experts with expert groups", hp.Arch, moe.Groups)
		return nil
	}
	if moe.Experts%per != 0 {
		l.Failf("metadata %s.experts_per_group = %d does not divide the %d experts", hp.Arch, per, moe.Experts)
		return nil
	}
	if moe.Used > moe.Experts/per {
		l.Failf("metadata %s.expert_used_count = %d: more than the %d chunk experts (llama.cpp 0.7.0 aborts on it)", hp.Arch, moe.Used, moe.Experts/per)
		return nil
	}
	moe.gating, moe.Gating, moe.Norm, moe.Scale = ml.GateSoftmax, ml.GateSoftmax.String(), true, 0 // whatever the file says
	d := l.baseDecoder(true)
	if l.Err() != nil {
		return nil
	}
	if !l.wholeHeads(d.rope) {
		return nil
	}
	E, qd, kvd := hp.Embd, hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	chunks := moe.Experts / per
	return l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := decoderLayer{
			attnNorm: l.Norm(p+"attn_norm", E),
			o:        l.Linear(p+"attn_output", qd, E),
			ffnNorm:  l.Norm(p+"ffn_norm", E),
		}
		ly.q, ly.k, ly.v = l.qkv(p, qd, kvd, kvd)
		ly.qNorm, ly.kNorm = l.qkNorms(p, false)
		e := l.MoE(p, moe)
		if e == nil {
			return ly
		}
		e.Router.SelBias, e.Router.SelectSigmoid = nil, true // llama.cpp passes no bias, and chooses by sigmoid
		g := &groveMoE{
			MoE:   e,
			chunk: ml.MLP{Gate: l.Experts(p+"ffn_gate_chexps", chunks, E, chunkFF), Up: l.Experts(p+"ffn_up_chexps", chunks, E, chunkFF), Down: l.Experts(p+"ffn_down_chexps", chunks, chunkFF, E)},
			scale: scale,
		}
		g.chunkRouter = e.Router
		g.chunkRouter.Chunk = per
		ly.ffn = g
		return ly
	})
}

// groveMoE is GroveMoE's FFN as llama.cpp's graph computes it: y = the
// experts' mixture of x (the expert_used_count experts of largest
// sigmoid(logit), weighted by their softmax probabilities, renormalized);
// then y + scale · the chunk experts' mixture **of y** (llama.cpp feeds
// the first mixture's output to the second), whose experts are the same
// choice (llama.cpp takes at most as many as there are chunks, and aborts
// on files that ask for more: refused), each mapped to its
// chunk ⌊e/experts_per_group⌋ and weighted by the softmax probability of
// the expert whose index is the chunk's (ml.Router's Chunk), renormalized.
type groveMoE struct {
	*MoE
	chunk       ml.MLP // ffn_gate_chexps, ffn_up_chexps, ffn_down_chexps
	chunkRouter ml.Router
	scale       float64 // expert_group_scale
}

func (g *groveMoE) Forward(b ml.Backend, dst, x ml.Tensor) {
	mark := b.Mark()
	logits := b.Alloc(x.Rows(), g.Router.Experts)
	b.Linear(logits, x, g.Gate)
	g.forwardLogits(b, dst, x, logits)
	var r *ml.Routing
	if b.Err() == nil {
		r = g.route(b, &g.chunkRouter, logits)
	}
	if r == nil {
		b.Release(mark)
		return
	}
	c := b.Alloc(x.Rows(), dst.Cols())
	b.Experts(c, dst, &g.chunk, r)
	b.Scale(c, g.scale)
	b.Add(dst, c)
	b.Release(mark)
}
