package model

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"ppl.dev/gguf"
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// The architectures that are llama's decoder with a few of its options
// set (decoder's fields and decoderLayer's) register here: granite,
// smollm3, olmo2, seed_oss, exaone4, minimax-m2, ernie4_5-moe, dots1,
// llama4, ernie4_5, exaone, hunyuan-dense, arcee and apertus.
func init() {
	// ernie4_5 (ERNIE-4.5-0.3B) is llama as llama.cpp runs it, which
	// loads attn_output's bias and leaves it unapplied (probed); exaone
	// (EXAONE 3.0, 3.5) is llama with NeoX RoPE (q/k/v and output biases
	// where the file has them, rope_freqs as llama's).
	Register("ernie4_5", func(l *Loader) Network { return l.unbiasedOutputs(newDecoder(l, decoderOpts{}), false) })
	// internlm2 (InternLM2, 2.5), xverse (XVERSE) and nanbeige (Nanbeige)
	// are llama as llama.cpp runs them (the converter splits InternLM2's
	// wqkv into attn_q, attn_k and attn_v).
	for _, a := range []string{"internlm2", "xverse", "nanbeige"} {
		Register(a, func(l *Loader) Network { return newDecoder(l, decoderOpts{}) })
	}
	Register("minicpm", newMiniCPM)
	Register("deci", newDeci)
	Register("openelm", newOpenELM)
	Register("qwen", newQwen)
	Register("orion", newOrion)
	Register("stablelm", newStableLM)
	Register("chameleon", newChameleon)
	Register("starcoder2", newStarCoder2)
	Register("phi2", newPhi2)
	Register("gptneox", newGPTNeoX)
	Register("falcon", newFalcon)
	Register("gpt2", newGPT2)
	Register("nemotron", newNemotron)
	Register("jais2", newJais2)
	Register("maincoder", newMaincoder)
	Register("pangu-embedded", newPanguEmbedded)
	Register("olmo", newOLMo)
	Register("dbrx", newDBRX)
	Register("bailingmoe", newBailingMoE)
	Register("granite_swa", newGraniteSWA)
	Register("mellum", newMellum)
	Register("baichuan", newBaichuan)
	Register("codeshell", newCodeShell)
	Register("starcoder", newGPT2) // StarCoder, SantaCoder: GPT-2's block, multi-query
	Register("exaone", func(l *Loader) Network { return newDecoder(l, decoderOpts{neox: true}) })
	Register("hunyuan-dense", newHunyuanDense)
	Register("hunyuan_vl", newHunyuanVL)
	Register("arcee", newArcee)
	Register("apertus", newApertus)
	Register("llama4", newLlama4)
	Register("granite", newGranite)
	Register("smollm3", newSmolLM3)
	Register("olmo2", newOLMo2)
	Register("seed_oss", newSeedOSS)
	Register("exaone4", newEXAONE4)
	Register("minimax-m2", newMiniMaxM2)
	Register("ernie4_5-moe", newERNIE45MoE)
	Register("dots1", newDots1)
	Register("minimax-m3", newMiniMaxM3)
	Register("hy_v3", newHYV3)
	Register("maple", newMaple)
}

