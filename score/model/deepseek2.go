package model

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

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
//     attn_factor·(1 + yarn_log_multiplier·ln(factor)). Without a
//     yarn_log_multiplier (and in glm-dsa) cos and sin keep YaRN's
//     magnitude 1 + 0.1·ln(factor), and mscale is that magnitude;
//   - attention is MQA over the latent (ml.Latent): query head h is
//     [attn_k_b_h·q_nope_h | q_pe_h], the one key [c | k_pe], the value c,
//     so the KV cache holds [c | k_pe] per token; head h's output is
//     attn_v_b_h·(its weighted sum of c), then attn_output;
//   - the experts: gating from expert_gating_func (softmax when absent, as
//     for early DeepSeek-V2 files), selection on the probabilities +
//     exp_probs_b within the best expert groups, weights optionally
//     renormalized and scaled by expert_weights_scale (ml.Router), plus an
//     ungated shared expert;
//   - Llama 4's attention temperature (attnTemp: Mistral Large 3) on the
//     query [attn_k_b·q_nope | q_pe] when attention.temperature_scale is
//     set, its step attention.temperature_length (required then: llama.cpp
//     asserts it);
//   - the trailing nextn_predict_layers blocks (multi-token prediction)
//     are not run.
//
// Besides kimi-linear and bailingmoe3 (Kimi Delta Attention layers
// between latent attention ones, kimilinear.go), glm5-next (that hybrid
// inside mHC streams, its latent attention without RoPE past a k-pool
// indexer, glm5next.go) and dots3note (DSA and sliding layers of their own
// latent sizes, dots3note.go), three more
// architectures are this model as llama.cpp 0.7.0 runs them:
//   - mistral4 (Mistral Small 4): deepseek2's tensors and metadata;
//   - deepseek32 (DeepSeek-V3.2) and glm-dsa (GLM-5): sparse attention
//     (DSA), each query attending only to the attention.indexer.top_k keys
//     its lightning indexer scores highest (nn.LightningTopK, ml.Sparse):
//     per layer, indexer queries attn_q_b·(the normed q_lora) of
//     attention.indexer.head_count heads of attention.indexer.key_length,
//     one indexer key k_norm(attn_k·h) (a LayerNorm: eps 1e-6 in
//     deepseek32, 0 in glm-dsa, as llama.cpp sets them), both with
//     RoPE on their first rope.dimension_count elements (NeoX in
//     deepseek32, adjacent pairs in glm-dsa, YaRN as the attention's), head
//     weights proj·h/sqrt(heads·key_length). A window of at most top_k
//     tokens reads every key: deepseek2's dense attention, bit for bit in
//     llama.cpp, on any backend. glm-dsa's layers marked 0 in
//     attention.indexer.types reuse the previous layer's keys (GLM-5.2;
//     absent, every layer has its indexer below a training context of 2^20
//     and GLM-5.2's pattern at and above); its indexer tensors may be
//     absent, which limits windows to top_k. Its gating is sigmoid when the
//     file does not say, and it never reads yarn_log_multiplier.
func init() {
	for _, arch := range latentArchs {
		Register(arch, newDeepSeek2)
	}
}

var latentArchs = []string{"deepseek2", "mistral4", "deepseek32", "glm-dsa", "kimi-linear", "bailingmoe3", "kimi-k3", "dots3note", "hy_v4", "glm5-next"}

// LatentArch reports whether arch is one of deepseek2's: its attention is
// latent (ml.Latent), key_length and value_length the latent key's and
// value's widths, not a head's.
func LatentArch(arch string) bool { return slices.Contains(latentArchs, arch) }

type deepseek2 struct {
	hp         HParams
	tokenEmbd  *ml.Matrix
	outputNorm *ml.Vector
	head       Head
	full       mlaGeom // every layer's, or dots3note's full layers'
	rot        int     // qk_rope
	layers     []mlaLayer
	temp       attnTemp
	noRoPE     bool // kimi-linear: q_pe and k_pe are not turned

	// DSA (deepseek32, glm-dsa, dots3note): windows past topK tokens select keys.
	topK             int      // 0: dense attention
	context          int      // the windows' context the model was loaded for (Options.Context; 0: unknown)
	idxHeads, idxDim int      // the indexer's heads and their size
	idxRope          *nn.RoPE // on the first qk_rope elements of the indexer's heads
	idxScale         float64  // 1/sqrt(heads·dim), on the head weights
	idxEps           float64  // the key norm's: 1e-6 in deepseek32 and dots3note, 0 in glm-dsa, the RMS norms' in hy_v4 (llama.cpp sets no other)
	idxTail          *nn.RoPE // hy_v4: RoPE on the last qk_rope elements of the indexer's heads instead of idxRope
	idxRotate        bool     // q and k Hadamard-rotated, as llama.cpp stores the keys (not in hy_v4)
	kpool            int      // glm5-next: the indexer scores blocks of kpool keys (ml.PooledSparse); 0: every key
}

