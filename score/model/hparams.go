package model

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"ppl.dev/gguf"
)

// HParams are the hyperparameters every decoder we load shares, read from
// the file's "<arch>.*" metadata (llama.cpp's llm_load_hparams).
type HParams struct {
	Arch     string  `json:"arch"`
	Embd     int     `json:"n_embd"`      // embedding_length
	Layers   int     `json:"n_layer"`     // block_count
	FFN      int     `json:"n_ff"`        // feed_forward_length
	Heads    int     `json:"n_head"`      // attention.head_count
	KVHeads  int     `json:"n_head_kv"`   // attention.head_count_kv (default Heads)
	HeadDim  int     `json:"head_dim"`    // attention.key_length (default Embd/Heads)
	ValueDim int     `json:"value_dim"`   // attention.value_length (default HeadDim)
	Vocab    int     `json:"n_vocab"`     // rows of token_embd
	CtxTrain int     `json:"n_ctx_train"` // context_length
	Eps      float64 `json:"rms_eps"`     // attention.layer_norm_rms_epsilon

	MoE *MoEParams `json:"moe,omitempty"` // mixtures of experts
}

// meta reads "<arch>.<key>" metadata with defaults.
type meta struct {
	f    *gguf.File
	arch string
}

func (m meta) has(key string) bool {
	_, ok := m.f.Lookup(m.arch + "." + key)
	return ok
}

// require names the first of keys the file lacks: keys llama.cpp requires
// that the loader only checks, or reads later with a default.
func (m meta) require(keys ...string) error {
	for _, key := range keys {
		if !m.has(key) {
			return fmt.Errorf("missing metadata %s.%s", m.arch, key)
		}
	}
	return nil
}

// bool reads a boolean key, def when absent.
func (m meta) bool(key string, def bool) (bool, error) {
	if !m.has(key) {
		return def, nil
	}
	return m.f.Bool(m.arch + "." + key)
}

// int reads an integer key; def < 0 makes it required.
func (m meta) int(key string, def int) (int, error) {
	if !m.has(key) {
		if def < 0 {
			return 0, fmt.Errorf("missing metadata %s.%s", m.arch, key)
		}
		return def, nil
	}
	v, err := m.f.Int(m.arch + "." + key)
	if err != nil {
		return 0, err
	}
	if v < 0 || v > math.MaxInt32 {
		return 0, fmt.Errorf("metadata %s.%s = %d out of range", m.arch, key, v)
	}
	return int(v), nil
}

// positive reads an integer key (def < 0 makes it required) that must be
// above 0: a window, a period, a step.
func (m meta) positive(key string, def int) (int, error) {
	v, err := m.int(key, def)
	if err == nil && v <= 0 {
		err = fmt.Errorf("metadata %s.%s = %d, want > 0", m.arch, key, v)
	}
	return v, err
}

// float reads a floating-point key; NaN and infinities are refused, naming
// the key (no hyperparameter of a real model is either).
func (m meta) float(key string, def float64) (float64, error) {
	if !m.has(key) {
		return def, nil
	}
	v, err := m.f.Float(m.arch + "." + key)
	if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
		return 0, fmt.Errorf("metadata %s.%s = %v: not a finite number", m.arch, key, v)
	}
	return v, err
}

// softCap reads a soft-cap (def when absent): 0 for none, else positive.
func (m meta) softCap(key string, def float64) (float64, error) {
	v, err := m.float(key, def)
	if err == nil && v < 0 {
		err = fmt.Errorf("metadata %s.%s = %v, want >= 0", m.arch, key, v)
	}
	return v, err
}

func (m meta) string(key, def string) (string, error) {
	if !m.has(key) {
		return def, nil
	}
	return m.f.String(m.arch + "." + key)
}

// layerFlags reads key as one flag per layer of n, an array of bools or of
// integers (not 0: set), or def for every layer when absent.
func (m meta) layerFlags(key string, n int, def bool) ([]bool, error) {
	full := m.arch + "." + key
	flags := make([]bool, n)
	v, ok := m.f.Lookup(full)
	if !ok {
		for i := range flags {
			flags[i] = def
		}
		return flags, nil
	}
	bad := fmt.Errorf("metadata %s: want an array of %d flags (one per layer)", full, n)
	switch a := v.Any().(type) {
	case []bool:
		if len(a) != n {
			return nil, bad
		}
		copy(flags, a)
	default:
		ints, err := m.f.Int32s(full)
		if err != nil || len(ints) != n {
			return nil, bad
		}
		for i, x := range ints {
			flags[i] = x != 0
		}
	}
	return flags, nil
}

