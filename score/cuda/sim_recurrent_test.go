package cuda

import (
	"errors"
	"fmt"
	"math"

	"ppl.dev/score/nn"
)

// The emulation of kernels/recurrent.cu. Every kernel but the two scans
// and LFM2's two is its plain definition (ml.Recurrent's doc), float64
// inside and one rounding to float32; conv_f32 and mul_f32 are their
// float32 arithmetic (nn.Conv's, and the CPU's products); delta_net is the kernel's own float32 arithmetic in
// the kernel's order (simDeltaNet), so that the end-to-end parity on the
// emulation measures what the GPU's float32 state costs; ssm_scan is the
// CPU's float32 scan (nn.SSMScan: the kernel's arithmetic, its sums over
// the state in another order).
func init() {
	for name, k := range map[string]simKernel{
		"gather_cols": {6, func(s *simDevice, a *simArgs, grid dim3) error {
			out, x, cols, rows, ncols, xcols := f32s(a.ptr(0)), f32s(a.ptr(1)), i32s(a.ptr(2)), a.int(3), a.int(4), a.int(5)
			if a.err != nil {
				return a.err
			}
			for r := range rows {
				for j := range ncols {
					c := int(cols[j])
					if c < 0 || c >= xcols {
						return fmt.Errorf("gather_cols: column %d of %d", c, xcols)
					}
					out[r*ncols+j] = x[r*xcols+c]
				}
			}
			return nil
		}},
		"conv_silu": {8, func(s *simDevice, a *simArgs, grid dim3) error {
			out, x, hist, w := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2)), f32s(a.ptr(3))
			var bias []float32 // none
			if p := a.ptr(4); p != nil {
				bias = f32s(p)
			}
			n, C, K := a.int(5), a.int(6), a.int(7)
			if a.err != nil {
				return a.err
			}
			for t := range n {
				for c := range C {
					var acc float64
					for j := range K {
						acc += float64(w[c*K+j]) * float64(convInput(x, hist, t-K+1+j, c, C, K))
					}
					if bias != nil {
						acc = float64(float32(acc) + bias[c])
					}
					out[t*C+c] = float32(acc / (1 + math.Exp(-acc)))
				}
			}
			return nil
		}},
		"conv_hist": {5, func(s *simDevice, a *simArgs, grid dim3) error {
			hist, x, n, C, K := f32s(a.ptr(0)), f32s(a.ptr(1)), a.int(2), a.int(3), a.int(4)
			if a.err != nil {
				return a.err
			}
			if K-1 > 15 {
				return fmt.Errorf("conv_hist: kernel %d", K)
			}
			last := make([]float32, (K-1)*C)
			for r := range K - 1 {
				for c := range C {
					last[r*C+c] = convInput(x, hist, n-K+1+r, c, C, K)
				}
			}
			copy(hist, last)
			return nil
		}},
		"conv_f32": {7, func(s *simDevice, a *simArgs, grid dim3) error {
			out, x, hist, w := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2)), f32s(a.ptr(3))
			n, C, K := a.int(4), a.int(5), a.int(6)
			if a.err != nil {
				return a.err
			}
			for t := range n {
				for c := range C {
					var acc float32
					for j := range K {
						acc += float32(convInput(x, hist, t-K+1+j, c, C, K) * w[c*K+j]) // rounded apart, as __fmul_rn and __fadd_rn
					}
					out[t*C+c] = acc
				}
			}
			return nil
		}},
		"mul_f32": {4, func(s *simDevice, a *simArgs, grid dim3) error {
			out, x, y, n := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2)), a.i64(3)
			if a.err != nil {
				return a.err
			}
			for i := range n {
				out[i] = x[i] * y[i]
			}
			return nil
		}},
		"l2norm_f32": {5, func(s *simDevice, a *simArgs, grid dim3) error {
			out, x, rows, d, eps := f32s(a.ptr(0)), f32s(a.ptr(1)), a.int(2), a.int(3), a.f64(4)
			if err := covers(grid[0], rows, "rows"); err != nil || a.err != nil {
				return errors.Join(err, a.err)
			}
			for r := range rows {
				var ss float64
				for _, v := range x[r*d : (r+1)*d] {
					ss += float64(v) * float64(v)
				}
				inv := 1 / math.Max(math.Sqrt(ss), eps)
				for i := range d {
					out[r*d+i] = float32(float64(x[r*d+i]) * inv)
				}
			}
			return nil
		}},
		"delta_gates": {7, func(s *simDevice, a *simArgs, grid dim3) error {
			beta, alpha, av, dtb, rows, H, C := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2)), f32s(a.ptr(3)), a.int(4), a.int(5), a.int(6)
			if a.err != nil {
				return a.err
			}
			for i := range rows * H {
				beta[i] = float32(1 / (1 + math.Exp(-float64(beta[i]))))
			}
			for i := range rows * C {
				c := i % C
				v := float64(alpha[i]) + float64(dtb[c])
				sp := v
				if v <= 20 {
					sp = math.Log1p(math.Exp(v))
				}
				alpha[i] = float32(float64(av[c/(C/H)]) * sp)
			}
			return nil
		}},
		"gated_rmsnorm": {7, func(s *simDevice, a *simArgs, grid dim3) error {
			out, x, z, w, rows, d, eps := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2)), f32s(a.ptr(3)), a.int(4), a.int(5), a.f64(6)
			if err := covers(grid[0], rows, "rows"); err != nil || a.err != nil {
				return errors.Join(err, a.err)
			}
			for r := range rows {
				var ss float64
				for _, v := range x[r*d : (r+1)*d] {
					ss += float64(v) * float64(v)
				}
				scale := 1 / math.Sqrt(ss/float64(d)+eps)
				for i := range d {
					zz := float64(z[r*d+i])
					out[r*d+i] = float32(float64(x[r*d+i]) * scale * float64(w[i]) * (zz / (1 + math.Exp(-zz))))
				}
			}
			return nil
		}},
		"delta_net": {14, func(s *simDevice, a *simArgs, grid dim3) error {
			out, q, k, v, g, beta, state := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2)), f32s(a.ptr(3)), f32s(a.ptr(4)), f32s(a.ptr(5)), f32s(a.ptr(6))
			n, hk, hv, d, tiled, kda, sdt := a.int(7), a.int(8), a.int(9), a.int(10), a.int(11), a.int(12), a.int(13)
			if err := errors.Join(covers(grid[0], hv, "value heads"), covers(grid[1], (d+deltaCols-1)/deltaCols, "column groups")); err != nil || a.err != nil {
				return errors.Join(err, a.err)
			}
			if d > deltaMaxDim || hk <= 0 || hv%hk != 0 {
				return fmt.Errorf("delta_net: %d K heads, %d V heads of %d", hk, hv, d)
			}
			simDeltaNet(out, q, k, v, g, beta, state, n, hk, hv, d, tiled != 0, kda != 0, sdt)
			return nil
		}},
		"ssm_scan": {15, func(s *simDevice, a *simArgs, grid dim3) error {
			out, x, dt, bm, cm, state := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2)), f32s(a.ptr(3)), f32s(a.ptr(4)), f32s(a.ptr(5))
			av, dv, dtb := f32s(a.ptr(6)), f32s(a.ptr(7)), f32s(a.ptr(8))
			n, H, P, G, N, sdt := a.int(9), a.int(10), a.int(11), a.int(12), a.int(13), a.int(14)
			if err := errors.Join(covers(grid[0], H, "heads"), covers(grid[1], (P+ssmRows-1)/ssmRows, "row groups")); err != nil || a.err != nil {
				return errors.Join(err, a.err)
			}
			if N > ssmMaxState || G <= 0 || H%G != 0 {
				return fmt.Errorf("ssm_scan: %d heads in %d groups, state %d", H, G, N)
			}
			round := simStateRounder(sdt)
			for h := range H {
				g := h / (H / G)
				nn.SSMScan(&nn.SSMHead{Out: out[h*P:], X: x[h*P:], Dt: dt[h:], B: bm[g*N:], C: cm[g*N:],
					XS: H * P, DS: H, BS: G * N, N: N, P: P, T: n,
					A: av[h], D: dv[h], DtBias: dtb[h], S: state[h*P*N : (h+1)*P*N]}, round)
			}
			return nil
		}},
		"ssm_scan_cols": {13, func(s *simDevice, a *simArgs, grid dim3) error {
			out, x, dt, bm, cm, state := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2)), f32s(a.ptr(3)), f32s(a.ptr(4)), f32s(a.ptr(5))
			av, dv, dtb := f32s(a.ptr(6)), f32s(a.ptr(7)), f32s(a.ptr(8))
			n, H, N, sdt := a.int(9), a.int(10), a.int(11), a.int(12)
			if err := covers(grid[0]*128, H, "channels"); err != nil || a.err != nil {
				return errors.Join(err, a.err)
			}
			if N > ssmColsMaxState {
				return fmt.Errorf("ssm_scan_cols: state %d", N)
			}
			round := simStateRounder(sdt)
			for h := range H {
				nn.SSMScan(&nn.SSMHead{Out: out[h:], X: x[h:], Dt: dt[h:], B: bm, C: cm, XS: H, DS: H, BS: N, N: N, P: 1, T: n,
					D: dv[h], DtBias: dtb[h], AS: av[h*N : (h+1)*N], S: state[h*N : (h+1)*N]}, round)
			}
			return nil
		}},
		"gate_silu": {4, func(s *simDevice, a *simArgs, grid dim3) error {
			out, x, z, n := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2)), a.i64(3)
			if a.err != nil {
				return a.err
			}
			if err := covers(grid[0]*256, int(n), "values"); err != nil {
				return err
			}
			nn.GatedGroupNormRef(out[:n], x[:n], z[:n], nil, 1, 0, 0)
			return nil
		}},
		"gated_groupnorm": {8, func(s *simDevice, a *simArgs, grid dim3) error {
			out, x, z, w, rows, d, group, eps := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2)), f32s(a.ptr(3)), a.int(4), a.int(5), a.int(6), a.f64(7)
			if a.err != nil {
				return a.err
			}
			if group <= 0 || d%group != 0 {
				return fmt.Errorf("gated_groupnorm: groups of %d in rows of %d", group, d)
			}
			if err := covers(grid[0], rows*(d/group), "groups"); err != nil {
				return err
			}
			u := make([]float32, rows*d) // out may be x
			nn.GatedGroupNormRef(u, x[:rows*d], z[:rows*d], w[:d], rows, group, eps)
			copy(out, u)
			return nil
		}},
	} {
		simKernels[name] = k
	}
}

