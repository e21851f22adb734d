package tokenizer_test

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"ppl.dev/gguf"
	"ppl.dev/oracle"
	"ppl.dev/tokenize/bpe"
	"ppl.dev/tokenize/testmodel"
	"ppl.dev/tokenize/tokenizer"
)

// xcheck is testdata/llamacpp-xcheck.json.gz: texts of our own making
// (edge cases, random mixes of scripts, whitespace, digits, contractions,
// special-token look-alikes) and, after them, the first bytes of oracle
// texts, with llama.cpp's tokens for them, for the oracle models and for
// the Llama-3 vocabulary under other pre-tokenizers (testdata/xcheck.md
// says how). The oracle texts are not copied into the file: OracleTexts
// names each one, how many of its bytes were tokenized, and their SHA-256,
// and the test reads them from the oracle directory.
type xcheck struct {
	Source      string   `json:"source"`
	Texts       []string `json:"texts"`
	OracleTexts []struct {
		Text   string `json:"text"`   // oracle text stem (en-gpl3)
		Bytes  int    `json:"bytes"`  // length of the prefix tokenized
		SHA256 string `json:"sha256"` // of that prefix
	} `json:"oracle_texts"`
	Runs []struct {
		Model string `json:"model"`
		Pre   string `json:"pre"`
		// Texts are more texts for this run alone (those that exercise
		// its vocabulary's own paths), tokenized after the shared ones.
		Texts  []string  `json:"texts,omitempty"`
		Tokens [][]int32 `json:"tokens"`
	} `json:"runs"`
}

func TestLlamaCppCrossCheck(t *testing.T) {
	dir := oracle.Require(t)
	paths := []string{"testdata/llamacpp-xcheck.json.gz", "testdata/llamacpp-xcheck-tokenizers.json.gz"}
	if p := os.Getenv("PPL_XCHECK"); p != "" {
		paths = []string{p} // a larger set made the same way (see testdata/xcheck.md)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) { crossCheck(t, dir, path) })
	}
}

