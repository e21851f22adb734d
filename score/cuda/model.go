package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"time"

	"ppl.dev/gguf"
	"ppl.dev/quant"
	"ppl.dev/score/backend"
	"ppl.dev/score/cuda/cublas"
	"ppl.dev/score/model"
	"ppl.dev/score/nn"
)

// arch is what the GPU forward pass needs to know of an architecture
// beyond the hyperparameters: the llama decoder (model/llama.go) and its
// variants qwen2 (model/qwen2.go: q, k, v biases, NeoX RoPE) and qwen3
// (model/qwen3.go: RMSNorm over each q and k head before RoPE). The RoPE
// layout comes from the model's Info.
type arch struct {
	qkvBias bool // biases required on q, k and v (optional elsewhere, as the CPU binds them)
	qkNorm  bool // attn_q_norm and attn_k_norm
}

var archs = map[string]arch{
	"llama": {},
	"qwen2": {qkvBias: true},
	"qwen3": {qkNorm: true},
}

// Sizes of the work done at once.
const (
	mlpChunk      = 8192      // rows of a window through the MLP at once
	logitBytes    = 512 << 20 // logits of a row block: at most this many bytes
	minRowBlock   = 64
	maxRowBlock   = 4096
	capacityRound = 256 // activation buffers hold a multiple of this many tokens
)

// Precision is how a model's matrices and the inputs of its products are
// stored. Either way every weight is first rounded to bf16 (nearest even,
// from ppl.dev/quant's exact dequantization), so a bf16 copy of the model
// (WriteBF16Copy) holds the GPU's weights, and every product accumulates in
// float32.
type Precision struct {
	Name    string
	Weights cublas.DataType // matrices, and the inputs of their products
	Down    cublas.DataType // ffn_down, and its input (the SwiGLU output)
}

var (
	// Mixed (the default) stores the bf16-rounded weights as fp16 (exact
	// for every bf16 value of magnitude 2^-14 to 65504; smaller ones keep
	// 2^-24 absolute precision) so that the inputs of products, normed
	// activations and attention outputs, keep 3 more bits than bf16 gives
	// them, at the same tensor-core speed. Only ffn_down stays bf16: its
	// input, silu(gate)·up, is not normalized and can exceed fp16's range.
	// The simulator measured bf16 inputs at up to 0.027 per token from the
	// CPU on the oracle models, fp16 inputs at a third of that.
	Mixed = Precision{"mixed", cublas.R16F, cublas.R16BF}
	// BF16 stores every matrix and every product input as bf16.
	BF16 = Precision{"bf16", cublas.R16BF, cublas.R16BF}
)

// Model is a GGUF model on a GPU: bf16-rounded weights (see Precision),
// float32 activations between kernels, half-precision inputs to products
// that accumulate in float32. Its methods may be called from several
// goroutines; the engine runs one window at a time.
type Model struct {
	e      *Engine
	path   string
	hp     model.HParams
	info   model.Info
	arch   arch
	prec   Precision
	rope   *nn.RoPE
	kvK    int // KV cache formats
	kvV    int
	scale  float64 // attention score scale
	w      weights
	a      acts
	flash  bool   // tensor-core attention
	attn   string // which attention kernel runs, and why
	closed bool

	loadTime    time.Duration
	weightBytes int64
}

// layer is one decoder layer's weights on the device.
type layer struct {
	attnNorm, ffnNorm ptr // f32
	qNorm, kNorm      ptr // f32 (qwen3)
	q, k, v, o        ptr // (out, in), Precision.Weights
	qb, kb, vb        ptr // f32 biases, 0 when absent
	gateUp            ptr // (2·FFN, Embd): ffn_gate's rows, then ffn_up's
	down              ptr // (Embd, FFN), Precision.Down
}

type weights struct {
	bufs    []buf
	embd    ptr // (vocab, embd)
	out     ptr // (vocab, embd); embd when tied
	outNorm ptr // f32
	layers  []layer
}

// acts are a model's buffers for windows of up to n tokens.
type acts struct {
	n        int
	rowBlock int // rows of logits at once
	chunk    int // rows through the MLP at once
	tok      buf // int32 (n)
	x        buf // f32 (n, embd): the residual stream
	hb       buf // half (n, embd): normed x, a product's input
	q, k, v  buf // f32 (n, heads·hd), (n, kvheads·hd) ×2
	att      buf // half (n, heads·hd)
	gu       buf // f32 (chunk, 2·ffn)
	act      buf // half (chunk, ffn)
	logits   buf // f32 (rowBlock, vocab)
	res      buf // per target: lp, rlp, kld float64; arg, bad, rarg, rbad int32
	cos, sin buf // float64 (n, dims/2)
	kk, kv   *kvTensor
}

