package cuda

import (
	"fmt"
	"math"

	"ppl.dev/score/ml"
)

// The GPU's ml.AltUp (gemma3n) and ml.MLP.TopK's gate sparsification
// (gaussianTopK, which mlp runs on every gated MLP's Gate·x with TopK >
// 0), each a kernel of kernels/altup.cu: float64 inside with one rounding
// to float32, the plain definitions (nn.Tanh, nn.MatchNorm,
// nn.AltUpPredict, nn.AltUpCorrect, nn.GaussianTopK) that the CPU computes
// outside its int8 modes; MulCols is the CPU's float32 product, bit for
// bit. The int8 mode computes them so too (int8.go: the operations between
// products are the GPU's own). MatchNorm and the top-k reduce a row in a
// block (normBlock); the others are a thread per value, AltUpCorrect's per
// token and column, across the streams.

var _ ml.AltUp = (*gpuBackend)(nil)

func init() {
	kernelModules["altup"] = []string{"tanh_f32", "mul_cols", "match_norm", "altup_predict", "altup_correct", "gaussian_topk_f32"}
}

func (b *gpuBackend) Tanh(x ml.Tensor) {
	d := g(x)
	if d.count() == 0 {
		return
	}
	b.do("tanh", func() error { return b.e.launch("tanh_f32", gridFor(d.count()), block256, d.p, d.count()) })
}

func (b *gpuBackend) MulCols(dst, x ml.Tensor, w *ml.Vector) {
	d, s := g(dst), g(x)
	gshape("column product", d, s.rows, s.cols)
	if len(w.V) != s.cols {
		panic(fmt.Sprintf("cuda backend: %s has %d values for %d columns", w.Name, len(w.V), s.cols))
	}
	if s.count() == 0 {
		return
	}
	b.do("column product "+w.Name, func() error {
		return b.e.launch("mul_cols", gridFor(s.count()), block256, d.p, s.p, gv(w), s.rows, s.cols)
	})
}

func (b *gpuBackend) MatchNorm(x, ref ml.Tensor) {
	d, r := g(x), g(ref)
	gshape("match-norm reference", r, d.rows, d.cols)
	if d.count() == 0 {
		return
	}
	b.do("match norm", func() error {
		return b.e.launch("match_norm", dim3{uint32(d.rows), 1, 1}, normBlock(d.cols), d.p, r.p, d.rows, d.cols)
	})
}

// overlap reports whether a and b share device memory.
func overlap(a, b *gt) bool {
	return a.p < b.p+ptr(4*b.count()) && b.p < a.p+ptr(4*a.count())
}

func (b *gpuBackend) AltUpPredict(dst, x, coef ml.Tensor) {
	d, s, c := g(dst), g(x), g(coef)
	A := int(math.Sqrt(float64(c.cols)))
	if A*A != c.cols || s.rows != A*c.rows || overlap(d, s) {
		panic(fmt.Sprintf("cuda backend: AltUp prediction of %d×%d streams by %d×%d coefficients", s.rows, s.cols, c.rows, c.cols))
	}
	gshape("AltUp prediction", d, s.rows, s.cols)
	if s.count() == 0 {
		return
	}
	b.do("AltUp prediction", func() error {
		return b.e.launch("altup_predict", gridFor(s.count()), block256, d.p, s.p, c.p, c.rows, A, s.cols)
	})
}

func (b *gpuBackend) AltUpCorrect(dst, pred, act, coef ml.Tensor, active int) {
	d, p, a, c := g(dst), g(pred), g(act), g(coef)
	A := c.cols
	if p.rows != A*c.rows || active < 0 || active >= A || d.p != p.p && overlap(d, p) {
		panic(fmt.Sprintf("cuda backend: AltUp correction of %d×%d streams by %d×%d coefficients, active %d", p.rows, p.cols, c.rows, c.cols, active))
	}
	gshape("AltUp correction", d, p.rows, p.cols)
	gshape("AltUp active output", a, c.rows, p.cols)
	if a.count() == 0 {
		return
	}
	b.do("AltUp correction", func() error {
		return b.e.launch("altup_correct", gridFor(a.count()), block256, d.p, p.p, a.p, c.p, c.rows, A, p.cols, active)
	})
}

// gaussianTopK: each row g of x (rows, d) f32 <- max(g - mean(g) -
// k·std(g), 0), std with d - 1 (nn.GaussianTopK).
func (e *Engine) gaussianTopK(x ptr, rows, d int, k float64) error {
	if rows == 0 {
		return nil
	}
	return e.launch("gaussian_topk_f32", dim3{uint32(rows), 1, 1}, normBlock(d), x, rows, d, k)
}
