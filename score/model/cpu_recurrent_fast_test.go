package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// TestDeltaNetFast runs the backend's DeltaNet (nn.DeltaScan: float32
// matrix products) against its float64 reference, the plain per-token
// recurrence (deltaNet with chunked false), on every deltaCases family,
// at Qwen3.5's head size 128 and at 20 (not a multiple of the Gemm
// panels), both V to K head mappings, from the state a first call leaves:
// within 2e-5 relative to the largest output (float32 products over at
// most 128 terms and the inverse of the chunk's triangular system rounded
// to float32; measured 8.5e-7, see the log).
func TestDeltaNetFast(t *testing.T) {
	b := newCPU(nn.NewContext(2))
	defer b.Close()
	var worst float64
	for ci, c := range deltaCases {
		for _, D := range []int{128, 20} {
			const n, Hk, Hv = 150, 2, 4
			r := rand.New(rand.NewPCG(uint64(ci), uint64(D)))
			qh := make([]float64, D)
			unit := func(x ml.Tensor, first ml.Tensor) {
				for tt := range n {
					for h := range Hk {
						row := ct(x).d[(tt*Hk+h)*D : (tt*Hk+h+1)*D]
						if first != nil && tt > 0 {
							copy(row, ct(x).d[h*D:(h+1)*D])
							continue
						}
						unitRow(r, qh)
						for j := range D {
							row[j] = float32(qh[j])
						}
					}
				}
			}
			q, k := b.Alloc(n, Hk*D), b.Alloc(n, Hk*D)
			unit(q, nil)
			if c.sameKey {
				unit(k, k)
			} else {
				unit(k, nil)
			}
			v := fill(b, n, Hv*D, func(int) float32 { return float32(3 * r.NormFloat64()) })
			g := fill(b, n, Hv, func(i int) float32 { return float32(c.g(r, i/Hv)) })
			beta := fill(b, n, Hv, func(i int) float32 { return float32(c.beta(r, i/Hv)) })
			for _, tiled := range []bool{true, false} {
				dr := ml.DeltaRule{KHeads: Hk, VHeads: Hv, Dim: D, Tiled: tiled}
				out := func(fast bool) []float32 {
					dst, st := b.Alloc(n, Hv*D), b.Alloc(Hv*D, D)
					b.Zero(st)
					for _, sp := range [][2]int{{0, 70}, {70, n}} {
						args := []ml.Tensor{b.Slice(dst, sp[0], sp[1]), b.Slice(q, sp[0], sp[1]), b.Slice(k, sp[0], sp[1]),
							b.Slice(v, sp[0], sp[1]), b.Slice(g, sp[0], sp[1]), b.Slice(beta, sp[0], sp[1])}
						if fast {
							b.DeltaNet(args[0], args[1], args[2], args[3], args[4], args[5], st, &dr)
						} else {
							b.deltaNet(args[0], args[1], args[2], args[3], args[4], args[5], st, &dr, false)
						}
					}
					return ct(dst).d
				}
				got, want := out(true), out(false)
				var d, m float64
				for i := range want {
					d = math.Max(d, math.Abs(float64(got[i])-float64(want[i])))
					m = math.Max(m, math.Abs(float64(want[i])))
				}
				rel := d / math.Max(m, 1e-30)
				worst = math.Max(worst, rel)
				if rel > 2e-5 || math.IsNaN(rel) {
					t.Errorf("%s D=%d tiled=%v: %.2e relative", c.name, D, tiled, rel)
				}
			}
		}
	}
	t.Logf("worst: %.2e relative", worst)
}
