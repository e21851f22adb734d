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

// llama: Llama 2 and 3, Mistral, Mixtral and other "llama" GGUF files, and the
// variants that differ from it in a few options (qwen2, qwen3, qwen3moe:
// see decoderOpts; their vision-language files' text decoders qwen2vl,
// qwen3vl, qwen3vlmoe: see newVL; glm4moe, gpt-oss and mistral3 bind their
// own tensors into the same decoder). A pre-norm decoder: x +=
// Attn(RMSNorm(x)); x += FFN(RMSNorm(x)), with grouped-query attention,
// RoPE and a SwiGLU MLP (or a mixture of experts). The output head is
// output.weight, or the token embedding when tied.
func init() {
	Register("llama", func(l *Loader) Network {
		// A llama file with experts is Mixtral's layout: softmax routing,
		// the chosen weights renormalized, experts of feed_forward_length.
		n, err := meta{l.f, l.HP.Arch}.int("expert_count", 0)
		if err != nil {
			l.fail(err)
			return nil
		}
		if n > 0 {
			return newDecoder(l, decoderOpts{moe: &moeOpts{gating: ml.GateSoftmax, norm: true, ffn: l.HP.FFN}})
		}
		return newDecoder(l, decoderOpts{})
	})
	Register("qwen2", func(l *Loader) Network { return newDecoder(l, decoderOpts{neox: true, qkvBias: true}) })
	Register("qwen3", func(l *Loader) Network { return newDecoder(l, decoderOpts{neox: true, qkNorm: true}) })
	Register("qwen3moe", func(l *Loader) Network {
		return newDecoder(l, decoderOpts{neox: true, qkNorm: true, moe: &moeOpts{gating: ml.GateSoftmax, norm: true}})
	})
	// The text decoders of Qwen's vision-language files (the vision tower
	// is the separate mmproj file, not read): qwen2vl (Qwen2-VL,
	// Qwen2.5-VL), qwen3vl and qwen3vlmoe (Qwen3-VL) are qwen2, qwen3 and
	// qwen3moe with llama.cpp's multi-section RoPE (newVL).
	Register("qwen2vl", func(l *Loader) Network { return newVL(l, decoderOpts{neox: true, qkvBias: true}, false) })
	Register("qwen3vl", func(l *Loader) Network { return newVL(l, decoderOpts{neox: true, qkNorm: true}, true) })
	// paddleocr: PaddleOCR-VL's text decoder (ERNIE-4.5-0.3B), ernie4_5's
	// file with qwen2vl's MRoPE (rope.dimension_sections required: llama.cpp
	// 0.7.0 asserts without them) and the norms' epsilon it reads; q, k, v
	// and attn_output biases where present.
	Register("paddleocr", func(l *Loader) Network {
		if d := vlDecoder(l, decoderOpts{neox: true}, false); d != nil {
			return d
		}
		return nil
	})
	Register("qwen3vlmoe", func(l *Loader) Network {
		return newVL(l, decoderOpts{neox: true, qkNorm: true, moe: &moeOpts{gating: ml.GateSoftmax, norm: true}}, true)
	})
}

// decoderOpts are what the llama-style architectures add to llama:
//   - neox: RoPE in the NeoX layout (pairs i, i+d/2) instead of adjacent pairs;
//   - qkvBias: biases on q, k and v required (qwen2; optional elsewhere, as
//     llama.cpp binds them);
//   - qkNorm: an RMSNorm over each query and key head before RoPE
//     (blk.N.attn_q_norm, attn_k_norm; qwen3);
//   - moe: every layer's FFN is a mixture of experts (qwen3moe).
type decoderOpts struct {
	neox, qkvBias, qkNorm bool
	moe                   *moeOpts
}

