package model

import (
	"fmt"
	"math"

	"ppl.dev/gguf"
	"ppl.dev/score/kvcache"
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// cpuBackend runs ml operations with the nn kernels: tensors are float32
// slices of the nn.Context's arenas, matrices are nn.Linear views of the
// file's mapping, and the KV cache is simulated by encoding and decoding
// each layer's keys and values in the cache's format (kvStore).
type cpuBackend struct {
	c       *nn.Context
	ones    map[int]*nn.RMSNorm // weightless norms by width
	err     error
	keys    []byte             // a layer's keys encoded for nn.Attention.KeyBlocks
	parts   []kvcache.Block    // keyBlocks's encodings, one per worker
	kvHead0 kvcache.LlamaHead0 // Info.KVHead0
}

func newCPU(c *nn.Context) *cpuBackend { return &cpuBackend{c: c, ones: map[int]*nn.RMSNorm{}} }

// cpuT is a CPU tensor.
type cpuT struct {
	d          []float32
	rows, cols int
}

func (t *cpuT) Rows() int { return t.rows }
func (t *cpuT) Cols() int { return t.cols }

func ct(t ml.Tensor) *cpuT {
	c, ok := t.(*cpuT)
	if !ok {
		panic(fmt.Sprintf("cpu backend: tensor %T is not a CPU tensor", t))
	}
	return c
}

func shape(what string, t *cpuT, rows, cols int) {
	if t.rows != rows || t.cols != cols {
		panic(fmt.Sprintf("cpu backend: %s is %d×%d, want %d×%d", what, t.rows, t.cols, rows, cols))
	}
}

// linears are a prepared Matrix: one nn.Linear, or one per expert.
func lin(w *ml.Matrix) *nn.Linear { return w.Impl.([]*nn.Linear)[0] }

func (b *cpuBackend) Prepare(w *ml.Matrix) error {
	n := max(w.Experts, 1)
	if len(w.Data)%n != 0 {
		return fmt.Errorf("tensor %s: %d bytes for %d experts", w.Name, len(w.Data), n)
	}
	per := len(w.Data) / n
	ls := make([]*nn.Linear, n)
	for e := range n {
		l, err := nn.NewLinear(w.Name, w.Type, w.In, w.Out, w.Data[e*per:(e+1)*per])
		if err != nil {
			return err
		}
		if w.Scale != nil {
			l.Scale = w.Scale[e]
		}
		if w.Bias != nil {
			l.Bias = w.Bias[e*w.Out : (e+1)*w.Out]
		}
		l.Routed = w.Experts > 0
		l.TensorRows = w.Fused
		ls[e] = l
	}
	w.Impl = ls
	return nil
}

func (b *cpuBackend) PrepareVector(v *ml.Vector) error { return nil }

func (b *cpuBackend) Alloc(rows, cols int) ml.Tensor {
	return &cpuT{d: b.c.Alloc(rows * cols), rows: rows, cols: cols}
}

func (b *cpuBackend) View(t ml.Tensor, rows, cols int) ml.Tensor {
	x := ct(t)
	if rows*cols != len(x.d) {
		panic(fmt.Sprintf("cpu backend: view of %d×%d as %d×%d", x.rows, x.cols, rows, cols))
	}
	return &cpuT{d: x.d, rows: rows, cols: cols}
}

func (b *cpuBackend) Slice(t ml.Tensor, r0, r1 int) ml.Tensor {
	x := ct(t)
	if r0 < 0 || r1 < r0 || r1 > x.rows {
		panic(fmt.Sprintf("cpu backend: rows [%d, %d) of %d", r0, r1, x.rows))
	}
	return &cpuT{d: x.d[r0*x.cols : r1*x.cols], rows: r1 - r0, cols: x.cols}
}

func (b *cpuBackend) Mark() ml.Mark     { return b.c.Mark() }
func (b *cpuBackend) Release(m ml.Mark) { b.c.Release(m.(nn.Mark)) }
func (b *cpuBackend) Reset()            { b.c.Reset(); b.err = nil }
func (b *cpuBackend) Err() error        { return b.err }

func (b *cpuBackend) Fail(err error) {
	if b.err == nil {
		b.err = err
	}
}
func (b *cpuBackend) Close() error { b.c.Free(); return nil }

func (b *cpuBackend) Embed(dst ml.Tensor, w *ml.Matrix, tokens []int32) {
	d := ct(dst)
	shape("embedding output", d, len(tokens), w.In)
	lin(w).Lookup(b.c, d.d, tokens)
}

func (b *cpuBackend) Linear(dst, x ml.Tensor, w *ml.Matrix) {
	d, s := ct(dst), ct(x)
	shape(w.Name+" input", s, s.rows, w.In)
	shape(w.Name+" output", d, s.rows, w.Out)
	lin(w).Forward(b.c, d.d, s.d, s.rows)
}

func (b *cpuBackend) Linears(dsts []ml.Tensor, x ml.Tensor, ws []*ml.Matrix) {
	s := ct(x)
	ls := make([]*nn.Linear, len(ws))
	outs := make([][]float32, len(ws))
	for i, w := range ws {
		d := ct(dsts[i])
		shape(w.Name+" input", s, s.rows, w.In)
		shape(w.Name+" output", d, s.rows, w.Out)
		ls[i], outs[i] = lin(w), d.d
	}
	nn.ForwardShared(b.c, s.d, s.rows, ls, outs)
}

func (b *cpuBackend) RMSNorm(dst, x ml.Tensor, w *ml.Vector, eps float64) {
	d, s := ct(dst), ct(x)
	shape("norm output", d, s.rows, s.cols)
	var m *nn.RMSNorm
	if w == nil {
		if m = b.ones[s.cols]; m == nil {
			one := make([]float32, s.cols)
			for i := range one {
				one[i] = 1
			}
			m = &nn.RMSNorm{Name: "norm", W: one}
			b.ones[s.cols] = m
		}
		m = &nn.RMSNorm{Name: m.Name, W: m.W, Eps: eps}
	} else {
		m = &nn.RMSNorm{Name: w.Name, W: w.V, Eps: eps, Cols: s.cols}
	}
	m.Forward(b.c, d.d, s.d, s.rows)
}

func (b *cpuBackend) RoPE(x ml.Tensor, heads int, r *nn.RoPE) {
	s := ct(x)
	shape("rope input", s, s.rows, heads*r.HeadDim)
	r.Forward(b.c, s.d, s.rows, heads)
}

// parallelRowsMin is the fewest values an elementwise or per-row
// operation splits over the threads: below it the goroutines cost more
// than the pass.
const parallelRowsMin = 1 << 16

// parallelRows runs fn over the rows [0, n) of a tensor of cols values, in
// chunks of whole units of unit rows on the context's threads.
// Elementwise and per-row passes are bound by memory, and each thread of
// a large machine brings its own share of the bandwidth: run serially
// they would be Amdahl's share of a window (a residual add over 4096 ×
// 8192 values is 400 MB of traffic). The same operations per value, so the
// same bits.
func (b *cpuBackend) parallelRows(n, cols, unit int, fn func(lo, hi int)) {
	units := (n + unit - 1) / unit
	if n*cols < parallelRowsMin || units < 2 {
		fn(0, n)
		return
	}
	b.c.Parallel(units, func(_, lo, hi int) { fn(lo*unit, min(hi*unit, n)) })
}

// parallelValues is parallelRows over a tensor's values, for operations
// of each value alone: fn gets the values [lo, hi) of t.
func (b *cpuBackend) parallelValues(t *cpuT, fn func(d []float32, lo, hi int)) {
	c := t.cols
	b.parallelRows(t.rows, c, 1, func(lo, hi int) { fn(t.d[lo*c:hi*c], lo*c, hi*c) })
}

func (b *cpuBackend) Add(dst, x ml.Tensor) {
	d, s := ct(dst), ct(x)
	shape("add input", s, d.rows, d.cols)
	b.parallelValues(d, func(v []float32, lo, hi int) { nn.Add(v, s.d[lo:hi]) })
}

func (b *cpuBackend) AddRows(x ml.Tensor, v *ml.Vector) {
	d := ct(x)
	if len(v.V) != d.cols {
		panic(fmt.Sprintf("cpu backend: %s has %d values for %d columns", v.Name, len(v.V), d.cols))
	}
	b.parallelRows(d.rows, d.cols, 1, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			nn.Add(d.d[t*d.cols:(t+1)*d.cols], v.V)
		}
	})
}

