package cuda

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/kernels"
	"ppl.dev/quant"
	"ppl.dev/score/cuda/cublas"
	"ppl.dev/score/kvcache"
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// Parity of each kernel with its CPU reference (the function its comment in
// ppl.dev/kernels names), on random input, on the simulated device and on
// GPU 0. Tolerances sit with each check: most kernels repeat the
// reference's float64 arithmetic and must give the same bits but for rare
// ties after a differently ordered sum; the KV cache store must give the
// same bytes; attention and products differ by their precision (bf16
// inputs, float32 sums).

func TestEmbedParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(1, 1))
		const vocab, dim, n = 1000, 200, 37
		table := randBF16(rng, vocab*dim, 1)
		table[5] = quant.F32ToBF16(1e-6) // below fp16's normal range
		tokens := make([]int32, n)
		for i := range tokens {
			tokens[i] = int32(rng.IntN(vocab))
		}
		tokens[0], tokens[n-1] = 0, vocab-1
		raw := make([]byte, 2*len(table))
		for i, h := range table {
			raw[2*i], raw[2*i+1] = byte(h), byte(h>>8)
		}
		lin, err := nn.NewLinear("token_embd", gguf.TypeBF16, dim, vocab, raw)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, n*dim)
		lin.Lookup(nn.NewContext(1), want, tokens)

		out := devAlloc(t, e, 4*n*dim)
		tp, kp := devPut(t, e, table), devPut(t, e, tokens)
		do(t, e, func() error { return e.embed(out, tp, kp, n, dim, bf16) })
		got := devGet[float32](t, e, out, n*dim)
		var c bitCompare
		for i := range got {
			c.add(got[i], want[i], i)
		}
		c.check(t, "embedding from bf16 (exact)", 0, 0)
		// The same values stored as fp16, as Mixed stores them: exact but
		// below 2^-14, where fp16 keeps 2^-24 absolutely.
		h := make([]uint16, len(table))
		for i, v := range table {
			h[i] = quant.F32ToF16(quant.BF16ToF32(v))
		}
		tp = devPut(t, e, h)
		do(t, e, func() error { return e.embed(out, tp, kp, n, dim, f16) })
		got = devGet[float32](t, e, out, n*dim)
		var worst float64
		for i := range got {
			worst = max(worst, math.Abs(float64(got[i]-want[i])))
		}
		if worst > 0x1p-25 {
			t.Errorf("embedding from fp16: off by %g, want <= 2^-25", worst)
		}
	})
}

func TestRMSNormParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(2, 1))
		// The model's attn_norm / ffn_norm / output_norm shape.
		const rows, d = 33, 1000
		x, w := randF32(rng, rows*d, 3), randF32(rng, d, 1)
		norm := nn.RMSNorm{Name: "norm", W: w, Eps: 1e-5}
		want := make([]float32, rows*d)
		norm.Forward(nn.NewContext(1), want, x, rows)
		xp, wp, out := devPut(t, e, x), devPut(t, e, w), devAlloc(t, e, 4*rows*d)
		do(t, e, func() error { return e.rmsnormF32(out, xp, wp, rows, d, 1, 1e-5) })
		got := devGet[float32](t, e, out, rows*d)
		var c bitCompare
		for i := range got {
			c.add(got[i], want[i], i)
		}
		// float64 sums in another order move the scale by a few float64
		// ulps; the float32 rounding flips only at an exact tie.
		c.check(t, "rmsnorm_f32", 1, 1e-3)

		// float32 in place: the q/k norms of qwen3, one row per head.
		const hrows, hd = 200, 64
		hx, hw := randF32(rng, hrows*hd, 2), randF32(rng, hd, 1)
		hnorm := nn.RMSNorm{Name: "qnorm", W: hw, Eps: 1e-6}
		hwant := make([]float32, hrows*hd)
		hnorm.Forward(nn.NewContext(1), hwant, hx, hrows)
		hxp, hwp := devPut(t, e, hx), devPut(t, e, hw)
		do(t, e, func() error { return e.rmsnormF32(hxp, hxp, hwp, hrows, hd, 1, 1e-6) })
		hgot := devGet[float32](t, e, hxp, hrows*hd)
		c = bitCompare{}
		for i := range hgot {
			c.add(hgot[i], hwant[i], i)
		}
		c.check(t, "rmsnorm_f32 in place", 1, 1e-3)

		// A weight row per head (PLaMo-2's q norm: 3 heads as rows).
		const heads = 3
		pw := randF32(rng, heads*hd, 1)
		pnorm := nn.RMSNorm{Name: "qnorm", W: pw, Eps: 1e-6, Cols: hd}
		pwant := make([]float32, hrows*hd)
		pnorm.Forward(nn.NewContext(1), pwant, hx, hrows)
		pxp, pwp, pout := devPut(t, e, hx), devPut(t, e, pw), devAlloc(t, e, 4*hrows*hd)
		do(t, e, func() error { return e.rmsnormF32(pout, pxp, pwp, hrows, hd, heads, 1e-6) })
		pgot := devGet[float32](t, e, pout, hrows*hd)
		c = bitCompare{}
		for i := range pgot {
			c.add(pgot[i], pwant[i], i)
		}
		c.check(t, "rmsnorm_f32 with a weight row per head", 1, 1e-3)
	})
}