type decoder struct {
	hp        HParams
	tokenEmbd *ml.Matrix // token_embd: (vocab, embd), read by row
	// posEmbd, when set, is position_embd (context, embd): learned
	// absolute positions, row p added to the token embedding at p (gpt2).
	posEmbd *ml.Matrix
	// embNorm and embNormB, when set, norm the token embeddings before
	// the first layer (bloom's token_embd_norm, a LayerNorm with its bias).
	embNorm, embNormB *ml.Vector
	// embSkip, when set, adds to each layer i's output the (normed) token
	// embeddings times embSkip[i], one value per column (talkie's
	// layer_output_scale; ml.AltUp's MulCols: skipDecoder).
	embSkip    []*ml.Vector
	layers     []decoderLayer
	outputNorm *ml.Vector // output_norm
	outNormB   *ml.Vector // output_norm.bias (phimoe's RMS norm, the LayerNorms of layerNorm's decoders), or nil
	head       Head
	rope       *nn.RoPE
	attn       ml.Attn // every layer's, unless the layer has its own
	// scaleQ, when set, scales the queries after RoPE (mistral3's
	// attention temperature by position).
	scaleQ func(b ml.Backend, q ml.Tensor)
	// embScale and resScale, when not 0, multiply the token embeddings
	// and each attention and FFN output before it joins the residual
	// stream (granite's embedding_scale and residual_scale).
	embScale, resScale float64
	// qkNormAfterRoPE norms q and k after RoPE rather than before (llama4).
	qkNormAfterRoPE bool
	// qkNormHeads: the q and k norms hold a weight row per head, each
	// head RMS-normed by its own (plamo2).
	qkNormHeads bool
	// qkLayerNorm, when not 0, makes the layers' qNorm and kNorm
	// LayerNorms of this epsilon over each head, with weights of every
	// head (Command R+'s attn_q_norm and attn_k_norm; ml.LayerNormer).
	qkLayerNorm float64
	// attnOutScale, when not 0, multiplies each attention output after
	// attn_output (mimo2's attention.value_scale).
	attnOutScale float64
	// clampQKV, when above 0, clamps q, k and v to [-clampQKV, clampQKV]
	// before anything else touches them (olmo's attention.clamp_kqv).
	clampQKV float64
	// nopeTemp scales the queries of the layers without RoPE (llama4).
	nopeTemp attnTemp
	// normGroups, when above 1, makes the RMS norms of the residual
	// stream (attn_norm, ffn_norm, output_norm) norm each row's normGroups
	// equal slices apart, the weight spanning the row (K2-Horizon's
	// attention.group_norm_groups).
	normGroups int
	// postNormEps, when not 0, is the post-norms' epsilon
	// (muse-glimmer's 1e-8); 0: the model's.
	postNormEps float64
	// layerNorm, when not 0, makes the pre-norms and the output norm
	// LayerNorms of this epsilon, their biases attnNormB, ffnNormB and
	// outNormB (orion, stablelm, starcoder2, phi2, gptneox, falcon,
	// gpt2, nemotron, olmo, dbrx, cohere2; ml.LayerNormer, lnDecoder).
	layerNorm float64
}

// lnDecoder is a decoder with LayerNorms: it needs ml.LayerNormer.
type lnDecoder struct{ *decoder }

// lnNetwork is d as an lnDecoder, or nil when net, d bound, is nil (an
// error).
func lnNetwork(net Network, d *decoder) Network {
	if net == nil {
		return nil
	}
	return lnDecoder{d}
}

func (m lnDecoder) Check(b ml.Backend) error {
	if _, ok := b.(ml.LayerNormer); !ok {
		return fmt.Errorf("%s needs LayerNorm (ml.LayerNormer), which backend %T lacks", m.hp.Arch, b)
	}
	return nil
}

// norm norms the rows of x into dst by w, then adds bias when set: an RMS
// norm, or with layerNorm a LayerNorm.
func (m *decoder) norm(b ml.Backend, dst, x ml.Tensor, w, bias *ml.Vector) {
	if m.layerNorm != 0 {
		b.(ml.LayerNormer).LayerNorm(dst, x, w, bias, m.layerNorm)
		return
	}
	if g := m.normGroups; g > 1 { // each row's g slices normed apart, one weight over the row
		cols := x.Cols() / g
		dst, x = b.View(dst, dst.Rows()*g, cols), b.View(x, x.Rows()*g, cols)
	}
	b.RMSNorm(dst, x, w, m.hp.Eps)
	if bias != nil {
		b.AddRows(dst, bias)
	}
}

