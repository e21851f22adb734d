package mkmodel

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"ppl.dev/gguf"
)

// Config describes a model to generate.
type Config struct {
	Shape
	Type      FileType
	Seed      uint64
	Name      string // general.name
	Tokenizer Tokenizer

	// Embed and Output, when set, replace the random token embedding and
	// output matrices (Vocab×Embd each, row-major; Output is ignored for a
	// tied model). Norm weights are then exactly 1 rather than random.
	Embed, Output []float32
	// Residual scales the weights that write into the residual stream
	// (attn_output and ffn_down): 1 for an ordinary random model, small
	// for a model whose blocks should be near-identity.
	Residual float64
}

// Tensor is one tensor of a generated model, before its data is written.
type Tensor struct {
	Name  string
	Type  gguf.Type
	Shape []uint64 // ne0 first
}

// Tensors lists the tensors of the model in file order with their types.
func (c *Config) Tensors() []Tensor {
	var out []Tensor
	c.tensors(func(name string, shape []uint64, layer int, _ RowFunc) {
		out = append(out, Tensor{name, c.tensorType(name, shape, layer), shape})
	})
	return out
}

func (c *Config) tensorType(name string, shape []uint64, layer int) gguf.Type {
	dims := len(shape) // as ggml_n_dims counts them: trailing 1s do not
	for dims > 1 && shape[dims-1] == 1 {
		dims--
	}
	if strings.Contains(name, "ffn_gate_tid2eid") {
		return gguf.TypeI32 // expert ids, as llama.cpp reads them
	}
	if c.glm5Next() && strings.Contains(name, "indexer_compressor_ape") {
		return gguf.TypeF32 // llama.cpp adds it to the gates, which ggml's ADD takes in F32 only (probed: an F16 one aborts)
	}
	if c.glm5Next() && c.Type.Quantized() && dims >= 2 && glm5Kept(name) {
		return gguf.TypeF16
	}
	return c.Type.TensorType(name, int(shape[0]), dims, layer, c.Layers, c.Heads/c.KVHeads, c.Tied)
}

// rng returns a generator for one row of one tensor: the weights depend
// only on the seed, the tensor's name and the row, never on the order or
// parallelism of generation.
func (c *Config) rng(name string, row int) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(c.Seed^h.Sum64(), uint64(row)))
}

// normal fills rows with N(0, std²) weights.
func (c *Config) normal(name string, std float64) RowFunc {
	return func(r int, dst []float32) {
		g := c.rng(name, r)
		for i := range dst {
			dst[i] = float32(g.NormFloat64() * std)
		}
	}
}

// gain fills a norm weight with base + N(0, jitter²), or exactly 1 for a
// model with given embeddings.
func (c *Config) gain(name string, base, jitter float64) RowFunc {
	if c.Embed != nil {
		return func(_ int, dst []float32) {
			for i := range dst {
				dst[i] = 1
			}
		}
	}
	return func(r int, dst []float32) {
		g := c.rng(name, r)
		for i := range dst {
			dst[i] = float32(base + float64(g.NormFloat64()*jitter))
		}
	}
}

// tiedEmbedStd is the standard deviation of a tied model's random token
// embeddings.
const tiedEmbedStd = 0.02

func matrixRows(m []float32, width int) RowFunc {
	return func(r int, dst []float32) { copy(dst, m[r*width:(r+1)*width]) }
}

