package nn

import "math"

// MLP is the SwiGLU feed-forward block of Llama-family models:
// out = Down(silu(Gate(x)) ⊙ Up(x)).
type MLP struct {
	Gate, Up, Down *Linear
}

// Forward runs n rows: x (n, Gate.In) -> out (n, Down.Out).
func (m *MLP) Forward(c *Context, out, x []float32, n int) {
	f := m.Gate.Out
	g := c.Alloc(n * f)
	u := c.Alloc(n * f)
	m.Gate.Forward(c, g, x, n)
	m.Up.Forward(c, u, x, n)
	c.Parallel(n, func(_, lo, hi int) {
		SwiGLU(g[lo*f:hi*f], g[lo*f:hi*f], u[lo*f:hi*f])
	})
	m.Down.Forward(c, out, g, n)
}

// SwiGLU computes out[i] = silu(gate[i]) · up[i], silu(g) = g / (1 + e^-g),
// in float64 rounded once. out may alias gate or up.
func SwiGLU(out, gate, up []float32) {
	check("SwiGLU gate", len(gate), len(out))
	check("SwiGLU up", len(up), len(out))
	for i := range out {
		g := float64(gate[i])
		out[i] = float32(g / (1 + math.Exp(-g)) * float64(up[i]))
	}
}
