package mkmodel

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Shape is a model's architecture and dimensions, as its GGUF metadata
// states them.
type Shape struct {
	Arch     string // one of Archs
	Embd     int    // embedding_length
	Layers   int    // block_count
	Heads    int    // attention.head_count
	KVHeads  int    // attention.head_count_kv
	HeadDim  int    // attention.key_length = value_length
	FFN      int    // feed_forward_length
	Context  int    // context_length
	Vocab    int    // tokens; set from the tokenizer
	RopeBase float64
	Eps      float64 // attention.layer_norm_rms_epsilon
	Tied     bool    // no output.weight: the output reuses token_embd

	// Mixtures of experts (qwen3moe, and llama in Mixtral's layout, where
	// ExpertFFN = FFN): every layer's FFN is Experts SwiGLU
	// experts of width ExpertFFN, ExpertsUsed of them per token (FFN is
	// then only written to the metadata, as the converter does).
	Experts, ExpertsUsed, ExpertFFN int

	// Gated DeltaNet hybrids (qwen35, qwen35moe; qwen35.go documents them).
	SSMState, SSMKHeads, SSMVHeads, SSMConv, AttnInterval, RopeDims, SharedFFN int

	// Phi-3's LongRoPE (phi3.go documents it; RopeDims too).
	OrigContext int
	// Window is exaone4's, LFM2's and Gemma 2's attention.sliding_window (0:
	// not written; Gemma 2's 4096); in olmo2 OLMo 3's, with the
	// converter's attention.sliding_window_pattern, a flag per layer: 3
	// sliding layers of every 4.
	Window int
	// YaRN, when not 0, is rope.scaling.factor with rope.scaling.type
	// yarn (olmo2, llama, qwen3): the original context Context/YaRN and
	// rope.scaling.attn_factor 1 + 0.1·ln(YaRN), as the converter writes
	// OLMo 3's attention_factor.
	YaRN float64
	// DenseLead is the leading dense layers of ernie4_5-moe, dots1,
	// lfm2moe and bailingmoe2 (SharedFFN, when not 0, the shared expert's
	// width).
	DenseLead int
	// ExpertGroups and ExpertGroupsUsed are bailingmoe2's routing groups
	// (expert_group_count, expert_group_used_count; 0: none).
	ExpertGroups, ExpertGroupsUsed int
	// MoEStep is llama4's interleave_moe_layer_step: every MoEStep-th
	// layer a mixture of experts, the others dense (0: every layer).
	MoEStep int

	// Mamba-2 hybrids (granitehybrid; mamba2.go documents them, with
	// SSMState, SSMKHeads, SSMVHeads, SSMConv and AttnInterval).
	SSMHeadDim int
	NoPE       bool
	// Layout is Nemotron-H's blocks, one letter a layer (mamba2.go), or
	// deci's (deci.go);
	// MoELatent nemotron_h_moe's moe_latent_size (0: none).
	Layout    string
	MoELatent int
	// SSMNoNorm leaves falcon-h1's mixers without ssm_norm.
	SSMNoNorm bool
	// QKLayerNorm gives command-r Command R+'s (stablelm StableLM 2 12B's,
	// with its parallel residual: no FFN norm) LayerNorms of each head of
	// q and k (attn_q_norm, attn_k_norm: weights for every head).
	QKLayerNorm bool
	// PerLayer is gemma3n's embedding_length_per_layer_input (gemma3n.go),
	// and qwen4exp's PLE head width (qwen4exp.go).
	PerLayer int
	// DtBCRMS is mamba's ssm.dt_b_c_rms (Falcon-Mamba: dt, B and C
	// RMS-normed without weights; mamba1.go).
	DtBCRMS bool
	// SwinNorm is chameleon's swin_norm (Chameleon-30B): attn_norm and
	// ffn_norm norm the attention's and the FFN's outputs, not their inputs.
	SwinNorm bool
}