type decoderLayer struct {
	// attnNorm and ffnNorm (blk.N.attn_norm, ffn_norm) norm the residual
	// stream for the attention and the FFN; nil, they read it as it is
	// (olmo2, exaone4).
	attnNorm, ffnNorm *ml.Vector
	// attnNormB and ffnNormB, when set, are the norms' biases
	// (attn_norm.bias, ffn_norm.bias: phimoe's RMS norms, the LayerNorms
	// of orion, stablelm, starcoder2, falcon and others; decoder.norm).
	attnNormB, ffnNormB *ml.Vector
	q, k, v, o          *ml.Matrix // blk.N.attn_q, attn_k, attn_v, attn_output (+ optional .bias)
	// qNorm and kNorm (blk.N.attn_q_norm, attn_k_norm), when set, norm q
	// and k before RoPE: over each head (HeadDim values) or over the whole
	// row (the row's values: olmo2, minimax-m2).
	qNorm, kNorm *ml.Vector
	// qNormB and kNormB, when set, are the biases of qkLayerNorm's q and
	// k norms (chameleon's).
	qNormB, kNormB *ml.Vector
	// gate (blk.N.attn_gate), when set, gates the attention's output
	// before attn_output: att ⊙ gateFn(gate·h), the sigmoid (afmoe) or
	// softplus (laguna); with gateCols, gate·h has one value per head,
	// gathered to each of the head's columns (step35, laguna;
	// gatherDecoder).
	gate     *ml.Matrix
	gateCols []int
	gateFn   ml.GateFn
	ffn      FFN
	attn     *ml.Attn // the layer's own attention options (gpt-oss: sinks, window), or nil
	rope     *nn.RoPE // the layer's own RoPE (OLMo 3's sliding layers), or nil: the decoder's
	// postAttnNorm and postFFNNorm, when set, norm the attention's and
	// the FFN's outputs before they join the residual stream (glm4:
	// post_attention_norm, post_ffw_norm).
	postAttnNorm, postFFNNorm *ml.Vector
	// ffnReadsAttn makes the FFN read the attention's output as
	// postAttnNorm leaves it rather than the residual stream (chameleon's
	// swin_norm as llama.cpp 0.7.0 computes it).
	ffnReadsAttn bool
	noRoPE       bool // no positions in this layer's q and k (smollm3's NoPE layers)
	// parallel, when set, runs the FFN beside the attention on the layer's
	// input x, in one of the orders of llama.cpp's parallel blocks.
	parallel parallelKind
	// attnSubNorm, when set, RMS-norms the attention's output before
	// attn_output (bitnet's attn_sub_norm).
	attnSubNorm *ml.Vector
	// vCols, when set, are the columns of the attention's output that
	// attn_output reads (value heads narrower than the key heads, padded:
	// mimo2; gatherDecoder).
	vCols []int
	// rawRouter, when set, makes the router of the layer's experts (ffn, a
	// *MoE) read the layer's input rather than the FFN's normed rows
	// (smallthinker).
	rawRouter bool
	// resMoE, when set, is a mixture of experts beside the layer (arctic's
	// residual MoE): it reads the layer's input normed by resMoENorm, and
	// its output joins the residual stream after the FFN's.
	resMoE     FFN
	resMoENorm *ml.Vector
	// values, when set, computes the attention's values from the normed
	// rows instead of v (K2-Horizon's routed value experts, MoVA).
	values FFN
	// msa, when set, is the layer's MSA indexer (minimax-m3): past its
	// top_k blocks, each KV head's queries read the key blocks it chooses.
	msa *msaParams
	// mixer, when set, is the layer's mixer instead of attention (the
	// Mamba-2 layers of granitehybrid and nemotron_h, LFM2's short
	// convolutions; q, k, v and o are nil), or beside it (falcon-h1: the
	// two outputs added).
	mixer rowMixer
}

// parallelKind is how a parallel block's FFN output and the attention's
// join the residual stream x, in the order llama.cpp adds them (float32
// sums: the order changes the bits). The FFN reads x normed by the
// layer's ffnNorm when it has one (gptneox, Falcon-40B), else the
// attention's normed rows.
type parallelKind int

const (
	serial parallelKind = iota
	// parallelAfter: (x + attention) + FFN (stablelm's parallel residual).
	parallelAfter
	// parallelSum: x + (attention + FFN) (phi2, falcon).
	parallelSum
	// parallelFFNFirst: (x + FFN) + attention (gptneox's
	// use_parallel_residual; cohere2, command-r, cohere2moe).
	parallelFFNFirst
)

// rowMixer is a layer's mixer that is not attention: it computes dst from
// the normed rows h of a window, from no state.
type rowMixer interface {
	forward(b ml.Backend, dst, h ml.Tensor)
}

func newDecoder(l *Loader, o decoderOpts) *decoder {
	hp := l.HP
	m := l.baseDecoder(o.neox)
	var moe *moeParams
	if o.moe != nil {
		moe = l.moeParams(*o.moe)
	}
	for i := range hp.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		ly := l.preNormLayer(p, "ffn_norm")
		if o.qkvBias {
			l.needBias(ly.q, ly.k, ly.v)
		}
		if o.qkNorm {
			ly.qNorm, ly.kNorm = l.qkNorms(p, false)
		}
		if moe != nil {
			ly.ffn = l.MoE(p, moe)
		} else {
			ly.ffn = l.DenseFFN(p, hp.Embd, hp.FFN)
		}
		m.layers = append(m.layers, ly)
	}
	return m
}

