package cuda

import (
	"errors"
	"fmt"

	"ppl.dev/score/nn"
)

// The emulation of kernels/altup.cu: each kernel is the CPU's arithmetic
// outside its int8 modes (cpuBackend's ml.AltUp, score/model/cpu_altup.go,
// and the top-k of its MLP): nn's references per row or token, and
// MulCols's float32 products.
func init() {
	for name, k := range map[string]simKernel{
		"tanh_f32": {2, func(s *simDevice, a *simArgs, grid dim3) error {
			x, n := f32s(a.ptr(0)), a.i64(1)
			if a.err != nil {
				return a.err
			}
			nn.Tanh(x[:n])
			return nil
		}},
		"mul_cols": {5, func(s *simDevice, a *simArgs, grid dim3) error {
			out, x, w, rows, cols := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2)), a.int(3), a.int(4)
			if a.err != nil {
				return a.err
			}
			for i := range rows * cols {
				out[i] = x[i] * w[i%cols]
			}
			return nil
		}},
		"match_norm": {4, func(s *simDevice, a *simArgs, grid dim3) error {
			x, ref, rows, d := f32s(a.ptr(0)), f32s(a.ptr(1)), a.int(2), a.int(3)
			if err := covers(grid[0], rows, "rows"); err != nil || a.err != nil {
				return errors.Join(err, a.err)
			}
			for r := range rows {
				nn.MatchNorm(x[r*d:(r+1)*d], ref[r*d:(r+1)*d])
			}
			return nil
		}},
		"altup_predict": {6, func(s *simDevice, a *simArgs, grid dim3) error {
			dst, x, coef, n, A, cols := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2)), a.int(3), a.int(4), a.int(5)
			if a.err != nil {
				return a.err
			}
			ds, xs := make([][]float32, A), make([][]float32, A)
			for t := range n {
				nn.AltUpPredict(simStreams(dst, n, A, cols, t, ds), simStreams(x, n, A, cols, t, xs), coef[t*A*A:(t+1)*A*A])
			}
			return nil
		}},
		"altup_correct": {8, func(s *simDevice, a *simArgs, grid dim3) error {
			dst, pred, act, coef := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2)), f32s(a.ptr(3))
			n, A, cols, active := a.int(4), a.int(5), a.int(6), a.int(7)
			if a.err != nil {
				return a.err
			}
			if active < 0 || active >= A {
				return fmt.Errorf("altup_correct: active stream %d of %d", active, A)
			}
			ds, ps := make([][]float32, A), make([][]float32, A)
			for t := range n {
				nn.AltUpCorrect(simStreams(dst, n, A, cols, t, ds), simStreams(pred, n, A, cols, t, ps), act[t*cols:(t+1)*cols], coef[t*A:(t+1)*A], active)
			}
			return nil
		}},
		"gaussian_topk_f32": {4, func(s *simDevice, a *simArgs, grid dim3) error {
			x, rows, d, k := f32s(a.ptr(0)), a.int(1), a.int(2), a.f64(3)
			if err := covers(grid[0], rows, "rows"); err != nil || a.err != nil {
				return errors.Join(err, a.err)
			}
			for r := range rows {
				nn.GaussianTopK(x[r*d:(r+1)*d], k)
			}
			return nil
		}},
	} {
		simKernels[name] = k
	}
}

// simStreams returns token t's row of each of the A streams of n rows of
// cols stacked in x.
func simStreams(x []float32, n, A, cols, t int, rows [][]float32) [][]float32 {
	for k := range A {
		r := k*n + t
		rows[k] = x[r*cols : (r+1)*cols]
	}
	return rows
}
