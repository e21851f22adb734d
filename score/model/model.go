// Package model loads GGUF language models and scores token sequences with
// them: for each target position, the log-probability the model gives the
// actual next token, and optionally the KL divergence from a reference
// model's distribution.
//
// Each architecture is written once, in one file (llama.go holds llama,
// qwen2, qwen3 and qwen3moe; variants.go those that are llama's decoder
// with a few options set; fused.go what phi3 and glm4 share), and runs on
// every device: it binds the GGUF
// tensors it names through the Loader (as ml.Matrix and ml.Vector values)
// and writes its forward pass as calls of ml.Backend operations. Load runs
// it on the CPU backend (cpu.go, over package nn's kernels); LoadOn on any
// other backend (package cuda's). An architecture needing operations
// beyond ml.Backend (a recurrent scan) asks for an extension interface of
// package ml through Checker, so a backend without it refuses the model at
// load. Layers' feed-forward blocks are dense or mixtures of experts
// (moe.go), chosen per layer. Load reads the hyperparameters and the RoPE
// settings from the file's metadata, with Options overriding what a user
// may change.
//
// Scoring follows llama.cpp's perplexity tool: a window of tokens runs from
// an empty cache at positions 0..n-1, and the logits at position i-1 give
// log p(tokens[i] | tokens[:i]). Only the positions that predict a scored
// target go through the output head, a row block at a time, so the full
// logits matrix (window × vocabulary) never exists at once. The
// log-softmax is float64 over the float32 logits.
//
// Options.Activations chooses the arithmetic of products with quantized
// weights: float32 activations ("fp32", the default, within about 1e-6 of
// float64 per log-prob) or activations quantized to 8 bits with integer dot
// products ("int8", llama.cpp's arithmetic and speed; see nn.Context.Int8).
//
// Keys (after RoPE) and values pass through the KV cache dtype of Options
// (package kvcache) before attention reads them, as they would through a
// GPU's cache. Results do not depend on Options.Threads: every number is
// computed by one goroutine in a fixed order.
//
// Info is what a result header should record to make a score reproducible:
// architecture, hyperparameters, the weight types bound per tensor role, the
// RoPE settings in force and the KV cache dtype.
package model

