package model

import (
	"encoding/binary"
	"fmt"
	"math"

	"ppl.dev/gguf"
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// deepseek2: DeepSeek-V2/V3/R1 and Kimi K2. A pre-norm decoder like llama
// (llama.go) whose attention is multi-head latent attention (MLA), run in
// the absorbed form llama.cpp uses, and whose FFN is dense in the first
// leading_dense_block_count layers and a mixture of experts after:
//
//   - q = attn_q_b·(rmsnorm(attn_q_a·h)·attn_q_a_norm) (or attn_q·h for
//     files without q compression, attention.q_lora_rank 0), per head
//     [q_nope (qk_nope) | q_pe (qk_rope)], qk_nope + qk_rope =
//     attention.key_length_mla;
//   - [c | k_pe] = attn_kv_a_mqa·h, c (attention.kv_lora_rank) normed by
//     rmsnorm·attn_kv_a_norm; k_pe (rope.dimension_count) is one key shared
//     by all heads;
//   - q_pe and k_pe rotated with adjacent pairs (RoPE's normal layout),
//     YaRN angles, cos and sin unscaled; YaRN's magnitude goes into the
//     score scale instead: mscale²/sqrt(key_length_mla), mscale =
//     attn_factor·(1 + yarn_log_multiplier·ln(factor));
//   - attention is MQA over the latent (ml.Latent): query head h is
//     [attn_k_b_h·q_nope_h | q_pe_h], the one key [c | k_pe], the value c,
//     so the KV cache holds [c | k_pe] per token; head h's output is
//     attn_v_b_h·(its weighted sum of c), then attn_output;
//   - the experts: gating from expert_gating_func (softmax when absent, as
//     for early DeepSeek-V2 files), selection on the probabilities +
//     exp_probs_b within the best expert groups, weights optionally
//     renormalized and scaled by expert_weights_scale (ml.Router), plus an
//     ungated shared expert.
func init() { Register("deepseek2", newDeepSeek2) }

type deepseek2 struct {
	hp         HParams
	tokenEmbd  *ml.Matrix
	outputNorm *ml.Vector
	head       Head
	rope       *nn.RoPE // on q_pe and k_pe: HeadDim = Dims = qk_rope
	attn       ml.Attn  // MQA over the latent: 1 KV head of kv_lora + qk_rope
	layers     []mlaLayer

	kvr, nope, rot, vhead int // kv_lora, qk_nope, qk_rope, v_head
}

type mlaLayer struct {
	attnNorm *ml.Vector // blk.N.attn_norm
	q        *ml.Matrix // attn_q, when q is not compressed
	qa       *ml.Matrix // attn_q_a: (q_lora, embd)
	qaNorm   *ml.Vector // attn_q_a_norm
	qb       *ml.Matrix // attn_q_b: (heads·key_length_mla, q_lora)
	kva      *ml.Matrix // attn_kv_a_mqa: (kv_lora + qk_rope, embd)
	kvaNorm  *ml.Vector // attn_kv_a_norm
	kb       *ml.Matrix // attn_k_b: a stack per head of (kv_lora, qk_nope)
	vb       *ml.Matrix // attn_v_b: a stack per head of (v_head, kv_lora)
	o        *ml.Matrix // attn_output: (embd, heads·v_head)
	ffnNorm  *ml.Vector // ffn_norm
	ffn      FFN
}

func newDeepSeek2(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	var err error
	geti := func(dst *int, key string, def int) {
		if err == nil {
			*dst, err = m.int(key, def)
		}
	}
	var qlora, kvr, dk, vhead, rot int
	geti(&qlora, "attention.q_lora_rank", 0)
	geti(&kvr, "attention.kv_lora_rank", -1)
	geti(&dk, "attention.key_length_mla", hp.HeadDim)
	geti(&vhead, "attention.value_length_mla", hp.ValueDim)
	geti(&rot, "rope.dimension_count", -1)
	lm, e := m.float("rope.scaling.yarn_log_multiplier", 0)
	if err == nil {
		err = e
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	switch {
	case kvr <= 0:
		l.Failf("metadata %s.attention.kv_lora_rank = %d", hp.Arch, kvr)
	case rot <= 0 || rot%2 != 0 || rot >= dk:
		l.Failf("metadata %s.rope.dimension_count = %d: want even and below attention.key_length_mla = %d", hp.Arch, rot, dk)
	case vhead <= 0:
		l.Failf("metadata %s.attention.value_length_mla = %d", hp.Arch, vhead)
	}
	if l.Err() != nil {
		return nil
	}
	nope, H := dk-rot, hp.Heads
	r := l.RoPE(false)
	if r == nil {
		return nil
	}
	// The rotation is unscaled: llama.cpp passes attn_factor 1/(1 + 0.1·ln
	// factor), which cancels the magnitude YaRN multiplies cos and sin by.
	factor := 1 / r.FreqScale
	mrope := &nn.RoPE{HeadDim: rot, Dims: rot, Base: r.Base, FreqScale: r.FreqScale,
		ExtFactor: r.ExtFactor, AttnFactor: 1 / (1 + 0.1*math.Log(factor)),
		BetaFast: r.BetaFast, BetaSlow: r.BetaSlow, OrigCtx: r.OrigCtx, FreqFactors: r.FreqFactors}
	// The score scale in float32 as llama.cpp computes it (glibc's logf):
	// float64 would put it an ulp away, which the int8 modes' attention
	// carries into the log-probs.
	mscale := float32(l.rinfo.AttnFactor) * (1 + float32(lm)*nn.LibcLogf(1/float32(r.FreqScale)))
	d := &deepseek2{
		hp:         hp,
		tokenEmbd:  l.Linear("token_embd", hp.Embd, hp.Vocab),
		outputNorm: l.Norm("output_norm", hp.Embd),
		head:       Head{Output: l.LinearAlt(hp.Embd, hp.Vocab, "output", "token_embd")},
		rope:       mrope,
		attn:       ml.Attn{Heads: H, KVHeads: 1, HeadDim: kvr + rot, Scale: float64(mscale * mscale / float32(math.Sqrt(float64(dk))))},
		kvr:        kvr, nope: nope, rot: rot, vhead: vhead,
	}
	moe := l.moeParams(moeOpts{gating: ml.GateSoftmax})
	if moe == nil {
		return nil
	}
	d.hp = l.HP
	for i := range hp.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		ly := mlaLayer{attnNorm: l.Norm(p+"attn_norm", hp.Embd)}
		if qlora > 0 {
			ly.qa = l.Linear(p+"attn_q_a", hp.Embd, qlora)
			ly.qaNorm = l.Norm(p+"attn_q_a_norm", qlora)
			ly.qb = l.Linear(p+"attn_q_b", qlora, H*dk)
		} else {
			ly.q = l.Linear(p+"attn_q", hp.Embd, H*dk)
		}
		ly.kva = l.Linear(p+"attn_kv_a_mqa", hp.Embd, kvr+rot)
		ly.kvaNorm = l.Norm(p+"attn_kv_a_norm", kvr)
		if l.Has(p+"attn_k_b.weight") || !l.Has(p+"attn_kv_b.weight") {
			ly.kb = l.Experts(p+"attn_k_b", H, nope, kvr)
			ly.vb = l.Experts(p+"attn_v_b", H, kvr, vhead)
		} else {
			ly.kb, ly.vb = l.absorbKVB(p+"attn_kv_b", H, kvr, nope, vhead)
		}
		ly.o = l.Linear(p+"attn_output", H*vhead, hp.Embd)
		ly.ffnNorm = l.Norm(p+"ffn_norm", hp.Embd)
		if i < moe.DenseLayers {
			ly.ffn = l.DenseFFN(p, hp.Embd, hp.FFN)
		} else {
			ly.ffn = l.MoE(p, moe)
		}
		d.layers = append(d.layers, ly)
	}
	return d
}

// absorbKVB reads the older MLA layout, attn_kv_b: per head, qk_nope
// rows decompressing c into the head's k_nope, then v_head rows
// decompressing it into its value (HF's kv_b_proj). Since q_nope·k_nope =
// (K_hᵀ·q_nope)·c and the head's output is V_h·(its weighted sum of c),
// these are the absorbed attn_k_b_h = K_hᵀ and attn_v_b_h = V_h, which it
// returns as F32 stacks (what llama.cpp's converter writes for newer
// files), so both layouts run the same latent attention.
func (l *Loader) absorbKVB(name string, H, kvr, nope, vh int) (kb, vb *ml.Matrix) {
	w := l.floats(name+".weight", kvr, H*(nope+vh))
	if w == nil {
		return nil, nil
	}
	kd, vd := make([]float32, H*kvr*nope), make([]float32, H*vh*kvr)
	for h := range H {
		for e := range nope + vh {
			row := w[(h*(nope+vh)+e)*kvr : (h*(nope+vh)+e+1)*kvr]
			if e < nope {
				for r, v := range row {
					kd[(h*kvr+r)*nope+e] = v
				}
			} else {
				copy(vd[(h*vh+e-nope)*kvr:], row)
			}
		}
	}
	return l.derived(name+".weight (k part)", H, nope, kvr, kd), l.derived(name+".weight (v part)", H, kvr, vh, vd)
}

// derived binds a matrix (stack) the loader computed, as F32.
func (l *Loader) derived(name string, experts, in, out int, v []float32) *ml.Matrix {
	data := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(x))
	}
	w := &ml.Matrix{Name: name, Type: gguf.TypeF32, In: in, Out: out, Experts: experts, Data: data}
	l.mats = append(l.mats, w)
	return w
}