// unbiasedOutputs drops the biases llama.cpp loads and leaves unapplied
// (probed): attn_output's in every layer of d, and with mlp the dense
// MLPs' as well. It returns d.
func (l *Loader) unbiasedOutputs(d *decoder, mlp bool) *decoder {
	if d == nil {
		return nil
	}
	for _, ly := range d.layers {
		l.unbiased(ly.o)
		if f, ok := ly.ffn.(*Dense); ok && mlp {
			l.unbiased(f.Gate)
			l.unbiased(f.Up)
			l.unbiased(f.Down)
		}
	}
	return d
}

// newVL is newDecoder for the text of a Qwen vision-language file, as
// llama.cpp 0.7.0 runs text tokens:
//   - RoPE by rope.dimension_sections (required; vlRoPE): qwen2vl's MRoPE,
//     or with interleaved qwen3vl's IMRoPE;
//   - qwen3vl's n_deepstack_layers (optional) only widens llama.cpp's input
//     rows for image features: a token's row is its embedding padded with
//     zeros, so the deepstack layers add zeros to text;
//   - qwen2vl's RMS norms with epsilon 0: llama.cpp 0.7.0's qwen2vl never
//     reads attention.layer_norm_rms_epsilon.
func newVL(l *Loader, o decoderOpts, interleaved bool) Network {
	d := vlDecoder(l, o, interleaved)
	if d == nil {
		return nil
	}
	if interleaved {
		if _, err := (meta{l.f, l.HP.Arch}).int("n_deepstack_layers", 0); err != nil {
			l.fail(err)
			return nil
		}
	} else {
		d.hp.Eps = 0
	}
	return d
}

// vlDecoder is newDecoder with vlRoPE's multi-section RoPE, or nil after
// an error.
func vlDecoder(l *Loader, o decoderOpts, interleaved bool) *decoder {
	d := newDecoder(l, o)
	if l.Err() != nil {
		return nil
	}
	if err := vlRoPE(l, d.rope, interleaved); err != nil {
		l.fail(err)
		return nil
	}
	return d
}

// vlRoPE makes r, NeoX RoPE over whole heads, llama.cpp's multi-section
// RoPE for text tokens. The 4 sections (t, h, w, e) count rotary pairs;
// pair i falls in sector s = i mod their sum and turns by the position of
// the sector's section: in MRoPE (qwen2vl) the sections in turn; in IMRoPE
// (qwen3vl) h where s mod 3 = 1 and s < 3h, w where s mod 3 = 2 and s <
// 3w, t where s mod 3 = 0 and s < 3t, else e. A text token's t, h and w
// are its position, its e is 0: the pairs of e do not turn, so their
// frequency factor is +Inf (θ/∞ = 0). Qwen2-VL's [16, 24, 24, 0] leaves
// plain NeoX RoPE; Qwen3-VL's [24, 20, 20, 0] leaves pairs 61 and 62 of 64
// unturned. llama.cpp reads one integer as 4 equal sections, and aborts
// where no section of the first 3 is above 0 or they sum beyond the head.
func vlRoPE(l *Loader, r *nn.RoPE, interleaved bool) error {
	hp := l.HP
	if r.Dims != hp.HeadDim {
		return fmt.Errorf("metadata %s.rope.dimension_count = %d, want the head size %d", hp.Arch, r.Dims, hp.HeadDim)
	}
	s, err := ropeSections(l)
	if err == nil && s == nil {
		err = fmt.Errorf("missing metadata %s.rope.dimension_sections", hp.Arch)
	}
	if err != nil {
		return err
	}
	multiRoPE(r, s, interleaved)
	return nil
}

