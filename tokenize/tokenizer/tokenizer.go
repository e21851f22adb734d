// Package tokenizer turns text into the token ids llama.cpp's llama_tokenize
// produces for a GGUF model (add_special as the file says, parse_special =
// false), bit for bit, so that perplexities measured here and there are of
// the same token sequence.
//
// Load reads the tokenizer.ggml.* metadata and builds the model its
// tokenizer.ggml.model names:
//
//   - "llama": SentencePiece (package spm);
//   - "gpt2": byte-level BPE with its pre-tokenizer (packages bpe and
//     pretokenize);
//   - "gemma4": Gemma 4's BPE over raw UTF-8 (spaces as U+2581, <0xNN>
//     byte fallback, BOS always added), package bpe;
//   - "rwkv": RWKV World's greedy longest match over escaped byte tokens;
//   - "plamo2": PLaMo-2's best-score cut with byte fallback;
//   - "plamo3": PLaMo-3's, the same search on each segment of the text
//     after PLaMo-3's pre-segmentation (plamo3.go);
//   - "hybriddna": HybriDNA's byte-level BPE with DNA k-mers between
//     <dna> and </dna> (hybriddna.go).
//
// What this package adds around them is what llama_vocab::impl::tokenize
// does around its sessions:
//
//   - Special and control tokens written in the text are plain text. Only
//     user-defined tokens (type 4, e.g. Qwen's "<think>") are cut out first
//     and emitted as themselves, because llama.cpp does that even with
//     parse_special off.
//   - BOS is added once at the start and EOS once at the end of each text
//     when the model's flags say so.
//   - SentencePiece puts a space in front of the text, and after each cut-out
//     token, when add_space_prefix is on.
//
// Text must be valid UTF-8: Encode reports the byte offset of the first bad
// byte. Sanitize replaces bad bytes with U+FFFD first, for callers that
// prefer to go on (llama.cpp itself does that silently for BPE).
//
// Identity is a SHA-256 over everything that decides the tokens (model, pre,
// vocabulary, scores, types, merges, special ids and flags), so caches and
// reports can tell whether two models tokenize alike without comparing files.
package tokenizer

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"unicode/utf8"

	"ppl.dev/gguf"
	"ppl.dev/tokenize/bpe"
	"ppl.dev/tokenize/internal/vocab"
	"ppl.dev/tokenize/pretokenize"
	"ppl.dev/tokenize/spm"
)

// Tokenizer encodes text the way llama.cpp does for one model.
type Tokenizer interface {
	// Encode returns the tokens of one text (one stream): BOS and EOS as
	// the model adds them. It fails on invalid UTF-8 (*InvalidUTF8Error).
	Encode(text []byte) ([]int32, error)
	// NVocab is the vocabulary size.
	NVocab() int
	// BOS and EOS are the special ids, -1 when the model has none.
	BOS() int32
	EOS() int32
	// AddBOS and AddEOS say whether Encode adds them.
	AddBOS() bool
	AddEOS() bool
	// ChunkBOS says whether llama-perplexity puts BOS in the first place of
	// each chunk (llama_vocab_get_add_bos): AddBOS, but for RWKV the file's
	// tokenizer.ggml.add_bos_token (false when absent), which its Encode
	// ignores.
	ChunkBOS() bool
	// Model and Pre are tokenizer.ggml.model and the effective pre-tokenizer.
	Model() string
	Pre() string
	// Identity is the lowercase hex SHA-256 of the tokenizer definition.
	Identity() string
	// Decode returns the text of tokens as llama.cpp's detokenizer writes it
	// without special tokens and without cleanup: the inverse of Encode up to
	// SentencePiece's added spaces.
	Decode(ids []int32) []byte
	// Token returns the text of a vocabulary entry ("" when out of range).
	Token(id int32) string
}

// Token types of tokenizer.ggml.token_type.
const (
	TypeUndefined   int32 = 0
	TypeNormal      int32 = 1
	TypeUnknown     int32 = 2
	TypeControl     int32 = 3
	TypeUserDefined int32 = 4
	TypeUnused      int32 = 5
	TypeByte        int32 = 6
)

// attribute bits, as llama_token_attr.
const (
	attrUndefined uint16 = 0
	attrUnknown   uint16 = 1 << 0
	attrUnused    uint16 = 1 << 1
	attrNormal    uint16 = 1 << 2
	attrControl   uint16 = 1 << 3
	attrUser      uint16 = 1 << 4
	attrByte      uint16 = 1 << 5
)

