package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// wkv7Inputs are T tokens of RWKV-7's operands for heads of d columns, as
// its time mix makes them: decays w in (e^-0.606531, 1), a = -κ̂ and b =
// κ̂·iclr with κ̂ of unit norm per head and iclr in (0, 1). Adversarial
// rows: every 17th token decays nothing and learns at rate 1 (S·(1 - κ̂κ̂ᵀ),
// a projection), every 23rd is zeros, every 29th has values of 1e4.
func wkv7Inputs(r *rand.Rand, T, heads, d int) (rr, w, k, v, a, b []float32) {
	n := T * heads * d
	rr, w, k, v, a, b = make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	for t := range T {
		for h := range heads {
			o := (t*heads + h) * d
			var norm float64
			kk := make([]float64, d)
			for i := range d {
				kk[i] = r.NormFloat64()
				norm += kk[i] * kk[i]
			}
			norm = math.Sqrt(norm)
			for i := range d {
				j := o + i
				rr[j], k[j], v[j] = float32(r.NormFloat64()), float32(r.NormFloat64()), float32(r.NormFloat64())
				w[j] = float32(math.Exp(-0.606531 * r.Float64()))
				iclr := r.Float64()
				switch {
				case t%17 == 16:
					w[j], iclr = 1, 1
				case t%23 == 22:
					rr[j], k[j], v[j] = 0, 0, 0
				case t%29 == 28:
					v[j] *= 1e4
				}
				a[j] = float32(-kk[i] / norm)
				b[j] = float32(kk[i] / norm * iclr)
			}
		}
	}
	return
}

// TestWKV7 runs ggml's float32 forms of the recurrence (both builds'
// lanes) against the float64 reference on heads of RWKV-7's 64, of two
// steps (128), of a step and a leftover half (96: leftovers in the AVX-512
// form, whole steps in the AVX2 one) and of none (32: leftovers only in
// the AVX-512 form), in three calls from a nonzero state: outputs and the
// final state within 1e-6 of their largest value (measured up to 3.2e-7).
func TestWKV7(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	const T, H = 300, 2
	for _, d := range []int{64, 128, 96, 32} {
		rr, w, k, v, a, b := wkv7Inputs(r, T, H, d)
		s0 := make([]float32, d*d)
		for i := range s0 {
			s0[i] = float32(r.NormFloat64())
		}
		for _, avx2 := range []bool{false, true} {
			for h := range H {
				got, want := make([]float32, T*H*d), make([]float32, T*H*d)
				sg, sw := slices.Clone(s0), slices.Clone(s0)
				head := func(out, st []float32, t0, t1 int) *WKV7Head {
					o := t0*H*d + h*d
					return &WKV7Head{R: rr[o:], W: w[o:], K: k[o:], V: v[o:], A: a[o:], B: b[o:], Out: out[o:], S: st, Stride: H * d, D: d, T: t1 - t0}
				}
				for _, sp := range [][2]int{{0, 7}, {7, 200}, {200, T}} {
					WKV7GGML(head(got, sg, sp[0], sp[1]), avx2)
					WKV7Ref(head(want, sw, sp[0], sp[1]))
				}
				what := fmt.Sprintf("d=%d avx2 %v head %d", d, avx2, h)
				if e := relDiff(got, want); e > 1e-6 {
					t.Errorf("%s: output %.2e relative, want <= 1e-6", what, e)
				}
				if e := relDiff(sg, sw); e > 1e-6 {
					t.Errorf("%s: state %.2e relative, want <= 1e-6", what, e)
				}
			}
		}
	}
}