// granite and granitemoe: IBM's Granite 3.x models, dense and mixtures of
// experts, as llama.cpp 0.7.0 runs them: llama's decoder (adjacent-pair
// RoPE, none when rope.scaling.finetuned is false) whose FFN, when the
// file has expert_count, is softmax-routed experts of feed_forward_length,
// renormalized, with a shared expert where the file has one
// (expert_shared_feed_forward_length); four multipliers from the
// metadata, each a float32 product where llama.cpp scales:
//   - embedding_scale on the token embeddings;
//   - attention.scale as the attention's score scale, instead of
//     1/sqrt(head);
//   - residual_scale on each attention and FFN output before it joins the
//     residual stream;
//   - the logits multiplied by float32(1/logit_scale).
func newGranite(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	var o decoderOpts
	n, err := m.int("expert_count", 0)
	rope := true
	if err == nil {
		rope, err = m.bool("rope.scaling.finetuned", true)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	if n > 0 {
		o.moe = &moeOpts{gating: ml.GateSoftmax, norm: true, ffn: hp.FFN}
	}
	d := newDecoder(l, o)
	if l.Err() != nil {
		return nil
	}
	if !l.graniteScales(d, graniteDefaults{}) {
		return nil
	}
	for i := range d.layers {
		d.layers[i].noRoPE = !rope
	}
	return d
}

// minicpm: MiniCPM (1, 2, 4), as llama.cpp 0.7.0 runs it: granite's
// decoder and multipliers (graniteScales), whose defaults for files
// without the keys are MiniCPM's: embedding_scale 12, residual_scale
// 1.4/sqrt(block_count), logit_scale 256/n_embd (float32, as llama.cpp
// computes them); attention.scale is not read, as llama.cpp 0.7.0 reads
// it for the granite family alone. llama.cpp 0.7.0 reads no LongRoPE
// factors for minicpm and refuses a file that has them; so does ppl.
func newMiniCPM(l *Loader) Network {
	for _, n := range []string{"rope_factors_long", "rope_factors_short"} {
		if l.Has(n + ".weight") {
			l.Failf("tensor %s.weight: LongRoPE factors in a minicpm file, which llama.cpp 0.7.0 does not read (it refuses the file)", n)
			return nil
		}
	}
	d := newDecoder(l, decoderOpts{})
	if l.Err() != nil {
		return nil
	}
	hp := l.HP
	def := graniteDefaults{
		emb:   12,
		res:   float64(float32(1.4) / float32(math.Sqrt(float64(float32(hp.Layers))))),
		logit: float64(256 / float32(hp.Embd)),

		noAttnScale: true,
	}
	if !l.graniteScales(d, def) {
		return nil
	}
	return d
}

// deci: NVIDIA's Llama-Nemotron models found by architecture search
// (Llama-3.1-Nemotron-51B, Llama-3.3-Nemotron-Super-49B,
// Llama-3.1-Nemotron-Ultra-253B), as llama.cpp 0.7.0 runs them: llama's
// layer (adjacent-pair RoPE, rope_freqs when present) with per-layer
// attention.head_count, head_count_kv and feed_forward_length:
//   - head_count 0: no attention, the MLP alone;
//   - head_count_kv 0 (head_count not): "linear attention", attn_output
//     applied to the normed rows and added to the residual stream;
//   - feed_forward_length 0: llama.cpp skips the layer whole, its
//     attention's output included (llm_build_deci's "continue" before the
//     residual add); so does ppl, to give llama.cpp's number.
func newDeci(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	heads, err := m.layerInts("attention.head_count", hp.Layers, -1)
	kv := heads
	if err == nil && m.has("attention.head_count_kv") {
		kv, err = m.layerInts("attention.head_count_kv", hp.Layers, -1)
	}
	var ffn []int
	if err == nil {
		ffn, err = m.layerInts("feed_forward_length", hp.Layers, -1)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	d := l.baseDecoder(false)
	E, hd := hp.Embd, hp.HeadDim
	return l.bindLayers(d, func(i int, p string) decoderLayer {
		var ly decoderLayer
		switch {
		case ffn[i] == 0:
			l.pass(p)
			return ly
		case heads[i] == 0:
		case kv[i] == 0:
			ly.attnNorm = l.Norm(p+"attn_norm", E)
			ly.mixer = linearMixer{l.unbiased(l.Linear(p+"attn_output", E, E))} // llama.cpp leaves its bias unapplied here (probed)
		default:
			a := l.layerAttn(d, i, heads[i], kv[i])
			if a == nil {
				return ly
			}
			ly = decoderLayer{
				attnNorm: l.Norm(p+"attn_norm", E),
				q:        l.Linear(p+"attn_q", E, a.Heads*hd),
				k:        l.Linear(p+"attn_k", E, a.KVHeads*hd),
				v:        l.Linear(p+"attn_v", E, a.KVHeads*hd),
				o:        l.Linear(p+"attn_output", a.Heads*hd, E),
				attn:     a,
			}
		}
		ly.ffnNorm = l.Norm(p+"ffn_norm", E)
		ly.ffn = l.DenseFFN(p, E, ffn[i])
		return ly
	})
}

// qwen: Qwen (the first: 1.8B, 7B, 14B, 72B), as llama.cpp 0.7.0 runs it:
// llama's block with NeoX RoPE and q, k and v in attn_qkv with its bias
// (required); llama.cpp cuts the fused rows at multiples of the model's
// width, so a file whose q or KV heads do not fill it is refused; the MLP
// half of feed_forward_length wide (Qwen's intermediate_size counts both
// of its halves); the output matrix required.
func newQwen(l *Loader) Network {
	hp := l.HP
	if !l.widthThirds() {
		return nil
	}
	if hp.FFN%2 != 0 {
		l.Failf("metadata %s.feed_forward_length = %d: want an even number (the MLP is half of it)", hp.Arch, hp.FFN)
		return nil
	}
	return l.bindLayers(l.baseDecoder(true), func(_ int, p string) decoderLayer {
		ly := l.qkvAttn(p)
		l.needBias(ly.q, ly.k, ly.v)
		ly.ffnNorm, ly.ffn = l.Norm(p+"ffn_norm", hp.Embd), l.DenseFFN(p, hp.Embd, hp.FFN/2)
		return ly
	})
}

// widthThirds reports whether q, k and v fill attn_qkv's rows as
// llama.cpp's views of width-sized thirds read them (qwen, cogvlm): as
// many KV heads as heads, filling the width; it fails l otherwise.
func (l *Loader) widthThirds() bool {
	hp := l.HP
	if hp.Heads*hp.HeadDim == hp.Embd && hp.KVHeads == hp.Heads {
		return true
	}
	l.Failf("%s: %d heads and %d KV heads of %d for a width of %d: llama.cpp's %s reads q, k and v as width-sized thirds of attn_qkv", hp.Arch, hp.Heads, hp.KVHeads, hp.HeadDim, hp.Embd, hp.Arch)
	return false
}

// openelm: Apple's OpenELM (270M to 3B), as llama.cpp 0.7.0 runs it:
// llama's block whose head counts and MLP widths are per layer (arrays of
// attention.head_count, head_count_kv and feed_forward_length); q, k and v
// fused in attn_qkv, q and k RMS-normed per head before NeoX RoPE; the
// output the token embedding (llama.cpp reads no output matrix and refuses
// a file with one, and so does ppl).
func newOpenELM(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	heads, kv, err := m.layerHeads(hp.Layers)
	var ffn []int
	if err == nil {
		ffn, err = m.layerInts("feed_forward_length", hp.Layers, -1)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	if l.Has("output.weight") {
		l.Failf("tensor output.weight: llama.cpp's openelm reads the token embedding as its output, and no output matrix")
		return nil
	}
	d := l.baseDecoder(true)
	E, hd := hp.Embd, hp.HeadDim
	return l.bindLayers(d, func(i int, p string) decoderLayer {
		a := l.layerAttn(d, i, heads[i], kv[i])
		if a == nil {
			return decoderLayer{}
		}
		ly := decoderLayer{attnNorm: l.Norm(p+"attn_norm", E), ffnNorm: l.Norm(p+"ffn_norm", E), o: l.Linear(p+"attn_output", a.Heads*hd, E), attn: a}
		if qkv := l.LinearRows(p+"attn_qkv", E, a.Heads*hd, a.KVHeads*hd, a.KVHeads*hd); qkv != nil {
			ly.q, ly.k, ly.v = qkv[0], qkv[1], qkv[2]
		}
		ly.qNorm, ly.kNorm = l.qkNorms(p, false)
		ly.ffn = l.DenseFFN(p, E, ffn[i])
		return ly
	})
}

// layerAttn is d's attention with layer i's head counts (the per-layer
// arrays of deci, openelm and mimo2), or nil after recording why they do
// not group.
func (l *Loader) layerAttn(d *decoder, i, heads, kv int) *ml.Attn {
	a := d.attn
	a.Heads, a.KVHeads = heads, kv
	if err := a.Validate(); err != nil {
		l.Failf("layer %d: %v", i, err)
		return nil
	}
	return &a
}

// orion: OrionStar's Orion-14B, as llama.cpp 0.7.0 runs it: llama's
// decoder with NeoX RoPE and LayerNorms (weight and bias, epsilon
// attention.layer_norm_epsilon, required) where llama has RMS norms.
func newOrion(l *Loader) Network {
	hp := l.HP
	eps := l.layerNormEps()
	if eps == 0 {
		return nil
	}
	d := newDecoder(l, decoderOpts{neox: true})
	d.layerNorm = eps
	d.outNormB = l.Vector("output_norm.bias", hp.Embd)
	for i := range d.layers {
		p := fmt.Sprintf("blk.%d.", i)
		d.layers[i].attnNormB = l.Vector(p+"attn_norm.bias", hp.Embd)
		d.layers[i].ffnNormB = l.Vector(p+"ffn_norm.bias", hp.Embd)
	}
	if l.Err() != nil {
		return nil
	}
	return lnDecoder{d}
}

// layerNormEps reads attention.layer_norm_epsilon, required and positive;
// 0 after an error.
func (l *Loader) layerNormEps() float64 {
	m := meta{l.f, l.HP.Arch}
	err := m.require("attention.layer_norm_epsilon")
	eps := 0.0
	if err == nil {
		eps, err = m.float("attention.layer_norm_epsilon", 0)
	}
	if err == nil && !(eps > 0) {
		err = fmt.Errorf("metadata %s.attention.layer_norm_epsilon = %v, want > 0", l.HP.Arch, eps)
	}
	if err != nil {
		l.fail(err)
		return 0
	}
	return eps
}

// stablelm: Stability's StableLM (2 1.6B, 2 12B, StableLM 3B, StableCode),
// as llama.cpp 0.7.0 runs it: orion's LayerNorms with biases and NeoX RoPE
// over rope.dimension_count of each head, q/k/v biases where the file has
// them, the output matrix required; StableLM 2 12B's per-head q and k
// LayerNorms (attn_q_norm, attn_k_norm: weights of every head, no bias)
// and its parallel residual, where a layer without ffn_norm feeds its FFN
// the attention's normed rows.
func newStableLM(l *Loader) Network {
	hp := l.HP
	eps := l.layerNormEps()
	if eps == 0 {
		return nil
	}
	d := l.baseDecoder(true)
	d.layerNorm = eps
	d.outNormB = l.Vector("output_norm.bias", hp.Embd)
	if l.Has("blk.0.attn_q_norm.weight") {
		d.qkLayerNorm = eps
	}
	net := l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := l.attnLayer(p)
		ly.attnNormB = l.Vector(p+"attn_norm.bias", hp.Embd)
		if d.qkLayerNorm != 0 {
			ly.qNorm, ly.kNorm = l.headNorms(p+"attn_q_norm", hp.Heads), l.headNorms(p+"attn_k_norm", hp.KVHeads)
		}
		if l.Has(p + "ffn_norm.weight") {
			ly.ffnNorm, ly.ffnNormB = l.Norm(p+"ffn_norm", hp.Embd), l.optVector(p+"ffn_norm.bias", hp.Embd)
		} else {
			ly.parallel = parallelAfter
		}
		ly.ffn = l.DenseFFN(p, hp.Embd, hp.FFN)
		return ly
	})
	return lnNetwork(net, d)
}

// starcoder2: BigCode's StarCoder2 (3B, 7B, 15B), as llama.cpp 0.7.0 runs
// it: orion's LayerNorms with biases and NeoX RoPE over the whole head;
// q, k and v with their biases where the file has them, attn_output's
// bias required; an ungated MLP, ffn_down·gelu(ffn_up·h + b) + b, both
// biases required (ml.GELU, the tanh form: ggml's float16 table in the
// int8 modes); the output matrix, or the token embedding without one.
func newStarCoder2(l *Loader) Network {
	eps := l.layerNormEps()
	if eps == 0 {
		return nil
	}
	d := l.baseDecoder(true)
	return l.lnLayers(ml.GELU, true, d, eps, func(p string) decoderLayer {
		ly := l.preNormLayer(p, "ffn_norm")
		ly.ffnNormB = l.Vector(p+"ffn_norm.bias", l.HP.Embd)
		return ly
	})
}

// codeshell: WisdomShell's CodeShell-7B, as llama.cpp 0.7.0 runs it:
// starcoder2's block with q, k and v in attn_qkv (or apart), their biases
// where the file has them; the output matrix required.
func newCodeShell(l *Loader) Network {
	eps := l.layerNormEps()
	if eps == 0 {
		return nil
	}
	return l.lnLayers(ml.GELU, true, l.baseDecoder(true), eps, l.qkvLayer)
}

// phi2: Microsoft's Phi-2 (and Phi-1, 1.5), as llama.cpp 0.7.0 runs it:
// starcoder2's LayerNorms, biases and ungated GELU MLP in a parallel
// block, x + (attention + MLP) on the same normed rows (attn_norm alone);
// q, k and v fused in attn_qkv or apart; NeoX RoPE over
// rope.dimension_count of each head (Phi-2 turns 32 of 80), q scaled by
// float32(1/sqrt(head)) after RoPE and the scores taken unscaled (phi3's
// decoder); the output matrix (required) with its bias (required).
func newPhi2(l *Loader) Network {
	eps := l.layerNormEps()
	if eps == 0 {
		return nil
	}
	d := l.phi3Decoder()
	l.needBias(d.head.Output)
	return l.lnLayers(ml.GELU, true, d, eps, func(p string) decoderLayer {
		ly := l.qkvAttn(p)
		ly.parallel = parallelSum
		return ly
	})
}

// gptneox: EleutherAI's GPT-NeoX-20B and Pythia, as llama.cpp 0.7.0 runs
// them: starcoder2's LayerNorms, biases and ungated GELU MLP; q, k and v
// in attn_qkv (or apart), their biases required; NeoX RoPE over
// rope.dimension_count of each head (Pythia turns a quarter); with
// use_parallel_residual (required; true in GPT-NeoX-20B and Pythia) the
// FFN reads x normed by ffn_norm beside the attention, (x + FFN) +
// attention, else the serial block; the output matrix required.
func newGPTNeoX(l *Loader) Network {
	hp := l.HP
	eps := l.layerNormEps()
	if eps == 0 {
		return nil
	}
	m := meta{l.f, hp.Arch}
	err := m.require("use_parallel_residual")
	par := false
	if err == nil {
		par, err = m.bool("use_parallel_residual", false)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	return l.lnLayers(ml.GELU, true, l.baseDecoder(true), eps, func(p string) decoderLayer {
		ly := l.biasedQKVLayer(p)
		if par {
			ly.parallel = parallelFFNFirst
		}
		return ly
	})
}

// falcon: TII's Falcon (7B, 40B, 180B, RW), as llama.cpp 0.7.0 runs it: a
// parallel block, x + (attention + MLP), the attention and an ungated
// GELU MLP without biases reading the same LayerNormed rows (attn_norm
// with its bias), or in Falcon-40B's layout (attn_norm_2, its bias
// optional) the attention reading attn_norm_2's rows and the MLP
// attn_norm's; q, k and v fused in attn_qkv (one KV head in 7B); NeoX
// RoPE over the whole head; the output matrix, or the token embedding.
func newFalcon(l *Loader) Network {
	hp := l.HP
	eps := l.layerNormEps()
	if eps == 0 {
		return nil
	}
	d := l.baseDecoder(true)
	d.layerNorm = eps
	d.outNormB = l.Vector("output_norm.bias", hp.Embd)
	net := l.bindLayers(d, func(_ int, p string) decoderLayer {
		ly := l.qkvAttn(p)
		ly.attnNormB, ly.parallel = l.Vector(p+"attn_norm.bias", hp.Embd), parallelSum
		ly.ffn = &Dense{ml.MLP{Up: l.Linear(p+"ffn_up", hp.Embd, hp.FFN), Down: l.Linear(p+"ffn_down", hp.FFN, hp.Embd), Act: ml.GELU}}
		if l.Has(p + "attn_norm_2.weight") { // Falcon-40B: the MLP keeps attn_norm
			ly.ffnNorm, ly.ffnNormB = ly.attnNorm, ly.attnNormB
			ly.attnNorm, ly.attnNormB = l.Norm(p+"attn_norm_2", hp.Embd), l.optVector(p+"attn_norm_2.bias", hp.Embd)
		}
		return ly
	})
	return lnNetwork(net, d)
}

// gpt2: OpenAI's GPT-2 (124M to 1.5B) and its descendants, as llama.cpp
// 0.7.0 runs them: starcoder2's LayerNorms, biases and ungated GELU MLP,
// q, k and v fused in attn_qkv with its bias (required), no RoPE: learned
// absolute positions (position_embd, one row per position up to
// context_length) added to the token embeddings, a window's first token
// at position 0; the output matrix, or the token embedding. A context
// past context_length is refused: GPT-2 has no position for it.
func newGPT2(l *Loader) Network {
	eps := l.layerNormEps()
	if eps == 0 {
		return nil
	}
	d := l.baseDecoder(true)
	if !l.learnedPositions(d) {
		return nil
	}
	return l.lnLayers(ml.GELU, true, d, eps, func(p string) decoderLayer {
		ly := l.biasedQKVLayer(p)
		ly.noRoPE = true
		return ly
	})
}

// nemotron: NVIDIA's Nemotron-4 and Minitron (Nemotron-Mini-4B,
// Minitron-4B and 8B), as llama.cpp 0.7.0 runs them: starcoder2's
// LayerNorms with biases (the checkpoint's LayerNorm1p, whose +1 the
// converter folds into the weights) and an ungated MLP whose activation
// is ReLU², biases where the file has them; NeoX RoPE over
// rope.dimension_count of each head (half in Minitron); the output
// matrix required.
func newNemotron(l *Loader) Network {
	eps := l.layerNormEps()
	if eps == 0 {
		return nil
	}
	return l.lnLayers(ml.ReLUSqr, false, l.baseDecoder(true), eps, func(p string) decoderLayer {
		ly := l.preNormLayer(p, "ffn_norm")
		ly.ffnNormB = l.Vector(p+"ffn_norm.bias", l.HP.Embd)
		return ly
	})
}

// jais2: Jais 2, as llama.cpp 0.7.0 runs it: nemotron's block (LayerNorms
// with biases, an ungated ReLU² MLP) with every bias required, q, k and v
// apart with theirs; NeoX RoPE over the whole head.
func newJais2(l *Loader) Network {
	eps := l.layerNormEps()
	if eps == 0 {
		return nil
	}
	return l.lnLayers(ml.ReLUSqr, true, l.baseDecoder(true), eps, func(p string) decoderLayer {
		ly := l.preNormLayer(p, "ffn_norm")
		ly.ffnNormB = l.Vector(p+"ffn_norm.bias", l.HP.Embd)
		l.needBias(ly.q, ly.k, ly.v)
		return ly
	})
}

// pangu-embedded: openPangu-Embedded (1B, 7B), as llama.cpp 0.7.0 runs
// it: llama's block with NeoX RoPE and a bias on attn_output (required),
// on q, k, v, the MLP's matrices and the output where the file has them.
func newPanguEmbedded(l *Loader) Network {
	d := newDecoder(l, decoderOpts{neox: true})
	for i := range d.layers {
		l.needBias(d.layers[i].o)
	}
	return d
}

// maincoder: Maincoder, as llama.cpp 0.7.0 runs it: llama's block
// (adjacent-pair RoPE) with q and k RMS-normed per head after RoPE
// (attn_q_norm, attn_k_norm) and attn_output's bias where the file has one.
func newMaincoder(l *Loader) Network {
	d := newDecoder(l, decoderOpts{qkNorm: true})
	d.qkNormAfterRoPE = true
	return d
}

// olmo: AI2's OLMo (1B, 7B, 7B-Twin-2T), as llama.cpp 0.7.0 runs it:
// llama's block (adjacent-pair RoPE, a SwiGLU MLP, no biases) whose norms, the
// final one too, are LayerNorms without weights or biases, a
// normalization alone over attention.layer_norm_epsilon (ggml's NORM:
// here a LayerNorm of weights 1, the same bits since x·1 = x); the output
// matrix, or the token embedding; with attention.clamp_kqv (OLMo 1.7's
// clip_qkv, 8) q, k and v clamped to ± it before RoPE.
func newOLMo(l *Loader) Network {
	hp := l.HP
	eps := l.layerNormEps()
	if eps == 0 {
		return nil
	}
	clamp, err := meta{l.f, hp.Arch}.clampKQV(false)
	if err != nil {
		l.fail(err)
		return nil
	}
	ones := l.ones("layer norm without weights", hp.Embd)
	d := l.normlessDecoder(false)
	d.layerNorm, d.outputNorm, d.clampQKV = eps, ones, clamp
	net := l.bindLayers(d, func(_ int, p string) decoderLayer {
		qd, kvd := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
		ly := decoderLayer{attnNorm: ones, ffnNorm: ones, o: l.Linear(p+"attn_output", qd, hp.Embd), ffn: l.DenseFFN(p, hp.Embd, hp.FFN)}
		ly.q, ly.k, ly.v = l.qkv(p, qd, kvd, kvd)
		return ly
	})
	return lnNetwork(net, d)
}

// dbrx: Databricks' DBRX (132B, 16 experts, 4 used), as llama.cpp 0.7.0
// runs it: LayerNorms with weights and no biases (attn_norm, the FFN's
// attn_output_norm, output_norm; attention.layer_norm_epsilon); q, k and v
// fused in attn_qkv and clamped to ± attention.clamp_kqv (required; 8 in
// DBRX); NeoX RoPE over the whole head; every FFN softmax-routed experts
// of feed_forward_length, renormalized; the output matrix required.
func newDBRX(l *Loader) Network {
	hp := l.HP
	eps := l.layerNormEps()
	if eps == 0 {
		return nil
	}
	clamp, err := meta{l.f, hp.Arch}.clampKQV(true)
	if err != nil {
		l.fail(err)
		return nil
	}
	moe := l.moeParams(moeOpts{gating: ml.GateSoftmax, norm: true, ffn: hp.FFN})
	if moe == nil {
		return nil
	}
	d := l.baseDecoder(true)
	d.layerNorm, d.clampQKV = eps, clamp
	net := l.bindLayers(d, func(_ int, p string) decoderLayer {
		ly := l.qkvAttn(p)
		ly.ffnNorm, ly.ffn = l.Norm(p+"attn_output_norm", hp.Embd), l.MoE(p, moe)
		return ly
	})
	return lnNetwork(net, d)
}

// bailingmoe: Ling 1 (Ling-lite, Ling-plus, Ling-Coder-lite), as llama.cpp
// 0.7.0 runs it: llama's attention (adjacent-pair RoPE over the whole head) and in
// every layer softmax-routed experts of expert_feed_forward_length,
// normed as expert_weights_norm says (not when absent) and scaled by
// expert_weights_scale where given, plus expert_shared_count (required)
// shared experts as one MLP, added to the experts' sum; the output matrix
// required.
func newBailingMoE(l *Loader) Network {
	if err := (meta{l.f, l.HP.Arch}).require("expert_shared_count"); err != nil {
		l.fail(err)
		return nil
	}
	return newDecoder(l, decoderOpts{moe: &moeOpts{gating: ml.GateSoftmax}})
}

// clampKQV reads attention.clamp_kqv (0, no clamp, when absent unless
// required), refusing a negative one.
func (m meta) clampKQV(required bool) (float64, error) {
	if required {
		if err := m.require("attention.clamp_kqv"); err != nil {
			return 0, err
		}
	}
	c, err := m.float("attention.clamp_kqv", 0)
	if err == nil && c < 0 {
		err = fmt.Errorf("metadata %s.attention.clamp_kqv = %v, want >= 0", m.arch, c)
	}
	return c, err
}

// qkvAttn binds attn_norm, q, k and v (fused in attn_qkv or apart) and
// attn_output (phi2, falcon, dbrx, and qkvLayer's).
func (l *Loader) qkvAttn(p string) decoderLayer {
	hp := l.HP
	qd, kvd := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	ly := decoderLayer{attnNorm: l.Norm(p+"attn_norm", hp.Embd), o: l.Linear(p+"attn_output", qd, hp.Embd)}
	ly.q, ly.k, ly.v = l.qkv(p, qd, kvd, kvd)
	return ly
}

// qkvLayer is qkvAttn with ffn_norm and its bias (codeshell, gptneox,
// gpt2); lnLayers binds attn_norm's bias.
func (l *Loader) qkvLayer(p string) decoderLayer {
	ly := l.qkvAttn(p)
	ly.ffnNorm, ly.ffnNormB = l.Norm(p+"ffn_norm", l.HP.Embd), l.Vector(p+"ffn_norm.bias", l.HP.Embd)
	return ly
}

// biasedQKVLayer is qkvLayer with q, k and v's biases required (gptneox,
// gpt2, bloom, jais).
func (l *Loader) biasedQKVLayer(p string) decoderLayer {
	ly := l.qkvLayer(p)
	l.needBias(ly.q, ly.k, ly.v)
	return ly
}

// lnLayers binds the layers of starcoder2, phi2, gptneox, gpt2 and
// nemotron into d: what layer binds of each (its attention and norms),
// with attn_norm's bias and an ungated MLP, ffn_down·act(ffn_up·h + b) + b,
// the biases of attn_output, ffn_up and ffn_down required when biased (else
// bound where the file has them); the norms are LayerNorms of epsilon eps,
// the output norm's bias required.
func (l *Loader) lnLayers(act ml.Act, biased bool, d *decoder, eps float64, layer func(p string) decoderLayer) Network {
	hp := l.HP
	d.layerNorm = eps
	d.outNormB = l.Vector("output_norm.bias", hp.Embd)
	net := l.bindLayers(d, func(_ int, p string) decoderLayer {
		ly := layer(p)
		ly.attnNormB = l.Vector(p+"attn_norm.bias", hp.Embd)
		mlp := ml.MLP{Up: l.Linear(p+"ffn_up", hp.Embd, hp.FFN), Down: l.Linear(p+"ffn_down", hp.FFN, hp.Embd), Act: act}
		if biased {
			l.needBias(ly.o, mlp.Up, mlp.Down)
		}
		ly.ffn = &Dense{mlp}
		return ly
	})
	return lnNetwork(net, d)
}

// linearMixer is deci's "linear attention": a projection of the normed
// rows.
type linearMixer struct{ o *ml.Matrix }

func (m linearMixer) forward(b ml.Backend, dst, h ml.Tensor) { b.Linear(dst, h, m.o) }

// graniteDefaults are the multipliers a file without their keys gets (0:
// none); noAttnScale: attention.scale is not read (minicpm: llama.cpp
// 0.7.0 reads it for the granite family alone, probed).
type graniteDefaults struct {
	emb, res, logit float64
	noAttnScale     bool
}

// graniteScales sets granite's multipliers on d from the metadata (each
// optional, def when absent); false after an error, recorded.
func (l *Loader) graniteScales(d *decoder, def graniteDefaults) bool {
	m := meta{l.f, l.HP.Arch}
	var err error
	get := func(key string, dv float64) float64 {
		v := 0.0
		if err == nil {
			v, err = m.float(key, dv)
		}
		return v
	}
	d.embScale, d.resScale = get("embedding_scale", def.emb), get("residual_scale", def.res)
	attn, logit := 0.0, get("logit_scale", def.logit)
	if !def.noAttnScale {
		attn = get("attention.scale", 0)
	}
	if err != nil {
		l.fail(err)
		return false
	}
	if attn != 0 {
		d.attn.Scale = attn
	}
	if logit != 0 {
		d.head.Scale = float64(1 / float32(logit)) // 1.0f / f_logit_scale
	}
	return true
}

// granite_swa: IBM's Granite 4.1 dense models, as llama.cpp 0.7.0 runs
// them: granite's decoder and multipliers (logit_scale required), in every
// layer an attention sink per head (attn_sinks), the layers
// attention.sliding_window_pattern flags (required, one per layer)
// attending to the last attention.sliding_window keys (required), RoPE
// only in the layers attention.rope_pattern flags when the file has it.
// Files with experts, or with a vision projector's deepstack_mapping, are
// refused: llama.cpp's graph for them is not checked here.
func newGraniteSWA(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	err := m.require("logit_scale", "attention.sliding_window", "attention.sliding_window_pattern")
	var window int
	var slides, ropes []bool
	if err == nil {
		window, err = m.positive("attention.sliding_window", -1)
	}
	if err == nil {
		slides, err = m.slidingLayers(hp.Layers, 0, false)
	}
	if err == nil {
		ropes, err = m.layerFlags("attention.rope_pattern", hp.Layers, true)
	}
	experts := 0
	if err == nil {
		experts, err = m.int("expert_count", 0)
	}
	if err == nil && (experts > 0 || m.has("deepstack_mapping")) {
		key := "expert_count"
		if experts == 0 {
			key = "deepstack_mapping"
		}
		err = fmt.Errorf("metadata %s.%s: granite_swa with experts or a vision projector's deepstack is not supported", hp.Arch, key)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	d := newDecoder(l, decoderOpts{})
	if l.Err() != nil {
		return nil
	}
	if !l.graniteScales(d, graniteDefaults{}) {
		return nil
	}
	for i := range d.layers {
		at := d.attn
		at.Sinks = l.Vector(fmt.Sprintf("blk.%d.attn_sinks.weight", i), hp.Heads)
		if slides[i] {
			at.Window = window
		}
		d.layers[i].attn, d.layers[i].noRoPE = &at, !ropes[i]
	}
	if l.Err() != nil {
		return nil
	}
	return d
}

// mellum: JetBrains' Mellum mixtures, as llama.cpp 0.7.0 runs them:
// qwen3moe's block (per-head q/k norms, NeoX RoPE, experts routed by
// expert_gating_func, softmax when absent, renormalized unless
// expert_weights_norm says otherwise, of expert_feed_forward_length or
// feed_forward_length/expert_used_count) and, with
// attention.sliding_window, OLMo 3's sliding layers by
// attention.sliding_window_pattern (a period, 4 when absent, or a flag
// per layer), their plain RoPE turning by rope.freq_base_swa (the global
// base when absent).
func newMellum(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	used, err := m.positive("expert_used_count", -1)
	window, slides := 0, []bool(nil)
	if err == nil {
		window, slides, err = m.olmoSliding(hp.Layers)
	}
	baseSWA := 0.0
	if err == nil {
		baseSWA, err = m.float("rope.freq_base_swa", 0)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	d := newDecoder(l, decoderOpts{neox: true, qkNorm: true, moe: &moeOpts{gating: ml.GateSoftmax, norm: true, ffn: hp.FFN / used}})
	if l.Err() != nil {
		return nil
	}
	d.slidePlain(slides, window, cmp.Or(baseSWA, d.rope.Base))
	return d
}

// baichuan: Baichuan and Baichuan 2, as llama.cpp 0.7.0 runs them:
// llama's block; llama.cpp tells the 7B by its 32 layers and gives RoPE
// (adjacent pairs) to it alone, the 13B by its 40 layers and gives it
// ALiBi with a maximum bias of 8 (its fixed value), and no positions to
// files of other depths.
func newBaichuan(l *Loader) Network {
	hp := l.HP
	d := newDecoder(l, decoderOpts{})
	if hp.Layers == 40 {
		return l.alibiNetwork(d, d, 8)
	}
	if l.Err() != nil {
		return nil
	}
	for i := range d.layers {
		d.layers[i].noRoPE = hp.Layers != 32
	}
	return d
}

// smollm3: SmolLM3, llama's decoder with no RoPE in every fourth layer
// (llama.cpp's n_no_rope_layer_step, 4 for SmolLM3 and read from no key).
func newSmolLM3(l *Loader) Network {
	d := newDecoder(l, decoderOpts{})
	if l.Err() != nil {
		return nil
	}
	for i := range d.layers {
		d.layers[i].noRoPE = (i+1)%4 == 0
	}
	return d
}

// olmo2: OLMo 2 and OLMo 3, as llama.cpp 0.7.0 runs them: llama's
// attention and SwiGLU MLP (NeoX RoPE) without norms before them; instead
// q and k are RMS-normed over their whole rows (attn_q_norm of the model's
// width, attn_k_norm of the KV width) before RoPE, and the attention's and
// the FFN's outputs by post_attention_norm and post_ffw_norm before they
// join the residual stream. OLMo 3's files have attention.sliding_window:
// the layers attention.sliding_window_pattern names (one flag per layer,
// as the converter writes it, or a period, 4 when absent: 3 sliding layers
// of every 4) attend to the last sliding_window keys with plain RoPE, the
// file's scaling (OLMo 3's YaRN) left to the global layers. llama.cpp
// reads rope.freq_base_swa but turns the sliding layers by rope.freq_base,
// and so does ppl.
func newOLMo2(l *Loader) Network {
	hp := l.HP
	window, slides, err := meta{l.f, hp.Arch}.olmoSliding(hp.Layers)
	if err != nil {
		l.fail(err)
		return nil
	}
	d := l.baseDecoder(true)
	if l.bindLayers(d, func(_ int, p string) decoderLayer { return l.postNormLayer(p, true) }) == nil {
		return nil
	}
	d.slidePlain(slides, window, d.rope.Base)
	return d
}

// olmoSliding reads OLMo 3's (and Mellum's) sliding layers:
// attention.sliding_window (0 when absent: none, slides nil) and, with a
// window, slidingLayers with a period of 4 when the pattern is absent.
func (m meta) olmoSliding(n int) (window int, slides []bool, err error) {
	window, err = m.int("attention.sliding_window", 0)
	if err == nil && window > 0 {
		slides, err = m.slidingLayers(n, 4, false)
	}
	return window, slides, err
}

// sliding is the attention of m's sliding layers, m's narrowed to the last
// window keys, and their RoPE, m's turned by base (m's own where 0).
func (m *decoder) sliding(window int, base float64) (*ml.Attn, *nn.RoPE) {
	local := m.attn
	local.Window = window
	return &local, m.rope.WithBase(cmp.Or(base, m.rope.Base))
}

// slidePlain gives the layers slides flags (none when nil) a window of
// window keys and a plain RoPE of base: no scaling, as llama.cpp turns
// OLMo 3's and Mellum's sliding layers (freq_scale 1, ext_factor 0,
// attn_factor 1).
func (m *decoder) slidePlain(slides []bool, window int, base float64) {
	local := m.attn
	local.Window = window
	plain := &nn.RoPE{HeadDim: m.hp.HeadDim, Dims: m.rope.Dims, NeoX: m.rope.NeoX, Base: base, FreqScale: 1, AttnFactor: 1}
	for i := range m.layers {
		if slides != nil && slides[i] {
			m.layers[i].attn, m.layers[i].rope = &local, plain
		}
	}
}

// seed_oss: ByteDance's Seed-OSS, as llama.cpp 0.7.0 runs it: llama's
// decoder (NeoX RoPE; q, k and v biases) whose FFN pre-norm is stored as
// post_attention_norm; scores scaled by 1/sqrt(head size), whatever
// attention.scale says (llama.cpp 0.7.0 reads it for the granite family
// alone, probed).
func newSeedOSS(l *Loader) Network {
	hp := l.HP
	d := l.baseDecoder(true)
	return l.bindLayers(d, func(_ int, p string) decoderLayer {
		ly := l.preNormLayer(p, "post_attention_norm")
		ly.ffn = l.DenseFFN(p, hp.Embd, hp.FFN)
		return ly
	})
}

// exaone4: LG's EXAONE 4.0, as llama.cpp 0.7.0 runs it: olmo2's layer (no
// pre-norms, post_attention_norm and post_ffw_norm) with q and k
// RMS-normed per head before RoPE (NeoX, with rope_freqs when the file
// has them). llama.cpp gives sliding-window layers only to the 64-layer
// model (the 32B): three of every four layers attend to the last
// attention.sliding_window keys (4096 when the file does not say), and the
// fourth is global, without RoPE.
func newEXAONE4(l *Loader) Network {
	hp := l.HP
	swa := hp.Layers == 64
	window := 0
	if swa {
		var err error
		if window, err = (meta{l.f, hp.Arch}).positive("attention.sliding_window", 4096); err != nil {
			l.fail(err)
			return nil
		}
	}
	d := l.baseDecoder(true)
	local := d.attn
	local.Window = window
	return l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := l.postNormLayer(p, false)
		if swa && i%4 < 3 {
			ly.attn = &local
		} else if swa {
			ly.noRoPE = true
		}
		return ly
	})
}

// minimax-m2: MiniMax-M2, as llama.cpp 0.7.0 runs it: llama's decoder
// (NeoX RoPE over rope.dimension_count dims, half of each head) with q and
// k RMS-normed over their whole rows before RoPE, and every FFN a mixture
// of experts routed by expert_gating_func (sigmoid) with the selection
// bias exp_probs_b, the chosen weights renormalized and scaled by
// expert_weights_scale.
func newMiniMaxM2(l *Loader) Network {
	d := newDecoder(l, decoderOpts{neox: true, moe: &moeOpts{gating: ml.GateSigmoid, norm: true}})
	if l.Err() != nil {
		return nil
	}
	for i := range d.layers {
		p := fmt.Sprintf("blk.%d.", i)
		ly := &d.layers[i]
		ly.qNorm, ly.kNorm = l.qkNorms(p, true)
		if ly.ffn.(*MoE).Router.SelBias == nil {
			l.Failf("missing tensor %sexp_probs_b.bias", p)
		}
	}
	if l.Err() != nil {
		return nil
	}
	return d
}

// ernie4_5-moe: Baidu's ERNIE 4.5 mixtures (21B-A3B, 300B-A47B), as
// llama.cpp 0.7.0 runs them: llama's decoder (adjacent-pair RoPE, q/k/v
// biases when present; attn_output's loaded and left unapplied, as
// llama.cpp does) whose FFN is a mixture of experts in the layers from
// leading_dense_block_count on, every interleave_moe_layer_step-th, and a
// dense MLP in the others. Routing: softmax, the experts chosen on the
// probabilities plus the selection bias exp_probs_b, weights renormalized
// and never scaled (llama.cpp fixes both, whatever the metadata says);
// shared experts added when the file has them.
func newERNIE45MoE(l *Loader) Network {
	hp := l.HP
	moe := l.moeParams(moeOpts{gating: ml.GateSoftmax, norm: true})
	if moe == nil {
		return nil
	}
	moe.Norm, moe.Scale = true, 0
	step, err := meta{l.f, hp.Arch}.positive("interleave_moe_layer_step", 1)
	if err != nil {
		l.fail(err)
		return nil
	}
	d := l.baseDecoder(false)
	return l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := l.preNormLayer(p, "ffn_norm")
		l.unbiased(ly.o) // llama.cpp loads attn_output's bias and leaves it unapplied (probed)
		if i >= moe.DenseLayers && (i+1)%step == 0 {
			ly.ffn = l.MoE(p, moe)
		} else {
			ly.ffn = l.DenseFFN(p, hp.Embd, hp.FFN)
		}
		return ly
	})
}