// cohere reports Cohere's parallel blocks (cohere2, command-r, cohere2moe).
func (s Shape) cohere() bool {
	return s.Arch == "cohere2" || s.Arch == "command-r" || s.Arch == "cohere2moe"
}

// Archs are the architectures the generator writes (and ppl-score runs).
var Archs = []string{"llama", "qwen2", "qwen3", "qwen3moe", "qwen35", "qwen35moe", "phi3", "glm4", "granite", "smollm3", "olmo2", "seed_oss", "exaone4", "minimax-m2", "ernie4_5-moe", "dots1", "granitehybrid", "nemotron_h", "nemotron_h_moe", "lfm2", "lfm2moe", "gemma2", "llama4", "falcon-h1", "cohere2", "command-r", "qwen2moe", "olmoe", "granitemoe", "hunyuan-moe", "bailingmoe2", "ernie4_5", "exaone", "hunyuan-dense", "arcee", "afmoe", "apertus", "exaone-moe", "cohere2moe", "gemma3n", "phimoe", "gemma", "internlm2", "xverse", "minicpm", "deepseek", "deci", "nanbeige", "orion", "stablelm", "starcoder2", "phi2", "gptneox", "falcon", "gpt2", "nemotron", "chatglm", "olmo", "dbrx", "bailingmoe", "granite_swa", "mellum", "baichuan", "bloom", "mpt", "refact", "jais", "jais2", "maincoder", "pangu-embedded", "mimo2", "bitnet", "openelm", "qwen", "step35", "kimi-linear", "smallthinker", "mamba", "mamba2", "jamba", "plamo3", "plamo2", "grok", "minicpm3", "plamo", "arctic", "rwkv7", "arwkv7", "rwkv6", "rwkv6qwen2", "hy_v3", "maple", "laguna", "maion-coder", "spark2_5", "muse-glimmer", "talkie", "hunyuan_vl", "plm", "hrm_text", "grovemoe", "k2-horizon", "graniteswitch", "paddleocr", "cogvlm", "deepseek2-ocr", "minimax-01", "bailingmoe3", "dots3note", "hy_v4", "kimi-k3", "minimax-m3", "qwen4exp", "chameleon", "glm5-next", "deepseek4"}

// Preset is a named shape for benchmarks: Llama-shaped random models of
// about 100M, 1B and 8B parameters (the last two are the shapes of
// Llama-3.2-1B and Llama-3-8B).
type Preset struct {
	Name  string
	Shape Shape
}

// Presets, smallest first.
var Presets = []Preset{
	{"100M", Shape{Arch: "llama", Embd: 768, Layers: 12, Heads: 12, KVHeads: 4, HeadDim: 64, FFN: 2048,
		Context: 4096, Vocab: 32000, RopeBase: 10000, Eps: 1e-5, Tied: true}},
	{"1B", Shape{Arch: "llama", Embd: 2048, Layers: 16, Heads: 32, KVHeads: 8, HeadDim: 64, FFN: 8192,
		Context: 131072, Vocab: 128256, RopeBase: 500000, Eps: 1e-5, Tied: true}},
	{"8B", Shape{Arch: "llama", Embd: 4096, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 14336,
		Context: 8192, Vocab: 128256, RopeBase: 500000, Eps: 1e-5, Tied: false}},
}

// MoEPresets are the qwen3moe shapes --params picks from: Qwen3-30B-A3B's
// layout (128 experts, 8 used, expert FFN 768, 32 query and 4 KV heads of
// 128, 48 layers) scaled to about 1B parameters with the Llama-2
// vocabulary (64 experts, 8 used, expert FFN 384, 16 heads of 64, 12
// layers), and the full shape.
var MoEPresets = []Preset{
	{"1B", Shape{Arch: "qwen3moe", Embd: 1024, Layers: 12, Heads: 16, KVHeads: 2, HeadDim: 64, FFN: 3072,
		Context: 32768, Vocab: 32000, RopeBase: 1e6, Eps: 1e-6, Tied: true, Experts: 64, ExpertsUsed: 8, ExpertFFN: 384}},
	{"30B", Shape{Arch: "qwen3moe", Embd: 2048, Layers: 48, Heads: 32, KVHeads: 4, HeadDim: 128, FFN: 6144,
		Context: 32768, Vocab: 151936, RopeBase: 1e6, Eps: 1e-6, Tied: false, Experts: 128, ExpertsUsed: 8, ExpertFFN: 768}},
}

