package model

import (
	"fmt"
	"math"

	"ppl.dev/score/nn"
)

// RopeInfo records the RoPE settings a model runs with, for result headers.
type RopeInfo struct {
	Layout      string  `json:"layout"` // "normal" (pairs 2i, 2i+1) or "neox" (pairs i, i+dims/2)
	Dims        int     `json:"dims"`
	FreqBase    float64 `json:"freq_base"`
	Scaling     string  `json:"scaling"`                // "none", "linear" or "yarn"
	Factor      float64 `json:"factor"`                 // context extension factor (1 = none)
	OrigCtx     int     `json:"orig_ctx,omitempty"`     // YaRN
	ExtFactor   float64 `json:"ext_factor,omitempty"`   // YaRN
	AttnFactor  float64 `json:"attn_factor"`            // cos/sin magnitude (YaRN adds its own on top)
	BetaFast    float64 `json:"beta_fast,omitempty"`    // YaRN
	BetaSlow    float64 `json:"beta_slow,omitempty"`    // YaRN
	FreqFactors bool    `json:"freq_factors,omitempty"` // rope_freqs tensor applied
	Factors     string  `json:"factors,omitempty"`      // Phi-3's LongRoPE: "long" or "short" factors applied
}

// RoPE builds the model's rotary embedding from "<arch>.rope.*" metadata
// and the Options' overrides, as llama.cpp resolves them. neox selects the
// pair layout, which is fixed by the architecture.
func (l *Loader) RoPE(neox bool) *nn.RoPE {
	if l.err != nil {
		return nil
	}
	r, info, err := l.rope(neox)
	if err != nil {
		l.fail(err)
		return nil
	}
	l.rinfo = info
	return r
}

// ntkAlphaArchs are the architectures whose RoPE base llama.cpp 0.7.0
// multiplies by rope.scaling.alpha^(d/(d−2)) (d the head size) where the
// key is above 0: hunyuan_vl and hunyuan-dense, which inherits its
// hyperparameters (the converters write a scaled base for hunyuan-dense
// and the raw base with the key for hunyuan_vl).
var ntkAlphaArchs = map[string]bool{"hunyuan-dense": true, "hunyuan_vl": true}

// yarnBetaArchs are the architectures for which llama.cpp 0.7.0 reads
// rope.scaling.yarn_beta_fast and yarn_beta_slow, with the beta_fast it
// takes when the key is absent (grok's is 8; beta_slow's is 1 for all).
var yarnBetaArchs = map[string]float64{"grok": 8, "mistral3": 32, "k2-horizon": 32, "laguna": 32}

// swaRoPE is r turned by rope.freq_base_swa where the file gives it: the
// RoPE of the sliding layers of architectures whose graphs llama.cpp
// 0.7.0 builds with each layer's own base (gemma2, gemma3n, gpt-oss,
// llama4's chunked layers, afmoe; probed), r's base when absent; r itself
// (nil after an error) once l has failed.
func (l *Loader) swaRoPE(r *nn.RoPE) *nn.RoPE {
	if r == nil || l.err != nil {
		return r
	}
	base, err := meta{l.f, l.HP.Arch}.float("rope.freq_base_swa", r.Base)
	switch {
	case err != nil:
		l.fail(err)
	case !(base > 0):
		l.Failf("metadata %s.rope.freq_base_swa = %g, want > 0", l.HP.Arch, base)
	case base != r.Base:
		return r.WithBase(base)
	}
	return r
}

// noneScalesSWA are the architectures whose sliding layers llama.cpp
// 0.7.0 turns by freq_scale_swa, 1/rope.scaling.factor, even when
// rope.scaling.type is none, which unscales the others (probed; such a
// file is refused).
var noneScalesSWA = map[string]bool{"afmoe": true, "gemma2": true, "llama4": true, "maion-coder": true, "maple": true, "smallthinker": true, "spark2_5": true, "gpt-oss": true}

// wholeHeads reports whether r turns whole heads, and fails l otherwise:
// the architectures whose graphs llama.cpp 0.7.0 builds only then (it
// asserts n_rot = the head size).
func (l *Loader) wholeHeads(r *nn.RoPE) bool {
	if r.Dims == l.HP.HeadDim {
		return true
	}
	l.Failf("metadata %s.rope.dimension_count = %d: %s rotates whole heads of %d (llama.cpp 0.7.0 asserts it)", l.HP.Arch, r.Dims, l.HP.Arch, l.HP.HeadDim)
	return false
}

