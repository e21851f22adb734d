package cuda

import (
	"fmt"
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

// routerCase is a router of the tests, by name; given: its experts are
// given per token (Chosen), drawn at random by choose.
type routerCase struct {
	name  string
	r     ml.Router
	given bool
}

// choose sets c.r.Chosen to n tokens' experts drawn from rng when c.given.
func (c *routerCase) choose(rng *rand.Rand, n int) {
	if !c.given {
		return
	}
	c.r.Chosen = make([]int32, n*c.r.K)
	for i := range c.r.Chosen {
		c.r.Chosen[i] = int32(rng.IntN(c.r.Experts))
	}
}

// rowRouter is r for token t alone: its Chosen, if any, t's.
func rowRouter(r ml.Router, t int) *ml.Router {
	if r.Chosen != nil {
		r.Chosen = r.Chosen[t*r.K : (t+1)*r.K]
	}
	return &r
}

// routers are llama.cpp's mixtures' routers (expert counts from 8 to 512,
// 60 not a multiple of a warp, and 600, past the kernels).
func routers(rng *rand.Rand) []routerCase {
	return []routerCase{
		{"softmax/norm (qwen3moe)", ml.Router{Experts: 128, K: 8, Gating: ml.GateSoftmax, Norm: true}, false},
		{"softmax/512 (qwen3next)", ml.Router{Experts: 512, K: 10, Gating: ml.GateSoftmax, Norm: true}, false},
		{"softmax (mixtral)", ml.Router{Experts: 8, K: 2, Gating: ml.GateSoftmax}, false},
		{"softmax/every expert", ml.Router{Experts: 8, K: 8, Gating: ml.GateSoftmax, Norm: true}, false},
		{"softmax/60 (qwen2moe)", ml.Router{Experts: 60, K: 4, Gating: ml.GateSoftmax}, false},
		{"sigmoid/bias/groups/scale (deepseek3)", ml.Router{Experts: 256, K: 8, Gating: ml.GateSigmoid,
			SelBias: randF32(rng, 256, 0.5), Groups: 8, GroupsUsed: 4, Norm: true, Scale: 2.5}, false},
		{"softmax-selected (gpt-oss)", ml.Router{Experts: 32, K: 4, Gating: ml.GateSoftmaxSelected}, false},
		{"sqrt-softplus/bias/scale (deepseek4)", ml.Router{Experts: 256, K: 6, Gating: ml.GateSqrtSoftplus,
			SelBias: randF32(rng, 256, 0.5), Norm: true, Scale: 1.5}, false},
		{"sqrt-softplus/given (deepseek4's hash layers)", ml.Router{Experts: 256, K: 6, Gating: ml.GateSqrtSoftplus,
			Norm: true, Scale: 1.5}, true},
		{"softmax-selected/given", ml.Router{Experts: 32, K: 4, Gating: ml.GateSoftmaxSelected}, true},
		{"sigmoid/before (llama4)", ml.Router{Experts: 16, K: 1, Gating: ml.GateSigmoid, Before: true}, false},
		{"select-sigmoid/chunks (grovemoe)", ml.Router{Experts: 128, K: 8, Gating: ml.GateSoftmax, SelectSigmoid: true,
			Chunk: 16, Norm: true, Scale: 0.7}, false},
		{"600 experts", ml.Router{Experts: 600, K: 6, Gating: ml.GateSoftmax, Norm: true}, false},
	}
}

// routeKernel is the kernel Route runs r with: moe_route, moe_route_ggml
// (r.GGML), or none ("": the host routes).
func routeKernel(r ml.Router) string {
	switch {
	case r.Experts > routeMaxExperts:
		return ""
	case r.GGML:
		return "moe_route_ggml"
	}
	return "moe_route"
}

// TestRouteParity: the device's routing (moe_route, and moe_route_ggml
// in the int8 modes) against ml.Router.Route on the host, for the routers
// of llama.cpp's mixtures (routers), both ways:
// the same experts, and the same weights but for one float32 ulp where
// the device's e^x differs from Go's in its last place (moe_route's; the
// ggml arithmetic's, glibc's and ggml's expf, to the bit). Rows of equal
// logits route on the host in the ggml arithmetic (std::sort's order;
// TestRouteGGMLParity checks the kernel's rows one by one), as does a row
// with an infinite logit where it makes a NaN score (bit for bit); a NaN
// logit fails with the host's error, and a router of more than
// routeMaxExperts experts routes on the host. Experts given per token
// (Chosen) are weighed on the device.
func TestRouteParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(31, 7))
		// The emulator computes moe_route with Route's own code; the host
		// device (glibc's exp) and a GPU have their own e^x, whose last
		// float64 place may move a weight by one float32 ulp (none did on
		// the host device).
		n, ulps := 300, 1
		_, host := e.dev.(*hostDevice)
		if host {
			n = 40
		} else if e.Ordinal < 0 {
			ulps = 0
		}
		for _, c := range routers(rng) {
			for _, ggml := range []bool{false, true} {
				if ggml && host { // TestRouteGGMLParity runs moe_route_ggml there, a process a launch
					continue
				}
				c.r.GGML = ggml
				c.choose(rng, n)
				kernel := routeKernel(c.r)
				t.Run(fmt.Sprintf("%s/ggml=%v", c.name, ggml), func(t *testing.T) {
					if err := c.r.Validate(); err != nil {
						t.Fatal(err)
					}
					b := testBackend(e)
					defer b.Close()
					E := c.r.Experts
					logits := routeLogits(rng, n, E)
					route := func(v []float32) (*ml.Routing, error) {
						b.Reset()
						runs := map[string]int{"moe_route": launched(e, "moe_route"), "moe_route_ggml": launched(e, "moe_route_ggml")}
						got, err := b.Route(b.put(t, n, E, v), &c.r)
						for k, before := range runs {
							if ran := launched(e, k) > before; ran != (k == kernel) {
								t.Errorf("%s ran: %v, want %v", k, ran, k == kernel)
							}
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
					compareRouting(t, "", got, want, map[bool]int{false: ulps, true: 0}[ggml])

					// An infinite logit: where it makes a NaN score, the row
					// routes on the host.
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
		}
	})
}

// TestRouteGGMLParity: moe_route_ggml row by row, against ml.Router.Route's
// ggml arithmetic (both builds' softmax), for the routers moe_route_ggml
// takes: rows of distinct logits (normal, spread by 30 so that most
// probabilities underflow, and for sqrt(softplus) the logits below
// 0xc100727b, where glibc's logf is not correctly rounded:
// TestRouteGGMLSqrtSoftplus) routed on the device to the bit; rows whose
// choice meets equal scores (every logit equal; two equal best; a NaN)
// left to the host, experts[t·K] -1 and the flag set, and only those.
func TestRouteGGMLParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(37, 3))
		n := 64
		if _, host := e.dev.(*hostDevice); host {
			n = 24
		}
		for _, c := range routers(rng) {
			for _, avx2 := range []bool{false, true} {
				c.choose(rng, n)
				r := c.r
				r.GGML, r.GGMLAVX2 = true, avx2
				if routeKernel(r) == "" {
					continue
				}
				E, K := r.Experts, r.K
				logits := make([]float32, n*E)
				left := map[int]bool{}
				for tok := range n {
					row := logits[tok*E : (tok+1)*E]
					scale := []float64{1, 30}[tok%2]
					for i := range row {
						row[i] = float32(rng.NormFloat64() * scale)
					}
					switch tok % 8 {
					case 1: // where glibc's logf(1 + expf(x)) is not the correctly rounded one
						if r.Gating == ml.GateSqrtSoftplus {
							for i, j := range rng.Perm(E) {
								row[i] = math.Float32frombits(0xc100727b - uint32(j))
							}
						}
					case 3: // every logit equal
						for i := range row {
							row[i] = 0.75
						}
					case 5: // two equal best logits
						i, j := rng.IntN(E), rng.IntN(E-1)
						if j >= i {
							j++
						}
						row[i], row[j] = 40, 40
					case 7:
						row[rng.IntN(E)] = float32(math.NaN())
					}
					left[tok] = simRouteGGMLLeft(rowRouter(r, tok), row)
				}
				var bias ptr
				if r.SelBias != nil {
					bias = devPut(t, e, r.SelBias)
				}
				ex := devAlloc(t, e, int64(4*n*K))
				if r.Chosen != nil {
					ex = devPut(t, e, r.Chosen)
				}
				lp, wt, fl := devPut(t, e, logits), devAlloc(t, e, int64(4*n*K)), devPut(t, e, []int32{0})
				do(t, e, func() error { return e.moeRoute(lp, bias, ex, wt, fl, n, &r) })
				experts, weights, flag := devGet[int32](t, e, ex, n*K), devGet[float32](t, e, wt, n*K), devGet[int32](t, e, fl, 1)
				device, flagged := 0, 0
				for t0 := range n {
					if (experts[t0*K] < 0) != left[t0] {
						t.Fatalf("%s, avx2 %v: row %d left to the host: %v, want %v", c.name, avx2, t0, experts[t0*K] < 0, left[t0])
					}
					if left[t0] {
						flagged++
						continue
					}
					device++
					want, err := rowRouter(r, t0).Route(logits[t0*E : (t0+1)*E])
					if err != nil {
						t.Fatal(err)
					}
					compareRouting(t, fmt.Sprintf("%s, avx2 %v, row %d: ", c.name, avx2, t0),
						&ml.Routing{K: K, Expert: experts[t0*K : (t0+1)*K], Weight: weights[t0*K : (t0+1)*K], Before: r.Before}, want, 0)
				}
				t.Logf("%s, avx2 %v: %d rows on the device, %d left", c.name, avx2, device, flagged)
				if (flag[0] != 0) != (flagged > 0) || device < n/2 || flagged < n/8 || r.Chosen != nil && flagged != n/8 {
					t.Errorf("%s, avx2 %v: %d rows on the device, %d left, flag %d", c.name, avx2, device, flagged, flag[0])
				}
			}
		}
	})
}

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
