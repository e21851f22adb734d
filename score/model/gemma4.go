package model

import (
	"fmt"
	"math"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// gemma4: Gemma 4, as llama.cpp runs it (the oracle README's gemma4
// section). It keeps Gemma 3's frame (embedding × sqrt(n_embd), pre- and
// post-norms around attention and FFN, q/k RMSNorm, NeoX RoPE, GeGLU,
// sliding and global layers, final soft-cap) and differs from llama in:
//   - two kinds of layer, chosen by the bool array
//     attention.sliding_window_pattern: sliding layers (window
//     attention.sliding_window, head size key_length_swa, rope.freq_base_swa
//     over rope.dimension_count_swa dims) and global ones (head size
//     key_length, rope.freq_base with the rope_freqs factors: pairs with
//     factor 1e30 stay unrotated, "proportional" RoPE); head counts, KV
//     head counts and feed_forward_length may be per-layer arrays;
//   - the score scale is 1 (the q/k norms carry it); v is RMS-normed
//     without a weight and not roped; a layer without attn_v takes v from
//     the raw k projection;
//   - layers il >= n_kv = block_count - attention.shared_kv_layers have no
//     K/V of their own and attend to the cache of layer n_kv-2 (sliding)
//     or n_kv-1 (global) (ml.Gemma4.AttentionShared);
//   - per-layer inputs (embedding_length_per_layer_input P > 0): pl =
//     (rmsnorm(per_layer_model_proj·x0 / sqrt(n_embd))·per_layer_proj_norm
//   - per_layer_token_embd[t]·sqrt(P)) / sqrt(2), P values per layer,
//     and after each layer y += rmsnorm(proj·(gelu(inp_gate·y) ⊙ pl_il))·
//     post_norm;
//   - a layer with ffn_gate_inp adds a mixture of GeGLU experts to its
//     dense MLP: f = rmsnorm(dense)·post_ffw_norm_1 + rmsnorm(moe)·
//     post_ffw_norm_2, the router reading rmsnorm(a)/sqrt(n_embd) ⊙
//     ffn_gate_inp.scale (softmax, top-k, renormalized), the experts
//     reading rmsnorm(a)·pre_ffw_norm_2, each expert's output multiplied
//     by ffn_down_exps.scale (fp32: folded into its routing weight);
//   - each layer's output, residual included, is multiplied by
//     layer_output_scale when the layer has it.
//
// Norm weights are used as stored (Gemma 4 has no "+1").
func init() { Register("gemma4", newGemma4) }

type gemma4 struct {
	hp        HParams
	tokenEmbd *ml.Matrix
	embdScale float64
	layers    []gemma4Layer
	outNorm   *ml.Vector
	head      Head

	// per-layer inputs (P > 0)
	P        int
	plEmbd   *ml.Matrix // per_layer_token_embd: (vocab, P·layers), read by row
	plProj   *ml.Matrix // per_layer_model_proj: (P·layers, n_embd)
	plNorm   *ml.Vector // per_layer_proj_norm: P
	plScale  float64    // sqrt(P)
	prjScale float64    // 1/sqrt(n_embd)
}

type gemma4Layer struct {
	sharedKVAttn           // v = k without attn_v
	attnNorm, postAttnNorm *ml.Vector
	o                      *ml.Matrix

	ffnNorm, postFFNNorm *ml.Vector
	mlp                  ml.MLP
	moe                  *gemma4MoE

	inpGate, proj *ml.Matrix // per-layer input gate (n_embd -> P) and projection (P -> n_embd)
	postNorm      *ml.Vector
	plCols        []int // this layer's columns of the per-layer inputs

	outScale float64 // layer_output_scale; 0: none
}

// gemma4MoE is a layer's mixture of experts beside its dense MLP.
type gemma4MoE struct {
	gate                *ml.Matrix // ffn_gate_inp: (experts, n_embd)
	gateScale           *ml.Vector // ffn_gate_inp.scale: n_embd
	router              ml.Router
	experts             ml.MLP
	downScale           []float32 // ffn_down_exps.scale: one per expert, or nil
	postNorm1, preNorm2 *ml.Vector
	postNorm2           *ml.Vector
}

func newGemma4(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	var err error
	req := func(key string) int { // a required positive integer
		if err != nil {
			return 0
		}
		var v int
		if v, err = m.int(key, -1); err == nil && v <= 0 {
			err = fmt.Errorf("metadata %s.%s = %d, want > 0", hp.Arch, key, v)
		}
		return v
	}
	if !m.has("attention.key_length") {
		err = fmt.Errorf("missing metadata %s.attention.key_length (the global layers' head size)", hp.Arch)
	}
	window := req("attention.sliding_window")
	dS := req("attention.key_length_swa")
	vS := req("attention.value_length_swa")
	rotS := req("rope.dimension_count_swa")
	var heads, kvHeads, ffn []int
	if err == nil {
		heads, err = m.layerInts("attention.head_count", hp.Layers, -1)
	}
	kvHeads = heads
	if err == nil && m.has("attention.head_count_kv") {
		kvHeads, err = m.layerInts("attention.head_count_kv", hp.Layers, -1)
	}
	if err == nil {
		ffn, err = m.layerInts("feed_forward_length", hp.Layers, -1)
	}
	var sharedKV, P int
	if err == nil {
		sharedKV, err = m.int("attention.shared_kv_layers", 0)
	}
	if err == nil {
		P, err = m.int("embedding_length_per_layer_input", -1)
	}
	baseS, softcap := 10000.0, 0.0
	if err == nil {
		baseS, err = m.float("rope.freq_base_swa", 10000)
	}
	if err == nil {
		softcap, err = m.softCap("final_logit_softcapping", 0)
	}
	var pattern []bool
	if err == nil {
		pattern, err = gemma4Pattern(m, hp.Layers)
	}
	if err == nil && vS != dS {
		err = fmt.Errorf("metadata %s.attention.value_length_swa = %d differs from key_length_swa = %d: not supported", hp.Arch, vS, dS)
	}
	nKV := hp.Layers - sharedKV
	if err == nil && (sharedKV < 0 || sharedKV > 0 && nKV < 2 || nKV < 1) {
		err = fmt.Errorf("metadata %s.attention.shared_kv_layers = %d with %d layers (at least 2 layers must have their own K/V)", hp.Arch, sharedKV, hp.Layers)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	if !l.Has("rope_freqs.weight") {
		l.Failf("missing tensor rope_freqs.weight")
		return nil
	}
	global := l.RoPE(true)
	if global == nil {
		return nil
	}
	if global.Dims != hp.HeadDim {
		l.Failf("metadata %s.rope.dimension_count = %d, want the global head size %d", hp.Arch, global.Dims, hp.HeadDim)
		return nil
	}
	local := global.Sliding(baseS).WithDims(rotS, false)
	local.HeadDim = dS
	if pattern[0] {
		l.kvHead0 = dS
	}
	if err := local.Validate(); err != nil {
		l.Failf("sliding layers (%s.rope.dimension_count_swa, rope.freq_base_swa): %v", hp.Arch, err)
		return nil
	}

	E := hp.Embd
	g := &gemma4{
		hp:        hp,
		tokenEmbd: l.Linear("token_embd", E, hp.Vocab),
		embdScale: float64(float32(math.Sqrt(float64(E)))),
		outNorm:   l.Norm("output_norm", E),
		head:      Head{Output: l.LinearAlt(E, hp.Vocab, "output", "token_embd"), SoftCap: softcap},
		P:         P,
	}
	if P > 0 {
		g.plEmbd = l.Linear("per_layer_token_embd", P*hp.Layers, hp.Vocab)
		g.plProj = l.Linear("per_layer_model_proj", E, P*hp.Layers)
		g.plNorm = l.Norm("per_layer_proj_norm", P)
		g.plScale = math.Sqrt(float64(P))
		g.prjScale = 1 / math.Sqrt(float64(E))
	}
	var moe *moeParams
	for i := range hp.Layers {
		if moe == nil && l.Has(fmt.Sprintf("blk.%d.ffn_gate_inp.weight", i)) {
			if moe = l.moeParams(moeOpts{gating: ml.GateSoftmax, norm: true}); moe == nil || !l.ungroupedExperts(moe) {
				return nil
			}
		}
	}
	for i := range hp.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		d, rope, win := hp.HeadDim, global, 0
		if pattern[i] {
			d, rope, win = dS, local, window
		}
		nh, nkv := heads[i], kvHeads[i]
		ly := gemma4Layer{
			sharedKVAttn: sharedKVAttn{
				q:     l.Linear(p+"attn_q", E, nh*d),
				qNorm: l.Norm(p+"attn_q_norm", d),
				src:   i,
				rope:  rope,
				attn:  ml.Attn{Heads: nh, KVHeads: nkv, HeadDim: d, Scale: 1, Window: win},
			},
			attnNorm:     l.Norm(p+"attn_norm", E),
			o:            l.Linear(p+"attn_output", nh*d, E),
			postAttnNorm: l.Norm(p+"post_attention_norm", E),
			ffnNorm:      l.Norm(p+"ffn_norm", E),
			postFFNNorm:  l.Norm(p+"post_ffw_norm", E),
		}
		if err := ly.attn.Validate(); err != nil {
			l.Failf("layer %d: %v", i, err)
			return nil
		}
		if i < nKV {
			ly.k = l.Linear(p+"attn_k", E, nkv*d)
			ly.v = ly.k
			if l.Has(p + "attn_v.weight") {
				ly.v = l.Linear(p+"attn_v", E, nkv*d)
			}
			ly.kNorm = l.Norm(p+"attn_k_norm", d)
		} else {
			ly.src = nKV - 1
			if pattern[i] {
				ly.src = nKV - 2
			}
			s := &g.layers[ly.src]
			if pattern[ly.src] != pattern[i] || s.attn.KVHeads != nkv {
				l.Failf("layer %d (KV-shared) reads the K/V of layer %d, which has another shape (%d KV heads of %d, sliding %v; want %d of %d, sliding %v)",
					i, ly.src, s.attn.KVHeads, s.attn.HeadDim, pattern[ly.src], nkv, d, pattern[i])
				return nil
			}
			s.keep = true
		}
		ly.mlp = l.DenseFFN(p, E, ffn[i]).MLP
		ly.mlp.Act = ml.GeGLU
		if l.Has(p + "ffn_gate_inp.weight") {
			ly.moe = l.gemma4MoE(p, moe)
		}
		if P > 0 {
			ly.inpGate = l.Linear(p+"inp_gate", E, P)
			ly.proj = l.Linear(p+"proj", P, E)
			ly.postNorm = l.Norm(p+"post_norm", E)
			for c := range P {
				ly.plCols = append(ly.plCols, i*P+c)
			}
		}
		if l.Has(p + "layer_output_scale.weight") {
			if s := l.floats(p+"layer_output_scale.weight", 1); s != nil {
				ly.outScale = float64(s[0])
			}
		}
		g.layers = append(g.layers, ly)
	}
	return g
}

// gemma4Pattern reads attention.sliding_window_pattern, one bool per layer
// (true: sliding).
func gemma4Pattern(m meta, layers int) ([]bool, error) {
	key := m.arch + ".attention.sliding_window_pattern"
	v, ok := m.f.Lookup(key)
	if !ok {
		return nil, fmt.Errorf("missing metadata %s", key)
	}
	p, ok := v.Any().([]bool)
	if !ok || len(p) != layers {
		return nil, fmt.Errorf("metadata %s: want an array of %d bools (one per layer)", key, layers)
	}
	return p, nil
}

// gemma4MoE binds a layer's experts: ffn_gate_exps and ffn_up_exps, or
// one ffn_gate_up_exps holding each expert's gate rows, then its up rows.
func (l *Loader) gemma4MoE(prefix string, p *moeParams) *gemma4MoE {
	if p == nil {
		return nil
	}
	E, F, N := l.HP.Embd, p.FFN, p.Experts
	m := &gemma4MoE{
		gate:      l.Linear(prefix+"ffn_gate_inp", E, N),
		gateScale: l.Vector(prefix+"ffn_gate_inp.scale", E),
		router:    l.router(ml.Router{Experts: N, K: p.Used, Gating: p.gating, Norm: p.Norm, Scale: p.Scale}),
		postNorm1: l.Norm(prefix+"post_ffw_norm_1", E),
		preNorm2:  l.Norm(prefix+"pre_ffw_norm_2", E),
		postNorm2: l.Norm(prefix+"post_ffw_norm_2", E),
	}
	m.experts = l.ExpertMLP(prefix, N, E, F)
	m.experts.Act = ml.GeGLU
	if d := m.experts.Down; d != nil && !m.router.GGML {
		// The loader bound ffn_down_exps.scale as the stack's output scale;
		// the fp32 mode folds it into the routing weight instead. The int8
		// modes keep it on the stack: llama.cpp 0.7.0 multiplies each
		// expert's output by it (build_lora_mm_id), then by the weight.
		m.downScale, d.Scale = d.Scale, nil
	}
	return m
}

func (g *gemma4) Head() *Head { return &g.head }

// Check requires the Gemma 4 operations.
func (g *gemma4) Check(b ml.Backend) error {
	if _, ok := b.(ml.Gemma4); !ok {
		return fmt.Errorf("%s needs the Gemma 4 operations (ml.Gemma4: GatherCols, GLU, AttentionShared), which backend %T lacks", g.hp.Arch, b)
	}
	return nil
}

func (g *gemma4) Forward(b ml.Backend, tokens []int32) ml.Tensor {
	ext := b.(ml.Gemma4)
	hp, n, E := g.hp, len(tokens), g.hp.Embd
	x := b.Alloc(n, E) // the residual stream
	b.Embed(x, g.tokenEmbd, tokens)
	b.Scale(x, g.embdScale)
	var pl ml.Tensor // per-layer inputs, (n, P·layers)
	if g.P > 0 {
		pl = b.Alloc(n, g.P*hp.Layers)
		b.Linear(pl, x, g.plProj)
		b.Scale(pl, g.prjScale)
		v := b.View(pl, n*hp.Layers, g.P)
		b.RMSNorm(v, v, g.plNorm, hp.Eps)
		e := b.Alloc(n, g.P*hp.Layers)
		b.Embed(e, g.plEmbd, tokens)
		b.Scale(e, g.plScale)
		b.Add(pl, e)
		b.Scale(pl, 1/math.Sqrt2)
	}
	kept := keptKV{}
	for i := range g.layers {
		kept.alloc(b, n, i, &g.layers[i].sharedKVAttn)
	}
	for i := range g.layers {
		ly := &g.layers[i]
		a := &ly.attn
		mark := b.Mark()
		h := b.Alloc(n, E)
		att := b.Alloc(n, a.Heads*a.HeadDim)

		b.RMSNorm(h, x, ly.attnNorm, hp.Eps)
		ly.forward(b, ext, att, h, i, kept, hp.Eps)
		b.Linear(h, att, ly.o)
		b.RMSNorm(h, h, ly.postAttnNorm, hp.Eps)
		b.Add(x, h) // x is now the attention block's output a

		b.RMSNorm(h, x, ly.ffnNorm, hp.Eps)
		f := b.Alloc(n, E)
		b.MLP(f, h, &ly.mlp)
		if ly.moe != nil {
			b.RMSNorm(f, f, ly.moe.postNorm1, hp.Eps)
			if !g.experts(b, h, x, ly.moe) {
				b.Release(mark)
				return x
			}
			b.Add(f, h)
		}
		b.RMSNorm(f, f, ly.postFFNNorm, hp.Eps)
		b.Add(x, f)

		if g.P > 0 {
			gt, pi := b.Alloc(n, g.P), b.Alloc(n, g.P)
			b.Linear(gt, x, ly.inpGate)
			ext.GatherCols(pi, pl, ly.plCols)
			ext.GLU(gt, gt, pi, ml.GeGLU)
			b.Linear(h, gt, ly.proj)
			b.RMSNorm(h, h, ly.postNorm, hp.Eps)
			b.Add(x, h)
		}
		if ly.outScale != 0 {
			b.Scale(x, ly.outScale)
		}
		b.Release(mark)
	}
	b.RMSNorm(x, x, g.outNorm, hp.Eps)
	return x
}

// experts computes the layer's normed mixture of experts into dst from the
// attention block's output a; false when routing failed (recorded in b).
func (g *gemma4) experts(b ml.Backend, dst, a ml.Tensor, m *gemma4MoE) bool {
	hp, n := g.hp, a.Rows()
	mark := b.Mark()
	defer b.Release(mark)
	r := b.Alloc(n, hp.Embd)
	b.RMSNorm(r, a, m.gateScale, hp.Eps)
	b.Scale(r, 1/math.Sqrt(float64(hp.Embd)))
	logits := b.Alloc(n, m.router.Experts)
	b.Linear(logits, r, m.gate)
	if b.Err() != nil {
		return false
	}
	rt, err := b.Route(logits, &m.router)
	if err != nil {
		b.Fail(fmt.Errorf("%s: %w", m.gate.Name, err))
		return false
	}
	if m.downScale != nil {
		for j, e := range rt.Expert {
			rt.Weight[j] *= m.downScale[e]
		}
	}
	b.RMSNorm(r, a, m.preNorm2, hp.Eps)
	b.Experts(dst, r, &m.experts, rt)
	b.RMSNorm(dst, dst, m.postNorm2, hp.Eps)
	return true
}

// sharedKVAttn is a Gemma 4 or Gemma 3n layer's attention: q and k
// RMS-normed per head, v RMS-normed without a weight, NeoX RoPE, score
// scale 1; a layer from the first shared one on (src != its own index)
// has no K/V of its own and reads those layer src computed.
type sharedKVAttn struct {
	q, k, v      *ml.Matrix // k, v nil on KV-shared layers
	qNorm, kNorm *ml.Vector
	src          int  // the layer whose K/V this one reads (itself when own)
	keep         bool // a later layer reads this one's K/V
	rope         *nn.RoPE
	attn         ml.Attn
}

// keptKV holds, by layer, the K/V that later layers read: allocated
// before the first layer, they stay for the whole pass.
type keptKV map[int][2]ml.Tensor

// alloc allocates layer i's K/V if a later layer reads them.
func (kept keptKV) alloc(b ml.Backend, n, i int, a *sharedKVAttn) {
	if a.keep {
		kvd := a.attn.KVHeads * a.attn.HeadDim
		kept[i] = [2]ml.Tensor{b.Alloc(n, kvd), b.Alloc(n, kvd)}
	}
}

// forward computes layer i's attention over the normed rows h into att
// (n, heads·head size).
func (s *sharedKVAttn) forward(b ml.Backend, ext ml.Gemma4, att, h ml.Tensor, i int, kept keptKV, eps float64) {
	a, n := &s.attn, h.Rows()
	mark := b.Mark()
	defer b.Release(mark)
	q := b.Alloc(n, a.Heads*a.HeadDim)
	qh := b.View(q, n*a.Heads, a.HeadDim)
	if s.src != i {
		b.Linear(q, h, s.q)
		b.RMSNorm(qh, qh, s.qNorm, eps)
		b.RoPE(q, a.Heads, s.rope)
		kv := kept[s.src]
		ext.AttentionShared(att, q, kv[0], kv[1], s.src, a)
		return
	}
	kv, ok := kept[i]
	if !ok {
		kv = [2]ml.Tensor{b.Alloc(n, a.KVHeads*a.HeadDim), b.Alloc(n, a.KVHeads*a.HeadDim)}
	}
	k, v := kv[0], kv[1]
	b.Linears([]ml.Tensor{q, k, v}, h, []*ml.Matrix{s.q, s.k, s.v})
	kh, vh := b.View(k, n*a.KVHeads, a.HeadDim), b.View(v, n*a.KVHeads, a.HeadDim)
	b.RMSNorm(qh, qh, s.qNorm, eps)
	b.RMSNorm(kh, kh, s.kNorm, eps)
	b.RMSNorm(vh, vh, nil, eps)
	b.RoPE(q, a.Heads, s.rope)
	b.RoPE(k, a.KVHeads, s.rope)
	b.Attention(att, q, k, v, i, a)
}