import (
	"cmp"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"ppl.dev/gguf"
	"ppl.dev/score/kvcache"
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// Options are the settings a user may choose. The zero value is the
// default: all cores, the default KV cache dtype, the model's RoPE.
type Options struct {
	Threads int    // goroutines for the kernels; < 1 means GOMAXPROCS
	KVDtype string // KV cache storage (kvcache.Names); "" means kvcache.Default
	// Activations is the arithmetic of products with quantized weights:
	// "fp32" (or ""), float32 activations and weights decoded to float32;
	// "int8", activations quantized to 8 bits per block of 32 and integer
	// dot products, as llama.cpp computes (nn.Context.Int8).
	Activations string
	// SSMStateDtype is the recurrent state of Gated DeltaNet and Mamba
	// layers, rounded to it after each chunk of tokens or each token: "f32"
	// (or ""), "f16" or "bf16" (ml.DeltaRule.State, ml.SSM.StateDtype).
	SSMStateDtype string

	// RoPE overrides; zero values keep the model's metadata.
	RopeFreqBase    float64 // rope.freq_base
	RopeScaling     string  // "none", "linear" or "yarn" (rope.scaling.type)
	RopeScaleFactor float64 // context extension factor F: positions / F (rope.scaling.factor)
	RopeOrigCtx     int     // YaRN: context the model was trained at (rope.scaling.original_context_length)

	// Context is the windows' context (llama.cpp's context per sequence,
	// llama-perplexity's -c), 0 when unknown: Phi-3's LongRoPE takes its
	// long factors when it exceeds the original context (phi3.go).
	Context int
}

// Model is a loaded model. Its methods may be called from several
// goroutines, but a Model scores one sequence at a time.
type Model struct {
	Path string
	HP   HParams

	f    *gguf.File
	mats []*ml.Matrix // every weight matrix, for naming one that holds NaN
	net  Network
	info Info

	mu sync.Mutex
	b  ml.Backend
}

// Info describes a loaded model and the settings it runs with: what a
// result header should record so that a score can be reproduced.
type Info struct {
	Arch          string            `json:"arch"`
	Name          string            `json:"name,omitempty"` // general.name
	HParams       HParams           `json:"hparams"`
	WeightTypes   map[string]string `json:"weight_types"`             // role ("attn_q", "output") -> types, comma-separated
	Shared        []string          `json:"shared,omitempty"`         // roles bound to another tensor: "output=token_embd" (tied)
	Rope          RopeInfo          `json:"rope"`                     // zero where no layer turns q and k (gpt2, the ALiBi architectures)
	ALiBi         float64           `json:"alibi_max_bias,omitempty"` // ALiBi's maximum bias (bloom, mpt, jais, ...): its attention's positions
	KVDtype       string            `json:"kv_dtype"`
	Activations   string            `json:"activations"`               // "fp32", "int8" or "int8-avx2"
	SSMStateDtype string            `json:"ssm_state_dtype,omitempty"` // recurrent models only
	// KVHead0 is the first layer's key and value head sizes, by which
	// llama.cpp 0.7.0 decides whether to turn every layer's heads before
	// its quantized caches.
	KVHead0 kvcache.LlamaHead0 `json:"-"`
	// Unread are the file's tensors the architecture does not read, beyond
	// those it leaves unread as llama.cpp 0.7.0 does (an MTP block, a
	// vision expert): tensors llama.cpp may compute with, or that it
	// refuses the file for; ppl-score warns of them.
	Unread []string `json:"unread,omitempty"`
	// Matrices are the weight matrices the architecture multiplies by,
	// each once (a tied head is the token embedding's), in the order
	// bound: for what depends on their types and shapes (ppl-score's
	// notice of llama.cpp's AMX kernels).
	Matrices []MatrixShape `json:"-"`
}

// MatrixShape is a weight matrix's tensor, type and shape.
type MatrixShape struct {
	Name    string // the tensor's ("blk.0.attn_q.weight")
	Type    gguf.Type
	In, Out int
	Experts int // 0: one matrix
}

// Activation modes (Options.Activations): fp32, float32 activations and
// weights decoded to float32 (within 1e-6 of float64 per log-prob); int8,
// llama.cpp's CPU arithmetic: activations quantized to 8 bits as llama.cpp
// quantizes them, integer products, and every float32 operation in
// ggml-cpu's order (nn/ggml.go), as its build for AVX-512 machines computes
// (its log-probs to the bit with an f16 KV cache, for the weight types
// whose products are in its order); int8-avx2, int8 as its build for AVX2
// machines computes; int8-amx, int8 as its build for CPUs with AMX-INT8
// computes (the matrices its AMX buffer takes in its AMX kernels' order:
// nn.AMXTaken).
const (
	ActFP32     = "fp32"
	ActInt8     = "int8"
	ActInt8AVX2 = "int8-avx2"
	ActInt8AMX  = "int8-amx"
)

// Int8Arithmetic names the ggml whose CPU arithmetic the int8 modes copy,
// and the revision of our copy: it goes up when more of ggml's operations
// are copied (revision 2: GEGLU's float16 table, SWIGLU_OAI, the final
// soft-cap and the products of F32 matrices, which change Gemma's and
// gpt-oss's numbers and those of every model with F32 matrices, such as
// the routers of many MoE files; revision 3: the MoE router's softmax,
// sigmoid, argsort and normalisation in ggml's float32 order, and Gemma
// 4's expert output scale applied to the experts' outputs, which change
// every mixture of experts' numbers; revision 4: RoPE's θ scale by
// glibc's powf, which float32(math.Pow) missed by an ulp for a few bases
// and head sizes, such as 40000 over 118 dims; revision 5: glibc's expf
// with its FMA build's fused x·N/ln 2, which our copy rounded first and
// so missed by an ulp on 2 of the 2^32 inputs; revision 6: before a
// quantized KV cache the heads turned by Hadamard matrices as libllama
// turns them, and a q8_0 cache written by ggml-cpu's quantizer and read by
// its flash attention over Q8_0 blocks). Score headers and
// cache keys record it, so that scores computed after another ggml's order,
// an earlier revision, or before the int8 modes copied one, are never taken
// for these.
const Int8Arithmetic = "ggml 0.27.0 (llama.cpp 0.7.0), revision 6"

// Revision counts the changes that make ppl score some file otherwise in
// every mode: a key, a tensor or a graph now read as llama.cpp 0.7.0 reads
// it. Cache keys carry it, so that a window scored before such a change is
// never replayed as this code's (revision 1: rope.scale_linear only
// without rope.scaling.factor; the output biases llama.cpp leaves
// unapplied in ernie4_5, ernie4_5-moe, falcon-h1, deci and refact).
const Revision = 1

// Load opens the GGUF model at path on the CPU and binds its weights
// (which stay in the file's memory mapping). The Model must be closed.
func Load(path string, opts Options) (*Model, error) { return LoadOn(path, opts, nil) }

// Device makes the backend a model runs on, once the model's settings are
// known; LoadOn calls it after binding the weights and before preparing
// them. A nil Device is the CPU.
type Device func(info Info, opts Options) (ml.Backend, error)

// LoadOn opens the GGUF model at path on the backend dev makes.
func LoadOn(path string, opts Options, dev Device) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	m, err := load(f, opts, dev)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("model: %s: %w", path, err)
	}
	m.Path = path
	return m, nil
}

