package cuda

import (
	"fmt"

	"ppl.dev/score/ml"
)

// The GPU's ml.RWKV (rwkv6, rwkv6qwen2, rwkv7, arwkv7), each a kernel of
// kernels/rwkv.cu: the token shift and the difference are the CPU's
// float32 arithmetic, the sigmoid, SiLU, the decays and the current-token
// term float64 inside with one rounding to float32, the recurrences (wkv6,
// wkv7) the CPU's float32 arithmetic bit for bit, each over the window's
// tokens in one launch: wkv6 a thread per state column, wkv7 a warp per
// state row, in registers.

var _ ml.RWKV = (*gpuBackend)(nil)

func init() {
	kernelModules["rwkv"] = []string{"token_shift", "sub_f32", "sigmoid_f32", "silu_f32", "rwkv_decay", "rwkv_bonus", "wkv6", "wkv7"}
}

// wkv7MaxHead is the largest head wkv7 takes (32·WKV_MAXC columns); its
// heads are multiples of 64 (a row's 64 lane accumulators). wkv6MaxHead is
// wkv6's (WKV6_MAXD).
const (
	wkv7MaxHead = 256
	wkv6MaxHead = 128
)

func (b *gpuBackend) TokenShift(dst, x ml.Tensor) {
	d, s := g(dst), g(x)
	gshape("token shift output", d, s.rows, s.cols)
	if s.count() == 0 {
		return
	}
	b.do("token shift", func() error {
		return b.e.launch("token_shift", gridFor(s.count()), block256, d.p, s.p, s.rows, s.cols)
	})
}

func (b *gpuBackend) Sub(dst, x, y ml.Tensor) {
	d, s, t := g(dst), g(x), g(y)
	gshape("sub operand", t, s.rows, s.cols)
	gshape("sub output", d, s.rows, s.cols)
	if s.count() == 0 {
		return
	}
	b.do("difference", func() error { return b.e.launch("sub_f32", gridFor(s.count()), block256, d.p, s.p, t.p, s.count()) })
}

func (b *gpuBackend) Sigmoid(x ml.Tensor) {
	d := g(x)
	if d.count() == 0 {
		return
	}
	b.do("sigmoid", func() error { return b.e.launch("sigmoid_f32", gridFor(d.count()), block256, d.p, d.count()) })
}

func (b *gpuBackend) SiLU(x ml.Tensor) {
	d := g(x)
	if d.count() == 0 {
		return
	}
	b.do("silu", func() error { return b.e.launch("silu_f32", gridFor(d.count()), block256, d.p, d.count()) })
}

func (b *gpuBackend) Decay(x ml.Tensor, kind ml.Decay) {
	d := g(x)
	if kind != ml.DecaySigmoid && kind != ml.DecayExp {
		panic(fmt.Sprintf("cuda backend: decay %d", kind))
	}
	if d.count() == 0 {
		return
	}
	b.do("decay", func() error { return b.e.launch("rwkv_decay", gridFor(d.count()), block256, d.p, d.count(), int(kind)) })
}

func (b *gpuBackend) WKV6(dst, r, k, v, w, state ml.Tensor, u *ml.Vector, heads int) {
	if err := ml.WKV6Shapes(dst, r, k, v, w, state, u, heads); err != nil {
		panic("cuda backend: " + err.Error())
	}
	o, rr := g(dst), g(r)
	d := rr.cols / heads
	if d > wkv6MaxHead {
		b.Fail(fmt.Errorf("cuda: WKV6 over heads of %d: the GPU's takes at most %d", d, wkv6MaxHead))
		return
	}
	if rr.rows == 0 {
		return
	}
	var up ptr
	if u != nil {
		up = gv(u)
	}
	b.do("WKV6", func() error {
		return b.e.launch("wkv6", dim3{uint32(heads), 1, 1}, dim3{uint32(d), 1, 1},
			o.p, rr.p, g(k).p, g(v).p, g(w).p, up, g(state).p, rr.rows, heads, d)
	})
}

func (b *gpuBackend) Bonus(dst, r, k, v ml.Tensor, u *ml.Vector, heads int) {
	d, rr, kk, vv := g(dst), g(r), g(k), g(v)
	for _, o := range []*gt{rr, kk, vv} {
		gshape("bonus operand", o, d.rows, d.cols)
	}
	if heads <= 0 || d.cols%heads != 0 || len(u.V) != d.cols {
		panic(fmt.Sprintf("cuda backend: bonus of %d columns in %d heads with %s of %d", d.cols, heads, u.Name, len(u.V)))
	}
	warps := int64(d.rows) * int64(heads)
	if warps == 0 {
		return
	}
	b.do("current-token term", func() error {
		return b.e.launch("rwkv_bonus", dim3{uint32((warps + 7) / 8), 1, 1}, block256, d.p, rr.p, kk.p, vv.p, gv(u), d.rows, heads, d.cols/heads)
	})
}

func (b *gpuBackend) WKV7(dst, r, w, k, v, a, bb, state ml.Tensor, heads int) {
	if err := ml.WKV7Shapes(dst, r, w, k, v, a, bb, state, heads); err != nil {
		panic("cuda backend: " + err.Error())
	}
	o, rr := g(dst), g(r)
	d := rr.cols / heads
	if d%64 != 0 || d > wkv7MaxHead {
		b.Fail(fmt.Errorf("cuda: WKV7 over heads of %d: the GPU's takes multiples of 64 up to %d", d, wkv7MaxHead))
		return
	}
	if rr.rows == 0 {
		return
	}
	b.do("WKV7", func() error {
		return b.e.launch("wkv7", dim3{uint32(heads * d / 8), 1, 1}, block256,
			o.p, rr.p, g(w).p, g(k).p, g(v).p, g(a).p, g(bb).p, g(state).p, rr.rows, heads, d)
	})
}