// tensors calls add for each tensor in file order (the order of
// llama.cpp's convert script: embedding, blocks, output norm, output).
// Weight scales follow the oracle's make_models.py: projections reading
// the residual stream have standard deviation 1/sqrt(width in), so
// activations keep unit scale through the layers.
func (c *Config) tensors(add func(name string, shape []uint64, layer int, fill RowFunc)) {
	e, v := uint64(c.Embd), uint64(c.Vocab)
	q, kv, ff := uint64(c.Heads*c.HeadDim), uint64(c.KVHeads*c.HeadDim), uint64(c.FFN)
	res := c.Residual
	// A tied output matrix scores the current token's own embedding
	// against itself: with unit-variance embeddings that logit grows as
	// the width and a random model predicts "repeat the last token" with
	// near certainty. Small embeddings (0.02, as in GPT-2's initialization)
	// leave the residual stream to the blocks' outputs instead.
	if c.gemma3n() {
		c.gemma3nTensors(add)
		return
	}
	embStd := 1.0
	if c.Tied {
		embStd = tiedEmbedStd
	}
	if c.Embed != nil {
		add("token_embd.weight", []uint64{e, v}, -1, matrixRows(c.Embed, c.Embd))
	} else {
		add("token_embd.weight", []uint64{e, v}, -1, c.normal("token_embd.weight", embStd))
	}
	if c.Arch == "bloom" || c.Arch == "rwkv7" || c.Arch == "rwkv6" { // the embeddings' LayerNorm
		add("token_embd_norm.weight", []uint64{e}, -1, c.gain("token_embd_norm.weight", 1, 0.1))
		add("token_embd_norm.bias", []uint64{e}, -1, c.normal("token_embd_norm.bias", 0.1))
	}
	if c.Arch == "gpt2" { // learned positions, a row per position of the context
		add("position_embd.weight", []uint64{e, uint64(c.Context)}, -1, c.normal("position_embd.weight", 0.5*embStd))
	}
	for i := 0; i < c.Layers; i++ {
		if c.qwen4exp() {
			c.q4Layer(add, i)
			continue
		}
		if c.hybrid() {
			c.hybridLayer(add, i)
			continue
		}
		if c.ssmOnly() || c.Arch == "jamba" {
			c.ssmLayer(add, i)
			continue
		}
		if c.rwkv7() {
			c.rwkv7Layer(add, i)
			continue
		}
		if c.rwkv6() {
			c.rwkv6Layer(add, i)
			continue
		}
		if c.plamo2() {
			c.plamo2Layer(add, i)
			continue
		}
		if c.grok() {
			c.grokLayer(add, i)
			continue
		}
		if c.minicpm3() {
			c.minicpm3Layer(add, i)
			continue
		}
		if c.arctic() {
			c.arcticLayer(add, i)
			continue
		}
		if c.nemotron() {
			c.nemotronLayer(add, i)
			continue
		}
		if c.lfm2() {
			c.lfm2Layer(add, i)
			continue
		}
		if c.deci() {
			c.deciLayer(add, i)
			continue
		}
		if c.mimo2() {
			c.mimo2Layer(add, i)
			continue
		}
		if c.step35() {
			c.step35Layer(add, i)
			continue
		}
		if c.maion() {
			c.maionLayer(add, i)
			continue
		}
		if c.spark() {
			c.sparkLayer(add, i)
			continue
		}
		if c.talkie() {
			c.talkieLayer(add, i)
			continue
		}
		if c.minimax01() {
			c.minimax01Layer(add, i)
			continue
		}
		if c.hrm() {
			c.hrmLayer(add, i)
			continue
		}
		if c.k2() {
			c.k2Layer(add, i)
			continue
		}
		if c.graniteSwitch() {
			c.switchLayer(add, i)
			continue
		}
		if c.kdaHybrid() {
			c.kimiLayer(add, i)
			continue
		}
		if c.glm5Next() {
			c.glm5Layer(add, i)
			continue
		}
		if c.dots3note() {
			c.dots3Layer(add, i)
			continue
		}
		if c.hyV4() {
			c.hyV4Layer(add, i)
			continue
		}
		if c.deepseek4() {
			c.dsv4Layer(add, i)
			continue
		}
		if c.minimaxM3() {
			c.m3Layer(add, i)
			continue
		}
		if c.smallThinker() {
			c.smallThinkerLayer(add, i)
			continue
		}
		if c.bitnet() {
			c.bitnetLayer(add, i)
			continue
		}
		if c.openelm() {
			c.openelmLayer(add, i)
			continue
		}
		if c.fused() {
			c.fusedLayer(add, i)
			continue
		}
		p := fmt.Sprintf("blk.%d.", i)
		olmo := c.Arch == "olmo2" || c.Arch == "exaone4" || c.Arch == "olmo"                                    // no norms before the attention and the FFN (olmo's have no weights)
		post := olmo && c.Arch != "olmo" || c.Arch == "gemma2" || c.Arch == "afmoe" || c.Arch == "muse-glimmer" // norms after the attention and the FFN
		if !olmo {
			add(p+"attn_norm.weight", []uint64{e}, i, c.gain(p+"attn_norm.weight", 1, 0.1))
			c.normBias(add, p+"attn_norm.bias", i)
		}
		if c.falconH1() { // the mixer beside the attention
			c.mambaMixer(add, i)
		}
		if c.mamba() && !c.falconH1() && c.recurrent(i) {
			c.mambaMixer(add, i)
		} else {
			if c.Arch == "bailingmoe2" || c.Arch == "gptneox" || c.Arch == "falcon" || c.Arch == "gpt2" || c.Arch == "dbrx" || c.alibi() || c.Arch == "qwen" || c.Arch == "cogvlm" {
				c.fusedQKV(add, i)
			} else {
				add(p+"attn_q.weight", []uint64{e, q}, i, c.normal(p+"attn_q.weight", 1.2*invSqrt(e)))
				if c.qkvBias() {
					add(p+"attn_q.bias", []uint64{q}, i, c.normal(p+"attn_q.bias", 0.1))
				}
				add(p+"attn_k.weight", []uint64{e, kv}, i, c.normal(p+"attn_k.weight", 1.2*invSqrt(e)))
				if c.qkvBias() {
					add(p+"attn_k.bias", []uint64{kv}, i, c.normal(p+"attn_k.bias", 0.1))
				}
				add(p+"attn_v.weight", []uint64{e, kv}, i, c.normal(p+"attn_v.weight", invSqrt(e)))
				if c.qkvBias() {
					add(p+"attn_v.bias", []uint64{kv}, i, c.normal(p+"attn_v.bias", 0.1))
				}
			}
			add(p+"attn_output.weight", []uint64{q, e}, i, c.normal(p+"attn_output.weight", res*invSqrt(q)))
			if c.Arch == "phimoe" || c.geluMLP() || c.Arch == "jais" || c.Arch == "jais2" || c.Arch == "pangu-embedded" {
				add(p+"attn_output.bias", []uint64{e}, i, c.normal(p+"attn_output.bias", 0.1))
			}
			if c.Arch == "granite_swa" { // an attention sink per head
				add(p+"attn_sinks.weight", []uint64{uint64(c.Heads)}, i, c.normal(p+"attn_sinks.weight", 1))
			}
			if c.Arch == "afmoe" || c.Arch == "muse-glimmer" { // the attention's sigmoid gate
				add(p+"attn_gate.weight", []uint64{e, q}, i, c.normal(p+"attn_gate.weight", invSqrt(e)))
			}
			switch perHead, rows := c.qkNorms(); {
			case perHead:
				add(p+"attn_q_norm.weight", []uint64{uint64(c.HeadDim)}, i, c.gain(p+"attn_q_norm.weight", 1, 0.2))
				add(p+"attn_k_norm.weight", []uint64{uint64(c.HeadDim)}, i, c.gain(p+"attn_k_norm.weight", 1, 0.2))
				if c.Arch == "apertus" { // biases the converter writes and llama.cpp does not use
					add(p+"attn_q_norm.bias", []uint64{uint64(c.HeadDim)}, i, c.normal(p+"attn_q_norm.bias", 0.1))
					add(p+"attn_k_norm.bias", []uint64{uint64(c.HeadDim)}, i, c.normal(p+"attn_k_norm.bias", 0.1))
				}
			case rows: // q and k normed whole, not per head
				add(p+"attn_q_norm.weight", []uint64{q}, i, c.gain(p+"attn_q_norm.weight", 1, 0.2))
				add(p+"attn_k_norm.weight", []uint64{kv}, i, c.gain(p+"attn_k_norm.weight", 1, 0.2))
			case c.QKLayerNorm || c.Arch == "chameleon": // weights for each head (chameleon's with biases)
				hd := uint64(c.HeadDim)
				add(p+"attn_q_norm.weight", []uint64{hd, uint64(c.Heads)}, i, c.gain(p+"attn_q_norm.weight", 1, 0.2))
				add(p+"attn_k_norm.weight", []uint64{hd, uint64(c.KVHeads)}, i, c.gain(p+"attn_k_norm.weight", 1, 0.2))
				if c.Arch == "chameleon" {
					add(p+"attn_q_norm.bias", []uint64{hd, uint64(c.Heads)}, i, c.normal(p+"attn_q_norm.bias", 0.1))
					add(p+"attn_k_norm.bias", []uint64{hd, uint64(c.KVHeads)}, i, c.normal(p+"attn_k_norm.bias", 0.1))
				}
			}
		}
		if post {
			add(p+"post_attention_norm.weight", []uint64{e}, i, c.gain(p+"post_attention_norm.weight", res, 0.1*res))
		}
		if !olmo && !c.cohere() && !(c.Arch == "stablelm" && c.QKLayerNorm) && c.Arch != "phi2" && c.Arch != "falcon" && c.Arch != "plamo" { // Cohere's, StableLM 2 12B's, Phi-2's, Falcon's and PLaMo's MLPs read the attention's normed rows
			ffnNorm := p + "ffn_norm.weight"
			switch c.Arch {
			case "seed_oss": // its FFN pre-norm's name
				ffnNorm = p + "post_attention_norm.weight"
			case "falcon-h1": // llama.cpp 0.7.0 binds it without the suffix
				ffnNorm = p + "ffn_norm"
			case "dbrx":
				ffnNorm = p + "attn_output_norm.weight"
			}
			add(ffnNorm, []uint64{e}, i, c.gain(ffnNorm, 1, 0.1))
			c.normBias(add, p+"ffn_norm.bias", i)
		}
		if c.moe() && i >= c.DenseLead && (c.MoEStep <= 1 || (i+1)%c.MoEStep == 0) {
			// The router, then the experts' stacks (ne {in, out, experts}).
			// A token's output sums ExpertsUsed experts weighted to 1, so
			// each expert keeps the dense MLP's scale.
			nx := uint64(c.Experts)
			c.expertTensors(add, i)
			if c.grove() {
				c.groveTensors(add, i)
			}
			if c.selBias() { // the routing's selection bias (hy_v3's named without .bias, as llama.cpp reads it)
				name := p + "exp_probs_b.bias"
				if c.Arch == "hy_v3" {
					name = p + "exp_probs_b"
				}
				add(name, []uint64{nx}, i, c.normal(name, 0.1))
			}
			if c.SharedFFN > 0 && !c.hybrid() { // one shared expert
				sf := uint64(c.SharedFFN)
				if c.Arch == "qwen2moe" { // its gate, one value per token
					add(p+"ffn_gate_inp_shexp.weight", []uint64{e}, i, c.normal(p+"ffn_gate_inp_shexp.weight", 1.5*invSqrt(e)))
				}
				add(p+"ffn_gate_shexp.weight", []uint64{e, sf}, i, c.normal(p+"ffn_gate_shexp.weight", invSqrt(e)))
				add(p+"ffn_up_shexp.weight", []uint64{e, sf}, i, c.normal(p+"ffn_up_shexp.weight", invSqrt(e)))
				add(p+"ffn_down_shexp.weight", []uint64{sf, e}, i, c.normal(p+"ffn_down_shexp.weight", res*invSqrt(sf)))
			}
			if post {
				add(p+"post_ffw_norm.weight", []uint64{e}, i, c.gain(p+"post_ffw_norm.weight", res, 0.1*res))
			}
			continue
		}
		if c.Arch != "arcee" && c.Arch != "apertus" && !c.geluMLP() && c.Arch != "falcon" && c.Arch != "nemotron" && c.Arch != "mpt" && c.Arch != "jais2" { // their MLPs are ungated
			add(p+"ffn_gate.weight", []uint64{e, ff}, i, c.normal(p+"ffn_gate.weight", invSqrt(e)))
			if c.Arch == "jais" {
				add(p+"ffn_gate.bias", []uint64{ff}, i, c.normal(p+"ffn_gate.bias", 0.1))
			}
		}
		add(p+"ffn_up.weight", []uint64{e, ff}, i, c.normal(p+"ffn_up.weight", invSqrt(e)))
		if c.geluMLP() || c.Arch == "jais" || c.Arch == "jais2" { // GELU of a biased up, Jais's biased SwiGLU, Jais 2's ReLU²
			add(p+"ffn_up.bias", []uint64{ff}, i, c.normal(p+"ffn_up.bias", 0.1))
		}
		add(p+"ffn_down.weight", []uint64{ff, e}, i, c.normal(p+"ffn_down.weight", res*invSqrt(ff)))
		if c.geluMLP() || c.Arch == "jais" || c.Arch == "jais2" {
			add(p+"ffn_down.bias", []uint64{e}, i, c.normal(p+"ffn_down.bias", 0.1))
		}
		if c.Arch == "cogvlm" { // the visual expert's projections, which text tokens do not use
			add(p+"vis_attn_qkv.weight", []uint64{e, 3 * q}, i, c.normal(p+"vis_attn_qkv.weight", invSqrt(e)))
			add(p+"vis_attn_output.weight", []uint64{q, e}, i, c.normal(p+"vis_attn_output.weight", invSqrt(q)))
			add(p+"vis_gate.weight", []uint64{e, ff}, i, c.normal(p+"vis_gate.weight", invSqrt(e)))
			add(p+"vis_up.weight", []uint64{e, ff}, i, c.normal(p+"vis_up.weight", invSqrt(e)))
			add(p+"vis_down.weight", []uint64{ff, e}, i, c.normal(p+"vis_down.weight", invSqrt(ff)))
		}
		if post {
			add(p+"post_ffw_norm.weight", []uint64{e}, i, c.gain(p+"post_ffw_norm.weight", res, 0.1*res))
		}
	}
	// Logit spread about 2: a tied head's rows have standard deviation
	// tiedEmbedStd, so its gain is 2/(tiedEmbedStd·sqrt(width)); an untied
	// one has 1/sqrt(width) weights.
	gain := 2.0
	if c.Tied {
		gain = 2 / (tiedEmbedStd * math.Sqrt(float64(e)))
	}
	outNorm := "output_norm.weight"
	if c.lfm2() {
		outNorm = "token_embd_norm.weight"
	}
	if c.qwen4exp() { // the last hyper-connection (the output norm's gain), and the PLE table
		c.q4Mix(add, "output_hc_", -1, gain, false)
		c.q4Table(add)
	} else if c.Arch != "olmo" && !c.talkie() && !c.hrm() { // their final norms have no weights
		add(outNorm, []uint64{e}, -1, c.gain(outNorm, gain, 0.15*gain))
	}
	c.normBias(add, "output_norm.bias", -1)
	if !c.Tied {
		if c.Output != nil {
			add("output.weight", []uint64{e, v}, -1, matrixRows(c.Output, c.Embd))
		} else {
			add("output.weight", []uint64{e, v}, -1, c.normal("output.weight", invSqrt(e)))
		}
		if c.Arch == "phimoe" || c.Arch == "phi2" {
			add("output.bias", []uint64{v}, -1, c.normal("output.bias", 0.2))
		}
	}
	c.phi3Factors(add)
	if c.hyV4() {
		c.hcHead(add, hyV4Streams)
	}
	if c.deepseek4() {
		c.hcHead(add, mhcStreams)
	}
	if c.kimiK3() {
		c.k3Head(add)
	}
}

