package nn

import "math"

// MLP is a gated feed-forward block: out = Down(act(Gate(x), Up(x))), by
// default SwiGLU, silu(g) ⊙ u, as in Llama-family models; or with Gate nil
// an ungated one, out = Down(act(Up(x))), or act(Up(x)) with Down nil too.
type MLP struct {
	Gate, Up, Down *Linear
	// Act replaces SwiGLU when set: it computes out[i] = act(gate[i],
	// up[i]) over a row block (out may alias gate). GeGLU and OAISwiGLU
	// are the others we load. An ungated MLP's (ReLUSqr) gets Up's output
	// as gate and up nil.
	Act func(out, gate, up []float32)
}

// mlpRows is how many rows Forward runs through the block at a time, so
// that the two hidden activations (rows × FFN floats each) stay small for
// long windows.
const mlpRows = 4096

// Forward runs n rows: x (n, Up.In) -> out (n, Down.Out or Up.Out), mlpRows at a
// time. The activation is swiglu32 (ggmlSwiGLU, llama.cpp's, in the int8
// mode).
func (m *MLP) Forward(c *Context, out, x []float32, n int) {
	f := m.Up.Out
	rows := min(n, mlpRows)
	mark := c.Mark()
	g := c.Alloc(rows * f)
	var u []float32
	if m.Gate != nil {
		u = c.Alloc(rows * f)
	}
	for r0 := 0; r0 < n; r0 += rows {
		b := min(rows, n-r0)
		xs := x[r0*m.Up.In : (r0+b)*m.Up.In]
		if m.Gate == nil { // ungated: act(Up(x)), then Down (without Down, the output)
			y := g[:b*f]
			if m.Down == nil {
				y = out[r0*f : (r0+b)*f]
			}
			m.Up.Forward(c, y, xs, b)
			c.Parallel(b, func(_, lo, hi int) { m.Act(y[lo*f:hi*f], y[lo*f:hi*f], nil) })
			if m.Down != nil {
				m.Down.Forward(c, out[r0*m.Down.Out:(r0+b)*m.Down.Out], g, b)
			}
			continue
		}
		ForwardShared(c, xs, b, []*Linear{m.Gate, m.Up}, [][]float32{g[:b*f], u[:b*f]})
		act := m.Act
		if act == nil {
			act = swiglu32
			if c.LlamaCPP {
				act = ggmlSwiGLU
				if c.GGMLAVX2 {
					act = ggmlSwiGLUAVX2
				}
			}
		}
		c.Parallel(b, func(_, lo, hi int) {
			for t := lo; t < hi; t++ { // a row at a time: ggml's lanes restart at each row
				act(g[t*f:(t+1)*f], g[t*f:(t+1)*f], u[t*f:(t+1)*f])
			}
		})
		m.Down.Forward(c, out[r0*m.Down.Out:(r0+b)*m.Down.Out], g, b)
	}
	c.Release(mark)
}

// SwiGLU computes out[i] = silu(gate[i]) · up[i], silu(g) = g / (1 + e^-g),
// in float64 rounded once: the reference for swiglu32 (and for other
// backends' kernels). out may alias gate or up.
func SwiGLU(out, gate, up []float32) {
	check("SwiGLU gate", len(gate), len(out))
	check("SwiGLU up", len(up), len(out))
	for i := range out {
		g := float64(gate[i])
		out[i] = float32(g / (1 + math.Exp(-g)) * float64(up[i]))
	}
}

// ReGLU computes out[i] = gate[i] · up[i] where gate[i] > 0, else 0
// (SmallThinker's experts; ggml's REGLU, whose 0 is +0 whatever up and a
// NaN gate's too): the float32 product of two floats, exact in every mode.
// out may alias gate or up.
func ReGLU(out, gate, up []float32) {
	check("ReGLU gate", len(gate), len(out))
	check("ReGLU up", len(up), len(out))
	for i, g := range gate {
		if g > 0 {
			out[i] = g * up[i]
		} else {
			out[i] = 0
		}
	}
}

// ReLUSqr computes out[i] = max(x[i], 0)², the activation of an ungated
// MLP (Nemotron-H; ggml's RELU then SQR): the square of a float32 rounded
// once, as in float64. up is unused (nil). out may alias x.
func ReLUSqr(out, x, up []float32) {
	check("ReLUSqr input", len(x), len(out))
	for i, v := range x {
		out[i] = float32(max(v, 0) * max(v, 0))
	}
}

