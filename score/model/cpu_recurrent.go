package model

import (
	"fmt"
	"math"
	"sync"

	"ppl.dev/quant"
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// The CPU's ml.Recurrent: the operations of Gated DeltaNet layers. The
// convolution, the gated norm and the delta rule run nn's float32 kernels
// (nn.ConvSiLU, nn.GatedRMSNorm, nn.DeltaScan: vector SiLU and Gemm tiles,
// float64 where a sum is short or a system is solved), each tested
// against its float64 reference (nn.ConvSiLURef, nn.GatedRMSNormRef,
// nn.DeltaRuleRef, and deltaNet's float64 forms below); the delta rule
// runs per value head (heads in parallel), nn.DeltaChunk tokens at a time,
// its state rounded to the chosen dtype after each chunk. The other
// operations are float64 rounded to float32 once. In the int8 modes
// (nn.Context.LlamaCPP) every one of them is llama.cpp's float32 sequence
// instead (nn's ggml_deltanet.go: the L2 norms as RMS_NORM and SCALE, the
// gates with glibc's expf and logf, the delta rule token by token as
// GATED_DELTA_NET), bit for bit.

var _ ml.Recurrent = (*cpuBackend)(nil)

// chunkLen is the delta rule's chunk: tokens whose state updates are
// folded into matrix products (deltaHead.chunk).
const chunkLen = nn.DeltaChunk

func (b *cpuBackend) GatherCols(dst, x ml.Tensor, cols []int) {
	d, s := ct(dst), ct(x)
	shape("gather output", d, s.rows, len(cols))
	for _, c := range cols {
		if c < 0 || c >= s.cols {
			panic(fmt.Sprintf("cpu backend: gather of column %d from %d×%d", c, s.rows, s.cols))
		}
	}
	b.c.Parallel(s.rows, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			src, out := s.d[r*s.cols:(r+1)*s.cols], d.d[r*d.cols:(r+1)*d.cols]
			for j, c := range cols {
				out[j] = src[c]
			}
		}
	})
}

func (b *cpuBackend) ConvSiLU(dst, x, hist ml.Tensor, w, bias *ml.Vector) {
	var bv []float32
	if bias != nil {
		if len(bias.V) != x.Cols() {
			panic(fmt.Sprintf("cpu backend: %s has %d values for %d channels", bias.Name, len(bias.V), x.Cols()))
		}
		bv = bias.V
	}
	d, s, hs, n, C, K := convOperands(dst, x, hist, w)
	nn.ConvSiLU(b.c, d, s, hs, w.V, bv, n, C, K)
}

func (b *cpuBackend) Conv(dst, x, hist ml.Tensor, w *ml.Vector) {
	d, s, hs, n, C, K := convOperands(dst, x, hist, w)
	nn.Conv(b.c, d, s, hs, w.V, n, C, K)
}

// convOperands checks a convolution's operands (K - 1 history rows, w of
// C × K taps) and returns their values, the rows n, the channels C and the
// kernel K.
func convOperands(dst, x, hist ml.Tensor, w *ml.Vector) (d, s, hs []float32, n, C, K int) {
	dt, st, ht := ct(dst), ct(x), ct(hist)
	C, n, K = st.cols, st.rows, ht.rows+1
	shape("conv output", dt, n, C)
	shape("conv history", ht, K-1, C)
	if len(w.V) != C*K {
		panic(fmt.Sprintf("cpu backend: %s has %d values for %d channels × kernel %d", w.Name, len(w.V), C, K))
	}
	return dt.d, st.d, ht.d, n, C, K
}

func (b *cpuBackend) Mul(dst, x, y ml.Tensor) {
	d, s, t := ct(dst), ct(x), ct(y)
	shape("mul operand", t, s.rows, s.cols)
	shape("mul output", d, s.rows, s.cols)
	b.parallelValues(s, func(v []float32, lo, hi int) {
		o, w := d.d[lo:hi], t.d[lo:hi]
		for i, x := range v {
			o[i] = x * w[i]
		}
	})
}