func load(f *gguf.File, opts Options, dev Device) (*Model, error) {
	format, err := kvcache.Lookup(opts.KVDtype)
	if err != nil {
		return nil, err
	}
	act := opts.Activations
	switch act {
	case "":
		act = ActFP32
	case ActFP32, ActInt8, ActInt8AVX2, ActInt8AMX:
	default:
		return nil, fmt.Errorf("activations %q: want %s, %s, %s or %s", opts.Activations, ActFP32, ActInt8, ActInt8AVX2, ActInt8AMX)
	}
	arch, err := f.String("general.architecture")
	if err != nil {
		return nil, err
	}
	build, ok := builder(arch)
	if !ok {
		return nil, fmt.Errorf("architecture %q not supported (supported: %s)", arch, strings.Join(Architectures(), ", "))
	}
	hp, err := readHParams(f, arch)
	if err != nil {
		return nil, err
	}
	l := &Loader{HP: hp, Opts: opts, f: f, roles: map[string]map[gguf.Type]bool{}}
	net := build(l)
	if err := l.Err(); err != nil {
		return nil, err
	}
	hp = l.HP // with what the architecture read (experts)
	if p, ok := net.(positioner); ok && p.positions() != "" {
		// No layer turns q and k: the file's RoPE keys describe nothing
		// the model computes, and an override would change nothing.
		if opts.RopeFreqBase > 0 || opts.RopeScaling != "" || opts.RopeScaleFactor > 0 || opts.RopeOrigCtx > 0 {
			return nil, fmt.Errorf("--rope-* options for a model without RoPE (%s: %s)", arch, p.positions())
		}
		l.rinfo = RopeInfo{}
	}
	if err := format.Check(hp.HeadDim); err != nil {
		return nil, err
	}
	name, _ := f.String("general.name")
	info := Info{Arch: arch, Name: name, HParams: hp, WeightTypes: roleTypes(l.roles),
		Shared: l.alt, Rope: l.rinfo, ALiBi: l.alibiBias, KVDtype: format.Name, Activations: act, Unread: l.unread(),
		KVHead0: kvcache.LlamaHead0{K: cmp.Or(l.kvHead0, hp.HeadDim), V: cmp.Or(l.kvHead0, hp.ValueDim)}}
	for _, w := range l.mats {
		if w.Fused > 0 { // a fused tensor's part: the tensor once
			name, _, _ := strings.Cut(w.Name, "[")
			if n := len(info.Matrices); n == 0 || info.Matrices[n-1].Name != name {
				info.Matrices = append(info.Matrices, MatrixShape{Name: name, Type: w.Type, In: w.In, Out: w.Fused})
			}
			continue
		}
		info.Matrices = append(info.Matrices, MatrixShape{Name: w.Name, Type: w.Type, In: w.In, Out: w.Out, Experts: w.Experts})
	}
	if r, ok := net.(recurrentNetwork); ok {
		info.SSMStateDtype = r.ssmStateDtype()
	}
	var b ml.Backend
	if dev == nil {
		c := nn.NewContext(opts.Threads)
		if act != ActFP32 && format.Name == "q8_0" { // as llama.cpp's CPU writes its cache
			format.K, format.V = kvcache.GGML{T: gguf.TypeQ8_0, CPU: true}, kvcache.GGML{T: gguf.TypeQ8_0, CPU: true}
		}
		c.KV = &kvStore{format: format, c: c}
		c.Int8 = act != ActFP32
		c.LlamaCPP = c.Int8
		c.GGMLAVX2 = act == ActInt8AVX2
		c.GGMLAMX = act == ActInt8AMX
		cb := newCPU(c)
		cb.kvHead0 = info.KVHead0
		b = cb
	} else if b, err = dev(info, opts); err != nil {
		return nil, err
	}
	if c, ok := net.(Checker); ok {
		if err := c.Check(b); err != nil {
			b.Close()
			return nil, err
		}
	}
	for _, w := range l.mats {
		if err == nil {
			err = b.Prepare(w)
		}
	}
	for _, v := range l.vecs {
		if err == nil {
			err = b.PrepareVector(v)
		}
	}
	if err != nil {
		b.Close()
		return nil, err
	}
	return &Model{HP: hp, f: f, net: net, b: b, info: info, mats: l.mats}, nil
}

