package nn

import (
	"math/rand"
	"testing"
)

// gdnInputs are TestGGMLDeltaNet's inputs: 40 tokens of a Gated DeltaNet
// layer with 2 key and 4 value heads of size S (Qwen3.5's tiling: value
// head h reads key head h mod 2), before the L2 norms and the gates:
// alpha logits past softplus's threshold of 20 and far below 0.
type gdnInputs struct {
	S              int
	q, k, v        []float32
	alpha, beta, w []float32 // w: a, then dt's bias
}

const gdnN, gdnHK, gdnHV, gdnEps = 40, 2, 4, 1e-6

func newGDNInputs(S int) *gdnInputs {
	r := rand.New(rand.NewSource(int64(17 + S)))
	v := func(n int, s float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64() * s)
		}
		return x
	}
	in := &gdnInputs{S: S, q: v(gdnN*gdnHK*S, 1), k: v(gdnN*gdnHK*S, 1), v: v(gdnN*gdnHV*S, 1),
		alpha: v(gdnN*gdnHV, 3), beta: v(gdnN*gdnHV, 2), w: v(2*gdnHV, 1)}
	for i := range in.alpha {
		switch i % 17 {
		case 0:
			in.alpha[i] = 21 + float32(i%3)
		case 1:
			in.alpha[i] = -40
		}
	}
	for h := range gdnHV {
		in.w[h] = -0.05 * float32(h+1) * in.w[h] * in.w[h] // a = -exp(A_log) < 0
	}
	return in
}

// ggml runs the layer's delta rule part as the int8 modes do: the outputs
// (tokens, HV·S), then each head's final state (S[i][j]).
func (in *gdnInputs) ggml(avx2 bool) []float32 {
	S := in.S
	c := NewContext(2)
	q, k := make([]float32, len(in.q)), make([]float32, len(in.k))
	GGMLL2Norm(c, q, in.q, gdnN*gdnHK, S, gdnEps)
	GGMLL2Norm(c, k, in.k, gdnN*gdnHK, S, gdnEps)
	beta, g := append([]float32(nil), in.beta...), append([]float32(nil), in.alpha...)
	GGMLDeltaGates(beta, g, in.w[:gdnHV], in.w[gdnHV:])
	out, state := make([]float32, gdnN*gdnHV*S), make([]float32, gdnHV*S*S)
	for h := range gdnHV {
		kh := h % gdnHK
		DeltaRuleGGML(S, out[h*S:], gdnHV*S, q[kh*S:], k[kh*S:], gdnHK*S, in.v[h*S:], gdnHV*S,
			g[h:], beta[h:], gdnHV, gdnN, state[h*S*S:(h+1)*S*S], avx2, make([]float32, S*S), nil)
	}
	return append(out, state...)
}

// TestGGMLDeltaNet checks the int8 modes' Gated DeltaNet (GGMLL2Norm,
// GGMLDeltaGates, DeltaRuleGGML) against llama.cpp's bits on the same
// inputs: hashes of testdata/ggml_ops.py's gdn (RMS_NORM, SCALE, SIGMOID,
// ADD, SOFTPLUS, MUL and GATED_DELTA_NET) under libggml 0.27.0's zen4 and
// haswell builds, for heads of 16 (ggml's element loop alone), 80 (a
// vector step and the element loop) and 128 (Qwen3.5's: whole vector
// steps), on every kernel level.
func TestGGMLDeltaNet(t *testing.T) {
	want := [2][3]uint64{
		{0x73c44fae4418e9b6, 0x58f8a23246c3b75e, 0x11f24f1267f837ac},
		{0x73c44fae4418e9b6, 0x6509928d5e90517c, 0xbaa1fbd0da25415c},
	}
	forEachLevel(t, func(t testing.TB, lv Level) {
		for j, S := range []int{16, 80, 128} {
			in := newGDNInputs(S)
			for _, avx2 := range []bool{false, true} {
				if h := fnvBits(in.ggml(avx2)); h != want[b2i(avx2)][j] {
					t.Errorf("%v: heads of %d, avx2 %v: hash %#x, llama.cpp's %#x", lv, S, avx2, h, want[b2i(avx2)][j])
				}
			}
		}
	})
}