func (b *cpuBackend) Scale(x ml.Tensor, s float64) {
	v := float32(s)
	b.parallelValues(ct(x), func(d []float32, _, _ int) {
		for i := range d {
			d[i] *= v
		}
	})
}

func (b *cpuBackend) Clamp(x ml.Tensor, c float64) {
	v := float32(c)
	b.parallelValues(ct(x), func(d []float32, _, _ int) {
		for i := range d {
			d[i] = min(max(d[i], -v), v)
		}
	})
}

func (b *cpuBackend) GateMul(x, g ml.Tensor, f ml.GateFn) {
	d, s := ct(x), ct(g)
	if s.rows != d.rows || (s.cols != d.cols && s.cols != 1) {
		panic(fmt.Sprintf("cpu backend: gate %d×%d for %d×%d", s.rows, s.cols, d.rows, d.cols))
	}
	b.c.Parallel(d.rows, func(_, lo, hi int) {
		var sg []float32
		if b.c.LlamaCPP {
			sg = make([]float32, s.cols)
		}
		for r := lo; r < hi; r++ {
			row := d.d[r*d.cols : (r+1)*d.cols]
			if sg != nil { // SIGMOID (or SILU, DIV; or SOFTPLUS), then MUL
				gr := s.d[r*s.cols : (r+1)*s.cols]
				switch f {
				case ml.SiLUDivGate:
					nn.GGMLSiLUDiv(sg, gr)
				case ml.SoftplusGate:
					nn.GGMLSoftplus(sg, gr)
				case ml.Softplus2Gate:
					nn.GGMLSoftplus2(sg, gr)
				default:
					nn.GGMLSigmoid(sg, gr)
				}
				for i := range row {
					row[i] *= sg[min(i, s.cols-1)]
				}
				continue
			}
			for i := range row {
				gv := float64(s.d[r*s.cols+min(i, s.cols-1)])
				switch f {
				case ml.SoftplusGate:
					row[i] = float32(float64(row[i]) * nn.Softplus(gv))
				case ml.Softplus2Gate:
					row[i] = float32(float64(row[i]) * nn.Softplus2(gv))
				default:
					row[i] = float32(float64(row[i]) / (1 + math.Exp(-gv)))
				}
			}
		}
	})
}

