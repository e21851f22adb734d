package ml

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"

	"ppl.dev/score/nn"
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
	// GateSqrtSoftplus: p = sqrt(softplus(logits)) per expert, softplus(x)
	// = ln(1 + e^x), or x above 20 (DeepSeek-V4).
	GateSqrtSoftplus Gating = 4
)

func (g Gating) String() string {
	switch g {
	case GateSoftmax:
		return "softmax"
	case GateSigmoid:
		return "sigmoid"
	case GateSoftmaxSelected:
		return "softmax-selected"
	case GateSqrtSoftplus:
		return "sqrt-softplus"
	}
	return fmt.Sprintf("gating(%d)", int(g))
}

// Router turns router logits into each token's experts and weights, as
// llama.cpp's build_moe_ffn does:
//
//  1. p = gating(logits) (softmax, sigmoid or sqrt(softplus); the raw
//     logits for GateSoftmaxSelected);
//  2. selection scores s = p + SelBias (exp_probs_b) when SelBias is set,
//     or with SelectSigmoid s = sigmoid(logits);
//  3. with Groups > 1, the experts form Groups groups of consecutive
//     experts, a group scores the sum of its two best s, and only the
//     GroupsUsed best groups stay eligible;
//  4. the K eligible experts of largest s are chosen, best first (the
//     lower index first on ties), or with Chosen the experts it gives;
//  5. with Chunk > 0, each chosen e becomes ⌊e/Chunk⌋ (as ggml computes
//     it: float32(e)·float32(1/Chunk), truncated);
//  6. their weights are p of the chosen (softmax of the chosen logits for
//     GateSoftmaxSelected), divided by their sum when Norm (the sum clamped
//     below at 2^-14, as llama.cpp), times Scale when Scale != 0.
//
// The probabilities and sums are float64; weights are rounded to float32
// once. With GGML (the int8 modes), every step is instead the float32
// ggml-cpu operation llama.cpp uses, in its order (routeGGML). Backends
// route through Backend.Route: the CUDA backend computes the float64 path
// on the device (kernels/experts.cu's moe_route: the same operations in
// the same order, its e^x the device's), so that routing takes neither the
// host's cores nor a copy of every logit, and the GGML path too
// (moe_route_ggml: ggml's float32 operations to the bit, glibc's and
// ggml's expf ported), leaving to the host the rows whose choice meets
// equal scores, whose order is std::sort's: every device chooses
// llama.cpp's experts.
type Router struct {
	Experts, K         int
	Gating             Gating
	SelBias            []float32 // nil, or Experts values
	Groups, GroupsUsed int       // 0 or 1: no groups
	Norm               bool
	Scale              float64 // 0: none
	// SelectSigmoid chooses by sigmoid(logits) while the weights stay p
	// (GroveMoE's build_moe_ffn: softmax weights, sigmoid choice).
	SelectSigmoid bool
	// Chunk, when above 0, maps each chosen expert e to ⌊e/Chunk⌋ before
	// its weight is looked up: GroveMoE's chunk experts, one per Chunk
	// experts, weighted by p of the expert whose index is the chunk's, as
	// llama.cpp's build_moe_ffn looks them up after the mapping.
	Chunk int
	// Before puts the weights on the experts' inputs (Routing.Before).
	Before bool
	// Chosen, when not nil, holds each token's K experts, row t's at
	// Chosen[t·K:(t+1)·K]: DeepSeek-V4's hash layers, whose experts are
	// looked up by token id (ffn_gate_tid2eid) and weighted by p as the
	// chosen ones are (a router of one window).
	Chosen []int32
	// GGML routes as ggml-cpu computes build_moe_ffn's graph, as the AVX-512
	// build does or, with GGMLAVX2, as the AVX2 build does (their softmax
	// lanes and e^x differ).
	GGML, GGMLAVX2 bool
}

