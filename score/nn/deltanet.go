package nn

import (
	"fmt"
	"math"
)

// The Gated DeltaNet kernels (qwen35, qwen35moe, qwen3next): the gated
// delta rule over one value head in chunks of matrix products, the causal
// depthwise convolution with SiLU, and the gated RMSNorm. float32 with the
// vector kernels where the time goes (Gemm, the SiLU of swiglu32); the
// plain float64 definitions they are tested against are DeltaRuleRef,
// ConvSiLURef and GatedRMSNormRef.

// DeltaChunk is the chunk of tokens the delta rule folds into matrix
// products (DeltaScan.Run).
const DeltaChunk = 64

// DeltaScan runs the gated delta rule of one value head with a Dim × Dim
// state S (S[i·Dim + j]: key dim i, value dim j), each token t doing
//
//	S ← exp(g[t]) · S
//	S ← S + k[t] ⊗ beta[t] · (v[t] - Sᵀ k[t])
//	o[t] = Sᵀ q[t] / sqrt(Dim)
//
// (DeltaRuleRef; the scale is ggml's, applied to the output in float32),
// DeltaChunk tokens at a time. With G_t = Σ_{s≤t} g_s over
// the chunk, Γ_t = e^{G_t} and S0 the state before it, the corrections u_t
// = beta_t (v_t - (decayed state)ᵀ k_t) solve the unit lower-triangular
// system (I + B) U = X, B[t,s] = beta_t e^{G_t-G_s} (k_t·k_s) for s < t and
// X_t = beta_t (v_t - Γ_t S0ᵀ k_t); then
//
//	o_t = Γ_t S0ᵀ q_t + Σ_{s≤t} e^{G_t-G_s} (q_t·k_s) u_s
//	S   = Γ_{T-1} S0 + Σ_s e^{G_{T-1}-G_s} k_s u_sᵀ.
//
// The products K·S0, Q·S0, K·Kᵀ, Q·Kᵀ, (I + B)⁻¹·X, the masked Q·Kᵀ times
// U and the state update are Gemm calls in float32; the decays (cumulative
// products of e^{g}, so every factor e^{G_t-G_s} ≤ 1 and nothing
// overflows however close to 0 the decays come) and the T × T inverse of I
// + B (forward substitution) are float64, rounded once. A DeltaScan holds
// the scratch of one goroutine.
type DeltaScan struct {
	D, dp int // head size; padded to a multiple of 16 for Gemm

	kq       []float32 // 2T × dp: K rows then Q rows
	kt       []float32 // dp × tp: Kᵀ (columns past T zero)
	ksqs     []float32 // 2T × dp: K·S0 then Q·S0
	kkqk     []float32 // 2T × tp: K·Kᵀ then Q·Kᵀ
	x, u     []float32 // T × dp
	w, qkm   []float32 // T × tp: (I + B)⁻¹, masked decayed Q·Kᵀ
	kdt      []float32 // dp × tp: Kᵀ with column s scaled by e^{G_{T-1}-G_s}
	s        []float32 // dp × dp: the state
	gam, gl  []float32 // T: Γ_t; dp: Γ_{T-1}
	eg, dec  []float64 // T: e^{g_t}; T × T: e^{G_t-G_s} (s ≤ t)
	a64, w64 []float64 // T × T
	gam64    []float64 // T
}

// NewDeltaScan returns the scratch for a head of size d.
func NewDeltaScan(d int) *DeltaScan {
	if d < 1 {
		panic(fmt.Sprintf("nn: delta rule head of size %d", d))
	}
	const T, tp = DeltaChunk, DeltaChunk // DeltaChunk is a multiple of 16
	dp := (d + 15) &^ 15
	f := func(n int) []float32 { return make([]float32, n) }
	f64 := func(n int) []float64 { return make([]float64, n) }
	return &DeltaScan{
		D: d, dp: dp,
		kq: f(2 * T * dp), kt: f(dp * tp), ksqs: f(2 * T * dp), kkqk: f(2 * T * tp),
		x: f(T * dp), u: f(T * dp), w: f(T * tp), qkm: f(T * tp), kdt: f(dp * tp), s: f(dp * dp),
		gam: f(T), gl: f(dp),
		eg: f64(T), dec: f64(T * T), a64: f64(T * T), w64: f64(T * T), gam64: f64(T),
	}
}