// ParseCount reads a parameter count such as "100M", "1.5B", "8B" or
// "135000000".
func ParseCount(s string) (float64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := 1.0
	switch {
	case strings.HasSuffix(t, "K"):
		mult, t = 1e3, t[:len(t)-1]
	case strings.HasSuffix(t, "M"):
		mult, t = 1e6, t[:len(t)-1]
	case strings.HasSuffix(t, "B"), strings.HasSuffix(t, "G"):
		mult, t = 1e9, t[:len(t)-1]
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) {
		return 0, fmt.Errorf("bad parameter count %q (want e.g. 100M, 1B, 8B)", s)
	}
	return f * mult, nil
}

// NearestPreset returns the preset of the architecture whose parameter
// count is nearest to n on a log scale: the MoE presets for qwen3moe,
// Qwen3.5's for qwen35 and qwen35moe, RWKV-7's for rwkv7, the
// Llama-shaped ones otherwise.
func NearestPreset(arch string, n float64) Preset {
	list := Presets
	switch arch {
	case "qwen3moe":
		list = MoEPresets
	case "qwen35":
		list = Qwen35Presets
	case "qwen35moe":
		list = Qwen35MoEPresets
	case "rwkv7":
		list = RWKV7Presets
	}
	best, bd := list[0], math.Inf(1)
	for _, p := range list {
		if d := math.Abs(math.Log(float64(p.Shape.Params()) / n)); d < bd {
			best, bd = p, d
		}
	}
	return best
}

