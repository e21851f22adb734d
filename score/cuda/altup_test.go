package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// altUpCheck compares got with want element by element (bitCompare).
func altUpCheck(t *testing.T, what string, got, want []float32, maxULP int64, frac float64) {
	t.Helper()
	var c bitCompare
	for i := range want {
		c.add(got[i], want[i], i)
	}
	c.check(t, what, maxULP, frac)
}

// cpuStreams is token t's row of each of the A streams of n rows of cols
// stacked in x, as the CPU backend reads them (cpu_altup.go's streams).
func cpuStreams(x []float32, n, A, cols, t int) [][]float32 {
	return simStreams(x, n, A, cols, t, make([][]float32, A))
}

// The ml.AltUp operations (altup.go, kernels/altup.cu) against the CPU
// backend's results outside its int8 modes: nn's float64 references per
// token, the streams stacked as the CPU stacks them (cpu_altup.go). On
// random and adversarial input: zeros of both signs, infinities, NaN,
// subnormals, ±MaxFloat32, tanh's saturation; MatchNorm with a zero row
// (0·∞: NaN) and a zero reference (0), rows of 10³⁰ and 10⁻³⁰, widths of
// one block of 32 threads and of 128; the prediction with coefficients
// that cancel a stream (-1 on the diagonal); the correction in place and
// into another tensor, each stream active. Tanh and MatchNorm agree to an
// ulp (libm's tanh, float64 sums in another order); the others bit for
// bit.
func TestAltUpParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		b := testBackend(e)
		defer b.Close()
		rng := rand.New(rand.NewPCG(61, 1))
		const A, n, cols = 4, 13, 97
		edge := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
			1e-30, -1e-30, 1e-45, -1e-45, math.MaxFloat32, -math.MaxFloat32, 20, -20, 0.5493061443340549, 9.01, -9.01}
		read := func(x ml.Tensor) []float32 {
			t.Helper()
			v := b.Read(x)
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			return v
		}

		x := randF32(rng, n*cols, 3)
		copy(x, edge)
		xt := b.put(t, n, cols, x)
		b.Tanh(xt)
		want := slices.Clone(x)
		nn.Tanh(want)
		altUpCheck(t, "tanh_f32", read(xt), want, 1, 1e-2)

		w := &ml.Vector{Name: "altup_correct_scale", V: randF32(rng, cols, 2)}
		w.V[0], w.V[1], w.V[2] = 0, 1e30, float32(math.Copysign(0, -1))
		if err := b.PrepareVector(w); err != nil {
			t.Fatal(err)
		}
		for _, inPlace := range []bool{false, true} {
			xt := b.put(t, n, cols, x)
			dst := xt
			if !inPlace {
				dst = b.Alloc(n, cols)
			}
			b.MulCols(dst, xt, w)
			for i, v := range x {
				want[i] = v * w.V[i%cols]
			}
			altUpCheck(t, fmt.Sprintf("mul_cols (in place %v, exact)", inPlace), read(dst), want, 0, 0)
		}

		for _, width := range []int{cols, 300} {
			xs, refs := randF32(rng, n*width, 2), randF32(rng, n*width, 5)
			for i := range width {
				xs[i] = 0                         // row 0: ‖x‖ = 0, x·∞ = NaN
				refs[width+i] = 0                 // row 1: to 0
				xs[2*width+i] *= 1e30             // row 2: huge
				refs[3*width+i] *= 1e-30          // row 3: tiny
				xs[4*width+i] = edge[i%9+5]       // row 4: subnormals to ±MaxFloat32
				refs[5*width+i] = math.MaxFloat32 // row 5: a reference near float32's top
			}
			xt, rt := b.put(t, n, width, xs), b.put(t, n, width, refs)
			b.MatchNorm(xt, rt)
			want := slices.Clone(xs)
			for r := range n {
				nn.MatchNorm(want[r*width:(r+1)*width], refs[r*width:(r+1)*width])
			}
			altUpCheck(t, fmt.Sprintf("match_norm (rows of %d)", width), read(xt), want, 1, 1e-2)
		}

		s := randF32(rng, A*n*cols, 2)
		copy(s, edge[:5])
		copy(s[3*n*cols+7:], edge)
		coef := randF32(rng, n*A*A, 1)
		for j := range A {
			coef[A*A+j*A+j] = -1 // token 1: each stream cancels itself
		}
		coef[2*A*A+5] = 1e30
		st, ct := b.put(t, A*n, cols, s), b.put(t, n, A*A, coef)
		dst := b.Alloc(A*n, cols)
		b.AltUpPredict(dst, st, ct)
		want = make([]float32, len(s))
		for tk := range n {
			nn.AltUpPredict(cpuStreams(want, n, A, cols, tk), cpuStreams(s, n, A, cols, tk), coef[tk*A*A:(tk+1)*A*A])
		}
		altUpCheck(t, "altup_predict (exact)", read(dst), want, 0, 0)

		act := randF32(rng, n*cols, 3)
		copy(act[cols:], edge)
		cc := randF32(rng, n*A, 1)
		cc[5] = -1 // token 1, stream 1 keeps its prediction
		cct := b.put(t, n, A, cc)
		at := b.put(t, n, cols, act)
		for active := range A {
			for _, inPlace := range []bool{false, true} {
				pt := b.put(t, A*n, cols, s)
				dst := pt
				if !inPlace {
					dst = b.Alloc(A*n, cols)
				}
				b.AltUpCorrect(dst, pt, at, cct, active)
				want := slices.Clone(s)
				for tk := range n {
					ws := cpuStreams(want, n, A, cols, tk)
					nn.AltUpCorrect(ws, ws, act[tk*cols:(tk+1)*cols], cc[tk*A:(tk+1)*A], active)
				}
				altUpCheck(t, fmt.Sprintf("altup_correct (active %d, in place %v, exact)", active, inPlace), read(dst), want, 0, 0)
			}
		}

		defer func() {
			if recover() == nil {
				t.Error("AltUpPredict into its own input did not panic")
			}
		}()
		b.AltUpPredict(st, st, ct)
	})
}

