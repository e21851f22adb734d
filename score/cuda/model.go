package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"ppl.dev/gguf"
	"ppl.dev/kernels"
	"ppl.dev/quant"
	"ppl.dev/score/backend"
	"ppl.dev/score/cuda/cublas"
	"ppl.dev/score/cuda/driver"
	"ppl.dev/score/ml"
	"ppl.dev/score/model"
	"ppl.dev/score/nn"
)

// capacityRound: the KV cache and RoPE tables hold a multiple of this many
// tokens, so windows of similar sizes reuse them.
const capacityRound = 256

// Precision is how a model's matrices and the inputs of its products are
// stored: every weight is rounded once (nearest even, from ppl.dev/quant's
// exact dequantization) to the half type, or to bf16 first with
// --gpu-weights bf16, and every product accumulates in float32. A mixture
// of experts' router (ffn_gate_inp) and a matrix the file stores as F32
// are float32 products (gpuBackend.storage).
type Precision struct {
	Name    string
	Weights cublas.DataType // matrices, and the inputs of their products
	// Storage is how matrices are kept on the device (qweights.go):
	// WeightsQuantized ("" too) as the file's blocks, dequantized at each
	// product, or WeightsBF16, the host's bf16 copy (each weight rounded
	// to bf16 before its half type).
	Storage string
	// Int8: products with quantized weights in the int8 mode (int8.go).
	Int8 bool
}

var (
	// Mixed (the default): every matrix and every product input in fp16
	// (11 bits, 3 more than bf16, at the same tensor-core speed), the
	// router's float32 aside. Quantized weights are rounded once from
	// their decoded value (qweights.go). The input of ffn_down, silu(gate)
	// ·up, is not normalized and can exceed fp16's range: where a
	// product's input reaches 2^15 it is scaled by a power of two, divided
	// out of the product (kernels/swiglu.cu). Against the CPU on the file
	// itself (emulation, two windows of 256 tokens) that took the dense
	// oracle models from max |Δ log p| 0.028-0.038 (the bf16 copy's
	// weights, ffn_down in bf16) to 0.006-0.009.
	Mixed = Precision{Name: "mixed", Weights: cublas.R16F}
	// BF16 stores every matrix and every product input as bf16.
	BF16 = Precision{Name: "bf16", Weights: cublas.R16BF}
)

// Model is a GGUF model on a GPU: package model's architecture and
// scoring (model.LoadOn) over this package's ml.Backend (gpuBackend), with
// the device's description, its memory report and the precision in the
// results' headers. Its methods may be called from several goroutines;
// the engine runs one window at a time.
type Model struct {
	*model.Model
	e    *Engine
	b    *gpuBackend
	info model.Info
	prec Precision

	attn        string // which attention kernel runs, and why
	flash       bool   // the tensor-core one
	loadTime    time.Duration
	weightBytes int64  // on the device (or devices: weights.go)
	spreadWhy   string // why the weights are spread over several devices
	bf16Bytes   int64  // what the bf16 copy of the matrices takes (the matrices alone)
}

// Load loads the GGUF model at path onto CUDA device ordinal with the
// settings of opts (the KV cache dtype and RoPE overrides; Threads is for
// the host's dequantization of the weights). Package model reads the file,
// resolves the hyperparameters and RoPE and binds the architecture's
// tensors exactly as for the CPU; the backend then prepares them on the
// GPU. An architecture that needs operations this backend lacks (a
// model.Checker) is refused with their names.
//
// The precision is Mixed, or BF16 when $PPL_CUDA_PRECISION is "bf16"; the
// weights stay quantized on the device unless $PPL_CUDA_WEIGHTS is "bf16"
// (ppl-score --gpu-weights).
func Load(path string, opts model.Options, ordinal int) (*Model, error) {
	p, err := precisionFromEnv()
	if err != nil {
		return nil, err
	}
	e, err := Open(ordinal)
	if err != nil {
		return nil, err
	}
	return loadOn(e, path, opts, p)
}