// SSMScan runs the selective scan per head with nn.SSMScan (float32), or
// in the int8 modes nn.SSMScanGGML (ggml-cpu's roundings), heads in
// parallel.
func (b *cpuBackend) SSMScan(dst, x, dt, bm, cm, state ml.Tensor, s *ml.SSM) {
	if b.c.LlamaCPP {
		avx2 := b.c.GGMLAVX2
		b.ssmScan(dst, x, dt, bm, cm, state, s, func(h *nn.SSMHead, round func([]float32)) { nn.SSMScanGGML(h, avx2, round) })
		return
	}
	b.ssmScan(dst, x, dt, bm, cm, state, s, nn.SSMScan)
}

// ssmScan runs scan (nn.SSMScan, or nn.SSMScanRef for the reference) on
// every head.
func (b *cpuBackend) ssmScan(dst, x, dt, bm, cm, state ml.Tensor, s *ml.SSM, scan func(*nn.SSMHead, func([]float32))) {
	if err := s.Shapes(dst, x, dt, bm, cm, state); err != nil {
		panic("cpu backend: " + err.Error())
	}
	if err := s.Validate(); err != nil {
		panic("cpu backend: " + err.Error())
	}
	o, xx, dd, bb, cc, ss := ct(dst), ct(x), ct(dt), ct(bm), ct(cm), ct(state)
	n, H, P, N, G := xx.rows, s.Heads, s.HeadDim, s.State, s.Groups
	if n == 0 {
		return
	}
	round := stateRounder32(s.StateDtype)
	b.c.Parallel(H, func(_, lo, hi int) {
		for h := lo; h < hi; h++ {
			g := s.Group(h)
			hd := &nn.SSMHead{Out: o.d[h*P:], X: xx.d[h*P:], Dt: dd.d[h:], B: bb.d[g*N:], C: cc.d[g*N:],
				XS: H * P, DS: H, BS: G * N, N: N, P: P, T: n,
				D: s.D.V[h], DtBias: s.DtBias.V[h], S: ss.d[h*P*N : (h+1)*P*N]}
			if s.StateDecays {
				hd.AS = s.A.V[h*N : (h+1)*N]
			} else {
				hd.A = s.A.V[h]
			}
			scan(hd, round)
		}
	})
}

func (b *cpuBackend) GatedGroupNorm(dst, x, z ml.Tensor, w *ml.Vector, group int, eps float64) {
	d, s, g := ct(dst), ct(x), ct(z)
	shape("group norm z", g, s.rows, s.cols)
	shape("group norm output", d, s.rows, s.cols)
	var wv []float32
	if w != nil {
		if len(w.V) != s.cols || group <= 0 || s.cols%group != 0 {
			panic(fmt.Sprintf("cpu backend: group norm %s of %d in groups of %d over rows of %d", w.Name, len(w.V), group, s.cols))
		}
		wv = w.V
	}
	nn.GatedGroupNorm(b.c, d.d[:s.rows*s.cols], s.d[:s.rows*s.cols], g.d[:s.rows*s.cols], wv, s.rows, group, eps)
}

func (b *cpuBackend) Zero(x ml.Tensor) { clear(ct(x).d) }

func (b *cpuBackend) L2Norm(dst, x ml.Tensor, eps float64) {
	d, s := ct(dst), ct(x)
	shape("l2 norm output", d, s.rows, s.cols)
	if b.c.LlamaCPP {
		n := s.rows * s.cols
		nn.GGMLL2Norm(b.c, d.d[:n], s.d[:n], s.rows, s.cols, eps)
		return
	}
	b.c.Parallel(s.rows, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			src, out := s.d[r*s.cols:(r+1)*s.cols], d.d[r*s.cols:(r+1)*s.cols]
			var ss float64
			for _, v := range src {
				ss += float64(float64(v) * float64(v))
			}
			inv := 1 / math.Max(math.Sqrt(ss), eps)
			for i, v := range src {
				out[i] = float32(float64(v) * inv)
			}
		}
	})
}

