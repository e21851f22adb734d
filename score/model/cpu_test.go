package model

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// f32Matrix makes a random F32 matrix stack for the CPU backend.
func f32Matrix(t *testing.T, b *cpuBackend, rng *rand.Rand, name string, experts, in, out int) *ml.Matrix {
	n := max(experts, 1) * in * out
	data := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(rng.NormFloat64()*0.3)))
	}
	w := &ml.Matrix{Name: name, Type: gguf.TypeF32, In: in, Out: out, Experts: experts, Data: data}
	if err := b.Prepare(w); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestExpertsPlain checks the grouped Experts operation against its plain
// definition, each token's K single-expert MLPs scaled and added in order
// of its choices, to the bit, for 1 and 3 threads, with tokens that share
// experts, a token choosing one expert twice is impossible (top-k), and
// experts no token chose.
func TestExpertsPlain(t *testing.T) {
	const E, F, N, K, n = 16, 24, 6, 3, 37
	for _, threads := range []int{1, 3} {
		rng := rand.New(rand.NewPCG(7, 8))
		b := newCPU(nn.NewContext(threads))
		m := &ml.MLP{
			Gate: f32Matrix(t, b, rng, "gate", N, E, F),
			Up:   f32Matrix(t, b, rng, "up", N, E, F),
			Down: f32Matrix(t, b, rng, "down", N, F, E),
		}
		x := b.Alloc(n, E).(*cpuT)
		for i := range x.d {
			x.d[i] = float32(rng.NormFloat64())
		}
		logits := make([]float32, n*N)
		for i := range logits {
			logits[i] = float32(rng.NormFloat64())
		}
		for t0 := range n { // expert 5 is never chosen
			logits[t0*N+5] = -100
		}
		r, err := (&ml.Router{Experts: N, K: K, Gating: ml.GateSoftmax, Norm: true}).Route(logits)
		if err != nil {
			t.Fatal(err)
		}
		got := b.Alloc(n, E).(*cpuT)
		b.Experts(got, x, m, r)

		gates, ups, downs := m.Gate.Impl.([]*nn.Linear), m.Up.Impl.([]*nn.Linear), m.Down.Impl.([]*nn.Linear)
		for tok := range n {
			acc := make([]float32, E)
			for j := range K {
				e := r.Expert[tok*K+j]
				y := make([]float32, E)
				mlp := nn.MLP{Gate: gates[e], Up: ups[e], Down: downs[e]}
				mlp.Forward(b.c, y, x.d[tok*E:(tok+1)*E], 1)
				for i := range acc {
					if j == 0 {
						acc[i] = y[i] * r.Weight[tok*K+j]
					} else {
						acc[i] += y[i] * r.Weight[tok*K+j]
					}
				}
			}
			for i, v := range acc {
				if g := got.d[tok*E+i]; math.Float32bits(g) != math.Float32bits(v) {
					t.Fatalf("threads %d: token %d element %d: %v, plain %v", threads, tok, i, g, v)
				}
			}
		}
		b.Close()
	}
}
