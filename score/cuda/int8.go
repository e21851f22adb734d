package cuda

import (
	"fmt"

	"ppl.dev/quant"
	"ppl.dev/score/ml"
)

// The int8 mode (--activations int8 on a GPU): the products with quantized
// weights multiply the weights' integers with activations quantized to 8
// bits as llama.cpp quantizes them on the CPU (Q8_0 or Q8_K blocks, the
// weight type's quant.Int8Format.ActBlock), on the integer tensor cores
// (kernels/int8mm.cu). The codes, the scales and every integer sum are the
// CPU int8 mode's; each output is int8Generic's (package nn) bits, one
// float32 multiply-add per group in order. The CPU's int8 mode sums the
// groups of some types in ggml's order instead, and computes the
// operations between products its own way, so per-token log-probs sit
// near the CPU int8 mode's, not on its bits.
//
// Each product decodes the rows it multiplies into their integer form
// (i8dec_* in kernels/dequant.cu: int8 codes minus the type's offset, a
// float32 scale and minimum per group) in the operand buffer, a slab at a
// time as the half-precision path dequantizes them (qweights.go); the
// activations are quantized once per input and activation block (once per
// head for latent attention's per-head stacks, HeadLinear). Matrices
// without an integer form take the fp32 mode's paths: F16, BF16 and the
// file's types without a kernel the half-precision products, F32
// matrices and routers float32 products (gpuBackend.storage).

func init() {
	kernelModules["int8mm"] = []string{"quant_acts", "i8mm_g32", "i8mm_g16", "i8mm_g32t", "i8mm_g16t"}
}

// qacts is a float32 input quantized on the device (quant_acts): n rows of
// k codes, a scale per 32 values, a sum of codes per 16.
type qacts struct {
	q, d, xs ptr
	n, k     int
}

// quantActs quantizes n rows of k floats (row t at x + 4·t·ldx) in blocks
// of block values (32 or 256) into scratch memory; on the engine's thread.
func (b *gpuBackend) quantActs(x ptr, ldx, n, k, block int) (*qacts, error) {
	if k%block != 0 {
		return nil, fmt.Errorf("cuda: quantizing rows of %d in blocks of %d", k, block)
	}
	a := &qacts{n: n, k: k}
	var err error
	for _, s := range []struct {
		p     *ptr
		bytes int64
	}{{&a.q, int64(n) * int64(k)}, {&a.d, 4 * int64(n) * int64(k/32)}, {&a.xs, 4 * int64(n) * int64(k/16)}} {
		if *s.p, err = b.scratchBytes(s.bytes); err != nil {
			return nil, err
		}
	}
	return a, b.e.quantizeActs(a, x, ldx, block)
}

// quantizeActs runs quant_acts: a's rows from x (row t at x + 4·t·ldx).
func (e *Engine) quantizeActs(a *qacts, x ptr, ldx, block int) error {
	return e.launch("quant_acts", gridFor(int64(a.n)*int64(a.k/block)), block256, a.q, a.d, a.xs, x, a.n, a.k, int64(ldx), block)
}

// i8mm runs i8mm_g<group>: y (n rows of ldy floats) = x · Wᵀ for n rows of
// a (row t being idx[t] when idx is not 0) and rows weight rows decoded
// at qw, sw, mw (0 without minima).
func (e *Engine) i8mm(y ptr, ldy int, a *qacts, idx ptr, n int, qw, sw, mw ptr, rows, group int) error {
	grid := dim3{uint32((rows + i8mmTile - 1) / i8mmTile), uint32((n + i8mmTile - 1) / i8mmTile), 1}
	return e.launch(fmt.Sprintf("i8mm_g%d", group), grid, dim3{128, 1, 1}, y, ldy, a.q, a.d, a.xs, idx, n, a.k, qw, sw, mw, rows)
}

// i8mmTiles runs i8mm_g<group>t: for each of the tiles (at tiles, four
// int32 each: the first token's place in idx or, idx 0, its row of a;
// tokens; first row of y; first weight row), y's rows = its tokens' rows
// of a times the rows weight rows from its first, decoded at qw, sw, mw.
func (e *Engine) i8mmTiles(y ptr, ldy int, a *qacts, idx, tiles ptr, ntiles int, qw, sw, mw ptr, rows, group int) error {
	if ntiles > 65535 {
		return fmt.Errorf("cuda: %d tiles of tokens in one int8 product (at most 65535)", ntiles)
	}
	grid := dim3{uint32((rows + i8mmTile - 1) / i8mmTile), uint32(ntiles), 1}
	return e.launch(fmt.Sprintf("i8mm_g%dt", group), grid, dim3{128, 1, 1}, y, ldy, a.q, a.d, a.xs, idx, tiles, a.k, qw, sw, mw, rows)
}

// int8Format is w's integer decoding when its products run in the int8
// mode: the mode is on, w is kept quantized, its type has a decoding
// kernel and its rows are whole activation blocks.
func (b *gpuBackend) int8Format(w *ml.Matrix) (quant.Int8Format, bool) {
	if !b.prec.Int8 || gm(w).q == nil {
		return quant.Int8Format{}, false
	}
	if _, ok := int8DecodeKernels[w.Type]; !ok {
		return quant.Int8Format{}, false
	}
	f, ok := quant.Int8FormatOf(w.Type)
	return f, ok && w.In%f.ActBlock == 0
}

