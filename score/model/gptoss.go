package model

import (
	"fmt"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// gpt-oss: OpenAI's gpt-oss-20b and 120b. The llama decoder (llama.go)
// with:
//   - biases on q, k, v and attn_output (required);
//   - attention sinks: one logit per head (blk.N.attn_sinks) joining every
//     softmax's denominator (ml.Attn.Sinks);
//   - sliding-window attention (attention.sliding_window) on even layers,
//     full causal attention on odd ones;
//   - NeoX RoPE over the whole head with YaRN (cos and sin × (1 + 0.1·ln
//     factor), nn.RoPE);
//   - the pre-FFN norm called blk.N.post_attention_norm;
//   - every FFN a mixture of experts: router logits with a bias, the top
//     expert_used_count by logit, weights the softmax of the chosen logits
//     (ml.GateSoftmaxSelected, not renormalized), experts with biases on
//     their three matrices and the clamped SwiGLU (ml.OAISwiGLU); the
//     experts are usually MXFP4;
//   - an untied output head.
func init() { Register("gpt-oss", newGPTOSS) }

func newGPTOSS(l *Loader) Network {
	hp := l.HP
	window, err := meta{l.f, hp.Arch}.positive("attention.sliding_window", -1)
	if err != nil {
		l.fail(err)
		return nil
	}
	m := &decoder{
		tokenEmbd:  l.Linear("token_embd", hp.Embd, hp.Vocab),
		outputNorm: l.Norm("output_norm", hp.Embd),
		head:       Head{Output: l.Linear("output", hp.Embd, hp.Vocab)},
		rope:       l.RoPE(true),
	}
	moe := l.moeParams(moeOpts{gating: ml.GateSoftmaxSelected})
	if moe == nil {
		return nil
	}
	m.hp = l.HP
	slidingRoPE := l.swaRoPE(m.rope)
	for i := range hp.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		ffn := l.MoE(p, moe)
		ly := l.attnLayer(p)
		ly.attn = &ml.Attn{Heads: hp.Heads, KVHeads: hp.KVHeads, HeadDim: hp.HeadDim,
			Scale: float64(nn.InvSqrtf(hp.HeadDim)), Sinks: l.Vector(p+"attn_sinks.weight", hp.Heads)}
		ly.ffnNorm, ly.ffn = l.Norm(p+"post_attention_norm", hp.Embd), ffn
		if i%2 == 0 {
			ly.attn.Window, ly.rope = window, slidingRoPE
		}
		if l.Err() != nil {
			return nil
		}
		ffn.Experts.Act = ml.OAISwiGLU
		l.needBias(ly.q, ly.k, ly.v, ly.o, ffn.Gate, ffn.Experts.Gate, ffn.Experts.Up, ffn.Experts.Down)
		m.layers = append(m.layers, ly)
	}
	return m
}