// gaussian_topk_f32 (MLP's TopK) against nn.GaussianTopK, on rows of 77
// (a warp), 300 and 2048 (128 threads): normal rows of several scales and
// means, a constant row (σ = 0: all cut), zeros, an outlier of 10³⁰ (every
// other value cut), a NaN (the row NaN) and ±Inf; k of Gemma 3n (1.64485)
// and 0 (the values above the mean kept). Within an ulp: the float64 sums
// run in a block's order.
func TestGaussianTopKParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(62, 1))
		const rows = 9
		for _, d := range []int{77, 300, 2048} {
			x := make([]float32, rows*d)
			for r := range rows {
				row := x[r*d : (r+1)*d]
				for i := range row {
					row[i] = float32(rng.NormFloat64()*math.Pow(10, float64(r%4)-1) + float64(r))
				}
				switch r {
				case 4:
					for i := range row {
						row[i] = 2.5
					}
				case 5:
					clear(row)
				case 6:
					row[d/2] = 1e30
				case 7:
					row[3] = float32(math.NaN())
				case 8:
					row[0], row[1] = float32(math.Inf(1)), float32(math.Inf(-1))
				}
			}
			for _, k := range []float64{1.6448533535003662, 0} {
				xp := devPut(t, e, x)
				do(t, e, func() error { return e.gaussianTopK(xp, rows, d, k) })
				want := slices.Clone(x)
				kept := 0
				for r := range rows {
					nn.GaussianTopK(want[r*d:(r+1)*d], k)
				}
				for _, v := range want[:4*d] {
					kept += b2i(v != 0)
				}
				if kept == 0 || kept == 4*d {
					t.Fatalf("rows of %d, k %g: the random rows kept %d of %d: want some cut", d, k, kept, 4*d)
				}
				altUpCheck(t, fmt.Sprintf("gaussian_topk_f32 (rows of %d, k %g; %d of %d random values kept)", d, k, kept, 4*d),
					devGet[float32](t, e, xp, rows*d), want, 1, 1e-3)
			}
		}
	})
}