func (b *cpuBackend) Attention(dst, q, k, v ml.Tensor, layer int, a *ml.Attn) {
	b.attend("attention", dst, q, k, v, layer, a)
}

// attend checks the shapes, stores k and v as layer's cache (none when
// layer < 0: shared keys and values, stored by their own layer), then runs
// nn.Attention with a's options; in the int8 modes before a quantized
// cache, with llama.cpp's rotation of the heads (kvTurns), and over the
// cache's own key blocks where llama.cpp's flash attention reads them
// (keyBlocks).
func (b *cpuBackend) attend(what string, dst, q, k, v ml.Tensor, layer int, a *ml.Attn) {
	o, qq, kk, vv := ct(dst), ct(q), ct(k), ct(v)
	n := qq.rows
	shape(what+" q", qq, n, a.Heads*a.HeadDim)
	shape(what+" k", kk, n, a.KVHeads*a.HeadDim)
	shape(what+" v", vv, n, a.KVHeads*a.HeadDim)
	shape(what+" output", o, n, a.Heads*a.HeadDim)
	at := b.nnAttention(a)
	kv := n * a.KVHeads * a.HeadDim
	qd, od := qq.d, o.d
	// llama.cpp's rotation before a quantized cache: q and k by the
	// Hadamard matrix of kr, v's heads (their first vd values) by that of
	// vr (the shared keys and values of layer < 0 rotated by their own
	// layer), the output turned back, each as ggml-cpu's FWHT computes it.
	// With a.KeyValues the values vals are k, turned with it.
	kr, vr, vd := b.kvTurns(a)
	vals := vv.d
	if a.KeyValues {
		vals = kk.d
	}
	if kr != 0 || vr != 0 {
		mark := b.c.Mark()
		defer b.c.Release(mark)
	}
	if kr != 0 {
		qd = b.c.Alloc(n * a.Heads * a.HeadDim)
		nn.FWHT(b.c, qd, qq.d, len(qd)/kr, kr)
		if layer >= 0 {
			nn.FWHT(b.c, kk.d[:kv], kk.d[:kv], kv/kr, kr)
		}
	}
	if vr != 0 {
		od = b.c.Alloc(n * a.Heads * a.HeadDim)
		if layer >= 0 && !a.KeyValues {
			nn.FWHTHeads(b.c, vv.d[:kv], vv.d[:kv], n*a.KVHeads, a.HeadDim, vd, vr)
		}
	}
	at.KeyBlocks, at.KeyType = b.keyBlocks(kk.d[:kv], n, a)
	if layer >= 0 {
		b.c.StoreKV(layer, kk.d, vals, n, a.KVHeads, a.HeadDim)
	}
	at.Forward(b.c, od, qd, kk.d, vals, n)
	if vr != 0 {
		nn.FWHTHeads(b.c, o.d[:len(od)], od, n*a.Heads, a.HeadDim, vd, vr)
	}
}

