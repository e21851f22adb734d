package cuda

import (
	"errors"
	"fmt"
	"unsafe"

	"ppl.dev/score/nn"
)

// The emulation of kernels/int8mm.cu: nn.QuantizeActs per row for
// quant_acts, nn.Int8Output per output for i8mm_g32 and i8mm_g16 (and
// their tiled forms, i8mm_g32t and i8mm_g16t), the
// references whose bits the CUDA C computes (TestInt8Parity holds the host
// device's CUDA C to them).
func init() {
	simKernels["quant_acts"] = simKernel{8, simQuantActs}
	simKernels["i8mm_g32"] = simKernel{12, simI8mm(32)}
	simKernels["i8mm_g16"] = simKernel{12, simI8mm(16)}
	simKernels["i8mm_g32t"] = simKernel{12, simI8mmTiles(32)}
	simKernels["i8mm_g16t"] = simKernel{12, simI8mmTiles(16)}
}

func i8s(b []byte) []int8 { return unsafe.Slice((*int8)(unsafe.Pointer(&b[0])), len(b)) }

func simQuantActs(s *simDevice, a *simArgs, grid dim3) error {
	q, d, xs, x := a.ptr(0), a.ptr(1), a.ptr(2), a.ptr(3)
	n, k, ldx, ab := a.int(4), a.int(5), a.i64(6), a.int(7)
	switch {
	case a.err != nil:
		return a.err
	case ab != 32 && ab != 256 || k%ab != 0:
		return fmt.Errorf("quant_acts: rows of %d in blocks of %d", k, ab)
	case len(q) < n*k || len(d) < 4*n*(k/32) || len(xs) < 4*n*(k/16):
		return fmt.Errorf("quant_acts: outputs too small for %d rows of %d", n, k)
	case n > 0 && len(x) < 4*((n-1)*int(ldx)+k):
		return fmt.Errorf("quant_acts: input too small for %d rows of %d, stride %d", n, k, ldx)
	}
	qv, dv, sv, xv := i8s(q), f32s(d), i32s(xs), f32s(x)
	for t := range n {
		nn.QuantizeActs(xv[t*int(ldx):t*int(ldx)+k], ab, qv[t*k:(t+1)*k], dv[t*(k/32):(t+1)*(k/32)], sv[t*(k/16):(t+1)*(k/16)])
	}
	return nil
}

func simI8mm(g int) func(s *simDevice, a *simArgs, grid dim3) error {
	return func(s *simDevice, a *simArgs, grid dim3) error {
		y, ldy, qa, da, idx := a.ptr(0), a.int(1), a.ptr(2), a.ptr(3), a.ptr(5)
		a.ptr(4) // the sums of codes: Int8Output sums the codes itself
		n, k, qw, sw, mw, rows := a.int(6), a.int(7), a.ptr(8), a.ptr(9), a.ptr(10), a.int(11)
		if a.err != nil {
			return a.err
		}
		if err := errors.Join(covers(grid[0]*i8mmTile, rows, "weight rows"), covers(grid[1]*i8mmTile, n, "tokens")); err != nil {
			return err
		}
		i8mmRef(g, f32s(y), ldy, i8s(qa), f32s(da), idx, 0, n, k, qw, sw, mw, rows)
		return nil
	}
}

// simI8mmTiles is i8mm_g<g>t: i8mmRef for each tile.
func simI8mmTiles(g int) func(s *simDevice, a *simArgs, grid dim3) error {
	return func(s *simDevice, a *simArgs, grid dim3) error {
		y, ldy, qa, da, idx, tiles := a.ptr(0), a.int(1), a.ptr(2), a.ptr(3), a.ptr(5), a.ptr(6)
		a.ptr(4)
		k, qw, sw, mw, rows := a.int(7), a.ptr(8), a.ptr(9), a.ptr(10), a.int(11)
		if a.err != nil {
			return a.err
		}
		if err := covers(grid[0]*i8mmTile, rows, "weight rows"); err != nil {
			return err
		}
		tv, yv, ng := i32s(tiles), f32s(y), k/g
		for b := range int(grid[1]) {
			t := tv[4*b : 4*b+4]
			if t[1] > i8mmTile {
				return fmt.Errorf("i8mm_g%dt: tile %d of %d tokens", g, b, t[1])
			}
			var ix []byte
			base := int(t[0])
			if idx != nil {
				ix, base = idx[4*base:], 0
			}
			var m []byte
			if mw != nil {
				m = mw[4*int(t[3])*ng:]
			}
			i8mmRef(g, yv[int(t[2])*ldy:], ldy, i8s(qa), f32s(da), ix, base, int(t[1]), k, qw[int(t[3])*k:], sw[4*int(t[3])*ng:], m, rows)
		}
		return nil
	}
}

// i8mmRef is nn.Int8Output for each output: y's row t (of ldy), outputs
// 0..rows-1, from the activations' row idx[t] (or base + t without idx).
func i8mmRef(g int, yv []float32, ldy int, qav []int8, dav []float32, idx []byte, base, n, k int, qw, sw, mw []byte, rows int) {
	ng := k / g
	qwv, swv := i8s(qw), f32s(sw)
	var mwv []float32
	if mw != nil {
		mwv = f32s(mw)
	}
	for t := range n {
		src := base + t
		if idx != nil {
			src = int(i32s(idx)[t])
		}
		qx, d := qav[src*k:(src+1)*k], dav[src*(k/32):(src+1)*(k/32)]
		for r := range rows {
			var m []float32
			if mwv != nil {
				m = mwv[r*ng : (r+1)*ng]
			}
			yv[t*ldy+r] = nn.Int8Output(qwv[r*k:(r+1)*k], qx, swv[r*ng:(r+1)*ng], m, d, g)
		}
	}
}
