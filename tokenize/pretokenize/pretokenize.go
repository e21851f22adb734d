// Package pretokenize splits text into the pieces ("words") that byte-level
// BPE then merges independently, exactly as llama.cpp does for the
// tokenizer.ggml.pre types that real models use.
//
// Why hand-written scanners: the reference splitters are regular expressions
// with lookahead (\s+(?!\S)), case-insensitive groups and Unicode classes.
// Go's regexp has no lookahead, and a general backtracking engine would be
// slow and would still differ from llama.cpp in corner cases, because
// llama.cpp itself does not run those expressions as written: it runs
// hand-written scanners for GPT-2 and Llama-3 and std::regex over a
// "collapsed" text (one byte per Unicode category) for the rest. Each
// pre-tokenizer here is a short list of stages over one shared decoded Text
// (code points plus category flags), each stage mirroring one of llama.cpp's
// expressions decision for decision, so the tokens stay bit-identical.
package pretokenize

import (
	"fmt"
	"sort"
	"strings"
)

// Pretokenizer is one tokenizer.ggml.pre type.
type Pretokenizer struct {
	// Name is the canonical name (the llama.cpp pre-type it behaves as).
	Name string
	// IgnoreMerges: a piece that is itself a vocabulary token is emitted as
	// that token without running the merges (llama.cpp's ignore_merges).
	IgnoreMerges bool
	// AddBOS is the add-BOS default when the file does not say.
	AddBOS bool
	// NoBOS: the model has no BOS token unless the file names one
	// (llama.cpp's BPE default of id 11 is dropped).
	NoBOS bool
	// ForceBOS: BOS is added even where the file says not to (Gemma 4).
	ForceBOS bool
	// EscapeSpaces: spaces become U+2581 before splitting (Gemma 4, Sarvam).
	EscapeSpaces bool
	// RawBytes: pieces are merged as UTF-8 characters, not in the GPT-2 byte
	// alphabet, and a byte no token covers is its <0xNN> token.
	RawBytes bool
	// NewlineWords: a piece of newlines only that is a token is emitted as
	// that token without merging (Gemma 4).
	NewlineWords bool
	stages       []stage
}

// Split appends to dst the end offsets (in code points, ascending, the last
// equal to t.Len()) of the pieces of t and returns dst. An empty text has
// no pieces. scratch is reused between stages; pass nil or a previous
// result's backing array.
func (p *Pretokenizer) Split(dst []int, t *Text, scratch []int) ([]int, []int) {
	n := t.Len()
	if n == 0 {
		return dst[:0], scratch
	}
	if len(p.stages) == 1 {
		return p.stages[0](dst[:0], t, 0, n), scratch
	}
	cur := append(scratch[:0], n)
	next := dst[:0]
	for _, st := range p.stages {
		next = next[:0]
		start := 0
		for _, end := range cur {
			next = st(next, t, start, end)
			start = end
		}
		cur, next = next, cur
	}
	return cur, next
}

// Pieces returns the pieces of text as subslices that cover it exactly:
// Split for callers that want the words themselves rather than code-point
// offsets (BPE training). An invalid UTF-8 byte splits as one U+FFFD code
// point, as in Split, but keeps its own byte in the piece.
func (p *Pretokenizer) Pieces(text []byte) [][]byte {
	var t Text
	t.Reset(text)
	bounds, _ := p.Split(nil, &t, nil)
	var out [][]byte
	start := 0
	for _, end := range bounds {
		out = append(out, text[t.Offs[start]:t.Offs[end]])
		start = end
	}
	return out
}