// keyBlocks returns the keys k (n tokens of a's KV heads) encoded as the
// KV cache stores them, and their ggml type, where llama.cpp's CPU flash
// attention reads a cache of that block type in the int8 modes (q8_0,
// q4_0, q4_1, q5_0, q5_1, iq4_nl; heads of a multiple of 32); nil
// otherwise. A layer that reads another's keys (Gemma 4's shared KV) has
// them decoded from the cache, and encodes them again: to the same blocks
// by construction in the types whose scale is the largest magnitude over
// a fixed code (Q8_0: 127·d; Q4_0, Q5_0: −8·d, −16·d), and in the others
// as measured (tiny-gemma4, 24 windows of each: llama.cpp's log-probs). The
// tokens are encoded in parts on the context's threads, each token's
// blocks on their own.
func (b *cpuBackend) keyBlocks(k []float32, n int, a *ml.Attn) ([]byte, gguf.Type) {
	s, ok := b.c.KV.(*kvStore)
	if !b.c.LlamaCPP || !ok || a.HeadDim%32 != 0 || a.MatMul {
		return nil, 0
	}
	t, ok := kvcache.LlamaType(s.format.Name)
	if !ok {
		return nil, 0
	}
	per, row := a.KVHeads*a.HeadDim, a.KVHeads*a.HeadDim/32*t.TypeSize()
	if cap(b.keys) < n*row {
		b.keys = make([]byte, n*row)
	}
	for len(b.parts) < b.c.Workers(n) {
		b.parts = append(b.parts, kvcache.Block{})
	}
	b.c.Parallel(n, func(w, lo, hi int) {
		s.format.K.Encode(&b.parts[w], k[lo*per:hi*per], hi-lo, a.KVHeads, a.HeadDim)
		copy(b.keys[lo*row:hi*row], b.parts[w].Data)
	})
	return b.keys[:n*row], t
}

// llamaKVRotation turns kvTurns on; a test turns it off to hold the
// Q8_0 flash attention to llama.cpp's run with LLAMA_ATTN_ROT_DISABLE=1.
var llamaKVRotation = true

// kvTurns is a.LlamaTurns in the int8 modes (llama.cpp's turns of the
// heads before one of its quantized caches); no turns otherwise.
func (b *cpuBackend) kvTurns(a *ml.Attn) (kr, vr, vd int) {
	s, ok := b.c.KV.(*kvStore)
	if !b.c.LlamaCPP || !ok || !llamaKVRotation {
		return 0, 0, a.Values()
	}
	return a.LlamaTurns(b.kvHead0, s.format.Name)
}

