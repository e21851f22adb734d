package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"

	"ppl.dev/gguf"
	"ppl.dev/quant"
	"ppl.dev/score/ml"
)

// Weight storage on the device.
//
// Quantized (the default): every matrix whose type has a dequantization
// kernel (kernels/dequant.cu) is uploaded as the file's GGUF blocks,
// unchanged, and each product dequantizes the rows it multiplies into a
// half-precision operand in scratch memory (the matrix's half type, from
// Precision) right before the cuBLAS GEMM: the kernel computes each
// weight as quant.Dequantize does and rounds it once, to the operand's
// type, as convertRows does for the matrices that take the host copy in
// this mode. An embedding's rows are dequantized to float32, exactly the
// CPU's. A matrix larger than slabBytes of halves is
// dequantized and multiplied a slab of output rows at a time, which bounds
// the scratch (a 128k-vocabulary output head); an expert stack dequantizes
// only the expert a product uses, right before its three GEMMs; an
// embedding dequantizes the window's token rows. The operand is one
// device buffer of the largest slab (operandBuf), reused by every product;
// it remembers what it holds, so the output head, which the logits' row
// blocks multiply one after another, is dequantized once per window (when
// it fits one slab).
//
// BF16 (--gpu-weights bf16, PPL_CUDA_WEIGHTS=bf16): the host dequantizes
// every matrix and uploads its bf16 rounding (uploadRows; an fp16 operand
// holds those bf16 values): the GPU path before weights stayed quantized,
// kept for comparison. Rounding straight to fp16 keeps 3 more bits of each
// weight: against the CPU on the file itself, that alone took the dense
// oracle models from max |Δ log p| 0.028-0.038 to 0.010-0.017 (emulation).
//
// A matrix of a type without a kernel and a row length not a multiple of
// 8 take the host copy in either mode, and so do the float32 products (a
// router, an F32 matrix: gpuBackend.storage), whose rows are copied as
// float32; the model's report names them.
const (
	WeightsQuantized = "quantized"
	WeightsBF16      = "bf16"
)

// WeightStorages are the values of --gpu-weights, the default first.
var WeightStorages = []string{WeightsQuantized, WeightsBF16}

// slabBytes bounds the dequantized operand of one product: a matrix
// larger than this is multiplied a slab of output rows at a time. 1 GiB
// holds every matrix of a 70B model but its output head in one slab.
var slabBytes int64 = 1 << 30

// weightsFromEnv is the weight storage $PPL_CUDA_WEIGHTS asks for
// (WeightsQuantized when unset).
func weightsFromEnv() (string, error) {
	v := os.Getenv("PPL_CUDA_WEIGHTS")
	if v == "" {
		return WeightsQuantized, nil
	}
	if !slices.Contains(WeightStorages, v) {
		return "", fmt.Errorf("cuda: PPL_CUDA_WEIGHTS=%q: want %s", v, strings.Join(WeightStorages, " or "))
	}
	return v, nil
}

// dequantKernel is a weight type's kernel in kernels/dequant.cu; grid:
// it reads the i-quants' lattices (iqGrids).
type dequantKernel struct {
	name string
	grid bool
}