// Check validates the shape.
func (s Shape) Check() error {
	if !slices.Contains(Archs, s.Arch) {
		return fmt.Errorf("unknown architecture %q (want %s)", s.Arch, strings.Join(Archs, ", "))
	}
	switch {
	case s.Embd <= 0, s.Layers <= 0, s.Heads <= 0, s.KVHeads <= 0, s.HeadDim <= 0, s.FFN <= 0, s.Context <= 0:
		return fmt.Errorf("shape: every dimension must be positive: %+v", s)
	case s.Heads%s.KVHeads != 0:
		return fmt.Errorf("shape: %d heads is not a multiple of %d KV heads", s.Heads, s.KVHeads)
	case (s.Arch == "qwen" || s.Arch == "qwen2") && s.Heads*s.HeadDim != s.Embd:
		// llama.cpp's qwen and qwen2 loaders expect attn_q to be Embd×Embd.
		return fmt.Errorf("shape: %s needs heads × head dimension = width (%d × %d != %d)", s.Arch, s.Heads, s.HeadDim, s.Embd)
	case s.Arch == "qwen" && s.KVHeads != s.Heads:
		return fmt.Errorf("shape: qwen has as many KV heads as heads (%d != %d)", s.KVHeads, s.Heads)
	case s.HeadDim%2 != 0:
		return fmt.Errorf("shape: head dimension %d must be even (RoPE rotates pairs)", s.HeadDim)
	case s.Vocab <= 0:
		return fmt.Errorf("shape: no vocabulary")
	case s.moe() && (s.Experts < 2 || s.ExpertsUsed < 1 || s.ExpertsUsed > s.Experts || s.ExpertFFN <= 0):
		return fmt.Errorf("shape: %s needs experts >= 2, 1 <= experts used <= experts and an expert FFN width (%d, %d, %d)", s.Arch, s.Experts, s.ExpertsUsed, s.ExpertFFN)
	case !s.moe() && (s.Experts != 0 || s.ExpertsUsed != 0 || s.ExpertFFN != 0):
		return fmt.Errorf("shape: experts are for the mixtures of experts and llama (Mixtral's layout), not %s", s.Arch)
	case s.DenseLead < 0 || s.DenseLead > 0 && s.Arch != "ernie4_5-moe" && s.Arch != "dots1" && s.Arch != "hy_v3" && s.Arch != "lfm2moe" && s.Arch != "bailingmoe2" && s.Arch != "afmoe" && s.Arch != "exaone-moe" && s.Arch != "cohere2moe" && s.Arch != "deepseek" && s.Arch != "deepseek2-ocr" && s.Arch != "mimo2" && s.Arch != "step35" && s.Arch != "laguna" && s.Arch != "kimi-linear" && s.Arch != "bailingmoe3" && s.Arch != "kimi-k3" && s.Arch != "dots3note" && s.Arch != "hy_v4" && !s.glm5Next() && s.Arch != "k2-horizon" && !s.minimaxM3() || s.DenseLead > s.Layers:
		return fmt.Errorf("shape: %d leading dense layers (ernie4_5-moe, dots1, lfm2moe and bailingmoe2 only, at most the layers)", s.DenseLead)
	case s.plm() && (!s.Tied || s.KVHeads != s.Heads):
		return fmt.Errorf("shape: plm ties its output to the embeddings and has a KV head per head (tied %v, %d of %d)", s.Tied, s.KVHeads, s.Heads)
	case s.Arch == "hunyuan_vl" && s.HeadDim%8 != 0:
		return fmt.Errorf("shape: hunyuan_vl's four RoPE sections need a head size that is a multiple of 8 (%d)", s.HeadDim)
	case s.Arch == "cogvlm" && (s.KVHeads != s.Heads || s.Heads*s.HeadDim != s.Embd):
		return fmt.Errorf("shape: llama.cpp's cogvlm reads q, k and v as width-sized thirds of attn_qkv: %d KV heads for %d heads of %d, width %d", s.KVHeads, s.Heads, s.HeadDim, s.Embd)
	case s.Arch == "paddleocr" && s.HeadDim%16 != 0:
		return fmt.Errorf("shape: paddleocr's RoPE sections need a head size that is a multiple of 16 (%d)", s.HeadDim)
	case (s.Arch == "maple" || s.Arch == "muse-glimmer") && (s.Window <= 0 || s.Tied):
		return fmt.Errorf("shape: %s needs a sliding window (%d) and an output matrix", s.Arch, s.Window)
	case s.Arch == "dots1" && s.KVHeads != s.Heads:
		return fmt.Errorf("shape: llama.cpp's dots1 shapes k and v as q: %d KV heads must be the %d heads", s.KVHeads, s.Heads)
	case s.Arch == "dots1" && s.SharedFFN != s.ExpertFFN:
		return fmt.Errorf("shape: dots1's shared expert is as wide as an expert (%d != %d)", s.SharedFFN, s.ExpertFFN)
	case (s.Arch == "llama" || s.Arch == "jamba" || s.Arch == "arctic" || s.Arch == "minimax-m2" || s.Arch == "granitehybrid" || s.Arch == "olmoe" || s.Arch == "granitemoe" || s.Arch == "hunyuan-moe" || s.Arch == "phimoe" || s.Arch == "dbrx" || s.Arch == "minimax-01") && s.moe() && s.FFN != s.ExpertFFN:
		// llama.cpp shapes their experts by feed_forward_length.
		return fmt.Errorf("shape: %s's experts have the FFN width, feed_forward_length (%d != %d)", s.Arch, s.ExpertFFN, s.FFN)
	case s.RopeBase <= 0, s.Eps <= 0:
		return fmt.Errorf("shape: rope base and epsilon must be positive")
	case s.Arch == "llama4" && (s.SharedFFN != s.ExpertFFN || s.MoEStep < 0):
		return fmt.Errorf("shape: llama4's shared expert is as wide as an expert (%d != %d), its MoE step >= 0 (%d)", s.SharedFFN, s.ExpertFFN, s.MoEStep)
	case s.MoEStep != 0 && s.Arch != "llama4":
		return fmt.Errorf("shape: an MoE layer step is for llama4")
	case (s.Arch == "gemma2" || s.Arch == "gemma" || s.Arch == "bitnet" || s.Arch == "openelm") && !s.Tied:
		return fmt.Errorf("shape: %s is tied (llama.cpp's %s reads no output matrix)", s.Arch, s.Arch)
	case s.cohere() && !s.Tied:
		return fmt.Errorf("shape: %s is tied (llama.cpp's %s reads no output matrix)", s.Arch, s.Arch)
	case s.QKLayerNorm && s.Arch != "command-r" && s.Arch != "stablelm":
		return fmt.Errorf("shape: per-head q/k LayerNorms are command-r's (Command R+) and stablelm's (StableLM 2 12B); chameleon has them always")
	case s.SwinNorm && s.Arch != "chameleon":
		return fmt.Errorf("shape: swin_norm is chameleon's")
	case (s.Arch == "stablelm" || s.Arch == "phi2" || s.Arch == "plamo" || s.Arch == "gptneox" || s.Arch == "nemotron" || s.Arch == "dbrx" || s.Arch == "bailingmoe") && s.Tied:
		return fmt.Errorf("shape: %s is untied (llama.cpp's %s requires output.weight)", s.Arch, s.Arch)
	case s.Window < 0 || s.Window > 0 && s.Arch != "exaone4" && s.Arch != "maple" && s.Arch != "maion-coder" && s.Arch != "spark2_5" && s.Arch != "muse-glimmer" && s.Arch != "gemma2" && s.Arch != "cohere2" && s.Arch != "afmoe" && s.Arch != "exaone-moe" && s.Arch != "cohere2moe" && s.Arch != "olmo2" && s.Arch != "granite_swa" && s.Arch != "mellum" && s.Arch != "mimo2" && s.Arch != "step35" && s.Arch != "laguna" && s.Arch != "plamo3" && !s.dots3note() && !s.deepseek4() && !s.lfm2() && !s.gemma3n():
		return fmt.Errorf("shape: a sliding window (%d) is for exaone4, gemma2, cohere2, olmo2, mimo2, step35, lfm2, lfm2moe and gemma3n", s.Window)
	case s.YaRN != 0 && (s.Arch != "olmo2" && s.Arch != "llama" && s.Arch != "qwen3" && s.Arch != "laguna" || !(s.YaRN > 1) || s.Context%int(s.YaRN) != 0):
		return fmt.Errorf("shape: YaRN (factor %v) is for olmo2, llama, qwen3 and laguna, with an integer factor above 1 that divides the context %d", s.YaRN, s.Context)
	}
	if err := s.checkMoE(); err != nil {
		return err
	}
	if err := s.checkPhi3(); err != nil {
		return err
	}
	if err := s.checkMamba(); err != nil {
		return err
	}
	if err := s.checkRWKV(); err != nil {
		return err
	}
	if err := s.checkMamba1(); err != nil {
		return err
	}
	if err := s.checkPlamo2(); err != nil {
		return err
	}
	if err := s.checkGrok(); err != nil {
		return err
	}
	if err := s.checkLFM2(); err != nil {
		return err
	}
	if err := s.checkGemma3n(); err != nil {
		return err
	}
	if err := s.checkDeci(); err != nil {
		return err
	}
	if err := s.checkKimiLinear(); err != nil {
		return err
	}
	if err := s.checkGLM5Next(); err != nil {
		return err
	}
	if err := s.checkDots3Note(); err != nil {
		return err
	}
	if err := s.checkHyV4(); err != nil {
		return err
	}
	if err := s.checkDeepSeek4(); err != nil {
		return err
	}
	if err := s.checkQwen4Exp(); err != nil {
		return err
	}
	if err := s.checkMiniMaxM3(); err != nil {
		return err
	}
	if err := s.checkMaion(); err != nil {
		return err
	}
	if err := s.checkSpark(); err != nil {
		return err
	}
	if err := s.checkMiniMax01(); err != nil {
		return err
	}
	if err := s.checkTalkie(); err != nil {
		return err
	}
	if err := s.checkK2(); err != nil {
		return err
	}
	if err := s.checkGrove(); err != nil {
		return err
	}
	if err := s.checkHRM(); err != nil {
		return err
	}
	if err := s.checkStep35(); err != nil {
		return err
	}
	if err := s.checkMiMo2(); err != nil {
		return err
	}
	return s.checkHybrid()
}