// dots1: rednote's dots.llm1, as llama.cpp 0.7.0 runs it: qwen3's
// attention (q and k RMS-normed per head, NeoX RoPE; an attention output
// bias when present), dense MLPs in the leading_dense_block_count first
// layers and in the others a mixture of experts routed by
// expert_gating_func with the selection bias exp_probs_b, normed when
// expert_weights_norm says so and scaled by expert_weights_scale, plus its
// shared expert (required).
func newDots1(l *Loader) Network {
	hp := l.HP
	moe := l.moeParams(moeOpts{gating: ml.GateSigmoid})
	if moe == nil {
		return nil
	}
	d := l.baseDecoder(true)
	return l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := l.preNormLayer(p, "ffn_norm")
		ly.qNorm, ly.kNorm = l.qkNorms(p, false)
		if i < moe.DenseLayers {
			ly.ffn = l.DenseFFN(p, hp.Embd, hp.FFN)
		} else if m := l.MoE(p, moe); m != nil {
			if m.Shared == nil {
				l.Failf("missing tensor %sffn_up_shexp.weight", p)
			}
			if m.Router.SelBias == nil {
				l.Failf("missing tensor %sexp_probs_b.bias", p)
			}
			ly.ffn = m
		}
		return ly
	})
}

// hy_v3: Tencent's Hunyuan 3 (HY-V3, 30B-A3B), as llama.cpp 0.7.0 runs it:
// dots1's decoder (qwen3's attention, q and k RMS-normed per head before
// NeoX RoPE, an attention output bias when present) whose layers without
// ffn_gate_inp are dense (HY-V3's first_k_dense_replace, told by the
// tensors, not by a key) and the others experts of
// expert_feed_forward_length routed by expert_gating_func (sigmoid when
// absent or 0) with the selection bias exp_probs_b (so named, without
// .bias, as llama.cpp 0.7.0 binds it) when present, normed
// when expert_weights_norm says so, scaled by expert_weights_scale when
// set, plus a shared SwiGLU expert, added without a gate, where the layer
// has one;
// the trailing nextn_predict_layers blocks (multi-token prediction) are
// not run.
func newHYV3(l *Loader) Network {
	if !l.dropNextN() {
		return nil
	}
	hp := l.HP
	moe := l.moeParams(moeOpts{gating: ml.GateSigmoid})
	if moe == nil {
		return nil
	}
	d := l.baseDecoder(true)
	return l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := l.preNormLayer(p, "ffn_norm")
		ly.qNorm, ly.kNorm = l.qkNorms(p, false)
		if l.Has(p + "ffn_gate_inp.weight") {
			if l.Has(p + "exp_probs_b.bias") {
				l.Failf("tensor %sexp_probs_b.bias: hy_v3's selection bias is %sexp_probs_b, as llama.cpp 0.7.0 reads it (it refuses this file)", p, p)
			}
			m := l.MoE(p, moe)
			if m != nil && l.Has(p+"exp_probs_b") {
				m.Router.SelBias = l.floats(p+"exp_probs_b", moe.Experts)
			}
			ly.ffn = m
		} else {
			ly.ffn = l.DenseFFN(p, hp.Embd, hp.FFN)
		}
		return ly
	})
}