// bufs lists the buffers of a, for freeing.
func (a *acts) bufs() []*buf {
	return []*buf{&a.tok, &a.x, &a.hb, &a.q, &a.k, &a.v, &a.att, &a.gu, &a.act, &a.logits, &a.res, &a.cos, &a.sin}
}

// Load loads the GGUF model at path onto CUDA device ordinal with the
// settings of opts (the KV cache dtype and RoPE overrides; Threads is for
// the CPU's dequantization). The model is first loaded by package model,
// which checks the file and resolves hyperparameters and RoPE exactly as
// the CPU reference does.
//
// The precision is Mixed, or BF16 when $PPL_CUDA_PRECISION is "bf16".
func Load(path string, opts model.Options, ordinal int) (*Model, error) {
	e, err := Open(ordinal)
	if err != nil {
		return nil, err
	}
	p := Mixed
	if os.Getenv("PPL_CUDA_PRECISION") == "bf16" {
		p = BF16
	}
	return loadOn(e, path, opts, p)
}

func loadOn(e *Engine, path string, opts model.Options, p Precision) (*Model, error) {
	if opts.Activations != "" && opts.Activations != model.ActFP32 {
		return nil, fmt.Errorf("cuda: activations %q are the CPU's arithmetic; on a GPU products take half-precision inputs (use the CPU for %s)", opts.Activations, opts.Activations)
	}
	t0 := time.Now()
	cpu, err := model.Load(path, opts)
	if err != nil {
		return nil, err
	}
	info, hp := cpu.Info(), cpu.HP
	cpu.Close()
	info.Activations = p.activations()
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var factors []float32
	if info.Rope.FreqFactors {
		if factors, err = vectorF32(f, "rope_freqs.weight", info.Rope.Dims/2); err != nil {
			return nil, err
		}
	}
	m, err := newModel(e, path, hp, info, factors, p)
	if err != nil {
		return nil, err
	}
	if err := m.loadWeights(f, opts.Threads); err != nil {
		m.Close()
		return nil, fmt.Errorf("cuda: %s: %w", path, err)
	}
	m.loadTime = time.Since(t0)
	return m, nil
}

// newModel makes a model without weights: the shapes, RoPE and KV cache
// settings, and a check of the tensor-core attention kernel against the
// plain one on this device.
func newModel(e *Engine, path string, hp model.HParams, info model.Info, factors []float32, p Precision) (*Model, error) {
	a, ok := archs[info.Arch]
	if !ok {
		names := make([]string, 0, len(archs))
		for n := range archs {
			names = append(names, n)
		}
		return nil, fmt.Errorf("cuda: architecture %q has no GPU forward pass (supported: %v); use --device cpu", info.Arch, names)
	}
	if hp.HeadDim > 256 || hp.HeadDim%2 != 0 {
		return nil, fmt.Errorf("cuda: head size %d not supported (at most 256, even)", hp.HeadDim)
	}
	kk, kv, err := kvFormat(info.KVDtype)
	if err != nil {
		return nil, err
	}
	r, err := ropeFrom(hp, info.Rope, factors)
	if err != nil {
		return nil, err
	}
	m := &Model{e: e, path: path, hp: hp, info: info, arch: a, prec: p, rope: r, kvK: kk, kvV: kv,
		scale: 1 / math.Sqrt(float64(hp.HeadDim))}
	if !flashHeadDims[hp.HeadDim] {
		m.attn = fmt.Sprintf("plain kernel (no tensor-core kernel for head size %d)", hp.HeadDim)
		return m, nil
	}
	diff, err := m.checkFlash()
	switch {
	case err != nil:
		return nil, err
	case diff <= flashTolerance:
		m.flash = true
		m.attn = fmt.Sprintf("tensor-core flash kernel (head size %d; agrees with the plain kernel to %.1e)", hp.HeadDim, diff)
	default:
		m.attn = fmt.Sprintf("plain kernel: the tensor-core kernel differs from it by %.3g (> %g) on this device", diff, flashTolerance)
	}
	return m, nil
}

