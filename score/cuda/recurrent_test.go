package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"ppl.dev/quant"
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
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
		// shorter than the kernel; without a bias (Gated DeltaNet) and with
		// one (Mamba-2: added to the sum rounded to float32, in float32).
		const C, K = 24, 4
		w := &ml.Vector{Name: "conv", V: randF32(rng, C*K, 0.7)}
		cb := &ml.Vector{Name: "conv bias", V: randF32(rng, C, 1)}
		for _, v := range []*ml.Vector{w, cb} {
			if err := b.PrepareVector(v); err != nil {
				t.Fatal(err)
			}
		}
		for _, bias := range []*ml.Vector{nil, cb} {
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
					if bias != nil {
						acc = float64(float32(acc) + bias.V[c])
					}
					wantConv = append(wantConv, silu(acc))
				}
			}
			var gotConv []float32
			for _, part := range [][2]int{{0, 9}, {9, 11}, {11, 20}} {
				n := part[1] - part[0]
				xp := b.put(t, n, C, all[part[0]*C:part[1]*C])
				out := b.Alloc(n, C)
				b.ConvSiLU(out, xp, hist, w, bias)
				gotConv = append(gotConv, b.Read(out)...)
			}
			what := fmt.Sprintf("conv_silu (bias %v) and conv_hist over 3 parts", bias != nil)
			check(what, gotConv, wantConv)
			wantHist := make([]float64, (K-1)*C)
			for i := range wantHist {
				wantHist[i] = float64(all[(20-K+1)*C+i])
			}
			check("conv history", b.Read(hist), wantHist)
		}

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

		// And with a gate per key channel (Kimi's): 4 channels a head,
		// dt a bias per channel.
		const ch = 4
		al4 := randF32(rng, gr*H*ch, 8)
		al4[5] = 25
		dt4 := &ml.Vector{Name: "dt4", V: randF32(rng, H*ch, 1)}
		if err := b.PrepareVector(dt4); err != nil {
			t.Fatal(err)
		}
		bt, at = b.put(t, gr, H, be), b.put(t, gr, H*ch, al4)
		b.DeltaGates(bt, at, av, dt4)
		wa = make([]float64, gr*H*ch)
		for i := range wa {
			c := i % (H * ch)
			s := float64(al4[i]) + float64(dt4.V[c])
			if s <= 20 {
				s = math.Log1p(math.Exp(s))
			}
			wa[i] = float64(av.V[c/ch]) * s
		}
		check("delta_gates beta (gates per key channel)", b.Read(bt), wb)
		check("delta_gates alpha (gates per key channel)", b.Read(at), wa)

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
			for i := range S {
				if d.KeyGates { // row i by its key channel's gate
					S[i] *= math.Exp(float64(g[(t*Hv+h)*D+i/D]))
				} else {
					S[i] *= math.Exp(float64(g[t*Hv+h]))
				}
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
				out[t*Hv*D+h*D+j] = o / math.Sqrt(float64(D))
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
			// Gates per key channel (Kimi Delta Attention).
			{ml.DeltaRule{KHeads: 3, VHeads: 3, Dim: 32, KeyGates: true}, 40, 50, 1e-6},
			{ml.DeltaRule{KHeads: 2, VHeads: 2, Dim: 128, KeyGates: true}, 33, 20, 1e-6},
			// A rounded state: the float32 and float64 states round to
			// neighbouring codes now and then (one step: 2^-11, 2^-8
			// relative), and the step carries on.
			{ml.DeltaRule{KHeads: 2, VHeads: 2, Dim: 16, State: "f16"}, 100, 50, 2e-3},
			{ml.DeltaRule{KHeads: 2, VHeads: 2, Dim: 32, State: "bf16"}, 130, 10, 1e-2},
		} {
			d := c.d
			t.Run(fmt.Sprintf("d%d_hk%d_hv%d_%s_keygates%v", d.Dim, d.KHeads, d.VHeads, d.State, d.KeyGates), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(d.Dim), uint64(d.VHeads)))
				n := c.n1 + c.n2
				D, Hk, Hv, G := d.Dim, d.KHeads, d.VHeads, d.GateCols()
				q, k, v, g, beta := deltaInputs(rng, n, d)
				st := make([]float64, Hv*D*D)
				want := refDeltaNet(q[:c.n1*Hk*D], k[:c.n1*Hk*D], v[:c.n1*Hv*D], g[:c.n1*G], beta[:c.n1*Hv], st, c.n1, &d)
				want = append(want, refDeltaNet(q[c.n1*Hk*D:], k[c.n1*Hk*D:], v[c.n1*Hv*D:], g[c.n1*G:], beta[c.n1*Hv:], st, c.n2, &d)...)

				state := b.Alloc(Hv*D, D)
				b.Zero(state)
				var got []float32
				for _, part := range [][2]int{{0, c.n1}, {c.n1, n}} {
					m := part[1] - part[0]
					qt := b.put(t, m, Hk*D, q[part[0]*Hk*D:part[1]*Hk*D])
					kt := b.put(t, m, Hk*D, k[part[0]*Hk*D:part[1]*Hk*D])
					vt := b.put(t, m, Hv*D, v[part[0]*Hv*D:part[1]*Hv*D])
					gt := b.put(t, m, G, g[part[0]*G:part[1]*G])
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
	g, beta = make([]float32, n*d.GateCols()), make([]float32, n*Hv)
	for i := range g {
		switch i % 5 {
		case 0:
			g[i] = -12 * float32(rng.Float64()) // decay near 0
		case 1:
			g[i] = -1e-4 * float32(rng.Float64()) // near 1
		default:
			g[i] = -float32(rng.Float64())
		}
	}
	for i := range beta {
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

// refSSMScan is ml.SSM's recurrence in float64 over n tokens from the
// state st (updated; rounded to the state dtype after each token when sdt
// is not 0, as the backends). It returns the outputs and each output's
// magnitude Σ_s |S[i][s]·C[s]| + |D·x|, the scale a float32 sum's rounding
// errors are relative to.
func refSSMScan(x, dt, bm, cm []float32, st []float64, n int, s *ml.SSM) (out, mag []float64) {
	H, P, G, N := s.Heads, s.HeadDim, s.Groups, s.State
	sdt := stateDtypes[s.StateDtype]
	out, mag = make([]float64, n*H*P), make([]float64, n*H*P)
	for h := range H {
		g, S := s.Group(h), st[h*P*N:(h+1)*P*N]
		for t := range n {
			d := float64(dt[t*H+h]) + float64(s.DtBias.V[h])
			if d <= 20 {
				d = math.Log1p(math.Exp(d))
			}
			dA := 0.0
			if !s.StateDecays {
				dA = math.Exp(d * float64(s.A.V[h]))
			}
			b, c := bm[t*G*N+g*N:], cm[t*G*N+g*N:]
			for i := range P {
				xv := float64(x[t*H*P+h*P+i])
				y, m := float64(s.D.V[h])*xv, math.Abs(float64(s.D.V[h])*xv)
				for k := range N {
					if s.StateDecays {
						dA = math.Exp(d * float64(s.A.V[h*N+k]))
					}
					v := S[i*N+k]*dA + float64(b[k])*xv*d
					if sdt != 0 {
						v = float64(simRoundState(float32(v), sdt))
					}
					S[i*N+k] = v
					y += v * float64(c[k])
					m += math.Abs(v * float64(c[k]))
				}
				out[t*H*P+h*P+i], mag[t*H*P+h*P+i] = y, m
			}
		}
	}
	return out, mag
}

// TestSSMScanParity: ssm_scan against the float64 recurrence
// (refSSMScan), each window split over three calls (the state carried,
// across ssm_scan's 16-token stage), from a random state: Granite 4.0's
// and Nemotron-H's heads (64 rows, state 128) with 8 heads in 2 groups,
// odd shapes (rows and state columns past a block's 16 rows and a warp's
// 32 lanes), the largest state (256), steps dt + bias past softplus's cut
// at 20 and far below 0 (d near 0: no decay, no input), and an f16 and a
// bf16 state; Mamba-1's decays per column (ssm_scan_cols). Outputs are
// compared relative to their magnitude (the sum of the magnitudes of their
// terms), the state to the head's largest value;
// the sim device runs the CPU's own float32 scan (nn.SSMScan), host the
// CUDA C.
func TestSSMScanParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		b := testBackend(e)
		defer b.Close()
		for _, c := range []struct {
			heads, dim, groups, state int
			dtype                     string
			parts                     []int // the calls' ends
			outTol, stateTol          float64
			cols                      bool // decays per state column (Mamba-1)
		}{
			// float32 state and sums. Measured on the host (the CUDA C
			// without fused multiply-adds) outputs 0.6e-7 to 2.2e-7,
			// states 0.8e-7 to 1.7e-7; on sim (the CPU's scan, its sums
			// in state order) outputs 1.9e-7 to 3.0e-7, the same states.
			{8, 64, 2, 128, "", []int{7, 40, 70}, 6e-7, 4e-7, false},
			{3, 5, 1, 7, "f32", []int{1, 17, 50}, 6e-7, 4e-7, false},
			{4, 20, 4, 40, "", []int{16, 33, 34}, 6e-7, 4e-7, false},
			{2, 16, 1, 256, "", []int{5, 21, 40}, 6e-7, 4e-7, false},
			// A rounded state: the float32 and float64 states round to
			// neighbouring codes now and then (one step: 2^-11 to 2^-10
			// of a value in f16, 2^-8 to 2^-7 in bf16), and the step
			// carries on, decaying. Measured: outputs 1.6e-4 (f16) and
			// 1.1e-3 (bf16), the last states equal; allowed about two
			// steps.
			{4, 16, 2, 64, "f16", []int{10, 30, 60}, 1e-3, 1e-3, false},
			{4, 16, 2, 64, "bf16", []int{10, 30, 60}, 8e-3, 8e-3, false},
			// Mamba-1's decays per column (ssm_scan_cols): channels past
			// a block's 128, its state of 16, the largest (32), an odd
			// one, an f16 state.
			{300, 1, 1, 16, "", []int{7, 40, 70}, 6e-7, 4e-7, true},
			{130, 1, 1, 32, "", []int{1, 17, 50}, 6e-7, 4e-7, true},
			{5, 1, 1, 3, "", []int{16, 33, 34}, 6e-7, 4e-7, true},
			{40, 1, 1, 16, "f16", []int{10, 30, 60}, 1e-3, 1e-3, true},
		} {
			t.Run(fmt.Sprintf("h%d_p%d_g%d_n%d_%s_cols%v", c.heads, c.dim, c.groups, c.state, c.dtype, c.cols), func(t *testing.T) {
				H, P, G, N := c.heads, c.dim, c.groups, c.state
				n := c.parts[len(c.parts)-1]
				rng := rand.New(rand.NewPCG(uint64(P), uint64(N)))
				x, bm, cm := randF32(rng, n*H*P, 1), randF32(rng, n*G*N, 1), randF32(rng, n*G*N, 1)
				dt := randF32(rng, n*H, 2)
				for i := range dt {
					switch i % 11 {
					case 3:
						dt[i] = 20.5 + float32(rng.Float64()*10) // d = dt + bias > 20: d itself
					case 7:
						dt[i] = -30 - float32(rng.Float64()*20) // d near 0
					}
				}
				vec := func(name string, v []float32) *ml.Vector {
					mv := &ml.Vector{Name: name, V: v}
					if err := b.PrepareVector(mv); err != nil {
						t.Fatal(err)
					}
					return mv
				}
				a := make([]float32, H)
				if c.cols {
					a = make([]float32, H*N)
				}
				for h := range a {
					a[h] = -float32(math.Exp(rng.Float64()*3 - 1)) // -exp(A_log), A_log in [-1, 2)
				}
				s := ml.SSM{Heads: H, HeadDim: P, Groups: G, State: N, StateDtype: c.dtype, StateDecays: c.cols,
					A: vec("ssm_a", a), D: vec("ssm_d", randF32(rng, H, 1)), DtBias: vec("ssm_dt.bias", randF32(rng, H, 0.5))}
				state0 := randF32(rng, H*P*N, 0.5)
				wantState := make([]float64, len(state0))
				for i, v := range state0 {
					wantState[i] = float64(v)
				}
				st := b.put(t, H*P, N, state0)
				var got []float32
				var want, mag []float64
				t0 := 0
				for _, t1 := range c.parts {
					m := t1 - t0
					xs, dts := x[t0*H*P:t1*H*P], dt[t0*H:t1*H]
					bs, cs := bm[t0*G*N:t1*G*N], cm[t0*G*N:t1*G*N]
					w, mg := refSSMScan(xs, dts, bs, cs, wantState, m, &s)
					want, mag = append(want, w...), append(mag, mg...)
					o := b.Alloc(m, H*P)
					b.SSMScan(o, b.put(t, m, H*P, xs), b.put(t, m, H, dts), b.put(t, m, G*N, bs), b.put(t, m, G*N, cs), st, &s)
					got = append(got, b.Read(o)...)
					t0 = t1
				}
				gotState := b.Read(st)
				if err := b.Err(); err != nil {
					t.Fatal(err)
				}
				cmp := func(what string, got []float32, want []float64, scale func(i int) float64, tol float64) {
					worst, at := 0.0, 0
					for i := range want {
						d := math.Abs(float64(got[i])-want[i]) / scale(i)
						if d != d {
							d = math.Inf(1)
						}
						if d > worst {
							worst, at = d, i
						}
					}
					t.Logf("%s: max |Δ| / scale %.2e (element %d: %v vs %v)", what, worst, at, got[at], want[at])
					if worst > tol {
						t.Errorf("%s: element %d is %v, want %v (%.2e of its scale; allowed %g)", what, at, got[at], want[at], worst, tol)
					}
				}
				cmp("output", got, want, func(i int) float64 { return mag[i] }, c.outTol)
				headMax := make([]float64, H)
				for i, v := range wantState {
					headMax[i/(P*N)] = max(headMax[i/(P*N)], math.Abs(v))
				}
				cmp("state", gotState, wantState, func(i int) float64 { return headMax[i/(P*N)] }, c.stateTol)
			})
		}
	})
}