func TestRoPEParity(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 1))
	factors := make([]float32, 64)
	for i := range factors {
		factors[i] = float32(1 + 7*rng.Float64())
	}
	cases := []struct {
		name string
		r    *nn.RoPE
	}{
		{"normal", &nn.RoPE{HeadDim: 64, Dims: 64, Base: 10000, FreqScale: 1, AttnFactor: 1}},
		{"neox-partial-linear", &nn.RoPE{HeadDim: 64, Dims: 32, NeoX: true, Base: 1e6, FreqScale: 0.25, AttnFactor: 1}},
		{"yarn-freq-factors", &nn.RoPE{HeadDim: 128, Dims: 128, NeoX: true, Base: 5e5, FreqScale: 1.0 / 8, ExtFactor: 1,
			AttnFactor: 1, BetaFast: 32, BetaSlow: 1, OrigCtx: 8192, FreqFactors: factors}},
	}
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				if err := c.r.Validate(); err != nil {
					t.Fatal(err)
				}
				const n, heads = 300, 3
				x := randF32(rng, n*heads*c.r.HeadDim, 2)
				want := append([]float32(nil), x...)
				c.r.Forward(nn.NewContext(1), want, n, heads)
				cos, sin := ropeTables(c.r, n)
				xp, cp, sp := devPut(t, e, x), devPut(t, e, cos), devPut(t, e, sin)
				do(t, e, func() error { return e.rope(xp, cp, sp, n, heads, c.r.HeadDim, c.r.Dims, c.r.NeoX) })
				got := devGet[float32](t, e, xp, len(x))
				var bc bitCompare
				for i := range got {
					bc.add(got[i], want[i], i)
				}
				// The same float64 operations on the same tables: exact.
				bc.check(t, "rope", 0, 0)
			})
		}
	})
}

func TestSwiGLUParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(4, 1))
		const rows, f = 7, 300
		amax := devAlloc(t, e, 4)
		for _, c := range []struct {
			scale float64 // of the gates and ups
			amax  bool
			wantK int // the power of two the fp16 output is scaled by
		}{{3, false, 0}, {3, true, 0}, {3000, true, -11}} {
			gu := randF32(rng, rows*2*f, c.scale) // gate | up per row, as the fused product writes them
			want := make([]float32, rows*f)
			for r := range rows {
				nn.SwiGLU(want[r*f:(r+1)*f], gu[r*2*f:r*2*f+f], gu[r*2*f+f:(r+1)*2*f])
			}
			gp, out := devPut(t, e, gu), devAlloc(t, e, 2*rows*f)
			eachGLUHalf(t, e, fmt.Sprintf("swiglu_half (inputs ×%g)", c.scale), c.amax, amax, out, want, c.wantK, func(ht cublas.DataType, am ptr) error {
				return e.swiglu(out, gp, gp+4*f, rows, f, 2*f, 2*f, ht, am)
			})
		}
	})
}