// GeGLU computes out[i] = gelu(gate[i]) · up[i] with the tanh form of
// GELU, gelu(g) = g/2 · (1 + tanh(sqrt(2/π) · (g + 0.044715 g³))), in
// float64 rounded once (Gemma). out may alias gate or up.
func GeGLU(out, gate, up []float32) {
	check("GeGLU gate", len(gate), len(out))
	check("GeGLU up", len(up), len(out))
	for i := range out {
		out[i] = float32(gelu64(float64(gate[i])) * float64(up[i]))
	}
}

// GELU computes out[i] = gelu(x[i]), GeGLU's tanh form of GELU, in float64
// rounded once: the activation of an ungated MLP (StarCoder2, Phi-2,
// GPT-NeoX); up is unused. out may alias x.
func GELU(out, x, _ []float32) {
	check("GELU input", len(x), len(out))
	for i, v := range x {
		out[i] = float32(gelu64(float64(v)))
	}
}

// gelu64 is the tanh form of GELU in float64.
func gelu64(g float64) float64 {
	const c = 0.7978845608028654 // sqrt(2/π)
	return 0.5 * g * (1 + math.Tanh(c*(g+float64(0.044715*g*g*g))))
}

// OAISwiGLU is gpt-oss's clamped SwiGLU: with g = min(gate, 7) and u =
// clamp(up, -7, 7), out = g · sigmoid(1.702 g) · (u + 1), in float64
// rounded once. out may alias gate or up.
func OAISwiGLU(out, gate, up []float32) {
	check("OAISwiGLU gate", len(gate), len(out))
	check("OAISwiGLU up", len(up), len(out))
	const limit, alpha = 7, 1.702
	for i := range out {
		g := math.Min(float64(gate[i]), limit)
		u := math.Max(-limit, math.Min(float64(up[i]), limit))
		out[i] = float32(g / (1 + math.Exp(-alpha*g)) * (u + 1))
	}
}

// ClampSwiGLU is Step-3.5's clamped SwiGLU for the limit l > 0:
// min(silu(gate), l) · clamp(up, -l, l), in float64 rounded once. out may
// alias gate or up.
func ClampSwiGLU(l float32) func(out, gate, up []float32) {
	lim := float64(l)
	return func(out, gate, up []float32) {
		check("ClampSwiGLU gate", len(gate), len(out))
		check("ClampSwiGLU up", len(up), len(out))
		for i := range out {
			g := float64(gate[i])
			u := math.Max(-lim, math.Min(float64(up[i]), lim))
			out[i] = float32(math.Min(g/(1+math.Exp(-g)), lim) * u)
		}
	}
}

// SwiGLUClampIn is ggml's SWIGLU_CLAMP for the limit l > 0 (Maple's
// experts): silu(min(gate, l)) · clamp(up, -l, l), in float64 rounded
// once. out may alias gate or up.
func SwiGLUClampIn(l float32) func(out, gate, up []float32) {
	lim := float64(l)
	return func(out, gate, up []float32) {
		check("SwiGLUClampIn gate", len(gate), len(out))
		check("SwiGLUClampIn up", len(up), len(out))
		for i := range out {
			g := math.Min(float64(gate[i]), lim)
			u := math.Max(-lim, math.Min(float64(up[i]), lim))
			out[i] = float32(g / (1 + math.Exp(-g)) * u)
		}
	}
}

// swiglu32 is SwiGLU in float32: out = (g / (1 + exp32(-g))) · u, each
// operation rounded, within 4 ulp of SwiGLU. out may alias gate or up.
func swiglu32(out, gate, up []float32) {
	check("swiglu32 gate", len(gate), len(out))
	check("swiglu32 up", len(up), len(out))
	n := len(out)
	i := 0
	if f := kern.swiglu; f != nil && n >= 16 {
		i = n &^ 15
		f(&out[0], &gate[0], &up[0], i)
	}
	swiglu32Generic(out[i:], gate[i:n], up[i:n])
}

// swiglu32Generic is g / (1 + exp32(-g)) · up, its exponentials by exps
// (the NEON level's kernel, where it has one) a block at a time: (-g) - 0
// is -g, and a NaN g gives the same NaN either way.
func swiglu32Generic(out, gate, up []float32) {
	var e [256]float32
	for i := 0; i < len(gate); i += len(e) {
		g := gate[i:min(i+len(e), len(gate))]
		c := e[:len(g)]
		for j, v := range g {
			c[j] = -v
		}
		exps(c, c, 0)
		for j, v := range g {
			out[i+j] = v / (1 + c[j]) * up[i+j]
		}
	}
}