// maple: Maple (20B MoE), as llama.cpp 0.7.0 runs it: qwen3moe's block (q
// and k RMS-normed per head, NeoX RoPE) whose layers flagged by
// attention.sliding_window_pattern (an array, required) attend to the
// last attention.sliding_window keys (required) with RoPE of
// rope.freq_base_swa's base where given, the others globally **without**
// RoPE; every FFN experts routed by softmax, renormalized and not scaled
// whatever the metadata says (llama.cpp fixes them), each expert's SwiGLU
// clamped at swiglu_clamp_exp per layer (required: llama.cpp 0.7.0 refuses
// a file without it) in ggml's SWIGLU_CLAMP, which clamps silu's input
// (ml.SwiGLUClampIn), not Step-3.5's output.
func newMaple(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	err := m.require("attention.sliding_window", "attention.sliding_window_pattern", "swiglu_clamp_exp")
	window := 0
	if err == nil {
		window, err = m.positive("attention.sliding_window", -1)
	}
	var slides []bool
	if err == nil {
		slides, err = m.layerFlags("attention.sliding_window_pattern", hp.Layers, false)
	}
	baseSWA := 0.0
	if err == nil {
		baseSWA, err = m.float("rope.freq_base_swa", 0)
	}
	var clamps []float32
	if err == nil {
		clamps, err = step35Clamps(l, "swiglu_clamp_exp", hp.Layers)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	moe := l.moeParams(moeOpts{gating: ml.GateSoftmax, norm: true})
	if moe == nil {
		return nil
	}
	moe.gating, moe.Gating, moe.Norm, moe.Scale = ml.GateSoftmax, ml.GateSoftmax.String(), true, 0 // whatever the file says
	d := l.baseDecoder(true)
	if l.Err() != nil { // d.rope may be missing
		return nil
	}
	local, localRoPE := d.sliding(window, baseSWA)
	return l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := l.preNormLayer(p, "ffn_norm")
		ly.qNorm, ly.kNorm = l.qkNorms(p, false)
		if slides[i] {
			ly.attn, ly.rope = local, localRoPE
		} else {
			ly.noRoPE = true
		}
		if e := l.MoE(p, moe); e != nil {
			clampGLU(&e.Experts, ml.SwiGLUClampIn, clamps[i])
			ly.ffn = e
		}
		return ly
	})
}