// slidingLayers reads which of n layers slide from
// attention.sliding_window_pattern as llama.cpp does: an array of one flag
// per layer, or a period p (def when absent) for set_swa_pattern, where
// layer i slides when i mod p < p − 1, or with denseFirst when i mod p ≠ 0
// (every layer when p is 0).
func (m meta) slidingLayers(n, def int, denseFirst bool) ([]bool, error) {
	key := m.arch + ".attention.sliding_window_pattern"
	if v, ok := m.f.Lookup(key); ok && v.Type == gguf.ValueArray {
		return m.layerFlags("attention.sliding_window_pattern", n, false)
	}
	p, err := m.int("attention.sliding_window_pattern", def)
	if err == nil && p < 0 {
		err = fmt.Errorf("metadata %s = %d, want >= 0", key, p)
	}
	if err != nil {
		return nil, err
	}
	s := make([]bool, n)
	for i := range s {
		s[i] = p == 0 || !denseFirst && i%p < p-1 || denseFirst && i%p != 0
	}
	return s, nil
}

// readHParams reads the shared hyperparameters. Vocab comes from the token
// embedding's shape, which every architecture here has.
func readHParams(f *gguf.File, arch string) (HParams, error) {
	m := meta{f, arch}
	hp := HParams{Arch: arch}
	var errs []error
	get := func(dst *int, key string, def int) {
		v, err := m.int(key, def)
		errs = append(errs, err)
		*dst = v
	}
	get(&hp.Embd, "embedding_length", -1)
	get(&hp.Layers, "block_count", -1)
	// Per-layer arrays, for the architectures that read them (perLayerArchs),
	// give their largest value here.
	getMax := func(dst *int, key string, def int) {
		v, err := m.maxInt(key, def)
		errs = append(errs, err)
		*dst = v
	}
	withFFN, free := attentionFree[arch]
	heads, ffn := -1, -1
	if free {
		heads = 0
		if !withFFN {
			ffn = 0
		}
	}
	getMax(&hp.FFN, "feed_forward_length", ffn)
	getMax(&hp.Heads, "attention.head_count", heads)
	get(&hp.CtxTrain, "context_length", 0)
	if err := errors.Join(errs...); err != nil {
		return hp, err
	}
	if hp.Embd <= 0 || hp.Layers <= 0 || (!free || withFFN) && hp.FFN <= 0 || !free && hp.Heads <= 0 {
		return hp, fmt.Errorf("bad shape: %d wide, %d layers, FFN %d, %d heads", hp.Embd, hp.Layers, hp.FFN, hp.Heads)
	}
	if free && hp.Heads != 0 {
		return hp, fmt.Errorf("bad shape: %s has no attention, but the file gives %d heads", arch, hp.Heads)
	}
	if free && !withFFN && hp.FFN != 0 {
		return hp, fmt.Errorf("bad shape: %s has no FFN, but the file gives an FFN of %d", arch, hp.FFN)
	}
	// The declared counts against the tensors present, before anything is
	// allocated per layer or per head: a file that claims 2^31 layers is
	// refused here, not after the loader has sized 2^31 of everything.
	if blocks := blockTensors(f); hp.Layers > blocks && arch != "hrm_text" { // hrm_text's passes share blocks (hrm.go)
		return hp, fmt.Errorf("metadata %s.block_count = %d, but the file has tensors for %d blocks (blk.0 to blk.%d)", arch, hp.Layers, blocks, blocks-1)
	}
	if !free {
		getMax(&hp.KVHeads, "attention.head_count_kv", hp.Heads)
		get(&hp.HeadDim, "attention.key_length", hp.Embd/hp.Heads)
		get(&hp.ValueDim, "attention.value_length", hp.HeadDim)
	}
	// llama.cpp requires the RMS norms' epsilon of every architecture that
	// reads it; ppl too, rather than guess (llama.cpp's own guess, where it
	// has one, differs: 0 for arwkv7 and rwkv6qwen2). The others keep
	// 1e-5, which none of them reads.
	if !rmsEpsUnread[arch] {
		errs = append(errs, m.require("attention.layer_norm_rms_epsilon"))
	}
	eps, err := m.float("attention.layer_norm_rms_epsilon", 1e-5)
	errs = append(errs, err)
	hp.Eps = eps
	// llama.cpp 0.7.0 lets such a file's attention see the tokens after
	// each position, which leaves no next-token distribution to score.
	causal, err := m.bool("attention.causal", true)
	if err == nil && !causal && !free {
		err = fmt.Errorf("metadata %s.attention.causal = false: a model whose attention reads later tokens has no next-token distribution to score", arch)
	}
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return hp, err
	}
	if !free && (hp.KVHeads <= 0 || hp.HeadDim <= 0 || hp.Heads%hp.KVHeads != 0) {
		return hp, fmt.Errorf("bad attention shape: %d heads, %d KV heads, head size %d", hp.Heads, hp.KVHeads, hp.HeadDim)
	}
	if _, ok := f.Tensor("output.weight"); !ok && untiedArchs[arch] {
		return hp, fmt.Errorf("missing tensor output.weight (llama.cpp's %s reads no tied output)", arch)
	}
	if widthHeadArchs[arch] && hp.Heads*hp.HeadDim != hp.Embd {
		return hp, fmt.Errorf("bad attention shape: %d heads of %d (attention.key_length) for a width of %d: llama.cpp 0.7.0 shapes %s's attention tensors by the width", hp.Heads, hp.HeadDim, hp.Embd, arch)
	}
	if hp.ValueDim != hp.HeadDim && !LatentArch(arch) && arch != "mimo2" && arch != "minicpm3" && arch != "plm" { // MLA reads its own head sizes (deepseek2.go), mimo2 and minicpm3 pad their values (mimo2.go, minicpm3.go)
		return hp, fmt.Errorf("value head size %d differs from key head size %d: not supported", hp.ValueDim, hp.HeadDim)
	}
	if !(hp.Eps > 0) {
		return hp, fmt.Errorf("bad RMS norm epsilon %v", hp.Eps)
	}
	t, ok := f.Tensor("token_embd.weight")
	if !ok {
		return hp, errors.New("missing tensor token_embd.weight")
	}
	if len(t.Shape) != 2 || t.Shape[0] != uint64(hp.Embd) || t.Shape[1] == 0 || t.Shape[1] > math.MaxInt32 {
		return hp, fmt.Errorf("tensor token_embd.weight has shape %v, want [%d, vocabulary]", t.Shape, hp.Embd)
	}
	hp.Vocab = int(t.Shape[1])
	return hp, nil
}

