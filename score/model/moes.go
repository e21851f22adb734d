package model

import (
	"fmt"
	"math"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// The mixtures of experts that are llama's decoder with one FFN swapped
// for experts and a few attention options: qwen2moe, olmoe, granitemoe,
// hunyuan-moe, bailingmoe2, afmoe, exaone-moe, deepseek and deepseek2-ocr,
// each as llama.cpp 0.7.0 builds it.
func init() {
	Register("deepseek", newDeepSeek)
	Register("deepseek2-ocr", newDeepSeekOCR)
	Register("afmoe", newAFMoE)
	Register("exaone-moe", newEXAONEMoE)
	Register("qwen2moe", newQwen2MoE)
	Register("olmoe", newOLMoE)
	Register("granitemoe", newGranite)
	Register("hunyuan-moe", newHunyuanMoE)
	Register("bailingmoe2", newBailingMoE2)
}

// qwen2moe: Qwen1.5-MoE-A2.7B and Qwen2-57B-A14B: qwen2's attention (q, k
// and v biases, NeoX RoPE), softmax routing whose chosen weights are not
// renormalized, and a shared expert (of expert_shared_feed_forward_length,
// else feed_forward_length) scaled per token by sigmoid(ffn_gate_inp_shexp·x).
// Without expert_feed_forward_length the experts are feed_forward_length /
// expert_used_count wide, as llama.cpp sizes them.
func newQwen2MoE(l *Loader) Network {
	hp := l.HP
	used, err := meta{l.f, hp.Arch}.positive("expert_used_count", -1)
	if err != nil {
		l.fail(err)
		return nil
	}
	d := newDecoder(l, decoderOpts{neox: true, qkvBias: true, moe: &moeOpts{gating: ml.GateSoftmax, ffn: hp.FFN / used, sharedFFN: hp.FFN}})
	return l.sharedExperts(d, true)
}

// olmoe: AllenAI's OLMoE: llama's pre-norm block with q and k RMS-normed
// over their whole rows before RoPE (NeoX), softmax routing not
// renormalized, experts of feed_forward_length.
func newOLMoE(l *Loader) Network {
	moe := l.moeParams(moeOpts{gating: ml.GateSoftmax, ffn: l.HP.FFN})
	if moe == nil {
		return nil
	}
	return l.bindLayers(l.baseDecoder(true), func(_ int, p string) decoderLayer {
		ly := l.preNormLayer(p, "ffn_norm")
		ly.qNorm, ly.kNorm = l.qkNorms(p, true)
		ly.ffn = l.MoE(p, moe)
		return ly
	})
}

// hunyuan-moe: Tencent's Hunyuan-A13B: llama's decoder (NeoX RoPE,
// rope_freqs when the file has them) whose q and k are RMS-normed per head
// after RoPE, softmax routing renormalized over experts of
// feed_forward_length, and a shared expert (expert_shared_feed_forward_length,
// else feed_forward_length) added to them.
func newHunyuanMoE(l *Loader) Network {
	hp := l.HP
	d := newDecoder(l, decoderOpts{neox: true, qkNorm: true, moe: &moeOpts{gating: ml.GateSoftmax, norm: true, ffn: hp.FFN, sharedFFN: hp.FFN}})
	d.qkNormAfterRoPE = true
	return l.sharedExperts(d, false)
}

// bailingmoe2: inclusionAI's Ling 2.0 and Ring 2.0: q, k and v in one
// attn_qkv, q and k RMS-normed per head before RoPE (NeoX, over
// rope.dimension_count of the head), dense MLPs in the
// leading_dense_block_count first layers and in the others experts routed
// by expert_gating_func (sigmoid in Ling 2.0) with the selection bias
// exp_probs_b and expert groups, normed and scaled as the metadata says,
// plus expert_shared_count shared experts as one (its width
// expert_shared_feed_forward_length, else an expert's, times the count);
// the trailing nextn_predict_layers blocks are not run.
func newBailingMoE2(l *Loader) Network {
	hp := &l.HP
	if !l.dropNextN() {
		return nil
	}
	m := meta{l.f, hp.Arch}
	if err := m.require("expert_gating_func", "expert_shared_count"); err != nil { // llama.cpp requires them
		l.fail(err)
		return nil
	}
	moe := l.moeParams(moeOpts{gating: ml.GateSoftmax})
	if moe == nil {
		return nil
	}
	if m.has("expert_shared_feed_forward_length") {
		moe.SharedFFN *= moe.Shared
	}
	qd, kvd := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	return l.bindLayers(l.baseDecoder(true), func(i int, p string) decoderLayer {
		ly := decoderLayer{
			attnNorm: l.Norm(p+"attn_norm", hp.Embd),
			o:        l.Linear(p+"attn_output", qd, hp.Embd),
			ffnNorm:  l.Norm(p+"ffn_norm", hp.Embd),
		}
		ly.q, ly.k, ly.v = l.qkv(p, qd, kvd, kvd)
		ly.qNorm, ly.kNorm = l.qkNorms(p, false)
		if i < moe.DenseLayers {
			ly.ffn = l.DenseFFN(p, hp.Embd, hp.FFN)
		} else {
			ly.ffn = l.MoE(p, moe) // expert_shared_count > 0: the shared expert is required
		}
		return ly
	})
}

// deepseek: DeepSeek-MoE (16B) and the first DeepSeek models' MoE layout,
// as llama.cpp 0.7.0 runs it: llama's decoder (adjacent-pair RoPE), dense
// MLPs in the leading_dense_block_count first layers, then softmax-routed
// experts whose chosen weights are not renormalized (llama.cpp passes
// false, whatever expert_weights_norm says) and are scaled by
// expert_weights_scale when given (which it reads; routingIgnored), plus
// expert_shared_count shared experts as one
// MLP of that many experts' width (expert_shared_feed_forward_length when
// given).
func newDeepSeek(l *Loader) Network {
	hp := l.HP
	moe := l.moeParams(moeOpts{gating: ml.GateSoftmax})
	if moe == nil {
		return nil
	}
	if moe.Shared == 0 {
		l.Failf("missing metadata %s.expert_shared_count (deepseek's shared experts)", hp.Arch)
		return nil
	}
	return l.denseLeadLayers(l.baseDecoder(false), moe)
}

// denseLeadLayers binds d's layers as llama's block (preNormLayer) with
// dense MLPs in moe's leading dense layers and its mixture of experts
// after; it returns d, or nil after an error.
func (l *Loader) denseLeadLayers(d *decoder, moe *moeParams) Network {
	hp := l.HP
	return l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := l.preNormLayer(p, "ffn_norm")
		if i < moe.DenseLayers {
			ly.ffn = l.DenseFFN(p, hp.Embd, hp.FFN)
		} else {
			ly.ffn = l.MoE(p, moe)
		}
		return ly
	})
}