// hostKeys is s as this backend reads it: a host's *nn.KeySet, which
// its indexers choose, or nil.
func hostKeys(s ml.KeySet) *nn.KeySet {
	if s == nil {
		return nil
	}
	h, ok := s.(*nn.KeySet)
	if !ok {
		panic(fmt.Sprintf("cpu backend: a key set of another backend (%T)", s))
	}
	return h
}

// nnAttention is a as nn computes it on this backend: in the int8 modes
// with an f16 cache, llama.cpp's flash attention (ggmlF16; over a
// quantized cache's blocks, keyBlocks).
func (b *cpuBackend) nnAttention(a *ml.Attn) *nn.Attention {
	at := &nn.Attention{Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: a.HeadDim, Scale: a.Scale, Window: a.Window,
		SoftCap: a.SoftCap, Keys: hostKeys(a.Keys), Chunk: a.Chunk, GGMLF16: b.ggmlF16(), MatMul: a.MatMul}
	if a.Sinks != nil {
		at.Sinks = a.Sinks.V
	}
	if a.Slopes != nil {
		at.Slopes = a.Slopes.V
	}
	return at
}

// ggmlF16 reports whether attention computes as llama.cpp's CPU flash
// attention over an F16 cache: in the int8 modes with an f16 KV cache,
// llama.cpp's default.
func (b *cpuBackend) ggmlF16() bool {
	s, ok := b.c.KV.(*kvStore)
	return b.c.LlamaCPP && ok && s.format.Name == "f16"
}

func (b *cpuBackend) MLP(dst, x ml.Tensor, m *ml.MLP) {
	d, s := ct(dst), ct(x)
	shape("mlp input", s, s.rows, m.Up.In)
	shape("mlp output", d, s.rows, m.Out())
	mlp := nn.MLP{Up: lin(m.Up), Act: b.cpuAct(m)}
	if m.Down != nil {
		mlp.Down = lin(m.Down)
	}
	if m.Gated() {
		mlp.Gate = lin(m.Gate)
	}
	if m.TopK > 0 { // Gemma 3n's sparse gate: nn.MLP hands a gated activation one row at a time
		act, k := mlp.Act, m.TopK
		if act == nil {
			act = b.glu(m.Act)
		}
		mlp.Act = func(out, g, u []float32) {
			if b.c.LlamaCPP {
				nn.GGMLGaussianTopK(g, float32(k))
			} else {
				nn.GaussianTopK(g, k)
			}
			act(out, g, u)
		}
	}
	mlp.Forward(b.c, d.d, s.d, s.rows)
}

// cpuAct is the activation nn.MLP runs for m; nil is its fast SwiGLU
// (llama.cpp's in the int8 modes). xIELU and the clamped SwiGLU take the
// MLP's own parameters.
func (b *cpuBackend) cpuAct(m *ml.MLP) func(out, gate, up []float32) {
	switch m.Act {
	case ml.SwiGLU:
		return nil
	case ml.XIELU:
		p := m.XIELU
		return func(out, g, _ []float32) {
			if b.c.LlamaCPP {
				p.Forward(out, g)
			} else {
				p.Ref(out, g)
			}
		}
	case ml.ClampSwiGLU:
		if b.c.LlamaCPP {
			return nn.GGMLClampSwiGLU(m.Limit, b.c.GGMLAVX2)
		}
		return nn.ClampSwiGLU(m.Limit)
	case ml.SwiGLUClampIn:
		if b.c.LlamaCPP {
			return nn.GGMLSwiGLUClampIn(m.Limit)
		}
		return nn.SwiGLUClampIn(m.Limit)
	case ml.Identity:
		return func(out, g, _ []float32) { copy(out, g) }
	case ml.SiTU:
		if b.c.LlamaCPP {
			return m.SiTU.GGML
		}
		return m.SiTU.Ref
	case ml.SiLU: // ggml's SILU restarts its lanes at each row of Up's width
		cols, ggml, avx2 := m.Up.Out, b.c.LlamaCPP, b.c.GGMLAVX2
		return func(out, g, _ []float32) {
			copy(out, g)
			if ggml {
				nn.GGMLSiLURows(out, cols, avx2)
			} else {
				nn.SiLU32(out)
			}
		}
	}
	return b.glu(m.Act)
}