// eachGLUHalf runs a GLU kernel (run) into bf16 and fp16, or with withMax
// into fp16 with amax, and checks each output with checkGLUHalf.
func eachGLUHalf(t *testing.T, e *Engine, what string, withMax bool, amax, out ptr, want []float32, wantK int, run func(ht cublas.DataType, amax ptr) error) {
	t.Helper()
	hts, am := []cublas.DataType{bf16, f16}, ptr(0)
	if withMax {
		hts, am = []cublas.DataType{f16}, amax
	}
	for _, ht := range hts {
		do(t, e, func() error { return run(ht, am) })
		checkGLUHalf(t, e, fmt.Sprintf("%s %s (amax %v)", what, halfName(ht), withMax), out, want, ht, am, wantK)
	}
}

// checkGLUHalf compares a GLU kernel's output with the float32 results
// want, rounded to ht after the scaling by 2^wantK that amax (when not 0)
// must call for, and checks unscale on that amax.
func checkGLUHalf(t *testing.T, e *Engine, what string, out ptr, want []float32, ht cublas.DataType, amax ptr, wantK int) {
	t.Helper()
	if amax != 0 {
		m := devGet[uint32](t, e, amax, 1)[0]
		var wantMax float32
		for _, v := range want {
			wantMax = max(wantMax, float32(math.Abs(float64(v))))
		}
		// exp in float64 within an ulp of Go's: the largest value too
		if got := math.Float32frombits(m); math.Abs(float64(got-wantMax)) > 1e-6*float64(wantMax) || downExp(m) != wantK {
			t.Errorf("%s: maximum %v (scaled by 2^%d), want %v (2^%d)", what, got, downExp(m), wantMax, wantK)
		}
		x := randF32(rand.New(rand.NewPCG(9, 9)), 100, 1)
		xp := devPut(t, e, x)
		do(t, e, func() error { return e.unscale(xp, int64(len(x)), amax) })
		for i, v := range devGet[float32](t, e, xp, len(x)) {
			if w := x[i] * pow2f(-wantK); v != w {
				t.Fatalf("%s: unscale gave %v at %d, want %v", what, v, i, w)
			}
		}
	}
	got := devGet[uint16](t, e, out, len(want))
	var c bitCompare
	for i := range got {
		c.add(halfToF32(got[i], isF16(ht)), halfToF32(f32ToHalf(want[i]*pow2f(wantK), isF16(ht)), isF16(ht)), i)
	}
	// exp and tanh in float64 within an ulp of Go's: equal after rounding
	// but for ties.
	c.check(t, what, 1, 1e-3)
}

// add_bias: one bias row for every row, or (experts' biases) the bias row
// each row's index names.
func TestAddBiasParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(5, 1))
		const rows, d, stack = 9, 130, 4
		x, b := randF32(rng, rows*d, 1), randF32(rng, stack*d, 1)
		bi := []int32{3, 3, 0, 2, 2, 2, 1, 3, 0}
		bp, ip := devPut(t, e, b), devPut(t, e, bi)
		for _, rowwise := range []bool{false, true} {
			xp, ix := devPut(t, e, x), ptr(0)
			if rowwise {
				ix = ip
			}
			do(t, e, func() error { return e.addBias(xp, bp, ix, rows, d) })
			got := devGet[float32](t, e, xp, rows*d)
			var c bitCompare
			for i := range got {
				o := 0
				if rowwise {
					o = int(bi[i/d]) * d
				}
				c.add(got[i], x[i]+b[o+i%d], i) // the bias loop of nn.Linear.Forward
			}
			c.check(t, fmt.Sprintf("add_bias (exact, a bias per row: %v)", rowwise), 0, 0)
		}
	})
}

