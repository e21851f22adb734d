package cuda

import (
	"cmp"
	"errors"
	"math"
	"slices"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// The emulation of the kernels of elementwise.cu, experts.cu and glu_half
// of swiglu.cu (the
// operations package ml adds to the decoder's): each is its CPU reference
// in score/model/cpu.go, operation for operation.
func init() {
	for name, k := range map[string]simKernel{
		"add_f32": {3, func(s *simDevice, a *simArgs, grid dim3) error {
			x, y, n := f32s(a.ptr(0)), f32s(a.ptr(1)), a.i64(2)
			if a.err != nil {
				return a.err
			}
			for i := range n {
				x[i] += y[i]
			}
			return nil
		}},
		"scale_f32": {3, func(s *simDevice, a *simArgs, grid dim3) error {
			x, n, v := f32s(a.ptr(0)), a.i64(1), a.f32(2)
			if a.err != nil {
				return a.err
			}
			for i := range n {
				x[i] *= v
			}
			return nil
		}},
		"clamp_f32": {3, func(s *simDevice, a *simArgs, grid dim3) error {
			x, n, c := f32s(a.ptr(0)), a.i64(1), a.f32(2)
			if a.err != nil {
				return a.err
			}
			for i := range n {
				x[i] = min(max(x[i], -c), c)
			}
			return nil
		}},
		"gate_mul": {6, func(s *simDevice, a *simArgs, grid dim3) error {
			x, g, rows, cols, gcols, fn := f32s(a.ptr(0)), f32s(a.ptr(1)), a.int(2), a.int(3), a.int(4), a.int(5)
			if a.err != nil {
				return a.err
			}
			for r := range rows {
				for c := range cols {
					gv := float64(g[r*gcols+min(c, gcols-1)])
					switch fn {
					case 1:
						x[r*cols+c] = float32(float64(x[r*cols+c]) * nn.Softplus(gv))
					case 2:
						x[r*cols+c] = float32(float64(x[r*cols+c]) * nn.Softplus2(gv))
					default:
						x[r*cols+c] = float32(float64(x[r*cols+c]) / (1 + math.Exp(-gv)))
					}
				}
			}
			return nil
		}},
		"softcap": {3, func(s *simDevice, a *simArgs, grid dim3) error {
			x, n, cp := f32s(a.ptr(0)), a.i64(1), a.f64(2)
			if a.err != nil {
				return a.err
			}
			for i := range n {
				x[i] = float32(cp * math.Tanh(float64(x[i])/cp))
			}
			return nil
		}},
		"xielu_f32": {6, func(s *simDevice, a *simArgs, grid dim3) error {
			x, n := f32s(a.ptr(0)), a.i64(1)
			p := nn.XIELU{AlphaN: a.f32(2), AlphaP: a.f32(3), Beta: a.f32(4), Eps: a.f32(5)}
			if a.err != nil {
				return a.err
			}
			p.Ref(x[:n], x[:n])
			return nil
		}},
		"widen_half": {4, func(s *simDevice, a *simArgs, grid dim3) error {
			out, h, n, f16 := f32s(a.ptr(0)), u16s(a.ptr(1)), a.i64(2), a.int(3)
			if a.err != nil {
				return a.err
			}
			for i := range n {
				out[i] = halfToF32(h[i], f16)
			}
			return nil
		}},
		"glu_half": {10, func(s *simDevice, a *simArgs, grid dim3) error {
			out, gate, upb, rows, f, act, limit, f16 := u16s(a.ptr(0)), f32s(a.ptr(1)), a.ptr(2), a.int(3), a.int(4), a.int(5), a.f32(6), a.int(7)
			amax, rescale := a.ptr(8), a.int(9)
			if a.err != nil {
				return a.err
			}
			fn, err := simGLU("glu_half", ml.Act(act), limit, 0)
			if err != nil {
				return err
			}
			tmp := make([]float32, rows*f)
			fn(tmp, gate[:rows*f], simUp(upb, ml.Act(act), rows*f))
			simGLUHalf(out, tmp, f16, amax, rescale)
			return nil
		}},
		"gather_rows": {6, func(s *simDevice, a *simArgs, grid dim3) error {
			o, x, rows, n, cols, f16 := a.ptr(0), f32s(a.ptr(1)), i32s(a.ptr(2)), a.int(3), a.int(4), a.int(5)
			if a.err != nil {
				return a.err
			}
			for i := range n {
				r := int(rows[i])
				if (r+1)*cols > len(x) || r < 0 {
					return errors.New("gather_rows: row outside the input")
				}
				for c := range cols {
					if f16 == otypeF32 {
						f32s(o)[i*cols+c] = x[r*cols+c]
					} else {
						u16s(o)[i*cols+c] = f32ToHalf(x[r*cols+c], f16)
					}
				}
			}
			return nil
		}},
		"scale_rows": {6, func(s *simDevice, a *simArgs, grid dim3) error {
			out, x, rows, w, n, cols := f32s(a.ptr(0)), f32s(a.ptr(1)), i32s(a.ptr(2)), f32s(a.ptr(3)), a.int(4), a.int(5)
			if a.err != nil {
				return a.err
			}
			for i := range n {
				r := int(rows[i])
				if (r+1)*cols > len(x) || r < 0 {
					return errors.New("scale_rows: row outside the input")
				}
				for c := range cols {
					out[i*cols+c] = x[r*cols+c] * w[i]
				}
			}
			return nil
		}},
		"scatter_scaled": {6, func(s *simDevice, a *simArgs, grid dim3) error {
			res, y, choice, w, n, cols := f32s(a.ptr(0)), f32s(a.ptr(1)), i32s(a.ptr(2)), f32s(a.ptr(3)), a.int(4), a.int(5)
			if a.err != nil {
				return a.err
			}
			for i := range n {
				c := int(choice[i])
				if (c+1)*cols > len(res) || c < 0 {
					return errors.New("scatter_scaled: slot outside the result")
				}
				for k := range cols {
					res[c*cols+k] = y[i*cols+k] * w[c]
				}
			}
			return nil
		}},
		"moe_route":      {14, func(s *simDevice, a *simArgs, grid dim3) error { return simRoute(a, grid[0], false) }},
		"moe_route_ggml": {15, func(s *simDevice, a *simArgs, grid dim3) error { return simRoute(a, 32*grid[0], true) }},
		"sum_choices": {5, func(s *simDevice, a *simArgs, grid dim3) error {
			dst, res, rows, k, cols := f32s(a.ptr(0)), f32s(a.ptr(1)), a.int(2), a.int(3), a.int(4)
			if a.err != nil {
				return a.err
			}
			for t := range rows {
				for c := range cols {
					v := res[t*k*cols+c]
					for j := 1; j < k; j++ {
						v += res[(t*k+j)*cols+c]
					}
					dst[t*cols+c] = v
				}
			}
			return nil
		}},
	} {
		simKernels[name] = k
	}
}

// simRoute is moe_route (ggml: moe_route_ggml) over a's arguments, its
// grid covering covered tokens: Route's own code for each row the kernel
// routes, expert -1 for each it leaves to the host.
func simRoute(a *simArgs, covered uint32, ggml bool) error {
	logits, experts, weights, flag := f32s(a.ptr(0)), i32s(a.ptr(2)), f32s(a.ptr(3)), i32s(a.ptr(4))
	n, opts := a.int(5), a.int(12)
	r := ml.Router{Experts: a.int(6), K: a.int(7), Gating: ml.Gating(a.int(8)), Groups: a.int(9), GroupsUsed: a.int(10),
		Chunk: a.int(11), Norm: opts&1 != 0, SelectSigmoid: opts&2 != 0, Scale: a.f64(13), GGML: ggml}
	left := simRouteLeft
	if ggml {
		r.GGMLAVX2, left = a.int(14) != 0, simRouteGGMLLeft
	}
	if b := a.ptr(1); b != nil {
		r.SelBias = f32s(b)[:r.Experts]
	}
	if err := covers(covered, n, "tokens"); err != nil || a.err != nil {
		return errors.Join(err, a.err)
	}
	E, K := r.Experts, r.K
	given := opts&4 != 0
	for t := range n {
		row := logits[t*E : (t+1)*E]
		if given { // the row's experts, as the kernel reads them
			r.Chosen = slices.Clone(experts[t*K : (t+1)*K])
		}
		if left(&r, row) {
			experts[t*K], flag[0] = -1, 1
			continue
		}
		rt, err := r.Route(row)
		if err != nil {
			return err
		}
		copy(experts[t*K:(t+1)*K], rt.Expert)
		copy(weights[t*K:(t+1)*K], rt.Weight)
	}
	return nil
}

// simRouteLeft reports whether moe_route leaves row to the host: a NaN
// logit, or with the experts chosen there, a NaN selection score or group
// score.
func simRouteLeft(r *ml.Router, row []float32) bool {
	mx := math.Inf(-1)
	for _, v := range row {
		if v != v {
			return true
		}
		mx = math.Max(mx, float64(v))
	}
	if r.Chosen != nil {
		return false
	}
	s := make([]float64, len(row))
	for i, v := range row {
		x := float64(v) // GateSoftmaxSelected's p; softmax's is NaN only for an infinite maximum
		switch {
		case r.Gating == ml.GateSoftmax && math.IsInf(mx, 0) && !r.SelectSigmoid:
			return true
		case r.Gating == ml.GateSoftmax, r.Gating == ml.GateSigmoid, r.SelectSigmoid:
			x = 0.5 // a probability: finite
		case r.Gating == ml.GateSqrtSoftplus && x <= 20:
			x = math.Sqrt(math.Log1p(math.Exp(x)))
		case r.Gating == ml.GateSqrtSoftplus:
			x = math.Sqrt(x)
		}
		if r.SelBias != nil {
			x += float64(r.SelBias[i])
		}
		if x != x {
			return true
		}
		s[i] = x
	}
	if r.Groups > 1 {
		per := len(row) / r.Groups
		for g := range r.Groups {
			a, b := math.Inf(-1), math.Inf(-1)
			for _, v := range s[g*per : (g+1)*per] {
				if v > a {
					a, b = v, a
				} else if v > b {
					b = v
				}
			}
			if a+b != a+b {
				return true
			}
		}
	}
	return false
}

// simRouteGGMLLeft reports whether moe_route_ggml leaves row to the host:
// a NaN logit, or unless the experts are given, a choice (of groups, of
// experts) among equal or NaN selection scores, whose order is
// std::sort's.
func simRouteGGMLLeft(r *ml.Router, row []float32) bool {
	if slices.ContainsFunc(row, func(v float32) bool { return v != v }) {
		return true
	}
	if r.Chosen != nil {
		return false
	}
	E := len(row)
	p, s := make([]float32, E), make([]float32, E)
	r.GGMLProbs(p, row)
	copy(s, p)
	if r.SelectSigmoid {
		nn.GGMLSigmoid(s, row)
	}
	for i, b := range r.SelBias {
		s[i] += b
	}
	if r.Groups > 1 {
		per := E / r.Groups
		if per < 2 || slices.ContainsFunc(s, func(v float32) bool { return v != v }) {
			return true
		}
		gs := make([]float32, r.Groups)
		for g := range gs {
			top := slices.Sorted(slices.Values(s[g*per : (g+1)*per]))
			gs[g] = float32(float64(top[per-1]) + float64(top[per-2]))
		}
		used, ok := simGGMLBest(gs, r.GroupsUsed)
		if !ok {
			return true
		}
		for g := range gs {
			if !slices.Contains(used, g) {
				for i := g * per; i < (g+1)*per; i++ {
					s[i] = float32(math.Inf(-1))
				}
			}
		}
	}
	_, ok := simGGMLBest(s, r.K)
	return !ok
}

// simGGMLBest is ggml_best: the indexes of the k largest of v, and whether
// each of them is the only one of its value in v (and v holds no NaN).
func simGGMLBest(v []float32, k int) ([]int, bool) {
	if slices.ContainsFunc(v, func(x float32) bool { return x != x }) {
		return nil, false
	}
	order := make([]int, len(v))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(v[b], v[a]) })
	for j := range min(k, len(v)) {
		if j+1 < len(v) && v[order[j]] == v[order[j+1]] || j > 0 && v[order[j]] == v[order[j-1]] {
			return nil, false
		}
	}
	return order[:min(k, len(v))], true
}
