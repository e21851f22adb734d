// Package ml is the line between architectures and devices: the operations
// a decoder is made of, on tensors that live wherever a backend keeps them.
//
// An architecture (package model, one file each) binds GGUF tensor names to
// Matrix and Vector values once and writes its forward pass as a sequence of
// Backend calls; the CPU backend (package model's cpu.go, over the nn
// kernels) and the CUDA backend (package cuda) implement the calls. So an
// architecture runs on every device without a line of device code, and a
// new architecture touches only its own file, unless it needs an operation
// no backend has yet; then that operation is added here and to each
// backend, with its plain definition in this package's doc comment as the
// reference its implementations are tested against.
//
// Execution is eager: each call does its work (or queues it, on a GPU)
// before returning. Calls do not return errors: a backend keeps the first
// failure (a kernel launch refused, memory exhausted) and reports it from
// Err, which the caller checks once per forward pass; later calls after a
// failure do nothing. Shape mismatches between an architecture's own
// tensors are programming errors and panic with both shapes named.
//
// Fused operations (Attention, MLP, Experts, LogSoftmax) stand for a plain
// sequence of smaller ones; each one's doc names that sequence, and each
// backend's test compares the fused form with it.
//
// Operations only some architectures need are extension interfaces beside
// Backend, each in its own file: Recurrent (Gated DeltaNet and Mamba-2:
// causal convolution, L2 norms, the chunked delta rule, the selective
// scan), Latent (multi-head latent attention), Gemma4 (shared-KV
// attention, column gathers), AltUp (Gemma 3n's streams), RWKV
// (RWKV-7's token shift and recurrence), MHC (DeepSeek-V4's Sinkhorn
// mixing of the residual streams), and PLE and PooledSparse
// (Qwen3.8's n-gram embeddings and sparse attention). An
// architecture that needs one says so at load (model.Checker), so a
// backend without it refuses the model naming the operations, rather than
// failing at the first window.
package ml

import (
	"cmp"
	"fmt"
	"math"

	"ppl.dev/gguf"
	"ppl.dev/score/kvcache"
	"ppl.dev/score/nn"
)

// Tensor is a row-major matrix of float32 activations on a backend: Rows
// rows (tokens, or tokens × heads) of Cols values. A Tensor belongs to the
// backend that allocated it.
type Tensor interface {
	Rows() int
	Cols() int
}

// Matrix is a weight matrix as the file stores it: Out rows of In values of
// Type (GGUF shape [In, Out]), an optional output scale and an optional bias
// of Out values: y = (x·Wᵀ)·Scale + Bias. Experts > 1 makes it a stack of
// Experts such matrices (GGUF shape [In, Out, Experts]), expert e's rows
// following expert e-1's. A backend prepares it once (Backend.Prepare) and
// keeps its own form in Impl.
type Matrix struct {
	Name    string // the tensor's name, for messages
	Type    gguf.Type
	In, Out int
	Experts int       // 0 or 1: a plain matrix
	Data    []byte    // the file's bytes (memory-mapped)
	Scale   []float32 // nil, or one value (one per expert for a stack): the file's "<name>.scale"
	Bias    []float32 // Out values, or Experts × Out for a stack
	Impl    any       // the backend's prepared form
	// Fused, where the matrix is consecutive rows of a larger tensor (a
	// fused projection's part: Loader.LinearRows), is that tensor's row
	// count; 0 otherwise.
	Fused int
}

// Vector is a 1-D weight (a norm's scale), decoded to float32 at load.
type Vector struct {
	Name string
	V    []float32
	Impl any // the backend's copy, when it keeps one (a GPU)
}

// Mark is a position in a backend's scratch memory (Backend.Mark).
type Mark any