// llama4: Meta's Llama 4 (Scout: 16 experts; Maverick: 128), as llama.cpp
// 0.7.0 runs it: llama's decoder (adjacent-pair RoPE, rope_freqs when the
// file has them) where every fourth layer has no RoPE; the others RMS-norm
// q and k per head without a weight after RoPE (not Maverick, whose 128
// experts llama.cpp reads as LLM_TYPE_17B_128E); every
// interleave_moe_layer_step-th FFN a mixture of experts routed by sigmoid,
// top-K, the weight multiplying the chosen expert's input, plus a shared
// expert of the experts' width; the others dense. As llama.cpp runs it,
// the layers with RoPE attend within chunks of 8192 positions
// (ml.Attn.Chunk; the GPU's plain attention kernel) and the NoPE layers scale their queries by Llama 4's
// temperature, 1 + 0.1·ln(1 + floor((p + 1)/8192)). A file whose attention.sliding_window is 0
// (no chunks) is refused: llama.cpp 0.7.0 aborts on it (GGML_ASSERT
// f_attn_temp_scale != 0), so there is no number to match.
func newLlama4(l *Loader) Network {
	hp := l.HP
	m := meta{l.f, hp.Arch}
	step, err := m.positive("interleave_moe_layer_step", 1)
	window := -1
	if err == nil && m.has("attention.sliding_window") {
		window, err = m.int("attention.sliding_window", 0)
	}
	if err != nil {
		l.fail(err)
		return nil
	}
	if window == 0 {
		l.Failf("metadata %s.attention.sliding_window = 0: Llama 4 without chunked attention is not supported (llama.cpp 0.7.0 aborts on it)", hp.Arch)
		return nil
	}
	moe := l.moeParams(moeOpts{gating: ml.GateSigmoid})
	if moe == nil || !l.ungroupedExperts(moe) {
		return nil
	}
	moe.Norm, moe.Scale, moe.SharedFFN = false, 0, moe.FFN
	kqNorm := moe.Experts != 128
	d := l.baseDecoder(false)
	d.qkNormAfterRoPE = true
	d.nopeTemp = attnTemp{beta: float64(float32(0.1)), floor: llama4Chunk, offset: 1}
	chunked := d.attn // the layers with RoPE
	chunked.Chunk = llama4Chunk
	chunkedRoPE := l.swaRoPE(d.rope)
	ones := &ml.Vector{Name: "(llama4's q/k RMS norm, no weight)", V: make([]float32, hp.HeadDim)}
	for i := range ones.V {
		ones.V[i] = 1
	}
	l.vecs = append(l.vecs, ones)
	return l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := l.preNormLayer(p, "ffn_norm")
		ly.noRoPE = (i+1)%4 == 0
		if !ly.noRoPE {
			ly.attn, ly.rope = &chunked, chunkedRoPE
			if kqNorm {
				ly.qNorm, ly.kNorm = ones, ones
			}
		}
		if (i+1)%step != 0 {
			ly.ffn = l.DenseFFN(p, hp.Embd, hp.FFN)
			return ly
		}
		if e := l.MoE(p, moe); e != nil {
			if e.Shared == nil {
				l.Failf("missing tensor %sffn_up_shexp.weight", p)
			}
			e.Router.Before = true
			ly.ffn = e
		}
		return ly
	})
}