// TestRWKVElementwise compares the ggml forms of the sigmoid, SiLU (both
// builds), RWKV-7's and RWKV-6's decays and RWKV-7's current-token term
// with the float64 references, on random values, zeros, ±1e-30, ±88 (e^x
// at float32's edge) and ±1e30: the sigmoid within 2 ulps, SiLU within 3,
// RWKV-7's decay (three float32 roundings) within 1, RWKV-6's within 1 +
// e^x (its inner e^x's rounding, amplified), the term within 2e-7 of its
// largest value (measured 6.9e-8). Each bound is the largest measured.
func TestRWKVElementwise(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	x := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 88, -88, 1e30, -1e30, 20, -20}
	for range 1000 {
		x = append(x, float32(4*r.NormFloat64()))
	}
	ulps := func(a, b float32) float64 { // float32 steps between a and b (of one sign here)
		return math.Abs(float64(int64(math.Float32bits(a)) - int64(math.Float32bits(b))))
	}
	for _, c := range []struct {
		name      string
		ggml, ref func([]float32)
		most      func(x float32) float64 // ulps allowed at x
	}{
		{"sigmoid", func(v []float32) { GGMLSigmoid(v, v) }, func(v []float32) { Sigmoid(v, v) }, func(float32) float64 { return 2 }},
		{"decay", GGMLRWKVDecay, RWKVDecay, func(float32) float64 { return 1 }},
		// exp(-exp(x)) of a float32 e^x: its rounding times e^x.
		{"RWKV-6 decay", GGMLRWKV6Decay, RWKV6Decay, func(x float32) float64 { return 1 + math.Exp(float64(x)) }},
		{"silu", func(v []float32) { GGMLSiLURows(v, len(v), false) }, SiLU32, func(float32) float64 { return 3 }},
		{"silu avx2", func(v []float32) { GGMLSiLURows(v, len(v), true) }, SiLU32, func(float32) float64 { return 3 }},
	} {
		g, f := slices.Clone(x), slices.Clone(x)
		c.ggml(g)
		c.ref(f)
		for i := range x {
			if u := ulps(g[i], f[i]); u > c.most(x[i]) {
				t.Errorf("%s(%g): ggml %g, reference %g: %v ulps, want <= %v", c.name, x[i], g[i], f[i], u, c.most(x[i]))
			}
		}
	}
	sig := slices.Clone(x) // GGMLSigmoid's vector expf: glibc's bits, as one at a time
	GGMLSigmoid(sig, sig)
	for i, v := range x {
		if want := 1 / (1 + LibcExpf(-v)); math.Float32bits(sig[i]) != math.Float32bits(want) {
			t.Errorf("GGMLSigmoid(%g) = %g, 1/(1+expf(-x)) = %g", v, sig[i], want)
		}
	}
	const d, heads = 64, 3
	rr, _, k, v, _, _ := wkv7Inputs(r, 1, heads, d)
	u := make([]float32, heads*d)
	for i := range u {
		u[i] = float32(r.NormFloat64())
	}
	g, f := make([]float32, heads*d), make([]float32, heads*d)
	for i := range g {
		g[i] = float32(r.NormFloat64())
		f[i] = g[i]
	}
	GGMLRWKVBonus(g, rr, k, v, u, d)
	RWKVBonus(f, rr, k, v, u, d)
	if e := relDiff(g, f); e > 2e-7 {
		t.Errorf("bonus: %.2e relative, want <= 2e-7", e)
	}
}

// TestGGMLWKV7 pins WKV7GGML to libggml 0.27.0's RWKV_WKV7 (llama.cpp
// 0.7.0; ggml_ops.py wkv7 40 3 64 on wkv7PinInputs): the hashes of its
// outputs and final state in the zen4 (AVX-512) and haswell (AVX2)
// builds, bit for bit.
func TestGGMLWKV7(t *testing.T) {
	for i, want := range []uint64{0x7a888611bf84c76f, 0x3b4594632f8efd99} {
		if h := fnvBits(wkv7PinGGML(i == 1)); h != want {
			t.Errorf("avx2 %v: hash %#x, llama.cpp's %#x", i == 1, h, want)
		}
	}
}

// wkv7Pin is the shape of TestGGMLWKV7's input (ggml_ops.py wkv7 40 3 64):
// 40 tokens of 3 heads of 64.
const wkv7PinN, wkv7PinH, wkv7PinD = 40, 3, 64

// wkv7PinInputs are TestGGMLWKV7's r, w, k, v, a and b (wkv7Inputs), one
// after another.
func wkv7PinInputs() []float32 {
	rr, w, k, v, a, b := wkv7Inputs(rand.New(rand.NewPCG(31, 32)), wkv7PinN, wkv7PinH, wkv7PinD)
	return slices.Concat(rr, w, k, v, a, b)
}

// wkv7PinGGML runs WKV7GGML over wkv7PinInputs from a zero state: the
// outputs, then the final state (head-major), as ggml's RWKV_WKV7 lays
// them out.
func wkv7PinGGML(avx2 bool) []float32 {
	in := wkv7PinInputs()
	n := wkv7PinN * wkv7PinH * wkv7PinD
	part := func(i int) []float32 { return in[i*n : (i+1)*n] }
	D, C := wkv7PinD, wkv7PinH*wkv7PinD
	out, state := make([]float32, n), make([]float32, wkv7PinH*D*D)
	for h := range wkv7PinH {
		o := h * D
		WKV7GGML(&WKV7Head{R: part(0)[o:], W: part(1)[o:], K: part(2)[o:], V: part(3)[o:], A: part(4)[o:], B: part(5)[o:],
			Out: out[o:], S: state[h*D*D : (h+1)*D*D], Stride: C, D: D, T: wkv7PinN}, avx2)
	}
	return append(out, state...)
}

