package nn

import (
	"fmt"
	"unsafe"

	"ppl.dev/gguf"
	"ppl.dev/quant"
)

// Linear is a weight matrix stored as GGUF rows, with an optional output
// scale and bias: y = (x·Wᵀ)·s + b, one float32 rounding for each of the
// product, the scaling and the bias. W has Out rows of In elements (GGUF
// shape [In, Out], ne0 = In); each row is RowBytes bytes of Type, kept
// where the file maps them.
type Linear struct {
	Name     string    // the weight tensor's name, for messages
	Type     gguf.Type // storage type of W
	In, Out  int       // W is (Out, In)
	Data     []byte    // Out rows of RowBytes bytes
	RowBytes int
	Scale    float32   // s: 0 for none (NVFP4's per-tensor second-level scale)
	Bias     []float32 // nil, or Out values
	// Routed marks one expert's matrix of a stack, which llama.cpp
	// multiplies with MUL_MAT_ID: in the int8 modes' ggml order
	// (Context.LlamaCPP) the types ggml repacks in 4-row groups (Q4_K, and
	// Q2_K in the AVX-512 build) take their GEMV's order for every row,
	// never their GEMM's.
	Routed bool
	// TensorRows, where the matrix is consecutive rows of a larger weight
	// tensor (a fused projection's part), is that tensor's row count: what
	// llama.cpp's AMX buffer decides on (AMXTaken); 0 otherwise.
	TensorRows int
}

// NewLinear checks a weight tensor's data and returns it as a Linear.
func NewLinear(name string, typ gguf.Type, in, out int, data []byte) (*Linear, error) {
	if !quant.Supported(typ) {
		return nil, fmt.Errorf("tensor %s: weight type %v not supported", name, typ)
	}
	rb, err := typ.RowSize(uint64(in))
	if err != nil {
		return nil, fmt.Errorf("tensor %s: %w", name, err)
	}
	if uint64(len(data)) != rb*uint64(out) {
		return nil, fmt.Errorf("tensor %s: %d bytes of data, want %d (%d rows of %d %v)", name, len(data), rb*uint64(out), out, in, typ)
	}
	return &Linear{Name: name, Type: typ, In: in, Out: out, Data: data, RowBytes: int(rb)}, nil
}

// panelRows is how many weight rows a worker decodes at a time: one panel,
// stored transposed (In × 32 floats, 32 KB per 256 inputs) so that the tile
// kernels read one contiguous row of 32 weights per step of the dot
// products; it stays in the L2 cache while every token of the window
// streams past it.
const panelRows = 32

// Forward computes out = (x·Wᵀ)·s + b for n rows of x:
// x (n, In) @ Wᵀ (In, Out) -> out (n, Out). See ForwardShared.
func (l *Linear) Forward(c *Context, out, x []float32, n int) {
	ForwardShared(c, x, n, []*Linear{l}, [][]float32{out})
}

