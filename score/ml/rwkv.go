package ml

import "fmt"

// RWKV is the extension a backend implements to run RWKV-7 (rwkv7): its
// time mix blends each token with the previous one (token shift), gates
// with sigmoids, decays a matrix state per head by a learned amount per
// channel and corrects it by a rank-one delta rule (WKV7). The rest of an
// RWKV-7 layer is Backend's (Linear, Add, MLP), ml.Recurrent's (Mul, L2Norm,
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
//   - Decay: x = exp(-0.606531 · sigmoid(x)) elementwise (RWKV-7's decay,
//     between e^-0.606531 and 1).
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
//   - Bonus: for each head h of size d (heads = columns/d), dst[t,h,:] +=
//     v[t,h,:] · Σ_i r[t,h,i]·k[t,h,i]·u[h·d+i] (RWKV-7's current-token
//     term, u the layer's time_mix_r_k).
type RWKV interface {
	TokenShift(dst, x Tensor)
	Sigmoid(x Tensor)
	Decay(x Tensor)
	Sub(dst, a, b Tensor)
	WKV7(dst, r, w, k, v, a, b, state Tensor, heads int)
	Bonus(dst, r, k, v Tensor, u *Vector, heads int)
}

// WKV7Shapes checks the operands of RWKV.WKV7 for the tokens of r: it
// returns the first that has another shape, for the backend to report.
func WKV7Shapes(dst, r, w, k, v, a, b, state Tensor, heads int) error {
	n, c := r.Rows(), r.Cols()
	if heads <= 0 || c%heads != 0 {
		return fmt.Errorf("wkv7: %d columns in %d heads", c, heads)
	}
	d := c / heads
	for _, o := range []struct {
		what       string
		t          Tensor
		rows, cols int
	}{
		{"wkv7 w", w, n, c}, {"wkv7 k", k, n, c}, {"wkv7 v", v, n, c}, {"wkv7 a", a, n, c}, {"wkv7 b", b, n, c},
		{"wkv7 output", dst, n, c}, {"wkv7 state", state, c, d},
	} {
		if o.t.Rows() != o.rows || o.t.Cols() != o.cols {
			return fmt.Errorf("%s is %d×%d, want %d×%d", o.what, o.t.Rows(), o.t.Cols(), o.rows, o.cols)
		}
	}
	return nil
}
