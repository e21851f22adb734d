package ml

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
)

func TestRoute(t *testing.T) {
	sm := func(xs ...float64) []float64 { // softmax
		var s float64
		out := make([]float64, len(xs))
		for i, x := range xs {
			out[i] = math.Exp(x)
			s += out[i]
		}
		for i := range out {
			out[i] /= s
		}
		return out
	}
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	ssp := func(x float64) float64 { // sqrt(softplus), x itself past 20
		if x > 20 {
			return math.Sqrt(x)
		}
		return math.Sqrt(math.Log(1 + math.Exp(x)))
	}
	p := sm(1, 3, 2, -1)
	cases := []struct {
		name    string
		r       Router
		logits  []float32
		experts []int32
		weights []float64
	}{
		{"softmax top-2", Router{Experts: 4, K: 2, Gating: GateSoftmax},
			[]float32{1, 3, 2, -1}, []int32{1, 2}, []float64{p[1], p[2]}},
		{"softmax top-2 normalized", Router{Experts: 4, K: 2, Gating: GateSoftmax, Norm: true},
			[]float32{1, 3, 2, -1}, []int32{1, 2}, []float64{p[1] / (p[1] + p[2]), p[2] / (p[1] + p[2])}},
		{"ties take the lower index", Router{Experts: 4, K: 2, Gating: GateSoftmax},
			[]float32{2, 2, 2, 2}, []int32{0, 1}, []float64{0.25, 0.25}},
		{"sigmoid, selection bias moves the choice, weights without it", Router{Experts: 4, K: 1, Gating: GateSigmoid, SelBias: []float32{0, 0, 0, 1}, Scale: 2.5},
			[]float32{1, 0.5, 0, 0}, []int32{3}, []float64{2.5 * sig(0)}},
		{"groups: the best pair wins over the best single", Router{Experts: 4, K: 2, Gating: GateSigmoid, Groups: 2, GroupsUsed: 1, Norm: true},
			[]float32{3, -3, 2, 2}, []int32{2, 3}, []float64{0.5, 0.5}},
		{"softmax over the selected logits", Router{Experts: 4, K: 2, Gating: GateSoftmaxSelected},
			[]float32{1, 3, 2, -1}, []int32{1, 2}, sm(3, 2)},
		// GroveMoE: sigmoid(40) and sigmoid(50) are both 1 in float64, so
		// the choice ties and takes the lower index; the weight stays the
		// softmax's.
		{"chosen by sigmoid, weighted by softmax", Router{Experts: 4, K: 1, Gating: GateSoftmax, SelectSigmoid: true},
			[]float32{40, 50, 0, 0}, []int32{0}, []float64{sm(40, 50, 0, 0)[0]}},
		// Its chunks: 1 and 2 chosen, chunks 0 and 1 weighted by p[0] and
		// p[1] (the experts of the chunks' indices), renormalized.
		{"chunks of 2", Router{Experts: 4, K: 2, Gating: GateSoftmax, SelectSigmoid: true, Chunk: 2, Norm: true},
			[]float32{1, 3, 2, -1}, []int32{0, 1}, []float64{p[0] / (p[0] + p[1]), p[1] / (p[0] + p[1])}},
		// DeepSeek-V4: sqrt(softplus), chosen with the bias, weighted
		// without it, renormalized and scaled; 25 past softplus's cut.
		{"sqrt-softplus, selection bias", Router{Experts: 4, K: 2, Gating: GateSqrtSoftplus, SelBias: []float32{0, 0, 0, 2}, Norm: true, Scale: 1.5},
			[]float32{1, 25, -2, -1}, []int32{1, 3}, []float64{1.5 * ssp(25) / (ssp(25) + ssp(-1)), 1.5 * ssp(-1) / (ssp(25) + ssp(-1))}},
		// Its hash layers: the experts given per token, in their order,
		// weighted by p whatever the logits prefer.
		{"experts given per token", Router{Experts: 4, K: 2, Gating: GateSqrtSoftplus, Norm: true, Chosen: []int32{2, 0}},
			[]float32{1, 3, 2, -1}, []int32{2, 0}, []float64{ssp(2) / (ssp(2) + ssp(1)), ssp(1) / (ssp(2) + ssp(1))}},
		{"chunks of 3: 5 and 3 both in chunk 1", Router{Experts: 6, K: 2, Gating: GateSoftmax, Chunk: 3},
			[]float32{0, 0, 0, 2, 0, 3}, []int32{1, 1}, []float64{sm(0, 0, 0, 2, 0, 3)[1], sm(0, 0, 0, 2, 0, 3)[1]}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.r.Validate(); err != nil {
				t.Fatal(err)
			}
			got, err := c.r.Route(c.logits)
			if err != nil {
				t.Fatal(err)
			}
			for j := range c.experts {
				if got.Expert[j] != c.experts[j] {
					t.Fatalf("experts %v, want %v", got.Expert, c.experts)
				}
				if got.Weight[j] != float32(c.weights[j]) {
					t.Errorf("weight %d = %v, want %v", j, got.Weight[j], float32(c.weights[j]))
				}
			}
			// ggml's float32 steps choose the same and weigh within 3e-7.
			g := c.r
			g.GGML = true
			if got, err = g.Route(c.logits); err != nil {
				t.Fatal(err)
			}
			for j := range c.experts {
				if got.Expert[j] != c.experts[j] || math.Abs(float64(got.Weight[j])/c.weights[j]-1) > 3e-7 {
					t.Errorf("ggml: experts %v weights %v, want %v %v", got.Expert, got.Weight, c.experts, c.weights)
					break
				}
			}
		})
	}
}

