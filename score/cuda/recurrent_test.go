package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"ppl.dev/quant"
	"ppl.dev/score/ml"
)

// The recurrent operations (recurrent.go, kernels/recurrent.cu) against
// their plain definitions (ml.Recurrent's doc) computed here in float64.
// Every one but the delta rule rounds once to float32 from float64, as the
// CPU backend: they agree to an ulp (float64 sums in another order). The
// delta rule is float32 on the GPU, checked against the float64 recurrence
// relative to the output's scale.
func TestRecurrentOpsParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		b := testBackend(e)
		defer b.Close()
		rng := rand.New(rand.NewPCG(41, 1))
		check := func(what string, got []float32, want []float64) {
			t.Helper()
			var c bitCompare
			for i := range want {
				c.add(got[i], float32(want[i]), i)
			}
			c.check(t, what, 1, 0.01)
		}
		silu := func(x float64) float64 { return x / (1 + math.Exp(-x)) }

		// GatherCols: a permutation with repeats.
		const rows, xcols = 7, 40
		x := randF32(rng, rows*xcols, 2)
		cols := []int{39, 0, 5, 5, 17, 38, 1}
		xt := b.put(t, rows, xcols, x)
		gt := b.Alloc(rows, len(cols))
		b.GatherCols(gt, xt, cols)
		b.GatherCols(gt, xt, cols) // the table's second use: the cached upload
		var want []float64
		for r := range rows {
			for _, c := range cols {
				want = append(want, float64(x[r*xcols+c]))
			}
		}
		check("gather_cols (exact)", b.Read(gt), want)

		// ConvSiLU over three parts of a window (the history carried), one
		// shorter than the kernel.
		const C, K = 24, 4
		w := &ml.Vector{Name: "conv", V: randF32(rng, C*K, 0.7)}
		if err := b.PrepareVector(w); err != nil {
			t.Fatal(err)
		}
		hist := b.Alloc(K-1, C)
		b.Zero(hist)
		all := randF32(rng, 20*C, 1.5)
		var wantConv []float64
		for tt := range 20 {
			for c := range C {
				var acc float64
				for j := range K {
					if s := tt - K + 1 + j; s >= 0 {
						acc += float64(w.V[c*K+j]) * float64(all[s*C+c])
					}
				}
				wantConv = append(wantConv, silu(acc))
			}
		}
		var gotConv []float32
		for _, part := range [][2]int{{0, 9}, {9, 11}, {11, 20}} {
			n := part[1] - part[0]
			xp := b.put(t, n, C, all[part[0]*C:part[1]*C])
			out := b.Alloc(n, C)
			b.ConvSiLU(out, xp, hist, w)
			gotConv = append(gotConv, b.Read(out)...)
		}
		check("conv_silu and conv_hist over 3 parts", gotConv, wantConv)
		wantHist := make([]float64, (K-1)*C)
		for i := range wantHist {
			wantHist[i] = float64(all[(20-K+1)*C+i])
		}
		check("conv history", b.Read(hist), wantHist)

		// L2Norm in place, with a zero row (eps is a floor on the norm).
		const hr, hd = 9, 16
		v := randF32(rng, hr*hd, 3)
		for i := range hd {
			v[i] = 0
		}
		v[hd] = 1e-8
		vt := b.put(t, hr, hd, v)
		b.L2Norm(vt, vt, 1e-6)
		want = want[:0]
		for r := range hr {
			var ss float64
			for _, x := range v[r*hd : (r+1)*hd] {
				ss += float64(x) * float64(x)
			}
			for _, x := range v[r*hd : (r+1)*hd] {
				want = append(want, float64(x)/math.Max(math.Sqrt(ss), 1e-6))
			}
		}
		check("l2norm_f32", b.Read(vt), want)

		// DeltaGates with alpha + bias beyond softplus's cut at 20.
		const gr, H = 5, 6
		be, al := randF32(rng, gr*H, 4), randF32(rng, gr*H, 8)
		al[0], al[1], be[2] = 30, -40, -200
		av, dt := &ml.Vector{Name: "a", V: randF32(rng, H, 1)}, &ml.Vector{Name: "dt", V: randF32(rng, H, 1)}
		for i := range av.V {
			av.V[i] = -float32(math.Abs(float64(av.V[i])))
		}
		for _, x := range []*ml.Vector{av, dt} {
			if err := b.PrepareVector(x); err != nil {
				t.Fatal(err)
			}
		}
		bt, at := b.put(t, gr, H, be), b.put(t, gr, H, al)
		b.DeltaGates(bt, at, av, dt)
		wb, wa := make([]float64, gr*H), make([]float64, gr*H)
		for i := range wb {
			h := i % H
			wb[i] = 1 / (1 + math.Exp(-float64(be[i])))
			s := float64(al[i]) + float64(dt.V[h])
			if s <= 20 {
				s = math.Log1p(math.Exp(s))
			}
			wa[i] = float64(av.V[h]) * s
		}
		check("delta_gates beta", b.Read(bt), wb)
		check("delta_gates alpha", b.Read(at), wa)

		// GatedRMSNorm over heads of 16 in rows of 3 heads.
		nw := &ml.Vector{Name: "ssm_norm", V: randF32(rng, hd, 1)}
		if err := b.PrepareVector(nw); err != nil {
			t.Fatal(err)
		}
		xo, zo := randF32(rng, 4*3*hd, 2), randF32(rng, 4*3*hd, 3)
		xt2, zt := b.put(t, 4, 3*hd, xo), b.put(t, 4, 3*hd, zo)
		b.GatedRMSNorm(xt2, xt2, zt, nw, 1e-6)
		want = want[:0]
		for r := range 4 * 3 {
			var ss float64
			for _, x := range xo[r*hd : (r+1)*hd] {
				ss += float64(x) * float64(x)
			}
			s := 1 / math.Sqrt(ss/hd+1e-6)
			for i := range hd {
				want = append(want, float64(xo[r*hd+i])*s*float64(nw.V[i])*silu(float64(zo[r*hd+i])))
			}
		}
		check("gated_rmsnorm", b.Read(xt2), want)
		if err := b.Err(); err != nil {
			t.Fatal(err)
		}
	})
}