// ExpSum returns Σ e^(x[i]-m) in float64, each term exp32 (float32, within
// 2 ulp), for the log-sum-exp over a vocabulary: the terms are summed in
// float64 in 16 lanes (element i in lane i mod 16), folded in a fixed order,
// then the tail past the last multiple of 16 is added in order.
func ExpSum(x []float32, m float32) float64 {
	n := len(x) &^ 15
	var s float64
	if f := kern.expSum; f != nil {
		if n > 0 {
			s = f(&x[0], n, m)
		}
	} else {
		s = expSumGeneric(x[:n], m)
	}
	for _, v := range x[n:] {
		s += float64(exp32(v - m))
	}
	return s
}

// expSumGeneric is the vector kernels' sum for len(x) a multiple of 16.
func expSumGeneric(x []float32, m float32) float64 {
	var acc [16]float64
	var e [256]float32
	for i := 0; i+16 <= len(x); i += len(e) {
		c := e[:min(len(e), len(x)-i)]
		exps(c, x[i:i+len(c)], m)
		for b := 0; b < len(c); b += 16 {
			for j := range 16 {
				acc[j] += float64(c[b+j])
			}
		}
	}
	for j := range 8 {
		acc[j] += acc[j+8]
	}
	for j := range 4 {
		acc[j] += acc[j+4]
	}
	acc[0] += acc[2]
	acc[1] += acc[3]
	return acc[0] + acc[1]
}

// MaxArg returns the largest of x and the index of its first occurrence,
// or ok false if x holds a NaN or an infinity (or is empty).
func MaxArg(x []float32) (m float32, arg int, ok bool) {
	if len(x) == 0 {
		return 0, 0, false
	}
	n := len(x) &^ 15
	m = float32(math.Inf(-1))
	if f := kern.maxFinite; f != nil && n > 0 {
		if m, ok = f(&x[0], n); !ok {
			return 0, 0, false
		}
	} else {
		n = 0
	}
	for _, v := range x[n:] {
		if v-v != 0 {
			return 0, 0, false
		}
		m = max(m, v)
	}
	for i, v := range x {
		if v == m {
			return m, i, true
		}
	}
	return 0, 0, false // not reached: m is one of x
}

// SiTU is Kimi K3's gated activation, of parameters Beta > 0 and
// LinearBeta: β·tanh(g/β)·sigmoid(g) · λ·tanh(u/λ), the up branch left as
// it is when λ = LinearBeta <= 0 (llama.cpp's kimi_k3_situ).
type SiTU struct{ Beta, LinearBeta float32 }

// Ref computes out = SiTU(gate, up) in float64, each output rounded once.
// out may alias gate or up.
func (s SiTU) Ref(out, gate, up []float32) {
	check("SiTU gate", len(gate), len(out))
	check("SiTU up", len(up), len(out))
	b, lb := float64(s.Beta), float64(s.LinearBeta)
	for i := range out {
		g, u := float64(gate[i]), float64(up[i])
		if lb > 0 {
			u = lb * math.Tanh(u/lb)
		}
		out[i] = float32(b * math.Tanh(g/b) / (1 + math.Exp(-g)) * u)
	}
}

// GGML computes out = SiTU(gate, up) as llama.cpp's graph does, op by op in
// float32 (both CPU builds): SCALE by 1/β (float32), TANH (glibc's tanhf,
// correctly rounded), SCALE by β, MUL by SIGMOID(gate) (GGMLSigmoid), and
// up through SCALE by 1/λ, TANH, SCALE by λ; then MUL. out may alias gate
// or up.
func (s SiTU) GGML(out, gate, up []float32) {
	check("SiTU gate", len(gate), len(out))
	check("SiTU up", len(up), len(out))
	ib, il := 1/s.Beta, 1/s.LinearBeta
	for i := range out {
		g, u := gate[i], up[i]
		a := float32(math.Tanh(float64(g*ib))) * s.Beta
		a *= 1 / (1 + LibcExpf(-g))
		if s.LinearBeta > 0 {
			u = float32(math.Tanh(float64(u*il))) * s.LinearBeta
		}
		out[i] = a * u
	}
}