func TestRouteErrors(t *testing.T) {
	bad := []struct {
		r    Router
		want string
	}{
		{Router{Experts: 4, K: 5, Gating: GateSoftmax}, "4 experts, 5 used"},
		{Router{Experts: 4, K: 1, Gating: 7}, "unknown gating function 7"},
		{Router{Experts: 4, K: 1, Gating: GateSigmoid, SelBias: []float32{1}}, "selection bias of 1 values"},
		{Router{Experts: 6, K: 1, Gating: GateSigmoid, Groups: 4, GroupsUsed: 1}, "6 experts in 4 groups"},
		{Router{Experts: 8, K: 3, Gating: GateSigmoid, Groups: 4, GroupsUsed: 1}, "cannot hold 3 experts"},
		{Router{Experts: 6, K: 1, Gating: GateSoftmax, Chunk: 4}, "6 experts in chunks of 4"},
	}
	for _, c := range bad {
		if err := c.r.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.r, err, c.want)
		}
	}
	r := Router{Experts: 2, K: 1, Gating: GateSoftmax}
	if _, err := r.Route([]float32{0, 1, float32(math.NaN()), 0}); err == nil || !strings.Contains(err.Error(), "logit 0 of token 1 is NaN") {
		t.Errorf("NaN logit: %v", err)
	}
}