// Backend runs the operations of one loaded model on one device. A Backend
// is used by one forward pass at a time.
type Backend interface {
	// Prepare makes a weight ready on the device: called once per Matrix
	// and Vector at load, before any forward pass.
	Prepare(w *Matrix) error
	PrepareVector(v *Vector) error

	// Alloc returns an uninitialized rows × cols tensor of scratch memory,
	// valid until Reset or the Release of a Mark taken before it.
	Alloc(rows, cols int) Tensor
	// View reinterprets t's elements as rows × cols (rows·cols must equal
	// t's size): a (tokens, heads·dim) tensor viewed as (tokens·heads, dim)
	// for per-head norms.
	View(t Tensor, rows, cols int) Tensor
	// Slice returns rows [r0, r1) of t, sharing its memory.
	Slice(t Tensor, r0, r1 int) Tensor
	// Mark and Release scope scratch memory: a layer releases what it
	// allocated so the next layer reuses it.
	Mark() Mark
	Release(Mark)
	// Reset frees all scratch memory of the previous pass.
	Reset()
	// Err returns the first failure since the last Reset.
	Err() error
	// Fail records err as a failure of the pass (bad data an architecture
	// found on the host, such as NaN router logits), if none is recorded.
	Fail(err error)
	// Close frees the backend's memory and the weights it prepared.
	Close() error

	// Embed sets dst's row i to row tokens[i] of w (the token embedding),
	// dequantized exactly: dst (len(tokens), w.In).
	Embed(dst Tensor, w *Matrix, tokens []int32)
	// Linear computes dst = (x·Wᵀ)·scale + bias: x (n, w.In) -> dst (n, w.Out).
	Linear(dst, x Tensor, w *Matrix)
	// Linears computes dsts[i] = x·ws[i]ᵀ + bias[i] for matrices that read
	// the same input (q, k and v): the same as one Linear each.
	Linears(dsts []Tensor, x Tensor, ws []*Matrix)
	// RMSNorm computes dst = x / sqrt(mean(x²) + eps) · w row by row, w
	// holding x's columns, or those of several rows (row r takes part r
	// mod len(w.V)/columns: PLaMo-2's per-head q/k weights with heads as
	// rows); w nil means no weight (a plain norm). dst may be x.
	RMSNorm(dst, x Tensor, w *Vector, eps float64)
	// RoPE rotates each of x's rows in place: x (n, heads·r.HeadDim), row
	// i at position i (nn.RoPE).
	RoPE(x Tensor, heads int, r *nn.RoPE)
	// Add computes dst += x elementwise.
	Add(dst, x Tensor)
	// AddRows computes x[t, c] += v[c] for every row t (a norm's bias),
	// each sum rounded to float32.
	AddRows(x Tensor, v *Vector)
	// Scale computes x *= s elementwise, s rounded to float32.
	Scale(x Tensor, s float64)
	// Clamp computes x = min(max(x, -c), c) elementwise, c rounded to
	// float32 (ggml_clamp: OLMo 1.7's clip_qkv).
	Clamp(x Tensor, c float64)
	// GateMul computes x *= f(g) elementwise, g of x's shape or of one
	// column (one gate per row); f in float64, each product rounded to
	// float32 once, except in the int8 modes, which round f(g) to float32
	// as ggml does before the product (nn.GGMLSigmoid, nn.GGMLSiLUDiv,
	// nn.GGMLSoftplus).
	GateMul(x, g Tensor, f GateFn)
	// SoftCap computes x = cap · tanh(x / cap) elementwise in float64, each
	// result rounded to float32 once (logit soft-capping).
	SoftCap(x Tensor, cap float64)

	// Attention stores layer's k and v in the KV cache (in its format),
	// then computes causal attention of q over them: for query row i, head
	// h and its KV head g = h / (Heads/KVHeads),
	// dst[i,h] = Σ_{j allowed} softmax_j(q[i,h]·k[j,g]·Scale) v[j,g],
	// j allowed when j <= i (and i - j < Window when Window > 0), the
	// softmax's denominator also holding exp(Sinks[h]) when Sinks is set. q (n,
	// Heads·HeadDim), k, v (n, KVHeads·HeadDim), dst (n, Heads·HeadDim).
	Attention(dst, q, k, v Tensor, layer int, a *Attn)
	// MLP computes dst = Down(act(Gate·x) ⊙ Up·x) (the plain sequence: two
	// Linears, the gated activation GLU, one Linear), or for an ungated
	// MLP (Gate nil) dst = Down(act(Up·x)).
	MLP(dst, x Tensor, m *MLP)

	// Read copies t to the host (rows·cols values, row-major).
	Read(t Tensor) []float32
	// Write copies v (rows·cols values, row-major) from the host into t:
	// Read's inverse, bit for bit. A reference model on another device
	// hands its logits to the model's backend through the host with Read
	// and Write.
	Write(t Tensor, v []float32)
	// Experts computes, for token row t of x, dst[t] = Σ_j w[t,j] ·
	// E_{e}(x[t]) over its selections j (e = r.Expert[t·K+j], w =
	// r.Weight[t·K+j]), summed in order of j, where E_e is expert e's MLP,
	// gated or not (m's matrices are stacks of m.Up.Experts experts). That
	// is, per token, K MLPs of single experts scaled and added. With
	// r.Before the weight scales the expert's input instead: dst[t] = Σ_j
	// E_e(w[t,j] · x[t]) (Llama 4; the scaled input rounded to float32).
	Experts(dst, x Tensor, m *MLP, r *Routing)
	// Route chooses the experts of each row of logits (rows × r.Experts)
	// as r.Route does from them: the same experts and, but for the last
	// place of a float64 e^x where a backend computes its own, the same
	// weights. A backend may route on its device, so that the logits stay
	// there.
	Route(logits Tensor, r *Router) (*Routing, error)

	// LogSoftmax scores a block of rows of logits: for row j,
	// lp[j] = logits[j, targets[j]] - log Σ exp(logits[j]) (float64 sum),
	// arg[j] = the index of its largest logit (the first, on ties). ref,
	// when not nil, is a reference model's logits of the same rows (on the
	// same device: a reference elsewhere is copied over first, with Read
	// and Write); then also rlp[j] (ref's log-probability),
	// rarg[j] and kld[j] = KL(softmax(ref[j]) || softmax(logits[j])). A
	// NaN or infinite logit is an error naming the row and token.
	LogSoftmax(logits, ref Tensor, targets []int32, out *Scores) error
}