// Run scans n tokens of one head: q[t·ldq + i], k[t·ldq + i], v[t·ldv +
// j], out[t·ldo + j] (i, j < D), g[t·ldg], beta[t·ldg], from the state in
// state (D × D), which it leaves holding the state after the last token.
// round, if not nil, rounds each value of the state in place after each
// chunk (the state dtype; it sees the state padded with zeros).
func (s *DeltaScan) Run(out []float32, ldo int, q, k []float32, ldq int, v []float32, ldv int, g, beta []float32, ldg int, n int, state []float32, round func([]float32)) {
	D, dp := s.D, s.dp
	if n == 0 {
		return
	}
	checkDelta(D, out, ldo, q, k, ldq, v, ldv, g, beta, ldg, n, state)
	clear(s.s)
	for i := range D {
		copy(s.s[i*dp:i*dp+D], state[i*D:(i+1)*D])
	}
	for t0 := 0; t0 < n; t0 += DeltaChunk {
		T := min(DeltaChunk, n-t0)
		s.chunk(out[t0*ldo:], ldo, q[t0*ldq:], k[t0*ldq:], ldq, v[t0*ldv:], ldv, g[t0*ldg:], beta[t0*ldg:], ldg, T)
		if round != nil {
			round(s.s)
		}
	}
	for i := range D {
		copy(state[i*D:(i+1)*D], s.s[i*dp:i*dp+D])
	}
}

func (s *DeltaScan) chunk(out []float32, ldo int, q, k []float32, ldq int, v []float32, ldv int, g, beta []float32, ldg int, T int) {
	D, dp := s.D, s.dp
	tp := (T + 15) &^ 15
	// Load K, Q (rows of the padded 2T × dp block), Kᵀ and V.
	kq, kt := s.kq[:2*T*dp], s.kt[:dp*tp]
	clear(kq)
	clear(kt)
	for t := range T {
		kr, qr := k[t*ldq:t*ldq+D], q[t*ldq:t*ldq+D]
		copy(kq[t*dp:], kr)
		copy(kq[(T+t)*dp:], qr)
		for i, x := range kr {
			kt[i*tp+t] = x
		}
	}
	// K·S0 and Q·S0; K·Kᵀ and Q·Kᵀ.
	gemmCols(2*T, dp, kq, dp, s.s, dp, dp, s.ksqs, dp, nil)
	gemmCols(2*T, tp, kq, dp, kt, tp, dp, s.kkqk, tp, nil)

	// Decays: eg_t = e^{g_t}; dec[t,s] = e^{G_t-G_s} = Π_{s<r≤t} eg_r.
	eg, dec, gam := s.eg[:T], s.dec[:T*T], s.gam64[:T]
	p := 1.0
	for t := range T {
		eg[t] = math.Exp(float64(g[t*ldg]))
		p *= eg[t]
		gam[t] = p
		s.gam[t] = float32(p)
	}
	for t := range T {
		row := dec[t*T : t*T+t+1]
		d := 1.0
		for j := t; j >= 0; j-- {
			row[j] = d
			d *= eg[j]
		}
	}
	// W = (I + B)⁻¹ by forward substitution, row by row: W_t = e_t -
	// Σ_{s<t} B[t,s] W_s (row s of W is zero past column s).
	a, w := s.a64[:T*T], s.w64[:T*T]
	kk := s.kkqk
	for t := range T {
		bt := float64(beta[t*ldg])
		wt := w[t*T : (t+1)*T]
		clear(wt)
		wt[t] = 1
		for j := range t {
			a[t*T+j] = bt * dec[t*T+j] * float64(kk[t*tp+j])
		}
		for j := range t {
			c := a[t*T+j]
			if c == 0 {
				continue
			}
			ws := w[j*T : j*T+j+1]
			for i, x := range ws {
				wt[i] -= float64(c * x)
			}
		}
	}
	w32 := s.w[:T*tp]
	for t := range T {
		for j := range T {
			w32[t*tp+j] = float32(w[t*T+j])
		}
	}
	// X_t = beta_t (v_t - Γ_t K·S0_t); U = W·X.
	x := s.x[:T*dp]
	for t := range T {
		bt, gt := float64(beta[t*ldg]), gam[t]
		vr, ks, xr := v[t*ldv:t*ldv+D], s.ksqs[t*dp:t*dp+D], x[t*dp:(t+1)*dp]
		for j, vv := range vr {
			xr[j] = float32(bt * (float64(vv) - float64(gt*float64(ks[j]))))
		}
		clear(xr[D:])
	}
	u := s.u[:T*dp]
	gemmCols(T, dp, w32, tp, x, dp, T, u, dp, nil)
	// O = Γ ⊙ Q·S0 + (dec ∘ Q·Kᵀ)·U, in place of Q·S0.
	qkm := s.qkm[:T*tp]
	for t := range T {
		row := qkm[t*tp : (t+1)*tp]
		clear(row)
		qk := s.kkqk[(T+t)*tp:]
		for j := 0; j <= t; j++ {
			row[j] = float32(dec[t*T+j] * float64(qk[j]))
		}
	}
	o := s.ksqs[T*dp : 2*T*dp]
	gemmCols(T, dp, qkm, tp, u, dp, T, o, dp, s.gam[:T])
	sc := InvSqrtf(D)
	for t := range T {
		for j, x := range o[t*dp : t*dp+D] {
			out[t*ldo+j] = x * sc
		}
	}
	// S = Γ_{T-1} S0 + (Kᵀ scaled by e^{G_{T-1}-G_s})·U.
	kdt, last := s.kdt[:dp*tp], dec[(T-1)*T:T*T]
	for i := range dp {
		src, dst := kt[i*tp:(i+1)*tp], kdt[i*tp:(i+1)*tp]
		for j := range T {
			dst[j] = float32(last[j] * float64(src[j]))
		}
		clear(dst[T:])
	}
	gl := s.gl
	for i := range gl {
		gl[i] = s.gam[T-1]
	}
	gemmCols(dp, dp, kdt, tp, u, dp, T, s.s, dp, gl)
}