// mlaGeom is a latent attention layer's shape: one for every layer of
// deepseek2's, dots3note's full and sliding layers each their own.
type mlaGeom struct {
	kvr, nope, vhead int      // kv_lora, qk_nope, v_head
	attn             ml.Attn  // MQA over the latent: 1 KV head of kv_lora + qk_rope
	rope             *nn.RoPE // on q_pe and k_pe: HeadDim = Dims = qk_rope
	headCols         []int    // gated attention (bailingmoe3, dots3note): column c of the heads' outputs reads its head's gate, c / v_head
}

type mlaLayer struct {
	g        *mlaGeom
	attnNorm *ml.Vector // blk.N.attn_norm
	q        *ml.Matrix // attn_q, when q is not compressed
	qa       *ml.Matrix // attn_q_a: (q_lora, embd)
	qaNorm   *ml.Vector // attn_q_a_norm
	qb       *ml.Matrix // attn_q_b: (heads·key_length_mla, q_lora)
	kva      *ml.Matrix // attn_kv_a_mqa: (kv_lora + qk_rope, embd)
	kvaNorm  *ml.Vector // attn_kv_a_norm
	kNorm    *ml.Vector // dots3note: attn_k_norm, an RMS norm of k_pe before RoPE
	sinks    *ml.Vector // hy_v4: attn_sinks, a logit per head
	kb       *ml.Matrix // attn_k_b: a stack per head of (kv_lora, qk_nope)
	vb       *ml.Matrix // attn_v_b: a stack per head of (v_head, kv_lora)
	o        *ml.Matrix // attn_output: (embd, heads·v_head)
	ffnNorm  *ml.Vector // ffn_norm
	ffn      FFN
	idx      *indexer   // DSA: nil in a layer that reuses the previous layer's keys, or slides
	kda      *kda       // kimi-linear, bailingmoe3: a KDA layer (the attention's weights nil)
	gate     *ml.Matrix // bailingmoe3, dots3note: attn_gate, (heads, embd): sigmoid(gate·h) per head on the attention's output; hy_v4: (heads·v_head, embd), per element
}

// indexer is a DSA layer's lightning indexer (blk.N.indexer.*).
type indexer struct {
	qb           *ml.Matrix // attn_q_b: (heads·dim, q_lora)
	k            *ml.Matrix // attn_k: (dim, embd)
	kNorm, kBias *ml.Vector // k_norm weight and bias
	proj         *ml.Matrix // proj: (heads, embd)
	gate         *ml.Matrix // glm5-next: indexer_compressor_gate, (dim, embd): the pool's gates
	ape          *ml.Vector // glm5-next: indexer_compressor_ape, (kpool, dim): their bias by position
}

