package model

import "ppl.dev/score/ml"

func init() { Register("maion-coder", newMaionCoder) }

// maion-coder: Maion-Coder, as llama.cpp 0.7.0 runs it: qwen3's attention
// (q and k RMS-normed per head, NeoX RoPE, q, k and v fused in attn_qkv or
// apart, with biases where the file has them) whose layers flagged by
// attention.sliding_window_pattern (an array of one flag per layer,
// required) attend to the last attention.sliding_window keys (required)
// with the file's RoPE (llama.cpp gives them rope.freq_base's, whatever
// rope.freq_base_swa says), the others globally **without** RoPE; RMS norms
// after the attention and the FFN (post_attention_norm, post_ffw_norm)
// besides those before; every interleave_moe_layer_step-th FFN (required)
// experts at moe_latent_size's width (required: ffn_latent_down before
// them, ffn_latent_up after) routed by softmax from the full-width rows,
// renormalized and not scaled whatever the file says, without a selection
// bias; the others SwiGLU MLPs of feed_forward_length; the output matrix
// required.
func newMaionCoder(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	err := m.require("interleave_moe_layer_step", "moe_latent_size", "attention.sliding_window", "attention.sliding_window_pattern", "expert_feed_forward_length")
	step, window := 0, 0
	if err == nil {
		step, err = m.positive("interleave_moe_layer_step", -1)
	}
	if err == nil {
		window, err = m.positive("attention.sliding_window", -1)
	}
	var slides []bool
	if err == nil {
		slides, err = m.layerFlags("attention.sliding_window_pattern", hp.Layers, false)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	moe := l.moeParams(moeOpts{gating: ml.GateSoftmax, norm: true, latent: "moe_latent_size"})
	if moe == nil {
		return nil
	}
	if moe.Latent <= 0 {
		l.Failf("metadata %s.moe_latent_size = %d: maion-coder's experts need a latent width above 0", hp.Arch, moe.Latent)
		return nil
	}
	moe.gating, moe.Gating, moe.Norm, moe.Scale = ml.GateSoftmax, ml.GateSoftmax.String(), true, 0 // whatever the file says
	d := l.baseDecoder(true)
	if l.Err() != nil {
		return nil
	}
	local := d.attn
	local.Window = window
	E, qd, kvd := hp.Embd, hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	return l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := decoderLayer{
			attnNorm:     l.Norm(p+"attn_norm", E),
			o:            l.Linear(p+"attn_output", qd, E),
			postAttnNorm: l.Norm(p+"post_attention_norm", E),
			ffnNorm:      l.Norm(p+"ffn_norm", E),
			postFFNNorm:  l.Norm(p+"post_ffw_norm", E),
		}
		ly.q, ly.k, ly.v = l.qkv(p, qd, kvd, kvd)
		ly.qNorm, ly.kNorm = l.qkNorms(p, false)
		if slides[i] {
			ly.attn = &local
		} else {
			ly.noRoPE = true
		}
		if (i+1)%step != 0 {
			ly.ffn = l.DenseFFN(p, E, hp.FFN)
			return ly
		}
		if e := l.MoE(p, moe); e != nil {
			e.Router.SelBias = nil // llama.cpp passes none
			ly.ffn = e
		}
		return ly
	})
}
