package model

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"ppl.dev/gguf"
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// deepseek4: DeepSeek-V4, as llama.cpp 0.7.0 runs it (one window from an
// empty cache, in one batch):
//
//   - the residual is hyper_connection.count (4) streams mixed around the
//     attention and the FFN by mHC, as glm5-next's (mhc), and reduced
//     before the final norm by output_hc_* (hy_v4's head: hcMix);
//   - attention reads one key per token, which is also its value: kv =
//     rmsnorm(attn_kv·h)·attn_kv_a_norm, of attention.key_length; q =
//     attn_q_b·(rmsnorm(attn_q_a·h)·attn_q_a_norm), RMS-normed per head
//     without a weight; RoPE (adjacent pairs) turns the last
//     rope.dimension_count elements of q's heads and of kv at the token's
//     position; scores scaled by 1/sqrt(key_length), plus attention sinks;
//   - a query reads the raw keys of its sliding window
//     (attention.sliding_window, itself included), and in the layers whose
//     attention.compress_ratios is 128 or 4 the compressed keys of the
//     blocks of that many tokens completed at its row: per block and
//     channel, the softmax over the block's tokens of
//     attn_compressor_gate·h + attn_compressor_ape[token's place] weighs
//     attn_compressor_kv·h (ratio 4: over the previous block's first half
//     of channels and its own block's second half, nn.OverlapPool), then
//     an RMS norm by attn_compressor_norm and RoPE at the block's first
//     position, with the compressed layers' base
//     (attention.compress_rope_freq_base) and the context's YaRN, which
//     the compressed layers' q and kv take too (the others the plain
//     rope.freq_base);
//   - in the layers of ratio 4 a lightning indexer chooses the blocks: its
//     own compressed keys (indexer_compressor_*, attention.indexer.
//     key_length wide), queries indexer.attn_q_b·q_a of
//     attention.indexer.head_count heads turned by the compressed layers'
//     RoPE, both by a Hadamard matrix, head weights indexer.proj·h /
//     sqrt(heads·key_length); a query reads the attention.indexer.top_k
//     blocks scoring highest (nn.QSABlocks), every block while it has no
//     more;
//   - the heads' outputs are turned back by the inverse RoPE at the query's
//     position, then projected in attention.output_group_count groups of
//     heads (attn_output_a, attention.output_lora_rank each) and together
//     (attn_output_b);
//   - every FFN is experts routed by sqrt(softplus) (expert_gating_func 4,
//     which llama.cpp requires) with the selection bias exp_probs_b,
//     weights normed and scaled as the file says, plus a shared expert;
//     the first hash_layer_count layers take their experts by token id
//     from ffn_gate_tid2eid; the experts' SwiGLUs clamped by
//     swiglu_clamp_exp, the shared expert's by swiglu_clamp_shexp (the
//     experts' when absent), ggml's SWIGLU_CLAMP;
//   - the trailing nextn_predict_layers blocks (multi-token prediction)
//     are not run.
//
// The attention reads [raw keys, compressed keys] in llama.cpp's order and
// tiles (ml.Compressed); in the int8 modes a quantized KV cache holds both
// as its blocks, each key its own value, turned as llama.cpp turns them
// before one (ml.Attn.KeyValues: q and the keys by the keys' Hadamard
// matrix, the output back, for heads of a multiple of 64).
type deepseek4 struct {
	hp         HParams
	tokenEmbd  *ml.Matrix
	outputNorm *ml.Vector
	head       Head
	mhc
	hcHead   hcMix // output_hc_*
	layers   []dsv4Layer
	attn     ml.Attn     // heads of key_length over one key; each layer's sinks
	rope     [2]*nn.RoPE // on the last rope.dimension_count elements (ropeTail): [0] the raw layers', [1] the compressed layers' (and the indexer's)
	back     [2]*nn.RoPE // rope, turning back
	topK     int         // the indexer's blocks a query
	idxHeads int         // its heads
	idxDim   int         // their size
	idxScale float64     // 1/sqrt(heads·size)
	groups   int         // attention.output_group_count
	oRank    int         // attention.output_lora_rank
}

type dsv4Layer struct {
	ratio                             int // attention.compress_ratios: 0, 4 or 128
	attnNorm, qaNorm, kvNorm, ffnNorm *ml.Vector
	sinks                             *ml.Vector
	qa, qb, kv                        *ml.Matrix
	oa                                []*ml.Matrix // attn_output_a: a (output_lora_rank, heads/groups·key_length) per group
	ob                                *ml.Matrix   // attn_output_b
	comp                              *dsv4Compressor
	idx                               *dsv4Indexer // ratio 4
	moe                               *MoE
	table                             []int32 // hash layers: ffn_gate_tid2eid, the experts per token id
	hc                                mhcLayer
}