// ropeSections reads rope.dimension_sections, nil when the file has none:
// 4 counts of rotary pairs (t, h, w, e), or one integer read as 4 equal
// ones.
func ropeSections(l *Loader) ([]int32, error) {
	hp := l.HP
	key := hp.Arch + ".rope.dimension_sections"
	v, ok := l.f.Lookup(key)
	var s []int32
	switch {
	case !ok:
		return nil, nil
	case v.Type == gguf.ValueArray:
		a, err := l.f.Int32s(key)
		if err != nil {
			return nil, err
		}
		if len(a) != 4 {
			return nil, fmt.Errorf("metadata %s has %d values, want 4", key, len(a))
		}
		s = a
	default:
		x, err := l.f.Int(key)
		if err != nil {
			return nil, err
		}
		if x < 0 || x > math.MaxInt32 {
			return nil, fmt.Errorf("metadata %s = %d out of range", key, x)
		}
		s = []int32{int32(x), int32(x), int32(x), int32(x)}
	}
	t, h, w, e := int(s[0]), int(s[1]), int(s[2]), int(s[3])
	if t < 0 || h < 0 || w < 0 || e < 0 || t+h+w == 0 || t+h+w+e > hp.HeadDim {
		return nil, fmt.Errorf("metadata %s = %v: want counts of rotary pairs, none below 0, one of the first 3 above 0, summing to at most the head size %d", key, s, hp.HeadDim)
	}
	return s, nil
}

// multiRoPE makes r (NeoX) the multi-section RoPE of sections s for text
// tokens (vlRoPE's doc): the pairs of e, and in IMRoPE those past 3h, 3w
// or 3t, get the frequency factor +Inf.
func multiRoPE(r *nn.RoPE, s []int32, interleaved bool) {
	t, h, w, e := int(s[0]), int(s[1]), int(s[2]), int(s[3])
	sum := t + h + w + e
	var ff []float32
	for i := range r.Dims / 2 {
		sec := i % sum
		turns := sec < t+h+w
		if interleaved {
			turns = sec%3 == 1 && sec < 3*h || sec%3 == 2 && sec < 3*w || sec%3 == 0 && sec < 3*t
		}
		if turns {
			continue
		}
		if ff == nil {
			ff = slices.Clone(r.FreqFactors)
			if ff == nil {
				ff = slices.Repeat([]float32{1}, r.Dims/2)
			}
		}
		ff[i] = float32(math.Inf(1))
	}
	if ff != nil {
		r.FreqFactors = ff
	}
}

// glmMRoPE makes r the multi-section RoPE of GLM's vision-language text
// decoders (GLM-4.1V as glm4, GLM-4.5V and 4.6V as glm4moe) where the
// file asks for it: llama.cpp takes it when rope.dimension_sections has t
// and h above 0, and then rotates NeoX pairs over rope.dimension_count by
// the sections (MRoPE, vlRoPE's doc), whatever the architecture's own
// layout. False after an error.
func glmMRoPE(l *Loader, r *nn.RoPE) bool {
	if l.Err() != nil { // r may be missing
		return false
	}
	s, err := ropeSections(l)
	if err != nil {
		l.fail(err)
		return false
	}
	if s != nil && s[0] > 0 && s[1] > 0 {
		r.NeoX = true
		multiRoPE(r, s, false)
	}
	return true
}

// bindLayers appends layer(i, "blk.i.") to d for every layer and returns
// d, or nil after an error.
func (l *Loader) bindLayers(d *decoder, layer func(i int, p string) decoderLayer) Network {
	for i := range l.HP.Layers {
		d.layers = append(d.layers, layer(i, fmt.Sprintf("blk.%d.", i)))
	}
	if l.Err() != nil {
		return nil
	}
	return d
}

// qkNorms binds attn_q_norm and attn_k_norm: a head's values each, or, with
// rows, q's and k's whole rows.
func (l *Loader) qkNorms(p string, rows bool) (q, k *ml.Vector) {
	hp := l.HP
	qn, kn := hp.HeadDim, hp.HeadDim
	if rows {
		qn, kn = hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	}
	return l.Norm(p+"attn_q_norm", qn), l.Norm(p+"attn_k_norm", kn)
}

// postNormLayer binds a layer that norms outputs rather than inputs
// (olmo2, exaone4): attn_q, attn_k, attn_v and attn_output, q and k norms
// (per head, or with rows over whole rows), post_attention_norm, a SwiGLU
// MLP and post_ffw_norm.
func (l *Loader) postNormLayer(p string, rows bool) decoderLayer {
	hp := l.HP
	qd, kvd := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	ly := decoderLayer{
		q:            l.Linear(p+"attn_q", hp.Embd, qd),
		k:            l.Linear(p+"attn_k", hp.Embd, kvd),
		v:            l.Linear(p+"attn_v", hp.Embd, kvd),
		o:            l.Linear(p+"attn_output", qd, hp.Embd),
		postAttnNorm: l.Norm(p+"post_attention_norm", hp.Embd),
		ffn:          l.DenseFFN(p, hp.Embd, hp.FFN),
		postFFNNorm:  l.Norm(p+"post_ffw_norm", hp.Embd),
	}
	ly.qNorm, ly.kNorm = l.qkNorms(p, rows)
	return ly
}