// TestGEMMF32Parity: the float32 products (routers, F32 matrices; the
// int8 mode's F32 products, as llama.cpp's) against float64, at float32's
// precision: within (k+1)·2^-24 of Σ|terms|, for inner sizes from 64 to
// 2048. cuBLAS computes them with CUBLAS_COMPUTE_32F, which must not take
// TF32's 10-bit inputs: those would be about 2^-10·Σ|terms|/√k off, 30
// times the bound at k = 64 (the worst error in units of 2^-24·Σ|terms| is
// logged to tell the two apart).
func TestGEMMF32Parity(t *testing.T) {
	onDevices(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(6, 2))
		for _, s := range []struct{ rows, k, nOut int }{{70, 64, 300}, {33, 300, 130}, {5, 2048, 64}} {
			t.Run(fmt.Sprintf("%dx%dx%d", s.rows, s.k, s.nOut), func(t *testing.T) {
				x, w, y0 := randF32(rng, s.rows*s.k, 1), randF32(rng, s.nOut*s.k, 1), randF32(rng, s.rows*s.nOut, 1)
				xp, wp, yp := devPut(t, e, x), devPut(t, e, w), devPut(t, e, y0)
				do(t, e, func() error { return e.gemm(yp, f32, s.nOut, xp, s.k, wp, f32, s.rows, s.k, s.nOut, 1) })
				got := devGet[float32](t, e, yp, len(y0))
				var worst, units float64
				for r := range s.rows {
					for j := range s.nOut {
						dot, mag := float64(y0[r*s.nOut+j]), math.Abs(float64(y0[r*s.nOut+j]))
						for l := range s.k {
							p := float64(x[r*s.k+l]) * float64(w[j*s.k+l])
							dot += p
							mag += math.Abs(p)
						}
						err := math.Abs(float64(got[r*s.nOut+j]) - dot)
						worst = max(worst, err/(float64(s.k+1)*0x1p-24*mag))
						units = max(units, err/(0x1p-24*mag))
					}
				}
				t.Logf("worst error: %.3f of the bound, %.2f × 2^-24 of Σ|terms|", worst, units)
				if !(worst <= 1) {
					t.Errorf("float32 product off by %.3g bounds (%.3g × 2^-24 of Σ|terms|)", worst, units)
				}
			})
		}
	})
}

func TestGEMMParity(t *testing.T) {
	onDevices(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(6, 1))
		for _, s := range []struct {
			rows, k, nOut int
			in            cublas.DataType
		}{{70, 264, 300, bf16}, {1, 64, 5, bf16}, {130, 512, 1000, bf16}, {70, 264, 300, f16}, {130, 512, 1000, f16}} {
			t.Run(fmt.Sprintf("%s-%dx%dx%d", halfName(s.in), s.rows, s.k, s.nOut), func(t *testing.T) {
				x, w := randBF16(rng, s.rows*s.k, 1), randBF16(rng, s.nOut*s.k, 1)
				if s.in == f16 {
					for i := range x {
						x[i] = quant.F32ToF16(float32(rng.NormFloat64()))
					}
					for i := range w {
						w[i] = quant.F32ToF16(float32(rng.NormFloat64()))
					}
				}
				y0 := randF32(rng, s.rows*s.nOut, 1)
				xp, wp := devPut(t, e, x), devPut(t, e, w)
				yp := devPut(t, e, y0)
				ybf := devAlloc(t, e, int64(2*s.rows*s.nOut))
				do(t, e, func() error { return e.gemm(yp, f32, s.nOut, xp, s.k, wp, s.in, s.rows, s.k, s.nOut, 1) })
				// half output: the input's type (what cuBLAS supports)
				do(t, e, func() error { return e.gemm(ybf, s.in, s.nOut, xp, s.k, wp, s.in, s.rows, s.k, s.nOut, 0) })
				got, gotBF := devGet[float32](t, e, yp, len(y0)), devGet[uint16](t, e, ybf, len(y0))
				xf, wf := fromHalf(x, s.in), fromHalf(w, s.in)
				var worst, worstBF float64
				for r := range s.rows {
					for j := range s.nOut {
						var dot, mag float64
						for l := range s.k {
							p := float64(xf[r*s.k+l]) * float64(wf[j*s.k+l])
							dot += p
							mag += math.Abs(p)
						}
						i := r*s.nOut + j
						// float32 accumulation over k terms: within k·2^-24 of Σ|terms|
						tol := float64(s.k)*0x1p-24*mag + 1e-6
						worst = max(worst, math.Abs(float64(got[i])-(dot+float64(y0[i])))/tol)
						// half output: one more rounding, at most 2^-8 relative (bf16)
						worstBF = max(worstBF, math.Abs(float64(halfToF32(gotBF[i], isF16(s.in)))-dot)/(tol+0x1p-8*math.Abs(dot)))
					}
				}
				t.Logf("worst error / tolerance: f32 out with beta=1 %.3f, half out %.3f", worst, worstBF)
				if worst > 1 || worstBF > 1 || worst != worst || worstBF != worstBF {
					t.Errorf("product off by %.3g (f32, beta=1) and %.3g (half out) tolerances", worst, worstBF)
				}
			})
		}
	})
}

func TestLogSoftmaxParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(7, 1))
		const rows, vocab = 5, 70001
		z, rz := randF32(rng, rows*vocab, 3), make([]float32, rows*vocab)
		for i := range rz {
			rz[i] = z[i] + float32(rng.NormFloat64()*0.3)
		}
		z[2*vocab+100], z[2*vocab+5000] = 50, 50 // a tie: the first index wins
		targets := make([]int32, rows)
		for i := range targets {
			targets[i] = int32(rng.IntN(vocab))
		}
		targets[2] = 5000
		zp, rzp, tp := devPut(t, e, z), devPut(t, e, rz), devPut(t, e, targets)
		lp, arg, bad := devAlloc(t, e, 8*rows), devAlloc(t, e, 4*rows), devAlloc(t, e, 4*rows)
		rlp, rarg, rbad, kld := devAlloc(t, e, 8*rows), devAlloc(t, e, 4*rows), devAlloc(t, e, 4*rows), devAlloc(t, e, 8*rows)
		check := func(name string, withRef bool) {
			gl, ga, gb := devGet[float64](t, e, lp, rows), devGet[int32](t, e, arg, rows), devGet[int32](t, e, bad, rows)
			grl, gra, gk := devGet[float64](t, e, rlp, rows), devGet[int32](t, e, rarg, rows), devGet[float64](t, e, kld, rows)
			for r := range rows {
				row, rrow := z[r*vocab:(r+1)*vocab], rz[r*vocab:(r+1)*vocab]
				lse, am, _ := refLogSumExp(row)
				want := float64(row[targets[r]]) - lse
				// float64 sums in another order: far below 1e-9
				if gb[r] != -1 || ga[r] != int32(am) || math.Abs(gl[r]-want) > 1e-9 {
					t.Errorf("%s row %d: log p %v argmax %d bad %d, want %v %d -1", name, r, gl[r], ga[r], gb[r], want, am)
				}
				if !withRef {
					continue
				}
				rlse, ram, _ := refLogSumExp(rrow)
				rwant := float64(rrow[targets[r]]) - rlse
				kw := refKLD(rrow, rlse, row, lse)
				if gra[r] != int32(ram) || math.Abs(grl[r]-rwant) > 1e-9 || math.Abs(gk[r]-kw) > 1e-9*(1+kw) {
					t.Errorf("%s row %d: ref log p %v argmax %d KLD %v, want %v %d %v", name, r, grl[r], gra[r], gk[r], rwant, ram, kw)
				}
			}
		}
		do(t, e, func() error { return e.logsoftmax(zp, rows, vocab, tp, lp, arg, bad) })
		check("logsoftmax_target", false)
		do(t, e, func() error { return e.logsoftmaxKLD(zp, rzp, rows, vocab, tp, lp, arg, bad, rlp, rarg, rbad, kld) })
		check("logsoftmax_kld", true)

		// Non-finite logits: the first bad token and its value, as the CPU's error names them.
		z[3*vocab+777], z[3*vocab+500] = float32(math.NaN()), float32(math.Inf(1))
		zp = devPut(t, e, z)
		do(t, e, func() error { return e.logsoftmax(zp, rows, vocab, tp, lp, arg, bad) })
		gb, gl := devGet[int32](t, e, bad, rows), devGet[float64](t, e, lp, rows)
		if gb[3] != 500 || !math.IsInf(gl[3], 1) || gb[2] != -1 {
			t.Errorf("non-finite row: bad %d value %v (row 2 bad %d), want 500 +Inf (-1)", gb[3], gl[3], gb[2])
		}
	})
}

// kvInput is random cache content with the cases that matter to the
// formats: magnitudes from 1e-3 to 1e3 by (token, head) group, an all-zero
// group, ties for Q4_0's largest-magnitude rule, values past E4M3's range.
func kvInput(rng *rand.Rand, tokens, heads, hd int) []float32 {
	x := make([]float32, tokens*heads*hd)
	for g := range tokens * heads {
		scale := math.Pow(10, rng.Float64()*6-3)
		for i := range hd {
			x[g*hd+i] = float32(rng.NormFloat64() * scale)
		}
	}
	for i := range hd {
		x[i] = 0 // group 0 all zero
	}
	if len(x) > 2*hd+20 {
		x[hd+3], x[hd+7] = -5, 5 // a tie in magnitude: the first wins
		x[2*hd+1] = 1e4
	}
	return x
}

func TestKVStoreParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(8, 1))
		for name, id := range kvIDs {
			for _, s := range []struct{ tokens, heads, hd int }{{37, 3, 64}, {5, 2, 40}, {3, 1, 16}} {
				if kernels.KVRotated(id) && s.hd&(s.hd-1) != 0 {
					continue // rotated heads are powers of two (kvcache.Rotated.Check)
				}
				t.Run(fmt.Sprintf("%s/%dx%dx%d", name, s.tokens, s.heads, s.hd), func(t *testing.T) {
					checkKVStore(t, e, id, kvInput(rng, s.tokens, s.heads, s.hd), s.tokens, s.heads, s.hd)
				})
			}
		}
	})
}

// checkKVStore stores x (tokens, heads, hd) in format id with the engine's
// kvStore and compares the planes with kvcache's Encode byte for byte, and
// the engine's kvDecode with kvcache's Decode bit for bit.
func checkKVStore(t *testing.T, e *Engine, id int, x []float32, tokens, heads, hd int) {
	t.Helper()
	codec := codecs[id]
	var want kvcache.Block
	codec.Encode(&want, x, tokens, heads, hd)
	groups := int64(tokens * heads)
	var kt *kvTensor
	do(t, e, func() error {
		var err error
		kt, err = e.newKV(id, groups, hd)
		return err
	})
	defer e.Do(func() error { e.freeKV(kt); return nil })
	xp := devPut(t, e, x)
	do(t, e, func() error { return e.kvStore(kt, xp, tokens, heads, hd) })
	nd, ns := kvSizes(id, groups, hd)
	data, scales := devGet[byte](t, e, kt.data.p, int(nd)), devGet[byte](t, e, kt.scales.p, int(ns))
	if !bytes.Equal(data, want.Data) {
		t.Errorf("data plane differs from kvcache's Encode (%d bytes, first difference at %d)", len(data), firstDiff(data, want.Data))
	}
	if !bytes.Equal(scales, want.Scales) {
		t.Errorf("scales plane differs from kvcache's Encode (%d bytes, first difference at %d)", len(scales), firstDiff(scales, want.Scales))
	}
	if id == kvNVFP4 {
		g := devGet[float32](t, e, kt.tscale(), 1)[0]
		if math.Float32bits(g) != math.Float32bits(want.TensorScale) {
			t.Errorf("tensor scale %v, want %v", g, want.TensorScale)
		}
	}
	// Decoding, as attention reads the cache, against kvcache's Decode.
	dec := make([]float32, len(x))
	codec.Decode(&want, dec)
	out := devAlloc(t, e, int64(4*len(x)))
	do(t, e, func() error { return e.kvDecode(out, kt, tokens, heads) })
	got := devGet[float32](t, e, out, len(x))
	var c bitCompare
	for i := range got {
		c.add(got[i], dec[i], i)
	}
	c.check(t, "decode (exact)", 0, 0)
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestAttentionParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(9, 1))
		shapes := []struct{ n, heads, kvheads, hd int }{
			{1, 4, 2, 64}, {65, 4, 1, 16}, {130, 2, 2, 32}, {200, 8, 2, 128}, {70, 2, 1, 80}, {150, 4, 2, 256}, {40, 2, 1, 512},
		}
		_, host := e.dev.(*hostDevice)
		for _, dtype := range kvcache.Names() {
			for _, s := range shapes {
				if f, _ := kvcache.Lookup(dtype); f.Check(s.hd) != nil {
					continue // a rotated format and a head size not a power of two
				}
				if host && dtype != "bf16" && s.n != 65 && s.n != 130 {
					continue // the CUDA C on the host (slow): every shape once, every format's decoding on two
				}
				t.Run(fmt.Sprintf("%s/n%d-h%d-kv%d-d%d", dtype, s.n, s.heads, s.kvheads, s.hd), func(t *testing.T) {
					f, _ := kvcache.Lookup(dtype)
					kid, vid, err := kvFormat(dtype)
					if err != nil {
						t.Fatal(err)
					}
					q := randF32(rng, s.n*s.heads*s.hd, 1)
					k := randF32(rng, s.n*s.kvheads*s.hd, 1)
					v := randF32(rng, s.n*s.kvheads*s.hd, 1)
					// CPU reference: the cache round trip (model's kvStore), then nn.Attention.
					kr, vr := append([]float32(nil), k...), append([]float32(nil), v...)
					var b kvcache.Block
					kvcache.RoundTrip(f.K, &b, kr, s.n, s.kvheads, s.hd)
					kvcache.RoundTrip(f.V, &b, vr, s.n, s.kvheads, s.hd)
					scale := 1 / math.Sqrt(float64(s.hd))
					want := make([]float32, len(q))
					att := nn.Attention{Heads: s.heads, KVHeads: s.kvheads, HeadDim: s.hd, Scale: scale}
					att.Forward(nn.NewContext(0), want, q, kr, vr, s.n)

					kt, vt := storeKV(t, e, kid, vid, k, v, s.n, s.kvheads, s.hd)
					qp := devPut(t, e, q)
					for _, flash := range []bool{false, true} {
						if flash && !flashHeadDims[s.hd] {
							continue
						}
						out := devAlloc(t, e, int64(2*len(q)))
						ot := []cublas.DataType{bf16, f16}[b2i(flash)] // both output types, one per kernel
						do(t, e, func() error { return e.attention(out, qp, s.n, s.heads, s.kvheads, s.hd, scale, kt, vt, flash, ot) })
						got := fromHalf(devGet[uint16](t, e, out, len(q)), ot)
						// plain: float32 softmax and sums, bf16 output (2^-9 relative);
						// flash: fp16 q, k, v and probabilities on the tensor cores
						// (2^-11 each), fp16 output.
						rel, abs := 0x1p-7, 1e-3
						if flash {
							rel, abs = 0x1p-8, 4e-3
						}
						worst, at := worstError(got, want, abs, rel)
						name := map[bool]string{false: "plain", true: "flash"}[flash]
						t.Logf("%s: worst error / tolerance %.3f (element %d: %v vs %v)", name, worst, at, got[at], want[at])
						if worst > 1 {
							t.Errorf("%s attention: element %d is %v, want %v (%.3g × tolerance)", name, at, got[at], want[at], worst)
						}
					}
				})
			}
		}
	})
}