// Scores are LogSoftmax's results for a block of rows.
type Scores struct {
	LP   []float64
	Arg  []int32
	RLP  []float64 // with a reference only
	RArg []int32
	KLD  []float64
}

// Attn is the shape and options of one attention layer.
type Attn struct {
	Heads, KVHeads, HeadDim int
	Scale                   float64 // score scale
	Window                  int     // sliding window (keys i-Window < j <= i); 0: none
	Sinks                   *Vector // nil, or one logit per head added to each softmax's denominator (exp(sink))
	SoftCap                 float64 // > 0: each scaled score s becomes SoftCap·tanh(s/SoftCap) (Gemma 2); 0: none
	Slopes                  *Vector // nil, or ALiBi's slope per head: query i's score of key j gets Slopes[h]·(j−i) (nn.Attention.Slopes; Bloom, MPT)
	Keys                    KeySet  // nil, or the keys each query row reads besides causality (Sparse.IndexKeys); a backend that cannot fails
	Chunk                   int     // > 0: query i reads keys j >= floor(i/Chunk)·Chunk only (Llama 4)
	// MatMul: llama.cpp computes this attention without flash attention
	// (Grok, whatever its flash-attention setting); the CPU's int8 modes
	// over an f16 cache compute that path (nn.Attention.MatMul), other
	// backends their own attention.
	MatMul bool
	// ValueDim > 0: each value head holds ValueDim values, then zeros to
	// HeadDim (value heads padded to the key heads' size: MiniCPM3,
	// MiMo-V2), which llama.cpp's quantized caches turn as heads of
	// ValueDim (kvcache.LlamaHead0.ValueRotation); 0: HeadDim.
	ValueDim int
	// KeyValues: the values are the keys, one tensor read as both
	// (DeepSeek-V4), which llama.cpp's quantized caches hold once and
	// turn as keys, turning the output back by the keys' turn.
	KeyValues bool
}

// Values is the size of a's value heads before their padding.
func (a *Attn) Values() int { return cmp.Or(a.ValueDim, a.HeadDim) }

// LlamaTurns are the sizes of the Hadamard matrices llama.cpp 0.7.0 turns
// a's heads by before a cache of format name, for a model whose first
// layer has heads h: q and k by kr, the first vd values of each value
// head by vr and the attention's output back by vr; keys that are their
// values (KeyValues) turned once, as keys, the output back by kr. 0: no
// turn.
func (a *Attn) LlamaTurns(h kvcache.LlamaHead0, name string) (kr, vr, vd int) {
	kr = h.KeyRotation(name, a.HeadDim)
	if a.KeyValues {
		return kr, kr, a.HeadDim
	}
	return kr, h.ValueRotation(name, a.Values()), a.Values()
}