// wkv6Inputs are T tokens of RWKV-6's operands for heads of d: decays in
// (0.3, 1) (exp(-exp(w)) of w in [-4, 0.2)), a bonus per channel; every
// 17th token decays nothing, every 23rd is zeros, every 29th has values
// of 1e4.
func wkv6Inputs(r *rand.Rand, T, heads, d int) (rr, k, v, w, u []float32) {
	n := T * heads * d
	rr, k, v, w, u = make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, heads*d)
	for i := range n {
		rr[i], k[i], v[i] = float32(r.NormFloat64()), float32(r.NormFloat64()), float32(r.NormFloat64())
		w[i] = float32(math.Exp(-math.Exp(-4 + 4.2*r.Float64())))
		switch t := i / (heads * d); {
		case t%17 == 16:
			w[i] = 1
		case t%23 == 22:
			rr[i], k[i], v[i] = 0, 0, 0
		case t%29 == 28:
			v[i] *= 1e4
		}
	}
	for i := range u {
		u[i] = float32(r.NormFloat64())
	}
	return
}

// TestWKV6 runs ggml's float32 form of RWKV-6's recurrence, with its bonus
// and without (gated linear attention), against the float64 reference on
// heads of 64 and 128 and an odd 40, in three calls from a nonzero state:
// outputs and final state within 1e-6 of their largest value (measured up
// to 3.9e-7).
func TestWKV6(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	const T, H = 300, 2
	for _, d := range []int{64, 128, 40} {
		rr, k, v, w, u := wkv6Inputs(r, T, H, d)
		s0 := make([]float32, d*d)
		for i := range s0 {
			s0[i] = float32(r.NormFloat64())
		}
		for _, bonus := range []bool{true, false} {
			for h := range H {
				got, want := make([]float32, T*H*d), make([]float32, T*H*d)
				sg, sw := slices.Clone(s0), slices.Clone(s0)
				head := func(out, st []float32, t0, t1 int) *WKV6Head {
					o := t0*H*d + h*d
					hd := &WKV6Head{R: rr[o:], K: k[o:], V: v[o:], W: w[o:], Out: out[o:], S: st, Stride: H * d, D: d, T: t1 - t0}
					if bonus {
						hd.U = u[h*d : (h+1)*d]
					}
					return hd
				}
				for _, sp := range [][2]int{{0, 7}, {7, 200}, {200, T}} {
					WKV6GGML(head(got, sg, sp[0], sp[1]))
					WKV6Ref(head(want, sw, sp[0], sp[1]))
				}
				what := fmt.Sprintf("d=%d bonus %v head %d", d, bonus, h)
				if e := relDiff(got, want); e > 1e-6 {
					t.Errorf("%s: output %.2e relative, want <= 1e-6", what, e)
				}
				if e := relDiff(sg, sw); e > 1e-6 {
					t.Errorf("%s: state %.2e relative, want <= 1e-6", what, e)
				}
			}
		}
	}
}

// TestGGMLWKV6 pins WKV6GGML to libggml 0.27.0's RWKV_WKV6 and
// GATED_LINEAR_ATTN (ggml_ops.py wkv6 40 3 64, gla 40 3 64 0.125 on
// wkv6PinInputs, r scaled first for the latter): the hashes of their
// outputs and final states, the same in the zen4 and haswell builds.
func TestGGMLWKV6(t *testing.T) {
	for i, want := range []uint64{0xa0dfeeeadc1c8188, 0x24e29ebb795cfecb} {
		if h := fnvBits(wkv6PinGGML(i == 0)); h != want {
			t.Errorf("bonus %v: hash %#x, llama.cpp's %#x", i == 0, h, want)
		}
	}
}

// wkv6PinInputs are TestGGMLWKV6's r, k, v, w and u (wkv6Inputs over
// wkv7Pin's shape), one after another.
func wkv6PinInputs() []float32 {
	rr, k, v, w, u := wkv6Inputs(rand.New(rand.NewPCG(33, 34)), wkv7PinN, wkv7PinH, wkv7PinD)
	return slices.Concat(rr, k, v, w, u)
}

// wkv6PinGGML runs WKV6GGML over wkv6PinInputs from a zero state, with the
// bonus or without (r times 0.125 first): the outputs, then the final
// state, as ggml lays them out.
func wkv6PinGGML(bonus bool) []float32 {
	in := wkv6PinInputs()
	n := wkv7PinN * wkv7PinH * wkv7PinD
	part := func(i int) []float32 { return slices.Clone(in[i*n : (i+1)*n]) }
	D, C := wkv7PinD, wkv7PinH*wkv7PinD
	r := part(0)
	if !bonus {
		for i := range r {
			r[i] *= 0.125
		}
	}
	out, state := make([]float32, n), make([]float32, wkv7PinH*D*D)
	for h := range wkv7PinH {
		o := h * D
		hd := &WKV6Head{R: r[o:], K: part(1)[o:], V: part(2)[o:], W: part(3)[o:], Out: out[o:], S: state[h*D*D : (h+1)*D*D], Stride: C, D: D, T: wkv7PinN}
		if bonus {
			hd.U = in[4*n+o : 4*n+o+D]
		}
		WKV6GGML(hd)
	}
	return append(out, state...)
}

