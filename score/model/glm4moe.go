package model

import (
	"fmt"

	"ppl.dev/score/ml"
)

// glm4moe: GLM-4.5, 4.6 and 4.7. The llama decoder (llama.go) with:
//   - q, k and v biases, and an optional per-head RMSNorm of q and k
//     (blk.N.attn_q_norm, attn_k_norm, bound when the file has them);
//   - NeoX RoPE on the first rope.dimension_count elements of each head
//     only (partial rotary; the rest pass through); GLM-4.5V's and 4.6V's
//     multi-section RoPE by rope.dimension_sections (glmMRoPE);
//   - the pre-FFN norm called blk.N.post_attention_norm;
//   - the first leading_dense_block_count layers a dense SwiGLU MLP, the
//     others a mixture of experts: sigmoid gating, selection on sigmoid +
//     exp_probs_b, weights renormalized (expert_weights_norm) and scaled
//     (expert_weights_scale), plus an ungated shared expert;
//   - block_count counting the trailing next-token-prediction (NextN)
//     block, which scoring does not run: the model has block_count -
//     nextn_predict_layers layers (HParams.Layers), and the NextN tensors
//     are not bound.
func init() { Register("glm4moe", newGLM4MoE) }

func newGLM4MoE(l *Loader) Network {
	if !l.dropNextN() {
		return nil
	}
	hp := &l.HP
	m := l.baseDecoder(true)
	if !glmMRoPE(l, m.rope) {
		return nil
	}
	moe := l.moeParams(moeOpts{gating: ml.GateSigmoid})
	if moe == nil {
		return nil
	}
	m.hp = *hp // with the experts' parameters
	for i := range hp.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		ly := l.preNormLayer(p, "post_attention_norm")
		l.needBias(ly.q, ly.k, ly.v)
		if l.Has(p + "attn_q_norm.weight") {
			ly.qNorm = l.Norm(p+"attn_q_norm", hp.HeadDim)
			ly.kNorm = l.Norm(p+"attn_k_norm", hp.HeadDim)
		}
		if i < moe.DenseLayers {
			ly.ffn = l.DenseFFN(p, hp.Embd, hp.FFN)
		} else {
			ly.ffn = l.MoE(p, moe)
		}
		m.layers = append(m.layers, ly)
	}
	return m
}

// dropNextN leaves the trailing nextn_predict_layers blocks (NextN, or
// multi-token prediction) out of HP.Layers: scoring does not run them and
// their tensors are not bound. It reports whether the key was good.
func (l *Loader) dropNextN() bool {
	hp := &l.HP
	nextn, err := meta{l.f, hp.Arch}.int("nextn_predict_layers", 0)
	if err == nil && nextn >= hp.Layers {
		err = fmt.Errorf("metadata %s.nextn_predict_layers = %d leaves no layer of %d", hp.Arch, nextn, hp.Layers)
	}
	if err != nil {
		l.fail(err)
		return false
	}
	hp.Layers -= nextn
	l.passMTP(hp.Layers, nextn)
	return true
}

// passMTP passes the n MTP blocks from block first, which scoring does
// not run (llama.cpp loads them and leaves them unread).
func (l *Loader) passMTP(first, n int) {
	for b := range n {
		l.pass(fmt.Sprintf("blk.%d.", first+b))
	}
}