// Check validates the configuration.
func (c *Config) Check() error {
	if err := c.Shape.Check(); err != nil {
		return err
	}
	if c.Tokenizer.NVocab != c.Vocab {
		return fmt.Errorf("tokenizer has %d tokens, shape says %d", c.Tokenizer.NVocab, c.Vocab)
	}
	n := c.Vocab * c.Embd
	if c.Embed != nil && len(c.Embed) != n || c.Output != nil && len(c.Output) != n {
		return fmt.Errorf("given embedding matrices do not have %d×%d values", c.Vocab, c.Embd)
	}
	if c.Residual < 0 || math.IsNaN(c.Residual) {
		return fmt.Errorf("bad residual scale %v", c.Residual)
	}
	return nil
}

// Write generates the model and writes it to path atomically. Tensor data
// is generated and quantized a chunk of rows at a time while writing, so
// memory use stays small whatever the model's size. The file depends only
// on the configuration.
func Write(path string, c *Config) error {
	if err := c.Check(); err != nil {
		return fmt.Errorf("mkmodel: %w", err)
	}
	w := gguf.NewWriter()
	a := c.Arch
	w.Add("general.architecture", a)
	w.Add("general.name", c.Name)
	w.Add(a+".context_length", uint32(c.Context))
	w.Add(a+".embedding_length", uint32(c.Embd))
	blocks := c.Layers
	if c.hrm() { // every pass's layers
		blocks = c.hrmSlots()
	}
	w.Add(a+".block_count", uint32(blocks))
	switch {
	case c.ssmOnly(): // no attention, no FFN: zeros, as the converter writes them
		w.Add(a+".feed_forward_length", uint32(0))
		w.Add(a+".attention.head_count", uint32(0))
	case c.rwkv7():
		c.rwkv7Keys(w)
	case c.rwkv6():
		c.rwkv6Keys(w)
	default:
		c.attnKeys(w)
	}
	w.Add(a+".attention.layer_norm_rms_epsilon", float32(c.Eps))
	if a == "llama4" {
		w.Add(a+".rope.dimension_count", uint32(c.HeadDim))
		w.Add(a+".interleave_moe_layer_step", uint32(max(c.MoEStep, 1)))
	}
	if a == "llama" {
		w.Add(a+".rope.dimension_count", uint32(c.HeadDim))
		w.Add(a+".vocab_size", uint32(c.Vocab))
	}
	if c.hybrid() {
		c.hybridKeys(w)
	}
	if c.mamba() {
		c.mambaKeys(w)
	}
	if c.mamba1() {
		c.mamba1Keys(w)
	}
	if c.plamo2() {
		c.plamo2Keys(w)
	}
	if c.grok() {
		c.grokKeys(w)
	}
	if c.minicpm3() {
		c.minicpm3Keys(w)
	}
	if c.lfm2() {
		c.lfm2Keys(w)
	}
	if c.fused() || c.Arch == "phimoe" {
		c.fusedKeys(w)
	}
	if c.deci() {
		c.deciKeys(w)
	}
	if c.mimo2() {
		c.mimo2Keys(w)
	}
	if c.step35() {
		c.step35Keys(w)
	}
	if c.maion() {
		c.maionKeys(w)
	}
	if c.spark() {
		c.sparkKeys(w)
	}
	if c.talkie() {
		c.talkieKeys(w)
	}
	if c.minimax01() {
		c.minimax01Keys(w)
	}
	if c.hrm() {
		c.hrmKeys(w)
	}
	if c.k2() {
		c.k2Keys(w)
	}
	if c.graniteSwitch() {
		c.switchKeys(w)
	}
	if c.kdaHybrid() {
		c.kimiKeys(w)
	}
	if c.glm5Next() {
		c.glm5Keys(w)
	}
	if c.dots3note() {
		c.dots3Keys(w)
	}
	if c.hyV4() {
		c.hyV4Keys(w)
	}
	if c.deepseek4() {
		c.dsv4Keys(w)
	}
	if c.minimaxM3() {
		c.m3Keys(w)
	}
	if c.qwen4exp() {
		c.q4Keys(w)
	}
	if c.smallThinker() {
		c.smallThinkerKeys(w)
	}
	if c.openelm() {
		c.openelmKeys(w)
	}
	if c.gemma3n() {
		c.gemma3nKeys(w)
	} else if c.Window > 0 {
		w.Add(a+".attention.sliding_window", uint32(c.Window))
		if a == "mellum" || a == "mimo2" || a == "step35" || a == "maple" || a == "laguna" || a == "spark2_5" || a == "muse-glimmer" { // their sliding layers' own base
			w.Add(a+".rope.freq_base_swa", float32(c.RopeBase/2))
		}
		if a == "maple" { // the experts' SwiGLU clamp per layer, the reference's 7 (llama.cpp requires the key)
			w.Add(a+".swiglu_clamp_exp", slices.Repeat([]float32{7}, c.Layers))
		}
		if a == "olmo2" || a == "granite_swa" || a == "mellum" || a == "mimo2" || a == "maple" || a == "muse-glimmer" { // the converter's flags for OLMo 3's layer_types
			slides := make([]bool, c.Layers)
			for i := range slides {
				slides[i] = (i+1)%4 != 0
			}
			w.Add(a+".attention.sliding_window_pattern", slides)
		}
	}
	if c.YaRN != 0 {
		w.Add(a+".rope.scaling.type", "yarn")
		w.Add(a+".rope.scaling.factor", float32(c.YaRN))
		w.Add(a+".rope.scaling.attn_factor", float32(1+float64(0.1*math.Log(c.YaRN))))
		w.Add(a+".rope.scaling.original_context_length", uint32(c.Context/int(c.YaRN)))
	}
	if a == "gemma2" { // Gemma 2's window and soft-caps
		if c.Window == 0 {
			w.Add(a+".attention.sliding_window", uint32(4096))
		}
		w.Add(a+".attn_logit_softcapping", float32(50))
		w.Add(a+".final_logit_softcapping", float32(30))
	}
	if c.cohere() { // Command R7B's: LayerNorms, a window in 3 layers of 4, logits scaled
		w.Add(a+".attention.layer_norm_epsilon", float32(1e-5))
		if c.Window == 0 && (a == "cohere2" || a == "cohere2moe") {
			w.Add(a+".attention.sliding_window", uint32(4096))
		}
		w.Add(a+".logit_scale", float32(0.25))
	}
	if a == "apertus" { // xIELU's parameters per layer, near Apertus-8B's
		an, ap, beta, eps := make([]float32, c.Layers), make([]float32, c.Layers), make([]float32, c.Layers), make([]float32, c.Layers)
		for i := range c.Layers {
			an[i], ap[i], beta[i], eps[i] = 0.8+float32(0.1*float32(i)), 0.8-float32(0.05*float32(i)), 0.5, -1e-6
		}
		w.Add("xielu.alpha_n", an)
		w.Add("xielu.alpha_p", ap)
		w.Add("xielu.beta", beta)
		w.Add("xielu.eps", eps)
	}
	if a == "orion" || a == "stablelm" || c.geluMLP() || a == "falcon" || a == "nemotron" || a == "olmo" || a == "dbrx" || a == "mpt" || a == "jais" || a == "jais2" { // their LayerNorms' epsilon
		w.Add(a+".attention.layer_norm_epsilon", float32(1e-5))
	}
	if a == "mpt" || a == "jais" { // ALiBi's maximum bias (bloom's and refact's is llama.cpp's fixed 8)
		w.Add(a+".attention.max_alibi_bias", float32(8))
	}
	if a == "chameleon" && c.SwinNorm {
		w.Add(a+".swin_norm", true)
	}
	if a == "dbrx" { // DBRX's clip_qkv
		w.Add(a+".attention.clamp_kqv", float32(8))
	}
	if a == "gptneox" { // GPT-NeoX-20B's and Pythia's parallel residual
		w.Add(a+".use_parallel_residual", true)
	}
	if a == "stablelm" || a == "phi2" || a == "gptneox" || a == "nemotron" {
		w.Add(a+".rope.dimension_count", uint32(c.ropeDims()))
	}
	if a == "minicpm" { // MiniCPM's multipliers as the converter writes them: scale_emb, scale_depth/sqrt(layers), hidden/dim_model_base
		w.Add(a+".embedding_scale", float32(12))
		w.Add(a+".residual_scale", float32(1.4/math.Sqrt(float64(c.Layers))))
		w.Add(a+".logit_scale", float32(float64(c.Embd)/256))
	}
	if a == "granite_swa" { // RoPE in the sliding layers only
		ropes := make([]bool, c.Layers)
		for i := range ropes {
			ropes[i] = c.Window == 0 || (i+1)%4 != 0
		}
		w.Add(a+".attention.rope_pattern", ropes)
	}
	if a == "hunyuan_vl" { // the converter's raw base with its NTK alpha; multimodal RoPE's sections, the last quarter of the pairs unturned by text
		w.Add(a+".rope.scaling.alpha", float32(8))
		q := int32(c.HeadDim / 8)
		w.Add(a+".rope.dimension_sections", []int32{q, q, q, q})
	}
	if a == "paddleocr" { // PaddleOCR-VL's MRoPE sections [16, 24, 24] of its 64 pairs, in proportion
		q := int32(c.HeadDim / 16)
		w.Add(a+".rope.dimension_sections", []int32{2 * q, 3 * q, 3 * q, 0})
	}
	if a == "muse-glimmer" { // the logits' multiplier and a soft-cap low enough to bite (llama.cpp requires the first)
		w.Add(a+".logit_scale", float32(0.75))
		w.Add(a+".final_logit_softcapping", float32(4))
	}
	if a == "granite" || a == "granitemoe" || a == "granite_swa" || a == "graniteswitch" { // Granite-3.3-8B's multipliers, its attention's 1/head
		w.Add(a+".embedding_scale", float32(12))
		w.Add(a+".residual_scale", float32(0.22))
		w.Add(a+".attention.scale", float32(1/float64(c.HeadDim)))
		w.Add(a+".logit_scale", float32(16))
	}
	if c.moe() && !c.hybrid() {
		w.Add(a+".expert_count", uint32(c.Experts))
		w.Add(a+".expert_used_count", uint32(c.ExpertsUsed))
		switch a {
		case "llama", "granitehybrid", "olmoe", "granitemoe", "phimoe", "dbrx", "jamba", "arctic", "minimax-01": // their files give feed_forward_length only
		default:
			w.Add(a+".expert_feed_forward_length", uint32(c.ExpertFFN))
		}
		c.moeKeys(w)
		if c.grove() {
			c.groveKeys(w)
		}
		if a == "minimax-m2" {
			w.Add(a+".expert_gating_func", uint32(2)) // sigmoid
			w.Add(a+".rope.dimension_count", uint32(c.ropeDims()))
		}
		if a == "ernie4_5-moe" {
			w.Add(a+".leading_dense_block_count", uint32(c.DenseLead))
			w.Add(a+".interleave_moe_layer_step", uint32(1))
			if c.SharedFFN > 0 {
				w.Add(a+".expert_shared_count", uint32(1))
				w.Add(a+".expert_shared_feed_forward_length", uint32(c.SharedFFN))
			}
		}
		if a == "hy_v3" { // dense layers told by their tensors; the gating function left to its default (sigmoid)
			w.Add(a+".expert_shared_feed_forward_length", uint32(c.SharedFFN))
			w.Add(a+".expert_weights_norm", true)
			w.Add(a+".expert_weights_scale", float32(2.5))
		}
		if a == "dots1" { // its shared expert is as wide as an expert (llama.cpp: n_ff_exp · count)
			c.sigmoidRoutingKeys(w)
		}
	}
	w.Add("general.file_type", c.Type.ID)
	for _, kv := range c.Tokenizer.KVs {
		w.Add(kv.Key, kv.Value)
	}
	if c.Type.Quantized() {
		w.Add("general.quantization_version", uint32(2))
	}
	var terr error
	c.tensors(func(name string, shape []uint64, layer int, fill RowFunc) {
		if err := addRows(w, name, c.tensorType(name, shape, layer), shape, fill); err != nil && terr == nil {
			terr = err
		}
	})
	if terr != nil {
		return fmt.Errorf("mkmodel: %s: %w", path, terr)
	}
	if err := w.WriteFile(path); err != nil {
		return fmt.Errorf("mkmodel: %s: %w", path, err)
	}
	return nil
}