// preNormLayer binds a llama layer's attention and norms: attn_norm,
// attn_q, attn_k and attn_v (each with its bias when the file has one),
// attn_output and the FFN's pre-norm called ffnNorm ("ffn_norm"; seed_oss
// names it post_attention_norm). The architecture binds the FFN.
func (l *Loader) preNormLayer(p, ffnNorm string) decoderLayer {
	ly := l.attnLayer(p)
	ly.ffnNorm = l.Norm(p+ffnNorm, l.HP.Embd)
	return ly
}

// attnLayer binds prefix's attn_norm and attention (attn_q, attn_k,
// attn_v, attn_output, each with its bias when the file has one).
func (l *Loader) attnLayer(p string) decoderLayer {
	hp := l.HP
	qd, kvd := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	return decoderLayer{
		attnNorm: l.Norm(p+"attn_norm", hp.Embd),
		q:        l.Linear(p+"attn_q", hp.Embd, qd),
		k:        l.Linear(p+"attn_k", hp.Embd, kvd),
		v:        l.Linear(p+"attn_v", hp.Embd, kvd),
		o:        l.Linear(p+"attn_output", qd, hp.Embd),
	}
}

// baseDecoder binds what every llama-style decoder has: the token
// embedding, the final norm, the output head (or the tied embedding), RoPE
// in the given layout and attention scaled by 1/sqrt(head size). The
// architecture binds its layers.
func (l *Loader) baseDecoder(neox bool) *decoder {
	d := l.normlessDecoder(neox)
	d.outputNorm = l.Norm("output_norm", l.HP.Embd)
	return d
}

// normlessDecoder is baseDecoder without the final norm (olmo has none to
// bind).
func (l *Loader) normlessDecoder(neox bool) *decoder {
	hp := l.HP
	return &decoder{
		hp:        hp,
		tokenEmbd: l.Linear("token_embd", hp.Embd, hp.Vocab),
		head:      Head{Output: l.LinearAlt(hp.Embd, hp.Vocab, "output", "token_embd")},
		rope:      l.RoPE(neox),
		attn:      ml.Attn{Heads: hp.Heads, KVHeads: hp.KVHeads, HeadDim: hp.HeadDim, Scale: float64(nn.InvSqrtf(hp.HeadDim))},
	}
}

func (m *decoder) Head() *Head { return &m.head }

// positioner is a Network that may give its attention positions otherwise
// than by RoPE: positions names how when no layer turns q and k, else "".
type positioner interface{ positions() string }

func (m *decoder) positions() string {
	attends := false
	for i := range m.layers {
		if m.layers[i].q != nil && !m.layers[i].noRoPE {
			return ""
		}
		attends = attends || m.layers[i].q != nil
	}
	switch {
	case !attends:
		return "no attention"
	case m.attn.Slopes != nil && m.posEmbd != nil:
		return "ALiBi and learned positions"
	case m.attn.Slopes != nil:
		return "ALiBi"
	case m.posEmbd != nil:
		return "learned positions"
	}
	return "no positions"
}

// MaxTokens is the number of learned positions (gpt2), or 0: RoPE has no
// limit.
func (m *decoder) MaxTokens() int {
	if m.posEmbd == nil {
		return 0
	}
	return m.posEmbd.Out
}

// normSpans RMS-norms each span of len(w.V) values of t's rows by w: each
// head of q or k, or the whole row.
func normSpans(b ml.Backend, t ml.Tensor, w *ml.Vector, eps float64) {
	if span := len(w.V); span != t.Cols() {
		t = b.View(t, t.Rows()*t.Cols()/span, span)
	}
	b.RMSNorm(t, t, w, eps)
}