func (d *deepseek2) Head() *Head { return &d.head }

// Check requires the latent attention operations.
func (d *deepseek2) Check(b ml.Backend) error {
	if _, ok := b.(ml.Latent); !ok {
		return fmt.Errorf("deepseek2: the %T backend lacks the latent attention operations (ml.Latent: Columns, HeadLinear, LatentAttention)", b)
	}
	return nil
}

func (d *deepseek2) Forward(b ml.Backend, tokens []int32) ml.Tensor {
	lb := b.(ml.Latent)
	hp, n := d.hp, len(tokens)
	H, kvr, nope, rot := hp.Heads, d.kvr, d.nope, d.rot
	dk, kd := nope+rot, kvr+rot
	x := b.Alloc(n, hp.Embd) // the residual stream
	b.Embed(x, d.tokenEmbd, tokens)
	for i := range d.layers {
		ly := &d.layers[i]
		mark := b.Mark()
		h := b.Alloc(n, hp.Embd)
		b.RMSNorm(h, x, ly.attnNorm, hp.Eps)

		q := b.Alloc(n, H*dk)
		if ly.q != nil {
			b.Linear(q, h, ly.q)
		} else {
			qa := b.Alloc(n, ly.qa.Out)
			b.Linear(qa, h, ly.qa)
			b.RMSNorm(qa, qa, ly.qaNorm, hp.Eps)
			b.Linear(q, qa, ly.qb)
		}
		qh := b.View(q, n*H, dk)
		qn, qpe := b.Alloc(n*H, nope), b.Alloc(n*H, rot)
		lb.Columns(qn, 0, qh, 0, nope)
		lb.Columns(qpe, 0, qh, nope, rot)
		b.RoPE(b.View(qpe, n, H*rot), H, d.rope)

		// The key [c | k_pe], c normed and k_pe rotated in place.
		k := b.Alloc(n, kd)
		b.Linear(k, h, ly.kva)
		c, kpe := b.Alloc(n, kvr), b.Alloc(n, rot)
		lb.Columns(c, 0, k, 0, kvr)
		b.RMSNorm(c, c, ly.kvaNorm, hp.Eps)
		lb.Columns(k, 0, c, 0, kvr)
		lb.Columns(kpe, 0, k, kvr, rot)
		b.RoPE(kpe, 1, d.rope)
		lb.Columns(k, kvr, kpe, 0, rot)

		// The query [attn_k_b·q_nope | q_pe] per head.
		qabs := b.Alloc(n, H*kvr)
		lb.HeadLinear(qabs, b.View(qn, n, H*nope), ly.kb)
		qk := b.Alloc(n*H, kd)
		lb.Columns(qk, 0, b.View(qabs, n*H, kvr), 0, kvr)
		lb.Columns(qk, kvr, qpe, 0, rot)

		lat := b.Alloc(n, H*kvr)
		lb.LatentAttention(lat, b.View(qk, n, H*kd), k, i, &d.attn, kvr)
		att := b.Alloc(n, H*d.vhead)
		lb.HeadLinear(att, lat, ly.vb)
		b.Linear(h, att, ly.o)
		b.Add(x, h)

		ff := b.Alloc(n, hp.Embd)
		b.RMSNorm(h, x, ly.ffnNorm, hp.Eps)
		ly.ffn.Forward(b, ff, h)
		b.Add(x, ff)
		b.Release(mark)
	}
	b.RMSNorm(x, x, d.outputNorm, hp.Eps)
	return x
}