// precisionFromEnv is Mixed, or BF16 when $PPL_CUDA_PRECISION is "bf16",
// with the weight storage of $PPL_CUDA_WEIGHTS.
func precisionFromEnv() (Precision, error) {
	storage, err := weightsFromEnv()
	if err != nil {
		return Precision{}, err
	}
	p := Mixed
	if os.Getenv("PPL_CUDA_PRECISION") == "bf16" {
		p = BF16
	}
	p.Storage = storage
	return p, nil
}

// LoadGroup loads the model at path once per CUDA device of ordinals (one
// may repeat: two engines on one device), for ppl-score --devices, in the
// settings Load takes. Engines on one device share its copy of the
// weights. With spread, or when the model does not fit one device (out of
// memory at load), one copy is spread over all the devices instead, each
// engine reading the others' shares over NVLink (weights.go); a pair of
// devices without peer access is then an error naming it.
func LoadGroup(path string, opts model.Options, ordinals []int, spread bool) ([]*Model, error) {
	p, err := precisionFromEnv()
	if err != nil {
		return nil, err
	}
	es := make([]*Engine, len(ordinals))
	for i, o := range ordinals {
		if es[i], err = Open(o); err != nil {
			return nil, err
		}
	}
	return loadGroup(es, path, opts, p, spread)
}

// loadGroup is LoadGroup on engines es.
func loadGroup(es []*Engine, path string, opts model.Options, p Precision, spread bool) ([]*Model, error) {
	var homes []*Engine
	for _, e := range es {
		if !slices.Contains(homes, e) {
			homes = append(homes, e)
		}
	}
	why := "asked for"
	if !spread {
		ms, at, err := loadSets(es, path, opts, p, nil)
		if err == nil || len(homes) < 2 || !driver.IsOutOfMemory(err) {
			return ms, err
		}
		why = fmt.Sprintf("the model does not fit %s: out of memory at load", es[at].label())
	}
	if err := enablePeers(homes); err != nil {
		return nil, err
	}
	ms, _, err := loadSets(es, path, opts, p, newWeightSet(homes...))
	for _, m := range ms {
		m.spreadWhy = why
	}
	return ms, err
}

// loadSets loads the model on each engine of es with its weights in all,
// or when all is nil in a set per device, shared by the engines on it; on
// failure it closes what it loaded and returns the index of the engine
// that failed.
func loadSets(es []*Engine, path string, opts model.Options, p Precision, all *weightSet) ([]*Model, int, error) {
	sets := map[*Engine]*weightSet{}
	var ms []*Model
	for i, e := range es {
		set := all
		if set == nil {
			if set = sets[e]; set == nil {
				set = newWeightSet(e)
				sets[e] = set
			}
		}
		m, err := load(e, path, opts, p, 0, set)
		if err != nil {
			for _, m := range slices.Backward(ms) { // a set's first model last
				m.Close()
			}
			return nil, i, err
		}
		ms = append(ms, m)
	}
	return ms, 0, nil
}

func loadOn(e *Engine, path string, opts model.Options, p Precision) (*Model, error) {
	return load(e, path, opts, p, 0, newWeightSet(e))
}

// load loads path on e with its weights in set; synth, when not 0, fills
// every weight on the device from that seed instead of the file's data (the
// benchmark's synthetic models, whose files hold only the shapes).
func load(e *Engine, path string, opts model.Options, p Precision, synth uint64, set *weightSet) (*Model, error) {
	if why := int8Refusal(opts.Activations, p.storage()); why != "" {
		return nil, fmt.Errorf("cuda: %s", why)
	}
	p.Int8 = opts.Activations == model.ActInt8
	t0 := time.Now()
	var b *gpuBackend
	dev := func(info model.Info, opts model.Options) (ml.Backend, error) {
		var err error
		b, err = newBackend(e, info, opts, p)
		if b != nil {
			b.synth = synth
			b.qw.mode = p.storage()
			b.set, b.follows = set, set.join()
		}
		return b, err
	}
	mm, err := model.LoadOn(path, opts, dev)
	if err != nil {
		return nil, err
	}
	info := mm.Info()
	info.Activations = p.activations()
	m := &Model{Model: mm, e: e, b: b, info: info, prec: p, attn: b.attn, weightBytes: set.total(), bf16Bytes: b.qw.bf16Bytes,
		flash: strings.HasPrefix(b.attn, "tensor-core")}
	if err := e.Do(func() error { return e.sync("loading the weights") }); err != nil {
		mm.Close()
		return nil, err
	}
	m.loadTime = time.Since(t0)
	return m, nil
}