// ropeFrom rebuilds the CPU's nn.RoPE from the settings Info records
// (model/rope.go resolves them; this is its inverse), so the GPU's angle
// tables come from the same nn.RoPE.Angle.
func ropeFrom(hp model.HParams, ri model.RopeInfo, factors []float32) (*nn.RoPE, error) {
	if !(ri.Factor > 0) {
		return nil, fmt.Errorf("cuda: RoPE factor %v", ri.Factor)
	}
	r := &nn.RoPE{HeadDim: hp.HeadDim, Dims: ri.Dims, NeoX: ri.Layout == "neox", Base: ri.FreqBase,
		FreqScale: 1 / ri.Factor, AttnFactor: ri.AttnFactor, FreqFactors: factors}
	if ri.ExtFactor != 0 {
		r.ExtFactor, r.BetaFast, r.BetaSlow, r.OrigCtx = ri.ExtFactor, ri.BetaFast, ri.BetaSlow, ri.OrigCtx
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return r, nil
}

// vectorF32 reads a 1-D tensor of n values as float32.
func vectorF32(f *gguf.File, name string, n int) ([]float32, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("missing tensor %s", name)
	}
	if t.Elements() != uint64(n) {
		return nil, fmt.Errorf("tensor %s has %d values, want %d", name, t.Elements(), n)
	}
	out := make([]float32, n)
	if err := quant.Dequantize(t.Type, f.Data(t), out); err != nil {
		return nil, fmt.Errorf("tensor %s: %w", name, err)
	}
	return out, nil
}

// Weight loading: each matrix is dequantized on the host, a block of rows
// at a time on all cores, rounded to bf16, stored as bf16 or fp16 and
// copied to the device.

const uploadBytes = 64 << 20 // host staging per copy

// allocW allocates a weight buffer.
func (m *Model) allocW(bytes int64) (ptr, error) {
	var b buf
	err := m.e.Do(func() error {
		var err error
		b, err = m.e.alloc(bytes)
		return err
	})
	if err != nil {
		return 0, err
	}
	m.w.bufs = append(m.w.bufs, b)
	m.weightBytes += b.bytes
	return b.p, nil
}

// matrix uploads the (out, in) weight matrices names, one after another,
// as one buffer of half type t.
func (m *Model) matrix(f *gguf.File, threads, in int, names []string, outs []int, t cublas.DataType) (ptr, error) {
	total := 0
	for _, o := range outs {
		total += o
	}
	dst, err := m.allocW(int64(total) * int64(in) * 2)
	if err != nil {
		return 0, err
	}
	row := 0
	for i, name := range names {
		tt, ok := f.Tensor(name)
		if !ok {
			return 0, fmt.Errorf("missing tensor %s", name)
		}
		if tt.Elements() != uint64(in)*uint64(outs[i]) || len(tt.Shape) < 1 || tt.Shape[0] != uint64(in) {
			return 0, fmt.Errorf("tensor %s has shape %v, want [%d, %d]", name, tt.Shape, in, outs[i])
		}
		rb, err := tt.Type.RowSize(uint64(in))
		if err != nil {
			return 0, fmt.Errorf("tensor %s: %w", name, err)
		}
		data := f.Data(tt)
		if uint64(len(data)) != rb*uint64(outs[i]) {
			return 0, fmt.Errorf("tensor %s: %d bytes, want %d", name, len(data), rb*uint64(outs[i]))
		}
		if err := m.uploadRows(dst+ptr(int64(row)*int64(in)*2), tt.Type, data, int(rb), in, outs[i], threads, t); err != nil {
			return 0, fmt.Errorf("tensor %s: %w", name, err)
		}
		row += outs[i]
	}
	return dst, nil
}

// uploadRows converts rows of type typ (rb bytes each, in values) to bf16,
// stores them as half type t and copies them to dst, a block at a time.
func (m *Model) uploadRows(dst ptr, typ gguf.Type, data []byte, rb, in, rows, threads int, t cublas.DataType) error {
	per := max(1, uploadBytes/(2*in))
	stage := make([]uint16, min(per, rows)*in)
	for r0 := 0; r0 < rows; r0 += per {
		r1 := min(rows, r0+per)
		part := stage[:(r1-r0)*in]
		if err := convertRows(part, typ, data, rb, in, r0, r1, threads, t); err != nil {
			return err
		}
		if err := m.e.Do(func() error { return upload(m.e, dst+ptr(int64(r0)*int64(in)*2), part) }); err != nil {
			return err
		}
	}
	return nil
}

