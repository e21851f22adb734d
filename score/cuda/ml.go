package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"strings"
	"time"
	"unsafe"

	"ppl.dev/gguf"
	"ppl.dev/kernels"
	"ppl.dev/quant"
	"ppl.dev/score/cuda/cublas"
	"ppl.dev/score/kvcache"
	"ppl.dev/score/ml"
	"ppl.dev/score/model"
	"ppl.dev/score/nn"
)

// gpuBackend is package ml's Backend on one GPU: the architectures of
// package model run on it unchanged (model.LoadOn with a Device that makes
// one), each operation a kernel of ppl.dev/kernels or a cuBLAS product.
//
// Tensors (gt) are float32 activations in device memory: an address and a
// shape, nothing else; views and row slices share the address. Products
// take half-precision inputs: Linear, Linears, MLP and Experts convert
// their input to the matrix's half type into scratch memory right before
// the GEMM (once per call, for all the matrices of a call that share the
// type: inputs), so a tensor never carries a half copy that a later write
// could leave stale; in the int8 mode the products with quantized weights
// take the input's rows quantized to 8 bits instead (int8.go). Attention writes its output in the product input's half type
// (that is what the kernels produce) and widens it to float32 exactly, so
// the output projection's conversion gives back the same halves.
//
// Matrices (gmat) are stored in Precision.Weights, chosen at Prepare,
// except two kinds that are float32 with float32 inputs (storage): a
// mixture of experts' router (ffn_gate_inp, ffn_gate_inp_shexp, by the
// tensor's name), as llama.cpp keeps it (a product of experts × width,
// negligible beside the experts'), so that the logits that choose experts
// carry no rounding of their own; and a matrix the file stores as F32,
// whose own weights are float32 (llama.cpp multiplies them in float32),
// unless --gpu-weights bf16 asks for the old copy.
// Every weight is dequantized exactly and rounded once to its half type
// (on the device at each product from the file's blocks, qweights.go, or
// once on the host, convertRows); with --gpu-weights bf16 it is rounded to
// bf16 first (the weights of earlier rounds, for comparison). The input of ffn_down (silu(gate)·up, not normalized) is
// scaled by a power of two where it would overflow fp16 (mlp).
//
// The residual adds are the plain Add kernel (float32 adds, as the CPU's
// nn.Add): the operation interface has no fused product-and-add.
//
// Attention uses the tensor-core kernel when its check at load passed for
// the layer's head shape (sliding windows and sinks included), else the
// plain one; the int8 mode takes attn_fx (float32's precision on the
// tensor cores) where the cache and head size allow (f16 or bf16, heads
// of 16 to 512), else the plain one.
// MLP and Experts have every ml.Act (SwiGLU,
// GeGLU, gpt-oss's clamped SwiGLU, and the ungated ReLU², whose MLP has
// no gate product). Package ml's extension interfaces
// live in their own files: recurrent.go (ml.Recurrent), latent.go
// (ml.Latent), gemma4.go (ml.Gemma4), altup.go (ml.AltUp, and MLP's
// TopK), rwkv.go (ml.RWKV), attnres.go (ml.AttnRes), mhc.go (ml.MHC),
// lightning.go (ml.Lightning), sparse.go (ml.Sparse, ml.BlockSparse,
// ml.PooledSparse, ml.PLE), compressed.go (ml.Compressed).
//
// Scratch memory is an arena of device chunks (Alloc, Mark, Release,
// Reset); it grows to the largest window seen, is made one chunk again at
// Reset, and is reused by the next. The KV cache is one tensor pair reused
// by every layer (the layers of a window run one after another), grown
// with the window.
type gpuBackend struct {
	e       *Engine
	prec    Precision
	threads int // host goroutines for weight conversion
	kvK     int // KV cache formats of keys and values
	kvV     int
	kvName  string             // the KV cache format's --kv-dtype name
	kvHead0 kvcache.LlamaHead0 // model.Info.KVHead0
	synth   uint64             // when not 0, Prepare fills weights from this seed (benchmarks)

	set     *weightSet // the model's weights (weights.go)
	follows bool       // the set's allocations are another backend's (weights.go)
	taken   int        // how many of them Prepare took so far, when it follows
	weights []buf      // the backend's own tables (weightless norms, column lists), freed with it
	scratch arena
	caches  map[int]*kvPair // by head size
	ropes   map[*nn.RoPE]*ropeTab
	ones    map[int]ptr            // weightless norms by width
	flash   map[attnShape]string   // attention kernel choice by shape ("" = tensor cores)
	attn    string                 // the model's attention kernel, for headers
	cols    map[colsKey]*colsTable // column tables on the device (recurrent.go)
	qw      qweights               // weight storage (qweights.go)
	prof    *opProfile             // PPL_CUDA_PROFILE=1's account (profile.go), or nil
	keys    buf                    // the key set chooseBlocks made last (sparse.go: keysBuf)
	keysOf  *deviceKeys            // the set keys holds, or nil
	err     error
	closed  bool
}

// attnShape is what the attention kernels' check depends on: heads over
// kvheads of hd; vd, when not 0, the value size of latent attention (the
// values the keys' first vd elements).
type attnShape struct{ heads, kvheads, hd, vd int }

// gmat is a prepared matrix: rows (out × experts) of in values of type t
// (a half type, or float32 for a router), and an optional float32 bias
// (out × experts). A matrix kept in its GGUF blocks (q, qweights.go) has
// no dense rows (p is 0): a product dequantizes them into type t first.
type gmat struct {
	p, bias ptr
	t       cublas.DataType
	q       *qmat
}

// elemBytes is the size of one element of a matrix of type t.
func elemBytes(t cublas.DataType) int64 {
	if t == f32 {
		return 4
	}
	return 2
}

// gt is a device tensor of float32.
type gt struct {
	p          ptr
	rows, cols int
}

func (t *gt) Rows() int { return t.rows }
func (t *gt) Cols() int { return t.cols }

func (t *gt) count() int64    { return int64(t.rows) * int64(t.cols) }
func (t *gt) row(r int) ptr   { return t.p + ptr(4*int64(r)*int64(t.cols)) }
func gm(w *ml.Matrix) *gmat   { return w.Impl.(*gmat) }
func gv(v *ml.Vector) ptr     { return v.Impl.(ptr) }
func halfBytes(n int64) int64 { return 2 * n }

func g(t ml.Tensor) *gt {
	x, ok := t.(*gt)
	if !ok {
		panic(fmt.Sprintf("cuda backend: tensor %T is not a CUDA tensor", t))
	}
	return x
}

func gshape(what string, t *gt, rows, cols int) {
	if t.rows != rows || t.cols != cols {
		panic(fmt.Sprintf("cuda backend: %s is %d×%d, want %d×%d", what, t.rows, t.cols, rows, cols))
	}
}

// newBackend makes the backend of a model with info's shapes: the KV cache
// format, and the attention kernel check for the model's head shape.
func newBackend(e *Engine, info model.Info, opts model.Options, p Precision) (*gpuBackend, error) {
	kk, kv, err := kvFormat(info.KVDtype)
	if err != nil {
		return nil, err
	}
	b := &gpuBackend{e: e, prec: p, threads: opts.Threads, kvK: kk, kvV: kv, kvName: info.KVDtype, kvHead0: info.KVHead0,
		ropes: map[*nn.RoPE]*ropeTab{}, ones: map[int]ptr{}, flash: map[attnShape]string{}, prof: profileFromEnv()}
	hp := info.HParams
	maxHD := attnMaxDim
	if model.LatentArch(hp.Arch) { // key_length is the latent key (kv_lora + rope), which only LatentAttention reads (latent.go)
		maxHD = latentMaxDim
	}
	if hp.HeadDim > maxHD || hp.HeadDim%2 != 0 {
		return nil, fmt.Errorf("cuda: head size %d not supported (at most %d, even)", hp.HeadDim, maxHD)
	}
	if kernels.KVRotated(kk) {
		if err := checkRotated(hp.HeadDim); err != nil {
			return nil, fmt.Errorf("--kv-dtype %s: %w", info.KVDtype, err)
		}
	}
	if p.Int8 {
		b.attn = "plain kernel, float32 output (the int8 mode: the output projection quantizes it)"
		if splitExact(kk, kv, hp.HeadDim) {
			b.attn = fmt.Sprintf("tensor-core kernel with q and the probabilities as two fp16 halves, float32 output (head size %d; the int8 mode: the output projection quantizes it)", hp.HeadDim)
		}
		return b, nil
	}
	why, err := b.attnKernel(attnShape{hp.Heads, hp.KVHeads, hp.HeadDim, 0})
	if err != nil {
		return nil, err
	}
	b.attn = why
	return b, nil
}