// glu is the nn activation of a: computed in float64 and rounded once, or
// in the int8 modes as ggml-cpu computes it (GeGLU through its float16
// GELU table, gpt-oss's SwiGLU with glibc's expf).
func (b *cpuBackend) glu(a ml.Act) func(out, gate, up []float32) {
	switch a {
	case ml.SwiGLU:
		if b.c.LlamaCPP {
			avx2 := b.c.GGMLAVX2
			return func(out, gate, up []float32) { nn.GGMLSwiGLU(out, gate, up, avx2) }
		}
		return nn.SwiGLU
	case ml.GeGLU:
		if b.c.LlamaCPP {
			return nn.GGMLGeGLU
		}
		return nn.GeGLU
	case ml.OAISwiGLU:
		if b.c.LlamaCPP {
			return nn.GGMLOAISwiGLU
		}
		return nn.OAISwiGLU
	case ml.ReLUSqr: // exact in float32: the same in every mode
		return nn.ReLUSqr
	case ml.ReGLU:
		return nn.ReGLU
	case ml.GELU:
		if b.c.LlamaCPP {
			return nn.GGMLGELU
		}
		return nn.GELU
	}
	panic(fmt.Sprintf("cpu backend: activation %v", a))
}

func (b *cpuBackend) SoftCap(x ml.Tensor, cp float64) {
	d := ct(x)
	if b.c.LlamaCPP {
		b.c.Parallel(d.rows, func(_, lo, hi int) {
			nn.GGMLSoftCap(d.d[lo*d.cols:hi*d.cols], float32(cp))
		})
		return
	}
	b.c.Parallel(d.rows, func(_, lo, hi int) {
		x := d.d[lo*d.cols : hi*d.cols]
		nn.TanhCaps(x, x, 1, cp)
	})
}

func (b *cpuBackend) Read(t ml.Tensor) []float32 {
	return append([]float32(nil), ct(t).d...)
}

// Route routes on the host, where the logits are.
func (b *cpuBackend) Route(logits ml.Tensor, r *ml.Router) (*ml.Routing, error) {
	return r.Route(ct(logits).d)
}

func (b *cpuBackend) Write(t ml.Tensor, v []float32) {
	d := ct(t)
	if len(v) != len(d.d) {
		panic(fmt.Sprintf("cpu backend: write of %d values to %d×%d", len(v), d.rows, d.cols))
	}
	copy(d.d, v)
}

// expertRows is how many token rows Experts handles at a time: the
// per-choice outputs (rows × K × width) stay bounded for long windows, and
// each expert's weights are decoded once per block of rows.
const expertRows = 4096