func crossCheck(t *testing.T, dir, path string) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	var x xcheck
	if err := json.NewDecoder(r).Decode(&x); err != nil {
		t.Fatal(err)
	}
	for _, o := range x.OracleTexts {
		b, err := os.ReadFile(oracle.Text(dir, o.Text))
		if err != nil {
			t.Fatal(err)
		}
		if o.Bytes < 0 || o.Bytes > len(b) {
			t.Fatalf("%s: oracle text %s has %d bytes, the file wants its first %d", path, o.Text, len(b), o.Bytes)
		}
		b = b[:o.Bytes]
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != o.SHA256 {
			t.Fatalf("%s: the first %d bytes of oracle text %s have SHA-256 %x, the file was made from %s", path, o.Bytes, o.Text, sum, o.SHA256)
		}
		x.Texts = append(x.Texts, string(b))
	}
	configs := map[string]tokenizer.Config{}
	for _, run := range x.Runs {
		name := run.Model
		if run.Pre != "" {
			name += "+" + run.Pre
		}
		t.Run(name, func(t *testing.T) {
			cfg, ok := configs[run.Model]
			if !ok {
				g, err := gguf.Open(oracle.Model(dir, run.Model))
				if err != nil {
					t.Fatal(err)
				}
				cfg, err = tokenizer.ReadConfig(g)
				g.Close()
				if err != nil {
					t.Fatal(err)
				}
				configs[run.Model] = cfg
			}
			if strings.HasPrefix(run.Pre, "@") {
				cfg = syntheticConfig(t, run.Pre[1:], cfg)
			} else if run.Pre != "" {
				cfg.Pre = run.Pre
			}
			tk, err := tokenizer.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			texts := append(x.Texts[:len(x.Texts):len(x.Texts)], run.Texts...)
			if len(run.Tokens) != len(texts) {
				t.Fatalf("%d token lists for %d texts", len(run.Tokens), len(texts))
			}
			bad := 0
			for i, text := range texts {
				got, err := tk.Encode([]byte(text))
				if err != nil {
					t.Fatalf("text %d: %v", i, err)
				}
				if d := firstDiff(got, run.Tokens[i]); d != "" {
					bad++
					if bad <= 5 {
						t.Errorf("text %d %q: %s", i, clipS(text), d)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d texts differ", bad, len(texts))
			}
		})
	}
}

func clipS(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// syntheticConfig turns an oracle model's tokenizer into one of a vocabulary
// type no oracle model has, deterministically, so that llama.cpp's tokens
// for the same file (written by TestWriteSynthetic) check ours:
//
//   - gemma4 (from tiny-gemma3): tokenizer.ggml.model "gemma4" with merges
//     derived from the vocabulary: each normal token of two or more
//     characters that splits into two tokens (the first such cut from the
//     left) is a merge, ranked by the token's length in characters, then
//     by id.
//   - rwkv (from tiny-llama3-q8_0): every token's bytes in RWKV's escaped
//     form, no merges.
//   - plamo2 (from tiny-llama-spm-f16): the SentencePiece vocabulary as is,
//     read as PLaMo-2's.
//   - sarvam (from tiny-gemma3): gemma4's merges under tokenizer.ggml.model
//     "gpt2" with the sarvam-moe pre-tokenizer.
//   - plamo3 (from tiny-llama-spm-f16): the SentencePiece vocabulary read as
//     PLaMo-3's, with "▁" written as a space in normal tokens (PLaMo's
//     vocabularies hold plain spaces) and the last 20 ids replaced by
//     tokens that only an unsegmented text could use (across a
//     <|plamo:…|> fence, a run of repeats or spaces, a U+EE00) and by
//     PLaMo's FIM and EOS texts (plamo3Tokens).
//   - hybriddna (from tiny-llama3-q8_0): tokenizer.ggml.model "hybriddna"
//     with tokens appended: one marked k-mer (AAAAAT) before "<oov>", "<oov>",
//     "<dna>" (control), "</dna>" (user-defined) and the 6-mers of ACGT
//     with the U+E000 marker, every seventh left out (falls back to
//     <oov>), TTTTTT user-defined.
func syntheticConfig(t testing.TB, kind string, c tokenizer.Config) tokenizer.Config {
	t.Helper()
	switch kind {
	case "gemma4":
		c.Model = "gemma4"
		c.Merges = deriveMerges(c.Tokens, c.Types)
	case "rwkv":
		c.Model, c.Pre, c.Merges = "rwkv", "", nil
		toks := make([]string, len(c.Tokens))
		for i, s := range c.Tokens {
			if raw, ok := bpe.DecodeToken(s); ok {
				toks[i] = testmodel.RWKVEscape(raw)
			} else {
				toks[i] = testmodel.RWKVEscape([]byte(s))
			}
		}
		c.Tokens = toks
	case "plamo2":
		c.Model = "plamo2"
	case "sarvam":
		c.Model, c.Pre = "gpt2", "sarvam-moe"
		c.Merges = deriveMerges(c.Tokens, c.Types)
	case "plamo3":
		c.Model = "plamo3"
		c.Tokens = slices.Clone(c.Tokens)
		c.Types = slices.Clone(c.Types)
		c.Scores = slices.Clone(c.Scores)
		for i, s := range c.Tokens {
			if c.Types[i] == tokenizer.TypeNormal {
				c.Tokens[i] = strings.ReplaceAll(s, "▁", " ")
			}
		}
		at := map[string]int{}
		for i, s := range c.Tokens {
			at[s] = i
		}
		for k, p := range plamo3Tokens {
			i := len(c.Tokens) - len(plamo3Tokens) + k
			if j, ok := at[p.text]; ok {
				i = j // already there: give it this type and score
			}
			c.Tokens[i], c.Types[i], c.Scores[i] = p.text, p.typ, p.score
		}
	case "hybriddna":
		c.Model = "hybriddna"
		c.Tokens = slices.Clone(c.Tokens)
		c.Types = slices.Clone(c.Types)
		add := func(s string, ty int32) {
			c.Tokens = append(c.Tokens, s)
			c.Types = append(c.Types, ty)
			if c.Scores != nil {
				c.Scores = append(slices.Clip(c.Scores), 0)
			}
		}
		add("AAAAAT\uE000", tokenizer.TypeNormal) // a k-mer left out below
		add("<oov>", tokenizer.TypeControl)
		add("<dna>", tokenizer.TypeControl)
		add("</dna>", tokenizer.TypeUserDefined)
		for n := range 1 << 12 {
			if n%7 == 3 {
				continue
			}
			var k [6]byte
			for j := range k {
				k[j] = "ACGT"[n>>(2*(5-j))&3]
			}
			ty := tokenizer.TypeNormal
			if string(k[:]) == "TTTTTT" {
				ty = tokenizer.TypeUserDefined
			}
			add(string(k[:])+"\uE000", ty)
		}
	default:
		t.Fatalf("unknown synthetic tokenizer %q", kind)
	}
	return c
}

// plamo3Tokens are the tokens the @plamo3 vocabulary puts in its last ids.
var plamo3Tokens = []struct {
	text  string
	typ   int32
	score float32
}{
	// made control by their texts, so not cut out, and scored below
	// PLaMo's floor (-2000), so the search never picks them: they come out
	// in pieces
	{"<|plamo:fim_prefix|>", tokenizer.TypeUserDefined, -5000},
	{"<|plamo:file_separator|>", tokenizer.TypeUserDefined, -5000},
	{"<|plamo:test|>", tokenizer.TypeUserDefined, 0}, // cut out of the text
	{"<|plamo:eos|>", tokenizer.TypeControl, 0},
	{"<|plamo:", tokenizer.TypeNormal, -1},
	{"|>", tokenizer.TypeNormal, -1},
	{"|><", tokenizer.TypeNormal, -0.5},
	{"x|><|plamo:", tokenizer.TypeNormal, 0},
	{"aaaa", tokenizer.TypeNormal, -0.5},
	{"aaab", tokenizer.TypeNormal, 0},
	{"  ", tokenizer.TypeNormal, -1},
	{"    ", tokenizer.TypeNormal, -1},
	{"a  b", tokenizer.TypeNormal, 0},
	{"  x", tokenizer.TypeNormal, 0},
	{"\uEE00", tokenizer.TypeNormal, -1},
	{"a\uEE00b", tokenizer.TypeNormal, 0},
	{"\uFEFF", tokenizer.TypeNormal, -1},
	{"====", tokenizer.TypeNormal, -1},
	{"\n\n\nx", tokenizer.TypeNormal, 0},
	{"ééé", tokenizer.TypeNormal, 0},
}

func deriveMerges(tokens []string, types []int32) []string {
	ids := make(map[string]int, len(tokens))
	for i, s := range tokens {
		ids[s] = i
	}
	type mg struct {
		l, r  string
		n, id int
	}
	var ms []mg
	for i, s := range tokens {
		if types[i] != tokenizer.TypeNormal || utf8.RuneCountInString(s) < 2 {
			continue
		}
		for j := range s {
			if j == 0 {
				continue
			}
			_, okl := ids[s[:j]]
			_, okr := ids[s[j:]]
			if okl && okr {
				ms = append(ms, mg{s[:j], s[j:], utf8.RuneCountInString(s), i})
				break
			}
		}
	}
	sort.SliceStable(ms, func(a, b int) bool { return ms[a].n < ms[b].n || (ms[a].n == ms[b].n && ms[a].id < ms[b].id) })
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.l + " " + m.r
	}
	return out
}

// TestWriteSynthetic writes the synthetic GGUF files of syntheticConfig
// (the source model with its tokenizer keys replaced) into
// $PPL_XCHECK_WRITE, for llama-tokenize (testdata/xcheck.md).
func TestWriteSynthetic(t *testing.T) {
	out := os.Getenv("PPL_XCHECK_WRITE")
	if out == "" {
		t.Skip("set PPL_XCHECK_WRITE to a directory to write the synthetic models")
	}
	dir := oracle.Require(t)
	for kind, src := range map[string]string{"gemma4": "tiny-gemma3", "rwkv": "tiny-llama3-q8_0", "plamo2": "tiny-llama-spm-f16", "sarvam": "tiny-gemma3",
		"plamo3": "tiny-llama-spm-f16", "hybriddna": "tiny-llama3-q8_0"} {
		f, err := gguf.Open(oracle.Model(dir, src))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := tokenizer.ReadConfig(f)
		if err != nil {
			t.Fatal(err)
		}
		cfg = syntheticConfig(t, kind, cfg)
		w := gguf.NewWriter()
		for _, kv := range f.Metadata {
			if cfg.Merges == nil && kv.Key == tokenizer.KeyMerges || kind == "rwkv" && kv.Key == tokenizer.KeyPre {
				continue
			}
			w.Add(kv.Key, kv.Value)
		}
		w.Add(tokenizer.KeyModel, cfg.Model)
		if cfg.Pre != "" {
			w.Add(tokenizer.KeyPre, cfg.Pre)
		}
		w.Add(tokenizer.KeyTokens, cfg.Tokens)
		if cfg.Scores != nil {
			w.Add(tokenizer.KeyScores, cfg.Scores)
		}
		if cfg.Types != nil {
			w.Add(tokenizer.KeyTypes, cfg.Types)
		}
		if cfg.Merges != nil {
			w.Add(tokenizer.KeyMerges, cfg.Merges)
		}
		for _, tn := range f.Tensors {
			if err := w.AddTensor(tn.Name, tn.Type, tn.Shape, f.Data(tn)); err != nil {
				t.Fatal(err)
			}
		}
		err = w.WriteFile(filepath.Join(out, "synthetic-"+kind+".gguf"))
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}