func (b *cpuBackend) DeltaGates(beta, alpha ml.Tensor, a, dtBias *ml.Vector) {
	be, al := ct(beta), ct(alpha)
	H, C := len(a.V), len(dtBias.V)
	shape("delta beta", be, be.rows, H)
	shape("delta alpha", al, be.rows, C)
	if C%H != 0 {
		panic(fmt.Sprintf("cpu backend: %s has %d values for %d heads", dtBias.Name, C, H))
	}
	b.parallelRows(be.rows, C, 1, func(lo, hi int) {
		if b.c.LlamaCPP {
			nn.GGMLDeltaGates(be.d[lo*H:hi*H], al.d[lo*C:hi*C], a.V, dtBias.V)
			return
		}
		for i := lo * H; i < hi*H; i++ {
			be.d[i] = float32(1 / (1 + math.Exp(-float64(be.d[i]))))
		}
		for i := lo * C; i < hi*C; i++ {
			c := i % C
			al.d[i] = float32(float64(a.V[c/(C/H)]) * nn.Softplus(float64(al.d[i])+float64(dtBias.V[c])))
		}
	})
}

func (b *cpuBackend) GatedRMSNorm(dst, x, z ml.Tensor, w *ml.Vector, eps float64) {
	d, s, g := ct(dst), ct(x), ct(z)
	shape("gated norm z", g, s.rows, s.cols)
	shape("gated norm output", d, s.rows, s.cols)
	D := len(w.V)
	if s.cols%D != 0 {
		panic(fmt.Sprintf("cpu backend: gated norm %s of %d over rows of %d", w.Name, D, s.cols))
	}
	nn.GatedRMSNorm(b.c, d.d, s.d, g.d, w.V, s.rows*s.cols/D, eps)
}

// DeltaNet runs the delta rule per value head with nn.DeltaScan (float32
// matrix products over chunks of nn.DeltaChunk tokens), or in the int8
// modes nn.DeltaRuleGGML (ggml-cpu's token by token), heads in parallel,
// rounding the state to dr.State after each chunk (each call, in the int8
// modes). Gates per key channel (dr.KeyGates) take ggml's float32
// recurrence token by token (nn.DeltaRuleGGMLKeyGates: 3 times the float64
// recurrence's speed, within 2e-7 of it), chunkLen tokens a call outside
// the int8 modes so that a narrow state rounds as the chunked form's.
func (b *cpuBackend) DeltaNet(dst, q, k, v, g, beta, state ml.Tensor, dr *ml.DeltaRule) {
	o, qq, kk, vv, gg, bb, ss := ct(dst), ct(q), ct(k), ct(v), ct(g), ct(beta), ct(state)
	n, D, Hk, Hv := qq.rows, dr.Dim, dr.KHeads, dr.VHeads
	if err := dr.Shapes(dst, q, k, v, g, beta, state); err != nil {
		panic("cpu backend: " + err.Error())
	}
	round := stateRounder32(dr.State)
	if n == 0 {
		return
	}
	if b.c.LlamaCPP || dr.KeyGates {
		// ggml's recurrence: one call in the int8 modes (llama.cpp rounds
		// the state after its batch), else chunkLen tokens a call.
		step, G := n, dr.GateCols()
		if !b.c.LlamaCPP {
			step = chunkLen
		}
		b.c.Parallel(Hv, func(_, lo, hi int) {
			m := make([]float32, D*D)
			for h := lo; h < hi; h++ {
				kh, st := dr.KHead(h), ss.d[h*D*D:(h+1)*D*D]
				for t0 := 0; t0 < n; t0 += step {
					T := min(step, n-t0)
					out, qr, kr, vr := o.d[t0*Hv*D+h*D:], qq.d[t0*Hk*D+kh*D:], kk.d[t0*Hk*D+kh*D:], vv.d[t0*Hv*D+h*D:]
					if dr.KeyGates {
						nn.DeltaRuleGGMLKeyGates(D, out, Hv*D, qr, kr, Hk*D, vr, Hv*D, gg.d[t0*G+h*D:], G, bb.d[t0*Hv+h:], Hv, T, st, b.c.GGMLAVX2, m, round)
					} else {
						nn.DeltaRuleGGML(D, out, Hv*D, qr, kr, Hk*D, vr, Hv*D, gg.d[t0*G+h:], bb.d[t0*Hv+h:], Hv, T, st, b.c.GGMLAVX2, m, round)
					}
				}
			}
		})
		return
	}
	b.c.Parallel(Hv, func(_, lo, hi int) {
		sc := getDeltaScan(D)
		defer deltaScans.Put(sc)
		for h := lo; h < hi; h++ {
			kh := dr.KHead(h)
			sc.Run(o.d[h*D:], Hv*D, qq.d[kh*D:], kk.d[kh*D:], Hk*D, vv.d[h*D:], Hv*D,
				gg.d[h:], bb.d[h:], Hv, n, ss.d[h*D*D:(h+1)*D*D], round)
		}
	})
}

