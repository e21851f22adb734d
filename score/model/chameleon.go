package model

// chameleon: Meta's Chameleon (7B, 30B) and Anole, their text as llama.cpp
// 0.7.0 computes it: llama's block with RoPE over whole heads (adjacent
// pairs; llama.cpp asserts whole heads), q, k and v fused in attn_qkv or
// apart; q and k LayerNormed over each head before RoPE, with weights and
// biases of every head (attn_q_norm, attn_k_norm: the biases where the file
// has them) and llama.cpp's fixed epsilon 1e-5 (PyTorch's default); with
// swin_norm (Chameleon-30B) attn_norm and ffn_norm norm the attention's and
// the FFN's outputs before they join the residual stream, not their inputs,
// and the FFN reads the attention's normed output alone, as llama.cpp
// computes it (Hugging Face's reads the residual stream, that output added);
// the output matrix, or the token embedding. llama.cpp sets the logits of
// the image tokens (ids 4 to 8195, fixed) to -FLT_MAX in the first output
// row of a ubatch alone (Hugging Face's Chameleon, in every row): ppl in the
// first row of logits of each window (Head.Suppressed), llama.cpp's number
// when one ubatch holds the rows a window scores (llama-perplexity requests
// logits from a chunk's middle on: -ub at least half of -c, as its default
// 512 is up to -c 1024).
func newChameleon(l *Loader) Network {
	hp := l.HP
	swin, err := meta{l.f, hp.Arch}.bool("swin_norm", false)
	if err != nil {
		l.fail(err)
		return nil
	}
	if hp.Vocab < chameleonImages.Hi {
		l.Failf("chameleon: a vocabulary of %d tokens has no image tokens [%d, %d) (llama.cpp 0.7.0 writes their logits past the first row)", hp.Vocab, chameleonImages.Lo, chameleonImages.Hi)
		return nil
	}
	d := l.baseDecoder(false)
	if !l.wholeHeads(d.rope) {
		return nil
	}
	d.qkLayerNorm = 1e-5
	d.head.Suppressed = chameleonImages
	net := l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := l.qkvAttn(p)
		ly.ffnNorm = l.Norm(p+"ffn_norm", hp.Embd)
		ly.qNorm, ly.kNorm = l.headNorms(p+"attn_q_norm", hp.Heads), l.headNorms(p+"attn_k_norm", hp.KVHeads)
		ly.qNormB, ly.kNormB = l.headBias(p+"attn_q_norm", hp.Heads), l.headBias(p+"attn_k_norm", hp.KVHeads)
		if swin {
			ly.attnNorm, ly.postAttnNorm = nil, ly.attnNorm
			ly.ffnNorm, ly.postFFNNorm = nil, ly.ffnNorm
			ly.ffnReadsAttn = true
		}
		ly.ffn = l.DenseFFN(p, hp.Embd, hp.FFN)
		return ly
	})
	return lnNetwork(net, d)
}

// chameleonImages are the ids of Chameleon's image tokens, as llama.cpp
// 0.7.0 fixes them.
var chameleonImages = struct{ Lo, Hi int }{4, 8196}