// dsv4Compressor is a compressor's weights: values and gates (w, embd),
// w the compressed key's width or twice it (overlapping blocks), the
// gates' bias per place in a block (ratio·w values), the key's norm.
type dsv4Compressor struct {
	kv, gate *ml.Matrix
	ape      *ml.Vector
	norm     *ml.Vector
}

// dsv4Indexer is a layer's lightning indexer.
type dsv4Indexer struct {
	qb, proj *ml.Matrix
	comp     *dsv4Compressor
}

func init() { Register("deepseek4", newDeepSeek4) }

func newDeepSeek4(l *Loader) Network {
	if !l.dropNextN() {
		return nil
	}
	hp := l.HP
	m := meta{l.f, hp.Arch}
	err := m.require("attention.q_lora_rank", "attention.sliding_window", "attention.output_group_count", "attention.output_lora_rank",
		"attention.compress_ratios", "attention.compress_rope_freq_base", "attention.indexer.head_count", "attention.indexer.key_length",
		"attention.indexer.top_k", "hash_layer_count", "expert_gating_func", "expert_shared_count", "expert_weights_scale",
		"expert_weights_norm", "swiglu_clamp_exp")
	var qlora, window, groups, oRank, topK, idxHeads, idxDim, hashLayers, rot, gating int
	var cbase float64
	var ratios []int
	geti := func(dst *int, key string, def int) {
		if err == nil {
			*dst, err = m.int(key, def)
		}
	}
	geti(&qlora, "attention.q_lora_rank", -1)
	geti(&window, "attention.sliding_window", -1)
	geti(&groups, "attention.output_group_count", -1)
	geti(&oRank, "attention.output_lora_rank", -1)
	geti(&topK, "attention.indexer.top_k", -1)
	geti(&idxHeads, "attention.indexer.head_count", -1)
	geti(&idxDim, "attention.indexer.key_length", -1)
	geti(&hashLayers, "hash_layer_count", -1)
	geti(&rot, "rope.dimension_count", hp.HeadDim)
	geti(&gating, "expert_gating_func", -1)
	if err == nil {
		cbase, err = m.float("attention.compress_rope_freq_base", -1)
	}
	if err == nil {
		ratios, err = dsv4Ratios(l.f, hp.Arch, hp.Layers)
	}
	D, H := hp.HeadDim, hp.Heads
	switch {
	case err != nil:
		l.fail(err)
	case gating != int(ml.GateSqrtSoftplus):
		l.Failf("metadata %s.expert_gating_func = %d: llama.cpp runs DeepSeek-V4's experts routed by sqrt(softplus) (4) only", hp.Arch, gating)
	case hp.ValueDim != D:
		l.Failf("metadata %s.attention.value_length = %d: DeepSeek-V4's value is its key, of attention.key_length %d (llama.cpp asserts it)", hp.Arch, hp.ValueDim, D)
	case rot <= 0 || rot%2 != 0 || rot > D || rot > idxDim:
		l.Failf("metadata %s.rope.dimension_count = %d: want even, at most attention.key_length %d and attention.indexer.key_length %d", hp.Arch, rot, D, idxDim)
	case qlora <= 0 || window <= 0 || topK <= 0 || idxHeads <= 0 || hashLayers < 0 || !(cbase > 0):
		l.Failf("metadata %s: q_lora_rank %d, sliding_window %d, indexer top_k %d and head_count %d, hash_layer_count %d, compress_rope_freq_base %g: want positive", hp.Arch, qlora, window, topK, idxHeads, hashLayers, cbase)
	case groups <= 0 || H%groups != 0 || oRank <= 0:
		l.Failf("metadata %s.attention.output_group_count = %d, output_lora_rank = %d: want groups dividing the %d heads and a positive rank", hp.Arch, groups, oRank, H)
	case idxDim < 64 || idxDim%64 != 0:
		l.Failf("metadata %s.attention.indexer.key_length = %d: llama.cpp turns the indexer's keys by a Hadamard matrix of 64 or more dividing them (it crashes on narrower heads)", hp.Arch, idxDim)
	case idxDim == D:
		l.Failf("metadata %s.attention.key_length = attention.indexer.key_length = %d: llama.cpp then turns every cache of the layer by a Hadamard matrix, which ppl does not", hp.Arch, D)
	}
	if l.Err() != nil {
		return nil
	}
	r := l.RoPE(false)
	if r == nil {
		return nil
	}
	v := &deepseek4{
		hp:        hp,
		tokenEmbd: l.Linear("token_embd", hp.Embd, hp.Vocab),
		attn:      ml.Attn{Heads: H, KVHeads: 1, HeadDim: D, Scale: float64(1 / float32(math.Sqrt(float64(D)))), Window: window},
		topK:      topK, idxHeads: idxHeads, idxDim: idxDim, groups: groups, oRank: oRank,
		idxScale: float64(1 / float32(math.Sqrt(float64(idxDim*idxHeads)))),
	}
	v.head.Output = l.Linear("output", hp.Embd, hp.Vocab)
	v.outputNorm = l.Norm("output_norm", hp.Embd)
	// The raw layers turn by rope.freq_base alone; the compressed ones by
	// the compressed base with the context's YaRN, whose magnitude
	// llama.cpp cancels (attn_factor 1/(1 + 0.1·ln(1/freq_scale))).
	v.rope[0] = &nn.RoPE{HeadDim: rot, Dims: rot, Base: r.Base, FreqScale: 1, AttnFactor: 1}
	af := 1.0
	if r.ExtFactor != 0 {
		af = float64(1 / nn.YaRNMagnitude(float32(r.FreqScale)))
	}
	v.rope[1] = &nn.RoPE{HeadDim: rot, Dims: rot, Base: cbase, FreqScale: r.FreqScale, ExtFactor: r.ExtFactor, AttnFactor: af,
		BetaFast: r.BetaFast, BetaSlow: r.BetaSlow, OrigCtx: r.OrigCtx}
	for i, x := range v.rope {
		v.back[i] = x.WithBase(x.Base)
		v.back[i].Back = true
	}
	h, epsV, ok := l.mhcParams()
	if !ok {
		return nil
	}
	v.mhc = h
	v.hcHead = l.hcMix("output_hc", h.streams, 1, 0, epsV)
	clampExp, clampShexp, err := sharedClamps(l, hp.Layers)
	if err != nil {
		l.fail(err)
		return nil
	}
	moe := l.moeParams(moeOpts{gating: ml.GateSqrtSoftplus})
	if moe == nil {
		return nil
	}
	moe.SharedFFN = moe.FFN * max(moe.Shared, 1) // llama.cpp's: n_ff_exp · expert_shared_count
	E := hp.Embd
	for i := range hp.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		ly := dsv4Layer{
			ratio:    ratios[i],
			attnNorm: l.Norm(p+"attn_norm", E),
			sinks:    l.Vector(p+"attn_sinks.weight", H),
			qa:       l.Linear(p+"attn_q_a", E, qlora),
			qaNorm:   l.Norm(p+"attn_q_a_norm", qlora),
			qb:       l.Linear(p+"attn_q_b", qlora, H*D),
			kv:       l.Linear(p+"attn_kv", E, D),
			kvNorm:   l.Norm(p+"attn_kv_a_norm", D),
			oa:       l.LinearRows(p+"attn_output_a", H*D/groups, slices.Repeat([]int{oRank}, groups)...),
			ob:       l.Linear(p+"attn_output_b", groups*oRank, E),
			ffnNorm:  l.Norm(p+"ffn_norm", E),
			hc:       mhcLayer{attn: l.mhcMix(p+"hc_attn", h.streams, epsV), ffn: l.mhcMix(p+"hc_ffn", h.streams, epsV)},
		}
		switch ly.ratio {
		case 4:
			ly.comp = l.dsv4Compressor(p+"attn_compressor_", 2*D, D, 4)
			ly.idx = &dsv4Indexer{
				qb:   l.Linear(p+"indexer.attn_q_b", qlora, idxHeads*idxDim),
				proj: l.Linear(p+"indexer.proj", E, idxHeads),
				comp: l.dsv4Compressor(p+"indexer_compressor_", 2*idxDim, idxDim, 4),
			}
		case 128:
			ly.comp = l.dsv4Compressor(p+"attn_compressor_", D, D, 128)
		}
		if i < hashLayers {
			ly.table = l.expertTable(p+"ffn_gate_tid2eid.weight", moe.Used, moe.Experts)
		} else if !l.Has(p + "exp_probs_b.bias") {
			l.Failf("missing tensor %sexp_probs_b.bias (DeepSeek-V4's selection bias, which llama.cpp requires)", p)
		}
		if ly.moe = l.MoE(p, moe); ly.moe != nil {
			if ly.table != nil {
				ly.moe.Router.SelBias = nil // llama.cpp's hash layers have none
			}
			clampFFN(ly.moe, ml.SwiGLUClampIn, clampExp[i], clampShexp[i])
		}
		v.layers = append(v.layers, ly)
	}
	if l.Err() != nil {
		return nil
	}
	v.hp = l.HP
	return v
}