// TestSSMScanRefuses: a state past ssm_scan's 256 columns (ssm_scan_cols'
// 32), heads that do not group, and decays per column over heads of more
// than one channel or in groups are errors, not launches.
func TestSSMScanRefuses(t *testing.T) {
	b := testBackend(simEngine())
	defer b.Close()
	for _, c := range []struct {
		s    ml.SSM
		want string
	}{
		{ml.SSM{Heads: 2, HeadDim: 4, Groups: 1, State: 512}, "state of 512: at most 256"},
		{ml.SSM{Heads: 3, HeadDim: 4, Groups: 2, State: 8}, "heads must be a multiple of groups"},
		{ml.SSM{Heads: 2, HeadDim: 4, Groups: 1, State: 8, StateDtype: "f8"}, `state dtype "f8"`},
		{ml.SSM{Heads: 2, HeadDim: 1, Groups: 1, State: 64, StateDecays: true}, "state of 64: at most 32"},
		{ml.SSM{Heads: 2, HeadDim: 2, Groups: 1, State: 8, StateDecays: true}, "heads of 2 in 1 groups: want heads of one channel"},
		{ml.SSM{Heads: 2, HeadDim: 1, Groups: 2, State: 8, StateDecays: true}, "heads of 1 in 2 groups: want heads of one channel"},
	} {
		b.err = nil
		H, P, G, N := c.s.Heads, c.s.HeadDim, c.s.Groups, c.s.State
		v := &ml.Vector{Name: "v", V: make([]float32, H)}
		a := v
		if c.s.StateDecays {
			a = &ml.Vector{Name: "a", V: make([]float32, H*N)}
		}
		for _, w := range []*ml.Vector{v, a} {
			if err := b.PrepareVector(w); err != nil {
				t.Fatal(err)
			}
		}
		c.s.A, c.s.D, c.s.DtBias = a, v, v
		b.SSMScan(b.Alloc(3, H*P), b.Alloc(3, H*P), b.Alloc(3, H), b.Alloc(3, G*N), b.Alloc(3, G*N), b.Alloc(H*P, N), &c.s)
		if err := b.Err(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.s, err, c.want)
		}
	}
}