// refDeltaNet is the plain recurrence of ml.DeltaRule in float64 from the
// state st (updated), rounding it to the dtype every 64 tokens of the call
// (the chunk at which the backends round).
func refDeltaNet(q, k, v, g, beta []float32, st []float64, n int, d *ml.DeltaRule) []float64 {
	D, Hk, Hv := d.Dim, d.KHeads, d.VHeads
	out := make([]float64, n*Hv*D)
	for h := range Hv {
		kh := d.KHead(h)
		S := st[h*D*D : (h+1)*D*D]
		u := make([]float64, D)
		for t := range n {
			kt, qt := k[t*Hk*D+kh*D:], q[t*Hk*D+kh*D:]
			dec := math.Exp(float64(g[t*Hv+h]))
			for i := range S {
				S[i] *= dec
			}
			for j := range D {
				var ks float64
				for i := range D {
					ks += S[i*D+j] * float64(kt[i])
				}
				u[j] = float64(beta[t*Hv+h]) * (float64(v[t*Hv*D+h*D+j]) - ks)
			}
			for i := range D {
				for j := range D {
					S[i*D+j] += float64(kt[i]) * u[j]
				}
			}
			for j := range D {
				var o float64
				for i := range D {
					o += S[i*D+j] * float64(qt[i])
				}
				out[t*Hv*D+h*D+j] = o
			}
			if d.State != "" && d.State != "f32" && ((t+1)%64 == 0 || t == n-1) {
				for i := range S {
					S[i] = float64(simRoundState(float32(S[i]), stateDtypes[d.State]))
				}
			}
		}
	}
	return out
}

// simRoundState rounds x to delta_net's state dtype code sdt (0 f32, 1
// f16, 2 bf16).
func simRoundState(x float32, sdt int) float32 {
	switch sdt {
	case 1:
		return quant.F16ToF32(quant.F32ToF16(x))
	case 2:
		return quant.BF16ToF32(quant.F32ToBF16(x))
	}
	return x
}

