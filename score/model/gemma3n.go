package model

import (
	"fmt"
	"math"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// gemma3n: Gemma 3n (E2B, E4B), as llama.cpp 0.7.0 runs it
// (llm_build_gemma3n_iswa). Gemma's frame (embedding × sqrt(n_embd), q/k
// norms and a weightless v norm, score scale 1, NeoX RoPE, GeGLU, pre- and
// post-norms, final soft-cap 30 whatever final_logit_softcapping says, as
// llama.cpp 0.7.0 does) around:
//   - AltUp: the residual is 4 streams. The first is the scaled
//     embedding; the others altup_proj[k]·x rescaled to its norm. Each
//     layer predicts all streams from each other with coefficients that
//     altup_predict_coef makes of tanh(altup_router·(rmsnorm(s_0)·
//     altup_router_norm / n_embd)) (ml.AltUp.AltUpPredict), runs its block
//     on the prediction of stream 0, and corrects every stream by the
//     block's innovation with coefficients from altup_correct_coef (+1) of
//     the router read on the block's output (AltUpCorrect). At the end
//     streams 1-3 go through altup_unembd_proj, rescaled to stream 0's
//     norm, and the four are averaged;
//   - LAuReL: beside the attention, rmsnorm(laurel_r·laurel_l·h)·
//     laurel_post_norm + h (rank 64), added to the attention's output,
//     the sum times 1/sqrt(2);
//   - in the first 10 layers the FFN gate is sparsified: g = relu(g -
//     mean(g) - 1.6448533535003662·std(g)) (ml.MLP.TopK; the normal
//     distribution's 95th percentile);
//   - per-layer inputs of 256 values as in Gemma 4, their output added to
//     streams 1-3 after the correction: proj·(gelu(inp_gate·(s_0 ⊙
//     altup_correct_scale)) ⊙ pl_il), RMS-normed by post_norm;
//   - sliding-window layers 4 of each 5 (RoPE base 10000), global layers
//     with rope.freq_base; layers from 20 on reuse the KV of layer 18
//     (sliding) or 19 (global).
//
// llama.cpp fixes the stream count (4), the active stream (0), the
// per-layer width (256), LAuReL's rank (64), the sparse layers (10) and
// their multiplier, the KV layers (20) and the window pattern, and reads
// none of the keys the converter writes for them; a file whose keys say
// otherwise is refused by name rather than scored as llama.cpp would
// score it against its own metadata.
func init() { Register("gemma3n", newGemma3n) }

// llama.cpp's constants for gemma3n.
const (
	g3nStreams   = 4                  // n_altup
	g3nActive    = 0                  // i_altup_act
	g3nPerLayer  = 256                // n_embd_altup
	g3nLaurel    = 64                 // laurel_rank
	g3nSparse    = 10                 // n_layer_sparsity
	g3nSparseMul = 1.6448533535003662 // f_sparsity_std_mul
	g3nKVLayers  = 20                 // n_layer_kv_from_start
	g3nPeriod    = 5                  // set_swa_pattern(5): every 5th layer global
	g3nSWABase   = 10000              // rope_freq_base_train_swa
)

type gemma3n struct {
	hp         HParams
	tokenEmbd  *ml.Matrix
	embdScale  float64
	proj       []*ml.Matrix // altup_proj: streams 1.. from the embedding
	unembd     []*ml.Matrix // altup_unembd_proj: streams 1.. at the end
	plEmbd     *ml.Matrix   // per_layer_token_embd: (vocab, 256·layers)
	plProj     *ml.Matrix   // per_layer_model_proj: (256·layers, n_embd)
	plNorm     *ml.Vector
	layers     []gemma3nLayer
	outNorm    *ml.Vector
	head       Head
	routerFrac float64 // 1/n_embd, as llama.cpp rounds it
}

type gemma3nLayer struct {
	sharedKVAttn
	attnNorm, postAttnNorm *ml.Vector
	o                      *ml.Matrix

	laurelL, laurelR *ml.Matrix
	laurelNorm       *ml.Vector

	ffnNorm, postFFNNorm *ml.Vector
	mlp                  ml.MLP

	router                   *ml.Matrix // altup_router: (4, n_embd)
	routerNorm               *ml.Vector
	predictCoef, correctCoef *ml.Matrix // (16, 4), (4, 4)
	correctScale             *ml.Vector

	inpGate, plOut *ml.Matrix // per-layer input gate (n_embd -> 256) and projection (256 -> n_embd)
	postNorm       *ml.Vector
	plCols         []int
}

func newGemma3n(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	window, err := m.positive("attention.sliding_window", -1)
	var ffn, heads, kvHeads []int
	if err == nil {
		ffn, err = m.layerInts("feed_forward_length", hp.Layers, -1)
	}
	if err == nil {
		heads, err = m.layerInts("attention.head_count", hp.Layers, -1)
	}
	if err == nil {
		kvHeads, err = m.layerInts("attention.head_count_kv", hp.Layers, hp.KVHeads)
	}
	const softcap = 30 // llama.cpp 0.7.0's, whatever final_logit_softcapping says (probed)
	if err == nil {
		err = gemma3nFixed(m, hp.Layers)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	global := l.RoPE(true)
	if global == nil {
		return nil
	}
	baseSWA, err := m.float("rope.freq_base_swa", g3nSWABase)
	if err != nil {
		l.fail(err)
		return nil
	}
	local := global.Sliding(baseSWA)
	if err := local.Validate(); err != nil {
		l.Failf("sliding layers: %v", err)
		return nil
	}
	E, L, P := hp.Embd, hp.Layers, g3nPerLayer
	g := &gemma3n{
		hp:         hp,
		tokenEmbd:  l.Linear("token_embd", E, hp.Vocab),
		embdScale:  float64(float32(math.Sqrt(float64(E)))),
		plEmbd:     l.Linear("per_layer_token_embd", P*L, hp.Vocab),
		plProj:     l.Linear("per_layer_model_proj", E, P*L),
		plNorm:     l.Norm("per_layer_proj_norm", P),
		outNorm:    l.Norm("output_norm", E),
		head:       Head{Output: l.LinearAlt(E, hp.Vocab, "output", "token_embd"), SoftCap: softcap},
		routerFrac: float64(1 / float32(E)),
		proj:       l.Stack("altup_proj", g3nStreams-1, E, E),
		unembd:     l.Stack("altup_unembd_proj", g3nStreams-1, E, E),
	}
	nKV := min(g3nKVLayers, L)
	for i := range L {
		p := fmt.Sprintf("blk.%d.", i)
		rope, win := global, 0
		sliding := i%g3nPeriod < g3nPeriod-1
		if sliding {
			rope, win = local, window
		}
		nh, nkv := heads[i], kvHeads[i]
		ly := gemma3nLayer{
			sharedKVAttn: sharedKVAttn{
				q:     l.Linear(p+"attn_q", E, nh*hp.HeadDim),
				qNorm: l.Norm(p+"attn_q_norm", hp.HeadDim),
				src:   i,
				rope:  rope,
				attn:  ml.Attn{Heads: nh, KVHeads: nkv, HeadDim: hp.HeadDim, Scale: 1, Window: win},
			},
			attnNorm:     l.Norm(p+"attn_norm", E),
			o:            l.Linear(p+"attn_output", nh*hp.HeadDim, E),
			postAttnNorm: l.Norm(p+"post_attention_norm", E),
			laurelL:      l.Linear(p+"laurel_l", E, g3nLaurel),
			laurelR:      l.Linear(p+"laurel_r", g3nLaurel, E),
			laurelNorm:   l.Norm(p+"laurel_post_norm", E),
			ffnNorm:      l.Norm(p+"ffn_norm", E),
			postFFNNorm:  l.Norm(p+"post_ffw_norm", E),
			router:       l.Linear(p+"altup_router", E, g3nStreams),
			routerNorm:   l.Norm(p+"altup_router_norm", E),
			predictCoef:  l.Linear(p+"altup_predict_coef", g3nStreams, g3nStreams*g3nStreams),
			correctCoef:  l.Linear(p+"altup_correct_coef", g3nStreams, g3nStreams),
			correctScale: l.Norm(p+"altup_correct_scale", E),
			inpGate:      l.Linear(p+"inp_gate", E, P),
			plOut:        l.Linear(p+"proj", P, E),
			postNorm:     l.Norm(p+"post_norm", E),
		}
		if err := ly.attn.Validate(); err != nil {
			l.Failf("layer %d: %v", i, err)
			return nil
		}
		kvd := nkv * hp.HeadDim
		if i < nKV {
			ly.k = l.Linear(p+"attn_k", E, kvd)
			ly.v = l.Linear(p+"attn_v", E, kvd)
			ly.kNorm = l.Norm(p+"attn_k_norm", hp.HeadDim)
		} else {
			l.pass(p+"attn_k.weight", p+"attn_v.weight", p+"attn_k_norm.weight") // llama.cpp loads and leaves them
			ly.src = nKV - 1
			if sliding {
				ly.src = nKV - 2
			}
			s := &g.layers[ly.src]
			if s.attn.KVHeads != nkv || s.attn.Window != win {
				l.Failf("layer %d (KV-shared) reads the K/V of layer %d, which has another shape (%d KV heads, window %d; want %d, %d)", i, ly.src, s.attn.KVHeads, s.attn.Window, nkv, win)
				return nil
			}
			s.keep = true
		}
		ly.mlp = l.DenseFFN(p, E, ffn[i]).MLP
		ly.mlp.Act = ml.GeGLU
		if i < g3nSparse {
			ly.mlp.TopK = g3nSparseMul
		}
		for c := range P {
			ly.plCols = append(ly.plCols, i*P+c)
		}
		g.layers = append(g.layers, ly)
	}
	return g
}

// gemma3nFixed checks the keys the converter writes for what llama.cpp
// fixes: a file that states other values than llama.cpp's constants is
// refused, naming the key.
func gemma3nFixed(m meta, layers int) error {
	for _, k := range []struct {
		key  string
		want int
	}{{"altup.num_inputs", g3nStreams}, {"altup.active_idx", g3nActive}, {"embedding_length_per_layer_input", g3nPerLayer}} {
		if v, err := m.int(k.key, k.want); err != nil {
			return err
		} else if v != k.want {
			return fmt.Errorf("metadata %s.%s = %d: llama.cpp runs gemma3n with %d only", m.arch, k.key, v, k.want)
		}
	}
	if m.has("attention.shared_kv_layers") {
		want := max(layers-g3nKVLayers, 0)
		if v, err := m.float("attention.shared_kv_layers", 0); err != nil {
			return err
		} else if v != float64(want) {
			return fmt.Errorf("metadata %s.attention.shared_kv_layers = %v: llama.cpp gives gemma3n's layers from %d on the KV of earlier ones (%d shared of %d layers)", m.arch, v, g3nKVLayers, want, layers)
		}
	}
	// The pattern as flags or a period, read as the architectures that
	// read it do, then held to llama.cpp's fixed one.
	sliding, err := m.slidingLayers(layers, g3nPeriod, false)
	if err != nil {
		return err
	}
	for i, s := range sliding {
		if s != (i%g3nPeriod < g3nPeriod-1) {
			return fmt.Errorf("metadata %s.attention.sliding_window_pattern: layer %d sliding %v; llama.cpp runs gemma3n with 4 sliding layers of every 5", m.arch, i, s)
		}
	}
	key := m.arch + ".activation_sparsity_scale"
	if v, ok := m.f.Lookup(key); ok {
		s, ok := v.Any().([]float32)
		if !ok || len(s) != layers {
			return fmt.Errorf("metadata %s: want an array of %d floats (one per layer)", key, layers)
		}
		for i, x := range s {
			sparse := i < g3nSparse
			if sparse && x != float32(g3nSparseMul) || !sparse && !math.IsInf(float64(x), -1) && x != 0 {
				return fmt.Errorf("metadata %s[%d] = %v: llama.cpp sparsifies gemma3n's first %d layers at %v and no others", key, i, x, g3nSparse, float32(g3nSparseMul))
			}
		}
	}
	return nil
}

func (g *gemma3n) Head() *Head { return &g.head }

// Check requires the Gemma 4 operations (shared-KV attention, column
// gathers, GLU) and AltUp's.
func (g *gemma3n) Check(b ml.Backend) error {
	_, g4 := b.(ml.Gemma4)
	_, au := b.(ml.AltUp)
	if !g4 || !au {
		return fmt.Errorf("%s needs the Gemma 4 operations (ml.Gemma4) and AltUp's (ml.AltUp), which backend %T lacks", g.hp.Arch, b)
	}
	return nil
}

func (g *gemma3n) Forward(b ml.Backend, tokens []int32) ml.Tensor {
	g4, au := b.(ml.Gemma4), b.(ml.AltUp)
	hp, n, E, A := g.hp, len(tokens), g.hp.Embd, g3nStreams
	P := g3nPerLayer

	// The streams, two buffers the layers alternate between.
	x, y := b.Alloc(A*n, E), b.Alloc(A*n, E)
	stream := func(t ml.Tensor, k int) ml.Tensor { return b.Slice(t, k*n, (k+1)*n) }
	x0 := stream(x, 0)
	b.Embed(x0, g.tokenEmbd, tokens)
	b.Scale(x0, g.embdScale)

	// Per-layer inputs, (n, 256·layers).
	pl := b.Alloc(n, P*hp.Layers)
	b.Linear(pl, x0, g.plProj)
	b.Scale(pl, float64(nn.InvSqrtf(E)))
	v := b.View(pl, n*hp.Layers, P)
	b.RMSNorm(v, v, g.plNorm, hp.Eps)
	e := b.Alloc(n, P*hp.Layers)
	b.Embed(e, g.plEmbd, tokens)
	b.Scale(e, math.Sqrt(float64(P)))
	b.Add(pl, e)
	b.Scale(pl, float64(nn.InvSqrtf(2)))

	for k := 1; k < A; k++ {
		s := stream(x, k)
		b.Linear(s, x0, g.proj[k-1])
		au.MatchNorm(s, x0)
	}

	kept := keptKV{}
	for i := range g.layers {
		kept.alloc(b, n, i, &g.layers[i].sharedKVAttn)
	}
	for i := range g.layers {
		ly := &g.layers[i]
		a := &ly.attn
		mark := b.Mark()
		r := b.Alloc(n, E)
		mod := b.Alloc(n, A)
		router := func(src ml.Tensor) { // mod = tanh(router · rmsnorm(src)·norm / n_embd)
			b.RMSNorm(r, src, ly.routerNorm, hp.Eps)
			b.Scale(r, g.routerFrac)
			b.Linear(mod, r, ly.router)
			au.Tanh(mod)
		}
		router(stream(x, g3nActive))
		coef := b.Alloc(n, A*A)
		b.Linear(coef, mod, ly.predictCoef)
		au.AltUpPredict(y, x, coef)
		ap := stream(y, g3nActive) // the active stream's prediction

		h := b.Alloc(n, E)
		b.RMSNorm(h, ap, ly.attnNorm, hp.Eps)
		lr := b.Alloc(n, g3nLaurel)
		b.Linear(lr, h, ly.laurelL)
		laurel := b.Alloc(n, E)
		b.Linear(laurel, lr, ly.laurelR)
		b.RMSNorm(laurel, laurel, ly.laurelNorm, hp.Eps)
		b.Add(laurel, h)

		att := b.Alloc(n, a.Heads*a.HeadDim)
		ly.forward(b, g4, att, h, i, kept, hp.Eps)
		o := b.Alloc(n, E)
		b.Linear(o, att, ly.o)
		b.RMSNorm(o, o, ly.postAttnNorm, hp.Eps)
		b.Add(o, ap)
		b.Add(o, laurel)
		b.Scale(o, float64(nn.InvSqrtf(2)))

		b.RMSNorm(h, o, ly.ffnNorm, hp.Eps)
		f := b.Alloc(n, E)
		b.MLP(f, h, &ly.mlp)
		b.RMSNorm(f, f, ly.postFFNNorm, hp.Eps)
		b.Add(f, o) // the block's output

		router(f)
		cc := b.Alloc(n, A)
		b.Linear(cc, mod, ly.correctCoef)
		au.AltUpCorrect(y, y, f, cc, g3nActive)

		au.MulCols(h, stream(y, g3nActive), ly.correctScale)
		gt, pi := b.Alloc(n, P), b.Alloc(n, P)
		b.Linear(gt, h, ly.inpGate)
		g4.GatherCols(pi, pl, ly.plCols)
		g4.GLU(gt, gt, pi, ml.GeGLU)
		b.Linear(h, gt, ly.plOut)
		b.RMSNorm(h, h, ly.postNorm, hp.Eps)
		for k := 1; k < A; k++ {
			b.Add(stream(y, k), h)
		}
		b.Release(mark)
		x, y = y, x
	}

	// Merge the streams: s_0 + Σ rescaled unembd_k·s_k, averaged.
	for k := 1; k < A; k++ { // into y, free now
		b.Linear(stream(y, k), stream(x, k), g.unembd[k-1])
		au.MatchNorm(stream(y, k), stream(x, g3nActive))
	}
	out := stream(x, 0)
	for k := 1; k < A; k++ {
		b.Add(out, stream(y, k))
	}
	b.Scale(out, 1/float64(A))
	b.RMSNorm(out, out, g.outNorm, hp.Eps)
	return out
}
