package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// TestRWKVParity runs kernels/rwkv.cu against the CPU's arithmetic outside
// its int8 modes (cpu_rwkv.go): the recurrences over heads of 64 and 128
// in three calls from a nonzero state, bit for bit with nn.WKV7GGML's
// AVX-512 lanes and nn.WKV6GGML (with RWKV-6's bonus and without: gated
// linear attention), outputs and final states; the token shift and the
// difference bit for bit; the sigmoid, SiLU and both decays within an ulp
// of nn's float64 references (CUDA's exp within an ulp of Go's); the
// current-token term within 2e-7 of its largest value (its float64 sum in
// the warp's order).
func TestRWKVParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		b := testBackend(e)
		defer b.Close()
		for _, d := range []int{64, 128} {
			t.Run(fmt.Sprintf("d%d", d), func(t *testing.T) {
				const heads = 2
				parts := []int{3, 12, 20}
				n, c := parts[len(parts)-1], heads*d
				rng := rand.New(rand.NewPCG(uint64(d), 7))
				r, k, v := randF32(rng, n*c, 1), randF32(rng, n*c, 1), randF32(rng, n*c, 1)
				w, a, bb := make([]float32, n*c), make([]float32, n*c), make([]float32, n*c)
				for t0 := 0; t0 < n*c; t0 += d { // a = -κ̂, b = κ̂·iclr, κ̂ of unit norm per head
					kk := randF32(rng, d, 1)
					var norm float64
					for _, x := range kk {
						norm += float64(x) * float64(x)
					}
					for i, x := range kk {
						w[t0+i] = float32(math.Exp(-0.606531 * rng.Float64()))
						a[t0+i] = float32(-float64(x) / math.Sqrt(norm))
						bb[t0+i] = float32(float64(x) / math.Sqrt(norm) * rng.Float64())
					}
				}
				state0 := randF32(rng, c*d, 0.5)
				want, wantState := make([]float32, n*c), slices.Clone(state0)
				for h := range heads {
					o := h * d
					nn.WKV7GGML(&nn.WKV7Head{R: r[o:], W: w[o:], K: k[o:], V: v[o:], A: a[o:], B: bb[o:], Out: want[o:],
						S: wantState[h*d*d : (h+1)*d*d], Stride: c, D: d, T: n}, false)
				}
				// scan runs a recurrence over the parts' tokens from
				// state0, one call each, and requires want's bits.
				scan := func(what string, want, wantState []float32, call func(o, st ml.Tensor, part func([]float32) ml.Tensor)) {
					st := b.put(t, c, d, state0)
					var got []float32
					t0 := 0
					for _, t1 := range parts {
						o := b.Alloc(t1-t0, c)
						call(o, st, func(x []float32) ml.Tensor { return b.put(t, t1-t0, c, x[t0*c:t1*c]) })
						got = append(got, b.Read(o)...)
						t0 = t1
					}
					if err := b.Err(); err != nil {
						t.Fatal(err)
					}
					requireBits(t, what+" output", got, want)
					requireBits(t, what+" state", b.Read(st), wantState)
				}
				scan("wkv7", want, wantState, func(o, st ml.Tensor, part func([]float32) ml.Tensor) {
					b.WKV7(o, part(r), part(w), part(k), part(v), part(a), part(bb), st, heads)
				})

				for _, bonus := range []bool{true, false} {
					var u *ml.Vector
					if bonus {
						u = &ml.Vector{Name: "time_mix_first", V: randF32(rng, c, 0.5)}
						if err := b.PrepareVector(u); err != nil {
							t.Fatal(err)
						}
					}
					want, wantState := make([]float32, n*c), slices.Clone(state0)
					for h := range heads {
						o := h * d
						hd := &nn.WKV6Head{R: r[o:], K: k[o:], V: v[o:], W: w[o:], Out: want[o:], S: wantState[h*d*d : (h+1)*d*d], Stride: c, D: d, T: n}
						if u != nil {
							hd.U = u.V[o : o+d]
						}
						nn.WKV6GGML(hd)
					}
					scan(fmt.Sprintf("wkv6 (bonus %v)", bonus), want, wantState, func(o, st ml.Tensor, part func([]float32) ml.Tensor) {
						b.WKV6(o, part(r), part(k), part(v), part(w), st, u, heads)
					})
				}
			})
		}

		rng := rand.New(rand.NewPCG(3, 4))
		const n, c, heads = 37, 192, 3
		x, y := randF32(rng, n*c, 4), randF32(rng, n*c, 4)
		x[0], x[1], x[2] = 0, 1e-30, -88
		shift, diff := make([]float32, n*c), make([]float32, n*c)
		for i := range x {
			if i < c {
				shift[i] = -x[i]
			} else {
				shift[i] = x[i-c] - x[i]
			}
			diff[i] = x[i] - y[i]
		}
		tx, ty := b.put(t, n, c, x), b.put(t, n, c, y)
		o := b.Alloc(n, c)
		b.TokenShift(o, tx)
		requireBits(t, "token shift", b.Read(o), shift)
		b.Sub(o, tx, ty)
		requireBits(t, "difference", b.Read(o), diff)
		for _, f := range []struct {
			name string
			gpu  func(ml.Tensor)
			ref  func([]float32)
		}{
			{"sigmoid", b.Sigmoid, func(v []float32) { nn.Sigmoid(v, v) }},
			{"silu", b.SiLU, nn.SiLU32},
			{"RWKV-7 decay", func(x ml.Tensor) { b.Decay(x, ml.DecaySigmoid) }, nn.RWKVDecay},
			{"RWKV-6 decay", func(x ml.Tensor) { b.Decay(x, ml.DecayExp) }, nn.RWKV6Decay},
		} {
			tz := b.put(t, n, c, x)
			f.gpu(tz)
			want := slices.Clone(x)
			f.ref(want)
			for i, g := range b.Read(tz) {
				if u := math.Abs(float64(int64(math.Float32bits(g)) - int64(math.Float32bits(want[i])))); u > 1 {
					t.Errorf("%s(%g) = %g, want %g (%v ulps)", f.name, x[i], g, want[i], u)
				}
			}
		}
		u := &ml.Vector{Name: "time_mix_r_k", V: randF32(rng, c, 0.5)}
		if err := b.PrepareVector(u); err != nil {
			t.Fatal(err)
		}
		r, k, v := randF32(rng, n*c, 1), randF32(rng, n*c, 1), randF32(rng, n*c, 1)
		want := slices.Clone(x)
		for tt := range n {
			row := func(z []float32) []float32 { return z[tt*c : (tt+1)*c] }
			nn.RWKVBonus(row(want), row(r), row(k), row(v), u.V, c/heads)
		}
		tz := b.put(t, n, c, x)
		b.Bonus(tz, b.put(t, n, c, r), b.put(t, n, c, k), b.put(t, n, c, v), u, heads)
		got := b.Read(tz)
		var worst, most float64
		for i := range want {
			worst, most = max(worst, math.Abs(float64(got[i])-float64(want[i]))), max(most, math.Abs(float64(want[i])))
		}
		if worst > 2e-7*most {
			t.Errorf("current-token term: max |Δ| %.3g of %.3g, want <= 2e-7 of it", worst, most)
		}
		if err := b.Err(); err != nil {
			t.Fatal(err)
		}
	})
}

// requireBits requires got and want equal bit for bit (sameBits).
func requireBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if !sameBits(got[i], want[i]) {
			t.Errorf("%s: element %d is %v, want %v", what, i, got[i], want[i])
			return
		}
	}
}

// TestWKV7Refuses: WKV7 over heads that are not a multiple of 64, or past
// 256, and WKV6 over heads past 128 are errors naming the size, not
// launches.
func TestWKV7Refuses(t *testing.T) {
	b := testBackend(simEngine())
	defer b.Close()
	for _, d := range []int{32, 96, 320} {
		b.err = nil
		x := b.Alloc(2, 2*d)
		b.WKV7(x, x, x, x, x, x, x, b.Alloc(2*d, d), 2)
		if err := b.Err(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("WKV7 over heads of %d", d)) {
			t.Errorf("WKV7 over heads of %d: error %v", d, err)
		}
	}
	b.err = nil
	x := b.Alloc(2, 512)
	b.WKV6(x, x, x, x, x, b.Alloc(512, 256), nil, 2)
	if err := b.Err(); err == nil || !strings.Contains(err.Error(), "WKV6 over heads of 256: the GPU's takes at most 128") {
		t.Errorf("WKV6 over heads of 256: error %v", err)
	}
}