// blockTensors returns 1 + the largest N of the file's blk.N.* tensors (0
// when it has none).
func blockTensors(f *gguf.File) int {
	n := 0
	for _, t := range f.Tensors {
		rest, ok := strings.CutPrefix(t.Name, "blk.")
		if !ok {
			continue
		}
		i := strings.IndexByte(rest, '.')
		if i <= 0 {
			continue
		}
		if b, err := strconv.Atoi(rest[:i]); err == nil && b >= n {
			n = b + 1
		}
	}
	return n
}

// attentionFree are the architectures of recurrent layers without
// attention, each with whether it has an FFN: their files give
// attention.head_count as 0, as the converter writes it, or not at all, and
// HParams' head counts and sizes stay 0. The state-space models (mamba,
// mamba2) have no FFN either (feed_forward_length 0 or absent); RWKV's
// channel mix is one (rwkv6, rwkv6qwen2, rwkv7, arwkv7: feed_forward_length
// required).
var attentionFree = map[string]bool{"mamba": false, "mamba2": false, "rwkv7": true, "arwkv7": true, "rwkv6": true, "rwkv6qwen2": true}

// widthHeadArchs are the architectures whose attention tensors llama.cpp
// 0.7.0 shapes by the width (embedding_length rows for q and the output,
// head_count × key_length nowhere), so that it refuses a file whose heads
// do not fill the width (probed on each with heads twice as wide).
var widthHeadArchs = map[string]bool{"arctic": true, "baichuan": true, "bailingmoe2": true, "bitnet": true, "bloom": true, "chameleon": true, "chatglm": true,
	"codeshell": true, "cohere2": true, "command-r": true, "dbrx": true, "deepseek": true, "exaone4": true, "falcon": true, "gpt2": true,
	"gptneox": true, "grok": true, "internlm2": true, "jais": true, "jamba": true, "lfm2": true, "lfm2moe": true, "mpt": true,
	"nemotron": true, "olmo": true, "olmo2": true, "olmoe": true, "orion": true, "phi2": true, "phi3": true, "phimoe": true, "plamo": true,
	"qwen2": true, "qwen2moe": true, "qwen2vl": true, "stablelm": true, "starcoder": true, "starcoder2": true, "xverse": true}

