package nn

import (
	"fmt"
	"math"
)

// Gated DeltaNet as llama.cpp 0.7.0 computes it on the CPU (the int8
// modes' Context.LlamaCPP), checked bit for bit against its tensors:
//
//   - q and k's L2 norm: RMS_NORM with eps/S (S the head size), then SCALE
//     by 1/sqrtf(S) (GGMLL2Norm).
//   - the gates: beta = sigmoid(x) (UNARY sigmoid, GGMLSigmoid); g =
//     softplus(alpha + dt_bias)·a (ADD, UNARY softplus as logf(1 +
//     expf(x)) for x ≤ 20, MUL), glibc's expf and logf (GGMLDeltaGates).
//   - GATED_DELTA_NET: token by token (DeltaRuleGGML).
//   - the gated norm: RMS_NORM and MUL, then times SiLU(z) on ggml's lanes
//     per head (GatedRMSNorm).

// GGMLL2Norm normalizes each row of x (rows of d) into out as llama.cpp
// 0.7.0 does for Gated DeltaNet's q and k: RMS_NORM with eps/d, then
// SCALE by 1/sqrtf(d): x / sqrt(‖x‖² + eps) but for the roundings (sum =
// Σ double(x·x), mean = float32(sum/d), y = x·(1/sqrtf(mean + eps/d)),
// then y·(1/sqrtf(d)), each product rounded to float32). out may be x.
func GGMLL2Norm(c *Context, out, x []float32, rows, d int, eps float64) {
	check("l2 norm input", len(x), rows*d)
	check("l2 norm output", len(out), rows*d)
	e := float32(eps) / float32(d)
	s := InvSqrtf(d)
	c.Parallel(rows, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			o := out[r*d : (r+1)*d]
			xr := x[r*d : (r+1)*d]
			sc := ggmlRMSScale(xr, e)
			for i, v := range xr {
				o[i] = v * sc * s
			}
		}
	})
}

// ggmlRMSScale is RMS_NORM's scale of one row: sum = Σ double(x·x),
// mean = float32(sum/n), 1/sqrtf(mean + eps).
func ggmlRMSScale(x []float32, eps float32) float32 {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	mean := float32(sum / float64(len(x)))
	return 1 / float32(math.Sqrt(float64(mean+eps)))
}

// GGMLDeltaGates computes the delta rule's gates in place as llama.cpp
// 0.7.0 does (beta rows of len(a) values, one per value head; alpha rows
// of len(dtBias), one per head or, Kimi's, one per key channel of each):
// beta = 1/(1 + expf(-beta)); alpha = softplus(alpha + dtBias[c])·a[h] for
// column c of head h, softplus(x) = x for x > 20, else logf(1 + expf(x)),
// glibc's expf and logf, each operation rounded to float32.
func GGMLDeltaGates(beta, alpha, a, dtBias []float32) {
	h, c := len(a), len(dtBias)
	if c%h != 0 {
		panic(fmt.Sprintf("nn: delta gates of %d columns for %d heads", c, h))
	}
	check("delta gates alpha", len(alpha), len(beta)/h*c)
	GGMLSigmoid(beta, beta)
	per := c / h
	for i, v := range alpha {
		alpha[i] = ggmlSoftplus(v+dtBias[i%c]) * a[i%c/per]
	}
}

// DeltaRuleGGML is the gated delta rule of one value head (DeltaScan.Run's
// arguments and state layout, S[i·D + j]) as ggml-cpu 0.27.0's
// GATED_DELTA_NET computes it, token by token: with M = Sᵀ (row j holding
// S[·][j]) and e = expf(g) (glibc's), each row j of M is scaled by e (with
// keyGates, g holding D log-decays a token, elementwise by the vector of
// their expf, as ggml's vec_mul: M[j][i]·e[i], Kimi Delta Attention), s =
// ggml_vec_dot_f32(M[j], k) (dotF32: ggml's lanes, then the rest in
// order, no fused multiply-add), δ = (v[j] - s)·beta, M[j][i] = fma(k[i],
// δ, M[j][i]), and out[j] = ggml_vec_dot_f32(M[j], q)·(1/sqrtf(D)): the
// output carries the 1/sqrt(D) the plain rule leaves to q. avx2 selects
// the AVX2 build's lanes. m is D × D scratch. round, when not nil, rounds
// the state once, after the last token (llama.cpp stores it in the cache
// after its batch).
func DeltaRuleGGML(D int, out []float32, ldo int, q, k []float32, ldq int, v []float32, ldv int, g, beta []float32, ldg int, n int, state []float32, avx2 bool, m []float32, round func([]float32)) {
	deltaRuleGGML(D, out, ldo, q, k, ldq, v, ldv, g, ldg, false, beta, ldg, n, state, avx2, m, round)
}

