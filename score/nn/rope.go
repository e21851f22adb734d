package nn

import (
	"fmt"
	"math"
	"sync"
)

// RoPE rotates pairs of elements of each query and key head by an angle
// that grows with the token's position, as llama.cpp's ggml_rope_ext does.
//
// Pair i (0 <= i < Dims/2) of a head turns by θ_i(p) = p · Base^(-2i/Dims)
// at position p. Two layouts exist, and a model is trained with one:
//
//   - normal (NeoX false; llama.cpp's LLAMA_ROPE_TYPE_NORM, used by llama):
//     pairs are adjacent elements (2i, 2i+1). GGUF llama files permute
//     the q/k weights at conversion so this matches the original model.
//   - NeoX (qwen2, qwen3): pair i is (i, i + Dims/2), the halves of the head.
//
// Elements past Dims (partial rotary) are left as they are.
//
// Context extension, with llama.cpp's names:
//   - linear: positions are divided by the factor, FreqScale = 1/factor.
//   - YaRN (ExtFactor > 0): each pair mixes the interpolated angle
//     FreqScale·θ with the original θ by a ramp over the pair index between
//     the "correction dims" of BetaFast and BetaSlow at OrigCtx (rope_yarn
//     and ggml_rope_yarn_corr_dims in ggml), and cos and sin are multiplied
//     by AttnFactor · (1 + 0.1·ln(1/FreqScale)).
//
// FreqFactors, when set (Llama 3.1's rope_freqs tensor), divide θ_i.
//
// Angles, cosines and sines are float64 (exact to a few ulps at any
// position), and each rotated element is rounded to float32 once.
type RoPE struct {
	HeadDim     int     // elements per head
	Dims        int     // rotated elements per head (n_rot), even, <= HeadDim
	NeoX        bool    // pair layout: (i, i+Dims/2) when true, (2i, 2i+1) when false
	Base        float64 // frequency base (rope.freq_base)
	FreqScale   float64 // 1/scaling factor; 1 for no scaling
	ExtFactor   float64 // YaRN extrapolation mix; 0 disables YaRN
	AttnFactor  float64 // YaRN magnitude factor (1 = none)
	BetaFast    float64 // YaRN ramp corner (llama.cpp default 32)
	BetaSlow    float64 // YaRN ramp corner (llama.cpp default 1)
	OrigCtx     int     // YaRN: the context the model was trained at
	FreqFactors []float32
	// Back turns by -θ instead: the inverse rotation, as ggml_rope_ext_back
	// computes it (the sine negated; DeepSeek-V4 turns its heads' outputs
	// back).
	Back bool

	mu       sync.Mutex
	cos, sin []float64 // per position, Dims/2 values each; cover positions [0, n)
	n        int
}

// WithBase is r with another frequency base (a sliding layer's own:
// rope.freq_base_swa) and tables of its own.
func (r *RoPE) WithBase(base float64) *RoPE {
	c := r.params()
	c.Base = base
	return c
}

// Sliding is r as llama.cpp turns a sliding layer whose freq_scale_swa is
// 1 (gemma3, gemma3n, gemma4, mimo2, step35, plamo3): frequency base base (the
// layer's rope.freq_base_swa), no frequency scale, and r's YaRN mix and
// attention factor, which the graph passes to every layer.
func (r *RoPE) Sliding(base float64) *RoPE {
	c := r.WithBase(base)
	c.FreqScale = 1
	return c
}

// WithDims is r rotating dims elements of each head, with the first dims/2
// of its frequency factors, or none when factors is false (a layer's own
// partial RoPE: step35), and tables of its own.
func (r *RoPE) WithDims(dims int, factors bool) *RoPE {
	c := r.params()
	c.Dims, c.FreqFactors = dims, nil
	if factors && r.FreqFactors != nil {
		c.FreqFactors = r.FreqFactors[:min(dims/2, len(r.FreqFactors))]
	}
	return c
}

// params is a copy of r's settings without its tables.
func (r *RoPE) params() *RoPE {
	return &RoPE{HeadDim: r.HeadDim, Dims: r.Dims, NeoX: r.NeoX, Base: r.Base, FreqScale: r.FreqScale, ExtFactor: r.ExtFactor,
		AttnFactor: r.AttnFactor, BetaFast: r.BetaFast, BetaSlow: r.BetaSlow, OrigCtx: r.OrigCtx, FreqFactors: r.FreqFactors, Back: r.Back}
}