// dequantKernels are the types with a device kernel. The float types'
// kernels read blocks of 8 values.
var dequantKernels = map[gguf.Type]dequantKernel{
	gguf.TypeF16:     {"dequant_f16", false},
	gguf.TypeBF16:    {"dequant_bf16", false},
	gguf.TypeQ4_0:    {"dequant_q4_0", false},
	gguf.TypeQ4_1:    {"dequant_q4_1", false},
	gguf.TypeQ5_0:    {"dequant_q5_0", false},
	gguf.TypeQ5_1:    {"dequant_q5_1", false},
	gguf.TypeQ8_0:    {"dequant_q8_0", false},
	gguf.TypeQ2_K:    {"dequant_q2_k", false},
	gguf.TypeQ3_K:    {"dequant_q3_k", false},
	gguf.TypeQ4_K:    {"dequant_q4_k", false},
	gguf.TypeQ5_K:    {"dequant_q5_k", false},
	gguf.TypeQ6_K:    {"dequant_q6_k", false},
	gguf.TypeIQ4_NL:  {"dequant_iq4_nl", false},
	gguf.TypeIQ4_XS:  {"dequant_iq4_xs", false},
	gguf.TypeMXFP4:   {"dequant_mxfp4", false},
	gguf.TypeNVFP4:   {"dequant_nvfp4", false},
	gguf.TypeTQ1_0:   {"dequant_tq1_0", false},
	gguf.TypeTQ2_0:   {"dequant_tq2_0", false},
	gguf.TypeQ1_0:    {"dequant_q1_0", false},
	gguf.TypeQ2_0:    {"dequant_q2_0", false},
	gguf.TypeIQ2_XXS: {"dequant_iq2_xxs", true},
	gguf.TypeIQ2_XS:  {"dequant_iq2_xs", true},
	gguf.TypeIQ2_S:   {"dequant_iq2_s", true},
	gguf.TypeIQ3_XXS: {"dequant_iq3_xxs", true},
	gguf.TypeIQ3_S:   {"dequant_iq3_s", true},
	gguf.TypeIQ1_S:   {"dequant_iq1_s", true},
	gguf.TypeIQ1_M:   {"dequant_iq1_m", true},
}

func init() {
	var names []string
	for _, k := range dequantKernels {
		names = append(names, k.name)
	}
	for _, k := range int8DecodeKernels { // int8dec.go
		names = append(names, k.name)
	}
	slices.Sort(names)
	kernelModules["dequant"] = names
}

// qmat is a matrix kept in its GGUF blocks on the device: rows (out ×
// experts) of rowBytes bytes each at p. Its gmat's p is 0: the matrix has
// no dense form; a product dequantizes its rows first (qproduct, qembed).
type qmat struct {
	p        ptr
	typ      gguf.Type
	kernel   string
	rowBytes int64
	grid     ptr // the lattices (iqGrids) when the kernel reads them
}

// qweights is the backend's weight storage: the mode and what Prepare did.
type qweights struct {
	mode       string
	grid       ptr                 // iqGrids on the device, once a matrix needs them
	bf16Bytes  int64               // what the matrices would take as a bf16 copy (the routers as float32)
	quantized  map[string]int      // matrices kept quantized, by type
	hostByWhy  map[string][]string // matrices that took the host copy in quantized mode, by why
	synthSlabs map[synthKey][]byte // a synthetic model's blocks (synthBlocks)
	operand    buf                 // the dequantized operand of products (operandBuf)
	held       operandKey          // the rows operand holds
}

// operandKey names rows [row0, row0+rows) of a quantized matrix,
// dequantized to halves or (int8) decoded to their integer form.
type operandKey struct {
	m          *qmat
	row0, rows int64
	int8       bool
}

// quantizedWhy returns "" when w can be kept quantized on the device, else
// why not.
func (b *gpuBackend) quantizedWhy(w *ml.Matrix, half bool) string {
	switch {
	case !half:
		return "a float32 product (a router, or F32 in the file)"
	case w.In%8 != 0:
		return "rows not a multiple of 8"
	}
	if _, ok := dequantKernels[w.Type]; !ok {
		return "no device kernel for " + w.Type.String()
	}
	return ""
}