// deltaScans holds nn.DeltaScan scratch between calls.
var deltaScans sync.Pool

func getDeltaScan(D int) *nn.DeltaScan {
	if sc, ok := deltaScans.Get().(*nn.DeltaScan); ok && sc.D == D {
		return sc
	}
	return nn.NewDeltaScan(D)
}

// stateRounder32 rounds a float32 state to the dtype in place (nil for
// f32).
func stateRounder32(dtype string) func([]float32) {
	var f func(float32) float32
	switch dtype {
	case "", "f32":
		return nil
	case "f16":
		f = func(v float32) float32 { return quant.F16ToF32(quant.F32ToF16(v)) }
	case "bf16":
		f = func(v float32) float32 { return quant.BF16ToF32(quant.F32ToBF16(v)) }
	default:
		panic(fmt.Sprintf("cpu backend: recurrent state dtype %q", dtype))
	}
	return func(s []float32) {
		for i, v := range s {
			s[i] = f(v)
		}
	}
}

// deltaNet is the float64 reference of DeltaNet: in chunks of chunkLen
// (deltaHead.chunk), rounding the state after each chunk, or, when
// !chunked, as the plain recurrence (deltaHead.step), rounding the state
// after each chunk of chunkLen tokens all the same (as the GPU's delta_net
// and the --ssm-state-dtype doc). The state is float64 within a call and
// float32 in the state tensor between calls. Gates per value head only.
func (b *cpuBackend) deltaNet(dst, q, k, v, g, beta, state ml.Tensor, dr *ml.DeltaRule, chunked bool) {
	o, qq, kk, vv, gg, bb, ss := ct(dst), ct(q), ct(k), ct(v), ct(g), ct(beta), ct(state)
	n, D, Hk, Hv := qq.rows, dr.Dim, dr.KHeads, dr.VHeads
	if err := dr.Shapes(dst, q, k, v, g, beta, state); err != nil {
		panic("cpu backend: " + err.Error())
	}
	round := stateRounder(dr.State)
	b.c.Parallel(Hv, func(_, lo, hi int) {
		for h := lo; h < hi; h++ {
			kh := dr.KHead(h)
			st := make([]float64, D*D)
			sh := ss.d[h*D*D : (h+1)*D*D]
			for i, x := range sh {
				st[i] = float64(x)
			}
			var hd deltaHead
			hd.init(min(chunkLen, n), D)
			for t0 := 0; t0 < n; t0 += chunkLen {
				T := min(chunkLen, n-t0)
				for t := range T {
					r := t0 + t
					for i := range D {
						hd.q[t*D+i] = float64(qq.d[r*Hk*D+kh*D+i])
						hd.k[t*D+i] = float64(kk.d[r*Hk*D+kh*D+i])
						hd.v[t*D+i] = float64(vv.d[r*Hv*D+h*D+i])
					}
					hd.g[t], hd.beta[t] = float64(gg.d[r*Hv+h]), float64(bb.d[r*Hv+h])
				}
				if chunked {
					hd.chunk(st, T)
				} else {
					for t := range T {
						hd.step(st, t)
					}
				}
				round(st)
				for t := range T {
					r := t0 + t
					for i := range D {
						o.d[r*Hv*D+h*D+i] = float32(hd.out[t*D+i] / math.Sqrt(float64(D)))
					}
				}
			}
			for i, x := range st {
				sh[i] = float32(x)
			}
		}
	})
}

