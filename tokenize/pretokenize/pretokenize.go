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
	stages []stage
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
	gpt2Stages      = []stage{splitGPT2}
	llama3Stages    = []stage{llama3Splitter(3)}
	qwen2Stages     = []stage{llama3Splitter(1)}
	starcoderStages = []stage{splitEachNumber, splitGPT2}
	tekkenStages    = []stage{splitTekken}
)

type entry struct {
	canonical    string
	stages       []stage
	ignoreMerges bool
	addBOS       bool
}

// registry maps every supported tokenizer.ggml.pre value to its behaviour,
// following llama_vocab::impl::load.
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
	register([]string{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
		entry{canonical: "llama3", stages: llama3Stages, ignoreMerges: true, addBOS: true})
	register([]string{"dbrx", "smaug-bpe"}, entry{canonical: "dbrx", stages: llama3Stages})
	register([]string{"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan"},
		entry{canonical: "qwen2", stages: qwen2Stages})
	register([]string{"deepseek-llm"}, entry{canonical: "deepseek-llm", stages: deepseekLLM})
	register([]string{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
		entry{canonical: "starcoder", stages: starcoderStages})
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
	return &Pretokenizer{Name: e.canonical, IgnoreMerges: e.ignoreMerges, AddBOS: e.addBOS, stages: e.stages}, nil
}