// ForwardShared computes outs[i] = (x·ls[i]ᵀ)·s + b for matrices that read the
// same input x (n, In): the query, key and value projections, or the gate
// and up projections. Their panels go to the workers together, and in the
// int8 mode x is quantized once.
//
// Workers take W's rows a panel at a time, decode the panel once and
// multiply it with all n rows of x, so each weight is decoded once per call
// whatever n is. In the default mode the panel is float32 (Gemm) and each
// output is one FMA chain over the inputs in order; in the int8 mode
// (Context.Int8, for weight types with an integer decoding) the panel is
// integers (see int8.go). Then the bias is added. Every output is computed
// the same way on every CPU and for any number of threads.
func ForwardShared(c *Context, x []float32, n int, ls []*Linear, outs [][]float32) {
	if len(ls) == 0 {
		return
	}
	if n > linearRows {
		// Long windows a block of rows at a time, so that the rows of x
		// that stream past each panel stay in the caches.
		k := ls[0].In
		sub := make([][]float32, len(outs))
		for r0 := 0; r0 < n; r0 += linearRows {
			b := min(linearRows, n-r0)
			for i, l := range ls {
				sub[i] = outs[i][r0*l.Out : (r0+b)*l.Out]
			}
			mark := c.Mark()
			ForwardShared(c, x[r0*k:(r0+b)*k], b, ls, sub)
			c.Release(mark)
		}
		return
	}
	k := ls[0].In
	check(ls[0].Name+" input", len(x), n*k)
	var acts [2]*qacts               // by activation block: 32, 256
	var rounded [2][]float32         // x rounded to f16, bf16 (int8 mode)
	panels := make([]int, len(ls)+1) // panels[i]: first panel of matrix i
	per := 0
	for i, l := range ls {
		if l.In != k {
			panic(fmt.Sprintf("nn: ForwardShared: %s has %d inputs, %s %d", l.Name, l.In, ls[0].Name, k))
		}
		check(l.Name+" output", len(outs[i]), n*l.Out)
		panels[i+1] = panels[i] + (l.Out+panelRows-1)/panelRows
		if f, ok := l.int8Able(); ok && c.Int8 {
			per = max(per, int8Scratch(k, f))
			if acts[f.ActBlock/256] == nil {
				acts[f.ActBlock/256] = &qacts{actBlock: f.ActBlock, sums4: c.LlamaCPP, avx2: c.GGMLAVX2}
			}
			acts[f.ActBlock/256].mins = acts[f.ActBlock/256].mins || c.LlamaCPP && f.HasMin
		} else {
			per = max(per, fp32Scratch(k))
		}
	}
	if n == 0 {
		return
	}
	for _, a := range acts {
		if a != nil {
			c.quantizeActs(a, x, n, k, a.actBlock)
		}
	}
	pairs := c.bf16PairsUsed() // BF16 activations in bf16Pairs's order
	var raw []uint16           // or as bf16 values (bf16RawUsed)
	if c.Int8 {
		for _, l := range ls {
			if l.Type == gguf.TypeBF16 && c.bf16RawUsed() {
				if raw == nil {
					f := c.Alloc((n*k + 1) / 2)
					raw = unsafe.Slice((*uint16)(unsafe.Pointer(&f[0])), n*k)
					c.Parallel(n, func(_, lo, hi int) {
						for i := lo * k; i < hi*k; i++ {
							raw[i] = quant.F32ToBF16(x[i])
						}
					})
				}
				continue
			}
			if r := halfRounding(l.Type); r >= 0 && rounded[r] == nil {
				rounded[r] = c.Alloc(n * k)
				c.Parallel(n, func(_, lo, hi int) {
					roundHalf(r, rounded[r][lo*k:hi*k], x[lo*k:hi*k])
					if r == 1 && pairs {
						row := make([]float32, k)
						for t := lo; t < hi; t++ {
							copy(row, rounded[r][t*k:(t+1)*k])
							bf16Pairs(rounded[r][t*k:(t+1)*k], row)
						}
					}
				})
			}
		}
	}
	np := panels[len(ls)]
	w := c.Workers(np)
	scratch := c.Alloc(w * per)
	c.ParallelDynamic(np, 1, func(worker, lo, hi int) {
		buf := scratch[worker*per : (worker+1)*per]
		i := 0
		for p := lo; p < hi; p++ {
			for p >= panels[i+1] {
				i++
			}
			l, out := ls[i], outs[i]
			pi := p - panels[i]
			r0 := pi * panelRows
			r1 := min(r0+panelRows, l.Out)
			f, ok := l.int8Able()
			amx := c.GGMLAMX && c.LlamaCPP && l.amxTaken()
			if amx && ok {
				l.panelAMX(buf, r0, r1, acts[f.ActBlock/256], f, out)
			} else if amx && l.Type == gguf.TypeF16 {
				l.panelF16AMX(buf, r0, r1, x, n, out)
			} else if p := ggmlPanels[l.Type]; ok && c.LlamaCPP && p != nil {
				p(l, buf, r0, r1, acts[f.ActBlock/256], out)
			} else if ok && c.Int8 {
				l.panelInt8(buf, r0, r1, acts[f.ActBlock/256], f, false, out)
			} else if raw != nil && l.Type == gguf.TypeBF16 {
				l.panelBF16Raw(r0, r1, raw, n, out)
			} else if r := halfRounding(l.Type); r >= 0 && c.LlamaCPP {
				l.panelHalf(buf, r0, r1, rounded[r], n, c.GGMLAVX2, r == 1 && pairs, out)
			} else if l.Type == gguf.TypeF32 && c.LlamaCPP {
				l.panelF32(r0, r1, x, n, c.GGMLAVX2, out)
			} else if r := halfRounding(l.Type); r >= 0 && c.Int8 {
				l.panelFP32(buf, r0, r1, rounded[r], n, out)
			} else {
				l.panelFP32(buf, r0, r1, x, n, out)
			}
			if l.Scale != 0 {
				for t := 0; t < n; t++ {
					o := out[t*l.Out+r0 : t*l.Out+r1]
					for r := range o {
						o[r] *= l.Scale
					}
				}
			}
			if l.Bias != nil {
				for t := 0; t < n; t++ {
					o := out[t*l.Out+r0 : t*l.Out+r1]
					for r := range o {
						o[r] += l.Bias[r0+r]
					}
				}
			}
		}
	})
}

// halfRounding says how the int8 mode rounds the activations multiplied
// with float weights, as llama.cpp does (the weight type's vec_dot_type):
// 0 to f16 for F16 weights, 1 to bf16 for BF16 weights, -1 not at all.
func halfRounding(t gguf.Type) int {
	switch t {
	case gguf.TypeF16:
		return 0
	case gguf.TypeBF16:
		return 1
	}
	return -1
}

