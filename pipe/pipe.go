// Package pipe is the record format that joins the ppl tools.
//
// A pipeline stream is NDJSON: one JSON object per line, each with a "type".
// Every stage copies the records of the stages before it through unchanged
// and adds its own, so the last stage sees the full provenance of its input:
//
//	{"type":"header","v":1,"stage":"tokenize","tool":"ppl-tokenize",...}
//	{"type":"header","v":1,"stage":"window",...}
//	{"type":"stream","id":"en-1","domain":"en","sha256":"…","bytes":812,"n_tokens":190}
//	{"type":"tokens","stream":"en-1","offset":0,"ids":[1,415,…]}
//	{"type":"window","stream":"en-1","index":0,"begin":0,"end":190,"score_from":1}
//	{"type":"end","stage":"tokenize","records":3}
//	{"type":"end","stage":"window","records":2}
//
// Each record type belongs to one stage: stream and tokens to "tokenize",
// window to "window", scores to "score"; header and end name their stage.
// A stage's end trailer counts the records of that stage (its header
// included, the trailer itself not), so a reader can tell a complete pipe
// from a truncated one: a stream that stops before every announced stage has
// its trailer is an error, as is a count that disagrees.
//
// Numbers: token ids are non-negative int32; log-probabilities are float64
// written with strconv's 'g' format and precision -1, the shortest text that
// reads back to the same bits, so a value survives any number of stages.
//
// Files ending in .zst are zstd-compressed and handled transparently by
// Open and Create; Create writes atomically (temp file, then rename on Commit).
// docs/format.md describes every field.
package pipe

// Version is the record format version written in, and required of, headers.
const Version = 1

// MaxTokensPerRecord bounds the ids of one tokens record.
const MaxTokensPerRecord = 65536

// MaxLineBytes bounds one record line, so that a stream without newlines
// (/dev/zero, a decompression bomb) is an error rather than out of memory.
// The largest legitimate records are far below it: a tokens record of
// MaxTokensPerRecord ids is under 1 MiB, and a scores record with every
// optional field takes about 100 bytes a target, so 256 MiB holds windows
// of over two million targets.
const MaxLineBytes = 256 << 20

// Record types.
const (
	TypeHeader = "header"
	TypeStream = "stream"
	TypeTokens = "tokens"
	TypeWindow = "window"
	TypeScores = "scores"
	TypeEnd    = "end"
)

// Stage names.
const (
	StageTokenize = "tokenize"
	StageWindow   = "window"
	StageScore    = "score"
)

// StageOf returns the stage that produces records of type typ
// ("" for header and end, which name their stage themselves).
func StageOf(typ string) string {
	switch typ {
	case TypeStream, TypeTokens:
		return StageTokenize
	case TypeWindow:
		return StageWindow
	case TypeScores:
		return StageScore
	}
	return ""
}

// Header opens a stage's output: who made it, how, and from what.
type Header struct {
	Type    string         `json:"type"`
	V       int            `json:"v"`
	Stage   string         `json:"stage"`
	Tool    string         `json:"tool"`
	Version string         `json:"version"`
	Flags   map[string]any `json:"flags,omitempty"`

	Model     *Model     `json:"model,omitempty"`
	Tokenizer *Tokenizer `json:"tokenizer,omitempty"`
	Corpus    *Corpus    `json:"corpus,omitempty"`
	Protocol  *Protocol  `json:"protocol,omitempty"`
	Score     *Score     `json:"score,omitempty"`
}

// Model identifies a model file.
type Model struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Arch   string `json:"arch,omitempty"`
	Params uint64 `json:"params,omitempty"`
	// WeightTypes maps a tensor role (attn_q, ffn_down, output, ...) to its
	// ggml types, e.g. {"ffn_down":"Q6_K,Q4_K"}.
	WeightTypes map[string]string `json:"weight_types,omitempty"`
	// GeneralName is the file's general.name, and the rest its
	// dimensions from the GGUF metadata (ppl-score fills them; absent
	// when the file does not say).
	GeneralName   string `json:"general_name,omitempty"`
	Layers        int    `json:"layers,omitempty"`
	Embedding     int    `json:"embedding_length,omitempty"`
	Heads         int    `json:"heads,omitempty"`
	KVHeads       int    `json:"kv_heads,omitempty"`
	ContextLength int    `json:"context_length,omitempty"` // the training context
}

