package model

// glm4: the dense GLM-4 models (GLM-4-9B-0414, GLM-4-32B-0414, GLM-Z1,
// and GLM-4.1V's text decoder), as llama.cpp 0.7.0 runs them. The block is
// llama's (newDecoder's forward pass) with:
//   - attn_qkv holding [q | k | v] with its bias (or attn_q, attn_k and
//     attn_v, each with an optional bias), bound as row ranges;
//   - RoPE over rope.dimension_count dims (half of each head), in the
//     adjacent-pair layout; with GLM-4.1V's rope.dimension_sections the
//     multi-section RoPE of NeoX pairs instead (glmMRoPE);
//   - the attention's and the FFN's outputs RMS-normed
//     (post_attention_norm, post_ffw_norm) before they join the residual
//     stream;
//   - ffn_up holding [gate | up] (2·n_ff rows) for SwiGLU.
func init() {
	Register("glm4", newGLM4)
	Register("chatglm", newChatGLM)
}

// chatglm: ChatGLM3 and GLM-4-9B (the original GLM-4-9B-chat format), as
// llama.cpp 0.7.0 runs them: glm4's block without its post-norms (q, k
// and v in attn_qkv, its bias where the file has one, or apart; gate and
// up in one ffn_up; adjacent-pair RoPE over rope.dimension_count, half
// the head).
func newChatGLM(l *Loader) Network { return l.fusedLayers(l.baseDecoder(false), false) }

func newGLM4(l *Loader) Network {
	d := l.baseDecoder(false)
	if !glmMRoPE(l, d.rope) {
		return nil
	}
	return l.fusedLayers(d, true)
}