// simDeltaNet is delta_net's arithmetic (kernels/recurrent.cu): per
// column j, the four row groups p (rows 4r + p) each summed in order of r,
// then (p0 + p1) + (p2 + p3), as the kernel's butterfly shuffles add them;
// the output times 1/sqrtf(d).
func simDeltaNet(out, q, k, v, g, beta, state []float32, n, hk, hv, d int, tiled, kda bool, sdt int) {
	const chunk = 64
	kd, vd := hk*d, hv*d
	var part [4]float32
	sc := 1 / float32(math.Sqrt(float64(d)))
	sum := func() float32 { return (part[0] + part[1]) + (part[2] + part[3]) }
	for h := range hv {
		kh := h / (hv / hk)
		if tiled {
			kh = h % hk
		}
		st := state[h*d*d : (h+1)*d*d] // S[i][j] at st[i*d+j]
		S := make([]float32, d*d)
		copy(S, st)
		for t := range n {
			sk, sq := k[t*kd+kh*d:t*kd+kh*d+d], q[t*kd+kh*d:t*kd+kh*d+d]
			decays := make([]float32, d) // per key channel, or one for the head
			for i := range decays {
				if kda {
					decays[i] = float32(math.Exp(float64(g[(t*hv+h)*d+i])))
				} else {
					decays[i] = float32(math.Exp(float64(g[t*hv+h])))
				}
			}
			for j := range d {
				for p := range 4 {
					var acc float32
					for i := p; i < d; i += 4 {
						S[i*d+j] *= decays[i]
						acc += sk[i] * S[i*d+j]
					}
					part[p] = acc
				}
				dj := beta[t*hv+h] * (v[t*vd+h*d+j] - sum())
				for p := range 4 {
					var acc float32
					for i := p; i < d; i += 4 {
						S[i*d+j] += sk[i] * dj
						acc += sq[i] * S[i*d+j]
					}
					part[p] = acc
				}
				out[t*vd+h*d+j] = sum() * sc
			}
			if sdt != 0 && ((t+1)%chunk == 0 || t == n-1) {
				for i := range S {
					S[i] = simRoundState(S[i], sdt)
				}
			}
		}
		copy(st, S)
	}
}

// convInput is the convolutions' input at time tt and channel c: row tt
// of x, or for tt < 0 row tt + K - 1 of the history.
func convInput(x, hist []float32, tt, c, C, K int) float32 {
	if tt < 0 {
		return hist[(tt+K-1)*C+c]
	}
	return x[tt*C+c]
}

// simStateRounder rounds a scan's state to the state dtype sdt after each
// token (simRoundState), nil for f32.
func simStateRounder(sdt int) func([]float32) {
	if sdt == 0 {
		return nil
	}
	return func(st []float32) {
		for i, v := range st {
			st[i] = simRoundState(v, sdt)
		}
	}
}
