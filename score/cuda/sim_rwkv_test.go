package cuda

import (
	"errors"
	"fmt"

	"ppl.dev/score/nn"
)

// The emulation of kernels/rwkv.cu: each kernel is the CPU's arithmetic
// outside its int8 modes (cpuBackend's ml.RWKV, score/model/cpu_rwkv.go):
// float32 differences, nn's float64 references, and nn.WKV6GGML's and
// nn.WKV7GGML's float32 arithmetic for the recurrences.
func init() {
	for name, k := range map[string]simKernel{
		"token_shift": {4, func(s *simDevice, a *simArgs, grid dim3) error {
			out, x, n, cols := f32s(a.ptr(0)), f32s(a.ptr(1)), a.int(2), a.int(3)
			if a.err != nil {
				return a.err
			}
			for i := range n * cols {
				if i < cols {
					out[i] = -x[i]
				} else {
					out[i] = x[i-cols] - x[i]
				}
			}
			return nil
		}},
		"sub_f32": {4, func(s *simDevice, a *simArgs, grid dim3) error {
			out, x, y, n := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2)), a.i64(3)
			if a.err != nil {
				return a.err
			}
			for i := range n {
				out[i] = x[i] - y[i]
			}
			return nil
		}},
		"sigmoid_f32": {2, func(s *simDevice, a *simArgs, grid dim3) error {
			x, n := f32s(a.ptr(0)), a.i64(1)
			if a.err != nil {
				return a.err
			}
			nn.Sigmoid(x[:n], x[:n])
			return nil
		}},
		"silu_f32": {2, func(s *simDevice, a *simArgs, grid dim3) error {
			x, n := f32s(a.ptr(0)), a.i64(1)
			if a.err != nil {
				return a.err
			}
			nn.SiLU32(x[:n])
			return nil
		}},
		"rwkv_decay": {3, func(s *simDevice, a *simArgs, grid dim3) error {
			x, n, kind := f32s(a.ptr(0)), a.i64(1), a.int(2)
			if a.err != nil {
				return a.err
			}
			switch kind {
			case 0:
				nn.RWKVDecay(x[:n])
			case 1:
				nn.RWKV6Decay(x[:n])
			default:
				return fmt.Errorf("rwkv_decay: kind %d", kind)
			}
			return nil
		}},
		"wkv6": {10, func(s *simDevice, a *simArgs, grid dim3) error {
			out, r, k, v, w := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2)), f32s(a.ptr(3)), f32s(a.ptr(4))
			var u []float32
			if p := a.ptr(5); p != nil {
				u = f32s(p)
			}
			state, n, heads, d := f32s(a.ptr(6)), a.int(7), a.int(8), a.int(9)
			if err := covers(grid[0], heads, "heads"); err != nil || a.err != nil {
				return errors.Join(err, a.err)
			}
			if d > wkv6MaxHead {
				return fmt.Errorf("wkv6: heads of %d", d)
			}
			c := heads * d
			for h := range heads {
				o := h * d
				hd := &nn.WKV6Head{R: r[o:], K: k[o:], V: v[o:], W: w[o:], Out: out[o:], S: state[h*d*d : (h+1)*d*d], Stride: c, D: d, T: n}
				if u != nil {
					hd.U = u[o : o+d]
				}
				nn.WKV6GGML(hd)
			}
			return nil
		}},
		"rwkv_bonus": {8, func(s *simDevice, a *simArgs, grid dim3) error {
			out, r, k, v, u := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2)), f32s(a.ptr(3)), f32s(a.ptr(4))
			n, heads, d := a.int(5), a.int(6), a.int(7)
			if err := covers(grid[0]*8, n*heads, "token heads"); err != nil || a.err != nil {
				return errors.Join(err, a.err)
			}
			c := heads * d
			for t := range n {
				row := func(x []float32) []float32 { return x[t*c : (t+1)*c] }
				nn.RWKVBonus(row(out), row(r), row(k), row(v), u[:c], d)
			}
			return nil
		}},
		"wkv7": {11, func(s *simDevice, a *simArgs, grid dim3) error {
			out, r, w, k, v := f32s(a.ptr(0)), f32s(a.ptr(1)), f32s(a.ptr(2)), f32s(a.ptr(3)), f32s(a.ptr(4))
			aa, bb, state := f32s(a.ptr(5)), f32s(a.ptr(6)), f32s(a.ptr(7))
			n, heads, d := a.int(8), a.int(9), a.int(10)
			if err := covers(grid[0]*8, heads*d, "state rows"); err != nil || a.err != nil {
				return errors.Join(err, a.err)
			}
			if d%64 != 0 || d > wkv7MaxHead {
				return fmt.Errorf("wkv7: heads of %d", d)
			}
			c := heads * d
			for h := range heads {
				o := h * d
				nn.WKV7GGML(&nn.WKV7Head{R: r[o:], W: w[o:], K: k[o:], V: v[o:], A: aa[o:], B: bb[o:], Out: out[o:],
					S: state[h*d*d : (h+1)*d*d], Stride: c, D: d, T: n}, false)
			}
			return nil
		}},
	} {
		simKernels[name] = k
	}
}