// Validate reports a setting that cannot work (odd Dims, Dims > HeadDim...).
func (r *RoPE) Validate() error {
	switch {
	case r.Dims <= 0 || r.Dims%2 != 0 || r.Dims > r.HeadDim:
		return fmt.Errorf("rope: %d rotated dimensions with head size %d (want even, 1..head size)", r.Dims, r.HeadDim)
	case !(r.Base > 0) || math.IsInf(r.Base, 0):
		return fmt.Errorf("rope: frequency base %v", r.Base)
	case !(r.FreqScale > 0) || math.IsInf(r.FreqScale, 0):
		return fmt.Errorf("rope: frequency scale %v (scaling factor must be positive)", r.FreqScale)
	case r.FreqFactors != nil && len(r.FreqFactors) != r.Dims/2:
		return fmt.Errorf("rope: %d frequency factors for %d pairs", len(r.FreqFactors), r.Dims/2)
	case r.ExtFactor != 0 && r.OrigCtx <= 0:
		return fmt.Errorf("rope: YaRN needs the original context length")
	}
	return nil
}

// CorrDims returns YaRN's correction dimensions [low, high] as
// ggml_rope_yarn_corr_dims computes them (in float32, as ggml does, since the
// floor and ceil make the result sensitive to the last bit).
func (r *RoPE) CorrDims() (low, high float64) {
	corr := func(nRot float64) float32 {
		return float32(r.Dims) * float32(math.Log(float64(float32(r.OrigCtx)/(float32(nRot)*2*math.Pi)))) / (2 * float32(math.Log(float64(float32(r.Base)))))
	}
	low = math.Max(0, math.Floor(float64(corr(r.BetaFast))))
	high = math.Min(float64(r.Dims-1), math.Ceil(float64(corr(r.BetaSlow))))
	return low, high
}

// Angle returns the cosine and sine pair i is turned by at position pos,
// including YaRN's magnitude scaling (the sine negated with Back): the
// direct formula, used to build the tables Forward reads.
func (r *RoPE) Angle(pos, i int) (cos, sin float64) {
	theta := float64(pos) * math.Pow(r.Base, -2*float64(i)/float64(r.Dims))
	if r.FreqFactors != nil {
		theta /= float64(r.FreqFactors[i])
	}
	interp := r.FreqScale * theta
	mscale := r.AttnFactor
	if mscale == 0 {
		mscale = 1
	}
	if r.ExtFactor != 0 {
		low, high := r.CorrDims()
		y := (float64(i) - low) / math.Max(0.001, high-low)
		ramp := float64((1 - math.Min(1, math.Max(0, y))) * r.ExtFactor)
		theta = float64(interp*(1-ramp)) + float64(theta*ramp)
		mscale *= 1 + float64(0.1*math.Log(1/r.FreqScale))
	} else {
		theta = interp
	}
	s, c := math.Sincos(theta)
	if r.Back {
		s = -s
	}
	return c * mscale, s * mscale
}

// tables returns cos and sin for positions [0, n), building them on first use.
func (r *RoPE) tables(n int) (cos, sin []float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n > r.n {
		h := r.Dims / 2
		r.cos, r.sin = make([]float64, n*h), make([]float64, n*h)
		for p := 0; p < n; p++ {
			for i := 0; i < h; i++ {
				r.cos[p*h+i], r.sin[p*h+i] = r.Angle(p, i)
			}
		}
		r.n = n
	}
	return r.cos, r.sin
}

// Forward rotates x in place: x (n, heads, HeadDim), row t at position t.
// With Context.LlamaCPP it computes as llama.cpp does (ggmlRoPE).
func (r *RoPE) Forward(c *Context, x []float32, n, heads int) {
	if c.LlamaCPP {
		r.ggmlRoPE(c, x, n, heads)
		return
	}
	check("RoPE input", len(x), n*heads*r.HeadDim)
	cos, sin := r.tables(n)
	h := r.Dims / 2
	c.Parallel(n, func(_, lo, hi int) {
		for t := lo; t < hi; t++ {
			ct, st := cos[t*h:(t+1)*h], sin[t*h:(t+1)*h]
			for hd := 0; hd < heads; hd++ {
				v := x[(t*heads+hd)*r.HeadDim : (t*heads+hd+1)*r.HeadDim]
				r.rotate(v, ct, st)
			}
		}
	})
}

// rotate turns the pairs of one head v by the angles of one position.
func (r *RoPE) rotate(v []float32, cos, sin []float64) {
	h := r.Dims / 2
	for i := 0; i < h; i++ {
		ia, ib := 2*i, 2*i+1
		if r.NeoX {
			ia, ib = i, i+h
		}
		a, b := float64(v[ia]), float64(v[ib])
		v[ia] = float32(float64(a*cos[i]) - float64(b*sin[i]))
		v[ib] = float32(float64(a*sin[i]) + float64(b*cos[i]))
	}
}
