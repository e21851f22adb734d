package tokenizer_test

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"ppl.dev/gguf"
	"ppl.dev/oracle"
	"ppl.dev/tokenize/bpe"
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
		Model  string    `json:"model"`
		Pre    string    `json:"pre"`
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
			if len(run.Tokens) != len(x.Texts) {
				t.Fatalf("%d token lists for %d texts", len(run.Tokens), len(x.Texts))
			}
			bad := 0
			for i, text := range x.Texts {
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
				t.Errorf("%d of %d texts differ", bad, len(x.Texts))
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
				toks[i] = rwkvEscape(raw)
			} else {
				toks[i] = rwkvEscape([]byte(s))
			}
		}
		c.Tokens = toks
	case "plamo2":
		c.Model = "plamo2"
	case "sarvam":
		c.Model, c.Pre = "gpt2", "sarvam-moe"
		c.Merges = deriveMerges(c.Tokens, c.Types)
	default:
		t.Fatalf("unknown synthetic tokenizer %q", kind)
	}
	return c
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

// rwkvEscape writes bytes as an RWKV World token: \t \n \r and \\
// escaped, other control bytes and the bytes of invalid UTF-8 as \xNN.
func rwkvEscape(b []byte) string {
	var sb strings.Builder
	valid := utf8.Valid(b)
	for _, c := range b {
		switch {
		case c == '\t':
			sb.WriteString(`\t`)
		case c == '\n':
			sb.WriteString(`\n`)
		case c == '\r':
			sb.WriteString(`\r`)
		case c == '\\':
			sb.WriteString(`\\`)
		case c < 0x20 || c == 0x7f || (c >= 0x80 && !valid):
			fmt.Fprintf(&sb, `\x%02x`, c)
		default:
			sb.WriteByte(c)
		}
	}
	return sb.String()
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
	for kind, src := range map[string]string{"gemma4": "tiny-gemma3", "rwkv": "tiny-llama3-q8_0", "plamo2": "tiny-llama-spm-f16", "sarvam": "tiny-gemma3"} {
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
