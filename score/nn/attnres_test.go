package nn

import (
	"math"
	"math/rand"
	"testing"
)

// TestGGMLKimiK3 pins Kimi K3's SiTU and residual attention against
// libggml 0.27.0's bits (testdata/ggml_ops.py situ 1.5 2 and resmix N C E
// 1e-5, in the zen4 and haswell builds): SiTU on TestGGMLArithmetic's
// gates and ups and on the gates times 40 (tanh and the sigmoid
// saturated), the same in both builds; the residual attention over 1, 3
// and 20 checkpoints, the last past the softmax's lanes of 16 (zen4) and 8
// (haswell), where the builds differ.
func TestGGMLKimiK3(t *testing.T) {
	in := ggmlTestInputs()
	g := append([]float32(nil), in.gate...)
	u := append([]float32(nil), in.up...)
	for _, v := range in.gate {
		g, u = append(g, v*40), append(u, v*40)
	}
	got := make([]float32, len(g))
	SiTU{1.5, 2}.GGML(got, g, u)
	if h := fnvBits(got); h != 0x1cc35ee3a2bbd8b4 {
		t.Errorf("SiTU: hash %#x, llama.cpp's %#x", h, uint64(0x1cc35ee3a2bbd8b4))
	}

	r := rand.New(rand.NewSource(3))
	for _, c := range []struct {
		n, C, E int
		want    [2]uint64 // zen4, haswell
	}{
		{7, 1, 64, [2]uint64{0xbee2350065657335, 0xbee2350065657335}},
		{5, 3, 130, [2]uint64{0x16619851c8e0b7cc, 0x16619851c8e0b7cc}},
		{9, 20, 48, [2]uint64{0x8c40c4367d572951, 0x9a54030b816c282f}},
	} {
		x, q, w := resMixInputs(r, c.n, c.C, c.E)
		for b, avx2 := range []bool{false, true} {
			out := make([]float32, c.n*c.E)
			tmp := make([]float32, c.E)
			for tk := range c.n {
				GGMLResMix(out[tk*c.E:(tk+1)*c.E], resMixRows(x, tk, c.C, c.E), q[tk*c.E:(tk+1)*c.E], w, tmp, 1e-5, avx2)
			}
			if h := fnvBits(out); h != c.want[b] {
				t.Errorf("res_mix of %d checkpoints (%d rows of %d, AVX2 build %v): hash %#x, llama.cpp's %#x", c.C, c.n, c.E, avx2, h, c.want[b])
			}
		}
	}
}

// resMixInputs returns n tokens' C checkpoint rows of E (token-major: (n,
// C, E)), the running rows (n, E) and the score weights.
func resMixInputs(r *rand.Rand, n, C, E int) (x, q, w []float32) {
	x, q, w = make([]float32, n*C*E), make([]float32, n*E), make([]float32, E)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 2)
	}
	for i := range q {
		q[i] = float32(r.NormFloat64() * 3)
	}
	for i := range w {
		w[i] = float32(1 + r.NormFloat64())
	}
	return x, q, w
}

// resMixRows are token tk's checkpoint rows in x.
func resMixRows(x []float32, tk, C, E int) [][]float32 {
	rows := make([][]float32, C)
	for j := range rows {
		rows[j] = x[(tk*C+j)*E : (tk*C+j+1)*E]
	}
	return rows
}

// TestResMix compares GGMLResMix with the float64 reference on random rows
// and adversarial ones: a zero row (scored by its epsilon alone), rows
// scaled by 1e4 and 1e-4 (scores far apart: a softmax of one winner), one
// checkpoint and 40; and checks the reference itself on rows whose mix is
// known exactly.
func TestResMix(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	const E = 96
	for _, c := range []struct {
		name  string
		C     int
		scale []float64 // per checkpoint, then cur
	}{
		{"one", 1, []float64{1, 1}},
		{"four", 4, []float64{1, 2, 0.5, 3, 1}},
		{"forty", 40, nil},
		{"zero cur", 3, []float64{1, 1, 1, 0}},
		{"far apart", 3, []float64{1e4, 1e-4, 1, 1e2}},
	} {
		x, q, w := resMixInputs(r, 1, c.C, E)
		for j := 0; c.scale != nil && j <= c.C; j++ {
			row := q
			if j < c.C {
				row = x[j*E : (j+1)*E]
			}
			for i := range row {
				row[i] *= float32(c.scale[j])
			}
		}
		rows := resMixRows(x, 0, c.C, E)
		got, want := make([]float32, E), make([]float32, E)
		GGMLResMix(got, rows, q, w, make([]float32, E), 1e-5, false)
		ResMix(want, rows, q, w, 1e-5)
		// Each output is a convex mix: bound by the largest term it sums.
		var m float64
		for _, row := range append(rows, q) {
			for _, v := range row {
				m = math.Max(m, math.Abs(float64(v)))
			}
		}
		worst := 0.0
		for i := range got {
			worst = math.Max(worst, math.Abs(float64(got[i]-want[i]))/m)
		}
		if worst > 0x1p-23 { // measured: 0.5 of 2^-23 at most

			t.Errorf("%s: GGMLResMix off the reference by %.3g of the largest term", c.name, worst)
		}
	}

	// Equal rows mix to themselves whatever the scores.
	row := []float32{1, -2, 3, 0.5}
	out := make([]float32, 4)
	ResMix(out, [][]float32{row, row}, row, []float32{1, 2, 3, 4}, 1e-6)
	for i := range row {
		if out[i] != row[i] {
			t.Errorf("equal rows: element %d mixed to %g, want %g", i, out[i], row[i])
		}
	}
}

// TestSiTU compares SiTU's GGML form with the float64 reference on the
// gates and ups of TestGGMLArithmetic, gates past tanh's and the
// sigmoid's saturation, zeros and the up branch left uncapped.
func TestSiTU(t *testing.T) {
	in := ggmlTestInputs()
	g := append([]float32(nil), in.gate...)
	u := append([]float32(nil), in.up...)
	for _, v := range []float32{0, -0, 1e-30, -1e-30, 50, -50, 200, -200, 1e4} {
		g, u = append(g, v), append(u, v)
	}
	for _, p := range []SiTU{{1.5, 2}, {0.25, 8}, {3, 0}} {
		got, want := make([]float32, len(g)), make([]float32, len(g))
		p.GGML(got, g, u)
		p.Ref(want, g, u)
		worst := 0.0
		for i := range got {
			ulp := math.Abs(float64(got[i]-want[i])) / math.Max(math.Abs(float64(want[i]))*0x1p-23, 0x1p-149)
			worst = math.Max(worst, ulp)
		}
		// Six roundings of float32 operations, two through tanh's slope.
		t.Logf("%+v %g", p, worst)
		if worst > 6 {
			t.Errorf("SiTU %+v: GGML off the reference by %.1f ulp", p, worst)
		}
	}
}