// attnKeys writes the attention's and the FFN's sizes and RoPE's base.
func (c *Config) attnKeys(w *gguf.Writer) {
	a := c.Arch
	if !c.nemotron() && !c.gemma3n() && !c.deci() && !c.openelm() { // per layer (mambaKeys, gemma3nKeys, deciKeys, openelmKeys)
		ffn := c.FFN
		if a == "qwen" { // Qwen's intermediate_size, twice its MLP's width
			ffn *= 2
		}
		w.Add(a+".feed_forward_length", uint32(ffn))
	}
	if !c.deci() && !c.mimo2() && !c.openelm() && !c.step35() && !c.spark() {
		w.Add(a+".attention.head_count", uint32(c.Heads))
	}
	if c.dots3note() || c.hyV4() || c.deepseek4() { // one latent KV head; deepseek4's one key, its value
		w.Add(a+".attention.head_count_kv", uint32(1))
	} else if !c.mamba() && !c.lfm2() && !c.deci() && !c.mimo2() && !c.openelm() && !c.step35() && !c.spark() && !c.kdaHybrid() && !c.glm5Next() && a != "jamba" && a != "plamo2" { // per layer (mambaKeys, lfm2Keys, deciKeys, mimo2Keys, openelmKeys, step35Keys, sparkKeys, kimiKeys, glm5Keys, mamba1Keys, plamo2Keys)
		w.Add(a+".attention.head_count_kv", uint32(c.KVHeads))
	}
	if c.dots3note() || c.hyV4() { // the (full) layers' latent cache's key and value (dots3Keys the sliding layers')
		kvr, _, _ := c.dots3Latent(false)
		w.Add(a+".attention.key_length", uint32(kvr+c.dots3Rope()))
		w.Add(a+".attention.value_length", uint32(kvr))
	} else if c.glm5Next() { // the latent cache's key and value: c (no RoPE)
		w.Add(a+".attention.key_length", uint32(c.glm5KVLora()))
		w.Add(a+".attention.value_length", uint32(c.glm5KVLora()))
	} else if c.kdaHybrid() { // the latent cache's key and value: [c | k_pe] and c
		w.Add(a+".attention.key_length", uint32(c.kimiKVLora()+c.kimiRope()))
		w.Add(a+".attention.value_length", uint32(c.kimiKVLora()))
	} else if c.minicpm3() { // key heads [nope | rope], value heads of HeadDim
		w.Add(a+".attention.key_length", uint32(c.HeadDim+c.ropeDims()))
		w.Add(a+".attention.value_length", uint32(c.HeadDim))
	} else {
		w.Add(a+".attention.key_length", uint32(c.HeadDim))
		w.Add(a+".attention.value_length", uint32(c.valueDim()))
	}
	w.Add(a+".rope.freq_base", float32(c.RopeBase))
}