func newDeepSeek2(l *Loader) Network {
	if !l.dropNextN() {
		return nil
	}
	hp := l.HP
	m := meta{l.f, hp.Arch}
	dots3, hyv4, k3, glm5 := hp.Arch == "dots3note", hp.Arch == "hy_v4", hp.Arch == "kimi-k3", hp.Arch == "glm5-next"
	hyTopK, _ := m.int("attention.indexer.top_k", 0) // hy_v4: DSA when above 0, as llama.cpp reads it
	dsa := hp.Arch == "deepseek32" || hp.Arch == "glm-dsa" || dots3 || hyv4 && hyTopK > 0 || glm5
	var situ nn.SiTU
	var resBlock int
	var k3Bound float32 // kimi-k3's safe gate's lower bound; 0: none
	if k3 {
		var ok bool
		if situ, resBlock, k3Bound, ok = l.k3Hparams(); !ok {
			return nil
		}
	}
	var err error
	geti := func(dst *int, key string, def int) {
		if err == nil {
			*dst, err = m.int(key, def)
		}
	}
	var qlora, kvr, dk, vhead, rot int
	qloraDef := 0
	if dots3 || hyv4 || glm5 { // their attention has no uncompressed q
		qloraDef = -1
	}
	geti(&qlora, "attention.q_lora_rank", qloraDef)
	geti(&kvr, "attention.kv_lora_rank", -1)
	geti(&dk, "attention.key_length_mla", hp.HeadDim)
	geti(&vhead, "attention.value_length_mla", hp.ValueDim)
	geti(&rot, "rope.dimension_count", -1)
	var topK, idxHeads, idxDim int
	if dsa && err == nil {
		topK, err = m.positive("attention.indexer.top_k", -1)
	}
	if dsa && err == nil {
		idxHeads, err = m.positive("attention.indexer.head_count", -1)
	}
	if dsa && err == nil {
		idxDim, err = m.positive("attention.indexer.key_length", -1)
	}
	if (dots3 || hyv4) && err == nil { // llama.cpp requires them
		err = m.require("expert_gating_func", "expert_shared_count")
	}
	if g, e := m.int("expert_gating_func", 0); hyv4 && err == nil && (e != nil || g == 0) {
		err = cmp.Or(e, fmt.Errorf("metadata hy_v4.expert_gating_func = 0: llama.cpp has no default for hy_v4 and aborts"))
	}
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
	case glm5 && rot != 0:
		l.Failf("metadata %s.rope.dimension_count = %d: GLM5-Next's latent attention has no RoPE (llama.cpp asserts 0)", hp.Arch, rot)
	case !glm5 && (rot <= 0 || rot%2 != 0 || rot >= dk):
		l.Failf("metadata %s.rope.dimension_count = %d: want even and below attention.key_length_mla = %d", hp.Arch, rot, dk)
	case vhead <= 0:
		l.Failf("metadata %s.attention.value_length_mla = %d", hp.Arch, vhead)
	}
	if dsa && !hyv4 && !glm5 && (idxDim&(idxDim-1) != 0 || idxDim < 64) {
		l.Failf("metadata %s.attention.indexer.key_length = %d: the indexer's Hadamard rotation needs a power of 2 of at least 64 (llama.cpp 0.7.0 asserts on narrower heads)", hp.Arch, idxDim)
	}
	if dsa && (qlora == 0 || idxDim < rot || hyv4 && idxDim == rot) { // hy_v4's: above it, as llama.cpp requires
		l.Failf("%s: attention.q_lora_rank %d and attention.indexer.key_length %d: the indexer needs a q_lora and keys of at least rope.dimension_count %d", hp.Arch, qlora, idxDim, rot)
	}
	if l.Err() != nil {
		return nil
	}
	nope, H := dk-rot, hp.Heads
	r := &nn.RoPE{FreqScale: 1, AttnFactor: 1} // glm5-next: none
	if !glm5 {
		if r = l.RoPE(false); r == nil {
			return nil
		}
	}
	if hp.Arch == "glm-dsa" { // it never reads yarn_log_multiplier
		lm = 0
	}
	attn, mscale := latentYaRN(r, lm, hp.Arch == "deepseek2")
	if dots3 || hyv4 || hp.Arch == "bailingmoe3" {
		// Their graphs turn q and k by the RoPE as it stands and scale
		// the scores by 1/sqrt(key_length_mla) whatever the scaling.
		attn, mscale = r.AttnFactor, 1
	}
	mrope := &nn.RoPE{HeadDim: rot, Dims: rot, Base: r.Base, FreqScale: r.FreqScale,
		ExtFactor: r.ExtFactor, AttnFactor: attn,
		BetaFast: r.BetaFast, BetaSlow: r.BetaSlow, OrigCtx: r.OrigCtx, FreqFactors: r.FreqFactors}
	d := &deepseek2{
		hp:         hp,
		tokenEmbd:  l.Linear("token_embd", hp.Embd, hp.Vocab),
		outputNorm: l.Norm("output_norm", hp.Embd),
		full: mlaGeom{kvr: kvr, nope: nope, vhead: vhead, rope: mrope,
			attn: ml.Attn{Heads: H, KVHeads: 1, HeadDim: kvr + rot, Scale: float64(mscale * mscale / float32(math.Sqrt(float64(dk))))}},
		rot:  rot,
		topK: topK, context: l.Opts.Context, idxHeads: idxHeads, idxDim: idxDim,
	}
	if hyv4 || k3 || glm5 { // llama.cpp reads no other
		d.head.Output = l.Linear("output", hp.Embd, hp.Vocab)
	} else {
		d.head.Output = l.LinearAlt(hp.Embd, hp.Vocab, "output", "token_embd")
	}
	var full []bool // DSA: the layers that run their indexer
	if dsa {
		d.idxRope = &nn.RoPE{HeadDim: idxDim, Dims: rot, NeoX: hp.Arch != "glm-dsa" && !hyv4, Base: r.Base, FreqScale: r.FreqScale,
			ExtFactor: r.ExtFactor, AttnFactor: attn, BetaFast: r.BetaFast, BetaSlow: r.BetaSlow, OrigCtx: r.OrigCtx}
		d.idxScale = float64(1 / float32(math.Sqrt(float64(idxDim*idxHeads))))
		d.idxRotate = !hyv4
		switch {
		case hyv4: // the RMS norms' epsilon, on the last rope.dimension_count elements
			d.idxEps, d.idxTail = hp.Eps, &nn.RoPE{HeadDim: rot, Dims: rot, Base: r.Base, FreqScale: r.FreqScale,
				ExtFactor: r.ExtFactor, AttnFactor: attn, BetaFast: r.BetaFast, BetaSlow: r.BetaSlow, OrigCtx: r.OrigCtx}
		case glm5: // no rotation; the k-pool's block and LayerNorm epsilon (0 when absent)
			d.idxRotate = false
			if d.kpool, d.idxEps = l.glm5Indexer(topK); d.kpool == 0 {
				return nil
			}
		case hp.Arch != "glm-dsa":
			d.idxEps = 1e-6
		}
		if full = l.indexerLayers(); full == nil {
			return nil
		}
	}
	var sliding []bool // dots3note's sliding layers, of geometry swa
	var swa *mlaGeom
	if dots3 {
		if swa, sliding = l.dots3Sliding(d, full); swa == nil {
			return nil
		}
	}
	opts := moeOpts{gating: ml.GateSoftmax}
	if k3 {
		opts.latent = "expert_latent_length"
	}
	if hp.Arch == "glm-dsa" || glm5 {
		opts.gating = ml.GateSigmoid
	}
	ling3 := hp.Arch == "bailingmoe3"
	kimi := hp.Arch == "kimi-linear" || ling3 || k3 || glm5
	if !dots3 && !hyv4 && !kimi { // the others' graphs have no temperature (probed)
		d.temp = l.attnTemp("attention.temperature_length", -1)
	}
	var kdaLayers []bool
	var kdaDim, dConv int
	var lowerBound float32             // bailingmoe3's safe gate
	var clampExp, clampShexp []float32 // bailingmoe3's SwiGLU limits per layer (hy_v4's experts')
	if kimi {
		if kdaLayers, kdaDim, dConv = l.kimiKDA(); kdaLayers == nil {
			return nil
		}
		d.noRoPE = !ling3
	}
	if d.noRoPE { // kimi-linear, kimi-k3: llama.cpp's score scale, whatever the RoPE's scaling (probed)
		d.full.attn.Scale = float64(1 / float32(math.Sqrt(float64(dk))))
	}
	if k3 {
		lowerBound = k3Bound
	}
	if glm5 {
		if lowerBound, err = l.kdaBound(); err != nil {
			l.fail(err)
			return nil
		}
	}
	if ling3 {
		if lowerBound = l.ling3Hparams(); lowerBound == 0 {
			return nil
		}
		if clampExp, err = step35Clamps(l, "swiglu_clamp_exp", hp.Layers); err == nil {
			clampShexp, err = step35Clamps(l, "swiglu_clamp_shexp", hp.Layers)
		}
		if err != nil {
			l.fail(err)
			return nil
		}
	}
	if ling3 || dots3 {
		d.full.headCols = spreadCols(H, vhead)
	}
	if hyv4 {
		if clampExp, err = step35Clamps(l, "swiglu_clamp_exp", hp.Layers); err != nil {
			l.fail(err)
			return nil
		}
	}
	if glm5 { // the shared expert's and the dense MLPs' too
		if clampExp, clampShexp, err = sharedClamps(l, hp.Layers); err != nil {
			l.fail(err)
			return nil
		}
	}
	moe := l.moeParams(opts)
	if moe == nil {
		return nil
	}
	if hp.Arch == "kimi-linear" { // llama.cpp renormalizes Kimi's weights whatever the file says
		moe.Norm = true
	}
	if dots3 || hyv4 || k3 || glm5 { // llama.cpp's shared experts: n_ff_exp · expert_shared_count, whatever else the file says
		moe.SharedFFN = moe.FFN * max(moe.Shared, 1)
	}
	d.hp = l.HP
	for i := range hp.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		g := &d.full
		if sliding != nil && sliding[i] {
			g = swa
		}
		kvr, nope, vhead := g.kvr, g.nope, g.vhead
		ly := mlaLayer{g: g, attnNorm: l.Norm(p+"attn_norm", hp.Embd)}
		if kimi && kdaLayers[i] {
			ly.kda = l.bindKDA(p, H, kdaDim, dConv, lowerBound)
		} else if qlora > 0 {
			ly.qa = l.Linear(p+"attn_q_a", hp.Embd, qlora)
			ly.qaNorm = l.Norm(p+"attn_q_a_norm", qlora)
			ly.qb = l.Linear(p+"attn_q_b", qlora, H*(nope+rot))
		} else {
			ly.q = l.Linear(p+"attn_q", hp.Embd, H*(nope+rot))
		}
		if ly.kda == nil {
			ly.kva = l.Linear(p+"attn_kv_a_mqa", hp.Embd, kvr+rot)
			ly.kvaNorm = l.Norm(p+"attn_kv_a_norm", kvr)
			if dots3 {
				ly.kNorm = l.Norm(p+"attn_k_norm", rot)
			}
			if k3 && l.Has(p+"attn_kv_b.weight") { // probed
				l.Failf("%s: tensor blk.%d.attn_kv_b: llama.cpp 0.7.0 runs kimi-k3's latent attention from attn_k_b and attn_v_b only (with attn_kv_b alone it crashes building its graph, beside them it refuses the file)", hp.Arch, i)
			}
			if l.Has(p+"attn_k_b.weight") || !l.Has(p+"attn_kv_b.weight") || glm5 { // glm5-next's only
				ly.kb = l.Experts(p+"attn_k_b", H, nope, kvr)
				ly.vb = l.Experts(p+"attn_v_b", H, kvr, vhead)
			} else {
				ly.kb, ly.vb = l.absorbKVB(p+"attn_kv_b", H, kvr, nope, vhead)
			}
			ly.o = l.Linear(p+"attn_output", H*vhead, hp.Embd)
			if g.headCols != nil {
				ly.gate = l.Linear(p+"attn_gate", hp.Embd, H)
			}
			if hyv4 {
				ly.sinks = l.Vector(p+"attn_sinks.weight", H)
			}
			if hyv4 || k3 && l.Has(p+"attn_gate.weight") {
				ly.gate = l.Linear(p+"attn_gate", hp.Embd, H*vhead)
			}
		}
		if (ling3 || dots3 || k3 || glm5) && i >= moe.DenseLayers && !l.Has(p+"exp_probs_b.bias") {
			l.Failf("missing tensor %sexp_probs_b.bias (%s's selection bias, which llama.cpp requires)", p, hp.Arch)
		}
		ly.ffnNorm = l.Norm(p+"ffn_norm", hp.Embd)
		switch {
		case ly.kda != nil: // no attention
		case dsa && full[i] && (hp.Arch != "glm-dsa" || l.Has("blk.0.indexer.proj.weight")):
			ly.idx = &indexer{
				qb:    l.Linear(p+"indexer.attn_q_b", qlora, idxHeads*idxDim),
				k:     l.Linear(p+"indexer.attn_k", hp.Embd, idxDim),
				kNorm: l.Norm(p+"indexer.k_norm", idxDim),
				kBias: l.Vector(p+"indexer.k_norm.bias", idxDim),
				proj:  l.Linear(p+"indexer.proj", hp.Embd, idxHeads),
			}
			if glm5 {
				ly.idx.gate = l.Linear(p+"indexer_compressor_gate", hp.Embd, idxDim)
				ly.idx.ape = l.tensorVector(p+"indexer_compressor_ape.weight", idxDim, d.kpool)
			}
		case dsa:
			l.pass(p+"indexer.", p+"indexer_compressor_gate.weight", p+"indexer_compressor_ape.weight") // a layer reusing the previous one's keys: llama.cpp loads and leaves its indexer
		}
		switch {
		case i < moe.DenseLayers:
			ly.ffn = l.DenseFFN(p, hp.Embd, hp.FFN)
		case k3 && !l.Has(p+"ffn_gate_shexp.weight"): // llama.cpp runs the shared expert when the file has one
			noShared := *moe
			noShared.Shared = 0
			ly.ffn = l.MoE(p, &noShared)
		default:
			ly.ffn = l.MoE(p, moe)
		}
		if k3 && ly.ffn != nil {
			situFFN(ly.ffn, situ)
		}
		if ling3 && ly.ffn != nil {
			clampFFN(ly.ffn, ml.ClampSwiGLU, clampExp[i], clampShexp[i])
		}
		if e, ok := ly.ffn.(*MoE); ok && hyv4 { // the routed experts' only, ggml's SWIGLU_CLAMP
			clampGLU(&e.Experts, ml.SwiGLUClampIn, clampExp[i])
		}
		if glm5 && ly.ffn != nil { // every SwiGLU, ggml's SWIGLU_CLAMP
			clampFFN(ly.ffn, ml.SwiGLUClampIn, clampExp[i], clampShexp[i])
		}
		d.layers = append(d.layers, ly)
	}
	switch {
	case k3:
		return l.bindAttnRes(kimiLinear{d}, resBlock)
	case glm5:
		return l.bindMHC(d)
	case kimi:
		return kimiLinear{d}
	case hyv4:
		return l.bindHC(d)
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

// sparseBackend returns b's sparse attention for a window of n tokens past
// top_k, or why it cannot run: a backend without ml.Sparse, or a file
// without the indexer.
func (d *deepseek2) sparseBackend(b ml.Backend, n int) (ml.Sparse, error) {
	sb, ok := b.(ml.Sparse)
	if !ok {
		return nil, fmt.Errorf("%s: a window of %d tokens, past the lightning indexer's top_k %d, needs its sparse attention, which the %T backend lacks (ml.Sparse); windows of at most %d tokens run on it", d.hp.Arch, n, d.topK, b, d.topK)
	}
	if _, ok := b.(ml.PooledSparse); d.kpool > 0 && !ok {
		return nil, fmt.Errorf("%s: a window of %d tokens, past the k-pool indexer's reach %d, needs its pooled keys, which the %T backend lacks (ml.PooledSparse); windows of at most %d tokens run on it", d.hp.Arch, n, d.topK+d.kpool-1, b, d.topK+d.kpool-1)
	}
	if len(d.layers) > 0 && d.layers[0].idx == nil && d.kpool == 0 {
		return nil, fmt.Errorf("%s: a window of %d tokens, past the lightning indexer's top_k %d, needs the indexer, which the file lacks (blk.0.indexer.*)", d.hp.Arch, n, d.topK)
	}
	return sb, nil
}

// indexKeys runs a layer's lightning indexer over the layer's input h and
// normed q_lora qa: the keys each query row reads.
func (d *deepseek2) indexKeys(b ml.Backend, sb ml.Sparse, x *indexer, h, qa ml.Tensor) ml.KeySet {
	n, IH, ID := h.Rows(), d.idxHeads, d.idxDim
	q := b.Alloc(n, IH*ID)
	b.Linear(q, qa, x.qb)
	k := b.Alloc(n, ID)
	b.Linear(k, h, x.k)
	sb.LayerNorm(k, k, x.kNorm, x.kBias, d.idxEps)
	w := b.Alloc(n, IH)
	b.Linear(w, h, x.proj)
	b.Scale(w, d.idxScale)
	if d.kpool > 0 { // glm5-next: blocks of kpool keys, pooled by their gates; no RoPE
		ps := b.(ml.PooledSparse)
		g, p := b.Alloc(n, ID), b.Alloc(n, ID)
		b.Linear(g, h, x.gate)
		ps.PoolKeys(p, k, g, x.ape, d.kpool)
		return ps.PooledKeys(q, p, w, IH, d.kpool, d.topK)
	}
	d.idxTurn(b, q, IH)
	d.idxTurn(b, k, 1)
	return sb.IndexKeys(q, k, w, IH, d.topK, d.idxRotate)
}

// idxTurn rotates the indexer's heads in x (n, heads·dim) in place: their
// first qk_rope elements, or with idxTail their last.
func (d *deepseek2) idxTurn(b ml.Backend, x ml.Tensor, heads int) {
	if d.idxTail == nil {
		b.RoPE(x, heads, d.idxRope)
		return
	}
	ropeTail(b, x, heads, d.idxDim, d.idxTail)
}

// ropeTail turns by r (of HeadDim r.Dims) the last r.Dims elements of each
// of the heads (of dim) of x (n, heads·dim), in place.
func ropeTail(b ml.Backend, x ml.Tensor, heads, dim int, r *nn.RoPE) {
	lb, n, rot := b.(ml.Latent), x.Rows(), r.Dims
	xh, tail := b.View(x, n*heads, dim), b.Alloc(n*heads, rot)
	lb.Columns(tail, 0, xh, dim-rot, rot)
	b.RoPE(b.View(tail, n, heads*rot), heads, r)
	lb.Columns(xh, dim-rot, tail, 0, rot)
}

// indexerLayers reads which layers run their lightning indexer (glm-dsa's
// and hy_v4's attention.indexer.types: 1 a layer's own, 0 the previous
// layer's keys, required in hy_v4; dots3note's, required: 1 in its full
// layers); nil after an error.
func (l *Loader) indexerLayers() []bool {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	full := make([]bool, hp.Layers)
	for i := range full {
		// GLM-5.2 (a training context of 2^20 and more) without the key:
		// its own layers 0, 1 and every fourth from 2.
		full[i] = hp.Arch == "deepseek32" || hp.Arch == "glm5-next" || hp.CtxTrain < 1<<20 || i < 2 || (i-2)%4 == 0
	}
	if err := m.require("attention.indexer.types"); (hp.Arch == "dots3note" || hp.Arch == "hy_v4") && err != nil {
		// hy_v4 without it: llama.cpp finds no indexer in layer 0 and refuses the file
		l.fail(err)
		return nil
	}
	if key := hp.Arch + ".attention.indexer.types"; hp.Arch != "deepseek32" && m.has("attention.indexer.types") {
		types, err := l.f.Int32s(key)
		if err == nil && len(types) < hp.Layers {
			err = fmt.Errorf("metadata %s has %d values for %d layers", key, len(types), hp.Layers)
		}
		if err != nil {
			l.fail(err)
			return nil
		}
		for i := range full {
			full[i] = types[i] != 0
		}
	}
	if !full[0] && (hp.Arch == "glm-dsa" || hp.Arch == "hy_v4") {
		l.Failf("metadata %s.attention.indexer.types: layer 0 must run its indexer", hp.Arch)
		return nil
	}
	return full
}

// Check requires the latent attention operations (and ml.Recurrent's
// GatherCols for a gate per head), and for a context past DSA's top_k its
// sparse attention and indexer.
func (d *deepseek2) Check(b ml.Backend) error {
	if _, ok := b.(ml.Latent); !ok {
		return fmt.Errorf("deepseek2: the %T backend lacks the latent attention operations (ml.Latent: Columns, HeadLinear, LatentAttention)", b)
	}
	if _, ok := b.(ml.Recurrent); !ok && d.full.headCols != nil {
		return fmt.Errorf("%s: the %T backend lacks ml.Recurrent's GatherCols (the attention's gate per head)", d.hp.Arch, b)
	}
	if d.topK > 0 && d.context > d.reach() { // refused now rather than at the first long window
		_, err := d.sparseBackend(b, d.context)
		return err
	}
	return nil
}

func (d *deepseek2) Forward(b ml.Backend, tokens []int32) ml.Tensor {
	hp, n := d.hp, len(tokens)
	sb, err := d.sparse(b, n)
	if err != nil {
		b.Fail(err)
		return b.Alloc(n, hp.Embd)
	}
	var keys ml.KeySet       // the keys the last indexer chose
	x := b.Alloc(n, hp.Embd) // the residual stream
	b.Embed(x, d.tokenEmbd, tokens)
	for i := range d.layers {
		ly := &d.layers[i]
		mark := b.Mark()
		h := b.Alloc(n, hp.Embd)
		b.RMSNorm(h, x, ly.attnNorm, hp.Eps)
		if ly.kda != nil {
			mix := b.Alloc(n, hp.Embd)
			ly.kda.forward(b, mix, h)
			b.Add(x, mix)
		} else {
			b.Add(x, d.attend(b, sb, &keys, i, h))
		}
		d.ffn(b, x, h, ly)
		b.Release(mark)
	}
	b.RMSNorm(x, x, d.outputNorm, hp.Eps)
	return x
}

// reach is the longest window the indexer lets read every key: top_k, or
// with blocks of kpool the top_k/kpool blocks and kpool - 1 keys after them.
func (d *deepseek2) reach() int {
	if d.kpool > 0 {
		return d.topK + d.kpool - 1
	}
	return d.topK
}

// sparse returns b's sparse attention when a window of n tokens is past
// top_k (nil when dense), or why it cannot run.
func (d *deepseek2) sparse(b ml.Backend, n int) (ml.Sparse, error) {
	if d.topK > 0 && n > d.reach() {
		return d.sparseBackend(b, n)
	}
	return nil, nil
}

// attend runs layer i's latent attention over its normed input h (n,
// embd) and returns attn_output's rows; past top_k (sb not nil) a layer
// with an indexer chooses *keys, which the layers without one reuse.
func (d *deepseek2) attend(b ml.Backend, sb ml.Sparse, keys *ml.KeySet, i int, h ml.Tensor) ml.Tensor {
	lb := b.(ml.Latent)
	ly := &d.layers[i]
	g := ly.g
	n, H, rot := h.Rows(), d.hp.Heads, d.rot
	kvr, nope := g.kvr, g.nope
	dk, kd := nope+rot, kvr+rot
	sliding := g.attn.Window > 0 // dots3note: no indexer, the last Window keys

	q := b.Alloc(n, H*dk)
	if ly.q != nil {
		b.Linear(q, h, ly.q)
	} else {
		qa := b.Alloc(n, ly.qa.Out)
		b.Linear(qa, h, ly.qa)
		b.RMSNorm(qa, qa, ly.qaNorm, d.hp.Eps)
		b.Linear(q, qa, ly.qb)
		if sb != nil && ly.idx != nil && !sliding {
			*keys = d.indexKeys(b, sb, ly.idx, h, qa)
		}
	}
	qh := b.View(q, n*H, dk)
	qn, qpe := qh, ml.Tensor(nil)
	if rot > 0 {
		qn, qpe = b.Alloc(n*H, nope), b.Alloc(n*H, rot)
		lb.Columns(qn, 0, qh, 0, nope)
		lb.Columns(qpe, 0, qh, nope, rot)
	}
	if !d.noRoPE {
		b.RoPE(b.View(qpe, n, H*rot), H, g.rope)
	}

	// The key [c | k_pe], c normed and k_pe (normed in dots3note) rotated in place.
	k := b.Alloc(n, kd)
	b.Linear(k, h, ly.kva)
	if rot == 0 { // glm5-next: the key is c
		b.RMSNorm(k, k, ly.kvaNorm, d.hp.Eps)
	} else {
		c := b.Alloc(n, kvr)
		lb.Columns(c, 0, k, 0, kvr)
		b.RMSNorm(c, c, ly.kvaNorm, d.hp.Eps)
		lb.Columns(k, 0, c, 0, kvr)
	}
	if !d.noRoPE {
		kpe := b.Alloc(n, rot)
		lb.Columns(kpe, 0, k, kvr, rot)
		if ly.kNorm != nil {
			b.RMSNorm(kpe, kpe, ly.kNorm, d.hp.Eps)
		}
		b.RoPE(kpe, 1, g.rope)
		lb.Columns(k, kvr, kpe, 0, rot)
	}

	// The query [attn_k_b·q_nope | q_pe] per head.
	qabs := b.Alloc(n, H*kvr)
	lb.HeadLinear(qabs, b.View(qn, n, H*nope), ly.kb)
	qk := b.View(qabs, n*H, kvr)
	if rot > 0 {
		qk = b.Alloc(n*H, kd)
		lb.Columns(qk, 0, b.View(qabs, n*H, kvr), 0, kvr)
		lb.Columns(qk, kvr, qpe, 0, rot)
	}
	d.temp.apply(b, b.View(qk, n, H*kd))

	lat := b.Alloc(n, H*kvr)
	at := g.attn
	at.Sinks = ly.sinks
	if !sliding {
		at.Keys = *keys
	}
	lb.LatentAttention(lat, b.View(qk, n, H*kd), k, i, &at, kvr)
	att := b.Alloc(n, H*g.vhead)
	lb.HeadLinear(att, lat, ly.vb)
	if ly.gate != nil { // sigmoid(attn_gate·h), one value per head or per element, on the heads' outputs
		gate := b.Alloc(n, ly.gate.Out)
		b.Linear(gate, h, ly.gate)
		if g.headCols != nil {
			wide := b.Alloc(n, H*g.vhead)
			b.(ml.Recurrent).GatherCols(wide, gate, g.headCols)
			gate = wide
		}
		b.GateMul(att, gate, ml.SigmoidGate)
	}
	out := b.Alloc(n, d.hp.Embd)
	b.Linear(out, att, ly.o)
	return out
}

// ffn adds layer ly's FFN of the normed x to x (h scratch of x's shape).
func (d *deepseek2) ffn(b ml.Backend, x, h ml.Tensor, ly *mlaLayer) {
	ff := b.Alloc(x.Rows(), d.hp.Embd)
	b.RMSNorm(h, x, ly.ffnNorm, d.hp.Eps)
	ly.ffn.Forward(b, ff, h)
	b.Add(x, ff)
}

// latentYaRN is how llama.cpp 0.7.0's deepseek2 graph takes the RoPE
// scaling of r, with yarn_log_multiplier lm (the file's, a tenth of what
// llama.cpp's hparams hold): the attention factor it turns q and k by, and
// mscale, whose square multiplies the score scale. Under YaRN with lm ≠ 0
// its context hands the graph a = get_mscale(f, 1)/get_mscale(f, 10·lm)
// (1 for deepseek2 itself, which llama.cpp special-cases), get_mscale(f,
// x) = 1 + 0.1·x·ln f, times attn_factor/(1 + 0.1·ln f), which cancels the
// magnitude YaRN multiplies cos and sin by, and mscale = a·attn_factor·(1 +
// lm·ln f). Otherwise cos and sin keep YaRN's magnitude and mscale =
// attn_factor·(1 + 0.1·ln f), times (1 + lm·ln f) under linear scaling
// with lm ≠ 0. mscale in float32 as llama.cpp computes it (glibc's logf):
// float64 would put the score scale an ulp away, which the int8 modes'
// attention carries into the log-probs.
func latentYaRN(r *nn.RoPE, lm float64, deepseek2 bool) (attn float64, mscale float32) {
	lnf, mag := nn.LibcLogf(1/float32(r.FreqScale)), nn.YaRNMagnitude(float32(r.FreqScale))
	switch {
	case lm != 0 && r.ExtFactor != 0 && deepseek2:
		return r.AttnFactor / (1 + float64(0.1*math.Log(1/r.FreqScale))), float32(r.AttnFactor) * (1 + float32(float32(lm)*lnf))
	case lm != 0 && r.ExtFactor != 0:
		attn := yarnAttnFactor(r.FreqScale, 10*lm, r.AttnFactor)
		return float64(attn), attn * mag * (1 + float32(float32(lm)*lnf))
	case lm != 0:
		return r.AttnFactor, float32(r.AttnFactor) * mag * (1 + float32(float32(lm)*lnf))
	}
	return r.AttnFactor, float32(r.AttnFactor) * mag
}