func roleTypes(roles map[string]map[gguf.Type]bool) map[string]string {
	out := map[string]string{}
	for role, types := range roles {
		var s []string
		for t := range types {
			s = append(s, t.String())
		}
		sort.Strings(s)
		out[role] = strings.Join(s, ",")
	}
	return out
}

// Close releases the model's device memory and its file mapping.
func (m *Model) Close() error {
	return errors.Join(m.b.Close(), m.f.Close())
}

// Backend returns the backend the model runs on.
func (m *Model) Backend() ml.Backend { return m.b }

// Info describes the model and its settings.
func (m *Model) Info() Info { return m.info }

// Vocab returns the vocabulary size.
func (m *Model) Vocab() int { return m.HP.Vocab }

// kvStore simulates the KV cache's storage format (nn.KVStore).
type kvStore struct {
	format kvcache.Format
	c      *nn.Context     // the threads that encode parts of a window (nil: GOMAXPROCS)
	kb, vb []kvcache.Block // the encodings' buffers, one per part
}

func (s *kvStore) Store(layer int, k, v []float32, tokens, heads, headDim int) {
	if s.format.Name == "f32" {
		return
	}
	s.kb = roundTrip(s.c, s.format.K, s.kb, k, tokens, heads, headDim)
	s.vb = roundTrip(s.c, s.format.V, s.vb, v, tokens, heads, headDim)
}

// roundTrip is kvcache.RoundTrip of x (tokens × heads × headDim), its
// tokens in parts on c's threads when the codec encodes each token on its
// own (kvcache.PerToken; a window's keys are tens of megabytes, a serial
// pass Amdahl's share on a large machine), with a buffer of bs for each
// part; it returns bs, grown to the parts.
func roundTrip(c *nn.Context, codec kvcache.Codec, bs []kvcache.Block, x []float32, tokens, heads, headDim int) []kvcache.Block {
	parts := 1
	if kvcache.PerToken(codec) && len(x) >= parallelRowsMin {
		parts = max(1, c.Workers(tokens))
	}
	for len(bs) < parts {
		bs = append(bs, kvcache.Block{})
	}
	if parts == 1 {
		kvcache.RoundTrip(codec, &bs[0], x, tokens, heads, headDim)
		return bs
	}
	per := heads * headDim
	c.Parallel(tokens, func(w, lo, hi int) {
		kvcache.RoundTrip(codec, &bs[w], x[lo*per:hi*per], hi-lo, heads, headDim)
	})
	return bs
}
