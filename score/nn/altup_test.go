package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAltUpGGML: llama.cpp's rounding of Gemma 3n's operations against
// the float64 references, on random rows and on adversarial ones (values
// spanning 2^±20, a row of equal values, a row with one nonzero): the
// float32 sequences stay within a few units of the last place of the
// result's scale, relative to the largest magnitude involved.
func TestAltUpGGML(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	rows := func(n int) [][]float32 {
		var out [][]float32
		for range 200 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			out = append(out, x)
		}
		wide, flat, one := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range wide {
			wide[i] = float32(math.Ldexp(r.NormFloat64(), r.IntN(41)-20))
			flat[i] = 0.75
		}
		one[n/2] = -3
		return append(out, wide, flat, one)
	}
	// worst is the largest |a - b| in units of float32's epsilon times scale.
	worst := func(a, b []float32, scale float64) float64 {
		w := 0.0
		for i := range a {
			w = max(w, math.Abs(float64(a[i])-float64(b[i]))/(scale*0x1p-23))
		}
		return w
	}
	absMax := func(x []float32) float64 {
		m := 0.0
		for _, v := range x {
			m = max(m, math.Abs(float64(v)))
		}
		return m
	}

	var wTopK, wNorm float64
	for _, x := range rows(128) {
		a, b := append([]float32(nil), x...), append([]float32(nil), x...)
		GaussianTopK(a, 1.6448533535003662)
		GGMLGaussianTopK(b, 1.6448533535003662)
		wTopK = max(wTopK, worst(a, b, absMax(x)))
		ref := rows(128)[3]
		a, b = append([]float32(nil), x...), append([]float32(nil), x...)
		MatchNorm(a, ref)
		GGMLMatchNorm(b, ref)
		wNorm = max(wNorm, worst(a, b, absMax(a)))
	}
	// Measured: 0.65 and 1.54 (the norms' ratio rounds three times).
	if wTopK > 1.5 || wNorm > 3 {
		t.Errorf("GGMLGaussianTopK within %.3g ε·max|x| of GaussianTopK, GGMLMatchNorm within %.3g ε·max|out|; want <= 1.5 and 3", wTopK, wNorm)
	}

	var wPred, wCorr float64
	const A, E = 4, 96
	for i := range 100 {
		x, p := make([][]float32, A), make([][]float32, A)
		for k := range A {
			x[k] = rows(E)[i%203]
			p[k] = make([]float32, E)
		}
		coef := make([]float32, A*A)
		for j := range coef {
			coef[j] = float32(r.NormFloat64())
		}
		q := make([][]float32, A)
		for k := range A {
			q[k] = make([]float32, E)
		}
		AltUpPredict(p, x, coef)
		GGMLAltUpPredict(q, x, coef)
		scale := 0.0
		for k := range A {
			scale = max(scale, absMax(x[k]))
		}
		for k := range A {
			wPred = max(wPred, worst(p[k], q[k], scale*5))
		}
		act := rows(E)[(i+7)%203]
		AltUpCorrect(p, x, act, coef[:A], 1)
		GGMLAltUpCorrect(q, x, act, coef[:A], 1)
		for k := range A {
			wCorr = max(wCorr, worst(p[k], q[k], (scale+absMax(act))*3))
		}
	}
	// Measured: 0.95 and 0.98.
	if wPred > 2 || wCorr > 2 {
		t.Errorf("GGMLAltUpPredict within %.3g, GGMLAltUpCorrect within %.3g ε of the references' scale; want <= 2", wPred, wCorr)
	}
	t.Logf("ε·scale: top-k %.3g, match-norm %.3g, predict %.3g, correct %.3g", wTopK, wNorm, wPred, wCorr)
}

// TestAltUpCorrectAliases: the correction may write over the predictions
// (the innovation of each element is taken before its streams are
// written).
func TestAltUpCorrectAliases(t *testing.T) {
	pred := [][]float32{{1, 2}, {3, 4}, {5, 6}}
	act, coef := []float32{10, 20}, []float32{0.5, -1, 2}
	want := [][]float32{{1 + 7*1.5, 2 + 16*1.5}, {3, 4}, {5 + 7*3, 6 + 16*3}}
	for _, f := range []func(dst, pred [][]float32, act, coef []float32, active int){AltUpCorrect, GGMLAltUpCorrect} {
		p := [][]float32{append([]float32(nil), pred[0]...), append([]float32(nil), pred[1]...), append([]float32(nil), pred[2]...)}
		f(p, p, act, coef, 1)
		for k := range p {
			for e := range p[k] {
				if p[k][e] != want[k][e] {
					t.Errorf("stream %d element %d: %v, want %v", k, e, p[k][e], want[k][e])
				}
			}
		}
	}
}