// expertTensors adds layer i's router, ffn_gate_inp, and its experts'
// SwiGLU stacks ffn_gate_exps, ffn_up_exps and ffn_down_exps (ne {in,
// out, experts}): a token's output sums ExpertsUsed experts weighted to 1,
// so each expert keeps the dense MLP's scale.
func (c *Config) expertTensors(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, nx, fx := uint64(c.Embd), uint64(c.Experts), uint64(c.ExpertFFN)
	add(p+"ffn_gate_inp.weight", []uint64{e, nx}, i, c.normal(p+"ffn_gate_inp.weight", invSqrt(e)))
	add(p+"ffn_gate_exps.weight", []uint64{e, fx, nx}, i, c.normal(p+"ffn_gate_exps.weight", invSqrt(e)))
	add(p+"ffn_up_exps.weight", []uint64{e, fx, nx}, i, c.normal(p+"ffn_up_exps.weight", invSqrt(e)))
	add(p+"ffn_down_exps.weight", []uint64{fx, e, nx}, i, c.normal(p+"ffn_down_exps.weight", c.Residual*invSqrt(fx)))
}

// attnTensors adds layer i's attn_q, attn_k, attn_v and attn_output,
// without biases.
func (c *Config) attnTensors(add func(name string, shape []uint64, layer int, fill RowFunc), i int) {
	p := fmt.Sprintf("blk.%d.", i)
	e, q, kv := uint64(c.Embd), uint64(c.Heads*c.HeadDim), uint64(c.KVHeads*c.HeadDim)
	add(p+"attn_q.weight", []uint64{e, q}, i, c.normal(p+"attn_q.weight", 1.2*invSqrt(e)))
	add(p+"attn_k.weight", []uint64{e, kv}, i, c.normal(p+"attn_k.weight", 1.2*invSqrt(e)))
	add(p+"attn_v.weight", []uint64{e, kv}, i, c.normal(p+"attn_v.weight", invSqrt(e)))
	add(p+"attn_output.weight", []uint64{q, e}, i, c.normal(p+"attn_output.weight", c.Residual*invSqrt(q)))
}