// Tokenizer identifies a tokenizer; ID is a hash over everything that
// decides its output, so equal IDs give equal tokens.
type Tokenizer struct {
	Model  string `json:"model"` // tokenizer.ggml.model: llama, gpt2, ...
	Pre    string `json:"pre,omitempty"`
	ID     string `json:"id"`
	NVocab int    `json:"n_vocab"`
	AddBOS bool   `json:"add_bos"`
	AddEOS bool   `json:"add_eos"`
	BOS    int32  `json:"bos"`
}

// Corpus identifies the text the streams came from.
type Corpus struct {
	Name     string   `json:"name"`
	Version  string   `json:"version,omitempty"`
	Manifest string   `json:"manifest,omitempty"`
	Quick    bool     `json:"quick,omitempty"`
	Streams  []string `json:"streams,omitempty"`
}

// Protocol names the windowing protocol (window package).
type Protocol struct {
	Mode    string `json:"mode"` // sliding, disjoint, llama.cpp
	Context int    `json:"context"`
	Stride  int    `json:"stride,omitempty"`
	// Shard is "k/n" when only shard k of n was emitted.
	Shard string `json:"shard,omitempty"`
	// Split, with Shard, says how the windows were dealt to the shards;
	// absent, round-robin by count.
	Split *Split `json:"split,omitempty"`
	// Windows, when ppl-window knew it before its first window (a file
	// input, or --split cost), is how many windows the protocol cuts from
	// the whole input, every shard's together: progress shows done/total.
	Windows int `json:"windows,omitempty"`
	// MaxWindows, when positive, keeps only the first MaxWindows windows
	// of each stream (ppl-window --max-windows, llama-perplexity's
	// --chunks).
	MaxWindows int `json:"max_windows,omitempty"`
}

// Split records how ppl-window --shard dealt the windows by cost: each
// window costs its tokens plus tokens²/Attention (attention's quadratic
// term), and the windows, largest first, each went to the least loaded
// shard. Windows and Cost hold every shard's totals (shard k at k-1), the
// same in every shard's header.
type Split struct {
	By        string  `json:"by"` // "cost"
	Attention int     `json:"attention"`
	Windows   []int   `json:"windows"`
	Cost      []int64 `json:"cost"`
}

// Score records every setting of ppl-score that changes numbers.
type Score struct {
	// Tokenizer is the id of the tokenizer ppl-score checked the model's
	// against: the tokenize header's, which ppl-aggregate checks again.
	Tokenizer   string `json:"tokenizer,omitempty"`
	Device      string `json:"device"`
	Threads     int    `json:"threads,omitempty"`
	KVDtype     string `json:"kv_dtype"`
	Activations string `json:"activations,omitempty"`
	// SSMStateDtype is the recurrent state dtype of models with recurrent
	// layers (Gated DeltaNet): f32, f16 or bf16.
	SSMStateDtype string         `json:"ssm_state_dtype,omitempty"`
	RoPE          map[string]any `json:"rope,omitempty"` // none where no layer turns q and k
	// ALiBi is ALiBi's maximum bias, the positions of the ALiBi
	// architectures' attention (bloom, mpt, jais, ...); 0: none.
	ALiBi      float64 `json:"alibi_max_bias,omitempty"`
	Reference  *Model  `json:"reference,omitempty"`
	RefKVDtype string  `json:"reference_kv_dtype,omitempty"`
	// RefDevice is where the reference ran when not on the model's device
	// ("cuda:1"; with several engines one per engine, "cuda:4,cuda:5");
	// Extra's reference_* entries then hold the properties of its GPU that
	// differ from the model's.
	RefDevice string         `json:"reference_device,omitempty"`
	Extra     map[string]any `json:"extra,omitempty"`
	// Warnings are what ppl-score warned of about the run's settings (a
	// context beyond the model's training context), for the report.
	Warnings []string `json:"warnings,omitempty"`
}