// Config is a tokenizer definition, what Load reads from GGUF metadata.
// Nil pointers mean "key absent": the llama.cpp default applies.
type Config struct {
	Model  string    // tokenizer.ggml.model: "llama", "gpt2", ... (see Load)
	Pre    string    // tokenizer.ggml.pre ("" = default)
	Tokens []string  // tokenizer.ggml.tokens
	Scores []float32 // tokenizer.ggml.scores (SentencePiece; nil = all 0)
	Types  []int32   // tokenizer.ggml.token_type (nil = all normal)
	Merges []string  // tokenizer.ggml.merges (BPE)

	BOS, EOS, UNK *uint32 // tokenizer.ggml.{bos,eos,unknown}_token_id
	// FIM and EOT ids: when set, llama.cpp skips guessing those tokens by
	// text (which marks the guessed ones as control tokens).
	EOT, EOM, FIMPre, FIMSuf, FIMMid, FIMPad, FIMRep, FIMSep *uint32

	AddBOS, AddEOS *bool // tokenizer.ggml.add_{bos,eos}_token
	AddSpacePrefix *bool // tokenizer.ggml.add_space_prefix

	// Load's copy-free form of Tokens and Merges, used where those are
	// nil: the file's arrays as they are (see gguf.StringArray).
	tokenArray, mergeArray *gguf.StringArray
	// ownScores: Scores is the file's array, which nothing changes, so
	// the tokenizer may keep it rather than a copy.
	ownScores bool
}

// strs is a string array given as a []string or a *gguf.StringArray.
type strs struct {
	s []string
	a *gguf.StringArray
}

func (x strs) len() int {
	if x.s != nil {
		return len(x.s)
	}
	return x.a.Len()
}

func (x strs) at(i int) string {
	if x.s != nil {
		return x.s[i]
	}
	return x.a.At(i)
}

// tokens and merges are the arrays of c, whichever form they have; ok is
// false for merges absent in both forms.
func (c *Config) tokens() strs { return strs{s: c.Tokens, a: c.tokenArray} }
func (c *Config) merges() (strs, bool) {
	return strs{s: c.Merges, a: c.mergeArray}, c.Merges != nil || c.mergeArray != nil
}

// InvalidUTF8Error reports the first byte of a text that is not UTF-8.
type InvalidUTF8Error struct {
	Offset int
	Byte   byte
}

func (e *InvalidUTF8Error) Error() string {
	return fmt.Sprintf("invalid UTF-8 at byte offset %d (0x%02X)", e.Offset, e.Byte)
}

// ValidUTF8 returns nil or an *InvalidUTF8Error for the first bad byte.
func ValidUTF8(b []byte) error {
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return &InvalidUTF8Error{Offset: i, Byte: b[i]}
		}
		i += n
	}
	return nil
}

// Sanitize returns b with every byte that is not part of valid UTF-8
// replaced by U+FFFD (one replacement per byte, as llama.cpp's decoder
// does), and the number of replacements. b itself is returned when valid.
//
// For byte-level BPE the tokens of the result are llama.cpp's tokens of b,
// except where b holds UTF-8-encoded surrogates (llama.cpp decodes those as
// one code point). For SentencePiece llama.cpp instead keeps the raw bytes
// and emits byte tokens for them, so the tokens differ there.
func Sanitize(b []byte) ([]byte, int) {
	if utf8.Valid(b) {
		return b, 0
	}
	out := make([]byte, 0, len(b)+16)
	n := 0
	for i := 0; i < len(b); {
		r, w := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && w == 1 {
			out = append(out, "\uFFFD"...)
			n++
			i++
			continue
		}
		out = append(out, b[i:i+w]...)
		i += w
	}
	return out, n
}

type tok struct {
	cfg      Config
	voc      *vocab.Vocab // token texts and ids, shared with the models
	attrs    []uint16
	bos, eos int32
	addBOS   bool
	addEOS   bool
	chunkBOS bool
	prefix   bool
	escape   bool // BPE: spaces to U+2581 first (Gemma 4)
	forceBOS bool
	pre      string
	spm      *spm.Model
	bpe      *bpe.Model
	rwkv     *rwkvModel
	plamo2   *plamo2Model // PLaMo-2 and PLaMo-3
	dna      *dnaModel    // hybriddna with its tags; nil: plain BPE
	// dnaStrip >= 0: the texts of tokens after this id ("<oov>") read
	// without a trailing k-mer marker (hybriddna; see text).
	dnaStrip int32
	specials []int32 // user-defined tokens cut out of text, longest first
	identity string
}

