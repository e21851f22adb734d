package cuda

import (
	"fmt"
	"slices"
	"unsafe"

	"ppl.dev/score/ml"
)

// The GPU's ml.Recurrent: Gated DeltaNet's operations (qwen35, qwen35moe,
// qwen3next), Mamba-2's (granitehybrid) and LFM2's (lfm2, lfm2moe), each
// a kernel of kernels/recurrent.cu. The delta rule runs over the whole
// window part in one launch, a thread block per value head and 32 columns
// of its state, which stays in registers (delta_net); the selective scan
// likewise, a block per head and 16 rows of its state (ssm_scan); both are
// float32 inside. LFM2's plain convolution and elementwise product
// (conv_f32, mul_f32) are the CPU's float32 arithmetic, bit for bit. The
// other operations are float64 inside with one rounding to float32
// (ml.Recurrent's plain definitions).

var _ ml.Recurrent = (*gpuBackend)(nil)

func init() {
	kernelModules["recurrent"] = []string{"gather_cols", "conv_silu", "conv_hist", "l2norm_f32", "delta_gates", "gated_rmsnorm", "delta_net", "ssm_scan", "ssm_scan_cols", "gated_groupnorm", "gate_silu", "conv_f32", "mul_f32"}
}

// deltaMaxDim is the largest head state size delta_net takes (DN_MAXD).
const deltaMaxDim = 128

// convMaxKernel is the largest convolution kernel conv_hist takes
// (CONV_MAX_HIST + 1).
const convMaxKernel = 16

// colsKey names a column table by its backing array: the architectures
// build their tables once at load, so each is uploaded once.
type colsKey struct {
	p *int
	n int
}

// colsTable is a column table on the device and the host values it holds.
type colsTable struct {
	p    ptr
	cols []int // the caller's slice: kept, so its array is not reused
	vals []int // its values when uploaded
}

// colTable returns cols on the device as int32, uploaded on first use
// into weight memory (freed with the model), and again when the slice's
// values changed since; on the engine's thread.
func (b *gpuBackend) colTable(cols []int) (ptr, error) {
	k := colsKey{unsafe.SliceData(cols), len(cols)}
	if c, ok := b.cols[k]; ok && slices.Equal(c.vals, cols) {
		return c.p, nil
	}
	c := make([]int32, len(cols))
	for i, v := range cols {
		c[i] = int32(v)
	}
	w, err := b.e.alloc(int64(4 * len(c)))
	if err != nil {
		return 0, err
	}
	b.weights = append(b.weights, w)
	if err := upload(b.e, w.p, c); err != nil {
		return 0, err
	}
	if b.cols == nil {
		b.cols = map[colsKey]*colsTable{}
	}
	b.cols[k] = &colsTable{p: w.p, cols: cols, vals: slices.Clone(cols)}
	return w.p, nil
}

func (b *gpuBackend) GatherCols(dst, x ml.Tensor, cols []int) {
	d, s := g(dst), g(x)
	gshape("gather output", d, s.rows, len(cols))
	for _, c := range cols {
		if c < 0 || c >= s.cols {
			panic(fmt.Sprintf("cuda backend: gather of column %d from %d×%d", c, s.rows, s.cols))
		}
	}
	if len(cols) == 0 || s.rows == 0 {
		return
	}
	b.do("column gather", func() error {
		cp, err := b.colTable(cols)
		if err != nil {
			return err
		}
		return b.e.launch("gather_cols", gridFor(int64(s.rows)*int64(len(cols))), block256, d.p, s.p, cp, s.rows, len(cols), s.cols)
	})
}

func (b *gpuBackend) ConvSiLU(dst, x, hist ml.Tensor, w, bias *ml.Vector) {
	var bp ptr // none
	if bias != nil {
		if len(bias.V) != x.Cols() {
			panic(fmt.Sprintf("cuda backend: %s has %d values for %d channels", bias.Name, len(bias.V), x.Cols()))
		}
		bp = gv(bias)
	}
	b.conv("conv_silu", dst, x, hist, w, bp)
}

// conv checks a convolution's operands and launches kernel (conv_silu
// with its bias pointer in bias, or conv_f32), then conv_hist for the
// history.
func (b *gpuBackend) conv(kernel string, dst, x, hist ml.Tensor, w *ml.Vector, bias ...any) {
	d, s, hs := g(dst), g(x), g(hist)
	C, n, K := s.cols, s.rows, hs.rows+1
	gshape("conv output", d, n, C)
	gshape("conv history", hs, K-1, C)
	if len(w.V) != C*K {
		panic(fmt.Sprintf("cuda backend: %s has %d values for %d channels × kernel %d", w.Name, len(w.V), C, K))
	}
	if K > convMaxKernel {
		b.Fail(fmt.Errorf("cuda: convolution kernel %d of %s: at most %d", K, w.Name, convMaxKernel))
		return
	}
	args := append(append([]any{d.p, s.p, hs.p, gv(w)}, bias...), n, C, K)
	b.do("convolution "+w.Name, func() error {
		e := b.e
		if err := e.launch(kernel, gridFor(int64(n)*int64(C)), block256, args...); err != nil {
			return err
		}
		if K == 1 {
			return nil
		}
		return e.launch("conv_hist", gridFor(int64(C)), block256, hs.p, s.p, n, C, K)
	})
}