// Validate checks the router's shape.
func (r *Router) Validate() error {
	switch {
	case r.Experts <= 0 || r.K <= 0 || r.K > r.Experts:
		return fmt.Errorf("moe: %d experts, %d used per token", r.Experts, r.K)
	case r.Gating < GateSoftmax || r.Gating > GateSqrtSoftplus:
		return fmt.Errorf("moe: unknown gating function %d", int(r.Gating))
	case r.SelBias != nil && len(r.SelBias) != r.Experts:
		return fmt.Errorf("moe: selection bias of %d values for %d experts", len(r.SelBias), r.Experts)
	case r.Groups > 1 && (r.Experts%r.Groups != 0 || r.GroupsUsed < 1 || r.GroupsUsed > r.Groups || r.Experts/r.Groups < 2):
		return fmt.Errorf("moe: %d experts in %d groups, %d groups used", r.Experts, r.Groups, r.GroupsUsed)
	case r.Groups > 1 && r.GroupsUsed*(r.Experts/r.Groups) < r.K:
		return fmt.Errorf("moe: %d groups of %d experts used cannot hold %d experts per token", r.GroupsUsed, r.Experts/r.Groups, r.K)
	case r.Chunk < 0 || r.Chunk > 0 && r.Experts%r.Chunk != 0:
		return fmt.Errorf("moe: %d experts in chunks of %d", r.Experts, r.Chunk)
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
	// Before: the weights multiply the chosen experts' inputs, not their
	// outputs (Llama 4's build_moe_ffn, weight_before_ffn).
	Before bool
}

// Route chooses the experts of each row of logits (n rows of r.Experts
// values). A NaN logit is an error naming the row. Rows are routed in
// parallel (a 4096-token window of a 128-expert model routes 4096 rows a
// layer, on the host whatever the backend); each row's arithmetic is the
// same whatever the split.
func (r *Router) Route(logits []float32) (*Routing, error) {
	E, K := r.Experts, r.K
	if len(logits)%E != 0 {
		panic(fmt.Sprintf("moe: %d router logits for %d experts", len(logits), E))
	}
	n := len(logits) / E
	if err := r.CheckChosen(n); err != nil {
		return nil, err
	}
	out := &Routing{K: K, Expert: make([]int32, n*K), Weight: make([]float32, n*K), Before: r.Before}
	route := r.routeRows
	if r.GGML {
		route = r.routeGGML
	}
	var c *nn.Context // GOMAXPROCS goroutines
	errs := make([]error, c.Workers(n))
	c.Parallel(n, func(w, t0, t1 int) { errs[w] = route(out, logits, t0, t1) })
	for _, err := range errs { // the first row's error, as a sequential pass
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CheckChosen checks Chosen, when set, for n tokens: n·K experts, each
// one of the router's.
func (r *Router) CheckChosen(n int) error {
	if r.Chosen == nil {
		return nil
	}
	if len(r.Chosen) != n*r.K {
		return fmt.Errorf("moe: %d chosen experts for %d tokens of %d", len(r.Chosen), n, r.K)
	}
	for i, e := range r.Chosen {
		if e < 0 || int(e) >= r.Experts {
			return fmt.Errorf("moe: token %d's chosen expert %d is not one of %d", i/r.K, e, r.Experts)
		}
	}
	return nil
}

// routeRows routes rows [t0, t1) of logits into out in float64.
func (r *Router) routeRows(out *Routing, logits []float32, t0, t1 int) error {
	E, K := r.Experts, r.K
	p := make([]float64, E)
	s := make([]float64, E)
	idx := make([]int, E)
	gs := make([]float64, max(r.Groups, 1))
	gidx := make([]int, len(gs))
	w := make([]float64, K)
	for t := t0; t < t1; t++ {
		row := logits[t*E : (t+1)*E]
		if err := checkRow(row, t); err != nil {
			return err
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
		case GateSqrtSoftplus:
			for i, v := range row {
				x := float64(v)
				if x <= 20 {
					x = math.Log1p(math.Exp(x))
				}
				p[i] = math.Sqrt(x)
			}
		}
		chosen := idx[:K]
		if r.Chosen != nil {
			for j, e := range r.Chosen[t*K : (t+1)*K] {
				chosen[j] = int(e)
			}
		} else {
			r.chooseRow(idx, s, p, row, gs, gidx)
		}
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
	return nil
}

// chooseRow puts in idx[:K] the experts chosen for one row by the
// selection scores (p, plus SelBias, or the sigmoid of row's logits with
// SelectSigmoid; s their scratch), within the best groups (gs, gidx
// scratch), each mapped to its chunk with Chunk.
func (r *Router) chooseRow(idx []int, s, p []float64, row []float32, gs []float64, gidx []int) {
	E, K := r.Experts, r.K
	nan := false
	for i := range s {
		s[i] = p[i]
		if r.SelectSigmoid {
			s[i] = 1 / (1 + math.Exp(-float64(row[i])))
		}
		if r.SelBias != nil {
			s[i] += float64(r.SelBias[i])
		}
		nan = nan || s[i] != s[i]
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
		}
		best(gidx, gs, r.GroupsUsed, nan)
		for _, g := range gidx[r.GroupsUsed:] {
			for i := g * per; i < (g+1)*per; i++ {
				s[i] = math.Inf(-1)
			}
		}
	}
	chosen := idx[:K]
	best(idx, s, K, nan)
	if r.Chunk > 0 {
		for j, e := range chosen {
			chosen[j] = chunkOf(e, r.Chunk)
		}
	}
}

// best puts in idx[:k] the indices of the k largest values of v, largest
// first and equal values in index order: the first k of a stable sort of
// 0, 1, ..., len(v)-1 by v descending, which is what routing is defined by.
// With NaNs (an infinite logit) that order depends on the sort's steps, so
// it sorts all of idx as sort.SliceStable does; otherwise it selects
// (selectBest).
func best(idx []int, v []float64, k int, nan bool) {
	if nan {
		for i := range v {
			idx[i] = i
		}
		sort.SliceStable(idx[:len(v)], func(i, j int) bool { return v[idx[i]] > v[idx[j]] })
		return
	}
	selectBest(idx, v, k)
}

// selectBest puts in idx[:k] the indices of the k largest values of v (no
// NaN), largest first and equal values in index order, and the others in
// idx[k:len(v)]: an insertion into a list of k, len(v)·k steps at most
// (against a sort's len(v)·log len(v) with k of 8 among 128 experts).
func selectBest[I int | int32, T float32 | float64](idx []I, v []T, k int) {
	n, rest := 0, k
	for i, x := range v {
		if n == k && !(x > v[idx[k-1]]) {
			idx[rest] = I(i)
			rest++
			continue
		}
		j := n
		if n == k { // the k-th drops out
			idx[rest] = idx[k-1]
			rest++
			j = k - 1
		} else {
			n++
		}
		for ; j > 0 && x > v[idx[j-1]]; j-- {
			idx[j] = idx[j-1]
		}
		idx[j] = I(i)
	}
}

// ggmlBest puts in idx[:k] the first k of ggmlArgsort(idx, v): selected
// when the k+1 largest values are distinct and v has no NaN, since every
// sort then puts the same k first; sorted as ggml does otherwise (ties,
// whose order is std::sort's).
func ggmlBest(idx []int32, v []float32, k int) {
	if k < len(v) && !slices.ContainsFunc(v, func(x float32) bool { return x != x }) {
		selectBest(idx, v, k+1)
		distinct := true
		for j := range k {
			distinct = distinct && v[idx[j]] > v[idx[j+1]]
		}
		if distinct {
			return
		}
	}
	ggmlArgsort(idx, v)
}

// chunkOf is expert e's chunk of n as llama.cpp's GroveMoE graph computes
// it: e cast to float32, scaled by float32(1/n), cast back (truncated).
func chunkOf(e, n int) int { return int(float32(e) * (1 / float32(n))) }

func checkRow(row []float32, t int) error {
	for i, v := range row {
		if v != v {
			return fmt.Errorf("moe: router logit %d of token %d is NaN", i, t)
		}
	}
	return nil
}

// routeGGML is Route as llama.cpp's build_moe_ffn computes it on the CPU,
// each step a float32 ggml operation:
//
//   - p = SOFT_MAX(logits), SIGMOID or SQRT(SOFTPLUS) (GGMLProbs); the
//     logits themselves for GateSoftmaxSelected;
//   - s = p + exp_probs_b (ADD), or SIGMOID of the logits (SelectSigmoid);
//   - groups: ARGSORT of each group's s, the group's score the SUM_ROWS of
//     its two best (a float64 sum rounded to float32), ARGSORT of the
//     scores, the other groups' s set to -Inf;
//   - the first K of the ARGSORT of s (ggmlArgsort: std::sort, so that ties
//     come out in libstdc++'s order, not by index), each mapped to its
//     chunk with Chunk (CAST, SCALE, CAST);
//   - w = GET_ROWS of p; SOFT_MAX of w for GateSoftmaxSelected;
//   - Norm: w / max(SUM_ROWS(w), 2^-14) (CLAMP, DIV);
//   - w × float32(Scale) (SCALE) unless Scale is 0 or 1.
func (r *Router) routeGGML(out *Routing, logits []float32, t0, t1 int) error {
	E, K := r.Experts, r.K
	p := make([]float32, E)
	s := make([]float32, E)
	idx := make([]int32, E)
	per := E / max(r.Groups, 1)
	gs := make([]float32, max(r.Groups, 1))
	gidx := make([]int32, max(r.Groups, per))
	for t := t0; t < t1; t++ {
		row := logits[t*E : (t+1)*E]
		if err := checkRow(row, t); err != nil {
			return err
		}
		r.GGMLProbs(p, row)
		e, w := out.Expert[t*K:(t+1)*K], out.Weight[t*K:(t+1)*K]
		if r.Chosen != nil {
			copy(e, r.Chosen[t*K:(t+1)*K])
		} else {
			r.chooseGGML(e, idx, s, p, row, gs, gidx)
		}
		for j, x := range e {
			w[j] = p[x]
		}
		if r.Gating == GateSoftmaxSelected {
			nn.GGMLSoftMax(w, w, r.GGMLAVX2)
		}
		if r.Norm {
			var sum float64 // ggml_vec_sum_f32
			for _, v := range w {
				sum += float64(v)
			}
			d := max(float32(sum), 0x1p-14)
			for j := range w {
				w[j] /= d
			}
		}
		if r.Scale != 0 && r.Scale != 1 {
			sc := float32(r.Scale)
			for j := range w {
				w[j] *= sc
			}
		}
	}
	return nil
}

// GGMLProbs sets p to the gating function of one row of logits as ggml-cpu
// computes it in float32: SOFT_MAX (nn.GGMLSoftMax, the build's lanes),
// SIGMOID (nn.GGMLSigmoid), SQRT of SOFTPLUS (nn.GGMLSoftplus: glibc's logf
// and expf; sqrtf), or the logits themselves (GateSoftmaxSelected).
func (r *Router) GGMLProbs(p, row []float32) {
	switch r.Gating {
	case GateSoftmax:
		nn.GGMLSoftMax(p, row, r.GGMLAVX2)
	case GateSigmoid:
		nn.GGMLSigmoid(p, row)
	case GateSoftmaxSelected:
		copy(p, row)
	case GateSqrtSoftplus:
		nn.GGMLSoftplus(p, row)
		for i, x := range p {
			p[i] = float32(math.Sqrt(float64(x)))
		}
	}
}

// chooseGGML puts in e the K experts llama.cpp's CPU graph chooses for
// one row (routeGGML's steps from the selection scores to the chunks; idx,
// s, gs and gidx scratch).
func (r *Router) chooseGGML(e, idx []int32, s, p []float32, row []float32, gs []float32, gidx []int32) {
	per := r.Experts / max(r.Groups, 1)
	copy(s, p)
	if r.SelectSigmoid {
		nn.GGMLSigmoid(s, row)
	}
	if r.SelBias != nil {
		for i, b := range r.SelBias {
			s[i] += b
		}
	}
	if r.Groups > 1 {
		for g := range r.Groups {
			sg := s[g*per : (g+1)*per]
			ggmlBest(gidx[:per], sg, 2) // the two best values: their order is no matter
			gs[g] = float32(float64(sg[gidx[0]]) + float64(sg[gidx[1]]))
		}
		ggmlBest(gidx[:r.Groups], gs, r.GroupsUsed)
		for _, g := range gidx[r.GroupsUsed:r.Groups] {
			for i := range per {
				s[int(g)*per+i] = float32(math.Inf(-1))
			}
		}
	}
	ggmlBest(idx, s, r.K)
	copy(e, idx[:r.K])
	if r.Chunk > 0 {
		for j, x := range e {
			e[j] = int32(chunkOf(int(x), r.Chunk))
		}
	}
}

// ggmlArgsort is ggml-cpu's ARGSORT in descending order: idx = 0, 1, ...,
// then std::sort with the comparison v[a] > v[b]. std::sort is not stable,
// and which of equal values comes first is what the model's experts are
// (and in which order their outputs are summed), so this is libstdc++'s
// introsort step by step: quicksort with the median of three moved to the
// front, down to ranges of 16, with heapsort past 2·⌊log2 n⌋ levels, then
// insertion sort.
func ggmlArgsort(idx []int32, v []float32) {
	for i := range idx {
		idx[i] = int32(i)
	}
	stdSort{idx, func(x, y int32) bool { return v[x] > v[y] }}.sort()
}

// stdSort sorts a by less as libstdc++'s std::sort.
type stdSort struct {
	a    []int32
	less func(x, y int32) bool
}

func (s stdSort) swap(i, j int) { s.a[i], s.a[j] = s.a[j], s.a[i] }

// sort is std::sort: std::__introsort_loop, then std::__final_insertion_sort.
func (s stdSort) sort() {
	n := len(s.a)
	if n < 2 {
		return
	}
	s.introsort(0, n, 2*(bits.Len(uint(n))-1))
	if n > 16 {
		s.insertion(0, 16)
		for i := 16; i < n; i++ {
			s.linearInsert(i)
		}
	} else {
		s.insertion(0, n)
	}
}

// introsort is std::__introsort_loop on [first, last).
func (s stdSort) introsort(first, last, depth int) {
	for last-first > 16 {
		if depth == 0 {
			s.heapsort(first, last)
			return
		}
		depth--
		// __unguarded_partition_pivot: the median of first+1, the middle
		// and last-1 moved to first, then Hoare's partition around it.
		a, b, c := first+1, first+(last-first)/2, last-1
		switch {
		case s.less(s.a[a], s.a[b]):
			switch {
			case s.less(s.a[b], s.a[c]):
				s.swap(first, b)
			case s.less(s.a[a], s.a[c]):
				s.swap(first, c)
			default:
				s.swap(first, a)
			}
		case s.less(s.a[a], s.a[c]):
			s.swap(first, a)
		case s.less(s.a[b], s.a[c]):
			s.swap(first, c)
		default:
			s.swap(first, b)
		}
		lo, hi := first+1, last
		for {
			for s.less(s.a[lo], s.a[first]) {
				lo++
			}
			hi--
			for s.less(s.a[first], s.a[hi]) {
				hi--
			}
			if lo >= hi {
				break
			}
			s.swap(lo, hi)
			lo++
		}
		s.introsort(lo, last, depth)
		last = lo
	}
}

// insertion is std::__insertion_sort on [first, last).
func (s stdSort) insertion(first, last int) {
	for i := first + 1; i < last; i++ {
		if x := s.a[i]; s.less(x, s.a[first]) {
			copy(s.a[first+1:i+1], s.a[first:i])
			s.a[first] = x
		} else {
			s.linearInsert(i)
		}
	}
}

// linearInsert is std::__unguarded_linear_insert: a[i] moved down past
// the elements it is less than.
func (s stdSort) linearInsert(i int) {
	x := s.a[i]
	for ; s.less(x, s.a[i-1]); i-- {
		s.a[i] = s.a[i-1]
	}
	s.a[i] = x
}

// heapsort is std::__partial_sort(first, last, last): std::__make_heap,
// then std::__sort_heap.
func (s stdSort) heapsort(first, last int) {
	h := stdSort{s.a[first:last], s.less}
	n := last - first
	for p := (n - 2) / 2; p >= 0; p-- {
		h.adjustHeap(p, n, h.a[p])
	}
	for n--; n > 0; n-- {
		x := h.a[n]
		h.a[n] = h.a[0]
		h.adjustHeap(0, n, x)
	}
}

// adjustHeap is std::__adjust_heap: the hole at i sifted down to a leaf
// along the larger children, then x pushed up from there (__push_heap).
func (s stdSort) adjustHeap(i, n int, x int32) {
	top, c := i, i
	for c < (n-1)/2 {
		c = 2 * (c + 1)
		if s.less(s.a[c], s.a[c-1]) {
			c--
		}
		s.a[i] = s.a[c]
		i = c
	}
	if n&1 == 0 && c == (n-2)/2 {
		c = 2 * (c + 1)
		s.a[i] = s.a[c-1]
		i = c - 1
	}
	for p := (i - 1) / 2; i > top && s.less(s.a[p], x); p = (i - 1) / 2 {
		s.a[i] = s.a[p]
		i = p
	}
	s.a[i] = x
}