// attnKernel checks the tensor-core attention kernel against the plain one
// for a head shape, once, and returns the description of the kernel that
// runs (starting "tensor-core" when it is the fast one).
func (b *gpuBackend) attnKernel(s attnShape) (string, error) {
	if why, ok := b.flash[s]; ok {
		return why, nil
	}
	var why string
	switch {
	case s.vd != 0 && !latentFlash[[2]int{s.hd, s.vd}]:
		why = fmt.Sprintf("plain kernel (no tensor-core kernel for latent keys of %d, values of %d)", s.hd, s.vd)
	case s.vd == 0 && !flashHeadDims[s.hd]:
		why = fmt.Sprintf("plain kernel (no tensor-core kernel for head size %d)", s.hd)
	default:
		diff, err := checkFlash(b.e, s, b.kvK, b.kvV)
		switch {
		case err != nil:
			return "", err
		case diff <= flashTolerance:
			why = fmt.Sprintf("tensor-core flash kernel (head size %d; agrees with the plain kernel to %.1e)", s.hd, diff)
		default:
			why = fmt.Sprintf("plain kernel: the tensor-core kernel differs from it by %.3g (> %g) on this device", diff, flashTolerance)
		}
	}
	b.flash[s] = why
	return why, nil
}

// flashChecked reports whether attention of shape s takes the tensor-core
// kernel (attnKernel); where the check cannot run it fails the backend
// (the pass's later operations do nothing) and reports false.
func (b *gpuBackend) flashChecked(s attnShape) bool {
	why, err := b.attnKernel(s)
	if err != nil {
		b.Fail(err)
		return false
	}
	return strings.HasPrefix(why, "tensor-core")
}

// do runs f on the engine unless the pass already failed, and records its
// error. The first operation copies the weights (lazy.go).
func (b *gpuBackend) do(what string, f func() error) {
	if b.err != nil {
		return
	}
	if b.closed {
		b.err = errors.New("cuda: model is closed")
		return
	}
	if !b.set.lazy.ready.Load() {
		if b.err = b.upload(); b.err != nil {
			return
		}
	}
	run := f
	if b.prof != nil {
		run = func() error {
			t0 := time.Now()
			err := f()
			if err == nil {
				err = b.e.sync("after " + what)
			}
			b.prof.add(what, t0, time.Now())
			return err
		}
	}
	if err := b.e.Do(run); err != nil {
		b.err = fmt.Errorf("%s: %w", what, err)
	}
}

// storage is the type a matrix is stored in: float32 for a router (by the
// tensor's name; gpuBackend's doc) and for an F32 matrix, the file's own
// weights, except in the bf16 copy, which rounds every weight as the GPU
// path of earlier rounds did (rounded to fp16, the F32 matrices of the
// tiny oracle models put tiny-qwen35 at a max |Δ log p| of 0.0199 from the
// CPU, 0.0036 as float32 products; an SGEMM runs at about 1/16 of the
// tensor cores' rate, but real files keep few matrices F32); the
// precision's half type otherwise.
func (b *gpuBackend) storage(w *ml.Matrix) cublas.DataType { return b.storageIn(w, b.qw.mode) }

// storageIn is storage under weight storage mode (qweights.go).
func (b *gpuBackend) storageIn(w *ml.Matrix, mode string) cublas.DataType {
	if strings.Contains(w.Name, "ffn_gate_inp") || (w.Type == gguf.TypeF32 && mode != WeightsBF16) {
		return f32
	}
	return b.prec.Weights
}

func (b *gpuBackend) Prepare(w *ml.Matrix) error {
	if ok, err := b.prepareQuantized(w); ok {
		return err
	}
	t := b.storage(w)
	rows := w.Out * max(w.Experts, 1)
	p, h, err := b.allocW(elemBytes(t) * int64(rows) * int64(w.In))
	if err != nil {
		return err
	}
	m := &gmat{p: p, t: t}
	var seed uint64
	if b.synth != 0 {
		b.synth++
		seed = b.synth
	}
	switch {
	case t == f32:
		err = b.later(w.Name, h, func() error { return uploadF32(h, p, w, rows, seed) })
	case seed != 0:
		err = b.later(w.Name, h, func() error {
			return h.Do(func() error {
				return h.fillUniform(p, int64(rows)*int64(w.In), seed, float32(math.Sqrt(3/float64(w.In))), t)
			})
		})
	default:
		var rb uint64
		if rb, err = w.Type.RowSize(uint64(w.In)); err == nil && uint64(len(w.Data)) != rb*uint64(rows) {
			err = fmt.Errorf("%d bytes, want %d", len(w.Data), rb*uint64(rows))
		}
		if err == nil {
			err = b.later(w.Name, h, func() error {
				return uploadRows(h, p, w.Type, w.Data, int(rb), w.In, rows, b.threads, t, b.qw.mode == WeightsBF16)
			})
		}
	}
	if err == nil && w.Bias != nil {
		m.bias, err = b.vectorData(w.Name, w.Bias)
	}
	if err != nil {
		return fmt.Errorf("cuda: tensor %s: %w", w.Name, err)
	}
	w.Impl = m
	return nil
}

// uploadF32 stores w (rows of w.In values) as float32 at p on h: each weight
// dequantized exactly and kept so, as the CPU multiplies it (a synthetic
// model's, seed not 0, are uniform random of the usual scale; an F32
// matrix's bytes are copied as they are). This is the router's storage:
// rounding its weights moved the logits that choose experts, and
// near-ties flipped (emulation, rounded to bf16 before: tiny-qwen35moe's
// mean |Δ log p| 0.018, now 0.003).
func uploadF32(h *Engine, p ptr, w *ml.Matrix, rows int, seed uint64) error {
	if seed == 0 && w.Type == gguf.TypeF32 {
		if want := 4 * rows * w.In; len(w.Data) != want {
			return fmt.Errorf("%d bytes, want %d", len(w.Data), want)
		}
		return uploadPieces(h, p, w.Data)
	}
	vals := make([]float32, rows*w.In)
	if seed != 0 {
		rng := rand.New(rand.NewPCG(seed, 1))
		a := math.Sqrt(3 / float64(w.In))
		for i := range vals {
			vals[i] = float32((2*float64(rng.Float64()) - 1) * a) // rounded: Float64 multiplies
		}
	} else if err := quant.Dequantize(w.Type, w.Data, vals); err != nil {
		return err
	}
	return h.Do(func() error { return upload(h, p, vals) })
}

// uploadPieces copies a file's bytes to p on h in pieces of uploadBytes,
// so that the file's pages are read as they go.
func uploadPieces(h *Engine, p ptr, data []byte) error {
	return h.Do(func() error {
		for o := 0; o < len(data); o += uploadBytes {
			if err := upload(h, p+ptr(o), data[o:min(len(data), o+uploadBytes)]); err != nil {
				return err
			}
		}
		return nil
	})
}