// TestGatedGroupNormParity: gated_groupnorm against nn.GatedGroupNormRef
// (float64 from u = x·silu(z) rounded to float32, as the kernel): groups
// of 128 (one warp), 512 (128 threads) and 20 (a partial warp), in place
// and not, with a zero group (its outputs 0) and gates past where silu
// saturates. Measured: bit for bit but a few elements 1 ulp apart (float64
// sums in another order); without weights (gate_silu) bit for bit.
func TestGatedGroupNormParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		b := testBackend(e)
		defer b.Close()
		rng := rand.New(rand.NewPCG(17, 3))
		for _, c := range []struct {
			rows, group, groups int
			inPlace             bool
		}{{5, 128, 4, true}, {3, 512, 2, false}, {7, 20, 3, true}} {
			d := c.group * c.groups
			x, z := randF32(rng, c.rows*d, 1), randF32(rng, c.rows*d, 3)
			for i := range z {
				if i%13 == 0 {
					z[i] *= 60 // silu(z) = z, or 0
				}
			}
			clear(x[d+c.group : d+2*c.group]) // row 1's second group
			w := &ml.Vector{Name: "ssm_norm", V: randF32(rng, d, 1)}
			if err := b.PrepareVector(w); err != nil {
				t.Fatal(err)
			}
			want := make([]float32, c.rows*d)
			nn.GatedGroupNormRef(want, x, z, w.V, c.rows, c.group, 1e-5)
			xt, zt := b.put(t, c.rows, d, x), b.put(t, c.rows, d, z)
			out := xt
			if !c.inPlace {
				out = b.Alloc(c.rows, d)
			}
			b.GatedGroupNorm(out, xt, zt, w, c.group, 1e-5)
			got := b.Read(out)
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			var bc bitCompare
			for i := range want {
				bc.add(got[i], want[i], i)
			}
			bc.check(t, fmt.Sprintf("gated_groupnorm rows %d of %d groups of %d", c.rows, c.groups, c.group), 1, 0.01)
			for i := d + c.group; i < d+2*c.group; i++ {
				if got[i] != 0 {
					t.Errorf("zero group: element %d is %v", i, got[i])
				}
			}
			// Without weights: gate_silu, the gate alone.
			nn.GatedGroupNormRef(want, x, z, nil, c.rows, c.group, 1e-5)
			xt = b.put(t, c.rows, d, x)
			b.GatedGroupNorm(xt, xt, zt, nil, c.group, 1e-5)
			got = b.Read(xt)
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			bc = bitCompare{}
			for i := range want {
				bc.add(got[i], want[i], i)
			}
			bc.check(t, fmt.Sprintf("gate_silu rows %d of %d", c.rows, d), 0, 0)
		}
	})
}