// BenchmarkWKV7 and BenchmarkWKV6 time one head of 64 over 256 tokens in
// ggml's form (the CPU's, both modes: the vector kernel where the machine
// has one), its Go loop and the float64 reference beside it: ns per token
// and head is ns/op / 256.
func BenchmarkWKV7(b *testing.B) {
	const T, d = 256, 64
	rr, w, k, v, a, bb := wkv7Inputs(rand.New(rand.NewPCG(1, 2)), T, 1, d)
	out, s := make([]float32, T*d), make([]float32, d*d)
	for _, c := range []struct {
		name string
		f    func(*WKV7Head)
	}{{"ggml", func(h *WKV7Head) { WKV7GGML(h, false) }}, {"loop", func(h *WKV7Head) { wkv7GGML(h, false, false) }}, {"ref", WKV7Ref}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.f(&WKV7Head{R: rr, W: w, K: k, V: v, A: a, B: bb, Out: out, S: s, Stride: d, D: d, T: T})
			}
		})
	}
}

func BenchmarkWKV6(b *testing.B) {
	const T, d = 256, 64
	rr, k, v, w, u := wkv6Inputs(rand.New(rand.NewPCG(1, 2)), T, 1, d)
	out, s := make([]float32, T*d), make([]float32, d*d)
	for _, c := range []struct {
		name string
		f    func(*WKV6Head)
	}{{"ggml", WKV6GGML}, {"loop", func(h *WKV6Head) { wkv6GGML(h, false) }}, {"ref", WKV6Ref}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.f(&WKV6Head{R: rr, K: k, V: v, W: w, U: u, Out: out, S: s, Stride: d, D: d, T: T})
			}
		})
	}
}

// TestWKVKernels: the vector kernels (rwkv_amd64.s) give the Go loops'
// bits, outputs and states, on heads of 64 and 128 over 100 tokens: WKV7
// in both builds' lanes, WKV6 with and without its bonus. Skipped where
// the machine has no such kernels (they are then not used).
func TestWKVKernels(t *testing.T) {
	if kern.wkv7GGML == nil || kern.wkv6 == nil {
		t.Skip("no RWKV kernels on this machine")
	}
	r := rand.New(rand.NewPCG(27, 28))
	const T, H = 100, 2
	same := func(what string, a, b []float32) {
		t.Helper()
		if fnvBits(a) != fnvBits(b) {
			t.Errorf("%s: the kernel's bits differ from the Go loop's", what)
		}
	}
	for _, d := range []int{64, 128} {
		rr, w, k, v, a, b := wkv7Inputs(r, T, H, d)
		for _, avx2 := range []bool{false, true} {
			var outs, states [2][]float32
			for i, kernels := range []bool{true, false} {
				outs[i], states[i] = make([]float32, T*H*d), make([]float32, H*d*d)
				for h := range H {
					o := h * d
					wkv7GGML(&WKV7Head{R: rr[o:], W: w[o:], K: k[o:], V: v[o:], A: a[o:], B: b[o:], Out: outs[i][o:],
						S: states[i][h*d*d : (h+1)*d*d], Stride: H * d, D: d, T: T}, avx2, kernels)
				}
			}
			same(fmt.Sprintf("wkv7 d=%d avx2 %v output", d, avx2), outs[0], outs[1])
			same(fmt.Sprintf("wkv7 d=%d avx2 %v state", d, avx2), states[0], states[1])
		}
		rr, k, v, w, u := wkv6Inputs(r, T, H, d)
		for _, bonus := range []bool{true, false} {
			var outs, states [2][]float32
			for i, kernels := range []bool{true, false} {
				outs[i], states[i] = make([]float32, T*H*d), make([]float32, H*d*d)
				for h := range H {
					o := h * d
					hd := &WKV6Head{R: rr[o:], K: k[o:], V: v[o:], W: w[o:], Out: outs[i][o:], S: states[i][h*d*d : (h+1)*d*d], Stride: H * d, D: d, T: T}
					if bonus {
						hd.U = u[o : o+d]
					}
					wkv6GGML(hd, kernels)
				}
			}
			same(fmt.Sprintf("wkv6 d=%d bonus %v output", d, bonus), outs[0], outs[1])
			same(fmt.Sprintf("wkv6 d=%d bonus %v state", d, bonus), states[0], states[1])
		}
	}
}
