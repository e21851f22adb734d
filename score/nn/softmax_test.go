package nn

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSoftmaxTile runs two blocks of keyBlock keys of the online softmax at every level,
// checks that every level gives the generic bits, and checks the result
// against float64.
func TestSoftmaxTile(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	const rows = 13
	for trial := range 200 {
		s1, s2 := randVec(r, rows*keyBlock), randVec(r, rows*keyBlock)
		for i := range s1 {
			s1[i] *= 20 * float32(trial%5)
			s2[i] *= 20 * float32(trial%3)
		}
		lim1, lim2 := make([]int32, rows), make([]int32, rows)
		for i := range lim1 {
			lim1[i] = int32(1 + r.IntN(keyBlock))
			lim2[i] = int32(r.IntN(keyBlock + 1))
		}
		scale := float32(r.Float64() * 2)
		type state struct{ p1, p2, m, l, a1, a2 []float32 }
		var ref *state
		forEachLevel(t, func(t testing.TB, lv Level) {
			st := &state{p1: slices.Clone(s1), p2: slices.Clone(s2), m: make([]float32, rows), l: make([]float32, rows),
				a1: make([]float32, rows), a2: make([]float32, rows)}
			for i := range st.m {
				st.m[i] = float32(math.Inf(-1))
			}
			kern.softmax(&st.p1[0], rows, &lim1[0], scale, &st.m[0], &st.l[0], &st.a1[0])
			kern.softmax(&st.p2[0], rows, &lim2[0], scale, &st.m[0], &st.l[0], &st.a2[0])
			if ref == nil {
				ref = st
				return
			}
			for _, pair := range [][2][]float32{{st.p1, ref.p1}, {st.p2, ref.p2}, {st.m, ref.m}, {st.l, ref.l}, {st.a2, ref.a2}} {
				for i := range pair[0] {
					if math.Float32bits(pair[0][i]) != math.Float32bits(pair[1][i]) {
						t.Fatalf("trial %d level %v: element %d = %v, generic %v", trial, lv, i, pair[0][i], pair[1][i])
					}
				}
			}
		})
		// float64: l = Σ over both blocks of e^(v - m), p2 = e^(v - m).
		for i := range rows {
			m := math.Inf(-1)
			for j := range keyBlock {
				if j < int(lim1[i]) {
					m = math.Max(m, float64(s1[i*keyBlock+j]*scale))
				}
				if j < int(lim2[i]) {
					m = math.Max(m, float64(s2[i*keyBlock+j]*scale))
				}
			}
			var l float64
			for j := range keyBlock {
				if j < int(lim1[i]) {
					l += math.Exp(float64(s1[i*keyBlock+j]*scale) - m)
				}
				if j < int(lim2[i]) {
					l += math.Exp(float64(s2[i*keyBlock+j]*scale) - m)
				}
			}
			if float64(ref.m[i]) != m || math.Abs(float64(ref.l[i])-l) > 1e-5*l {
				t.Fatalf("trial %d row %d: m %v l %v, want %v %v", trial, i, ref.m[i], ref.l[i], m, l)
			}
		}
	}
}
