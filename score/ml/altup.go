package ml

// AltUp is the extension a backend implements to run Gemma 3n (gemma3n):
// AltUp keeps several streams of the residual, of which a layer computes
// on one and predicts and corrects the others by per-token mixing
// coefficients; streams added at the start and merged at the end are
// rescaled to the norm of the first. A Network that needs it checks for it
// at load (model.Checker).
//
// Streams are stacked in one tensor: for A streams of n tokens, x (A·n,
// cols) holds stream k in rows [k·n, (k+1)·n).
//
// Plain definitions, the references the implementations are tested
// against (every value rounded to float32 once, from float64; the CPU's
// int8 modes round as llama.cpp's graph does, nn.GGMLAltUp):
//
//   - Tanh: x = tanh(x) elementwise.
//   - MulCols: dst[t, c] = x[t, c] · w[c]; dst may be x.
//   - MatchNorm: each row x[t] = x[t] · ‖ref[t]‖ / ‖x[t]‖ (Euclidean
//     norms; x and ref have the same rows).
//   - AltUpPredict: with A² = coef's columns, for stream j, token t:
//     dst[j][t] = x[j][t] + Σ_k coef[t, j·A+k] · x[k][t]; dst is not x.
//   - AltUpCorrect: with A = coef's columns, for stream j, token t:
//     dst[j][t] = pred[j][t] + (act[t] - pred[active][t]) · (coef[t, j] +
//     1); act has the rows of one stream; dst may be pred.
type AltUp interface {
	Tanh(x Tensor)
	MulCols(dst, x Tensor, w *Vector)
	MatchNorm(x, ref Tensor)
	AltUpPredict(dst, x, coef Tensor)
	AltUpCorrect(dst, pred, act, coef Tensor, active int)
}
