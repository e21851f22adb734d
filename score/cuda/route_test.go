package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"ppl.dev/score/ml"
)

// routeLogits makes n rows of E router logits of the kinds that try a
// router's order: plain, ties (a grid of five values), a row of equal
// values, -Inf among them, and a range wide enough that most experts'
// probabilities are 0.
func routeLogits(rng *rand.Rand, n, E int) []float32 {
	kinds := []func() float32{
		func() float32 { return float32(rng.NormFloat64() * 2) },
		func() float32 { return float32(rng.IntN(5)) * 0.5 },
		func() float32 { return 0.75 },
		func() float32 {
			if rng.IntN(3) == 0 {
				return float32(math.Inf(-1))
			}
			return float32(rng.NormFloat64())
		},
		func() float32 { return float32(rng.NormFloat64() * 300) },
	}
	v := make([]float32, n*E)
	for i := range v {
		v[i] = kinds[i/E%len(kinds)]()
	}
	return v
}

// TestRouteParity: the device's routing (moe_route) against
// ml.Router.Route on the host, for the routers of llama.cpp's mixtures
// (expert counts from 8 to 512, 60 not a multiple of a warp):
// the same experts, and the same weights but for one float32 ulp where
// the device's e^x differs from Go's in its last place. A block with an infinite logit goes to
// the host's routing (bit for bit), a NaN logit fails with the host's
// error, and the int8 modes' ggml routing and a router of more than
// routeMaxExperts experts route on the host.
func TestRouteParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(31, 7))
		// The emulator computes moe_route with Route's own code; the host
		// device (glibc's exp) and a GPU have their own e^x, whose last
		// float64 place may move a weight by one float32 ulp (none did on
		// the host device).
		n, ulps := 300, 1
		if _, host := e.dev.(*hostDevice); host {
			n = 40
		} else if e.Ordinal < 0 {
			ulps = 0
		}
		for _, c := range []struct {
			name   string
			r      ml.Router
			device bool // moe_route, not the host
		}{
			{"softmax/norm (qwen3moe)", ml.Router{Experts: 128, K: 8, Gating: ml.GateSoftmax, Norm: true}, true},
			{"softmax/512 (qwen3next)", ml.Router{Experts: 512, K: 10, Gating: ml.GateSoftmax, Norm: true}, true},
			{"softmax (mixtral)", ml.Router{Experts: 8, K: 2, Gating: ml.GateSoftmax}, true},
			{"softmax/60 (qwen2moe)", ml.Router{Experts: 60, K: 4, Gating: ml.GateSoftmax}, true},
			{"sigmoid/bias/groups/scale (deepseek3)", ml.Router{Experts: 256, K: 8, Gating: ml.GateSigmoid,
				SelBias: randF32(rng, 256, 0.5), Groups: 8, GroupsUsed: 4, Norm: true, Scale: 2.5}, true},
			{"softmax-selected (gpt-oss)", ml.Router{Experts: 32, K: 4, Gating: ml.GateSoftmaxSelected}, true},
			{"sqrt-softplus/bias/scale (deepseek4)", ml.Router{Experts: 256, K: 6, Gating: ml.GateSqrtSoftplus,
				SelBias: randF32(rng, 256, 0.5), Norm: true, Scale: 1.5}, true},
			{"sigmoid/before (llama4)", ml.Router{Experts: 16, K: 1, Gating: ml.GateSigmoid, Before: true}, true},
			{"select-sigmoid/chunks (grovemoe)", ml.Router{Experts: 128, K: 8, Gating: ml.GateSoftmax, SelectSigmoid: true,
				Chunk: 16, Norm: true, Scale: 0.7}, true},
			{"ggml (int8 mode)", ml.Router{Experts: 128, K: 8, Gating: ml.GateSoftmax, Norm: true, GGML: true}, false},
			{"600 experts", ml.Router{Experts: 600, K: 6, Gating: ml.GateSoftmax, Norm: true}, false},
		} {
			t.Run(c.name, func(t *testing.T) {
				if err := c.r.Validate(); err != nil {
					t.Fatal(err)
				}
				b := testBackend(e)
				defer b.Close()
				E := c.r.Experts
				logits := routeLogits(rng, n, E)
				route := func(v []float32) (*ml.Routing, error) {
					b.Reset()
					runs := launched(e, "moe_route")
					got, err := b.Route(b.put(t, n, E, v), &c.r)
					if ran := launched(e, "moe_route") > runs; ran != c.device {
						t.Errorf("moe_route ran: %v, want %v", ran, c.device)
					}
					if berr := b.Err(); berr != nil {
						t.Fatal(berr)
					}
					return got, err
				}
				got, err := route(logits)
				if err != nil {
					t.Fatal(err)
				}
				want, err := c.r.Route(logits)
				if err != nil {
					t.Fatal(err)
				}
				compareRouting(t, "", got, want, ulps)

				// An infinite logit: the block routes on the host.
				logits[3*E+5] = float32(math.Inf(1))
				got, err = route(logits)
				if err != nil {
					t.Fatal(err)
				}
				if want, err = c.r.Route(logits); err != nil {
					t.Fatal(err)
				}
				compareRouting(t, "with +Inf: ", got, want, 0)

				// A NaN logit: the host's error.
				logits[7*E+2] = float32(math.NaN())
				_, werr := c.r.Route(logits)
				if _, err = route(logits); err == nil || werr == nil || err.Error() != werr.Error() {
					t.Errorf("with a NaN logit: error %v, want %v", err, werr)
				}
			})
		}
	})
}

// compareRouting fails unless got has want's experts and its weights
// within ulps float32 ulps of want's (a NaN where want has one: an
// infinite logit's weights); it logs the weights that differ.
func compareRouting(t *testing.T, what string, got, want *ml.Routing, ulps int) {
	t.Helper()
	if got.K != want.K || got.Before != want.Before || len(got.Expert) != len(want.Expert) || len(got.Weight) != len(want.Weight) {
		t.Fatalf("%srouting K %d before %v of %d choices, want K %d before %v of %d", what, got.K, got.Before, len(got.Expert),
			want.K, want.Before, len(want.Expert))
	}
	differ, worst := 0, 0
	for i := range want.Expert {
		if got.Expert[i] != want.Expert[i] {
			t.Fatalf("%stoken %d choice %d: expert %d, want %d", what, i/want.K, i%want.K, got.Expert[i], want.Expert[i])
		}
		g, w := got.Weight[i], want.Weight[i]
		if math.Float32bits(g) != math.Float32bits(w) && (g == g || w == w) { // a NaN's bits are the device's
			d := int(math.Abs(float64(int64(math.Float32bits(g)) - int64(math.Float32bits(w)))))
			if g != g || w != w || (g < 0) != (w < 0) {
				d = math.MaxInt
			}
			differ, worst = differ+1, max(worst, d)
		}
	}
	if differ > 0 {
		t.Logf("%s%d of %d weights differ, by %d ulps at most", what, differ, len(want.Weight), worst)
	}
	if worst > ulps {
		t.Errorf("%sweights %d ulps apart, want %d at most", what, worst, ulps)
	}
}
