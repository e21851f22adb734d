package ml

import (
	"fmt"
	"maps"
	"slices"
)

// RWKV is the extension a backend implements to run RWKV-7 (rwkv7, arwkv7)
// and RWKV-6 (rwkv6, rwkv6qwen2): their time mixes blend each token with
// the previous one (token shift), gate with sigmoids, decay a matrix state
// per head by a learned amount per channel and add each token's keys and
// values to it (WKV6), RWKV-7 correcting it by a rank-one delta rule
// (WKV7). The rest of an RWKV layer is Backend's (Linear, Add, MLP), ml.Recurrent's (Mul, L2Norm,
// Zero), ml.AltUp's (Tanh, MulCols) and ml.LayerNormer's operations. A
// Network that needs it checks for it at load (model.Checker).
//
// Plain definitions, the references the implementations are tested
// against (every tensor is (tokens, columns); each value rounded to
// float32 once, from float64; the CPU's int8 modes round as llama.cpp's
// graph does):
//
//   - TokenShift: dst[t] = x[t-1] - x[t], x[-1] = 0 (a window starts
//     from no previous token); dst is not x.
//   - Sigmoid: x = 1 / (1 + e^-x) elementwise.
//   - SiLU: x = x / (1 + e^-x) elementwise.
//   - Decay: x = exp(-0.606531 · sigmoid(x)) elementwise (DecaySigmoid,
//     RWKV-7's decay, between e^-0.606531 and 1), or x = exp(-exp(x))
//     (DecayExp, RWKV-6's).
//   - Sub: dst = a - b elementwise; dst may be a or b.
//   - WKV7: RWKV-7's recurrence, as ggml's RWKV_WKV7 computes it, from the
//     state in state, which it leaves holding the state after the last
//     token. Each head h of size d (heads = columns/d) keeps a d × d state
//     S (zero at a window's first token; rows h·d + i, column j of the
//     (heads·d, d) state tensor hold S[i][j]); each token t in order does,
//     for every row i, sa = Σ_j a[t,h,j]·S[i][j], then S[i][j] ← S[i][j]·
//     w[t,h,j] + v[t,h,i]·k[t,h,j] + sa·b[t,h,j], then dst[t,h,i] =
//     Σ_j S[i][j]·r[t,h,j]. r, w, k, v, a, b and dst are (tokens,
//     heads·d); RWKV-7 passes a = -κ̂ and b = κ̂ ⊙ iclr (its normalized
//     keys and in-context learning rate).
//   - WKV6: RWKV-6's recurrence (ggml's RWKV_WKV6) or, with u nil, gated
//     linear attention (ggml's GATED_LINEAR_ATTN, its scale applied to r
//     by the caller), from the state in state, which it leaves holding the
//     state after the last token. Each head h of size d keeps a d × d
//     state S (rows h·d + i, column j of the (heads·d, d) state tensor
//     hold S[i][j], i a key channel); each token t, with kv[i][j] =
//     k[t,h,i]·v[t,h,j], does: with u, dst[t,h,j] = Σ_i r[t,h,i]·(S[i][j] +
//     u[h·d+i]·kv[i][j]), then S[i][j] ← S[i][j]·w[t,h,i] + kv[i][j];
//     without, S[i][j] ← S[i][j]·w[t,h,i] + kv[i][j], then dst[t,h,j] =
//     Σ_i r[t,h,i]·S[i][j]. r, k, v, w and dst are (tokens, heads·d); u
//     holds heads·d values (time_mix_first).
//   - Bonus: for each head h of size d (heads = columns/d), dst[t,h,:] +=
//     v[t,h,:] · Σ_i r[t,h,i]·k[t,h,i]·u[h·d+i] (RWKV-7's current-token
//     term, u the layer's time_mix_r_k).
type RWKV interface {
	TokenShift(dst, x Tensor)
	Sigmoid(x Tensor)
	SiLU(x Tensor)
	Decay(x Tensor, kind Decay)
	Sub(dst, a, b Tensor)
	WKV6(dst, r, k, v, w, state Tensor, u *Vector, heads int)
	WKV7(dst, r, w, k, v, a, b, state Tensor, heads int)
	Bonus(dst, r, k, v Tensor, u *Vector, heads int)
}

// Decay is the form of RWKV.Decay.
type Decay int

const (
	// DecaySigmoid is RWKV-7's decay, exp(-0.606531 · sigmoid(x)).
	DecaySigmoid Decay = iota
	// DecayExp is RWKV-6's, exp(-exp(x)).
	DecayExp
)

// WKV7Shapes checks the operands of RWKV.WKV7 for the tokens of r: it
// returns the first that has another shape, for the backend to report.
func WKV7Shapes(dst, r, w, k, v, a, b, state Tensor, heads int) error {
	return wkvShapes("wkv7", r, heads, dst, state, map[string]Tensor{"w": w, "k": k, "v": v, "a": a, "b": b})
}

// WKV6Shapes checks the operands of RWKV.WKV6 as WKV7Shapes does, and u's
// length.
func WKV6Shapes(dst, r, k, v, w, state Tensor, u *Vector, heads int) error {
	if err := wkvShapes("wkv6", r, heads, dst, state, map[string]Tensor{"k": k, "v": v, "w": w}); err != nil {
		return err
	}
	if u != nil && len(u.V) != r.Cols() {
		return fmt.Errorf("wkv6: %s has %d values for %d columns", u.Name, len(u.V), r.Cols())
	}
	return nil
}

// wkvShapes checks the operands of a recurrence over the heads of r's
// columns: dst and each of ops (by name) as r, the state (columns, head
// size).
func wkvShapes(op string, r Tensor, heads int, dst, state Tensor, ops map[string]Tensor) error {
	n, c := r.Rows(), r.Cols()
	if heads <= 0 || c%heads != 0 {
		return fmt.Errorf("%s: %d columns in %d heads", op, c, heads)
	}
	shape := func(what string, t Tensor, rows, cols int) error {
		if t.Rows() != rows || t.Cols() != cols {
			return fmt.Errorf("%s %s is %d×%d, want %d×%d", op, what, t.Rows(), t.Cols(), rows, cols)
		}
		return nil
	}
	if err := shape("output", dst, n, c); err != nil {
		return err
	}
	if err := shape("state", state, c, c/heads); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(ops)) {
		if err := shape(name, ops[name], n, c); err != nil {
			return err
		}
	}
	return nil
}