// New builds a tokenizer from a definition.
//
// Memory: a tokenizer holds, per vocabulary token, its text, a 4-byte
// offset, 6 bytes of index (package vocab), a 2-byte attribute and, for
// SentencePiece and PLaMo, a 4-byte score; BPE adds about 23 bytes a
// merge (its pair table). Load shares the text with the file's metadata
// instead of copying it, so loading allocates little more than that:
// TestVocabMemory holds it to about 1.2 times the file's size for
// SentencePiece and 1.9 times for BPE (before issue #20, 6 to 7 times).
func New(cfg Config) (Tokenizer, error) {
	src := cfg.tokens()
	n := src.len()
	if n == 0 {
		return nil, fmt.Errorf("tokenizer: empty vocabulary (tokenizer.ggml.tokens)")
	}
	if n > vocab.MaxTokens {
		return nil, fmt.Errorf("tokenizer: vocabulary of %d tokens", n)
	}
	if cfg.Scores != nil && len(cfg.Scores) < n {
		return nil, fmt.Errorf("tokenizer: %d scores for %d tokens", len(cfg.Scores), n)
	}
	if cfg.Types != nil && len(cfg.Types) < n {
		return nil, fmt.Errorf("tokenizer: %d token types for %d tokens", len(cfg.Types), n)
	}
	voc, err := newVocab(src)
	if err != nil {
		return nil, err
	}
	if a, b, dup := voc.Duplicate(); dup {
		return nil, fmt.Errorf("tokenizer: duplicate token %q has ids %d and %d", voc.Token(a), a, b)
	}
	t := &tok{cfg: cfg, voc: voc, attrs: make([]uint16, n), dnaStrip: dnaStripFrom(cfg.Model, voc)}
	for i := range t.attrs {
		t.attrs[i] = attrNormal
		if cfg.Types != nil {
			t.attrs[i] = typeAttr(cfg.Types[i])
		}
	}
	// Scores matter to SentencePiece and PLaMo only.
	var scores []float32
	switch {
	case cfg.Model != "llama" && cfg.Model != "plamo2" && cfg.Model != "plamo3":
	case cfg.ownScores && len(cfg.Scores) == n:
		scores = cfg.Scores
	default:
		scores = make([]float32, n)
		if cfg.Scores != nil {
			copy(scores, cfg.Scores[:n])
		}
	}

	// Defaults per model type, then the file's values (llama_vocab::impl::load).
	var defBOS, defEOS int32
	switch cfg.Model {
	case "llama":
		defBOS, defEOS = 1, 2
		t.addBOS, t.addEOS, t.prefix = true, false, true
		t.pre = "default"
		m, err := spm.FromVocab(t.voc, scores)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		t.spm = m
	case "gpt2", "gemma4", "hybriddna":
		defBOS, defEOS = 11, 11
		name := cfg.Pre
		if cfg.Model == "gemma4" {
			// llama.cpp reads no pre-tokenizer for this model type and has
			// no default special tokens.
			defBOS, defEOS, name = -1, -1, "gemma4"
		}
		pre, err := pretokenize.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		merges, ok := cfg.merges()
		if !ok {
			return nil, fmt.Errorf("tokenizer: BPE model without tokenizer.ggml.merges")
		}
		t.pre = pre.Name
		t.addBOS = pre.AddBOS
		t.escape = pre.EscapeSpaces
		t.forceBOS = pre.ForceBOS
		if pre.NoBOS {
			defBOS = -1
		}
		m, err := bpe.FromVocab(t.voc, merges.len(), merges.at, pre)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		t.bpe = m
		if cfg.Model == "hybriddna" {
			t.dna = newDNA(t.voc, m)
		}
	case "rwkv":
		defBOS, defEOS = -1, -1
		t.pre = "rwkv"
	case "plamo2", "plamo3":
		// llama.cpp's two PLaMo vocabulary types share one tokenizer.
		defBOS, defEOS = 1, 2
		t.pre = cfg.Model
		m, err := newPLaMo(t.voc, scores, t.attrs, cfg.Model == "plamo3")
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		t.plamo2 = m
	default:
		return nil, fmt.Errorf("tokenizer: unsupported tokenizer.ggml.model %q (supported: llama, gpt2, gemma4, rwkv, plamo2, plamo3, hybriddna)", cfg.Model)
	}
	if cfg.AddSpacePrefix != nil && t.spm != nil {
		t.prefix = *cfg.AddSpacePrefix
	}
	t.bos = specialID(defBOS, cfg.BOS, n)
	t.eos = specialID(defEOS, cfg.EOS, n)
	if cfg.AddBOS != nil {
		t.addBOS = *cfg.AddBOS
	}
	if cfg.AddEOS != nil {
		t.addEOS = *cfg.AddEOS
	}
	if t.forceBOS {
		t.addBOS = true // llama.cpp overrides the file for Gemma 4
	}
	t.chunkBOS = t.addBOS
	if cfg.Model == "rwkv" {
		// llama.cpp's RWKV path adds neither, whatever the file says; but
		// its vocabulary keeps the file's add_bos_token, by which
		// llama-perplexity still replaces each chunk's first token.
		t.addBOS, t.addEOS = false, false
		unk := specialID(-1, cfg.UNK, n)
		t.rwkv = newRWKV(t.voc, unk)
	}
	if t.chunkBOS && t.bos < 0 {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set")
	}
	if t.addEOS && t.eos < 0 {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.add_eos_token is true, but tokenizer.ggml.eos_token_id is not set")
	}
	t.markControlByText()
	for id, a := range t.attrs {
		if a&attrUser != 0 && a&(attrControl|attrUnknown) == 0 {
			t.specials = append(t.specials, int32(id))
		}
	}
	slices.SortStableFunc(t.specials, func(a, b int32) int {
		return cmp.Compare(len(t.text(b)), len(t.text(a)))
	})
	t.identity = identity(cfg, t)
	// Keep the small fields only; the models hold what encoding needs.
	t.cfg.Tokens, t.cfg.Scores, t.cfg.Types, t.cfg.Merges = nil, nil, nil, nil
	t.cfg.tokenArray, t.cfg.mergeArray = nil, nil
	return t, nil
}