// prepareQuantized keeps w in its blocks when the backend stores weights
// quantized and w can be; it reports whether it did (or failed).
func (b *gpuBackend) prepareQuantized(w *ml.Matrix) (bool, error) {
	q := &b.qw
	t := b.storage(w)
	rows := w.Out * max(w.Experts, 1)
	q.bf16Bytes += elemBytes(b.storageIn(w, WeightsBF16)) * int64(rows) * int64(w.In)
	if q.mode != WeightsQuantized {
		return false, nil
	}
	if why := b.quantizedWhy(w, t != f32); why != "" {
		if q.hostByWhy == nil {
			q.hostByWhy = map[string][]string{}
		}
		q.hostByWhy[why] = append(q.hostByWhy[why], w.Name)
		return false, nil
	}
	rb, err := w.Type.RowSize(uint64(w.In))
	if err == nil && uint64(len(w.Data)) != rb*uint64(rows) && b.synth == 0 {
		err = fmt.Errorf("%d bytes, want %d", len(w.Data), rb*uint64(rows))
	}
	var p ptr
	var h *Engine
	if err == nil {
		p, h, err = b.allocW(int64(rb) * int64(rows))
	}
	if err == nil {
		if b.synth != 0 {
			err = b.synthBlocks(h, p, w, int(rb), rows)
		} else {
			err = b.later(w.Name, h, func() error { return uploadPieces(h, p, w.Data) })
		}
	}
	k := dequantKernels[w.Type]
	if err == nil && k.grid && q.grid == 0 {
		g := iqGrids()
		var gh *Engine
		if q.grid, gh, err = b.allocW(int64(len(g))); err == nil {
			grid := q.grid
			err = b.later("the i-quant grids", gh, func() error { return gh.Do(func() error { return upload(gh, grid, g) }) })
		}
	}
	m := &gmat{t: t, q: &qmat{p: p, typ: w.Type, kernel: k.name, rowBytes: int64(rb)}}
	if k.grid {
		m.q.grid = q.grid
	}
	if err == nil && w.Bias != nil {
		m.bias, err = b.vectorData(w.Name, w.Bias)
	}
	if err != nil {
		return true, fmt.Errorf("cuda: tensor %s: %w", w.Name, err)
	}
	if q.quantized == nil {
		q.quantized = map[string]int{}
	}
	q.quantized[w.Type.String()]++
	w.Impl = m
	return true, nil
}