// DeltaRuleGGMLKeyGates is DeltaRuleGGML with a log-decay per key channel:
// g holds D values a token, at stride ldgk; beta one, at stride ldb.
func DeltaRuleGGMLKeyGates(D int, out []float32, ldo int, q, k []float32, ldq int, v []float32, ldv int, g []float32, ldgk int, beta []float32, ldb int, n int, state []float32, avx2 bool, m []float32, round func([]float32)) {
	deltaRuleGGML(D, out, ldo, q, k, ldq, v, ldv, g, ldgk, true, beta, ldb, n, state, avx2, m, round)
}

func deltaRuleGGML(D int, out []float32, ldo int, q, k []float32, ldq int, v []float32, ldv int, g []float32, ldg int, keyGates bool, beta []float32, ldb int, n int, state []float32, avx2 bool, m []float32, round func([]float32)) {
	if n == 0 {
		return
	}
	gw := 1
	if keyGates {
		gw = D
	}
	checkDeltaIO(D, out, ldo, q, k, ldq, v, ldv, n, state)
	check("delta g", len(g), (n-1)*ldg+gw)
	check("delta beta", len(beta), (n-1)*ldb+1)
	check("delta scratch", len(m), D*D)
	transposeF32(m, state, D, D)
	scale := InvSqrtf(D)
	kd, step := kern.deltaGGML, 64
	if avx2 {
		kd, step = kern.deltaGGML8, 32
	}
	var ek []float32 // keyGates: the token's expf(g), one per key channel
	if keyGates {
		ek = make([]float32, D)
	}
	for t := range n {
		kr, qr, vr := k[t*ldq:t*ldq+D], q[t*ldq:t*ldq+D], v[t*ldv:t*ldv+D]
		e, b := float32(1), beta[t*ldb]
		if keyGates { // each row times the vector, then the scalar rule with e = 1 (exact)
			for i := range D {
				ek[i] = LibcExpf(g[t*ldg+i])
			}
			for j := range D {
				row := m[j*D : (j+1)*D]
				for i, x := range ek {
					row[i] *= x
				}
			}
		} else {
			e = LibcExpf(g[t*ldg])
		}
		o := out[t*ldo : t*ldo+D]
		if kd != nil && D%step == 0 {
			kd(&m[0], D, &kr[0], &qr[0], &vr[0], e, b, scale, &o[0])
			continue
		}
		deltaRowsGGMLGeneric(m, kr, qr, vr, e, b, scale, o, avx2)
	}
	transposeF32(state, m, D, D)
	if round != nil {
		round(state[:D*D])
	}
}

// deltaRowsGGMLGeneric runs one token of DeltaRuleGGML through the
// transposed state m (len(k) rows of len(k)): each row scaled by e, δ =
// (v[j] - dotF32(row, k))·b, row += k·δ fused, out[j] = dotF32(row, q)·
// scale. The kernels (kern.deltaGGML, deltaGGML8) do the same for head
// sizes of whole vector steps.
func deltaRowsGGMLGeneric(m, k, q, v []float32, e, b, scale float32, out []float32, avx2 bool) {
	D := len(k)
	for j := range D {
		row := m[j*D : (j+1)*D]
		for i := range row {
			row[i] *= e
		}
		d := (v[j] - dotF32(row, k, avx2)) * b
		for i, x := range k {
			row[i] = fma32(x, d, row[i])
		}
		out[j] = dotF32(row, q, avx2) * scale
	}
}

// checkDelta checks the operands of a delta rule over n tokens.
func checkDelta(D int, out []float32, ldo int, q, k []float32, ldq int, v []float32, ldv int, g, beta []float32, ldg int, n int, state []float32) {
	checkDeltaIO(D, out, ldo, q, k, ldq, v, ldv, n, state)
	check("delta g", len(g), (n-1)*ldg+1)
	check("delta beta", len(beta), (n-1)*ldg+1)
}

// checkDeltaIO checks a delta rule's q, k, v, output and state.
func checkDeltaIO(D int, out []float32, ldo int, q, k []float32, ldq int, v []float32, ldv int, n int, state []float32) {
	if D < 1 {
		panic(fmt.Sprintf("nn: delta rule head of size %d", D))
	}
	check("delta state", len(state), D*D)
	check("delta q", len(q), (n-1)*ldq+D)
	check("delta k", len(k), (n-1)*ldq+D)
	check("delta v", len(v), (n-1)*ldv+D)
	check("delta out", len(out), (n-1)*ldo+D)
}