// bitsDiffer counts the elements of got whose bits differ from want's (a
// negative zero from a positive one included; sameBits) and describes the
// first.
func bitsDiffer(got, want []float32) (differ int, first string) {
	for i := range want {
		if !sameBits(got[i], want[i]) {
			if differ == 0 {
				first = fmt.Sprintf("element %d: got %v (%#08x), want %v (%#08x)", i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
			differ++
		}
	}
	return differ, first
}

// lfm2Values are n values whose magnitudes span the float32 range a short
// convolution block meets and more, both signs: normal ones, 1e6 and 1e15
// times larger (so that a tap's product swamps or cancels the others' and
// the order of the roundings shows), 1e-6 times smaller, float32
// subnormals and zeros of both signs.
func lfm2Values(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		x := rng.NormFloat64()
		switch i % 9 {
		case 1, 5:
			x *= 1e6
		case 2:
			x *= 1e15
		case 3:
			x *= 1e-6
		case 4:
			x = float64(math.Float32frombits(uint32(rng.IntN(1 << 23))))
			if rng.IntN(2) == 0 {
				x = -x
			}
		case 6:
			x = math.Copysign(0, x)
		}
		v[i] = float32(x)
	}
	return v
}

// TestConvParity: Conv (conv_f32, then conv_hist) against the CPU's
// nn.Conv, bit for bit, outputs and history, over a window split into
// several calls (the history carried, from a random one; parts shorter
// than the kernel's K - 1 rows of history among them): LFM2's K = 3 on
// channels not a multiple of a block (37) and on LFM2-350M's 1024, K = 1
// (no history: conv_hist not launched) on 300 channels, and the largest
// kernel conv_hist takes (16). The inputs and weights span magnitudes
// from subnormals to 1e15 with both signs, and the test checks they
// tell the arithmetics apart: the float64 sum rounded once, and float32
// fused multiply-adds, each differ from the CPU's on some outputs (with
// K = 1 only in the sign of zero: the CPU's sum starts from +0, so a -0
// product gives +0, and so does conv_f32's). Measured on the emulation
// and the host (the CUDA C): every output and history value the same.
func TestConvParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		b := testBackend(e)
		defer b.Close()
		for _, c := range []struct {
			C, K  int
			parts []int // the calls' ends
		}{
			{37, 3, []int{1, 6, 7, 9, 40}},
			{1024, 3, []int{2, 3, 35}},
			{300, 1, []int{1, 8, 20}},
			{40, 16, []int{3, 20, 21, 45}},
		} {
			t.Run(fmt.Sprintf("c%d_k%d", c.C, c.K), func(t *testing.T) {
				C, K := c.C, c.K
				n := c.parts[len(c.parts)-1]
				rng := rand.New(rand.NewPCG(uint64(C), uint64(K)))
				x := lfm2Values(rng, n*C)
				w := &ml.Vector{Name: "shortconv.conv", V: lfm2Values(rng, C*K)}
				for i := range w.V {
					if i%9 == 2 { // the 1e15 kind cut to 1e3: products up to about 1e22, far from overflow
						w.V[i] *= 1e-12
					}
				}
				if err := b.PrepareVector(w); err != nil {
					t.Fatal(err)
				}
				hist0 := lfm2Values(rng, (K-1)*C)
				cpuHist := append([]float32(nil), hist0...)
				hist := b.Alloc(K-1, C)
				if K > 1 {
					hist = b.put(t, K-1, C, hist0)
				}

				var got, want []float32
				fused, once := 0, 0 // outputs where the other arithmetics differ from the CPU's
				t0 := 0
				for _, t1 := range c.parts {
					m := t1 - t0
					xs := x[t0*C : t1*C]
					prev := append([]float32(nil), cpuHist...)
					out := make([]float32, m*C)
					nn.Conv(nn.NewContext(1), out, xs, cpuHist, w.V, m, C, K)
					want = append(want, out...)
					for tt := range m {
						for ch := range C {
							var f32 float32 // a fused multiply-add per tap (but for rare double roundings: the product is exact in float64)
							var f64 float64 // one rounding
							for j := range K {
								s, v := tt-K+1+j, float32(0)
								if s < 0 {
									v = prev[(s+K-1)*C+ch]
								} else {
									v = xs[s*C+ch]
								}
								p := float64(v) * float64(w.V[ch*K+j])
								f32 = float32(p + float64(f32))
								f64 += p
							}
							cpu := math.Float32bits(out[tt*C+ch])
							if math.Float32bits(f32) != cpu {
								fused++
							}
							if math.Float32bits(float32(f64)) != cpu {
								once++
							}
						}
					}

					o := b.Alloc(m, C)
					b.Conv(o, b.put(t, m, C, xs), hist, w)
					got = append(got, b.Read(o)...)
					if K > 1 {
						if d, first := bitsDiffer(b.Read(hist), cpuHist); d != 0 {
							t.Errorf("history after rows %d..%d: %d of %d values differ; %s", t0, t1, d, len(cpuHist), first)
						}
					}
					t0 = t1
				}
				if err := b.Err(); err != nil {
					t.Fatal(err)
				}
				d, first := bitsDiffer(got, want)
				t.Logf("conv_f32 over %d calls: %d of %d outputs differ from nn.Conv's %s (fused multiply-adds would differ on %d, a float64 sum on %d)",
					len(c.parts), d, len(want), first, fused, once)
				if d != 0 {
					t.Errorf("%d of %d outputs differ from nn.Conv's; %s", d, len(want), first)
				}
				if K > 1 && (fused == 0 || once == 0) {
					t.Errorf("the inputs do not tell the arithmetics apart: fused multiply-adds differ on %d outputs, a float64 sum on %d", fused, once)
				}
			})
		}
	})
}