// llama4Chunk is llama.cpp's attention chunk and temperature floor for
// Llama 4 (n_swa and n_attn_temp_floor_scale, read from no key).
const llama4Chunk = 8192

// hunyuan-dense: Tencent's dense Hunyuan models (0.5B to 7B), as llama.cpp
// 0.7.0 runs them: llama's decoder with NeoX RoPE (rope_freqs when the
// file has them; its base times rope.scaling.alpha^(d/(d−2)) where that
// key is above 0: ntkAlphaArchs) and q and k RMS-normed per head after
// RoPE.
func newHunyuanDense(l *Loader) Network {
	if d := hunyuanDecoder(l); d != nil {
		return d
	}
	return nil
}

// hunyuanDecoder is hunyuan-dense's decoder, or nil after an error.
func hunyuanDecoder(l *Loader) *decoder {
	d := newDecoder(l, decoderOpts{neox: true, qkNorm: true})
	d.qkNormAfterRoPE = true
	if l.Err() != nil {
		return nil
	}
	return d
}

// hunyuan_vl: the text decoder of Tencent's HunyuanOCR and Hunyuan-VL, as
// llama.cpp 0.7.0 runs it: hunyuan-dense's (its RoPE base rescaled by
// rope.scaling.alpha the same way), its RoPE over the whole head (as
// llama.cpp requires) and, where rope.dimension_sections' first two are
// above 0, multimodal RoPE, whose text positions leave the pairs past the
// first three sections unturned.
func newHunyuanVL(l *Loader) Network {
	d := hunyuanDecoder(l)
	if d == nil || !glmMRoPE(l, d.rope) || !l.wholeHeads(d.rope) {
		return nil
	}
	return d
}