// TestLayerNormParity: layernorm_f32 against nn.LayerNorm (float64 as the
// kernel, sums in another order), with and without a bias, in place, on
// rows of a constant (variance 0: eps alone) and a width past the block.
func TestLayerNormParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		b := testBackend(e)
		defer b.Close()
		rng := rand.New(rand.NewPCG(21, 22))
		const rows, d = 9, 300
		x := randF32(rng, rows*d, 2)
		for i := range d {
			x[3*d+i] = 0.75
		}
		// Weights of one row, and of 3 rows (per-head weights: row r
		// takes row r mod 3).
		for _, wrows := range []int{1, 3} {
			w := &ml.Vector{Name: "w", V: randF32(rng, wrows*d, 1)}
			bias := &ml.Vector{Name: "b", V: randF32(rng, wrows*d, 1)}
			for _, v := range []*ml.Vector{w, bias} {
				if err := b.PrepareVector(v); err != nil {
					t.Fatal(err)
				}
			}
			for _, bv := range []*ml.Vector{nil, bias} {
				var bs []float32
				if bv != nil {
					bs = bv.V
				}
				want := make([]float32, rows*d)
				nn.LayerNorm(want, x, w.V, bs, 1e-5, rows, d)
				xt := b.put(t, rows, d, x)
				b.LayerNorm(xt, xt, w, bv, 1e-5)
				got := b.Read(xt)
				if err := b.Err(); err != nil {
					t.Fatal(err)
				}
				var c bitCompare
				for i := range want {
					c.add(got[i], want[i], i)
				}
				c.check(t, fmt.Sprintf("layernorm_f32, weights of %d rows, bias %v", wrows, bv != nil), 1, 1e-2)
			}
		}
	})
}