// i8mmTile is i8mm's tile of tokens and of weight rows.
const i8mmTile = 64

// int8RowBytes is the bytes of one of w's rows decoded to its integer
// form: the integers, a scale per group and, with minima, a minimum.
func int8RowBytes(w *ml.Matrix) int64 {
	f, _ := quant.Int8FormatOf(w.Type)
	parts := int64(1)
	if f.HasMin {
		parts = 2
	}
	return int64(w.In) + 4*parts*int64(w.In/f.Group)
}

// int8Operand lays the operand buffer out for rows decoded rows of w:
// their integers at op, then their scales at sp and minima at mp (0
// without). On the engine's thread.
func (b *gpuBackend) int8Operand(w *ml.Matrix, rows int) (op, sp, mp ptr, err error) {
	f, _ := quant.Int8FormatOf(w.Type)
	if op, err = b.operandBuf(int64(rows) * int8RowBytes(w)); err != nil {
		return 0, 0, 0, err
	}
	sp = op + ptr(int64(rows)*int64(w.In))
	if f.HasMin {
		mp = sp + ptr(4*int64(rows)*int64(w.In/f.Group))
	}
	return op, sp, mp, nil
}

// int8Weights returns w's device matrix and integer format, or an error
// when the quantized rows a are not as wide as w's.
func int8Weights(w *ml.Matrix, a *qacts) (*gmat, quant.Int8Format, error) {
	f, _ := quant.Int8FormatOf(w.Type)
	if a.k != w.In {
		return nil, f, fmt.Errorf("cuda: int8 product of %d inputs with rows of %d", a.k, w.In)
	}
	return gm(w), f, nil
}

// i8product computes y (rows of ldy floats, W_e's outputs at its start) =
// x · W_eᵀ in the int8 mode, x the quantized rows a (row t being idx[t]
// when idx is not 0), W_e decoded a slab of output rows at a time into
// the operand buffer (unless it holds that slab already). On the engine's
// thread.
func (b *gpuBackend) i8product(y ptr, ldy int, a *qacts, idx ptr, rows int, w *ml.Matrix, e int) error {
	m, f, err := int8Weights(w, a)
	if err != nil {
		return err
	}
	k := w.In
	slab := int(max(1, min(int64(w.Out), slabBytes/int8RowBytes(w))))
	op, sp, mp, err := b.int8Operand(w, slab)
	if err != nil {
		return err
	}
	for o0 := 0; o0 < w.Out; o0 += slab {
		n := min(slab, w.Out-o0)
		key := operandKey{m.q, int64(e)*int64(w.Out) + int64(o0), int64(n), true}
		if err := b.hold(key, func() error { return b.e.int8Rows(op, sp, mp, m.q, key.row0, n, k) }); err != nil {
			return err
		}
		if err := b.e.i8mm(y+ptr(4*int64(o0)), ldy, a, idx, rows, op, sp, mp, n, f.Group); err != nil {
			return err
		}
	}
	return nil
}

// i8products is products' int8 path for several experts: their rows of
// the stack, from the first expert to the last, decoded in one launch and
// every expert's tokens multiplied in one i8mm_g<group>t launch, a tile
// of at most 64 tokens of one expert per block. x's rows are read through
// its index list from the set's first row (or, without one, are the set's
// rows). On the engine's thread.
func (b *gpuBackend) i8products(dst *gt, x operand, w *ml.Matrix, set *expertSet) error {
	m, f, err := int8Weights(w, x.acts)
	if err != nil {
		return err
	}
	e0, e1 := set.ex[0], set.ex[len(set.ex)-1]+1
	rows := (e1 - e0) * w.Out
	op, sp, mp, err := b.int8Operand(w, rows)
	if err != nil {
		return err
	}
	key := operandKey{m.q, int64(e0) * int64(w.Out), int64(rows), true}
	if err := b.hold(key, func() error { return b.e.int8Rows(op, sp, mp, m.q, key.row0, rows, w.In) }); err != nil {
		return err
	}
	var tiles []int32
	for j, n := range set.n {
		for t0 := 0; t0 < n; t0 += i8mmTile {
			tiles = append(tiles, int32(set.off[j]+t0), int32(min(i8mmTile, n-t0)), int32(set.off[j]+t0), int32((set.ex[j]-e0)*w.Out))
		}
	}
	tp, err := scratchCopy(b, tiles)
	if err != nil {
		return err
	}
	return b.e.i8mmTiles(dst.p, w.Out, x.acts, x.idx, tp, len(tiles)/4, op, sp, mp, w.Out, f.Group)
}

// int8Refusal says why the GPU cannot run activations act with weight
// storage storage ("" when it can).
func int8Refusal(act, storage string) string {
	switch {
	case act == "" || act == "fp32" || (act == "int8" && storage == WeightsQuantized):
		return ""
	case act == "int8":
		return "--activations int8 multiplies the file's quantized blocks, which --gpu-weights bf16 does not keep"
	}
	return fmt.Sprintf("activations %q: the GPU computes fp32 (half-precision products) or int8", act)
}