func (m *decoder) Forward(b ml.Backend, tokens []int32) ml.Tensor {
	hp, n := m.hp, len(tokens)
	x := b.Alloc(n, hp.Embd) // the residual stream
	b.Embed(x, m.tokenEmbd, tokens)
	if m.posEmbd != nil {
		pos := make([]int32, n)
		for i := range pos {
			pos[i] = int32(i)
		}
		p := b.Alloc(n, hp.Embd)
		b.Embed(p, m.posEmbd, pos)
		b.Add(x, p)
	}
	if m.embScale != 0 {
		b.Scale(x, m.embScale)
	}
	if m.embNorm != nil {
		m.norm(b, x, x, m.embNorm, m.embNormB)
	}
	var emb ml.Tensor // embSkip's rows: the first layer's input once more (talkie's has neither positions nor an embedding scale)
	if m.embSkip != nil {
		emb = b.Alloc(n, hp.Embd)
		b.Embed(emb, m.tokenEmbd, tokens)
		if m.embNorm != nil {
			m.norm(b, emb, emb, m.embNorm, m.embNormB)
		}
	}
	m.runLayers(b, x, emb, 0, len(m.layers))
	m.norm(b, x, x, m.outputNorm, m.outNormB)
	return x
}

// runLayers runs layers [from, to) on the residual stream x (rows of
// tokens from position 0; emb the rows embSkip reads, if any).
func (m *decoder) runLayers(b ml.Backend, x, emb ml.Tensor, from, to int) {
	hp, n := m.hp, x.Rows()
	for i := from; i < to; i++ {
		ly := &m.layers[i]
		mark := b.Mark()
		h := b.Alloc(n, hp.Embd)
		ff := b.Alloc(n, hp.Embd)
		var logits ml.Tensor // rawRouter: the router's logits of the layer's input
		if ly.rawRouter {
			moe := ly.ffn.(*MoE)
			logits = b.Alloc(n, moe.Router.Experts)
			b.Linear(logits, x, moe.Gate)
		}
		var res ml.Tensor // resMoE's output, of the layer's input
		if ly.resMoE != nil {
			res = b.Alloc(n, hp.Embd)
			m.norm(b, h, x, ly.resMoENorm, nil)
			ly.resMoE.Forward(b, res, h)
		}

		// normed is the residual stream normed by w (plus bias) into h, or
		// itself.
		normed := func(w, bias *ml.Vector) ml.Tensor {
			if w == nil {
				return x
			}
			m.norm(b, h, x, w, bias)
			return h
		}
		var attnOut ml.Tensor               // what ffnReadsAttn's FFN reads
		if ly.q != nil || ly.mixer != nil { // the mixer (none in nemotron_h's MLP blocks)
			mix := h
			if ly.mixer != nil {
				mix = ff
				ly.mixer.forward(b, mix, normed(ly.attnNorm, ly.attnNormB))
				if ly.q != nil { // falcon-h1: attention beside the mixer on the same normed rows (h)
					m.attention(b, h, h, i, ly)
					b.Add(mix, h)
				}
			} else {
				if ly.parallel != serial && ly.ffnNorm != nil { // before normed's h holds the attention's rows
					ly.ffn.Forward(b, ff, normed(ly.ffnNorm, ly.ffnNormB))
				}
				hn := normed(ly.attnNorm, ly.attnNormB)
				if ly.parallel != serial && ly.ffnNorm == nil {
					ly.ffn.Forward(b, ff, hn)
				}
				m.attention(b, h, hn, i, ly)
			}
			if ly.postAttnNorm != nil {
				b.RMSNorm(mix, mix, ly.postAttnNorm, cmp.Or(m.postNormEps, hp.Eps))
			}
			if m.resScale != 0 {
				b.Scale(mix, m.resScale)
			}
			if ly.ffnReadsAttn {
				attnOut = mix
			}
			switch ly.parallel {
			case parallelSum:
				b.Add(mix, ff)
			case parallelFFNFirst:
				b.Add(x, ff)
			}
			b.Add(x, mix)
		}
		if ly.ffn != nil && (ly.parallel == serial || ly.parallel == parallelAfter) { // the FFN (none in nemotron_h's mixer blocks)
			switch {
			case ly.parallel == serial && logits != nil:
				ly.ffn.(*MoE).forwardLogits(b, ff, normed(ly.ffnNorm, ly.ffnNormB), logits)
			case ly.parallel == serial && attnOut != nil:
				ly.ffn.Forward(b, ff, attnOut)
			case ly.parallel == serial:
				ly.ffn.Forward(b, ff, normed(ly.ffnNorm, ly.ffnNormB))
			}
			if ly.postFFNNorm != nil {
				b.RMSNorm(ff, ff, ly.postFFNNorm, cmp.Or(m.postNormEps, hp.Eps))
			}
			if m.resScale != 0 {
				b.Scale(ff, m.resScale)
			}
			b.Add(x, ff)
		}
		if res != nil {
			b.Add(x, res)
		}
		if m.embSkip != nil {
			b.(ml.AltUp).MulCols(ff, emb, m.embSkip[i])
			b.Add(x, ff)
		}
		b.Release(mark)
	}
}