// Validate reports head counts that do not group.
func (a *Attn) Validate() error {
	if a.Heads <= 0 || a.KVHeads <= 0 || a.HeadDim <= 0 || a.Heads%a.KVHeads != 0 {
		return fmt.Errorf("attention: %d heads, %d KV heads of size %d (heads must be a multiple of KV heads)", a.Heads, a.KVHeads, a.HeadDim)
	}
	if a.ValueDim < 0 || a.ValueDim > a.HeadDim {
		return fmt.Errorf("attention: value heads of %d in heads of %d", a.ValueDim, a.HeadDim)
	}
	if a.Window < 0 {
		return fmt.Errorf("attention: sliding window %d", a.Window)
	}
	if a.SoftCap < 0 || math.IsInf(a.SoftCap, 0) || math.IsNaN(a.SoftCap) {
		return fmt.Errorf("attention: soft-cap %v", a.SoftCap)
	}
	if a.Slopes != nil && len(a.Slopes.V) != a.Heads {
		return fmt.Errorf("attention: %d ALiBi slopes for %d heads", len(a.Slopes.V), a.Heads)
	}
	return nil
}

// LayerNormer is what models with LayerNorms need beyond Backend (Cohere's
// Command R7B and A, the DSA indexer's keys).
type LayerNormer interface {
	// LayerNorm is nn.LayerNorm: dst = (x - mean)/sqrt(variance + eps)·w
	// (+ b when not nil), per row of x; w and b hold x's columns, or those
	// of several rows (row r takes part r mod len(w.V)/columns: Command
	// R+'s per-head weights with heads as rows); dst may be x.
	LayerNorm(dst, x Tensor, w, b *Vector, eps float64)
}

// GateFn is the function of a multiplicative gate (Backend.GateMul).
type GateFn int

const (
	// SigmoidGate: 1 / (1 + e^-g) (gated attention, gated DeltaNet's
	// output).
	SigmoidGate GateFn = iota
	// SiLUDivGate: the sigmoid as llama.cpp's qwen2moe graph writes it,
	// silu(g)/g; the same number in exact arithmetic, rounded otherwise in
	// the int8 modes (nn.GGMLSiLUDiv).
	SiLUDivGate
	// SoftplusGate: log(1 + e^g) (Laguna's attention gate).
	SoftplusGate
	// Softplus2Gate: log2(1 + 2^g), as llama.cpp computes K2-Horizon's
	// attention gate: softplus(g·ln 2)/ln 2 (nn.GGMLSoftplus2 in the int8
	// modes).
	Softplus2Gate
)

// Act is the gated activation of an MLP.
type Act int

const (
	// SwiGLU: silu(g) · u, silu(g) = g / (1 + e^-g) (nn.SwiGLU).
	SwiGLU Act = iota
	// GeGLU: gelu(g) · u with the tanh form of GELU (nn.GeGLU; Gemma).
	GeGLU
	// OAISwiGLU: gpt-oss's clamped SwiGLU (nn.OAISwiGLU).
	OAISwiGLU
	// ReLUSqr: max(u, 0)² of an ungated MLP's Up·x (MLP.Gate nil;
	// Nemotron-H), rounded to float32 once (nn.ReLUSqr).
	ReLUSqr
	// XIELU: Apertus's xIELU of an ungated MLP's Up·x with MLP.XIELU's
	// parameters (nn.XIELU: Ref in float64, Forward as ggml in the int8
	// modes). Dense MLPs only.
	XIELU
	// GELU: the tanh form of GELU of an ungated MLP's Up·x (MLP.Gate nil;
	// StarCoder2, Phi-2, GPT-NeoX; nn.GELU, ggml's float16 table in the
	// int8 modes). Dense MLPs only.
	GELU
	// ClampSwiGLU: Step-3.5's clamped SwiGLU, min(silu(g), L) · clamp(u,
	// -L, L) for L = MLP.Limit (nn.ClampSwiGLU).
	ClampSwiGLU
	// ReGLU: max(g, 0) · u (nn.ReGLU; SmallThinker's experts).
	ReGLU
	// SwiGLUClampIn: ggml's SWIGLU_CLAMP (Maple's experts), the inputs
	// clamped, silu(min(g, L)) · clamp(u, -L, L) for L = MLP.Limit
	// (nn.SwiGLUClampIn), unlike ClampSwiGLU, which clamps silu's output.
	SwiGLUClampIn
	// SiLU: silu(u) = u / (1 + e^-u) of an ungated MLP's Up·x (K2-Horizon's
	// value experts, which have no Down).
	SiLU
	// Identity: no activation, Down(Up·x) of an ungated MLP: a low-rank
	// product (Granite Switch's LoRA adapters as experts, one per slot).
	Identity
	// SiTU: Kimi K3's β·tanh(g/β)·sigmoid(g) · λ·tanh(u/λ) with MLP.SiTU's
	// parameters (nn.SiTU: Ref in float64, GGML as llama.cpp's graph in the
	// int8 modes).
	SiTU
)