// deepseek2-ocr: DeepSeek-OCR's language model (DeepSeek-V2's mixture
// without latent attention: 3B-A0.57B), as llama.cpp 0.7.0 runs text
// tokens: llama's block with q, k and v of attn_q, attn_k and attn_v (no
// biases), a KV head per head filling the width (llama.cpp shapes them so),
// NeoX RoPE over whole heads whose base must be 10000 (llama.cpp asserts
// it), never scaled (a file's scaling goes into the score scale, as
// deepseek2's mscale²), without rope_freqs (which it never applies); dense MLPs in
// the leading_dense_block_count first layers, then experts routed by
// expert_gating_func (softmax when absent), with exp_probs_b.bias where
// present, normed and scaled as the file says, plus expert_shared_count
// (required) shared experts as one MLP; the output matrix or the tied
// embedding. attention.sliding_window (Unlimited-OCR's) is not read:
// llama.cpp 0.7.0 gives such a file the sums of the file without it.
func newDeepSeekOCR(l *Loader) Network {
	hp := l.HP
	if hp.KVHeads != hp.Heads || hp.Heads*hp.HeadDim != hp.Embd {
		l.Failf("%s: %d heads and %d KV heads of %d for a width of %d: llama.cpp's %s shapes q, k and v as heads filling the width", hp.Arch, hp.Heads, hp.KVHeads, hp.HeadDim, hp.Embd, hp.Arch)
		return nil
	}
	moe := l.moeParams(moeOpts{gating: ml.GateSoftmax})
	if moe == nil {
		return nil
	}
	if _, err := (meta{l.f, hp.Arch}).int("expert_shared_count", -1); err != nil {
		l.fail(err)
		return nil
	}
	d := l.baseDecoder(true)
	if l.Err() != nil || !l.wholeHeads(d.rope) {
		return nil
	}
	if r := d.rope; math.Abs(r.Base-10000) >= 1e-4 || r.FreqFactors != nil {
		l.Failf("%s: RoPE of base %g, factors %v: llama.cpp rotates DeepSeek-OCR by base 10000 (it asserts it) without factors", hp.Arch, r.Base, r.FreqFactors != nil)
		return nil
	}
	// llama.cpp turns q and k by a plain RoPE whatever the file's scaling,
	// which goes into the score scale as deepseek2's (latentYaRN; it reads
	// no yarn_log_multiplier for deepseek2-ocr).
	_, ms := latentYaRN(d.rope, 0, false)
	d.attn.Scale = float64(ms * ms / float32(math.Sqrt(float64(hp.HeadDim))))
	*d.rope = nn.RoPE{HeadDim: hp.HeadDim, Dims: hp.HeadDim, NeoX: true, Base: d.rope.Base, FreqScale: 1, AttnFactor: 1}
	for i := range hp.Layers {
		for _, b := range []string{"attn_q", "attn_k", "attn_v", "attn_output"} {
			if name := fmt.Sprintf("blk.%d.%s.bias", i, b); l.Has(name) {
				l.Failf("tensor %s: llama.cpp's %s has no attention biases (it refuses the file)", name, hp.Arch)
				return nil
			}
		}
	}
	return l.denseLeadLayers(d, moe)
}