var (
	defaultStages = []stage{
		regexStage(runOf(isPunctRun)), // [\p{P}\$\+<=>\^~\|]+
		splitGPT2,
		regexStage(runOf(isNumberRun)), // \p{N}+
		regexStage(threeDigits),        // [0-9][0-9][0-9]
	}
	falconStages = []stage{
		regexStage(runOf(isPunctRunTick)), // [\p{P}\$\+<=>\^~\|`]+
		splitGPT2,
		regexStage(threeDigits), // [0-9][0-9][0-9]
	}
	gpt2Stages      = []stage{splitGPT2}
	llama3Stages    = []stage{llama3Splitter(3)}
	qwen2Stages     = []stage{llama3Splitter(1)}
	starcoderStages = []stage{splitEachNumber, splitGPT2}
	tekkenStages    = []stage{splitTekken}
	qwen35Stages    = []stage{llamaRule{word: Letter | Mark, maxDigits: 1}.stage()}
	o200kStages     = []stage{caseRule{suffix: true, maxDigits: 3}.stage()}
	seedCoderStages = []stage{llamaRule{word: Letter, maxDigits: 1, noTail: true}.stage()}
	ufakzekaStages  = []stage{llamaRule{noContractions: true, word: Letter, maxDigits: 1}.stage()}
	jais2Stages     = []stage{llamaRule{word: Letter, maxDigits: 3, cascade: true}.stage()}
	minicpm5Stages  = []stage{regexStage(upToThreeNumbers), llamaRule{word: Letter, maxDigits: 1 << 30}.stage()}
	lagunaStages    = []stage{lagunaLines, llama3Splitter(1)}
	kimiK2Stages    = []stage{splitKimiK2}
	youtuStages     = []stage{regexStage(searchAt(youtuCJKAt)),
		llamaRule{noContractions: true, suffix: true, word: Letter | Mark, punctStop: Whitespace | Letter | Number, maxDigits: 1, slashTail: true}.stage()}
	// tiny_aya's \d{1,3}(?=(?:\d{3})*\b) goes to AFMoE's digit splitter in
	// llama.cpp 0.7.0 (its tokens show it), not through the expression.
	tinyAyaStages = []stage{afmoeDigits,
		llamaRule{noContractions: true, suffix: true, word: Letter | Mark, punctStop: Whitespace | Letter | Number, maxDigits: 3, slashTail: true}.stage()}
	exaoneMoEStages = []stage{exaoneMoE}
	k2HorizonStages = []stage{llamaRule{word: Letter | Mark, joiners: true, punctStop: Whitespace | Letter | Number, maxDigits: 3}.stage()}
)

type entry struct {
	canonical    string
	stages       []stage
	ignoreMerges bool
	addBOS       bool
	noBOS        bool
	spm          bool // Gemma 4 and Sarvam: SentencePiece-style BPE (EscapeSpaces, RawBytes)
	gemma4       bool // ForceBOS, NewlineWords
}

// registry maps every supported tokenizer.ggml.pre value to its behaviour,
// following llama_vocab::impl::load. Several names share one expression
// list there (the canonical name is that list's pre-type); names of
// embedding-only models (BERT-style, with a separator token) are left out.
var registry = map[string]entry{}

func register(names []string, e entry) {
	for _, n := range names {
		registry[n] = e
	}
}