// untiedArchs are the architectures whose llama.cpp 0.7.0 loader requires
// output.weight, reading no tied output (the token embedding in its
// place), where ppl would tie it (probed on each: a file without it).
var untiedArchs = map[string]bool{"apertus": true, "baichuan": true, "bailingmoe": true, "bailingmoe2": true, "codeshell": true,
	"dbrx": true, "dots1": true, "exaone-moe": true, "gptneox": true, "internlm2": true, "jais": true, "kimi-linear": true,
	"maion-coder": true, "maple": true, "mellum": true, "mimo2": true, "minimax-m2": true, "minimax-m3": true, "muse-glimmer": true,
	"nemotron": true, "olmo2": true, "olmoe": true, "orion": true, "phi2": true, "phimoe": true, "plamo": true, "qwen": true,
	"qwen2moe": true, "stablelm": true, "step35": true, "talkie": true, "xverse": true}

// HeadsFillWidth reports whether llama.cpp 0.7.0 shapes arch's attention
// tensors by the width, so that its heads must fill embedding_length
// (widthHeadArchs): for generators of files it loads.
func HeadsFillWidth(arch string) bool { return widthHeadArchs[arch] }

// rmsEpsUnread are the architectures for which llama.cpp 0.7.0 reads no
// attention.layer_norm_rms_epsilon (probed on each: a file without it
// loads in llama.cpp for these alone): those whose norms are all
// LayerNorms, and qwen2vl, whose RMS norms it runs with epsilon 0.
var rmsEpsUnread = map[string]bool{"qwen2vl": true, "bloom": true, "codeshell": true, "cohere2": true, "cohere2moe": true, "command-r": true, "dbrx": true,
	"falcon": true, "gpt2": true, "gptneox": true, "jais": true, "jais2": true, "mpt": true, "nemotron": true, "olmo": true, "orion": true,
	"phi2": true, "rwkv6": true, "rwkv7": true, "stablelm": true, "starcoder": true, "starcoder2": true}

// perLayerArchs are the architectures whose files may give
// feed_forward_length and the head counts per layer (arrays of block_count
// values); they read each layer's with meta.layerInts.
var perLayerArchs = map[string]bool{"gemma4": true, "gemma3n": true, "deci": true, "granitehybrid": true, "nemotron_h": true, "nemotron_h_moe": true, "lfm2": true, "lfm2moe": true, "falcon-h1": true, "mimo2": true, "openelm": true, "step35": true, "laguna": true, "spark2_5": true, "kimi-linear": true, "bailingmoe3": true, "kimi-k3": true, "glm5-next": true, "jamba": true, "plamo2": true}

// maxInt reads an integer key as int does, or an array of one value per
// layer: for an architecture of perLayerArchs its largest value, for the
// others its one value (llama.cpp reads these keys per layer for every
// architecture, and a file may give the same value per layer; values that
// differ are refused).
func (m meta) maxInt(key string, def int) (int, error) {
	v, ok := m.f.Lookup(m.arch + "." + key)
	if !ok || v.Type != gguf.ValueArray {
		return m.int(key, def)
	}
	if perLayerArchs[m.arch] {
		vs, err := m.layerInts(key, v.Len(), def)
		if err != nil || len(vs) == 0 {
			return 0, err
		}
		return slices.Max(vs), nil
	}
	n, err := m.int("block_count", -1)
	if err != nil {
		return 0, err
	}
	vs, err := m.layerInts(key, n, def)
	if err != nil || len(vs) == 0 {
		return 0, err
	}
	if i := slices.IndexFunc(vs, func(x int) bool { return x != vs[0] }); i > 0 {
		return 0, fmt.Errorf("metadata %s.%s[%d] = %d, [0] = %d: ppl runs %s with one value for every layer", m.arch, key, i, vs[i], vs[0], m.arch)
	}
	return vs[0], nil
}

// layerInts reads a key that holds either one integer for every layer or
// an array of exactly layers integers; def < 0 makes it required.
func (m meta) layerInts(key string, layers, def int) ([]int, error) {
	v, ok := m.f.Lookup(m.arch + "." + key)
	if !ok || v.Type != gguf.ValueArray {
		x, err := m.int(key, def)
		if err != nil {
			return nil, err
		}
		return slices.Repeat([]int{x}, layers), nil
	}
	a, err := m.f.Int32s(m.arch + "." + key)
	if err != nil {
		return nil, err
	}
	if len(a) != layers && !m.perLayerLen(len(a), layers) {
		return nil, fmt.Errorf("metadata %s.%s has %d values for %d layers", m.arch, key, len(a), layers)
	}
	out := make([]int, layers)
	for i, x := range a[:layers] {
		if x < 0 {
			return nil, fmt.Errorf("metadata %s.%s[%d] = %d out of range", m.arch, key, i, x)
		}
		out[i] = int(x)
	}
	return out, nil
}