// sharedExperts returns d after checking that each of its mixtures has a
// shared expert, or nil. With gated (qwen2moe) each also has its gate
// ffn_gate_inp_shexp, whose sigmoid llama.cpp writes as silu(g)/g.
func (l *Loader) sharedExperts(d *decoder, gated bool) Network {
	if l.Err() != nil {
		return nil
	}
	for i, ly := range d.layers {
		m := ly.ffn.(*MoE)
		switch {
		case m.Shared == nil:
			l.Failf("missing tensor blk.%d.ffn_up_shexp.weight (the shared expert)", i)
		case gated && m.SGate == nil:
			l.Failf("missing tensor blk.%d.ffn_gate_inp_shexp.weight (the shared expert's gate)", i)
		}
		if gated {
			m.SGateFn = ml.SiLUDivGate
		}
	}
	if l.Err() != nil {
		return nil
	}
	return d
}

// afmoe: Arcee's Trinity (Nano, Mini, Large), as llama.cpp 0.7.0 runs it:
// the token embeddings times sqrt(width); RMS norms before and after the
// attention (attn_norm, post_attention_norm) and the FFN (ffn_norm,
// post_ffw_norm); q and k RMS-normed per head; every fourth layer without
// RoPE (llama.cpp's fixed step), the others with NeoX RoPE; the layers
// attention.sliding_window_pattern marks (three of every four when absent:
// the others global) attend within a window of attention.sliding_window
// keys (required: llama.cpp 0.7.0 crashes on a file without it), turned by
// rope.freq_base_swa's base where given; the attention's output times
// sigmoid(attn_gate·h) before attn_output; dense MLPs in the
// leading_dense_block_count first layers, then experts routed by
// expert_gating_func (sigmoid when absent) with the selection bias
// exp_probs_b (required), normed and scaled as the metadata says, plus
// expert_shared_count shared experts as one, each as wide as an expert.
func newAFMoE(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	window, err := m.int("attention.sliding_window", 0)
	if err == nil && window <= 0 { // llama.cpp 0.7.0 crashes on such a file: no number to match
		err = fmt.Errorf("metadata %s.attention.sliding_window absent or %d: afmoe without sliding windows is not supported (llama.cpp 0.7.0 crashes on it)", hp.Arch, window)
	}
	if err == nil {
		err = m.require("expert_shared_count") // llama.cpp requires it
	}
	var slides []bool
	if err == nil {
		slides, err = m.slidingLayers(hp.Layers, 4, false)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	moe := l.moeParams(moeOpts{gating: ml.GateSigmoid})
	if moe == nil {
		return nil
	}
	moe.SharedFFN = moe.FFN * moe.Shared // llama.cpp's width, whatever expert_shared_feed_forward_length says
	d := l.baseDecoder(true)
	d.embScale = math.Sqrt(float64(hp.Embd))
	local := d.attn
	local.Window = window
	localRoPE := l.swaRoPE(d.rope)
	qd := hp.Heads * hp.HeadDim
	return l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := l.preNormLayer(p, "ffn_norm")
		ly.qNorm, ly.kNorm = l.qkNorms(p, false)
		ly.gate = l.Linear(p+"attn_gate", hp.Embd, qd)
		ly.postAttnNorm, ly.postFFNNorm = l.Norm(p+"post_attention_norm", hp.Embd), l.Norm(p+"post_ffw_norm", hp.Embd)
		ly.noRoPE = (i+1)%4 == 0 // whatever the pattern, as llama.cpp's graph
		if slides[i] {
			ly.attn, ly.rope = &local, localRoPE
		}
		if i < moe.DenseLayers {
			ly.ffn = l.DenseFFN(p, hp.Embd, hp.FFN)
		} else if e := l.MoE(p, moe); e != nil {
			if e.Router.SelBias == nil {
				l.Failf("missing tensor %sexp_probs_b.bias", p)
			}
			ly.ffn = e
		}
		return ly
	})
}