func (l *Loader) rope(neox bool) (*nn.RoPE, RopeInfo, error) {
	hp, o := l.HP, l.Opts
	m := meta{l.f, hp.Arch}
	var info RopeInfo
	var err error
	num := func(key string, def float64) float64 {
		v, e := m.float(key, def)
		if err == nil {
			err = e
		}
		return v
	}
	base := num("rope.freq_base", 10000)
	// llama.cpp: rope.scaling.factor, or the old rope.scale_linear where
	// the file has no rope.scaling.factor; 0 means 1.
	factorKey := "rope.scaling.factor"
	if !m.has(factorKey) {
		factorKey = "rope.scale_linear"
	}
	factor := num(factorKey, 0)
	attn := num("rope.scaling.attn_factor", 1)
	// llama.cpp 0.7.0 reads YaRN's ramp for the architectures yarnBetaArchs
	// names (and the mix for grok alone); the others are turned with 32, 1
	// and the full mix whatever the file says (probed on each).
	betaFast, betaSlow, ext := 32.0, 1.0, -1.0
	if def, ok := yarnBetaArchs[hp.Arch]; ok {
		betaFast = num("rope.scaling.yarn_beta_fast", def)
		betaSlow = num("rope.scaling.yarn_beta_slow", 1)
	}
	if hp.Arch == "grok" {
		ext = num("rope.scaling.yarn_ext_factor", -1)
	}
	if ext < 0 { // llama.cpp's "not set"
		ext = 1
	}
	scaling, e := m.string("rope.scaling.type", "linear")
	if err == nil {
		err = e
	}
	dims, e := m.int("rope.dimension_count", hp.HeadDim)
	if err == nil {
		err = e
	}
	orig, e := m.int("rope.scaling.original_context_length", hp.CtxTrain)
	if err == nil {
		err = e
	}
	alpha := 0.0
	if ntkAlphaArchs[hp.Arch] {
		alpha = num("rope.scaling.alpha", 0)
	}
	if err != nil {
		return nil, info, err
	}
	if alpha > 0 && hp.HeadDim > 2 { // llama.cpp's hunyuan-vl hparams, in float32
		base = float64(float32(base) * float32(math.Pow(float64(float32(alpha)), float64(float32(hp.HeadDim)/float32(hp.HeadDim-2)))))
	}
	if o.RopeFreqBase > 0 {
		base = o.RopeFreqBase
	}
	if o.RopeScaling != "" {
		scaling = o.RopeScaling
	}
	if o.RopeScaleFactor > 0 {
		factor = o.RopeScaleFactor
	}
	if factor == 0 {
		factor = 1
	}
	if o.RopeOrigCtx > 0 {
		orig = o.RopeOrigCtx
	}
	r := &nn.RoPE{HeadDim: hp.HeadDim, Dims: dims, NeoX: neox, Base: base, FreqScale: 1 / factor, AttnFactor: attn}
	switch scaling {
	case "none":
		if factor != 1 && noneScalesSWA[hp.Arch] {
			return nil, info, fmt.Errorf("metadata %s.rope.scaling.type none with factor %g: llama.cpp 0.7.0 still scales %s's sliding layers by it, which ppl does not match", hp.Arch, factor, hp.Arch)
		}
		r.FreqScale, factor = 1, 1 // llama.cpp never scales when the type is none
	case "linear":
	case "yarn":
		r.ExtFactor = ext
		r.BetaFast, r.BetaSlow, r.OrigCtx = betaFast, betaSlow, orig
	default:
		return nil, info, fmt.Errorf("rope scaling type %q not supported (supported: none, linear, yarn)", scaling)
	}
	if l.Has("rope_freqs.weight") {
		r.FreqFactors = l.floats("rope_freqs.weight", dims/2)
		if l.err != nil {
			return nil, info, l.err
		}
	}
	if err := r.Validate(); err != nil {
		return nil, info, err
	}
	if scaling == "linear" && factor == 1 {
		scaling = "none" // llama.cpp's default type with no factor
	}
	info = RopeInfo{Layout: "normal", Dims: dims, FreqBase: base, Scaling: scaling, Factor: factor,
		AttnFactor: attn, FreqFactors: r.FreqFactors != nil}
	if neox {
		info.Layout = "neox"
	}
	if r.ExtFactor != 0 {
		info.OrigCtx, info.ExtFactor, info.BetaFast, info.BetaSlow = orig, r.ExtFactor, betaFast, betaSlow
	}
	return r, info, nil
}

// yarnAttnFactor is the attention factor llama.cpp 0.7.0 hands
// ggml_rope_ext under YaRN when its hparams hold a log multiplier lm ≠ 0
// (its context's yarn_attn_factor: mistral3, and deepseek2's kin through
// latentYaRN), in float32 op by op as it computes it: get_mscale(f,
// 1)/get_mscale(f, lm), get_mscale(f, a) = 0.1·a·ln f + 1, times 1/(1 +
// 0.1·ln f), which cancels the magnitude ggml multiplies back, times
// rope.scaling.attn_factor attn; f = 1/freqScale. Computed in float64, the
// factor can land an ulp away, which moved a mistral3 log-prob by 4.6e-4
// in a probe.
func yarnAttnFactor(freqScale, lm, attn float64) float32 {
	f := 1 / float32(freqScale)
	lnf := nn.LibcLogf(f)
	mscale := func(a float32) float32 { return float32(float32(float32(0.1)*a)*lnf) + 1 }
	a := mscale(1) / mscale(float32(lm))
	a *= 1 / nn.YaRNMagnitude(float32(freqScale))
	return a * float32(attn)
}