func (b *gpuBackend) PrepareVector(v *ml.Vector) error {
	var p ptr
	var err error
	if b.synth != 0 { // unit norms
		fill := float32(1)
		if strings.HasSuffix(v.Name, ".ssm_a") {
			fill = -1 // Gated DeltaNet's A = -exp(A_log): decays below 1, or the state grows without bound
		}
		var h *Engine
		if p, h, err = b.allocW(int64(4 * len(v.V))); err == nil {
			err = b.later(v.Name, h, func() error { return h.Do(func() error { return h.fillF32(p, int64(len(v.V)), fill) }) })
		}
	} else {
		p, err = b.vectorData(v.Name, v.V)
	}
	if err != nil {
		return fmt.Errorf("cuda: tensor %s: %w", v.Name, err)
	}
	v.Impl = p
	return nil
}

// vectorData allocates v (of tensor name) on the device; it is copied
// there with the weights (later).
func (b *gpuBackend) vectorData(name string, v []float32) (ptr, error) {
	p, h, err := b.allocW(int64(4 * len(v)))
	if err != nil {
		return 0, err
	}
	return p, b.later(name, h, func() error { return h.Do(func() error { return upload(h, p, v) }) })
}

// Scratch memory.

// arena hands out scratch memory from device chunks, in stack order.
type arena struct {
	chunks []buf
	cur    int   // chunk being filled
	off    int64 // bytes used in it
}

type arenaMark struct {
	cur int
	off int64
}

const arenaChunk = 64 << 20 // least bytes of a new chunk

// alloc returns bytes of scratch memory; on the engine's thread.
func (a *arena) alloc(e *Engine, bytes int64) (ptr, error) {
	bytes = allocBytes(bytes)
	for ; a.cur < len(a.chunks); a.cur, a.off = a.cur+1, 0 {
		if c := a.chunks[a.cur]; a.off+bytes <= c.bytes {
			p := c.at(a.off)
			a.off += bytes
			return p, nil
		}
	}
	c, err := e.alloc(max(bytes, arenaChunk))
	if err != nil {
		return 0, err
	}
	a.chunks = append(a.chunks, c)
	a.cur, a.off = len(a.chunks)-1, bytes
	return c.p, nil
}

// compact replaces several chunks by one of their total size, so that the
// next pass, if it is like the last, fits in one chunk: memory stays at
// the largest pass's, however the windows grew. On the engine's thread.
func (a *arena) compact(e *Engine) error {
	a.cur, a.off = 0, 0
	if len(a.chunks) < 2 {
		return nil
	}
	var total int64
	for _, c := range a.chunks {
		total += c.bytes
	}
	if err := e.sync("before freeing scratch memory"); err != nil { // no queued kernel may still read it
		return err
	}
	a.free(e)
	c, err := e.alloc(total)
	if err != nil {
		return err
	}
	a.chunks = []buf{c}
	return nil
}

func (a *arena) free(e *Engine) {
	for i := range a.chunks {
		e.release(&a.chunks[i])
	}
	*a = arena{}
}

// scratchF32 and scratchHalf allocate scratch on the engine's thread.
func (b *gpuBackend) scratchF32(rows, cols int) (*gt, error) {
	p, err := b.scratch.alloc(b.e, 4*int64(rows)*int64(cols))
	return &gt{p, rows, cols}, err
}

func (b *gpuBackend) scratchBytes(n int64) (ptr, error) { return b.scratch.alloc(b.e, n) }

// scratchCopy returns scratch memory holding a copy of v; on the engine's
// thread.
func scratchCopy[T any](b *gpuBackend, v []T) (ptr, error) {
	p, err := b.scratchBytes(int64(len(v)) * int64(unsafe.Sizeof(*new(T))))
	if err == nil {
		err = upload(b.e, p, v)
	}
	return p, err
}

func (b *gpuBackend) Alloc(rows, cols int) ml.Tensor {
	t := &gt{rows: rows, cols: cols}
	b.do("cuda: scratch memory", func() error {
		var err error
		t.p, err = b.scratch.alloc(b.e, 4*int64(rows)*int64(cols))
		return err
	})
	return t
}

func (b *gpuBackend) View(t ml.Tensor, rows, cols int) ml.Tensor {
	x := g(t)
	if int64(rows)*int64(cols) != x.count() {
		panic(fmt.Sprintf("cuda backend: view of %d×%d as %d×%d", x.rows, x.cols, rows, cols))
	}
	return &gt{x.p, rows, cols}
}

func (b *gpuBackend) Slice(t ml.Tensor, r0, r1 int) ml.Tensor {
	x := g(t)
	if r0 < 0 || r1 < r0 || r1 > x.rows {
		panic(fmt.Sprintf("cuda backend: rows [%d, %d) of %d", r0, r1, x.rows))
	}
	return &gt{x.row(r0), r1 - r0, x.cols}
}

func (b *gpuBackend) Mark() ml.Mark { return arenaMark{b.scratch.cur, b.scratch.off} }

func (b *gpuBackend) Release(m ml.Mark) {
	k := m.(arenaMark)
	b.scratch.cur, b.scratch.off = k.cur, k.off
}

func (b *gpuBackend) Reset() {
	b.err = nil
	if b.prof != nil {
		b.prof.window()
	}
	b.do("cuda: scratch memory", func() error { return b.scratch.compact(b.e) })
}

func (b *gpuBackend) Err() error { return b.err }

func (b *gpuBackend) Fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

func (b *gpuBackend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	err := b.e.Do(func() error {
		e := b.e
		b.scratch.free(e)
		for _, c := range b.caches {
			e.freeKV(c.k)
			e.freeKV(c.v)
		}
		b.caches = nil
		e.release(&b.qw.operand)
		e.release(&b.keys)
		b.keysOf = nil
		for _, r := range b.ropes {
			e.release(&r.cos)
			e.release(&r.sin)
		}
		b.ropes = nil
		var errs []error
		for i := range b.weights {
			errs = append(errs, e.release(&b.weights[i]))
		}
		b.weights = nil
		return errors.Join(errs...)
	})
	return errors.Join(err, b.set.leave(!b.follows))
}

// Operations.

func (b *gpuBackend) Embed(dst ml.Tensor, w *ml.Matrix, tokens []int32) {
	d := g(dst)
	gshape("embedding output", d, len(tokens), w.In)
	m := gm(w)
	b.do("embedding "+w.Name, func() error {
		tok, err := scratchCopy(b, tokens)
		if err != nil {
			return err
		}
		switch {
		case m.q != nil:
			return b.qembed(d, w, tok, len(tokens))
		case m.t == f32: // an F32 table: its rows as they are
			return b.e.gatherRows(d.p, m.p, tok, len(tokens), w.In, f32)
		}
		return b.e.embed(d.p, m.p, tok, len(tokens), w.In, m.t)
	})
}

// halfInput converts x to half type t in scratch memory (x itself when t
// is float32).
func (b *gpuBackend) halfInput(x *gt, t cublas.DataType) (ptr, error) {
	if t == f32 {
		return x.p, nil
	}
	h, err := b.scratchBytes(halfBytes(x.count()))
	if err != nil {
		return 0, err
	}
	return h, b.e.castHalf(h, x.p, x.count(), t)
}

// operand is the input of one product: x in the matrix's half type, or in
// the int8 mode x's quantized rows (row t being idx[t] when idx is not 0).
type operand struct {
	half ptr
	acts *qacts
	idx  ptr
}

// inputs makes the operands of the products that read one float32 input,
// each kind once: a half copy per type, quantized rows per activation
// block. Its scratch lives until the caller's mark is released.
type inputs struct {
	b      *gpuBackend
	x      *gt
	halves map[cublas.DataType]ptr
	acts   map[int]*qacts
}

func (b *gpuBackend) inputs(x *gt) *inputs {
	return &inputs{b: b, x: x, halves: map[cublas.DataType]ptr{}, acts: map[int]*qacts{}}
}