// Ungated reports whether a is an ungated MLP's activation, of Up·x alone.
func (a Act) Ungated() bool {
	return a == ReLUSqr || a == XIELU || a == GELU || a == SiLU || a == Identity
}

func (a Act) String() string {
	switch a {
	case SwiGLU:
		return "swiglu"
	case GeGLU:
		return "geglu"
	case OAISwiGLU:
		return "swiglu-oai"
	case ReLUSqr:
		return "relu2"
	case XIELU:
		return "xielu"
	case GELU:
		return "gelu"
	case ClampSwiGLU:
		return "swiglu-clamp"
	case ReGLU:
		return "reglu"
	case SwiGLUClampIn:
		return "swiglu-clamp-in"
	case SiLU:
		return "silu"
	case Identity:
		return "identity"
	case SiTU:
		return "situ"
	}
	return fmt.Sprintf("act(%d)", int(a))
}

// MLP is a gated feed-forward block, Down(act(Gate·x) ⊙ Up·x), or with
// Gate nil an ungated one, Down(act(Up·x)) (Act ReLUSqr, XIELU, GELU or
// SiLU, the ungated activations; the gated ones need a Gate). An ungated
// MLP's Down may be nil: its output is act(Up·x) (K2-Horizon's value
// experts).
type MLP struct {
	Gate, Up, Down *Matrix
	Act            Act
	XIELU          nn.XIELU // Act XIELU's parameters
	Limit          float32  // Act ClampSwiGLU's and SwiGLUClampIn's limit L (> 0)
	SiTU           nn.SiTU  // Act SiTU's parameters
	// TopK > 0 sparsifies each row g of Gate·x before the activation
	// (Gemma 3n): g = max(g - mean(g) - TopK·std(g), 0), std with n-1
	// (nn.GaussianTopK). Gated MLPs only.
	TopK float64
}

// Out is the width of m's output: Down's, or Up's without Down.
func (m *MLP) Out() int {
	if m.Down == nil {
		return m.Up.Out
	}
	return m.Down.Out
}

// Gated reports whether m has a gate, and refuses an activation of the
// other kind (and a gated MLP without Down).
func (m *MLP) Gated() bool {
	if m.Down == nil && m.Gate != nil {
		panic(fmt.Sprintf("ml: gated MLP %s without Down", m.Gate.Name))
	}
	if (m.Gate == nil) != m.Act.Ungated() || m.Gate == nil && m.TopK != 0 {
		panic(fmt.Sprintf("ml: MLP with activation %v, gate %v and top-k %v", m.Act, m.Gate != nil, m.TopK))
	}
	return m.Gate != nil
}

// BadLogit is LogSoftmax's error for a NaN or infinite logit: in row Row
// of the model's logits (or of the reference's, when Ref), at Token.
type BadLogit struct {
	Row   int
	Ref   bool
	Value float64
	Token int
}

func (e *BadLogit) Error() string {
	who := "logits"
	if e.Ref {
		who = "reference logits"
	}
	return fmt.Sprintf("%s of row %d contain %v (token %d)", who, e.Row, e.Value, e.Token)
}