// normQK norms q and k by the layer's qNorm and kNorm: RMS norms (each
// head, or whole rows; with qkNormHeads each head by its own weights), or
// with qkLayerNorm LayerNorms of each head. A nil weight leaves its tensor
// as it is (K2-Horizon's norms are each optional).
func (m *decoder) normQK(b ml.Backend, q, k ml.Tensor, ly *decoderLayer) {
	for _, t := range []struct {
		x    ml.Tensor
		w, b *ml.Vector
	}{{q, ly.qNorm, ly.qNormB}, {k, ly.kNorm, ly.kNormB}} {
		if t.w == nil {
			continue
		}
		if m.qkLayerNorm == 0 && !m.qkNormHeads {
			normSpans(b, t.x, t.w, m.hp.Eps)
			continue
		}
		h := b.View(t.x, t.x.Rows()*t.x.Cols()/m.hp.HeadDim, m.hp.HeadDim)
		if m.qkNormHeads {
			b.RMSNorm(h, h, t.w, m.hp.Eps)
		} else {
			b.(ml.LayerNormer).LayerNorm(h, h, t.w, t.b, m.qkLayerNorm)
		}
	}
}

// attention computes layer i's attention over the normed rows h into dst.
func (m *decoder) attention(b ml.Backend, dst, h ml.Tensor, i int, ly *decoderLayer) {
	n := h.Rows()
	at := &m.attn
	if ly.attn != nil {
		at = ly.attn
	}
	qd, kvd := at.Heads*at.HeadDim, at.KVHeads*at.HeadDim
	mark := b.Mark()
	q, k, v := b.Alloc(n, qd), b.Alloc(n, kvd), b.Alloc(n, kvd)
	att := b.Alloc(n, qd)
	if ly.values != nil {
		b.Linears([]ml.Tensor{q, k}, h, []*ml.Matrix{ly.q, ly.k})
		ly.values.Forward(b, v, h)
	} else {
		b.Linears([]ml.Tensor{q, k, v}, h, []*ml.Matrix{ly.q, ly.k, ly.v})
	}
	if m.clampQKV > 0 {
		for _, t := range []ml.Tensor{q, k, v} {
			b.Clamp(t, m.clampQKV)
		}
	}
	if (ly.qNorm != nil || ly.kNorm != nil) && !m.qkNormAfterRoPE {
		m.normQK(b, q, k, ly)
	}
	if !ly.noRoPE {
		r := cmp.Or(ly.rope, m.rope)
		b.RoPE(q, at.Heads, r)
		b.RoPE(k, at.KVHeads, r)
	}
	if (ly.qNorm != nil || ly.kNorm != nil) && m.qkNormAfterRoPE {
		m.normQK(b, q, k, ly)
	}
	if m.scaleQ != nil {
		m.scaleQ(b, q)
	}
	if ly.noRoPE {
		m.nopeTemp.apply(b, q)
	}
	if ly.msa != nil && n > ly.msa.reach() {
		bs, ok := b.(ml.BlockSparse)
		if !ok {
			b.Fail(fmt.Errorf("%s: a window of %d tokens needs MSA's sparse attention, which the %T backend lacks (ml.BlockSparse)", m.hp.Arch, n, b))
			b.Release(mark)
			return
		}
		sparse := *at
		sparse.Keys = ly.msa.keys(b, bs, h, m.hp.Eps)
		at = &sparse
	}
	b.Attention(att, q, k, v, i, at)
	if ly.gate != nil {
		g := b.Alloc(n, ly.gate.Out)
		b.Linear(g, h, ly.gate)
		if ly.gateCols != nil {
			wide := b.Alloc(n, qd)
			b.(colGatherer).GatherCols(wide, g, ly.gateCols)
			g = wide
		}
		b.GateMul(att, g, ly.gateFn)
	}
	if ly.attnSubNorm != nil {
		b.RMSNorm(att, att, ly.attnSubNorm, m.hp.Eps)
	}
	if ly.vCols != nil {
		narrow := b.Alloc(n, len(ly.vCols))
		b.(colGatherer).GatherCols(narrow, att, ly.vCols)
		att = narrow
	}
	b.Linear(dst, att, ly.o)
	if m.attnOutScale != 0 {
		b.Scale(dst, m.attnOutScale)
	}
	b.Release(mark)
}