// stateRounder rounds a state to the dtype (ml.DeltaRule.State).
func stateRounder(dtype string) func([]float64) {
	var f func(float32) float32
	switch dtype {
	case "", "f32":
		f = func(v float32) float32 { return v }
	case "f16":
		f = func(v float32) float32 { return quant.F16ToF32(quant.F32ToF16(v)) }
	case "bf16":
		f = func(v float32) float32 { return quant.BF16ToF32(quant.F32ToBF16(v)) }
	default:
		panic(fmt.Sprintf("cpu backend: recurrent state dtype %q", dtype))
	}
	return func(s []float64) {
		for i, v := range s {
			s[i] = float64(f(float32(v)))
		}
	}
}

// deltaHead holds one value head's chunk of inputs (T ≤ cap rows of Dim)
// and the chunk's scratch.
type deltaHead struct {
	D            int
	q, k, v, out []float64 // T × D
	g, beta, G   []float64 // T; G the cumulative log-decay
	kS, qS, u    []float64 // T × D
	kk, qk       []float64 // T × T
}

func (h *deltaHead) init(T, D int) {
	h.D = D
	f := func(n int) []float64 { return make([]float64, n) }
	h.q, h.k, h.v, h.out, h.kS, h.qS, h.u = f(T*D), f(T*D), f(T*D), f(T*D), f(T*D), f(T*D), f(T*D)
	h.g, h.beta, h.G = f(T), f(T), f(T)
	h.kk, h.qk = f(T*T), f(T*T)
}

// step is the plain recurrence for token t of the chunk (ml.DeltaRule's
// doc), on the state st (st[i·D + j]: key dim i, value dim j).
func (h *deltaHead) step(st []float64, t int) {
	D := h.D
	k, q, v, out := h.k[t*D:(t+1)*D], h.q[t*D:(t+1)*D], h.v[t*D:(t+1)*D], h.out[t*D:(t+1)*D]
	decay := math.Exp(h.g[t])
	for i := range st {
		st[i] *= decay
	}
	d := h.u[t*D : (t+1)*D] // scratch: beta·(v - Sᵀk)
	copy(d, v)
	for i := range D {
		row := st[i*D : (i+1)*D]
		for j, s := range row {
			d[j] -= float64(s * k[i])
		}
	}
	for j := range d {
		d[j] *= h.beta[t]
	}
	for j := range out {
		out[j] = 0
	}
	for i := range D {
		row := st[i*D : (i+1)*D]
		for j := range row {
			row[j] += float64(k[i] * d[j])
		}
		for j, s := range row {
			out[j] += float64(s * q[i])
		}
	}
}