func (b *gpuBackend) Zero(x ml.Tensor) {
	t := g(x)
	if t.count() == 0 {
		return
	}
	b.do("zero", func() error { return b.e.dev.memsetD32(t.p, 0, t.count()) })
}

// normBlock is the block of the per-row norms: one warp for short rows
// (the per-head norms of DeltaNet), 128 threads for long ones.
func normBlock(d int) dim3 {
	if d <= 256 {
		return dim3{32, 1, 1}
	}
	return dim3{128, 1, 1}
}

func (b *gpuBackend) L2Norm(dst, x ml.Tensor, eps float64) {
	d, s := g(dst), g(x)
	gshape("l2 norm output", d, s.rows, s.cols)
	if s.rows == 0 {
		return
	}
	b.do("L2 norm", func() error {
		return b.e.launch("l2norm_f32", dim3{uint32(s.rows), 1, 1}, normBlock(s.cols), d.p, s.p, s.rows, s.cols, eps)
	})
}

func (b *gpuBackend) DeltaGates(beta, alpha ml.Tensor, a, dtBias *ml.Vector) {
	be, al := g(beta), g(alpha)
	H, C := len(a.V), len(dtBias.V)
	gshape("delta beta", be, be.rows, H)
	gshape("delta alpha", al, be.rows, C)
	if C%H != 0 {
		panic(fmt.Sprintf("cuda backend: %s has %d values for %d heads", dtBias.Name, C, H))
	}
	if be.rows == 0 {
		return
	}
	b.do("delta gates", func() error {
		return b.e.launch("delta_gates", gridFor(al.count()), block256, be.p, al.p, gv(a), gv(dtBias), be.rows, H, C)
	})
}

// stateDtypes are delta_net's and ssm_scan's codes for ml.DeltaRule.State
// and ml.SSM.StateDtype.
var stateDtypes = map[string]int{"": 0, "f32": 0, "f16": 1, "bf16": 2}

func (b *gpuBackend) DeltaNet(dst, q, k, v, gg, beta, state ml.Tensor, dr *ml.DeltaRule) {
	o, qq, kk, vv, ga, bb, ss := g(dst), g(q), g(k), g(v), g(gg), g(beta), g(state)
	n, D, Hk, Hv := qq.rows, dr.Dim, dr.KHeads, dr.VHeads
	if err := dr.Shapes(dst, q, k, v, gg, beta, state); err != nil {
		panic("cuda backend: " + err.Error())
	}
	sdt, ok := stateDtypes[dr.State]
	if !ok {
		panic(fmt.Sprintf("cuda backend: recurrent state dtype %q", dr.State))
	}
	if D > deltaMaxDim {
		b.Fail(fmt.Errorf("cuda: delta rule heads of %d: at most %d", D, deltaMaxDim))
		return
	}
	if n == 0 {
		return
	}
	b.do("delta rule", func() error {
		return b.e.launch("delta_net", dim3{uint32(Hv), uint32((D + deltaCols - 1) / deltaCols), 1}, dim3{128, 1, 1},
			o.p, qq.p, kk.p, vv.p, ga.p, bb.p, ss.p, n, Hk, Hv, D, b2i(dr.Tiled), b2i(dr.KeyGates), sdt)
	})
}

// deltaCols is how many columns of a head's state one delta_net block
// holds (DN_COLS).
const deltaCols = 32

func (b *gpuBackend) GatedRMSNorm(dst, x, z ml.Tensor, w *ml.Vector, eps float64) {
	d, s, zz := g(dst), g(x), g(z)
	gshape("gated norm z", zz, s.rows, s.cols)
	gshape("gated norm output", d, s.rows, s.cols)
	D := len(w.V)
	if s.cols%D != 0 {
		panic(fmt.Sprintf("cuda backend: gated norm %s of %d over rows of %d", w.Name, D, s.cols))
	}
	rows := s.rows * s.cols / D
	if rows == 0 {
		return
	}
	b.do("gated norm "+w.Name, func() error {
		return b.e.launch("gated_rmsnorm", dim3{uint32(rows), 1, 1}, normBlock(D), d.p, s.p, zz.p, gv(w), rows, D, eps)
	})
}

