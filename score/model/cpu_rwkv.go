package model

import (
	"fmt"

	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// The CPU's ml.RWKV: nn's RWKV-7 operations, in float64 rounded once, or in
// the int8 modes (nn.Context.LlamaCPP) as llama.cpp's graph rounds them.

var _ ml.RWKV = (*cpuBackend)(nil)

func (b *cpuBackend) TokenShift(dst, x ml.Tensor) {
	d, s := ct(dst), ct(x)
	shape("token shift output", d, s.rows, s.cols)
	c := s.cols
	b.parallelRows(s.rows, c, 1, func(lo, hi int) {
		for i := lo * c; i < hi*c; i++ {
			if i < c {
				d.d[i] = -s.d[i]
			} else {
				d.d[i] = s.d[i-c] - s.d[i]
			}
		}
	})
}

func (b *cpuBackend) Sigmoid(x ml.Tensor) {
	d := ct(x)
	f := nn.Sigmoid
	if b.c.LlamaCPP {
		f = nn.GGMLSigmoid
	}
	b.c.Parallel(d.rows, func(_, lo, hi int) {
		v := d.d[lo*d.cols : hi*d.cols]
		f(v, v)
	})
}

func (b *cpuBackend) SiLU(x ml.Tensor) {
	d := ct(x)
	b.c.Parallel(d.rows, func(_, lo, hi int) {
		v := d.d[lo*d.cols : hi*d.cols]
		if b.c.LlamaCPP {
			nn.GGMLSiLURows(v, d.cols, b.c.GGMLAVX2)
			return
		}
		nn.SiLU32(v)
	})
}

func (b *cpuBackend) Decay(x ml.Tensor, kind ml.Decay) {
	d := ct(x)
	f := map[ml.Decay]func([]float32){ml.DecaySigmoid: nn.RWKVDecay, ml.DecayExp: nn.RWKV6Decay}[kind]
	if b.c.LlamaCPP {
		f = map[ml.Decay]func([]float32){ml.DecaySigmoid: nn.GGMLRWKVDecay, ml.DecayExp: nn.GGMLRWKV6Decay}[kind]
	}
	if f == nil {
		panic(fmt.Sprintf("cpu backend: decay %d", kind))
	}
	b.c.Parallel(d.rows, func(_, lo, hi int) { f(d.d[lo*d.cols : hi*d.cols]) })
}

func (b *cpuBackend) Sub(dst, x, y ml.Tensor) {
	d, s, t := ct(dst), ct(x), ct(y)
	shape("sub operand", t, s.rows, s.cols)
	shape("sub output", d, s.rows, s.cols)
	b.parallelValues(s, func(v []float32, lo, hi int) {
		o, w := d.d[lo:hi], t.d[lo:hi]
		for i, x := range v {
			o[i] = x - w[i]
		}
	})
}

// WKV7 runs the recurrence per head with nn.WKV7GGML (ggml-cpu's roundings,
// its AVX2 build's lanes with nn.Context.GGMLAVX2; the float32 mode
// computes as the AVX-512 build), heads in parallel.
func (b *cpuBackend) WKV7(dst, r, w, k, v, a, bb, state ml.Tensor, heads int) {
	if err := ml.WKV7Shapes(dst, r, w, k, v, a, bb, state, heads); err != nil {
		panic("cpu backend: " + err.Error())
	}
	o, rr, ww, kk, vv, aa, bv, ss := ct(dst), ct(r), ct(w), ct(k), ct(v), ct(a), ct(bb), ct(state)
	n, c := rr.rows, rr.cols
	if n == 0 {
		return
	}
	D := c / heads
	avx2 := b.c.LlamaCPP && b.c.GGMLAVX2
	b.c.Parallel(heads, func(_, lo, hi int) {
		for h := lo; h < hi; h++ {
			o0 := h * D
			nn.WKV7GGML(&nn.WKV7Head{R: rr.d[o0:], W: ww.d[o0:], K: kk.d[o0:], V: vv.d[o0:], A: aa.d[o0:], B: bv.d[o0:],
				Out: o.d[o0:], S: ss.d[h*D*D : (h+1)*D*D], Stride: c, D: D, T: n}, avx2)
		}
	})
}

// WKV6 runs the recurrence per head with nn.WKV6GGML (ggml-cpu's
// roundings, the same in both builds and the float32 mode), heads in
// parallel.
func (b *cpuBackend) WKV6(dst, r, k, v, w, state ml.Tensor, u *ml.Vector, heads int) {
	if err := ml.WKV6Shapes(dst, r, k, v, w, state, u, heads); err != nil {
		panic("cpu backend: " + err.Error())
	}
	o, rr, kk, vv, ww, ss := ct(dst), ct(r), ct(k), ct(v), ct(w), ct(state)
	n, c := rr.rows, rr.cols
	if n == 0 {
		return
	}
	D := c / heads
	b.c.Parallel(heads, func(_, lo, hi int) {
		for h := lo; h < hi; h++ {
			o0 := h * D
			hd := &nn.WKV6Head{R: rr.d[o0:], K: kk.d[o0:], V: vv.d[o0:], W: ww.d[o0:], Out: o.d[o0:],
				S: ss.d[h*D*D : (h+1)*D*D], Stride: c, D: D, T: n}
			if u != nil {
				hd.U = u.V[o0 : o0+D]
			}
			nn.WKV6GGML(hd)
		}
	})
}

func (b *cpuBackend) Bonus(dst, r, k, v ml.Tensor, u *ml.Vector, heads int) {
	d, rr, kk, vv := ct(dst), ct(r), ct(k), ct(v)
	c := d.cols
	for _, o := range []*cpuT{rr, kk, vv} {
		shape("bonus operand", o, d.rows, c)
	}
	if heads <= 0 || c%heads != 0 || len(u.V) != c {
		panic(fmt.Sprintf("cpu backend: bonus of %d columns in %d heads with %s of %d", c, heads, u.Name, len(u.V)))
	}
	f := nn.RWKVBonus
	if b.c.LlamaCPP {
		f = nn.GGMLRWKVBonus
	}
	b.c.Parallel(d.rows, func(_, lo, hi int) {
		for t := lo; t < hi; t++ {
			row := func(x *cpuT) []float32 { return x.d[t*c : (t+1)*c] }
			f(row(d), row(rr), row(kk), row(vv), u.V, c/heads)
		}
	})
}