// synthBlocks fills the rows (at p on h) of a synthetic model's matrix (whose file
// holds only shapes) with blocks of its type: one slab of rows (at most 4
// MiB) quantized on the host from uniform values of the usual scale
// (1/sqrt(fan-in)), made once per type and row length and copied over the
// whole matrix. Throughput and memory do not depend on the values; the
// scale keeps the activations finite.
func (b *gpuBackend) synthBlocks(h *Engine, p ptr, w *ml.Matrix, rb, rows int) error {
	per := max(1, min(rows, (4<<20)/rb))
	key := synthKey{w.Type, w.In}
	slab := b.qw.synthSlabs[key]
	if len(slab) < per*rb {
		b.synth++
		vals := make([]float32, per*w.In)
		rng := rand.New(rand.NewPCG(b.synth, 2))
		a := math.Sqrt(3 / float64(w.In))
		for i := range vals {
			vals[i] = float32((2*float64(rng.Float64()) - 1) * a) // rounded: Float64 multiplies
		}
		slab = make([]byte, per*rb)
		if err := quant.Quantize(w.Type, vals, slab); err != nil {
			return err
		}
		if b.qw.synthSlabs == nil {
			b.qw.synthSlabs = map[synthKey][]byte{}
		}
		b.qw.synthSlabs[key] = slab
	}
	return b.later(w.Name, h, func() error {
		return h.Do(func() error {
			for r0 := 0; r0 < rows; r0 += per {
				n := min(per, rows-r0)
				if err := upload(h, p+ptr(int64(r0)*int64(rb)), slab[:n*rb]); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

type synthKey struct {
	t  gguf.Type
	in int
}

// dequantRows writes rows of m (row0+r, or idx[r] when idx is not 0) into
// out as otype (otypeBF16, otypeF16 or otypeF32), rows × in values.
// On the engine's thread.
func (e *Engine) dequantRows(out ptr, m *gmat, otype int, idx ptr, row0 int64, rows, in int) error {
	if groups := int64(rows) * int64(in/8); groups >= 1<<32 { // the kernel counts in 32 bits
		return fmt.Errorf("cuda: dequantizing %d rows of %d at once: more than 2^32 groups of 8", rows, in)
	}
	return e.launch(m.q.kernel, gridFor(int64(rows)*int64(in/8)), block256,
		out, m.q.p, idx, row0, rows, in, m.q.rowBytes, otype, m.q.grid)
}

// slabRows is how many output rows (of in values) of a matrix of out rows
// a product dequantizes at once.
func slabRows(out, in int) int {
	return int(max(1, min(int64(out), slabBytes/halfBytes(int64(in)))))
}

// operandBuf returns the operand buffer, grown to at least bytes; on the
// engine's thread. The buffer lives until the backend closes.
func (b *gpuBackend) operandBuf(bytes int64) (ptr, error) {
	q := &b.qw
	if q.operand.bytes < bytes {
		q.held = operandKey{}
	}
	if err := b.e.grow(&q.operand, bytes, "weight operand"); err != nil {
		return 0, err
	}
	return q.operand.p, nil
}

// hold runs fill, which writes the rows key names into the operand
// buffer, unless the buffer holds them already. On the engine's thread.
func (b *gpuBackend) hold(key operandKey, fill func() error) error {
	if b.qw.held == key {
		return nil
	}
	b.qw.held = operandKey{}
	if err := fill(); err != nil {
		return err
	}
	b.qw.held = key
	return nil
}

// qproduct is product's GEMM for a quantized matrix: dst (rows × w.Out,
// f32) = xh · W_eᵀ, W_e dequantized a slab of output rows at a time into
// the operand buffer (unless it holds that slab already). On the engine's
// thread.
func (b *gpuBackend) qproduct(dst *gt, xh ptr, w *ml.Matrix, e, rows int) error {
	m := gm(w)
	slab := slabRows(w.Out, w.In)
	h, err := b.operandBuf(halfBytes(int64(slab) * int64(w.In)))
	if err != nil {
		return err
	}
	for o0 := 0; o0 < w.Out; o0 += slab {
		n := min(slab, w.Out-o0)
		key := operandKey{m.q, int64(e)*int64(w.Out) + int64(o0), int64(n), false}
		if err := b.hold(key, func() error { return b.e.dequantRows(h, m, isF16(m.t), 0, key.row0, n, w.In) }); err != nil {
			return err
		}
		if err := b.e.gemm(dst.p+ptr(4*int64(o0)), f32, w.Out, xh, w.In, h, m.t, rows, w.In, n, 0); err != nil {
			return err
		}
	}
	return nil
}

// qembed is Embed for a quantized table: the tokens' rows dequantized to
// float32, the CPU's values. tok holds the tokens on the device. On the
// engine's thread.
func (b *gpuBackend) qembed(d *gt, w *ml.Matrix, tok ptr, n int) error {
	return b.e.dequantRows(d.p, gm(w), otypeF32, tok, 0, n, w.In)
}

// describe says how the weights are stored, for reports: the mode, the
// types kept quantized and the matrices that took the host copy.
func (q *qweights) describe() string {
	if q.mode != WeightsQuantized {
		return "bf16 copy made on the host (--gpu-weights bf16)"
	}
	var types []string
	for t, n := range q.quantized {
		types = append(types, fmt.Sprintf("%s ×%d", t, n))
	}
	slices.Sort(types)
	s := "quantized on the device (" + strings.Join(types, ", ") + ")"
	if len(q.hostByWhy) > 0 {
		var whys []string
		for why, names := range q.hostByWhy {
			whys = append(whys, fmt.Sprintf("%s: %s", why, abbreviate(names, 4)))
		}
		slices.Sort(whys)
		s += "; host copy for " + strings.Join(whys, "; ")
	}
	return s
}

// abbreviate lists up to k names and how many more.
func abbreviate(names []string, k int) string {
	if len(names) <= k {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:k], ", "), len(names)-k)
}

// The i-quants' lattices as kernels/dequant.cu reads them (its GRID_*
// offsets): the expanded grids of ppl.dev/quant, read back from its own
// decoder (quant.Dequantize of blocks with a unit scale, no signs and one
// grid entry per 8 or 4 weights), so that the Go tables stay the one
// source. 33792 bytes.
var iqGrids = sync.OnceValue(func() []byte {
	out := make([]byte, 0, iqGridBytes)
	one := []byte{0x00, 0x3c} // f16 1.0
	// probe decodes n entries of k values each, per entries per block:
	// set(block, slot, entry) writes entry e in slot s of a block whose
	// slot s decodes to weights [s·k, (s+1)·k); value(y) is the entry's
	// byte from the weight.
	probe := func(typ gguf.Type, n, k, per int, set func(b []byte, s, e int), value func(y float32) byte) {
		ts := typ.TypeSize()
		y := make([]float32, 256)
		for e0 := 0; e0 < n; e0 += per {
			b := make([]byte, ts)
			copy(b, one)
			for s := 0; s < per; s++ {
				set(b, s, e0+s)
			}
			if err := quant.Dequantize(typ, b, y); err != nil {
				panic(err) // a bug: the block sizes are the format's
			}
			for s := range per {
				for j := range k {
					out = append(out, value(y[s*k+j]))
				}
			}
		}
	}
	// IQ2_XXS: slot s = 4·ib + l, index byte l of group ib; scale 1/8.
	probe(gguf.TypeIQ2_XXS, 256, 8, 32, func(b []byte, s, e int) { b[2+8*(s/4)+s%4] = byte(e) },
		func(y float32) byte { return byte(y * 8) })
	// IQ2_XS: slot s, the uint16 at 2 + 2s; scale 1/8.
	probe(gguf.TypeIQ2_XS, 512, 8, 32, func(b []byte, s, e int) { b[2+2*s], b[3+2*s] = byte(e), byte(e>>8&1) },
		func(y float32) byte { return byte(y * 8) })
	// IQ2_S: low bits qs[s], high bits in qh[s/4] << (8 - 2·(s%4)); scale 1/8.
	probe(gguf.TypeIQ2_S, 1024, 8, 32, func(b []byte, s, e int) {
		b[2+s] = byte(e)
		b[66+s/4] |= byte(e>>8&3) << (2 * (s % 4))
	}, func(y float32) byte { return byte(y * 8) })
	// IQ3_XXS: slot s, qs[s] (one index per 4 weights); scale 1/4.
	probe(gguf.TypeIQ3_XXS, 256, 4, 64, func(b []byte, s, e int) { b[2+s] = byte(e) },
		func(y float32) byte { return byte(y * 4) })
	// IQ3_S: slot s = 8·ib + 2·l + h, qs[s], ninth bit bit 2l+h of qh[ib]; scale 1.
	probe(gguf.TypeIQ3_S, 512, 4, 64, func(b []byte, s, e int) {
		b[2+s] = byte(e)
		b[66+s/8] |= byte(e>>8&1) << (s % 8)
	}, func(y float32) byte { return byte(y) })
	// IQ1_S: slot s = 4·ib + l, qs[s] and bits 3l of the uint16 of group ib;
	// scale 1/8, shift +1/8: y = grid + 1/8.
	probe(gguf.TypeIQ1_S, 2048, 8, 32, func(b []byte, s, e int) {
		b[2+s] = byte(e)
		qh := binary.LittleEndian.Uint16(b[34+2*(s/4):]) | uint16(e>>8&7)<<(3*(s%4))
		binary.LittleEndian.PutUint16(b[34+2*(s/4):], qh)
	}, func(y float32) byte { return byte(int8(y - 0.125)) })
	if len(out) != iqGridBytes {
		panic(fmt.Sprintf("cuda: %d bytes of i-quant grids, want %d", len(out), iqGridBytes))
	}
	return out
})

const iqGridBytes = 256*8 + 512*8 + 1024*8 + 256*4 + 512*4 + 2048*8