// dsv4Ratios reads attention.compress_ratios: a ratio per layer (at least
// as many as the layers), each 0, 4 or 128, as llama.cpp requires.
func dsv4Ratios(f *gguf.File, arch string, layers int) ([]int, error) {
	key := arch + ".attention.compress_ratios"
	a, err := f.Int32s(key)
	if err != nil {
		return nil, err
	}
	if len(a) < layers {
		return nil, fmt.Errorf("metadata %s has %d values for %d layers (llama.cpp refuses a shorter array)", key, len(a), layers)
	}
	out := make([]int, layers)
	for i, x := range a[:layers] {
		if x != 0 && x != 4 && x != 128 {
			return nil, fmt.Errorf("metadata %s[%d] = %d: llama.cpp compresses by 4 or 128 only (0: none)", key, i, x)
		}
		out[i] = int(x)
	}
	return out, nil
}

// dsv4Compressor binds the compressor prefix: values and gates of width
// w, their biases for ratio places, the compressed key's norm of d.
func (l *Loader) dsv4Compressor(prefix string, w, d, ratio int) *dsv4Compressor {
	c := &dsv4Compressor{
		kv:   l.Linear(prefix+"kv", l.HP.Embd, w),
		gate: l.Linear(prefix+"gate", l.HP.Embd, w),
		ape:  l.tensorVector(prefix+"ape.weight", w, ratio),
		norm: l.Norm(prefix+"norm", d),
	}
	if l.Err() != nil {
		return nil
	}
	return c
}