// headParams is the weights outside the blocks: the token embedding, the
// output norm and, untied, the output matrix.
func (s Shape) headParams() int64 {
	n := int64(s.Vocab)*int64(s.Embd) + int64(s.Embd)
	if !s.Tied {
		n += int64(s.Vocab) * int64(s.Embd)
	}
	return n
}

// invSqrt is 1/sqrt(n), the scale of a generated matrix of n inputs.
func invSqrt(n uint64) float64 { return 1 / math.Sqrt(float64(n)) }

// Params returns the number of weights.
func (s Shape) Params() int64 {
	if s.qwen4exp() {
		return s.q4Params()
	}
	if s.hybrid() {
		return s.hybridParams()
	}
	if s.ssmOnly() || s.Arch == "jamba" {
		return s.ssmParams()
	}
	if s.rwkv7() {
		return s.rwkv7Params()
	}
	if s.rwkv6() {
		return s.rwkv6Params()
	}
	if s.plamo2() {
		return s.plamo2Params()
	}
	if s.grok() {
		return s.grokParams()
	}
	if s.minicpm3() {
		return s.minicpm3Params()
	}
	if s.arctic() {
		return s.arcticParams()
	}
	if s.nemotron() {
		return s.nemotronParams()
	}
	if s.lfm2() {
		return s.lfm2Params()
	}
	if s.gemma3n() {
		return s.gemma3nParams()
	}
	if s.deci() {
		return s.deciParams()
	}
	if s.step35() {
		return s.step35Params()
	}
	if s.maion() {
		return s.maionParams()
	}
	if s.spark() {
		return s.sparkParams()
	}
	if s.minimax01() {
		return s.minimax01Params()
	}
	if s.talkie() {
		return s.talkieParams()
	}
	if s.hrm() {
		return s.hrmParams()
	}
	if s.k2() {
		return s.k2Params()
	}
	if s.graniteSwitch() {
		return s.switchParams()
	}
	if s.kdaHybrid() {
		return s.kimiParams()
	}
	if s.glm5Next() {
		return s.glm5Params()
	}
	if s.dots3note() {
		return s.dots3Params()
	}
	if s.hyV4() {
		return s.hyV4Params()
	}
	if s.deepseek4() {
		return s.dsv4Params()
	}
	if s.minimaxM3() {
		return s.m3Params()
	}
	if s.smallThinker() {
		return s.smallThinkerParams()
	}
	if s.mimo2() {
		return s.mimo2Params()
	}
	if s.openelm() {
		return s.openelmParams()
	}
	e, q, kv := int64(s.Embd), int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	block := e + e*q + 2*e*kv + q*e + e
	dense := 3 * e * int64(s.FFN)
	if s.moe() {
		block += e*int64(s.Experts) + 3*e*int64(s.ExpertFFN)*int64(s.Experts)
	} else {
		block += dense
	}
	switch s.Arch {
	case "olmo2": // whole-row q and k norms; two post-norms for the two pre-norms
		block += q + kv
	case "gemma2": // post-norms beside the pre-norms
		block += 2 * e
	case "minimax-m2": // whole-row q and k norms, the routing's selection bias
		block += q + kv + int64(s.Experts)
	case "orion": // the norms' biases
		block += 2 * e
	case "starcoder2": // q, k, v and output biases, the norms' biases; an ungated MLP with biases
		block += q + 2*kv + e + 2*e - e*int64(s.FFN) + int64(s.FFN) + e
	case "plamo": // no FFN norm: the MLP reads the attention's normed rows
		block -= e
	case "olmo": // no norms
		block -= 2 * e
	case "mpt": // an ungated MLP, no biases
		block -= e * int64(s.FFN)
	case "jais": // q, k, v and output biases, the norms' biases, the MLP's three biases
		block += q + 2*kv + e + 2*e + 2*int64(s.FFN) + e
	case "jais2": // nemotron's with q, k, v, output and MLP biases
		block += 2*e - e*int64(s.FFN) + q + 2*kv + e + int64(s.FFN) + e
	case "qwen": // attn_qkv's bias
		block += q + 2*kv
	case "cogvlm": // the visual expert's attention and MLP
		block += e*(q+2*kv) + q*e + dense
	case "bitnet": // the sub norms and scales
		block += s.bitnetParams()
	case "maincoder": // per-head q and k norms
		block += 2 * int64(s.HeadDim)
	case "pangu-embedded": // q, k, v and output biases
		block += q + 2*kv + e
	case "nemotron": // the norms' biases; an ungated MLP
		block += 2*e - e*int64(s.FFN)
	case "falcon": // the attention norm's bias, no FFN norm; an ungated MLP
		block += e - e - e*int64(s.FFN)
	case "gptneox", "gpt2", "bloom": // starcoder2's, q, k and v fused
		block += q + 2*kv + e + 2*e - e*int64(s.FFN) + int64(s.FFN) + e
	case "phi2": // starcoder2's, with one norm for the attention and the MLP
		block += q + 2*kv + e + e - e - e*int64(s.FFN) + int64(s.FFN) + e
	case "stablelm": // q, k and v biases, the attention norm's bias; 12B's layout: per-head q/k norms, no FFN norm
		block += q + 2*kv + e
		if s.QKLayerNorm {
			block += q + kv - e
		} else {
			block += e
		}
	case "deepseek", "deepseek2-ocr": // the shared experts
		block += 3 * e * int64(s.SharedFFN)
	case "ernie4_5-moe": // the selection bias, the shared expert
		block += int64(s.Experts) + 3*e*int64(s.SharedFFN)
	case "dots1", "hy_v3": // per-head q and k norms, the selection bias, the shared expert
		block += 2*int64(s.HeadDim) + int64(s.Experts) + 3*e*int64(s.SharedFFN)
	case "llama4": // the shared expert
		block += 3 * e * int64(s.SharedFFN)
	case "qwen2", "seed_oss":
		block += q + 2*kv
	case "qwen3", "qwen3moe", "exaone4", "hunyuan-dense", "hunyuan_vl", "mellum", "maple":
		block += 2 * int64(s.HeadDim)
	case "grovemoe": // per-head q and k norms, the chunk experts
		block += 2*int64(s.HeadDim) + s.groveParams()
	case "arcee": // an ungated MLP
		block -= e * int64(s.FFN)
	case "apertus": // an ungated MLP, per-head q and k norms with biases
		block += 4*int64(s.HeadDim) - e*int64(s.FFN)
	case "phimoe": // q, k, v and output biases; the norms' biases
		block += q + 2*kv + e + 2*e
	case "qwen2moe": // q, k and v biases, the gated shared expert
		block += q + 2*kv + e + 3*e*int64(s.SharedFFN)
	case "olmoe": // whole-row q and k norms
		block += q + kv
	case "granitemoe": // the optional shared expert
		block += 3 * e * int64(s.SharedFFN)
	case "granite_swa": // the attention sinks
		block += int64(s.Heads)
	case "bailingmoe": // the shared expert
		block += 3 * e * int64(s.SharedFFN)
	case "hunyuan-moe": // per-head q and k norms, the shared expert
		block += 2*int64(s.HeadDim) + 3*e*int64(s.SharedFFN)
	case "bailingmoe2": // per-head q and k norms, the selection bias, the shared expert
		block += 2*int64(s.HeadDim) + int64(s.Experts) + 3*e*int64(s.SharedFFN)
	case "exaone-moe": // per-head q and k norms, the selection bias, the shared expert
		block += 2*int64(s.HeadDim) + int64(s.Experts) + 3*e*int64(s.SharedFFN)
	case "afmoe": // two post-norms, per-head q and k norms, the attention's gate, the selection bias, the shared expert
		block += 2*e + 2*int64(s.HeadDim) + e*q + int64(s.Experts) + 3*e*int64(s.SharedFFN)
	case "muse-glimmer": // two post-norms, per-head q and k norms, the attention's gate
		block += 2*e + 2*int64(s.HeadDim) + e*q
	case "cohere2", "command-r", "cohere2moe": // one norm, read by the attention and the MLP
		block -= e
		if s.Arch == "cohere2moe" && s.SharedFFN > 0 {
			block += 3 * e * int64(s.SharedFFN)
		}
		if s.QKLayerNorm {
			block += q + kv
		}
	}
	n := s.headParams() + int64(s.Layers)*block
	if s.DenseLead > 0 { // dense FFNs for the leading layers' MoE blocks
		moe := e*int64(s.Experts) + 3*e*int64(s.ExpertFFN)*int64(s.Experts) + 3*e*int64(s.SharedFFN)
		if s.selBias() {
			moe += int64(s.Experts)
		}
		n += int64(s.DenseLead) * (dense - moe)
	}
	if s.MoEStep > 1 { // llama4's dense FFNs between the mixtures
		moe := e*int64(s.Experts) + 3*e*int64(s.ExpertFFN)*int64(s.Experts) + 3*e*int64(s.SharedFFN)
		n += int64(s.Layers-s.Layers/s.MoEStep) * (dense - moe)
	}
	if s.Arch == "phimoe" || s.Arch == "phi2" { // the output norm's bias and, untied, the output's
		n += e
		if !s.Tied {
			n += int64(s.Vocab)
		}
	}
	if s.Arch == "orion" || s.Arch == "stablelm" || s.Arch == "starcoder2" || s.Arch == "gptneox" || s.Arch == "falcon" || s.Arch == "gpt2" || s.Arch == "nemotron" || s.Arch == "bloom" || s.Arch == "jais" || s.Arch == "jais2" { // the output norm's bias
		n += e
	}
	if s.Arch == "bloom" { // the embeddings' LayerNorm
		n += 2 * e
	}
	if s.Arch == "olmo" { // no final norm
		n -= e
	}
	if s.Arch == "gpt2" { // the learned positions
		n += e * int64(s.Context)
	}
	if s.OrigContext > 0 { // LongRoPE's long and short factors
		n += int64(s.ropeDims())
	}
	if s.Arch == "glm4" { // attn_qkv's bias, the post-norms
		n += int64(s.Layers) * (q + 2*kv + 2*e)
	}
	if s.Arch == "plamo3" { // the post-norms, per-head q and k norms
		n += int64(s.Layers) * (2*e + 2*int64(s.HeadDim))
	}
	if s.Arch == "chatglm" { // attn_qkv's bias
		n += int64(s.Layers) * (q + 2*kv)
	}
	if s.falconH1() { // a Mamba-2 mixer beside each attention
		n += int64(s.Layers) * s.mambaParams()
	}
	if s.Arch == "granitehybrid" { // Mamba-2 mixers instead of attention; the shared experts
		for i := range s.Layers {
			if s.recurrent(i) {
				n += s.mambaParams() - (2*e*q + 2*e*kv)
			}
		}
		n += int64(s.Layers) * 3 * e * int64(s.SharedFFN)
	}
	return n
}

// FormatCount writes n as 1.24B, 100.1M, 812.3K.
func FormatCount(n int64) string {
	switch f := float64(n); {
	case f >= 1e9:
		return strconv.FormatFloat(f/1e9, 'f', 2, 64) + "B"
	case f >= 1e6:
		return strconv.FormatFloat(f/1e6, 'f', 1, 64) + "M"
	case f >= 1e3:
		return strconv.FormatFloat(f/1e3, 'f', 1, 64) + "K"
	}
	return strconv.FormatInt(n, 10)
}