// Weight loading on the host (the bf16 copy, and the matrices that take the
// host copy with quantized storage): each matrix is dequantized, a block of
// rows at a time on all cores, rounded to its half type (with viaBF16 to
// bf16 first: the bf16 copy's weights) and copied to the device.

const uploadBytes = 64 << 20 // host staging per copy

// uploadRows converts rows of type typ (rb bytes each, in values) to half
// type t (through bf16 with viaBF16) and copies them to dst, a block at a
// time.
func uploadRows(e *Engine, dst ptr, typ gguf.Type, data []byte, rb, in, rows, threads int, t cublas.DataType, viaBF16 bool) error {
	per := max(1, uploadBytes/(2*in))
	stage := make([]uint16, min(per, rows)*in)
	for r0 := 0; r0 < rows; r0 += per {
		r1 := min(rows, r0+per)
		part := stage[:(r1-r0)*in]
		if err := convertRows(part, typ, data, rb, in, r0, r1, threads, t, viaBF16); err != nil {
			return err
		}
		if err := e.Do(func() error { return upload(e, dst+ptr(int64(r0)*int64(in)*2), part) }); err != nil {
			return err
		}
	}
	return nil
}

// convertRows dequantizes rows [r0, r1) of data (type typ, rb bytes and in
// values each) exactly and stores them in out rounded to half type t (with
// viaBF16, the bf16 rounding, as bf16 or the same value as fp16), on
// threads goroutines (all cores when < 1).
func convertRows(out []uint16, typ gguf.Type, data []byte, rb, in, r0, r1, threads int, t cublas.DataType, viaBF16 bool) error {
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
					if viaBF16 {
						v = quant.BF16ToF32(quant.F32ToBF16(v))
					}
					if t == cublas.R16F {
						o[i] = quant.F32ToF16(v)
					} else {
						o[i] = quant.F32ToBF16(v)
					}
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
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

const (
	f32  = cublas.R32F
	bf16 = cublas.R16BF
	f16  = cublas.R16F
)

// Score runs tokens through the model from an empty cache and scores each
// target in [scoreFrom, len(tokens)), as model.Model.Score.
func (m *Model) Score(tokens []int32, scoreFrom int) (*model.Result, error) {
	return m.ScoreVisit(tokens, scoreFrom, nil)
}

// ScoreVisit is Score, and visit sees each target's logits, copied back
// to the host a block of rows at a time (model.Model.ScoreVisit).
func (m *Model) ScoreVisit(tokens []int32, scoreFrom int, visit func(j int, logits []float32)) (*model.Result, error) {
	if err := m.Upload(); err != nil {
		return nil, err
	}
	res, err := m.Model.ScoreVisit(tokens, scoreFrom, visit)
	m.e.Do(func() error { m.e.sampleMemory(); return nil })
	return res, err
}

// ScoreWith is Score plus KL(ref || m), ref's log-probabilities and top-1
// agreement per target; ref must be a CUDA model. On m's GPU both forward
// passes run one after the other; on another GPU they run at once
// (model.Model.ScoreWithApart), and each block of ref's logits is copied
// to m's GPU through the host, which changes no number.
func (m *Model) ScoreWith(tokens []int32, scoreFrom int, ref backend.Model) (*model.Result, error) {
	r, ok := ref.(*Model)
	switch {
	case ref == nil:
		return nil, errors.New("cuda: ScoreWith: no reference model")
	case !ok:
		return nil, fmt.Errorf("cuda: reference model on %s, model on %s: a reference must be on a GPU too", ref.Device().Name, m.e.label())
	}
	if err := errors.Join(m.Upload(), r.Upload()); err != nil {
		return nil, err
	}
	if r.e == m.e {
		res, err := m.Model.ScoreWith(tokens, scoreFrom, r.Model)
		m.e.Do(func() error { m.e.sampleMemory(); return nil })
		return res, err
	}
	res, err := m.Model.ScoreWithApart(tokens, scoreFrom, r.Model)
	m.e.Do(func() error { m.e.sampleMemory(); return nil })
	r.e.Do(func() error { r.e.sampleMemory(); return nil })
	return res, err
}

// Upload copies the weights to the device if no window has yet (lazy.go);
// Score and ScoreWith call it first.
func (m *Model) Upload() error { return m.b.upload() }

// storage is p.Storage, WeightsQuantized when empty.
func (p Precision) storage() string {
	if p.Storage == "" {
		return WeightsQuantized
	}
	return p.Storage
}

// activations names the arithmetic of products for headers and cache keys.
func (p Precision) activations() string {
	if p.Int8 {
		return "int8"
	}
	return halfName(p.Weights)
}

// describe is the precision for headers; it is part of the score cache's
// key, so it names everything that changes the GPU's numbers.
func (p Precision) describe() string {
	scaled := ""
	if p.Weights == cublas.R16F {
		scaled = "; ffn_down's input scaled by a power of two from 2^15"
	}
	int8, routing := "", "a mixture's experts chosen on the device in float64"
	if p.Int8 {
		int8 = "; int8 mode: products with quantized weights multiply their integers with activations quantized to Q8_0/Q8_K blocks on the integer tensor cores, one float32 multiply-add per group in order; attention float32"
		routing = "a mixture's experts chosen on the host as llama.cpp's CPU build chooses them"
	}
	exact := "F32 matrices and expert routers float32 products with exact weights"
	if p.storage() == WeightsBF16 {
		exact = "expert routers float32 products with exact weights"
	}
	return fmt.Sprintf("%s: matrices and product inputs %s%s%s; %s; %s; residual adds float32 after each product", p.Name, halfName(p.Weights), scaled, int8, exact, routing)
}

func halfName(t cublas.DataType) string {
	if t == cublas.R16F {
		return "fp16"
	}
	return "bf16"
}

// Info describes the model and its settings, with the GPU's arithmetic.
func (m *Model) Info() model.Info { return m.info }

// Device describes the GPU for result headers.
func (m *Model) Device() backend.Device {
	e := m.e
	extra := map[string]any{
		"gpu":                e.Name,
		"compute_capability": fmt.Sprintf("%d.%d", e.CC[0], e.CC[1]),
		"cuda":               e.Driver,
		"driver":             e.Release,
		"cublas":             e.CUBLAS,
		"precision":          m.prec.describe(),
		"weight_bytes":       m.weightBytes,
		"load_seconds":       math.Round(m.loadTime.Seconds()*1000) / 1000,
		"attention":          m.attn,
		"kernels":            kernels.Digest(),
		"weights":            m.prec.storage(),
		"weight_storage":     m.b.qw.describe(),
		"math":               nn.GoMath(), // the host's share: tables, routing in float64, log-sums
	}
	if p := m.placement(); p != "" {
		extra["weight_placement"] = p
	}
	return backend.Device{Name: e.label(), Activations: m.prec.activations(), Extra: extra}
}

// placement says where the weights lie when another engine uses them too
// (weights.go), else "".
func (m *Model) placement() string {
	set := m.b.set
	if s := set.spread(); s != "" {
		p := fmt.Sprintf("one copy %s (%s), read by every engine", s, m.spreadWhy)
		if m.prec.storage() == WeightsBF16 {
			// A quantized matrix's rows cross once a window, into the
			// product's operand; a bf16 one is the GEMM's operand itself.
			p += "; with --gpu-weights bf16 each product reads its weights from the device that holds them, several times a window"
		}
		return p
	}
	if n := set.sharers(); n > 1 {
		return fmt.Sprintf("one copy on %s, shared by its %d engines", m.e.label(), n)
	}
	return ""
}

// Report says what the run cost on the GPU.
func (m *Model) Report() string {
	e := m.e
	copied := "weights never copied to the device: every window came from the cache"
	switch ran, err, took := m.b.uploaded(); {
	case ran && err != nil:
		copied = fmt.Sprintf("copying the weights failed after %.1fs: %v", took.Seconds(), err)
	case ran:
		copied = fmt.Sprintf("weights copied in %.1fs at the first window computed", took.Seconds())
	}
	r := fmt.Sprintf("%s: %s of weights, %s (matrices as a bf16 copy: %s), products on bf16-rounded weights (%s), loaded in %.1fs, %s; peak GPU memory %s allocated by ppl, %s in use on the device; attention: %s",
		e.Describe(), humanBytes(m.weightBytes), m.b.qw.describe(), humanBytes(m.bf16Bytes), m.prec.describe(), m.loadTime.Seconds(), copied, humanBytes(e.PeakAllocated()),
		humanBytes(int64(e.PeakDeviceUsed())), m.attn)
	if p := m.placement(); p != "" {
		r += "; weights: " + p
	}
	if m.b.prof != nil {
		r += "\n" + m.b.prof.table(20)
	}
	return r
}

// flashTolerance bounds the tensor-core attention kernel's distance from
// the plain one on checkFlash's inputs (values in [-1, 1]): bf16 q, k, v
// and probabilities give differences near 4e-3; an indexing mistake gives
// differences of the size of the values.
const flashTolerance = 0.03

// checkFlash runs both attention kernels on random input of an attention
// shape and cache format and returns their largest difference; for latent
// attention (s.vd not 0) attn_latent and attn_flHD over one key cache.
func checkFlash(e *Engine, s attnShape, kvK, kvV int) (float64, error) {
	const n = 150 // three query tiles, the last partial
	H, KVH, HD := s.heads, s.kvheads, s.hd
	scale := 1 / math.Sqrt(float64(HD))
	rng := rand.New(rand.NewPCG(1, 2))
	rnd := func(k int) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = float32(float64(rng.Float64())*2 - 1) // rounded: Float64 multiplies
		}
		return v
	}
	q, k, v := rnd(n*H*HD), rnd(n*KVH*HD), rnd(n*KVH*HD)
	outs := len(q)
	if s.vd != 0 {
		outs = n * H * s.vd
	}
	var diff float64
	err := e.Do(func() error {
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
		o1, err4 := get(int64(2 * outs))
		o2, err5 := get(int64(2 * outs))
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			return err
		}
		kt, err := e.newKV(kvK, int64(n*KVH), HD)
		if err != nil {
			return err
		}
		defer e.freeKV(kt)
		vt, err := e.newKV(kvV, int64(n*KVH), HD)
		if err != nil {
			return err
		}
		defer e.freeKV(vt)
		run := func(out ptr, flash bool) error {
			if s.vd != 0 {
				return e.latentAttention(out, qp, n, H, KVH, HD, s.vd, scale, attnMask{}, kt, flash, isF16(f16))
			}
			return e.attention(out, qp, n, H, KVH, HD, scale, kt, vt, flash, f16)
		}
		// One step at a time, stopping at the first error (a slice of
		// results would run every step, kernels after a failed copy too).
		for _, step := range []func() error{
			func() error { return upload(e, qp, q) },
			func() error { return upload(e, kp, k) },
			func() error { return upload(e, vp, v) },
			func() error { return e.kvStore(kt, kp, n, KVH, HD) },
			func() error { return e.kvStore(vt, vp, n, KVH, HD) },
			func() error { return run(o1, false) },
			func() error { return run(o2, true) },
			func() error { return e.sync("checking the attention kernels") },
		} {
			if err := step(); err != nil {
				return fmt.Errorf("cuda: checking the attention kernels: %w", err)
			}
		}
		a, b := make([]uint16, outs), make([]uint16, outs)
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