// chunk runs T tokens through the delta rule as matrix products, from the
// state st, and leaves the state after the last token in st. With Γ_t =
// exp(G_t), G_t = Σ_{s≤t} g_s over the chunk, and S0 the state before it,
// the decayed state token t updates is Γ_t S0 + Σ_{s<t} (Γ_t/Γ_s) k_s u_sᵀ,
// so the corrections u_t = beta_t (v_t - Sᵀk_t) solve the lower-triangular
// system
//
//	u_t = beta_t (v_t - Γ_t S0ᵀk_t - Σ_{s<t} e^{G_t-G_s} (k_t·k_s) u_s),
//
// and then o_t = Γ_t S0ᵀq_t + Σ_{s≤t} e^{G_t-G_s} (q_t·k_s) u_s and the
// new state is Γ_{T-1} S0 + Σ_s e^{G_{T-1}-G_s} k_s u_sᵀ. Every exponent is
// a difference G_t - G_s ≤ 0 (g ≤ 0), so nothing overflows however close
// to 0 the decays come.
func (h *deltaHead) chunk(st []float64, T int) {
	D := h.D
	var G float64
	for t := range T {
		G += h.g[t]
		h.G[t] = G
	}
	// kS = K S0, qS = Q S0 (T × D).
	for t := range T {
		kt, qt := h.k[t*D:(t+1)*D], h.q[t*D:(t+1)*D]
		ks, qs := h.kS[t*D:(t+1)*D], h.qS[t*D:(t+1)*D]
		for j := range D {
			ks[j], qs[j] = 0, 0
		}
		for i := range D {
			axpy2(kt[i], qt[i], st[i*D:(i+1)*D], ks, qs)
		}
	}
	// kk[t,s] = e^{G_t-G_s} k_t·k_s (s < t), qk[t,s] = e^{G_t-G_s} q_t·k_s (s ≤ t).
	for t := range T {
		kt, qt := h.k[t*D:(t+1)*D], h.q[t*D:(t+1)*D]
		for s := 0; s <= t; s++ {
			a, c := dot2(h.k[s*D:(s+1)*D], kt, qt)
			e := math.Exp(h.G[t] - h.G[s])
			h.kk[t*T+s], h.qk[t*T+s] = a*e, c*e
		}
	}
	// Forward substitution for u, then the outputs.
	for t := range T {
		u := h.u[t*D : (t+1)*D]
		gt := math.Exp(h.G[t])
		vt, ks := h.v[t*D:(t+1)*D], h.kS[t*D:(t+1)*D]
		for j := range u {
			u[j] = vt[j] - float64(gt*ks[j])
		}
		for s := range t {
			axpy(-h.kk[t*T+s], h.u[s*D:(s+1)*D], u)
		}
		for j := range u {
			u[j] *= h.beta[t]
		}
		out, qs := h.out[t*D:(t+1)*D], h.qS[t*D:(t+1)*D]
		for j := range out {
			out[j] = gt * qs[j]
		}
		for s := 0; s <= t; s++ {
			axpy(h.qk[t*T+s], h.u[s*D:(s+1)*D], out)
		}
	}
	// New state.
	last := h.G[T-1]
	gl := math.Exp(last)
	for i := range st {
		st[i] *= gl
	}
	for s := range T {
		e := math.Exp(last - h.G[s])
		ks, us := h.k[s*D:(s+1)*D], h.u[s*D:(s+1)*D]
		for i := range D {
			axpy(e*ks[i], us, st[i*D:(i+1)*D])
		}
	}
}

// axpy computes y += a·x.
func axpy(a float64, x, y []float64) {
	y = y[:len(x)]
	i := 0
	for ; i+4 <= len(x); i += 4 {
		x4, y4 := x[i:i+4:i+4], y[i:i+4:i+4]
		y4[0] += float64(a * x4[0])
		y4[1] += float64(a * x4[1])
		y4[2] += float64(a * x4[2])
		y4[3] += float64(a * x4[3])
	}
	for ; i < len(x); i++ {
		y[i] += float64(a * x[i])
	}
}

// axpy2 computes y1 += a·x and y2 += c·x.
func axpy2(a, c float64, x, y1, y2 []float64) {
	y1, y2 = y1[:len(x)], y2[:len(x)]
	i := 0
	for ; i+4 <= len(x); i += 4 {
		x4, p, q := x[i:i+4:i+4], y1[i:i+4:i+4], y2[i:i+4:i+4]
		p[0] += float64(a * x4[0])
		p[1] += float64(a * x4[1])
		p[2] += float64(a * x4[2])
		p[3] += float64(a * x4[3])
		q[0] += float64(c * x4[0])
		q[1] += float64(c * x4[1])
		q[2] += float64(c * x4[2])
		q[3] += float64(c * x4[3])
	}
	for ; i < len(x); i++ {
		y1[i] += float64(a * x[i])
		y2[i] += float64(c * x[i])
	}
}

// dot2 returns x·y1 and x·y2, each summed in order.
func dot2(x, y1, y2 []float64) (a, c float64) {
	y1, y2 = y1[:len(x)], y2[:len(x)]
	for i, v := range x {
		a += float64(y1[i] * v)
		c += float64(y2[i] * v)
	}
	return a, c
}
