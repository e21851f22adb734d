package model

import (
	"fmt"

	"ppl.dev/score/ml"
)

// cohere2: Cohere's Command R7B and Command A, as llama.cpp 0.7.0 runs
// them: a parallel block whose attention and SwiGLU MLP both read h =
// LayerNorm(x)·attn_norm (no bias, attention.layer_norm_epsilon), the
// residual stream then x + MLP(h) + attention(h) in that order; q, k, v
// and the attention's output with biases where the file has them; the
// layers attend within a sliding window of attention.sliding_window keys
// with RoPE (adjacent pairs) but each attention.sliding_window_pattern-th
// (4 when absent), which attends to every key without positions; the
// final norm a LayerNorm too; the output the token
// embedding (llama.cpp refuses a file with output.weight); the logits
// multiplied by logit_scale.
//
// command-r (Command R, Aya 23, Aya Expanse) is the same block with RoPE in
// every layer and no window; files of 64 layers or more (Command R+, as
// llama.cpp tells it) add LayerNorms of each head of q and k before RoPE
// (attn_q_norm, attn_k_norm, required then: weights for every head, no
// bias, the same epsilon), which llama.cpp refuses in smaller files.
//
// cohere2moe (Cohere's mixtures of experts) is cohere2's block with RMS
// norms (LayerNorms when the file has no attention.layer_norm_rms_epsilon),
// every attention.sliding_window_pattern-th layer (4 when absent) from the
// first global without positions and the others sliding with RoPE (the
// leading_dense_block_count first layers, dense MLPs, with RoPE whatever
// their kind); the other layers' MLPs experts of
// expert_feed_forward_length routed by expert_gating_func (sigmoid when
// absent), normed and scaled as the metadata says, and where the file has
// expert_shared_count a shared expert, the two halved (llama.cpp's
// (experts + shared)·0.5); the output matrix optional (else the token
// embedding); trailing nextn_predict_layers blocks not run.
func init() {
	Register("cohere2", newCohere2)
	Register("command-r", newCohere2)
	Register("cohere2moe", newCohere2MoE)
}

func newCohere2(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	eps, err := m.float("attention.layer_norm_epsilon", -1)
	window, swa := 0, hp.Arch == "cohere2"
	var slides []bool
	if err == nil && swa {
		window, err = m.positive("attention.sliding_window", -1)
	}
	if err == nil && swa {
		slides, err = m.slidingLayers(hp.Layers, 4, false)
	}
	scale := 0.0
	if err == nil {
		scale, err = m.float("logit_scale", 0)
	}
	if err == nil {
		err = m.require("attention.layer_norm_epsilon")
	}
	if err == nil && !(eps > 0) {
		err = fmt.Errorf("metadata %s.attention.layer_norm_epsilon = %v, want > 0", hp.Arch, eps)
	}
	if err == nil && l.Has("output.weight") {
		err = fmt.Errorf("%s: the file has output.weight, which llama.cpp 0.7.0's cohere2 does not read (it refuses the file): the output is token_embd", hp.Arch)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	d := l.baseDecoder(false)
	d.head.Scale = scale
	local := d.attn
	local.Window = window
	qkNorm := !swa && hp.Layers >= 64 // llama.cpp's test for Command R+ (64 layers)
	if !qkNorm && l.Has("blk.0.attn_q_norm.weight") {
		l.Failf("%s: the file has blk.0.attn_q_norm.weight (Command R+'s q/k norms), which llama.cpp 0.7.0 reads only in files of 64 layers or more (it refuses this one of %d)", hp.Arch, hp.Layers)
		return nil
	}
	if qkNorm {
		d.qkLayerNorm = eps
	}
	net := l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := l.attnLayer(p)
		if qkNorm {
			ly.qNorm, ly.kNorm = l.headNorms(p+"attn_q_norm", hp.Heads), l.headNorms(p+"attn_k_norm", hp.KVHeads)
		}
		ly.ffn, ly.noRoPE = l.DenseFFN(p, hp.Embd, hp.FFN), swa && !slides[i]
		if swa && !ly.noRoPE {
			ly.attn = &local
		}
		ly.parallel = parallelFFNFirst
		return ly
	})
	if net == nil {
		return nil
	}
	d.layerNorm = eps
	return lnDecoder{d}
}

// headNorms binds name+".weight", a norm's weights for each of heads
// heads: GGUF shape [head size, heads], or the same values flat (K2-Horizon's
// converter; llama.cpp reads either).
func (l *Loader) headNorms(name string, heads int) *ml.Vector {
	return l.headVector(name+".weight", heads)
}

// headBias is headNorms' name+".bias", or nil when the file has none.
func (l *Loader) headBias(name string, heads int) *ml.Vector {
	if !l.Has(name + ".bias") {
		return nil
	}
	return l.headVector(name+".bias", heads)
}

// headVector binds the tensor name, a vector for each of heads heads.
func (l *Loader) headVector(name string, heads int) *ml.Vector {
	hd := l.HP.HeadDim
	if t, ok := l.f.Tensor(name); ok && len(t.Shape) == 1 {
		return l.tensorVector(name, hd*heads)
	}
	return l.tensorVector(name, hd, heads)
}

// newCohere2MoE binds cohere2moe (cohere2's doc).
func newCohere2MoE(l *Loader) Network {
	hp := &l.HP
	if !l.dropNextN() {
		return nil
	}
	m := meta{l.f, hp.Arch}
	rms := m.has("attention.layer_norm_rms_epsilon")
	lnEps, err := m.float("attention.layer_norm_epsilon", 0)
	if err == nil && !rms && !(lnEps > 0) {
		err = fmt.Errorf("missing metadata %s.attention.layer_norm_rms_epsilon or attention.layer_norm_epsilon", hp.Arch)
	}
	window, pattern, scale := 0, 0, 0.0
	if err == nil {
		window, pattern, err = m.slidingPattern()
	}
	if err == nil {
		err = m.require("logit_scale", "leading_dense_block_count") // llama.cpp requires them
	}
	if err == nil {
		scale, err = m.float("logit_scale", 0)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	moe := l.moeParams(moeOpts{gating: ml.GateSigmoid})
	if moe == nil {
		return nil
	}
	d := l.baseDecoder(false)
	d.head.Scale = scale
	local := d.attn
	local.Window = window
	net := l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := l.attnLayer(p)
		slides := pattern == 0 || i%pattern != 0
		if slides {
			ly.attn = &local
		}
		ly.noRoPE = !slides && i >= moe.DenseLayers
		if i < moe.DenseLayers {
			ly.ffn = l.DenseFFN(p, hp.Embd, hp.FFN)
		} else if e := l.MoE(p, moe); e != nil {
			ly.ffn = e
			if e.Shared != nil {
				ly.ffn = scaledFFN{e, 0.5}
			}
		}
		ly.parallel = parallelFFNFirst
		return ly
	})
	if net == nil {
		return nil
	}
	if rms {
		return d
	}
	d.layerNorm = lnEps
	return lnDecoder{d}
}

// scaledFFN is an FFN whose output llama.cpp scales (cohere2moe's experts
// plus shared expert halved; Grok-2's experts plus dense MLP by
// 1/sqrt(2)).
type scaledFFN struct {
	FFN
	scale float64
}

func (h scaledFFN) Forward(b ml.Backend, dst, x ml.Tensor) {
	h.FFN.Forward(b, dst, x)
	b.Scale(dst, h.scale)
}