// expertTable reads a hash layer's experts per token, an I32 tensor of
// used ids for each token of the vocabulary, each below experts.
func (l *Loader) expertTable(name string, used, experts int) []int32 {
	_, data := l.tensorOf(name, func(t *gguf.Tensor) error {
		if t.Type != gguf.TypeI32 {
			return fmt.Errorf("tensor %s: type %v, want I32 (experts per token id)", name, t.Type)
		}
		return nil
	}, used, l.HP.Vocab)
	if data == nil {
		return nil
	}
	out := make([]int32, used*l.HP.Vocab)
	for i := range out {
		e := int32(binary.LittleEndian.Uint32(data[4*i:]))
		if e < 0 || int(e) >= experts {
			l.Failf("tensor %s: token %d's expert %d out of %d", name, i/used, e, experts)
			return nil
		}
		out[i] = e
	}
	return out
}

func (v *deepseek4) Head() *Head { return &v.head }

// Check requires ml.Compressed, ml.Latent's Columns, ml.Recurrent's
// GatherCols and Mul and ml.RWKV's Sigmoid (the streams).
func (v *deepseek4) Check(b ml.Backend) error {
	_, c := b.(ml.Compressed)
	_, lt := b.(ml.Latent)
	_, rc := b.(ml.Recurrent)
	_, rw := b.(ml.RWKV)
	_, hc := b.(ml.MHC)
	if !c || !lt || !rc || !rw || !hc {
		return fmt.Errorf("deepseek4 needs ml.Compressed (compressed keys, their indexer and attention), ml.Latent's Columns, ml.Recurrent's GatherCols and Mul, ml.RWKV's Sigmoid and ml.MHC's SinkhornMix, which backend %T lacks", b)
	}
	return nil
}

func (v *deepseek4) Forward(b ml.Backend, tokens []int32) ml.Tensor {
	hp, n, E, S := v.hp, len(tokens), v.hp.Embd, v.streams
	x, h := embedStreams(b, v.tokenEmbd, tokens, S)
	for i := range v.layers {
		ly := &v.layers[i]
		mark := b.Mark()
		post, comb := b.Alloc(n, S), b.Alloc(n, S*S)
		a := v.read(b, x, &ly.hc.attn, post, comb)
		b.RMSNorm(a, a, ly.attnNorm, hp.Eps)
		v.write(b, x, v.attend(b, i, a), post, comb)
		f := v.read(b, x, &ly.hc.ffn, post, comb)
		b.RMSNorm(f, f, ly.ffnNorm, hp.Eps)
		out := b.Alloc(n, E)
		moe := ly.moe
		if ly.table != nil { // the experts by token id
			m := *moe
			m.Router.Chosen = make([]int32, 0, n*m.Router.K)
			for _, t := range tokens {
				m.Router.Chosen = append(m.Router.Chosen, ly.table[int(t)*m.Router.K:(int(t)+1)*m.Router.K]...)
			}
			moe = &m
		}
		moe.Forward(b, out, f)
		v.write(b, x, out, post, comb)
		b.Release(mark)
	}
	mark := b.Mark()
	b.(ml.Latent).Columns(h, 0, v.reduce(b, x, &v.hcHead, nil), 0, E)
	b.Release(mark)
	b.RMSNorm(h, h, v.outputNorm, hp.Eps)
	return h
}