// gemmCols is Gemm over n columns (a multiple of 16) in panels of 32 and a
// last one of 16.
func gemmCols(m, n int, a []float32, lda int, b []float32, ldb int, k int, c []float32, ldc int, alpha []float32) {
	for c0 := 0; c0 < n; {
		nr := 32
		if n-c0 < 32 {
			nr = 16
		}
		Gemm(m, nr, a, lda, b[c0:], ldb, k, c[c0:], ldc, alpha)
		c0 += nr
	}
}

// DeltaRuleRef is the plain recurrence DeltaScan computes, token by token
// in float64 (DeltaScan's doc), the arguments as DeltaScan.Run's, rounding
// the state with round (on a float32 copy) after each token when round is
// not nil: the reference DeltaScan is tested against.
func DeltaRuleRef(D int, out []float32, ldo int, q, k []float32, ldq int, v []float32, ldv int, g, beta []float32, ldg int, n int, state []float32, round func([]float32)) {
	st := make([]float64, D*D)
	for i, x := range state[:D*D] {
		st[i] = float64(x)
	}
	d := make([]float64, D)
	tmp := make([]float32, D*D)
	sc := 1 / math.Sqrt(float64(D))
	for t := range n {
		kr, qr, vr := k[t*ldq:t*ldq+D], q[t*ldq:t*ldq+D], v[t*ldv:t*ldv+D]
		decay, b := math.Exp(float64(g[t*ldg])), float64(beta[t*ldg])
		for i := range st {
			st[i] *= decay
		}
		for j := range D {
			var sk float64
			for i := range D {
				sk += float64(st[i*D+j] * float64(kr[i]))
			}
			d[j] = b * (float64(vr[j]) - sk)
		}
		for i := range D {
			for j := range D {
				st[i*D+j] += float64(float64(kr[i]) * d[j])
			}
		}
		for j := range D {
			var o float64
			for i := range D {
				o += float64(st[i*D+j] * float64(qr[i]))
			}
			out[t*ldo+j] = float32(o * sc)
		}
		if round != nil {
			for i, x := range st {
				tmp[i] = float32(x)
			}
			round(tmp)
			for i, x := range tmp {
				st[i] = float64(x)
			}
		}
	}
	for i, x := range st {
		state[i] = float32(x)
	}
}