// TestDeltaNetParity: delta_net against the float64 recurrence, for
// head sizes 16 (the oracle models), 48 (a partial column group) and 128
// (Qwen3.5's), tiled and grouped V heads, windows across the 64-token
// rounding chunk in two calls (the state carried), unit-norm keys as the
// models feed it, decays from e^-12 to 1 and beta from 0 to 1; and an f16
// and a bf16 state.
func TestDeltaNetParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		b := testBackend(e)
		defer b.Close()
		for _, c := range []struct {
			d         ml.DeltaRule
			n1, n2    int
			tolerance float64
		}{
			// float32 state and sums: 0.9e-7 to 1.5e-7 on the emulation.
			{ml.DeltaRule{KHeads: 2, VHeads: 4, Dim: 16, Tiled: true}, 70, 90, 1e-6},
			{ml.DeltaRule{KHeads: 1, VHeads: 3, Dim: 48}, 40, 30, 1e-6},
			{ml.DeltaRule{KHeads: 2, VHeads: 4, Dim: 128, Tiled: true}, 65, 20, 1e-6},
			// A rounded state: the float32 and float64 states round to
			// neighbouring codes now and then (one step: 2^-11, 2^-8
			// relative), and the step carries on.
			{ml.DeltaRule{KHeads: 2, VHeads: 2, Dim: 16, State: "f16"}, 100, 50, 2e-3},
			{ml.DeltaRule{KHeads: 2, VHeads: 2, Dim: 32, State: "bf16"}, 130, 10, 1e-2},
		} {
			d := c.d
			t.Run(fmt.Sprintf("d%d_hk%d_hv%d_%s", d.Dim, d.KHeads, d.VHeads, d.State), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(d.Dim), uint64(d.VHeads)))
				n := c.n1 + c.n2
				D, Hk, Hv := d.Dim, d.KHeads, d.VHeads
				q, k, v, g, beta := deltaInputs(rng, n, d)
				st := make([]float64, Hv*D*D)
				want := refDeltaNet(q[:c.n1*Hk*D], k[:c.n1*Hk*D], v[:c.n1*Hv*D], g[:c.n1*Hv], beta[:c.n1*Hv], st, c.n1, &d)
				want = append(want, refDeltaNet(q[c.n1*Hk*D:], k[c.n1*Hk*D:], v[c.n1*Hv*D:], g[c.n1*Hv:], beta[c.n1*Hv:], st, c.n2, &d)...)

				state := b.Alloc(Hv*D, D)
				b.Zero(state)
				var got []float32
				for _, part := range [][2]int{{0, c.n1}, {c.n1, n}} {
					m := part[1] - part[0]
					qt := b.put(t, m, Hk*D, q[part[0]*Hk*D:part[1]*Hk*D])
					kt := b.put(t, m, Hk*D, k[part[0]*Hk*D:part[1]*Hk*D])
					vt := b.put(t, m, Hv*D, v[part[0]*Hv*D:part[1]*Hv*D])
					gt := b.put(t, m, Hv, g[part[0]*Hv:part[1]*Hv])
					bt := b.put(t, m, Hv, beta[part[0]*Hv:part[1]*Hv])
					o := b.Alloc(m, Hv*D)
					b.DeltaNet(o, qt, kt, vt, gt, bt, state, &d)
					got = append(got, b.Read(o)...)
				}
				gotState := b.Read(state)
				if err := b.Err(); err != nil {
					t.Fatal(err)
				}
				cmp := func(what string, got []float32, want []float64) {
					var scale, worst float64
					at := 0
					for _, w := range want {
						scale = max(scale, math.Abs(w))
					}
					for i := range want {
						dd := math.Abs(float64(got[i])-want[i]) / scale
						if dd != dd {
							dd = math.Inf(1)
						}
						if dd > worst {
							worst, at = dd, i
						}
					}
					t.Logf("%s: max |Δ| / max |want| %.2e (element %d: %v vs %v)", what, worst, at, got[at], want[at])
					// float32 state and sums against float64: a few ulps a step.
					if worst > c.tolerance {
						t.Errorf("%s: element %d is %v, want %v (%.2e of the scale %.3g; allowed %g)", what, at, got[at], want[at], worst, scale, c.tolerance)
					}
				}
				cmp("output", got, want)
				cmp("state", gotState, st)
			})
		}
	})
}

// deltaInputs are n tokens of a delta rule's inputs: unit queries (scaled
// by 1/sqrt(dim)) and keys, values, log-decays g near 0 (decay near 0),
// near 0 from below (decay near 1) and between, and betas in [0, 1), every
// seventh 1.
func deltaInputs(rng *rand.Rand, n int, d ml.DeltaRule) (q, k, v, g, beta []float32) {
	D, Hk, Hv := d.Dim, d.KHeads, d.VHeads
	q, k = unitRows(rng, n*Hk, D), unitRows(rng, n*Hk, D)
	for i := range q {
		q[i] /= float32(math.Sqrt(float64(D)))
	}
	v = randF32(rng, n*Hv*D, 1)
	g, beta = make([]float32, n*Hv), make([]float32, n*Hv)
	for i := range g {
		switch i % 5 {
		case 0:
			g[i] = -12 * float32(rng.Float64()) // decay near 0
		case 1:
			g[i] = -1e-4 * float32(rng.Float64()) // near 1
		default:
			g[i] = -float32(rng.Float64())
		}
		beta[i] = float32(rng.Float64())
		if i%7 == 0 {
			beta[i] = 1
		}
	}
	return q, k, v, g, beta
}

// unitRows returns rows random rows of d values, each scaled to unit
// length (the delta rule's keys and queries after their L2 norm).
func unitRows(rng *rand.Rand, rows, d int) []float32 {
	x := randF32(rng, rows*d, 1)
	for r := range rows {
		var ss float64
		for _, v := range x[r*d : (r+1)*d] {
			ss += float64(v) * float64(v)
		}
		for i := range d {
			x[r*d+i] = float32(float64(x[r*d+i]) / math.Sqrt(ss))
		}
	}
	return x
}