func init() {
	register([]string{"default"}, entry{canonical: "default", stages: defaultStages})
	register([]string{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
		"a.x-4.0", "mellum", "mpt", "olmo", "jais", "exaone4", "trillion", "granite-docling"},
		entry{canonical: "gpt2", stages: gpt2Stages})
	register([]string{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
		entry{canonical: "llama3", stages: llama3Stages, ignoreMerges: true, addBOS: true})
	register([]string{"dbrx", "smaug-bpe"}, entry{canonical: "dbrx", stages: llama3Stages})
	// glm4: the Llama-3 expression, and no BOS unless the file names one.
	register([]string{"glm4", "chatglm-bpe", "glm5"}, entry{canonical: "chatglm4", stages: llama3Stages, noBOS: true})
	register([]string{"jais-2"}, entry{canonical: "jais2", stages: jais2Stages})
	// bailingmoe's expression ('(?i:[sdmt]|ll|ve|re) and \s*[\r\n]) and
	// grok-2's match exactly what qwen2's does.
	register([]string{"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan", "kormo", "f2llmv2",
		"solar-open", "grok-2", "bailingmoe", "bailingmoe2", "llada-moe"},
		entry{canonical: "qwen2", stages: qwen2Stages})
	register([]string{"qwen35"}, entry{canonical: "qwen35", stages: qwen35Stages})
	register([]string{"seed-coder"}, entry{canonical: "seed-coder", stages: seedCoderStages})
	register([]string{"ufakzeka"}, entry{canonical: "ufakzeka", stages: ufakzekaStages})
	register([]string{"laguna"}, entry{canonical: "laguna", stages: lagunaStages})
	register([]string{"minicpm5"}, entry{canonical: "minicpm5", stages: minicpm5Stages, ignoreMerges: true})
	register([]string{"kimi-k2"}, entry{canonical: "kimi-k2", stages: kimiK2Stages})
	register([]string{"k2-horizon"}, entry{canonical: "k2-horizon", stages: k2HorizonStages})
	register([]string{"deepseek-llm"}, entry{canonical: "deepseek-llm", stages: deepseekLLM})
	register([]string{"deepseek-coder"}, entry{canonical: "deepseek-coder", stages: deepseekCoder})
	register([]string{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"}, entry{canonical: "deepseek-v3", stages: deepseekV3})
	register([]string{"youtu"}, entry{canonical: "youtu", stages: youtuStages, ignoreMerges: true})
	register([]string{"tiny_aya", "cohere2moe"}, entry{canonical: "tiny_aya", stages: tinyAyaStages})
	register([]string{"exaone-moe"}, entry{canonical: "exaone-moe", stages: exaoneMoEStages})
	register([]string{"spark2_5"}, entry{canonical: "spark2_5", stages: spark25})
	register([]string{"afmoe"}, entry{canonical: "afmoe", stages: afmoe})
	register([]string{"falcon"}, entry{canonical: "falcon", stages: falconStages})
	register([]string{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"},
		entry{canonical: "starcoder", stages: starcoderStages})
	register([]string{"poro-chat", "bloom", "gpt3-finnish"}, entry{canonical: "bloom", stages: bloomStages})
	register([]string{"viking"}, entry{canonical: "viking", stages: vikingStages})
	register([]string{"chameleon"}, entry{canonical: "chameleon", stages: chameleonStages, addBOS: true})
	register([]string{"superbpe"}, entry{canonical: "superbpe", stages: superBPEStages})
	register([]string{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, entry{canonical: "gpt-4o", stages: o200kStages})
	// Gemma 4 (also the tokenizer.ggml.model "gemma4") and Sarvam: BPE over
	// raw UTF-8 with spaces as U+2581, split only at newline runs.
	register([]string{"gemma4"}, entry{canonical: "gemma4", stages: []stage{lagunaLines}, spm: true, gemma4: true, addBOS: true})
	register([]string{"sarvam-moe"}, entry{canonical: "sarvam-moe", stages: []stage{lagunaLines}, spm: true})
	register([]string{"tekken"}, entry{canonical: "tekken", stages: tekkenStages, ignoreMerges: true, addBOS: true})
}

// Names returns the supported tokenizer.ggml.pre values, sorted.
func Names() []string {
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Lookup returns the pre-tokenizer for a tokenizer.ggml.pre value. An empty
// name is "default", as in llama.cpp (which warns that quality degrades).
func Lookup(name string) (*Pretokenizer, error) {
	if name == "" {
		name = "default"
	}
	e, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("unsupported pre-tokenizer %q (tokenizer.ggml.pre); supported: %s",
			name, strings.Join(Names(), ", "))
	}
	return &Pretokenizer{Name: e.canonical, IgnoreMerges: e.ignoreMerges, AddBOS: e.addBOS, NoBOS: e.noBOS,
		ForceBOS: e.gemma4, EscapeSpaces: e.spm, RawBytes: e.spm, NewlineWords: e.gemma4, stages: e.stages}, nil
}