// TestMulParity: Mul (mul_f32) against the CPU's float32 products, bit
// for bit: into another tensor, in place on either operand, and a square
// in place (dst, a and b one tensor), on rows not a multiple of a block,
// with magnitudes from subnormals to 1e15 of both signs (products that
// underflow to subnormals and zeros, and that overflow to infinities).
func TestMulParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		b := testBackend(e)
		defer b.Close()
		rng := rand.New(rand.NewPCG(5, 8))
		for _, c := range []struct {
			rows, cols int
			into       string // "new", "a", "b" or "square"
		}{{7, 300, "new"}, {3, 37, "a"}, {5, 1024, "b"}, {2, 333, "square"}} {
			n := c.rows * c.cols
			av, bv := lfm2Values(rng, n), lfm2Values(rng, n+4)[4:] // b's kinds of value shifted against a's
			for i := range bv {
				switch i % 13 {
				case 7:
					av[i], bv[i] = 3e30, -2e20 // overflow: -Inf
				case 11:
					bv[i] *= 1e-33 // products near float32's smallest normal, below it and zero
				}
			}
			if c.into == "square" {
				bv = av
			}
			want := make([]float32, n)
			for i := range want {
				want[i] = av[i] * bv[i]
			}
			at := b.put(t, c.rows, c.cols, av)
			bt := at
			if c.into != "square" {
				bt = b.put(t, c.rows, c.cols, bv)
			}
			dst := map[string]ml.Tensor{"a": at, "b": bt, "square": at}[c.into]
			if dst == nil {
				dst = b.Alloc(c.rows, c.cols)
			}
			b.Mul(dst, at, bt)
			got := b.Read(dst)
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			var inf, sub, zero int
			for _, v := range want {
				switch a := math.Abs(float64(v)); {
				case math.IsInf(a, 0):
					inf++
				case a == 0:
					zero++
				case a < 0x1p-126:
					sub++
				}
			}
			d, first := bitsDiffer(got, want)
			t.Logf("mul_f32 %d×%d into %s (%d infinities, %d subnormals, %d zeros): %d of %d elements differ %s",
				c.rows, c.cols, c.into, inf, sub, zero, d, n, first)
			if d != 0 {
				t.Errorf("mul_f32 %d×%d into %s: %d of %d elements differ from the CPU's; %s", c.rows, c.cols, c.into, d, n, first)
			}
			if c.into == "new" {
				if d, first := bitsDiffer(b.Read(at), av); d != 0 {
					t.Errorf("mul_f32 changed its operand a: %s", first)
				}
				if d, first := bitsDiffer(b.Read(bt), bv); d != 0 {
					t.Errorf("mul_f32 changed its operand b: %s", first)
				}
			}
		}
	})
}

// TestConvRefuses: a kernel past conv_hist's 16 taps is an error, not a
// launch.
func TestConvRefuses(t *testing.T) {
	b := testBackend(simEngine())
	defer b.Close()
	const C, K = 4, 17
	w := &ml.Vector{Name: "shortconv.conv", V: make([]float32, C*K)}
	if err := b.PrepareVector(w); err != nil {
		t.Fatal(err)
	}
	b.Conv(b.Alloc(3, C), b.Alloc(3, C), b.Alloc(K-1, C), w)
	if err := b.Err(); err == nil || !strings.Contains(err.Error(), "kernel 17 of shortconv.conv: at most 16") {
		t.Errorf("kernel %d: error %v", K, err)
	}
}