// Experts groups each block of rows by expert: expert e's rows are
// gathered into one matrix and run through e's MLP once (so its weights
// are decoded once per block, whatever the number of tokens), each result
// row is scaled by its weight, and every token sums its K results in the
// order of its choices. The arithmetic per token is that of K separate
// MLPs, so the result does not depend on the grouping or the threads.
func (b *cpuBackend) Experts(dst, x ml.Tensor, m *ml.MLP, r *ml.Routing) {
	d, s := ct(dst), ct(x)
	in, out, K := m.Up.In, m.Out(), r.K
	n := s.rows
	shape("experts input", s, n, in)
	shape("experts output", d, n, out)
	if len(r.Expert) != n*K {
		panic(fmt.Sprintf("cpu backend: routing of %d choices for %d tokens × %d", len(r.Expert), n, K))
	}
	ups := m.Up.Impl.([]*nn.Linear)
	var downs []*nn.Linear // none: the experts' output is act(Up·x) (ml.MLP.Out)
	if m.Down != nil {
		downs = m.Down.Impl.([]*nn.Linear)
	}
	var gates []*nn.Linear
	if m.Gated() {
		gates = m.Gate.Impl.([]*nn.Linear)
	}
	for r0 := 0; r0 < n; r0 += expertRows {
		rows := min(expertRows, n-r0)
		mark := b.c.Mark()
		res := b.c.Alloc(rows * K * out) // result of choice (t, j)
		// Choices of the block by expert, in token order.
		byExpert := make([][]int32, len(ups))
		for c := r0 * K; c < (r0+rows)*K; c++ {
			e := r.Expert[c]
			byExpert[e] = append(byExpert[e], int32(c-r0*K))
		}
		for e, cs := range byExpert {
			if len(cs) == 0 {
				continue
			}
			em := b.c.Mark()
			xe := b.c.Alloc(len(cs) * in)
			ye := b.c.Alloc(len(cs) * out)
			for i, c := range cs {
				t := r0 + int(c)/K
				row := xe[i*in : (i+1)*in]
				copy(row, s.d[t*in:(t+1)*in])
				if r.Before { // MUL of the input by its weight
					w := r.Weight[r0*K+int(c)]
					for k := range row {
						row[k] *= w
					}
				}
			}
			mlp := nn.MLP{Up: ups[e], Act: b.cpuAct(m)}
			if downs != nil {
				mlp.Down = downs[e]
			}
			if gates != nil {
				mlp.Gate = gates[e]
			}
			mlp.Forward(b.c, ye, xe, len(cs))
			for i, c := range cs {
				w := r.Weight[r0*K+int(c)]
				dr, yr := res[int(c)*out:(int(c)+1)*out], ye[i*out:(i+1)*out]
				if r.Before {
					copy(dr, yr)
					continue
				}
				for k, v := range yr {
					dr[k] = v * w
				}
			}
			b.c.Release(em)
		}
		b.c.Parallel(rows, func(_, lo, hi int) {
			for t := lo; t < hi; t++ {
				dr := d.d[(r0+t)*out : (r0+t+1)*out]
				copy(dr, res[t*K*out:(t*K+1)*out])
				for j := 1; j < K; j++ {
					nn.Add(dr, res[(t*K+j)*out:(t*K+j+1)*out])
				}
			}
		})
		b.c.Release(mark)
	}
}

func (b *cpuBackend) LogSoftmax(logits, ref ml.Tensor, targets []int32, out *ml.Scores) error {
	l := ct(logits)
	var rl *cpuT
	if ref != nil {
		r, ok := ref.(*cpuT)
		if !ok {
			return fmt.Errorf("reference logits on another device (%T)", ref)
		}
		rl = r
		shape("reference logits", rl, l.rows, l.cols)
	}
	vocab := l.cols
	errs := make([]error, l.rows)
	b.c.Parallel(l.rows, func(_, lo, hi int) {
		for j := lo; j < hi; j++ {
			row := l.d[j*vocab : (j+1)*vocab]
			lse, arg, bad := logSumExp(row)
			if bad >= 0 {
				errs[j] = &ml.BadLogit{Row: j, Value: float64(row[bad]), Token: bad}
				continue
			}
			out.LP[j] = float64(row[targets[j]]) - lse
			out.Arg[j] = int32(arg)
			if rl == nil {
				continue
			}
			rrow := rl.d[j*vocab : (j+1)*vocab]
			rlse, rarg, bad := logSumExp(rrow)
			if bad >= 0 {
				errs[j] = &ml.BadLogit{Row: j, Ref: true, Value: float64(rrow[bad]), Token: bad}
				continue
			}
			out.RLP[j] = float64(rrow[targets[j]]) - rlse
			out.RArg[j] = int32(rarg)
			out.KLD[j] = nn.KLD(rrow, rlse, row, lse)
		}
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// logSumExp returns log Σ exp(row) and the index of the largest logit (the
// first, on ties); bad is the index of a NaN or infinite logit, or -1. The maximum m
// is exact; each term e^(v-m) is a float32 exponential within 2 ulp, summed
// in float64 (nn.ExpSum), and the log is float64: the result is within
// about 3e-7 relative of the float64 log-sum-exp, far below the float32
// rounding of the logits themselves.
func logSumExp(row []float32) (lse float64, arg, bad int) {
	mx, arg, ok := nn.MaxArg(row)
	if !ok {
		for i, v := range row {
			if v-v != 0 { // NaN or ±Inf
				return 0, 0, i
			}
		}
	}
	return float64(mx) + math.Log(nn.ExpSum(row, mx)), arg, -1
}