// newVocab indexes the token texts: the file's array as it is when it has
// one and no empty entry, else a copy with llama.cpp's name for each empty
// entry ("[EMPTY_<id>]").
func newVocab(src strs) (*vocab.Vocab, error) {
	empty := false
	for i := range src.len() {
		if src.at(i) == "" {
			empty = true
			break
		}
	}
	var v *vocab.Vocab
	var err error
	switch {
	case src.s == nil && !empty:
		v, err = vocab.FromArena(src.a.Arena())
	case empty:
		texts := make([]string, src.len())
		for i := range texts {
			if texts[i] = src.at(i); texts[i] == "" {
				texts[i] = fmt.Sprintf("[EMPTY_%d]", i) // llama.cpp's name for empty entries
			}
		}
		v, err = vocab.New(texts)
	default:
		v, err = vocab.New(src.s)
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return v, nil
}

func typeAttr(ty int32) uint16 {
	switch ty {
	case TypeUnknown:
		return attrUnknown
	case TypeUnused:
		return attrUnused
	case TypeNormal:
		return attrNormal
	case TypeControl:
		return attrControl
	case TypeUserDefined:
		return attrUser
	case TypeByte:
		return attrByte
	}
	return attrUndefined
}

// specialID resolves a special token id like llama.cpp: the default is
// dropped when out of range, a file value is used when in range.
func specialID(def int32, file *uint32, n int) int32 {
	id := def
	if id >= int32(n) {
		id = -1
	}
	if file != nil && uint64(*file) < uint64(n) {
		id = int32(*file)
	}
	return id
}

// Texts llama.cpp treats as control tokens whatever their type says (its
// end-of-generation list, and its FIM and EOT guesses). Marking them keeps
// them out of the user-defined cut, as in llama.cpp.
var (
	eogTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
		"<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
		"<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~["}
	fimPre = []string{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>", "<|plamo:fim_prefix|>"}
	fimSuf = []string{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>", "<|plamo:fim_suffix|>"}
	fimMid = []string{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>", "<|plamo:fim_middle|>"}
	fimPad = []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}
	fimRep = []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}
	fimSep = []string{"<|file_sep|>", "<|plamo:file_separator|>"}
	// gpt-oss: always rendered, so user-defined.
	harmonyUser = []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}
)

// text is a token's text as llama.cpp keeps it for everything but looking
// tokens up by text: in a hybriddna vocabulary, the tokens after "<oov>"
// lose a trailing k-mer marker (see hybriddna.go).
func (t *tok) text(id int32) string {
	s := t.voc.Token(id)
	if t.dnaStrip >= 0 && id > t.dnaStrip && len(s) > len(dnaMarker) && s[len(s)-len(dnaMarker):] == dnaMarker {
		return s[:len(s)-len(dnaMarker)]
	}
	return s
}

// byText calls f with each id whose text (as text gives it) is s: at most
// one, except in a hybriddna vocabulary, where a k-mer that lost its
// marker can read like another token. (llama.cpp names its FIM tokens by
// the first such id in hash order, which is unspecified; both get marked.)
func (t *tok) byText(s string, f func(id int32)) {
	if id, ok := t.voc.ID(s); ok && t.text(id) == s {
		f(id)
	}
	if t.dnaStrip >= 0 {
		if id, ok := t.voc.ID(s + dnaMarker); ok && t.text(id) == s {
			f(id)
		}
	}
}