// convertRows dequantizes rows [r0, r1) of data (type typ, rb bytes and in
// values each) exactly, rounds them to bf16 and stores them in out as half
// type t (bf16, or the same value as fp16), on threads goroutines (all
// cores when < 1).
func convertRows(out []uint16, typ gguf.Type, data []byte, rb, in, r0, r1, threads int, t cublas.DataType) error {
	if threads < 1 {
		threads = runtime.GOMAXPROCS(0)
	}
	n := r1 - r0
	var wg sync.WaitGroup
	errs := make([]error, threads)
	for w := range threads {
		lo, hi := r0+w*n/threads, r0+(w+1)*n/threads
		if lo == hi {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f32 := make([]float32, in)
			for r := lo; r < hi; r++ {
				if err := quant.Dequantize(typ, data[r*rb:(r+1)*rb], f32); err != nil {
					errs[w] = err
					return
				}
				o := out[(r-r0)*in : (r-r0+1)*in]
				for i, v := range f32 {
					h := quant.F32ToBF16(v)
					if t == cublas.R16F {
						h = quant.F32ToF16(quant.BF16ToF32(h))
					}
					o[i] = h
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// vector uploads a 1-D tensor as float32.
func (m *Model) vector(f *gguf.File, name string, n int) (ptr, error) {
	v, err := vectorF32(f, name, n)
	if err != nil {
		return 0, err
	}
	return m.vectorData(v)
}

func (m *Model) vectorData(v []float32) (ptr, error) {
	p, err := m.allocW(int64(4 * len(v)))
	if err != nil {
		return 0, err
	}
	return p, m.e.Do(func() error { return upload(m.e, p, v) })
}

func has(f *gguf.File, name string) bool {
	_, ok := f.Tensor(name)
	return ok
}

// loadWeights uploads every tensor the forward pass reads, named as the
// CPU's architecture files bind them.
func (m *Model) loadWeights(f *gguf.File, threads int) error {
	hp := m.hp
	E, V, F := hp.Embd, hp.Vocab, hp.FFN
	qd, kvd := hp.Heads*hp.HeadDim, hp.KVHeads*hp.HeadDim
	var err error
	wt := m.prec.Weights
	one := func(dst *ptr, in int, name string, out int) {
		if err == nil {
			*dst, err = m.matrix(f, threads, in, []string{name}, []int{out}, wt)
		}
	}
	vec := func(dst *ptr, name string, n int) {
		if err == nil {
			*dst, err = m.vector(f, name, n)
		}
	}
	one(&m.w.embd, E, "token_embd.weight", V)
	if has(f, "output.weight") {
		one(&m.w.out, E, "output.weight", V)
	} else {
		m.w.out = m.w.embd
	}
	vec(&m.w.outNorm, "output_norm.weight", E)
	m.w.layers = make([]layer, hp.Layers)
	for i := range m.w.layers {
		l := &m.w.layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		vec(&l.attnNorm, p+"attn_norm.weight", E)
		one(&l.q, E, p+"attn_q.weight", qd)
		one(&l.k, E, p+"attn_k.weight", kvd)
		one(&l.v, E, p+"attn_v.weight", kvd)
		one(&l.o, qd, p+"attn_output.weight", E)
		for _, b := range []struct {
			dst  *ptr
			name string
			n    int
		}{{&l.qb, "attn_q.bias", qd}, {&l.kb, "attn_k.bias", kvd}, {&l.vb, "attn_v.bias", kvd}} {
			switch {
			case has(f, p+b.name):
				vec(b.dst, p+b.name, b.n)
			case m.arch.qkvBias && err == nil:
				err = fmt.Errorf("missing tensor %s%s", p, b.name)
			}
		}
		if m.arch.qkNorm {
			vec(&l.qNorm, p+"attn_q_norm.weight", hp.HeadDim)
			vec(&l.kNorm, p+"attn_k_norm.weight", hp.HeadDim)
		}
		vec(&l.ffnNorm, p+"ffn_norm.weight", E)
		if err == nil {
			l.gateUp, err = m.matrix(f, threads, E, []string{p + "ffn_gate.weight", p + "ffn_up.weight"}, []int{F, F}, wt)
		}
		if err == nil {
			l.down, err = m.matrix(f, threads, F, []string{p + "ffn_down.weight"}, []int{E}, m.prec.Down)
		}
	}
	return err
}

// ensure sizes the activation buffers for windows of n tokens; on the
// engine's thread.
func (m *Model) ensure(n int) error {
	if n <= m.a.n {
		return nil
	}
	m.freeActs()
	hp, e := m.hp, m.e
	capN := (n + capacityRound - 1) / capacityRound * capacityRound
	qd, kvd := int64(hp.Heads*hp.HeadDim), int64(hp.KVHeads*hp.HeadDim)
	N, E, F, V := int64(capN), int64(hp.Embd), int64(hp.FFN), int64(hp.Vocab)
	a := acts{n: capN, chunk: min(capN, mlpChunk)}
	a.rowBlock = max(minRowBlock, min(maxRowBlock, logitBytes/int(4*V)))
	a.rowBlock = min(a.rowBlock, capN)
	half := int64(m.rope.Dims / 2)
	sizes := []struct {
		b     *buf
		bytes int64
	}{
		{&a.tok, 4 * N}, {&a.x, 4 * N * E}, {&a.hb, 2 * N * E},
		{&a.q, 4 * N * qd}, {&a.k, 4 * N * kvd}, {&a.v, 4 * N * kvd}, {&a.att, 2 * N * qd},
		{&a.gu, 4 * int64(a.chunk) * 2 * F}, {&a.act, 2 * int64(a.chunk) * F},
		{&a.logits, 4 * int64(a.rowBlock) * V}, {&a.res, 40 * N},
		{&a.cos, 8 * N * half}, {&a.sin, 8 * N * half},
	}
	for _, s := range sizes {
		b, err := e.alloc(s.bytes)
		if err != nil {
			m.a = a
			m.freeActs()
			return err
		}
		*s.b = b
	}
	var err error
	groups := N * int64(hp.KVHeads)
	if a.kk, err = e.newKV(m.kvK, groups, hp.HeadDim); err == nil {
		a.kv, err = e.newKV(m.kvV, groups, hp.HeadDim)
	}
	m.a = a
	if err != nil {
		m.freeActs()
		return err
	}
	a = m.a // the buffers now live in m.a
	cos, sin := ropeTables(m.rope, capN)
	if err := upload(e, a.cos.p, cos); err != nil {
		return err
	}
	return upload(e, a.sin.p, sin)
}

// ropeTables returns the cosines and sines of positions [0, n), dims/2 per
// position, from nn.RoPE.Angle in float64 (as nn.RoPE's own tables).
func ropeTables(r *nn.RoPE, n int) (cos, sin []float64) {
	half := r.Dims / 2
	cos, sin = make([]float64, n*half), make([]float64, n*half)
	for p := range n {
		for i := range half {
			cos[p*half+i], sin[p*half+i] = r.Angle(p, i)
		}
	}
	return cos, sin
}

func (m *Model) freeActs() {
	for _, b := range m.a.bufs() {
		m.e.release(b)
	}
	m.e.freeKV(m.a.kk)
	m.e.freeKV(m.a.kv)
	m.a = acts{}
}

// results views of a.res for nt targets (nt <= a.n).
type resultPtrs struct{ lp, rlp, kld, arg, bad, rarg, rbad ptr }

func (a *acts) results() resultPtrs {
	n := int64(a.n)
	return resultPtrs{lp: a.res.at(0), rlp: a.res.at(8 * n), kld: a.res.at(16 * n),
		arg: a.res.at(24 * n), bad: a.res.at(28 * n), rarg: a.res.at(32 * n), rbad: a.res.at(36 * n)}
}

// forward runs tokens through the decoder and leaves the output-normed
// hidden states in a.hb; on the engine's thread. The order of
// operations is the CPU's (model/llama.go, model/qwen3.go Forward).
func (m *Model) forward(tokens []int32) error {
	n := len(tokens)
	if err := m.ensure(n); err != nil {
		return err
	}
	e, hp, a := m.e, m.hp, &m.a
	E, H, KVH, HD := hp.Embd, hp.Heads, hp.KVHeads, hp.HeadDim
	qd, kvd := H*HD, KVH*HD
	if err := upload(e, a.tok.p, tokens); err != nil {
		return err
	}
	wt, dt := m.prec.Weights, m.prec.Down
	if err := e.embed(a.x.p, m.w.embd, a.tok.p, n, E, wt); err != nil {
		return err
	}
	for i := range m.w.layers {
		l := &m.w.layers[i]
		steps := []func() error{
			func() error { return e.rmsnormHalf(a.hb.p, a.x.p, l.attnNorm, n, E, hp.Eps, wt) },
			func() error { return e.gemm(a.q.p, f32, qd, a.hb.p, E, l.q, wt, n, E, qd, 0) },
			func() error { return e.gemm(a.k.p, f32, kvd, a.hb.p, E, l.k, wt, n, E, kvd, 0) },
			func() error { return e.gemm(a.v.p, f32, kvd, a.hb.p, E, l.v, wt, n, E, kvd, 0) },
			func() error { return m.biases(l, n) },
			func() error {
				if !m.arch.qkNorm {
					return nil
				}
				if err := e.rmsnormF32(a.q.p, a.q.p, l.qNorm, n*H, HD, hp.Eps); err != nil {
					return err
				}
				return e.rmsnormF32(a.k.p, a.k.p, l.kNorm, n*KVH, HD, hp.Eps)
			},
			func() error { return e.rope(a.q.p, a.cos.p, a.sin.p, n, H, HD, m.rope.Dims, m.rope.NeoX) },
			func() error { return e.rope(a.k.p, a.cos.p, a.sin.p, n, KVH, HD, m.rope.Dims, m.rope.NeoX) },
			func() error { return e.kvStore(a.kk, a.k.p, n, KVH, HD) },
			func() error { return e.kvStore(a.kv, a.v.p, n, KVH, HD) },
			func() error { return e.attention(a.att.p, a.q.p, n, H, KVH, HD, m.scale, a.kk, a.kv, m.flash, wt) },
			// x += att·Woᵀ: the residual add in the product's epilogue (beta = 1)
			func() error { return e.gemm(a.x.p, f32, E, a.att.p, qd, l.o, wt, n, qd, E, 1) },
			func() error { return e.rmsnormHalf(a.hb.p, a.x.p, l.ffnNorm, n, E, hp.Eps, wt) },
			func() error { return m.mlp(l, n, dt) },
		}
		for _, s := range steps {
			if err := s(); err != nil {
				return fmt.Errorf("layer %d: %w", i, err)
			}
		}
	}
	return e.rmsnormHalf(a.hb.p, a.x.p, m.w.outNorm, n, E, hp.Eps, wt)
}

const (
	f32  = cublas.R32F
	bf16 = cublas.R16BF
	f16  = cublas.R16F
)

func (m *Model) biases(l *layer, n int) error {
	hp, a := m.hp, &m.a
	for _, b := range []struct {
		x, b ptr
		d    int
	}{{a.q.p, l.qb, hp.Heads * hp.HeadDim}, {a.k.p, l.kb, hp.KVHeads * hp.HeadDim}, {a.v.p, l.vb, hp.KVHeads * hp.HeadDim}} {
		if b.b == 0 {
			continue
		}
		if err := m.e.addBias(b.x, b.b, n, b.d); err != nil {
			return err
		}
	}
	return nil
}

// mlp computes x += Down(silu(Gate(hb))·Up(hb)) a chunk of rows at a
// time; the SwiGLU output and ffn_down are of half type dt.
func (m *Model) mlp(l *layer, n int, dt cublas.DataType) error {
	e, hp, a := m.e, m.hp, &m.a
	E, F := hp.Embd, hp.FFN
	for c0 := 0; c0 < n; c0 += a.chunk {
		c := min(a.chunk, n-c0)
		hb := a.hb.at(int64(c0) * int64(E) * 2)
		if err := e.gemm(a.gu.p, f32, 2*F, hb, E, l.gateUp, m.prec.Weights, c, E, 2*F, 0); err != nil {
			return err
		}
		if err := e.swiglu(a.act.p, a.gu.p, a.gu.at(4*int64(F)), c, F, 2*F, 2*F, dt); err != nil {
			return err
		}
		if err := e.gemm(a.x.at(int64(c0)*int64(E)*4), f32, E, a.act.p, F, l.down, dt, c, F, E, 1); err != nil {
			return err
		}
	}
	return nil
}

// head computes the logits (rows, vocab) f32 of hidden rows [r0, r0+rows).
func (m *Model) head(logits ptr, r0, rows int) error {
	E, V := m.hp.Embd, m.hp.Vocab
	return m.e.gemm(logits, f32, V, m.a.hb.at(int64(r0)*int64(E)*2), E, m.w.out, m.prec.Weights, rows, E, V, 0)
}

// Score runs tokens through the model from an empty cache and scores each
// target in [scoreFrom, len(tokens)), as model.Model.Score.
func (m *Model) Score(tokens []int32, scoreFrom int) (*model.Result, error) {
	return m.score(tokens, scoreFrom, nil)
}

// ScoreWith is Score plus KL(ref || m), ref's log-probabilities and top-1
// agreement per target; ref must be a CUDA model on the same device.
func (m *Model) ScoreWith(tokens []int32, scoreFrom int, ref backend.Model) (*model.Result, error) {
	r, ok := ref.(*Model)
	switch {
	case ref == nil:
		return nil, errors.New("cuda: ScoreWith: no reference model")
	case !ok:
		return nil, fmt.Errorf("cuda: reference model on %s, model on %s: both must be on one device", ref.Device().Name, m.e.label())
	case r == m:
		return nil, errors.New("cuda: ScoreWith: the reference is the model itself")
	case r.e != m.e:
		return nil, fmt.Errorf("cuda: reference model on %s, model on %s: both must be on one device", r.e.label(), m.e.label())
	case r.Vocab() != m.Vocab():
		return nil, fmt.Errorf("cuda: ScoreWith: reference vocabulary has %d tokens, model %d", r.Vocab(), m.Vocab())
	}
	return m.score(tokens, scoreFrom, r)
}

func (m *Model) checkTokens(tokens []int32, scoreFrom int) error {
	if scoreFrom < 1 || scoreFrom > len(tokens) {
		return fmt.Errorf("cuda: score from %d with %d tokens (want 1 <= from <= tokens)", scoreFrom, len(tokens))
	}
	for i, t := range tokens {
		if t < 0 || int(t) >= m.hp.Vocab {
			return fmt.Errorf("cuda: token %d at position %d is outside the vocabulary [0, %d)", t, i, m.hp.Vocab)
		}
	}
	return nil
}

func (m *Model) score(tokens []int32, scoreFrom int, ref *Model) (*model.Result, error) {
	if m.closed || (ref != nil && ref.closed) {
		return nil, errors.New("cuda: model is closed")
	}
	if err := m.checkTokens(tokens, scoreFrom); err != nil {
		return nil, err
	}
	n, nt := len(tokens), len(tokens)-scoreFrom
	res := &model.Result{ScoreFrom: scoreFrom, Logprobs: make([]float64, nt), Argmax: make([]int32, nt)}
	if ref != nil {
		res.RefLogprobs, res.KLD, res.Top1Agree = make([]float64, nt), make([]float64, nt), make([]bool, nt)
	}
	if nt == 0 {
		return res, nil
	}
	bad, rbad := make([]int32, nt), make([]int32, nt)
	rarg := make([]int32, nt)
	err := m.e.Do(func() error {
		if err := m.forward(tokens); err != nil {
			return err
		}
		if ref != nil {
			if err := ref.forward(tokens); err != nil {
				return fmt.Errorf("reference: %w", err)
			}
		}
		e, a, V := m.e, &m.a, m.hp.Vocab
		rp := a.results()
		// Hidden row p predicts token p+1: rows [scoreFrom-1, n-1).
		for r0 := scoreFrom - 1; r0 < n-1; r0 += a.rowBlock {
			b := min(a.rowBlock, n-1-r0)
			off := int64(r0 - (scoreFrom - 1))
			if err := m.head(a.logits.p, r0, b); err != nil {
				return err
			}
			targets := a.tok.at(int64(r0+1) * 4)
			if ref == nil {
				if err := e.logsoftmax(a.logits.p, b, V, targets, rp.lp+ptr(8*off), rp.arg+ptr(4*off), rp.bad+ptr(4*off)); err != nil {
					return err
				}
				continue
			}
			ra := &ref.a
			if b > ra.rowBlock {
				return fmt.Errorf("cuda: reference holds %d rows of logits, model %d", ra.rowBlock, b)
			}
			if err := ref.head(ra.logits.p, r0, b); err != nil {
				return fmt.Errorf("reference: %w", err)
			}
			if err := e.logsoftmaxKLD(a.logits.p, ra.logits.p, b, V, targets, rp.lp+ptr(8*off), rp.arg+ptr(4*off), rp.bad+ptr(4*off),
				rp.rlp+ptr(8*off), rp.rarg+ptr(4*off), rp.rbad+ptr(4*off), rp.kld+ptr(8*off)); err != nil {
				return err
			}
		}
		if err := e.sync("scoring a window"); err != nil {
			return err
		}
		errs := []error{download(e, res.Logprobs, rp.lp), download(e, res.Argmax, rp.arg), download(e, bad, rp.bad)}
		if ref != nil {
			errs = append(errs, download(e, res.RefLogprobs, rp.rlp), download(e, res.KLD, rp.kld),
				download(e, rarg, rp.rarg), download(e, rbad, rp.rbad))
		}
		e.sampleMemory()
		return errors.Join(errs...)
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	for i := range nt {
		p := scoreFrom + i
		if bad[i] >= 0 {
			return nil, fmt.Errorf("cuda: logits for target %d contain %v (token %d)", p, res.Logprobs[i], bad[i])
		}
		if ref != nil && rbad[i] >= 0 {
			return nil, fmt.Errorf("cuda: reference logits for target %d contain %v (token %d)", p, res.RefLogprobs[i], rbad[i])
		}
		if ref != nil {
			res.Top1Agree[i] = res.Argmax[i] == rarg[i]
		}
	}
	return res, nil
}

// activations names the arithmetic of products for headers and cache keys.
func (p Precision) activations() string {
	if p.Weights == p.Down {
		return halfName(p.Weights)
	}
	return halfName(p.Weights) + "+" + halfName(p.Down)
}

func (p Precision) describe() string {
	if p.Weights == p.Down {
		return fmt.Sprintf("%s: all matrices and product inputs %s", p.Name, halfName(p.Weights))
	}
	return fmt.Sprintf("%s: matrices and product inputs %s, ffn_down and its input %s", p.Name, halfName(p.Weights), halfName(p.Down))
}

func halfName(t cublas.DataType) string {
	if t == cublas.R16F {
		return "fp16"
	}
	return "bf16"
}

// Info describes the model and its settings.
func (m *Model) Info() model.Info { return m.info }

// Vocab returns the vocabulary size.
func (m *Model) Vocab() int { return m.hp.Vocab }

// HParams returns the hyperparameters.
func (m *Model) HParams() model.HParams { return m.hp }

// Device describes the GPU for result headers.
func (m *Model) Device() backend.Device {
	e := m.e
	return backend.Device{Name: e.label(), Activations: m.prec.activations(), Extra: map[string]any{
		"gpu":                e.Name,
		"compute_capability": fmt.Sprintf("%d.%d", e.CC[0], e.CC[1]),
		"cuda":               e.Driver,
		"driver":             e.Release,
		"cublas":             e.CUBLAS,
		"precision":          m.prec.describe(),
		"weight_bytes":       m.weightBytes,
		"load_seconds":       math.Round(m.loadTime.Seconds()*1000) / 1000,
		"attention":          m.attn,
	}}
}

// Report says what the run cost on the GPU.
func (m *Model) Report() string {
	e := m.e
	return fmt.Sprintf("%s: %s of bf16-rounded weights (%s) loaded in %.1fs; peak GPU memory %s allocated by ppl, %s in use on the device; attention: %s",
		e.Describe(), humanBytes(m.weightBytes), m.prec.describe(), m.loadTime.Seconds(), humanBytes(e.PeakAllocated()),
		humanBytes(int64(e.PeakDeviceUsed())), m.attn)
}

// Close frees the model's device memory.
func (m *Model) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	return m.e.Do(func() error {
		m.freeActs()
		var errs []error
		for i := range m.w.bufs {
			errs = append(errs, m.e.release(&m.w.bufs[i]))
		}
		m.w = weights{}
		return errors.Join(errs...)
	})
}

// flashTolerance bounds the tensor-core attention kernel's distance from
// the plain one on checkFlash's inputs (values in [-1, 1]): bf16 q, k, v
// and probabilities give differences near 4e-3; an indexing mistake gives
// differences of the size of the values.
const flashTolerance = 0.03

// checkFlash runs both attention kernels on random input of the model's
// attention shape and cache format and returns their largest difference.
func (m *Model) checkFlash() (float64, error) {
	hp := m.hp
	const n = 150 // three query tiles, the last partial
	H, KVH, HD := hp.Heads, hp.KVHeads, hp.HeadDim
	rng := rand.New(rand.NewPCG(1, 2))
	rnd := func(k int) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = float32(rng.Float64()*2 - 1)
		}
		return v
	}
	q, k, v := rnd(n*H*HD), rnd(n*KVH*HD), rnd(n*KVH*HD)
	var diff float64
	err := m.e.Do(func() error {
		e := m.e
		var bufs []buf
		defer func() {
			for i := range bufs {
				e.release(&bufs[i])
			}
		}()
		get := func(bytes int64) (ptr, error) {
			b, err := e.alloc(bytes)
			bufs = append(bufs, b)
			return b.p, err
		}
		qp, err1 := get(int64(4 * len(q)))
		kp, err2 := get(int64(4 * len(k)))
		vp, err3 := get(int64(4 * len(v)))
		o1, err4 := get(int64(2 * len(q)))
		o2, err5 := get(int64(2 * len(q)))
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			return err
		}
		kt, err := e.newKV(m.kvK, int64(n*KVH), HD)
		if err != nil {
			return err
		}
		defer e.freeKV(kt)
		vt, err := e.newKV(m.kvV, int64(n*KVH), HD)
		if err != nil {
			return err
		}
		defer e.freeKV(vt)
		// One step at a time, stopping at the first error (a slice of
		// results would run every step, kernels after a failed copy too).
		for _, step := range []func() error{
			func() error { return upload(e, qp, q) },
			func() error { return upload(e, kp, k) },
			func() error { return upload(e, vp, v) },
			func() error { return e.kvStore(kt, kp, n, KVH, HD) },
			func() error { return e.kvStore(vt, vp, n, KVH, HD) },
			func() error { return e.attention(o1, qp, n, H, KVH, HD, m.scale, kt, vt, false, f16) },
			func() error { return e.attention(o2, qp, n, H, KVH, HD, m.scale, kt, vt, true, f16) },
			func() error { return e.sync("checking the attention kernels") },
		} {
			if err := step(); err != nil {
				return fmt.Errorf("cuda: checking the attention kernels: %w", err)
			}
		}
		a, b := make([]uint16, len(q)), make([]uint16, len(q))
		if err := errors.Join(download(e, a, o1), download(e, b, o2)); err != nil {
			return err
		}
		for i := range a {
			x, y := float64(quant.F16ToF32(a[i])), float64(quant.F16ToF32(b[i]))
			d := math.Abs(x - y)
			if d != d || math.IsInf(x, 0) {
				d = math.Inf(1)
			}
			diff = max(diff, d)
		}
		return nil
	})
	return diff, err
}