// of returns the operand of w's product; on the engine's thread.
func (in *inputs) of(w *ml.Matrix) (operand, error) {
	var err error
	if f, ok := in.b.int8Format(w); ok {
		a := in.acts[f.ActBlock]
		if a == nil {
			x := in.x
			if a, err = in.b.quantActs(x.p, x.cols, x.rows, x.cols, f.ActBlock); err != nil {
				return operand{}, err
			}
			in.acts[f.ActBlock] = a
		}
		return operand{acts: a}, nil
	}
	t := gm(w).t
	h, ok := in.halves[t]
	if !ok {
		if h, err = in.b.halfInput(in.x, t); err != nil {
			return operand{}, err
		}
		in.halves[t] = h
	}
	return operand{half: h}, nil
}

// product computes dst = (x·Wᵀ)·scale + bias from x's operand, for rows
// rows; w's expert e of a stack. With amax, x was scaled by the power of
// two it names (a GLU kernel's), divided out of x·Wᵀ first.
func (b *gpuBackend) product(dst *gt, x operand, w *ml.Matrix, e, rows int, amax ptr) error {
	m := gm(w)
	var err error
	switch {
	case x.acts != nil:
		err = b.i8product(dst.p, w.Out, x.acts, x.idx, rows, w, e)
	case m.q != nil:
		err = b.qproduct(dst, x.half, w, e, rows)
	default:
		err = b.e.gemm(dst.p, f32, w.Out, x.half, w.In, m.p+ptr(elemBytes(m.t)*int64(e)*int64(w.Out)*int64(w.In)), m.t, rows, w.In, w.Out, 0)
	}
	if err != nil {
		return err
	}
	if amax != 0 {
		if err := b.e.unscale(dst.p, int64(rows)*int64(w.Out), amax); err != nil {
			return err
		}
	}
	if w.Scale != nil {
		if err := b.e.scaleF32(dst.p, int64(rows)*int64(w.Out), w.Scale[e]); err != nil {
			return err
		}
	}
	if m.bias != 0 {
		return b.e.addBias(dst.p, m.bias+ptr(4*e*w.Out), 0, rows, w.Out)
	}
	return nil
}

// expertSet is the rows of a block of products and the expert of a stack
// each goes through: member i's rows are [off[i], off[i]+n[i]) of the
// block, through expert ex[i] (increasing, the rows in their order). A
// plain matrix's product is one member, expert 0.
type expertSet struct {
	rows       int
	ex, off, n []int
}

func oneExpert(e, rows int) *expertSet {
	return &expertSet{rows: rows, ex: []int{e}, off: []int{0}, n: []int{rows}}
}

// products is product for each member of set, into its rows of dst. For
// several members the weights of their experts are dequantized (or
// decoded, int8) together, one launch over the stack's rows from the first
// expert to the last into the operand buffer, and multiplied in a few
// launches: a batched GEMM for the members with as many rows (x the set's
// half rows), or one i8mm over tiles of every member's tokens (the int8
// mode, i8products). A mixture of experts' block thus takes a few
// launches per matrix, not several per expert.
func (b *gpuBackend) products(dst *gt, x operand, w *ml.Matrix, set *expertSet, amax ptr) error {
	if len(set.ex) == 1 {
		return b.product(dst, x, w, set.ex[0], set.rows, amax)
	}
	var err error
	if x.acts != nil {
		err = b.i8products(dst, x, w, set)
	} else {
		err = b.halfProducts(dst, x, w, set)
	}
	if err != nil {
		return err
	}
	if amax != 0 {
		if err := b.e.unscale(dst.p, int64(set.rows)*int64(w.Out), amax); err != nil {
			return err
		}
	}
	if w.Scale != nil {
		for j, e := range set.ex {
			if err := b.e.scaleF32(dst.p+ptr(4*int64(set.off[j])*int64(w.Out)), int64(set.n[j])*int64(w.Out), w.Scale[e]); err != nil {
				return err
			}
		}
	}
	if m := gm(w); m.bias != 0 { // each row its expert's bias, one launch
		bi := make([]int32, set.rows)
		for j, e := range set.ex {
			for i := range set.n[j] {
				bi[set.off[j]+i] = int32(e)
			}
		}
		p, err := scratchCopy(b, bi)
		if err == nil {
			err = b.e.addBias(dst.p, m.bias, p, set.rows, w.Out)
		}
		return err
	}
	return nil
}

// halfProducts is products' GEMMs for several experts: one batched GEMM
// per count of rows. On the engine's thread.
func (b *gpuBackend) halfProducts(dst *gt, x operand, w *ml.Matrix, set *expertSet) error {
	m := gm(w)
	wt, err := b.stackWeights(w, set.ex[0], set.ex[len(set.ex)-1]+1)
	if err != nil {
		return err
	}
	wb, xb := elemBytes(m.t)*int64(w.Out)*int64(w.In), elemBytes(m.t)*int64(w.In)
	// The members by row count, in order of first appearance.
	var batches []batch
	at := map[int]int{}
	for j, n := range set.n {
		if n == 0 {
			continue
		}
		i, ok := at[n]
		if !ok {
			i, at[n] = len(batches), len(batches)
			batches = append(batches, batch{rows: n})
		}
		bt := &batches[i]
		bt.w = append(bt.w, wt+ptr(int64(set.ex[j]-set.ex[0])*wb))
		bt.x = append(bt.x, x.half+ptr(int64(set.off[j])*xb))
		bt.y = append(bt.y, dst.p+ptr(4*int64(set.off[j])*int64(w.Out)))
	}
	return b.gemmBatches(w, w.In, w.Out, batches)
}

// batch is products of one shape for gemmBatches: rows rows each, each
// product's weights, input and output addresses.
type batch struct {
	rows    int
	w, x, y []ptr
}

// gemmBatches runs y = x·Wᵀ for the products of batches, of w's shape and
// half type (inputs of row stride ldx, float32 outputs of row stride
// ldy), one batched GEMM per batch, their addresses uploaded in one
// array. On the engine's thread.
func (b *gpuBackend) gemmBatches(w *ml.Matrix, ldx, ldy int, batches []batch) error {
	var addrs []uint64
	for _, bt := range batches {
		for _, part := range [][]ptr{bt.w, bt.x, bt.y} {
			for _, p := range part {
				addrs = append(addrs, uint64(p))
			}
		}
	}
	arrays, err := scratchCopy(b, addrs)
	if err != nil {
		return err
	}
	for _, bt := range batches {
		if err := b.e.gemmBatched(arrays, len(bt.w), gm(w).t, bt.rows, w.In, w.Out, ldx, ldy); err != nil {
			return err
		}
		arrays += ptr(24 * len(bt.w))
	}
	return nil
}

// stackWeights returns the device address of experts [e0, e1) of w's
// stack as halves of w's type, one after another: where they lie on the
// device, or for a quantized stack the operand buffer, into which they
// are dequantized in one launch unless it holds them already. On the
// engine's thread.
func (b *gpuBackend) stackWeights(w *ml.Matrix, e0, e1 int) (ptr, error) {
	m := gm(w)
	per := int64(w.Out) * int64(w.In)
	if m.q == nil {
		return m.p + ptr(elemBytes(m.t)*int64(e0)*per), nil
	}
	h, err := b.operandBuf(halfBytes(int64(e1-e0) * per))
	if err != nil {
		return 0, err
	}
	key := operandKey{m.q, int64(e0) * int64(w.Out), int64(e1-e0) * int64(w.Out), false}
	return h, b.hold(key, func() error { return b.e.dequantRows(h, m, isF16(m.t), 0, key.row0, int(key.rows), w.In) })
}

func (b *gpuBackend) Linear(dst, x ml.Tensor, w *ml.Matrix) {
	b.Linears([]ml.Tensor{dst}, x, []*ml.Matrix{w})
}

func (b *gpuBackend) Linears(dsts []ml.Tensor, x ml.Tensor, ws []*ml.Matrix) {
	s := g(x)
	for i, w := range ws {
		gshape(w.Name+" input", s, s.rows, w.In)
		gshape(w.Name+" output", g(dsts[i]), s.rows, w.Out)
	}
	b.do("product "+ws[0].Name, func() error {
		mark := b.Mark()
		defer b.Release(mark)
		in := b.inputs(s)
		for i, w := range ws {
			x, err := in.of(w)
			if err == nil {
				err = b.product(g(dsts[i]), x, w, 0, s.rows, 0)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", w.Name, err)
			}
		}
		return nil
	})
}