// ssmMaxState is the largest state size ssm_scan takes (SS_MAXN), and
// ssmRows the state rows of a head one ssm_scan block holds (SS_BROWS);
// ssmColsMaxState is ssm_scan_cols's (SC_MAXN).
const (
	ssmMaxState     = 256
	ssmRows         = 16
	ssmColsMaxState = 32
)

// SSMScan is one ssm_scan launch, a block per head and 16 rows of its
// state; with decays per column (Mamba-1's heads of one channel) one
// ssm_scan_cols launch, a thread per channel. A state wider than the
// kernel's is refused.
func (b *gpuBackend) SSMScan(dst, x, dt, bm, cm, state ml.Tensor, s *ml.SSM) {
	if err := s.Shapes(dst, x, dt, bm, cm, state); err != nil {
		panic("cuda backend: " + err.Error())
	}
	if err := s.Validate(); err != nil {
		b.Fail(fmt.Errorf("cuda: %w", err))
		return
	}
	most := ssmMaxState
	if s.StateDecays {
		most = ssmColsMaxState
		if s.HeadDim != 1 || s.Groups != 1 {
			b.Fail(fmt.Errorf("cuda: selective scan with decays per column over heads of %d in %d groups: want heads of one channel in one group (Mamba-1's)", s.HeadDim, s.Groups))
			return
		}
	}
	if s.State > most {
		b.Fail(fmt.Errorf("cuda: selective scan with a state of %d: at most %d", s.State, most))
		return
	}
	o, xx, d, bb, cc, ss := g(dst), g(x), g(dt), g(bm), g(cm), g(state)
	n := xx.rows
	if n == 0 {
		return
	}
	sdt := stateDtypes[s.StateDtype]
	if s.StateDecays {
		b.do("selective scan", func() error {
			return b.e.launch("ssm_scan_cols", dim3{uint32((s.Heads + 127) / 128), 1, 1}, dim3{128, 1, 1},
				o.p, xx.p, d.p, bb.p, cc.p, ss.p, gv(s.A), gv(s.D), gv(s.DtBias), n, s.Heads, s.State, sdt)
		})
		return
	}
	b.do("selective scan", func() error {
		return b.e.launch("ssm_scan", dim3{uint32(s.Heads), uint32((s.HeadDim + ssmRows - 1) / ssmRows), 1}, dim3{128, 1, 1},
			o.p, xx.p, d.p, bb.p, cc.p, ss.p, gv(s.A), gv(s.D), gv(s.DtBias), n, s.Heads, s.HeadDim, s.Groups, s.State, sdt)
	})
}

// GatedGroupNorm is one gated_groupnorm launch, a block per group of a
// row; without weights one gate_silu launch, a thread per value.
func (b *gpuBackend) GatedGroupNorm(dst, x, z ml.Tensor, w *ml.Vector, group int, eps float64) {
	d, s, zz := g(dst), g(x), g(z)
	gshape("group norm z", zz, s.rows, s.cols)
	gshape("group norm output", d, s.rows, s.cols)
	if w == nil { // the gate alone
		n := int64(s.rows) * int64(s.cols)
		if n == 0 {
			return
		}
		b.do("gate", func() error {
			return b.e.launch("gate_silu", dim3{uint32((n + 255) / 256), 1, 1}, dim3{256, 1, 1}, d.p, s.p, zz.p, n)
		})
		return
	}
	if len(w.V) != s.cols || group <= 0 || s.cols%group != 0 {
		panic(fmt.Sprintf("cuda backend: group norm %s of %d in groups of %d over rows of %d", w.Name, len(w.V), group, s.cols))
	}
	blocks := s.rows * (s.cols / group)
	if blocks == 0 {
		return
	}
	b.do("group norm "+w.Name, func() error {
		return b.e.launch("gated_groupnorm", dim3{uint32(blocks), 1, 1}, normBlock(group), d.p, s.p, zz.p, gv(w), s.rows, s.cols, group, eps)
	})
}

// Conv is conv_f32, then conv_hist (ConvSiLU's) for the history: the
// CPU's float32 arithmetic (nn.Conv), bit for bit.
func (b *gpuBackend) Conv(dst, x, hist ml.Tensor, w *ml.Vector) {
	b.conv("conv_f32", dst, x, hist, w)
}

// Mul is mul_f32: each product rounded to float32, as the CPU's.
func (b *gpuBackend) Mul(dst, x, y ml.Tensor) {
	d, s, t := g(dst), g(x), g(y)
	gshape("mul operand", t, s.rows, s.cols)
	gshape("mul output", d, s.rows, s.cols)
	count := s.count()
	if count == 0 {
		return
	}
	b.do("elementwise product", func() error {
		return b.e.launch("mul_f32", gridFor(count), block256, d.p, s.p, t.p, count)
	})
}
