package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// SinkhornMix (mhc.go, kernels/mhc.cu) against nn.SinkhornMix, to the bit:
// 3, 4 and 8 streams, 1, 2 and 20 iterations, 70 tokens of mixes (the
// matrix's after 2·S other columns, as mHC's) normal; then tokens whose
// mixes are 10³ apart (exponentials that underflow to subnormals and to
// zero), a -Inf mix, a line of -Inf (NaN: -Inf minus -Inf), a NaN, zeros,
// equal mixes, and a scale of 0. It fails with either fused multiply-add
// rounded twice (8,781 and 15,137 values apart) or the normalizations
// dividing rather than multiplying by the reciprocal (19,767).
func TestSinkhornMixParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		b := testBackend(e)
		defer b.Close()
		rng := rand.New(rand.NewPCG(89, 1))
		const n = 70
		inf := float32(math.Inf(1))
		for _, S := range []int{3, 4, 8} {
			cols, off := (2+S)*S, 2*S
			base := &ml.Vector{Name: "hc_base", V: randF32(rng, S*S, 1)}
			if err := b.PrepareVector(base); err != nil {
				t.Fatal(err)
			}
			m := randF32(rng, n*cols, 2)
			row := func(tk int) []float32 { return m[tk*cols+off : tk*cols+off+S*S] }
			for i, v := range row(1) {
				row(1)[i] = v * 1e3
			}
			row(2)[S+1] = -inf
			for d := range S {
				row(3)[d+S] = -inf
			}
			row(4)[2] = float32(math.NaN())
			clear(row(5))
			for i := range row(6) {
				row(6)[i] = 0.25
			}
			row(7)[0] = inf
			for _, scale := range []float32{0.7, 0} {
				for _, iters := range []int{1, 2, 20} {
					want := make([]float32, n*S*S)
					nn.SinkhornMix(want, m, n, cols, off, S, scale, base.V, 1e-6, iters)
					dst := b.Alloc(n, S*S)
					b.SinkhornMix(dst, b.put(t, n, cols, m), S, off, scale, base, 1e-6, iters)
					got := b.Read(dst)
					if err := b.Err(); err != nil {
						t.Fatal(err)
					}
					for i := range want {
						if !sameBits(got[i], want[i]) {
							t.Errorf("%d streams, scale %g, %d iterations: token %d element %d: %g, want %g", S, scale, iters, i/(S*S), i%(S*S), got[i], want[i])
						}
					}
				}
			}
		}
	})
}