func (t *tok) markControlByText() {
	mark := func(texts []string) {
		for _, s := range texts {
			t.byText(s, func(id int32) { t.attrs[id] |= attrControl })
		}
	}
	c := t.cfg
	if c.FIMPre == nil {
		mark(fimPre)
	}
	if c.FIMSuf == nil {
		mark(fimSuf)
	}
	if c.FIMMid == nil {
		mark(fimMid)
	}
	if c.FIMPad == nil {
		mark(fimPad)
	}
	if c.FIMRep == nil {
		mark(fimRep)
	}
	if c.FIMSep == nil {
		mark(fimSep)
	}
	mark(eogTexts)
	for _, s := range harmonyUser {
		t.byText(s, func(id int32) { t.attrs[id] = attrUser })
	}
	// o200k_harmony / solar-open: "<|end|>" is not end-of-generation there.
	has := func(s string) (ok bool) {
		t.byText(s, func(int32) { ok = true })
		return ok
	}
	ret, call, calls, flush := has("<|return|>"), has("<|call|>"), has("<|calls|>"), has("<|flush|>")
	if (ret && (call || calls)) || ((call || calls) && flush) {
		t.byText("<|end|>", func(id int32) { t.attrs[id] = attrUser })
	}
}

func (t *tok) NVocab() int      { return t.voc.Len() }
func (t *tok) BOS() int32       { return t.bos }
func (t *tok) EOS() int32       { return t.eos }
func (t *tok) AddBOS() bool     { return t.addBOS }
func (t *tok) AddEOS() bool     { return t.addEOS }
func (t *tok) ChunkBOS() bool   { return t.chunkBOS }
func (t *tok) Model() string    { return t.cfg.Model }
func (t *tok) Pre() string      { return t.pre }
func (t *tok) Identity() string { return t.identity }
func (t *tok) Token(id int32) string {
	if id < 0 || int(id) >= t.voc.Len() {
		return ""
	}
	return t.text(id)
}

// Encode implements Tokenizer.
func (t *tok) Encode(text []byte) ([]int32, error) {
	if err := ValidUTF8(text); err != nil {
		return nil, err
	}
	out := make([]int32, 0, len(text)/3+4)
	if t.addBOS {
		out = append(out, t.bos)
	}
	prevSpecial := true
	var err error
	for _, f := range t.partition(text) {
		if f.id >= 0 {
			out = append(out, f.id)
			prevSpecial = true
			continue
		}
		frag := text[f.a:f.b]
		if t.escape {
			frag = bytes.ReplaceAll(frag, []byte(" "), []byte(spm.Space))
		}
		if t.spm != nil {
			out, err = t.spm.Encode(out, frag, t.prefix && prevSpecial)
			if err != nil {
				return nil, err
			}
		} else if t.rwkv != nil {
			out = t.rwkv.encode(out, frag)
		} else if t.plamo2 != nil {
			out = t.plamo2.encode(out, frag)
		} else if t.dna != nil {
			out = t.dna.encode(out, frag)
		} else {
			out = t.bpe.Encode(out, frag)
		}
		prevSpecial = false
	}
	if t.addEOS {
		out = append(out, t.eos)
	}
	return out, nil
}

// fragment is text[a:b] (id < 0) or a cut-out token.
type fragment struct {
	a, b int
	id   int32
}

// partition is llama.cpp's tokenizer_st_partition with parse_special off:
// for each user-defined token, longest first, every occurrence in the text
// fragments left so far (searched left to right, without overlap) is cut out.
func (t *tok) partition(text []byte) []fragment {
	frags := []fragment{{0, len(text), -1}}
	if len(text) == 0 {
		return nil
	}
	var next []fragment
	for _, id := range t.specials {
		s := t.text(id)
		if !bytes.Contains(text, []byte(s)) {
			continue
		}
		next = next[:0]
		for _, f := range frags {
			if f.id >= 0 {
				next = append(next, f)
				continue
			}
			a := f.a
			for {
				i := bytes.Index(text[a:f.b], []byte(s))
				if i < 0 {
					break
				}
				if i > 0 {
					next = append(next, fragment{a, a + i, -1})
				}
				next = append(next, fragment{a + i, a + i + len(s), id})
				a += i + len(s)
			}
			if a < f.b {
				next = append(next, fragment{a, f.b, -1})
			}
		}
		frags, next = next, frags
	}
	return frags
}