// exaone-moe: LG's K-EXAONE, as llama.cpp 0.7.0 runs it: q and k
// RMS-normed per head; sliding-window layers (attention.sliding_window
// keys, required) with NeoX RoPE and global layers without positions, by
// attention.sliding_window_pattern N (4 when absent): layer i slides when
// i mod N < N - 1 (every layer when N is 0); dense MLPs in the
// leading_dense_block_count first layers, then experts routed by
// expert_gating_func (required) with the selection bias exp_probs_b where
// the file has it, normed and scaled only where expert_weights_norm and
// expert_weights_scale say so, plus a shared expert (required); the
// trailing nextn_predict_layers blocks are not run.
func newEXAONEMoE(l *Loader) Network {
	hp := &l.HP
	if !l.dropNextN() {
		return nil
	}
	m := meta{l.f, hp.Arch}
	window, pattern, err := m.slidingPattern()
	if err == nil {
		err = m.require("expert_gating_func") // llama.cpp requires it
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	moe := l.moeParams(moeOpts{gating: ml.GateSoftmax})
	if moe == nil {
		return nil
	}
	d := l.baseDecoder(true)
	local := d.attn
	local.Window = window
	return l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := l.preNormLayer(p, "ffn_norm")
		ly.qNorm, ly.kNorm = l.qkNorms(p, false)
		if pattern == 0 || i%pattern < pattern-1 {
			ly.attn = &local
		} else {
			ly.noRoPE = true
		}
		if i < moe.DenseLayers {
			ly.ffn = l.DenseFFN(p, hp.Embd, hp.FFN)
		} else if e := l.MoE(p, moe); e != nil {
			if e.Shared == nil {
				l.Failf("missing tensor %sffn_up_shexp.weight (the shared expert)", p)
			}
			ly.ffn = e
		}
		return ly
	})
}

// slidingPattern reads attention.sliding_window (required, above 0) and
// attention.sliding_window_pattern (the period of llama.cpp's
// set_swa_pattern, 4 when absent; 0: every layer slides).
func (m meta) slidingPattern() (window, pattern int, err error) {
	window, err = m.positive("attention.sliding_window", -1)
	if err == nil {
		pattern, err = m.int("attention.sliding_window_pattern", 4)
	}
	if err == nil && pattern < 0 {
		err = fmt.Errorf("metadata %s.attention.sliding_window_pattern = %d, want >= 0", m.arch, pattern)
	}
	return window, pattern, err
}