// arcee: Arcee's AFM-4.5B, as llama.cpp 0.7.0 runs it: llama's decoder
// (adjacent-pair RoPE, rope_freqs when the file has them; scores scaled by
// 1/sqrt(head size), whatever attention.scale says: llama.cpp 0.7.0 reads
// it for the granite family alone, probed) whose MLP is ungated: ffn_down ·
// relu(ffn_up · x)².
func newArcee(l *Loader) Network {
	hp := l.HP
	d := l.baseDecoder(false)
	return l.bindLayers(d, func(_ int, p string) decoderLayer {
		ly := l.preNormLayer(p, "ffn_norm")
		ly.ffn = &Dense{ml.MLP{Up: l.Linear(p+"ffn_up", hp.Embd, hp.FFN), Down: l.Linear(p+"ffn_down", hp.FFN, hp.Embd), Act: ml.ReLUSqr}}
		return ly
	})
}

// apertus: the Swiss AI Initiative's Apertus (8B, 70B), as llama.cpp 0.7.0
// runs it: llama's decoder with NeoX RoPE (rope_freqs when the file has
// them), q and k RMS-normed per head before RoPE (the norms' biases, which
// the files carry, unused as llama.cpp leaves them), and an ungated MLP
// whose activation is xIELU with each layer's parameters from the
// metadata xielu.alpha_n, xielu.alpha_p, xielu.beta and xielu.eps (one
// value, or one per layer), as ggml_xielu transforms them (nn.NewXIELU).
func newApertus(l *Loader) Network {
	hp := l.HP
	var params [4][]float32
	for i, key := range []string{"xielu.alpha_n", "xielu.alpha_p", "xielu.beta", "xielu.eps"} {
		v, err := layerFloats(l, key, hp.Layers)
		if err != nil {
			l.fail(err)
			return nil
		}
		params[i] = v
	}
	d := l.baseDecoder(true)
	return l.bindLayers(d, func(i int, p string) decoderLayer {
		ly := l.preNormLayer(p, "ffn_norm")
		ly.qNorm, ly.kNorm = l.qkNorms(p, false)
		l.pass(p+"attn_q_norm.bias", p+"attn_k_norm.bias")
		ly.ffn = &Dense{ml.MLP{Up: l.Linear(p+"ffn_up", hp.Embd, hp.FFN), Down: l.Linear(p+"ffn_down", hp.FFN, hp.Embd), Act: ml.XIELU,
			XIELU: nn.NewXIELU(params[0][i], params[1][i], params[2][i], params[3][i])}}
		return ly
	})
}

// layerFloats reads the required key (no architecture prefix), one float
// or an array of one per layer, as llama.cpp's get_key_or_arr; NaN and
// infinities refused.
func layerFloats(l *Loader, key string, layers int) ([]float32, error) {
	v, ok := l.f.Lookup(key)
	if !ok {
		return nil, fmt.Errorf("missing metadata %s", key)
	}
	var out []float32
	if v.Type == gguf.ValueArray {
		a, err := l.f.Float32s(key)
		if err != nil {
			return nil, err
		}
		if len(a) != layers {
			return nil, fmt.Errorf("metadata %s has %d values for %d layers", key, len(a), layers)
		}
		out = a
	} else {
		x, err := l.f.Float(key)
		if err != nil {
			return nil, err
		}
		out = slices.Repeat([]float32{float32(x)}, layers)
	}
	for i, x := range out {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, fmt.Errorf("metadata %s: value %d is %v", key, i, x)
		}
	}
	return out, nil
}
