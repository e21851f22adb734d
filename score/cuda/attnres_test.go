package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// ResMix (attnres.go, kernels/attnres.cu) against the CPU backend's result
// outside its int8 modes (nn.ResMix per token), in place and into another
// tensor, over 1, 3 and 40 checkpoints of rows of 97 (a block of 32
// threads) and 300 (128): random rows, a zero row (scored by epsilon
// alone), rows of 10⁴ beside rows of 10⁻⁴ (a softmax of one winner).
// Within an ulp on a few elements: the block's float64 sums in another
// order.
func TestResMixParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		b := testBackend(e)
		defer b.Close()
		rng := rand.New(rand.NewPCG(67, 1))
		const n = 11
		for _, width := range []int{97, 300} {
			w := &ml.Vector{Name: "attn_res_score", V: randF32(rng, width, 1)}
			if err := b.PrepareVector(w); err != nil {
				t.Fatal(err)
			}
			for _, C := range []int{1, 3, 40} {
				ck, cur := randF32(rng, C*n*width, 2), randF32(rng, n*width, 3)
				for i := range width {
					cur[i] = 0             // token 0: its running row zero
					ck[width+i] *= 1e4     // token 1, checkpoint 0: huge
					cur[width+i] *= 1e-4   // token 1's running row tiny
					ck[2*width+i] *= 1e-30 // token 2, checkpoint 0: near zero
				}
				want := make([]float32, n*width)
				rows := make([][]float32, C)
				for tk := range n {
					for c := range rows {
						rows[c] = ck[(c*n+tk)*width : (c*n+tk+1)*width]
					}
					nn.ResMix(want[tk*width:(tk+1)*width], rows, cur[tk*width:(tk+1)*width], w.V, 1e-5)
				}
				for _, inPlace := range []bool{false, true} {
					ct, xt := b.put(t, C*n, width, ck), b.put(t, n, width, cur)
					dst := xt
					if !inPlace {
						dst = b.Alloc(n, width)
					}
					b.ResMix(dst, ct, xt, w, 1e-5)
					got := b.Read(dst)
					if err := b.Err(); err != nil {
						t.Fatal(err)
					}
					altUpCheck(t, "res_mix", got, want, 1, 1e-2)
				}
			}
		}
	})
}

// glu_f32's SiTU (ml.SiTU, act 11) against nn.SiTU's reference, with
// gates and ups past tanh's and the sigmoid's saturation and the up
// branch uncapped (linear beta 0): within an ulp on a few elements (the
// GPU's tanh and exp in float64).
func TestSiTUParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(71, 1))
		gate, up := randF32(rng, 3000, 4), randF32(rng, 3000, 3)
		copy(gate, []float32{0, float32(math.Copysign(0, -1)), 50, -50, 1e4, -1e4, 1e-30})
		copy(up, []float32{1, 2, 80, -80, 1e4, -1e-30, 3})
		for _, p := range []nn.SiTU{{Beta: 1.5, LinearBeta: 2}, {Beta: 0.25, LinearBeta: 0}} {
			want := make([]float32, len(gate))
			p.Ref(want, gate, up)
			gp, upp := devPut(t, e, gate), devPut(t, e, up)
			do(t, e, func() error { return e.gluF32(gp, gp, upp, int64(len(gate)), ml.SiTU, p.Beta, p.LinearBeta) })
			altUpCheck(t, "glu_f32 situ", devGet[float32](t, e, gp, len(gate)), want, 1, 1e-2)
		}
	})
}