// The entries of Score.Extra that decide a window's numbers besides the
// header's other fields, in the cache key and compared between the
// engines of --devices and the shards of one report. ExtraArithmetic
// choose the arithmetic (the GPU's products and weight storage, the ggml
// that the CPU's int8 modes copy): windows scored under other values
// measure something else, and no report mixes them. ExtraMachine name the
// machine's share (the GPU, its driver and libraries, the kernels and the
// attention kernel chosen, the digest of Go's math library): the same run
// elsewhere gives log-probs that differ in their last digits.
var (
	ExtraArithmetic = []string{"precision", "weights", "arithmetic"}
	ExtraMachine    = []string{"gpu", "compute_capability", "driver", "cublas", "kernels", "attention", "math"}
)

// Stream describes one text of the corpus.
type Stream struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Domain  string `json:"domain"`
	Source  string `json:"source,omitempty"`
	SHA256  string `json:"sha256"`
	Bytes   int64  `json:"bytes"`
	Words   int64  `json:"words,omitempty"`
	NTokens int    `json:"n_tokens"`
	// Replaced counts invalid UTF-8 sequences replaced by U+FFFD.
	Replaced int `json:"replaced,omitempty"`
}

// Tokens carries ids [Offset, Offset+len(IDs)) of a stream.
type Tokens struct {
	Type   string  `json:"type"`
	Stream string  `json:"stream"`
	Offset int     `json:"offset"`
	IDs    []int32 `json:"ids"`
}

// Window asks for x[Begin..End) to be read from an empty state and the
// targets x[i], i in [ScoreFrom, End), to be scored. BOS asks the scorer
// to replace x[Begin] by the model's BOS token when its tokenizer adds one.
type Window struct {
	Type      string `json:"type"`
	Stream    string `json:"stream"`
	Index     int    `json:"index"`
	Begin     int    `json:"begin"`
	End       int    `json:"end"`
	ScoreFrom int    `json:"score_from"`
	BOS       bool   `json:"bos,omitempty"`
}

// Scores holds the results for one window. Logprobs[j] is
// log p(x[ScoreFrom+j] | x[Begin..ScoreFrom+j)). With a reference model,
// KLD[j] is KL(reference || model) at that target, RefLogprobs[j] the
// reference's log-probability of the target, and Top1Agree[j] whether
// both models' top tokens agree.
type Scores struct {
	Type        string    `json:"type"`
	Stream      string    `json:"stream"`
	Index       int       `json:"index"`
	Begin       int       `json:"begin"`
	End         int       `json:"end"`
	ScoreFrom   int       `json:"score_from"`
	BOS         bool      `json:"bos,omitempty"`
	Logprobs    []float64 `json:"logprobs"`
	Argmax      []int32   `json:"argmax,omitempty"`
	KLD         []float64 `json:"kld,omitempty"`
	RefLogprobs []float64 `json:"ref_logprobs,omitempty"`
	Top1Agree   []bool    `json:"top1_agree,omitempty"`
}

// WindowSpec returns the window the scores answer.
func (s *Scores) WindowSpec() Window {
	return Window{Type: TypeWindow, Stream: s.Stream, Index: s.Index, Begin: s.Begin, End: s.End, ScoreFrom: s.ScoreFrom, BOS: s.BOS}
}

// End is a stage's trailer.
type End struct {
	Type    string `json:"type"`
	Stage   string `json:"stage"`
	Records int    `json:"records"`
}

// ToolVersion is the toolkit's version, written in every header and part of
// every cache key: bump it whenever a change alters any tool's output.
const ToolVersion = "0.1.0"