// attend returns layer i's attention output (n, embd) for its normed input
// a.
func (v *deepseek4) attend(b ml.Backend, i int, a ml.Tensor) ml.Tensor {
	hp, ly := v.hp, &v.layers[i]
	n, H, D, eps := a.Rows(), v.attn.Heads, v.attn.HeadDim, hp.Eps
	lb, cb := b.(ml.Latent), b.(ml.Compressed)
	rp := 0
	if ly.ratio != 0 {
		rp = 1
	}
	qr := b.Alloc(n, ly.qa.Out)
	b.Linear(qr, a, ly.qa)
	b.RMSNorm(qr, qr, ly.qaNorm, eps)
	q := b.Alloc(n, H*D)
	b.Linear(q, qr, ly.qb)
	qh := b.View(q, n*H, D)
	b.RMSNorm(qh, qh, nil, eps)
	ropeTail(b, q, H, D, v.rope[rp])
	kv := b.Alloc(n, D)
	b.Linear(kv, a, ly.kv)
	b.RMSNorm(kv, kv, ly.kvNorm, eps)
	ropeTail(b, kv, 1, D, v.rope[rp])
	at := v.attn
	at.Sinks, at.KeyValues = ly.sinks, true
	heads := b.Alloc(n, H*D)
	if ly.ratio == 0 {
		b.Attention(heads, q, kv, kv, i, &at)
	} else {
		c := v.compress(b, a, ly.comp, D, ly.ratio)
		var vis ml.KeySet
		if ly.idx != nil {
			vis = v.index(b, a, qr, ly.idx)
		}
		cb.CompressedAttention(heads, q, kv, c, ly.ratio, i, &at, vis)
	}
	ropeTail(b, heads, H, D, v.back[rp])
	per := H * D / v.groups
	in, part, oa := b.Alloc(n, per), b.Alloc(n, v.oRank), b.Alloc(n, v.groups*v.oRank)
	for g, w := range ly.oa {
		lb.Columns(in, 0, heads, g*per, per)
		b.Linear(part, in, w)
		lb.Columns(oa, g*v.oRank, part, 0, v.oRank)
	}
	out := b.Alloc(n, hp.Embd)
	b.Linear(out, oa, ly.ob)
	return out
}

// compress returns the compressed keys (n, d) of blocks of ratio of the
// layer's input a: at row b·ratio block b's, normed and turned by the
// compressed layers' RoPE to that position.
func (v *deepseek4) compress(b ml.Backend, a ml.Tensor, c *dsv4Compressor, d, ratio int) ml.Tensor {
	n := a.Rows()
	k, g := b.Alloc(n, c.kv.Out), b.Alloc(n, c.gate.Out)
	b.Linear(k, a, c.kv)
	b.Linear(g, a, c.gate)
	p := b.Alloc(n, d)
	b.(ml.Compressed).CompressKeys(p, k, g, c.ape, ratio, c.kv.Out == 2*d)
	b.RMSNorm(p, p, c.norm, v.hp.Eps)
	ropeTail(b, p, 1, d, v.rope[1])
	return p
}

// index returns the blocks the lightning indexer gives each query row
// (ml.Compressed.IndexBlocks) from the layer's input a and q's compressed
// input qr.
func (v *deepseek4) index(b ml.Backend, a, qr ml.Tensor, x *dsv4Indexer) ml.KeySet {
	n, IH, dim := a.Rows(), v.idxHeads, v.idxDim
	p := v.compress(b, a, x.comp, dim, 4)
	q := b.Alloc(n, IH*dim)
	b.Linear(q, qr, x.qb)
	ropeTail(b, q, IH, dim, v.rope[1])
	w := b.Alloc(n, IH)
	b.Linear(w, a, x.proj)
	b.Scale(w, v.idxScale)
	return b.(ml.Compressed).IndexBlocks(q, p, w, IH, 4, v.topK)
}
