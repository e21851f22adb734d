package ml

import (
	"fmt"
	"math"
	"sort"
)

// Gating is how router logits become expert probabilities
// (llama.cpp's expert_gating_func).
type Gating int

const (
	// GateSoftmax: p = softmax(logits) over all experts (Qwen3-MoE,
	// Qwen3.5-MoE, Mixtral).
	GateSoftmax Gating = 1
	// GateSigmoid: p = sigmoid(logits) per expert (DeepSeek-V3, GLM-4.5).
	GateSigmoid Gating = 2
	// GateSoftmaxSelected: experts chosen on the raw logits, their weights
	// the softmax of the chosen logits (gpt-oss).
	GateSoftmaxSelected Gating = 3
)

func (g Gating) String() string {
	switch g {
	case GateSoftmax:
		return "softmax"
	case GateSigmoid:
		return "sigmoid"
	case GateSoftmaxSelected:
		return "softmax-selected"
	}
	return fmt.Sprintf("gating(%d)", int(g))
}

// Router turns router logits into each token's experts and weights, as
// llama.cpp's build_moe_ffn does:
//
//  1. p = gating(logits) (softmax or sigmoid; the raw logits for
//     GateSoftmaxSelected);
//  2. selection scores s = p + SelBias (exp_probs_b) when SelBias is set;
//  3. with Groups > 1, the experts form Groups groups of consecutive
//     experts, a group scores the sum of its two best s, and only the
//     GroupsUsed best groups stay eligible;
//  4. the K eligible experts of largest s are chosen, best first (the
//     lower index first on ties);
//  5. their weights are p of the chosen (softmax of the chosen logits for
//     GateSoftmaxSelected), divided by their sum when Norm (the sum clamped
//     below at 2^-14, as llama.cpp), times Scale when Scale != 0.
//
// The probabilities and sums are float64; weights are rounded to float32
// once. Routing runs on the host for every backend, so that every device
// chooses the same experts from the same logits.
type Router struct {
	Experts, K         int
	Gating             Gating
	SelBias            []float32 // nil, or Experts values
	Groups, GroupsUsed int       // 0 or 1: no groups
	Norm               bool
	Scale              float64 // 0: none
}

// Validate checks the router's shape.
func (r *Router) Validate() error {
	switch {
	case r.Experts <= 0 || r.K <= 0 || r.K > r.Experts:
		return fmt.Errorf("moe: %d experts, %d used per token", r.Experts, r.K)
	case r.Gating < GateSoftmax || r.Gating > GateSoftmaxSelected:
		return fmt.Errorf("moe: unknown gating function %d", int(r.Gating))
	case r.SelBias != nil && len(r.SelBias) != r.Experts:
		return fmt.Errorf("moe: selection bias of %d values for %d experts", len(r.SelBias), r.Experts)
	case r.Groups > 1 && (r.Experts%r.Groups != 0 || r.GroupsUsed < 1 || r.GroupsUsed > r.Groups || r.Experts/r.Groups < 2):
		return fmt.Errorf("moe: %d experts in %d groups, %d groups used", r.Experts, r.Groups, r.GroupsUsed)
	case r.Groups > 1 && r.GroupsUsed*(r.Experts/r.Groups) < r.K:
		return fmt.Errorf("moe: %d groups of %d experts used cannot hold %d experts per token", r.GroupsUsed, r.Experts/r.Groups, r.K)
	case math.IsNaN(r.Scale) || math.IsInf(r.Scale, 0):
		return fmt.Errorf("moe: expert weights scale %v", r.Scale)
	}
	return nil
}

// Routing is the experts chosen for n tokens: token t's j-th choice is
// Expert[t·K+j] with weight Weight[t·K+j].
type Routing struct {
	K      int
	Expert []int32
	Weight []float32
}

// Route chooses the experts of each row of logits (n rows of r.Experts
// values). A NaN logit is an error naming the row.
func (r *Router) Route(logits []float32) (*Routing, error) {
	E, K := r.Experts, r.K
	if len(logits)%E != 0 {
		panic(fmt.Sprintf("moe: %d router logits for %d experts", len(logits), E))
	}
	n := len(logits) / E
	out := &Routing{K: K, Expert: make([]int32, n*K), Weight: make([]float32, n*K)}
	p := make([]float64, E)
	s := make([]float64, E)
	idx := make([]int, E)
	gs := make([]float64, max(r.Groups, 1))
	gidx := make([]int, len(gs))
	w := make([]float64, K)
	for t := range n {
		row := logits[t*E : (t+1)*E]
		for i, v := range row {
			if v != v {
				return nil, fmt.Errorf("moe: router logit %d of token %d is NaN", i, t)
			}
		}
		switch r.Gating {
		case GateSoftmax:
			mx := math.Inf(-1)
			for _, v := range row {
				mx = math.Max(mx, float64(v))
			}
			var sum float64
			for i, v := range row {
				p[i] = math.Exp(float64(v) - mx)
				sum += p[i]
			}
			for i := range p {
				p[i] /= sum
			}
		case GateSigmoid:
			for i, v := range row {
				p[i] = 1 / (1 + math.Exp(-float64(v)))
			}
		case GateSoftmaxSelected:
			for i, v := range row {
				p[i] = float64(v)
			}
		}
		for i := range s {
			s[i] = p[i]
			if r.SelBias != nil {
				s[i] += float64(r.SelBias[i])
			}
		}
		if r.Groups > 1 {
			per := E / r.Groups
			for g := range r.Groups {
				a, b := math.Inf(-1), math.Inf(-1) // the two best of the group
				for _, v := range s[g*per : (g+1)*per] {
					if v > a {
						a, b = v, a
					} else if v > b {
						b = v
					}
				}
				gs[g] = a + b
				gidx[g] = g
			}
			sort.SliceStable(gidx, func(i, j int) bool { return gs[gidx[i]] > gs[gidx[j]] })
			for _, g := range gidx[r.GroupsUsed:] {
				for i := g * per; i < (g+1)*per; i++ {
					s[i] = math.Inf(-1)
				}
			}
		}
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(i, j int) bool { return s[idx[i]] > s[idx[j]] })
		chosen := idx[:K]
		switch r.Gating {
		case GateSoftmaxSelected:
			mx := math.Inf(-1)
			for _, e := range chosen {
				mx = math.Max(mx, p[e])
			}
			var sum float64
			for j, e := range chosen {
				w[j] = math.Exp(p[e] - mx)
				sum += w[j]
			}
			for j := range w {
				w[j] /= sum
			}
		default:
			for j, e := range chosen {
				w[j] = p[e]
			}
		}
		if r.Norm {
			var sum float64
			for _, v := range w {
				sum += v
			}
			sum = math.Max(sum, 0x1p-14)
			for j := range w {
				w[j] /= sum
			}
		}
		for j, e := range chosen {
			v := w[j]
			if r.Scale != 0 {
				v *= r.Scale
			}
			out.Expert[t*K+j] = int32(e)
			out.Weight[t*K+j] = float32(v)
		}
	}
	return out, nil
}