// roundHalf rounds x to f16 (r = 0) or bf16 (r = 1), nearest even, into dst.
func roundHalf(r int, dst, x []float32) {
	i := 0
	if f := kern.roundF16; r == 0 && f != nil && len(x) >= 16 {
		i = len(x) &^ 15
		f(&dst[0], &x[0], i)
	}
	for ; i < len(x); i++ {
		if r == 0 {
			dst[i] = quant.F16ToF32(quant.F32ToF16(x[i]))
		} else {
			dst[i] = quant.BF16ToF32(quant.F32ToBF16(x[i]))
		}
	}
}

// linearRows is the most rows of x one pass over the panels takes: 4096
// rows of 1024 inputs are 16 MB.
const linearRows = 4096

// fp32Scratch is the float32s panelFP32 needs for rows of k inputs: the
// decoded rows, the panel and a C tile for the last panel.
func fp32Scratch(k int) int { return 2*panelRows*k + gemmTileRows*panelRows }

// panelFP32 computes columns [r0, r1) of out = x·Wᵀ in float32.
func (l *Linear) panelFP32(buf []float32, r0, r1 int, x []float32, n int, out []float32) {
	k := l.In
	rows, panel, ctile := buf[:panelRows*k], buf[panelRows*k:2*panelRows*k], buf[2*panelRows*k:]
	l.dequantize(rows[:(r1-r0)*k], r0, r1)
	pack32(panel, rows, k, r1-r0)
	if r1-r0 == panelRows {
		Gemm(n, panelRows, x, k, panel, panelRows, k, out[r0:], l.Out, nil)
		return
	}
	for t0 := 0; t0 < n; t0 += gemmTileRows {
		m := min(gemmTileRows, n-t0)
		Gemm(m, panelRows, x[t0*k:], k, panel, panelRows, k, ctile, panelRows, nil)
		for t := range m {
			copy(out[(t0+t)*l.Out+r0:(t0+t)*l.Out+r1], ctile[t*panelRows:])
		}
	}
}

// gemmTileRows is the most rows of A one kernel call takes.
const gemmTileRows = 12

// pack32 writes the first rows rows of src (rows × k, row-major) to dst as
// a k × 32 panel, dst[p·32 + r] = src[r·k + p], padding the missing rows
// with zeros.
func pack32(dst, src []float32, k, rows int) {
	check("pack32 dst", len(dst), 32*k)
	check("pack32 src", len(src), rows*k)
	if k == 0 {
		return
	}
	pack32Words(unsafe.Slice((*uint32)(unsafe.Pointer(&dst[0])), len(dst)), unsafe.Slice((*uint32)(unsafe.Pointer(&src[0])), len(src)), k, rows)
}

// packCodes is pack32Words for a panel of biased weight codes (the lanes,
// tiled and int8 kernels'): with flip (the kernels of a level with
// kernels.flipBias), each byte q becomes q ^ 0x80, SDOT's signed q - 128,
// once for all the activation rows.
func packCodes(dst, src []uint32, k, rows int, flip bool) {
	pack32Words(dst, src, k, rows)
	if flip {
		flipCodes(dst[:32*k])
	}
}

// flipCodes flips the bias of every byte of p: q ^ 0x80.
func flipCodes(p []uint32) {
	for i := range p {
		p[i] ^= 0x80808080
	}
}

// pack32Words is pack32 for any 32-bit elements.
func pack32Words(dst, src []uint32, k, rows int) {
	p0 := 0
	if t := kern.transpose16; t != nil && k >= 16 {
		tiles := k / 16
		for h := 0; h < 2 && rows >= 16*(h+1); h++ {
			t(&dst[16*h], 32, &src[16*h*k], k, tiles)
		}
		if rows == 32 || rows == 16 {
			p0 = 16 * tiles
		}
	}
	for p := p0; p < k; p++ {
		d := dst[p*32 : p*32+32]
		for r := range rows {
			d[r] = src[r*k+p]
		}
		clear(d[rows:])
	}
	if p0 > 0 && rows == 16 {
		for p := range p0 {
			clear(dst[p*32+16 : p*32+32])
		}
	}
}

// dequantize writes rows [r0, r1) of W to dst as float32 ((r1-r0) × In).
func (l *Linear) dequantize(dst []float32, r0, r1 int) {
	// NewLinear checked type and sizes; DequantizeRow panics naming both if not.
	quant.DequantizeRow(l.Type, l.Data[r0*l.RowBytes:r1*l.RowBytes], dst)
}

// Row dequantizes row r of W into dst (In values): an embedding lookup.
func (l *Linear) Row(dst []float32, r int) {
	check(l.Name+" row", len(dst), l.In)
	l.dequantize(dst[:l.In], r, r+1)
}