// LayerNorm is ml.LayerNormer's: one layernorm_f32 launch, a block per row.
func (b *gpuBackend) LayerNorm(dst, x ml.Tensor, w, bias *ml.Vector, eps float64) {
	d, s := g(dst), g(x)
	gshape("layer norm output", d, s.rows, s.cols)
	if len(w.V)%s.cols != 0 || bias != nil && len(bias.V) != len(w.V) {
		panic(fmt.Sprintf("cuda backend: layer norm %s over rows of %d", w.Name, s.cols))
	}
	b.do("LayerNorm "+w.Name, func() error {
		var bp ptr
		if bias != nil {
			bp = gv(bias)
		}
		return b.e.layernormF32(d.p, s.p, gv(w), bp, s.rows, s.cols, len(w.V)/s.cols, eps)
	})
}

func (b *gpuBackend) RMSNorm(dst, x ml.Tensor, w *ml.Vector, eps float64) {
	d, s := g(dst), g(x)
	gshape("norm output", d, s.rows, s.cols)
	wrows := 1
	if w != nil {
		if len(w.V)%s.cols != 0 {
			panic(fmt.Sprintf("cuda backend: RMS norm %s over rows of %d", w.Name, s.cols))
		}
		wrows = len(w.V) / s.cols
	}
	b.do("RMSNorm", func() error {
		var wp ptr
		if w != nil {
			wp = gv(w)
		} else if wp = b.ones[s.cols]; wp == 0 {
			one := make([]float32, s.cols)
			for i := range one {
				one[i] = 1
			}
			p, err := b.e.alloc(int64(4 * s.cols))
			if err != nil {
				return err
			}
			b.weights = append(b.weights, p)
			if err := upload(b.e, p.p, one); err != nil {
				return err
			}
			wp, b.ones[s.cols] = p.p, p.p
		}
		return b.e.rmsnormF32(d.p, s.p, wp, s.rows, s.cols, wrows, eps)
	})
}

// ropeTab is a RoPE's cosines and sines on the device for positions
// [0, n).
type ropeTab struct {
	n        int
	cos, sin buf
}

func (b *gpuBackend) RoPE(x ml.Tensor, heads int, r *nn.RoPE) {
	s := g(x)
	gshape("rope input", s, s.rows, heads*r.HeadDim)
	n := s.rows
	b.do("RoPE", func() error {
		e := b.e
		t := b.ropes[r]
		if t == nil || t.n < n {
			if err := e.sync("before growing the RoPE tables"); err != nil {
				return err
			}
			if t != nil {
				e.release(&t.cos)
				e.release(&t.sin)
			}
			capN := (n + capacityRound - 1) / capacityRound * capacityRound
			cos, sin := ropeTables(r, capN)
			t = &ropeTab{n: capN}
			b.ropes[r] = t
			var err error
			if t.cos, err = e.alloc(int64(8 * len(cos))); err != nil {
				return err
			}
			if t.sin, err = e.alloc(int64(8 * len(sin))); err != nil {
				return err
			}
			if err := errors.Join(upload(e, t.cos.p, cos), upload(e, t.sin.p, sin)); err != nil {
				return err
			}
		}
		return e.rope(s.p, t.cos.p, t.sin.p, n, heads, r.HeadDim, r.Dims, r.NeoX)
	})
}

func (b *gpuBackend) Add(dst, x ml.Tensor) {
	d, s := g(dst), g(x)
	gshape("add input", s, d.rows, d.cols)
	b.do("add", func() error { return b.e.addF32(d.p, s.p, d.count()) })
}

func (b *gpuBackend) AddRows(x ml.Tensor, v *ml.Vector) {
	d := g(x)
	if len(v.V) != d.cols {
		panic(fmt.Sprintf("cuda backend: %s has %d values for %d columns", v.Name, len(v.V), d.cols))
	}
	if d.count() == 0 {
		return
	}
	b.do("add "+v.Name, func() error { return b.e.addBias(d.p, gv(v), 0, d.rows, d.cols) })
}

func (b *gpuBackend) Scale(x ml.Tensor, s float64) {
	d := g(x)
	b.do("scale", func() error { return b.e.scaleF32(d.p, d.count(), float32(s)) })
}

func (b *gpuBackend) Clamp(x ml.Tensor, c float64) {
	d := g(x)
	b.do("clamp", func() error { return b.e.clampF32(d.p, d.count(), float32(c)) })
}

func (b *gpuBackend) GateMul(x, gate ml.Tensor, f ml.GateFn) {
	d, s := g(x), g(gate)
	if s.rows != d.rows || (s.cols != d.cols && s.cols != 1) {
		panic(fmt.Sprintf("cuda backend: gate %d×%d for %d×%d", s.rows, s.cols, d.rows, d.cols))
	}
	b.do("gate", func() error { return b.e.gateMul(d.p, s.p, d.rows, d.cols, s.cols, f) })
}

func (b *gpuBackend) SoftCap(x ml.Tensor, cp float64) {
	d := g(x)
	b.do("soft-capping", func() error { return b.e.softcap(d.p, d.count(), cp) })
}

// kvPair is a KV cache, the layers' of one head size: a model with two
// (Gemma 4's sliding and global layers, 256 and 512) keeps one of each
// rather than reallocating the one at each change (a sync, a free and an
// allocation, some twenty times a window).
type kvPair struct{ k, v *kvTensor }

