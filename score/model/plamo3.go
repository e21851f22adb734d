package model

import "cmp"

// plamo3: PFN's PLaMo 3, as llama.cpp 0.7.0 runs it: glm4's fused block
// (q, k and v in attn_qkv, gate and up in ffn_up, the attention's and the
// FFN's outputs RMS-normed by post_attention_norm and post_ffw_norm before
// they join the residual stream; llama.cpp 0.7.0 binds the two without
// ".weight", and either name is read: bareNorm) with q and k RMS-normed per head
// (attn_q_norm, attn_k_norm) before NeoX RoPE; with
// attention.sliding_window above 0 the layers slide over that many keys
// but each attention.sliding_window_pattern-th (8 when absent), with RoPE
// of rope.freq_base_swa's base where given and without the RoPE's
// frequency scale (llama.cpp's freq_scale_swa is 1 for plamo3).
func init() { Register("plamo3", newPlamo3) }

func newPlamo3(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	window, err := m.int("attention.sliding_window", 0)
	var slides []bool
	if err == nil && window > 0 {
		slides, err = m.slidingLayers(hp.Layers, 8, false)
	}
	baseSWA := 0.0
	if err == nil {
		baseSWA, err = m.float("rope.freq_base_swa", 0)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	d := l.baseDecoder(true)
	if l.Err() != nil { // d.rope may be missing
		return nil
	}
	local, _ := d.sliding(window, baseSWA)
	localRoPE := d.rope.Sliding(cmp.Or(baseSWA, d.rope.Base)) // llama.cpp 0.7.0's freq_scale_swa is 1 for plamo3 (probed)
	qd, kvd := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	return l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := decoderLayer{
			attnNorm:     l.Norm(p+"attn_norm", hp.Embd),
			o:            l.Linear(p+"attn_output", qd, hp.Embd),
			postAttnNorm: l.bareNorm(p+"post_attention_norm", hp.Embd),
			ffnNorm:      l.Norm(p+"ffn_norm", hp.Embd),
			postFFNNorm:  l.bareNorm(p+"post_ffw_norm", hp.Embd),
		}
		ly.q, ly.k, ly.v = l.qkv(p, qd, kvd, kvd)
		ly.qNorm, ly.kNorm = l.qkNorms(p, false)
		ly.ffn = l.fusedFFN(p, hp.Embd, hp.FFN)
		if slides != nil && slides[i] {
			ly.attn, ly.rope = local, localRoPE
		}
		return ly
	})
}
