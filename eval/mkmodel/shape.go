package mkmodel

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Shape is a model's architecture and dimensions, as its GGUF metadata
// states them.
type Shape struct {
	Arch     string // llama, qwen2 or qwen3
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
}

// Archs are the architectures the generator writes (and ppl-score runs).
var Archs = []string{"llama", "qwen2", "qwen3"}

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

// NearestPreset returns the preset whose parameter count is nearest to n
// on a log scale.
func NearestPreset(n float64) Preset {
	best, bd := Presets[0], math.Inf(1)
	for _, p := range Presets {
		if d := math.Abs(math.Log(float64(p.Shape.Params()) / n)); d < bd {
			best, bd = p, d
		}
	}
	return best
}

// Check validates the shape.
func (s Shape) Check() error {
	switch s.Arch {
	case "llama", "qwen2", "qwen3":
	default:
		return fmt.Errorf("unknown architecture %q (want %s)", s.Arch, strings.Join(Archs, ", "))
	}
	switch {
	case s.Embd <= 0, s.Layers <= 0, s.Heads <= 0, s.KVHeads <= 0, s.HeadDim <= 0, s.FFN <= 0, s.Context <= 0:
		return fmt.Errorf("shape: every dimension must be positive: %+v", s)
	case s.Heads%s.KVHeads != 0:
		return fmt.Errorf("shape: %d heads is not a multiple of %d KV heads", s.Heads, s.KVHeads)
	case s.Arch == "qwen2" && s.Heads*s.HeadDim != s.Embd:
		// llama.cpp's qwen2 loader expects attn_q to be Embd×Embd.
		return fmt.Errorf("shape: qwen2 needs heads × head dimension = width (%d × %d != %d)", s.Heads, s.HeadDim, s.Embd)
	case s.HeadDim%2 != 0:
		return fmt.Errorf("shape: head dimension %d must be even (RoPE rotates pairs)", s.HeadDim)
	case s.Vocab <= 0:
		return fmt.Errorf("shape: no vocabulary")
	case s.RopeBase <= 0, s.Eps <= 0:
		return fmt.Errorf("shape: rope base and epsilon must be positive")
	}
	return nil
}

// Params returns the number of weights.
func (s Shape) Params() int64 {
	e, q, kv := int64(s.Embd), int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	block := e + e*q + 2*e*kv + q*e + e + 3*e*int64(s.FFN)
	switch s.Arch {
	case "qwen2":
		block += q + 2*kv
	case "qwen3":
		block += 2 * int64(s.HeadDim)
	}
	n := int64(s.Vocab)*e + int64(s.Layers)*block + e
	if !s.Tied {
		n += int64(s.Vocab) * e
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
