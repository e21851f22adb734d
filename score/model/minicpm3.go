package model

import (
	"fmt"
	"math"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// minicpm3: MiniCPM3-4B, as llama.cpp 0.7.0 runs it: llama's block with
// latent attention in its plain form, not the absorbed one deepseek2.go
// runs: q = attn_q_b·RMSNorm(attn_q_a·x) (heads of key_length = nope +
// rope.dimension_count), [c | k_pe] = attn_kv_a_mqa·x, [k_nope | v] per
// head = attn_kv_b·RMSNorm(c) (values of value_length); the last
// rope.dimension_count values of each q head and k_pe turned by RoPE
// (NeoX pairs; LongRoPE's factors when the file has them), each key
// head [k_nope | k_pe]; attention over heads of key_length, its values
// padded with zeros to that size and the outputs' first value_length
// values kept. llama.cpp fixes the multipliers whatever the file says:
// embeddings × 12, each residual branch × 1.4/sqrt(layers), the final
// norm's rows × 256/width before the output matrix.
//
// plm: PLM-1.8B, as llama.cpp 0.7.0 runs it: the same latent attention
// with q = attn_q·x (no q rank), RoPE over adjacent pairs, without
// multipliers, an ungated MLP ffn_down·relu(ffn_up·x)², the output tied to
// the embeddings (llama.cpp refuses a file with output.weight), and the
// attention as llama.cpp computes it without flash attention (ml.Attn's
// MatMul), the only way llama.cpp 0.7.0 runs it: with flash attention on,
// as its default is on the CPU, it aborts on the values' shape.
func init() {
	Register("minicpm3", newMiniCPM3)
	Register("plm", newMiniCPM3)
}

type minicpm3 struct {
	hp                     HParams
	tokenEmbd              *ml.Matrix
	outputNorm             *ml.Vector
	head                   Head
	layers                 []minicpm3Layer
	rope                   *nn.RoPE // on the rotated parts: HeadDim = Dims
	attn                   ml.Attn  // heads of key_length, values padded to it
	nope, rot, vd, kvr     int
	embScale, resScale, hs float64
}

type minicpm3Layer struct {
	attnNorm, qaNorm, kvaNorm, ffnNorm *ml.Vector
	qa, qb, kva, kvb, o                *ml.Matrix // plm: qb alone, attn_q
	ffn                                FFN
}

func newMiniCPM3(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	plm := hp.Arch == "plm"
	qr, err := 0, error(nil)
	if !plm {
		qr, err = m.positive("attention.q_lora_rank", -1)
	}
	kvr := 0
	if err == nil {
		kvr, err = m.positive("attention.kv_lora_rank", -1)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	if plm && l.Has("output.weight") {
		l.Failf("tensor output.weight: plm's output is the token embedding (llama.cpp 0.7.0 refuses a file with an output matrix)")
		return nil
	}
	r := l.RoPE(!plm)
	if r == nil {
		return nil
	}
	rot, dk, vd := r.Dims, hp.HeadDim, hp.ValueDim
	if rot >= dk || vd > dk || hp.KVHeads != hp.Heads {
		l.Failf("metadata %s: key heads of %d with %d rotated, values of %d, %d KV heads for %d heads: want fewer rotated values than the key head, values no longer, a KV head per head", hp.Arch, dk, rot, vd, hp.KVHeads, hp.Heads)
		return nil
	}
	rp := r.WithDims(rot, true)
	rp.HeadDim = rot
	l.longRoPE(rp)
	H := hp.Heads
	d := &minicpm3{hp: hp, rope: rp, nope: dk - rot, rot: rot, vd: vd, kvr: kvr,
		tokenEmbd:  l.Linear("token_embd", hp.Embd, hp.Vocab),
		outputNorm: l.Norm("output_norm", hp.Embd),
		head:       Head{Output: l.LinearAlt(hp.Embd, hp.Vocab, "output", "token_embd")},
		attn:       ml.Attn{Heads: H, KVHeads: H, HeadDim: dk, ValueDim: vd, Scale: float64(nn.InvSqrtf(dk))},
	}
	if plm {
		d.attn.MatMul = true
	} else {
		d.embScale = 12
		d.resScale = float64(float32(1.4) / float32(math.Sqrt(float64(float32(hp.Layers)))))
		d.hs = float64(float32(256) / float32(hp.Embd))
	}
	for i := range hp.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		ly := minicpm3Layer{
			attnNorm: l.Norm(p+"attn_norm", hp.Embd),
			kva:      l.Linear(p+"attn_kv_a_mqa", hp.Embd, kvr+rot),
			kvaNorm:  l.Norm(p+"attn_kv_a_norm", kvr),
			kvb:      l.Linear(p+"attn_kv_b", kvr, H*(dk-rot+vd)),
			o:        l.Linear(p+"attn_output", H*vd, hp.Embd),
			ffnNorm:  l.Norm(p+"ffn_norm", hp.Embd),
		}
		if plm {
			ly.qb = l.Linear(p+"attn_q", hp.Embd, H*dk)
			ly.ffn = &Dense{ml.MLP{Up: l.Linear(p+"ffn_up", hp.Embd, hp.FFN), Down: l.Linear(p+"ffn_down", hp.FFN, hp.Embd), Act: ml.ReLUSqr}}
		} else {
			ly.qa, ly.qaNorm, ly.qb = l.Linear(p+"attn_q_a", hp.Embd, qr), l.Norm(p+"attn_q_a_norm", qr), l.Linear(p+"attn_q_b", qr, H*dk)
			ly.ffn = l.DenseFFN(p, hp.Embd, hp.FFN)
		}
		d.layers = append(d.layers, ly)
	}
	if l.Err() != nil {
		return nil
	}
	return d
}

func (d *minicpm3) Head() *Head { return &d.head }

// Check requires the column copies of ml.Latent and ml.Recurrent's Zero.
func (d *minicpm3) Check(b ml.Backend) error {
	_, lat := b.(ml.Latent)
	_, rec := b.(ml.Recurrent)
	if !lat || !rec {
		return fmt.Errorf("minicpm3: the %T backend lacks the column copies of ml.Latent or ml.Recurrent's Zero", b)
	}
	return nil
}

func (d *minicpm3) Forward(b ml.Backend, tokens []int32) ml.Tensor {
	hp, n := d.hp, len(tokens)
	lb, rc := b.(ml.Latent), b.(ml.Recurrent)
	H, dk, nope, rot, vd := hp.Heads, d.attn.HeadDim, d.nope, d.rot, d.vd
	x := b.Alloc(n, hp.Embd)
	b.Embed(x, d.tokenEmbd, tokens)
	if d.embScale != 0 {
		b.Scale(x, d.embScale)
	}
	for i := range d.layers {
		ly := &d.layers[i]
		mark := b.Mark()
		h := b.Alloc(n, hp.Embd)
		b.RMSNorm(h, x, ly.attnNorm, hp.Eps)

		// q, its rotated part turned in place.
		q := b.Alloc(n, H*dk)
		if ly.qa != nil {
			qa := b.Alloc(n, ly.qa.Out)
			b.Linear(qa, h, ly.qa)
			b.RMSNorm(qa, qa, ly.qaNorm, hp.Eps)
			b.Linear(q, qa, ly.qb)
		} else {
			b.Linear(q, h, ly.qb)
		}
		qh, qpe := b.View(q, n*H, dk), b.Alloc(n*H, rot)
		lb.Columns(qpe, 0, qh, nope, rot)
		b.RoPE(b.View(qpe, n, H*rot), H, d.rope)
		lb.Columns(qh, nope, qpe, 0, rot)

		// The keys [k_nope | k_pe] and the values padded with zeros.
		ckp, c, kpe := b.Alloc(n, d.kvr+rot), b.Alloc(n, d.kvr), b.Alloc(n, rot)
		b.Linear(ckp, h, ly.kva)
		lb.Columns(c, 0, ckp, 0, d.kvr)
		lb.Columns(kpe, 0, ckp, d.kvr, rot)
		b.RMSNorm(c, c, ly.kvaNorm, hp.Eps)
		b.RoPE(kpe, 1, d.rope)
		kv := b.Alloc(n, H*(nope+vd))
		b.Linear(kv, c, ly.kvb)
		kvh := b.View(kv, n*H, nope+vd)
		k, v := b.Alloc(n, H*dk), b.Alloc(n, H*dk)
		kh, vh := b.View(k, n*H, dk), b.View(v, n*H, dk)
		lb.Columns(kh, 0, kvh, 0, nope)
		for hd := range H {
			lb.Columns(k, hd*dk+nope, kpe, 0, rot)
		}
		rc.Zero(v)
		lb.Columns(vh, 0, kvh, nope, vd)

		att, out := b.Alloc(n, H*dk), b.Alloc(n, H*vd)
		b.Attention(att, q, k, v, i, &d.attn)
		lb.Columns(b.View(out, n*H, vd), 0, b.View(att, n*H, dk), 0, vd)
		b.Linear(h, out, ly.o)
		if d.resScale != 0 {
			b.Scale(h, d.resScale)
		}
		b.Add(x, h)

		ff := b.Alloc(n, hp.Embd)
		b.RMSNorm(h, x, ly.ffnNorm, hp.Eps)
		ly.ffn.Forward(b, ff, h)
		if d.resScale != 0 {
			b.Scale(ff, d.resScale)
		}
		b.Add(x, ff)
		b.Release(mark)
	}
	b.RMSNorm(x, x, d.outputNorm, hp.Eps)
	if d.hs != 0 {
		b.Scale(x, d.hs)
	}
	return x
}