// kvFor returns the KV cache of head size hd, each of its tensors grown to
// hold groups (token, head) pairs (values: with values, else the keys
// alone, as latent attention keeps them); on the engine's thread.
func (b *gpuBackend) kvFor(hd int, groups int64, values bool) (*kvPair, error) {
	if b.caches == nil {
		b.caches = map[int]*kvPair{}
	}
	c := b.caches[hd]
	if c == nil {
		c = &kvPair{}
		b.caches[hd] = c
	}
	grow := func(t **kvTensor, format int) error {
		if *t != nil && (*t).groups >= groups {
			return nil
		}
		if err := b.e.sync("before growing the KV cache"); err != nil { // an earlier layer's kernels may still read it
			return err
		}
		b.e.freeKV(*t)
		*t = nil
		nt, err := b.e.newKV(format, groups, hd)
		*t = nt
		return err
	}
	if err := grow(&c.k, b.kvK); err != nil {
		return nil, err
	}
	if values {
		if err := grow(&c.v, b.kvV); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (b *gpuBackend) Attention(dst, q, k, v ml.Tensor, layer int, a *ml.Attn) {
	b.attention(dst, q, k, v, layer, a, false, 0)
}

// attention is Attention's, and with shared AttentionShared's: layer's
// keys and values read again by a later layer. In the int8 mode before
// one of llama.cpp's quantized caches it turns the heads as the CPU's
// int8 mode does (ml.Attn.LlamaTurns, fwht_f32: ggml-cpu's arithmetic,
// the same bits): q and k, v in place unless shared (which their own
// layer turned), the output turned back. keys, unless 0, is a key set of
// one group on the device already (the compressed layout's), read in
// place of a.Keys.
func (b *gpuBackend) attention(dst, q, k, v ml.Tensor, layer int, a *ml.Attn, shared bool, keys ptr) {
	o, qq, kk, vv := g(dst), g(q), g(k), g(v)
	n := qq.rows
	gshape("attention q", qq, n, a.Heads*a.HeadDim)
	gshape("attention k", kk, n, a.KVHeads*a.HeadDim)
	gshape("attention v", vv, n, a.KVHeads*a.HeadDim)
	gshape("attention output", o, n, a.Heads*a.HeadDim)
	if b.err != nil {
		return
	}
	chunk := 0 // chunks that a window crosses take the plain kernel
	if a.Chunk > 0 && n > a.Chunk {
		chunk = a.Chunk
	}
	// The int8 mode takes attn_fx or the plain kernel: their float32 output
	// is what the output projection quantizes (int8.go).
	plain := plainOpts{a.SoftCap, chunk} // soft-capped or chunked scores take the plain kernel
	flash := !b.prec.Int8 && plain == (plainOpts{}) && b.flashChecked(attnShape{a.Heads, a.KVHeads, a.HeadDim, 0})
	mask := attnMask{window: a.Window, sinks: perHead("attention sinks", a.Sinks, a.Heads), slopes: perHead("ALiBi slopes", a.Slopes, a.Heads)}
	t := b.prec.Weights            // the output projection's input type
	kr, vr, vd := 0, 0, a.Values() // llama.cpp's turns of q and k, and of v and the output, in the int8 mode
	if b.prec.Int8 {
		kr, vr, vd = a.LlamaTurns(b.kvHead0, b.kvName)
	}
	b.do(fmt.Sprintf("layer %d attention", layer), func() error {
		e := b.e
		mark := b.Mark()
		defer b.Release(mark)
		qp, out := qq.p, o.p
		kv, qs := int64(n)*int64(a.KVHeads*a.HeadDim), o.count()
		if kr != 0 {
			if !shared {
				if err := e.fwht(kk.p, kk.p, kv/int64(kr), kr); err != nil {
					return err
				}
			}
			var err error
			if qp, err = b.scratchBytes(4 * qs); err != nil {
				return err
			}
			if err := e.fwht(qp, qq.p, qs/int64(kr), kr); err != nil {
				return err
			}
		}
		if vr != 0 {
			if !shared && !a.KeyValues {
				if err := e.fwhtHeads(vv.p, vv.p, int64(n*a.KVHeads), a.HeadDim, vd, vr); err != nil {
					return err
				}
			}
			var err error
			if out, err = b.scratchBytes(4 * qs); err != nil {
				return err
			}
		}
		groups := (int64(n) + capacityRound - 1) / capacityRound * capacityRound * int64(a.KVHeads)
		c, err := b.kvFor(a.HeadDim, groups, true)
		if err != nil {
			return err
		}
		if err := e.kvStore(c.k, kk.p, n, a.KVHeads, a.HeadDim); err != nil {
			return err
		}
		if err := e.kvStore(c.v, vv.p, n, a.KVHeads, a.HeadDim); err != nil {
			return err
		}
		switch {
		case keys != 0:
			mask.keys, mask.kgroups = keys, 1
		case a.Keys != nil: // chosen keys (sparse.go)
			if mask.keys, mask.kgroups, err = b.keySet(a, n); err != nil {
				return err
			}
		}
		if b.prec.Int8 {
			if splitExact(b.kvK, b.kvV, a.HeadDim) && plain == (plainOpts{}) {
				err = e.attentionSplit(out, qp, n, a.Heads, a.KVHeads, a.HeadDim, a.Scale, mask, c.k, c.v)
			} else {
				err = e.attentionPlain(out, qp, n, a.Heads, a.KVHeads, a.HeadDim, a.Scale, mask, plain, c.k, c.v, otypeF32)
			}
			if err != nil || vr == 0 {
				return err
			}
			return e.fwhtHeads(o.p, out, int64(n*a.Heads), a.HeadDim, vd, vr)
		}
		h, err := b.scratchBytes(halfBytes(o.count()))
		if err != nil {
			return err
		}
		if plain != (plainOpts{}) {
			err = e.attentionPlain(h, qq.p, n, a.Heads, a.KVHeads, a.HeadDim, a.Scale, mask, plain, c.k, c.v, isF16(t))
		} else {
			err = e.attentionMasked(h, qq.p, n, a.Heads, a.KVHeads, a.HeadDim, a.Scale, mask, c.k, c.v, flash, t)
		}
		if err != nil {
			return err
		}
		return e.widenHalf(o.p, h, o.count(), t)
	})
}

// perHead is v's device copy, one value per head of heads, or 0 for a nil
// v.
func perHead(what string, v *ml.Vector, heads int) ptr {
	if v == nil {
		return 0
	}
	if len(v.V) != heads {
		panic(fmt.Sprintf("cuda backend: %d %s for %d heads", len(v.V), what, heads))
	}
	return gv(v)
}

// mlpChunk is how many rows go through an MLP at once: its intermediate
// activations (rows × FFN) stay bounded for long windows.
const mlpChunk = 8192

func (b *gpuBackend) MLP(dst, x ml.Tensor, m *ml.MLP) {
	d, s := g(dst), g(x)
	m.Gated() // a gate and an activation of different kinds panic here
	gshape("mlp input", s, s.rows, m.Up.In)
	gshape("mlp output", d, s.rows, m.Out())
	b.do("MLP "+m.Up.Name, func() error {
		for c0 := 0; c0 < s.rows; c0 += mlpChunk {
			c := min(mlpChunk, s.rows-c0)
			ds := &gt{d.row(c0), c, d.cols}
			if err := b.mlp(ds, oneExpert(0, c), b.inputs(&gt{s.row(c0), c, s.cols}).of, m); err != nil {
				return err
			}
		}
		return nil
	})
}

// mlp computes dst = Down(act(Gate·x) ⊙ Up·x), Gate·x sparsified first
// when m.TopK > 0 (altup.go), or for an ungated m Down(act(Up·x)), for
// the rows of set, each through its expert's matrices, the operands of
// Gate and Up from in (called after mlp's mark: its scratch is released on
// return). On the engine's thread.
//
// The activation kernels take the product they activate as their gate:
// an ungated MLP's Up·x goes where a gated one's Gate·x goes (the
// activation's input, written over in the float32 path), and its up is 0.
// Without Down, Up·x goes to dst and is activated there in float32.
func (b *gpuBackend) mlp(dst *gt, set *expertSet, in func(*ml.Matrix) (operand, error), m *ml.MLP) error {
	rows := set.rows
	mark := b.Mark()
	defer b.Release(mark)
	if m.Down == nil {
		x, err := in(m.Up)
		if err == nil {
			err = b.products(dst, x, m.Up, set, 0)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", m.Up.Name, err)
		}
		return b.e.gluF32(dst.p, dst.p, 0, int64(rows)*int64(m.Up.Out), m.Act, 0, 0)
	}
	F := m.Up.Out
	ws := []*ml.Matrix{m.Up} // the products of the activation's gate, then up
	if m.Gated() {
		ws = []*ml.Matrix{m.Gate, m.Up}
	}
	var ys [2]ptr
	for i, w := range ws {
		x, err := in(w)
		if err != nil {
			return err
		}
		y, err := b.scratchF32(rows, F)
		if err == nil {
			err = b.products(y, x, w, set, 0)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", w.Name, err)
		}
		ys[i] = y.p
	}
	gate, up := ys[0], ys[1]
	if m.TopK > 0 { // Gemma 3n's sparse gate, in place on Gate·x (float32 in every path below)
		if err := b.e.gaussianTopK(gate, rows, F, m.TopK); err != nil {
			return err
		}
	}
	dt := gm(m.Down).t
	if _, ok := b.int8Format(m.Down); (ok || dt == f32) && gluF32Acts[m.Act] || m.Act == ml.XIELU || m.Act == ml.Identity || m.Act == ml.SiTU {
		// float32 activations: the int8 mode quantizes them for Down, or
		// Down is a float32 product; xIELU's and SiTU's always (their
		// kernels are float32's, the half operand Down's inputs), Up·x
		// itself for Identity.
		var err error
		switch m.Act {
		case ml.Identity:
		case ml.XIELU:
			err = b.e.xielu(gate, int64(rows)*int64(F), m.XIELU)
		case ml.SiTU:
			err = b.e.gluF32(gate, gate, up, int64(rows)*int64(F), m.Act, m.SiTU.Beta, m.SiTU.LinearBeta)
		default:
			err = b.e.gluF32(gate, gate, up, int64(rows)*int64(F), m.Act, m.Limit, 0)
		}
		if err != nil {
			return err
		}
		x, err := b.inputs(&gt{gate, rows, F}).of(m.Down)
		if err == nil {
			err = b.products(dst, x, m.Down, set, 0)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", m.Down.Name, err)
		}
		return nil
	}
	act, err := b.scratchBytes(halfBytes(int64(rows) * int64(F)))
	if err != nil {
		return err
	}
	var amax ptr // an fp16 input's maximum, for its scaling (kernels/swiglu.cu)
	if dt == f16 {
		if amax, err = b.scratchBytes(4); err != nil {
			return err
		}
	}
	if m.Act == ml.SwiGLU {
		err = b.e.swiglu(act, gate, up, rows, F, F, F, dt, amax)
	} else {
		err = b.e.glu(act, gate, up, rows, F, m.Act, m.Limit, dt, amax)
	}
	if err != nil {
		return err
	}
	if err := b.products(dst, operand{half: act}, m.Down, set, amax); err != nil {
		return fmt.Errorf("%s: %w", m.Down.Name, err)
	}
	return nil
}

// expertRows is how many token rows Experts handles at a time (the CPU
// backend's block): the per-choice results (rows × K × width) stay
// bounded for long windows.
const expertRows = 4096

// expertsBefore is Experts for experts weighted before their FFN (Llama
// 4): each choice's input row x[t]·w (scale_rows) through its expert with
// a weight of 1, then each token's K results added in order (sum_choices).
func (b *gpuBackend) expertsBefore(d, s *gt, m *ml.MLP, r *ml.Routing) {
	n, K, in, out := s.rows, r.K, m.Up.In, m.Out()
	mark := b.Mark()
	defer b.Release(mark)
	xb, yb := b.Alloc(n*K, in), b.Alloc(n*K, out)
	// One upload: each choice's row, then its weight.
	lay, ones := make([]int32, 2*n*K), make([]float32, n*K)
	for c := range n * K {
		lay[c], lay[n*K+c], ones[c] = int32(c/K), int32(math.Float32bits(r.Weight[c])), 1
	}
	b.do("experts' weighted inputs "+m.Up.Name, func() error {
		mk := b.Mark()
		defer b.Release(mk)
		d, err := scratchCopy(b, lay)
		if err != nil {
			return err
		}
		return b.e.scaleRows(g(xb).p, s.p, d, d+ptr(4*n*K), n*K, in)
	})
	b.Experts(yb, xb, m, &ml.Routing{K: 1, Expert: r.Expert, Weight: ones})
	b.do("experts' sum "+m.Up.Name, func() error { return b.e.sumChoices(d.p, g(yb).p, n, K, out) })
}

// Experts orders each block of rows' choices by expert on the host and
// lays them out on the device expert after expert, each expert's rows
// padded with copies of its last to a count that many experts share
// (expertPad); the experts then run through their MLPs together (mlp on
// an expertSet: a few launches per matrix, the GEMMs batched by row
// count, or the int8 mode's i8mm over tiles of each expert's tokens,
// read through the index list), as many at once as the operand buffer's
// bound takes for a quantized stack (slabBytes). Each real row's result,
// times its choice's weight, goes to that choice's slot (the padding's to
// slots no token reads), and each token sums its K slots in the order of
// its choices (cpuBackend.Experts, whose arithmetic per token this is).
func (b *gpuBackend) Experts(dst, x ml.Tensor, m *ml.MLP, r *ml.Routing) {
	d, s := g(dst), g(x)
	ws := []*ml.Matrix{m.Up} // the products that read x
	if m.Gated() {
		ws = []*ml.Matrix{m.Gate, m.Up}
	}
	in, out, K, n := m.Up.In, m.Out(), r.K, s.rows
	gshape("experts input", s, n, in)
	gshape("experts output", d, n, out)
	if len(r.Expert) != n*K {
		panic(fmt.Sprintf("cuda backend: routing of %d choices for %d tokens × %d", len(r.Expert), n, K))
	}
	if r.Before {
		b.expertsBefore(d, s, m, r)
		return
	}
	experts := max(m.Up.Experts, 1)
	b.do("experts "+m.Up.Name, func() error {
		e := b.e
		tg := gm(ws[0]).t
		// The int8 mode quantizes the rows once and each expert's products
		// read its tokens' rows of them; otherwise the rows are gathered,
		// expert after expert, into the half type of Gate (or of Up,
		// ungated).
		xs := b.inputs(s)
		quantized := map[*ml.Matrix]operand{}
		for _, w := range ws {
			if _, ok := b.int8Format(w); ok {
				var err error
				if quantized[w], err = xs.of(w); err != nil {
					return err
				}
			}
		}
		// How many experts' rows of one matrix the operand buffer takes,
		// dequantized or (int8) decoded.
		var big int64
		for _, w := range []*ml.Matrix{m.Gate, m.Up, m.Down} {
			if w == nil {
				continue
			}
			per := halfBytes(int64(w.In))
			if _, ok := b.int8Format(w); ok {
				per = int8RowBytes(w)
			}
			big = max(big, per*int64(w.Out))
		}
		most := int(max(1, slabBytes/big))
		if expertsTogether > 0 {
			most = min(most, expertsTogether)
		}
		for r0 := 0; r0 < n; r0 += expertRows {
			rows := min(expertRows, n-r0)
			// The block's choices by expert, in token order; expert x's rows
			// [start[x], start[x+1]), padded (expertPad).
			count := make([]int, experts)
			for _, x := range r.Expert[r0*K : (r0+rows)*K] {
				if x < 0 || int(x) >= experts {
					return fmt.Errorf("routing chose expert %d of %d", x, experts)
				}
				count[x]++
			}
			start, total := make([]int, experts+1), 0
			for x, c := range count {
				start[x], total = total, total+expertPad(c)
			}
			start[experts] = total
			// One upload: each row's token, its slot, then the slots'
			// weights (the spare slots' 0).
			lay := make([]int32, 3*total)
			tokRows, slots := lay[:total], lay[total:2*total]
			for i, w := range r.Weight[r0*K : (r0+rows)*K] {
				lay[2*total+i] = int32(math.Float32bits(w))
			}
			fill := append([]int(nil), start[:experts]...)
			for c := range rows * K {
				x := r.Expert[r0*K+c]
				tokRows[fill[x]], slots[fill[x]] = int32(r0+c/K), int32(c)
				fill[x]++
			}
			spare := rows * K
			for x := range experts {
				for i := fill[x]; i < start[x+1]; i++ { // the padding: the expert's last row again, each into a slot of its own past the choices'
					tokRows[i], slots[i] = tokRows[i-1], int32(spare)
					spare++
				}
			}
			mark := b.Mark()
			res, err := b.scratchF32(total, out)
			if err != nil {
				return err
			}
			base, err := scratchCopy(b, lay)
			if err != nil {
				return err
			}
			rowsDev, slotsDev, weightsDev := base, base+ptr(4*total), base+ptr(8*total)
			var xe ptr
			if len(quantized) < len(ws) {
				if xe, err = b.scratchBytes(elemBytes(tg) * int64(total) * int64(in)); err != nil {
					return err
				}
				if err := e.gatherRows(xe, s.p, rowsDev, total, in, tg); err != nil {
					return err
				}
			}
			y, err := b.scratchF32(total, out)
			if err != nil {
				return err
			}
			for x0 := 0; x0 < experts; {
				if start[x0+1] == start[x0] {
					x0++
					continue
				}
				set := &expertSet{}
				x := x0
				for ; x < min(experts, x0+most); x++ {
					if n := start[x+1] - start[x]; n > 0 {
						set.ex, set.off, set.n = append(set.ex, x), append(set.off, start[x]-start[x0]), append(set.n, n)
					}
				}
				set.rows = start[x] - start[x0]
				src := func(w *ml.Matrix) (operand, error) {
					if op, ok := quantized[w]; ok {
						op.idx = rowsDev + ptr(4*start[x0])
						return op, nil
					}
					if gm(w).t != tg {
						return operand{}, fmt.Errorf("%s and %s: experts' gate and up of different types", m.Gate.Name, m.Up.Name)
					}
					return operand{half: xe + ptr(elemBytes(tg)*int64(start[x0])*int64(in))}, nil
				}
				if err := b.mlp(&gt{y.row(start[x0]), set.rows, out}, set, src, m); err != nil {
					return fmt.Errorf("experts %d to %d: %w", x0, x-1, err)
				}
				x0 = x
			}
			if err := e.scatterScaled(res.p, y.p, slotsDev, weightsDev, total, out); err != nil {
				return err
			}
			if err := e.sumChoices(d.row(r0), res.p, rows, K, out); err != nil {
				return err
			}
			b.Release(mark)
		}
		return nil
	})
}

// expertsTogether bounds how many experts run together (0: as many as
// slabBytes allows); the benchmark's baseline and the tests that hold the
// two ways to the same bits set 1.
var expertsTogether = 0

// expertPad is the rows an expert with c rows runs as when experts run
// together: c rounded up to a multiple of 8, or of an eighth of the
// largest power of two not above c (at most an eighth more rows, or 7), so
// that experts with nearly as many rows make one batched GEMM.
func expertPad(c int) int {
	if c == 0 {
		return 0
	}
	q := max(8, 1<<max(0, bits.Len(uint(c))-4))
	return (c + q - 1) / q * q
}

// hostRouting routes every router on the host: the benchmark's baseline.
var hostRouting = false

// routeMaxExperts is the most experts moe_route takes (ROUTE_MAXE in
// kernels/experts.cu).
const routeMaxExperts = 512

// Route chooses the experts on the device (moe_route: the router's float64
// arithmetic, one warp a token; moe_route_ggml: the int8 modes' ggml
// arithmetic, one thread a token) and copies back the choices and
// weights, 8 bytes a choice against 4 bytes a logit of every expert, with
// the host's cores free; experts given by token (Chosen: DeepSeek-V4's
// hash layers) are copied in and weighted there. A router of more experts
// than the kernels take routes on the host from the logits, and so do the
// rows a kernel leaves to the host (a NaN score, or in the ggml arithmetic
// equal scores, whose order the host's sort decides); a NaN logit gives
// the host's error.
func (b *gpuBackend) Route(logits ml.Tensor, r *ml.Router) (*ml.Routing, error) {
	l := g(logits)
	n, E, K := l.rows, r.Experts, r.K
	gshape("router logits", l, n, E)
	if E > routeMaxExperts || hostRouting || n == 0 {
		return r.Route(b.Read(logits))
	}
	if err := r.CheckChosen(n); err != nil {
		return nil, err
	}
	// One buffer: the selection bias and the flag (uploaded together, the
	// flag 0), then the experts (uploaded too when given) and the weights
	// (downloaded with the flag).
	bias := len(r.SelBias)
	io := make([]uint32, bias+1+2*n*K)
	for i, v := range r.SelBias {
		io[i] = math.Float32bits(v)
	}
	in := io[:bias+1]
	if r.Chosen != nil {
		in = io[:bias+1+n*K]
		for i, e := range r.Chosen {
			in[bias+1+i] = uint32(e)
		}
	}
	b.do("routing", func() error {
		mark := b.Mark()
		defer b.Release(mark)
		d, err := b.scratchBytes(4 * int64(len(io)))
		if err != nil {
			return err
		}
		if err := upload(b.e, d, in); err != nil {
			return err
		}
		var bp ptr
		if bias > 0 {
			bp = d
		}
		flag := d + ptr(4*bias)
		if err := b.e.moeRoute(l.p, bp, flag+4, flag+ptr(4+4*n*K), flag, n, r); err != nil {
			return err
		}
		return download(b.e, io[bias:], flag)
	})
	out := &ml.Routing{K: K, Expert: make([]int32, n*K), Weight: make([]float32, n*K), Before: r.Before}
	for i := range n * K {
		out.Expert[i] = int32(io[bias+1+i])
		out.Weight[i] = math.Float32frombits(io[bias+1+n*K+i])
	}
	if b.err == nil && io[bias] != 0 { // the rows the kernel left (expert -1), from the logits
		v := b.Read(logits)
		row := *r
		for t := range n {
			if out.Expert[t*K] >= 0 {
				continue
			}
			if r.Chosen != nil {
				row.Chosen = r.Chosen[t*K : (t+1)*K]
			}
			rt, err := row.Route(v[t*E : (t+1)*E])
			if err != nil {
				return r.Route(v) // the error naming the row in the block
			}
			copy(out.Expert[t*K:(t+1)*K], rt.Expert)
			copy(out.Weight[t*K:(t+1)*K], rt.Weight)
		}
	}
	return out, nil
}

func (b *gpuBackend) Read(t ml.Tensor) []float32 {
	x := g(t)
	out := make([]float32, x.count())
	b.do("reading a tensor", func() error { return download(b.e, out, x.p) })
	return out
}

func (b *gpuBackend) Write(t ml.Tensor, v []float32) {
	x := g(t)
	if int64(len(v)) != x.count() {
		panic(fmt.Sprintf("cuda backend: write of %d values to %d×%d", len(v), x.rows, x.cols))
	}
	b.do("writing a tensor", func() error { return upload(b.e, x.p, v) })
}

// LogSoftmax reduces each row of logits on the device (logsoftmax.cu) and
// copies only the per-row results to the host.
func (b *gpuBackend) LogSoftmax(logits, ref ml.Tensor, targets []int32, out *ml.Scores) error {
	l := g(logits)
	var rl *gt
	if ref != nil {
		r, ok := ref.(*gt)
		if !ok {
			return fmt.Errorf("cuda: reference logits on another device (%T)", ref)
		}
		rl = r
		gshape("reference logits", rl, l.rows, l.cols)
	}
	rows, vocab := l.rows, l.cols
	if len(targets) != rows {
		panic(fmt.Sprintf("cuda backend: %d targets for %d rows of logits", len(targets), rows))
	}
	bad, rbad := make([]int32, rows), make([]int32, rows)
	b.do("scoring logits", func() error {
		e := b.e
		mark := b.Mark()
		defer b.Release(mark)
		// per row: lp, rlp, kld float64; arg, bad, rarg, rbad int32
		base, err := b.scratchBytes(40 * int64(rows))
		if err != nil {
			return err
		}
		tgt, err := b.scratchBytes(4 * int64(rows))
		if err != nil {
			return err
		}
		if err := upload(e, tgt, targets); err != nil {
			return err
		}
		n := ptr(rows)
		lp, rlp, kld := base, base+8*n, base+16*n
		arg, badp, rarg, rbadp := base+24*n, base+28*n, base+32*n, base+36*n
		if rl == nil {
			err = e.logsoftmax(l.p, rows, vocab, tgt, lp, arg, badp)
		} else {
			err = e.logsoftmaxKLD(l.p, rl.p, rows, vocab, tgt, lp, arg, badp, rlp, rarg, rbadp, kld)
		}
		if err != nil {
			return err
		}
		if err := e.sync("scoring logits"); err != nil {
			return err
		}
		errs := []error{download(e, out.LP, lp), download(e, out.Arg, arg), download(e, bad, badp)}
		if rl != nil {
			errs = append(errs, download(e, out.RLP, rlp), download(e, out.RArg, rarg), download(e, rbad, rbadp), download(e, out.KLD, kld))
		}
		return errors.Join(errs...)
	})
	if b.err != nil {
		return b.err
	}
	for j := range rows {
		if bad[j] >= 0 {
			return &ml.BadLogit{Row: j, Value: out.LP[j], Token: int(bad[j])}
		}
		if rl != nil && rbad[j] >= 0 {
			return &ml.BadLogit{Row: j, Ref: true, Value: out.RLP[j], Token: int(rbad[j])}
		}
	}
	return nil
}