// TestBest: best's first k indices are those of a stable sort by value,
// descending, and the rest are the indices not chosen, and ggmlBest's are
// ggmlArgsort's, on values with many ties, infinities and NaNs.
func TestBest(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	for trial := range 2000 {
		n := 1 + rng.IntN(160)
		k := 1 + rng.IntN(n)
		v := make([]float64, n)
		levels := 1 + rng.IntN(6) // few distinct values: ties everywhere
		for i := range v {
			v[i] = float64(rng.IntN(levels)) - 2
			switch rng.IntN(40) {
			case 0:
				v[i] = math.Inf(-1)
			case 1:
				v[i] = math.Inf(1)
			}
		}
		nan := trial%5 == 0
		if nan {
			v[rng.IntN(n)] = math.NaN()
		}
		want := make([]int, n)
		for i := range want {
			want[i] = i
		}
		sort.SliceStable(want, func(i, j int) bool { return v[want[i]] > v[want[j]] })
		got := make([]int, n)
		best(got, v, k, nan)
		if !slices.Equal(got[:k], want[:k]) {
			t.Fatalf("trial %d: best of %v, k %d = %v, want %v", trial, v, k, got[:k], want[:k])
		}
		rest := slices.Clone(got[k:])
		slices.Sort(rest)
		wrest := slices.Clone(want[k:])
		slices.Sort(wrest)
		if !slices.Equal(rest, wrest) {
			t.Fatalf("trial %d: the indices not chosen %v, want %v", trial, rest, wrest)
		}

		// ggmlBest: the first k of ggml's argsort, ties in std::sort's order
		v32 := make([]float32, n)
		for i, x := range v {
			v32[i] = float32(x)
			if trial%2 == 1 && x == x { // distinct values too
				v32[i] = float32(rng.NormFloat64())
			}
		}
		want32, got32 := make([]int32, n), make([]int32, n)
		ggmlArgsort(want32, v32)
		ggmlBest(got32, v32, k)
		if !slices.Equal(got32[:k], want32[:k]) {
			t.Fatalf("trial %d: ggmlBest of %v, k %d = %v, want %v", trial, v32, k, got32[:k], want32[:k])
		}
	}
}

// BenchmarkRoute: a 4096-token window of a Qwen3-30B-A3B layer (128
// experts, 8 per token, softmax, normalized), in both arithmetics.
func BenchmarkRoute(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	logits := make([]float32, 4096*128)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 2)
	}
	for _, ggml := range []bool{false, true} {
		b.Run(fmt.Sprintf("ggml=%v", ggml), func(b *testing.B) {
			r := Router{Experts: 128, K: 8, Gating: GateSoftmax, Norm: true, GGML: ggml}
			for b.Loop() {
				if _, err := r.Route(logits); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(4096*b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// TestRouteChosen: a router's Chosen must hold K experts of its own for
// every token, or Route names what is wrong.
func TestRouteChosen(t *testing.T) {
	for _, c := range []struct {
		chosen []int32
		want   string
	}{
		{[]int32{1, 2, 3}, "3 chosen experts for 2 tokens of 2"},
		{[]int32{1, 2, 3, 4}, "token 1's chosen expert 4 is not one of 4"},
		{[]int32{-1, 2, 3, 0}, "token 0's chosen expert -1 is not one of 4"},
	} {
		r := Router{Experts: 4, K: 2, Gating: GateSqrtSoftplus, Chosen: c.chosen}
		if _, err := r.Route(make([]float32, 8)); err == nil || err.Error() != "moe: "+c.want {
			t.Errorf("chosen %v: error %v, want %q", c.chosen, err, c.want)
		}
	}
}

// TestRouteGGMLSqrtSoftplus: in the ggml arithmetic, sqrt(softplus) is
// SOFTPLUS with glibc's logf and expf, then sqrtf: at the logit
// 0xc100727b (-8.027949) glibc's logf(1 + expf(x)) is 0x39ab08dc, whose
// root is 0x3c93f5fe, one ulp above the root of the correctly rounded
// logarithm (0x3c93f5fd; 3.4e-4 of the float32 logits in [-20, 20] differ
// so).
func TestRouteGGMLSqrtSoftplus(t *testing.T) {
	r := Router{Experts: 2, K: 1, Gating: GateSqrtSoftplus, GGML: true}
	got, err := r.Route([]float32{math.Float32frombits(0xc100727b), -30})
	if err != nil {
		t.Fatal(err)
	}
	if got.Expert[0] != 0 || math.Float32bits(got.Weight[0]) != 0x3c93f5fe {
		t.Errorf("expert %d weight %#x, want 0 0x3c93f5fe", got.Expert[0], math.Float32bits(got.Weight[0]))
	}
}
