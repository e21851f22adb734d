package tokenizer_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/oracle"
	"ppl.dev/tokenize/tokenizer"
)

var (
	loadMu sync.Mutex
	loaded = map[string]tokenizer.Tokenizer{}
)

// load opens an oracle model once per test binary.
func load(t testing.TB, dir, stem string) tokenizer.Tokenizer {
	t.Helper()
	loadMu.Lock()
	defer loadMu.Unlock()
	if tk, ok := loaded[stem]; ok {
		return tk
	}
	f, err := gguf.Open(oracle.Model(dir, stem))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tk, err := tokenizer.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	loaded[stem] = tk
	return tk
}

// firstDiff describes where two token lists part.
func firstDiff(got, want []int32) string {
	n := min(len(got), len(want))
	for i := 0; i < n; i++ {
		if got[i] != want[i] {
			lo, hi := max(0, i-3), min(n, i+4)
			return fmt.Sprintf("first difference at %d: got %v, want %v (of %d vs %d)", i, got[lo:min(hi, len(got))], want[lo:min(hi, len(want))], len(got), len(want))
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("got %d tokens, want %d (prefix equal)", len(got), len(want))
	}
	return ""
}

// TestGolden checks every oracle model on every oracle text against
// llama.cpp's tokens in the golden header (golden/ or golden-archs/): the
// SentencePiece, Gemma 3, o200k, qwen2/qwen35 and llama-bpe vocabularies.
func TestGolden(t *testing.T) {
	dir := oracle.Require(t)
	models, texts := oracle.Models(dir), oracle.Texts(dir)
	if len(models) == 0 || len(texts) == 0 {
		t.Fatalf("oracle at %s has %d models, %d texts", dir, len(models), len(texts))
	}
	for _, m := range models {
		for _, x := range texts {
			t.Run(m+"/"+x, func(t *testing.T) {
				g, err := oracle.Read(goldenPath(dir, m, x))
				if err != nil {
					t.Fatal(err)
				}
				text, err := os.ReadFile(oracle.Text(dir, x))
				if err != nil {
					t.Fatal(err)
				}
				got, err := load(t, dir, m).Encode(text)
				if err != nil {
					t.Fatal(err)
				}
				if d := firstDiff(got, g.Header.Tokens); d != "" {
					t.Error(d)
				}
			})
		}
	}
}

// goldenPath is the sliding golden of model on text: golden/ for the
// original models, golden-archs/ for the models of the newer architectures.
// The low-bit tiny-llama-spm files have no goldens of their own; the oracle
// README gives them the F16 model's tokens.
func goldenPath(dir, model, text string) string {
	p := oracle.Golden(dir, model, text, "sliding")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	a := filepath.Join(dir, "golden-archs", model+"__"+text+"__sliding.ndjson")
	if _, err := os.Stat(a); err != nil && strings.HasPrefix(model, "tiny-llama-spm-") {
		return oracle.Golden(dir, "tiny-llama-spm-f16", text, "sliding")
	}
	return a
}

// TestGoldenLong checks the concatenated texts against the long-window
// golden headers.
func TestGoldenLong(t *testing.T) {
	dir := oracle.Require(t)
	text, err := os.ReadFile(filepath.Join(dir, "golden-long", "all-texts.txt"))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "golden-long", "*__all-texts__*.ndjson"))
	if len(files) == 0 {
		t.Fatal("no golden-long files")
	}
	for _, p := range files {
		stem := filepath.Base(p)
		stem = stem[:len(stem)-len(filepath.Ext(stem))]
		model := stem[:indexOf(stem, "__")]
		t.Run(model, func(t *testing.T) {
			g, err := oracle.Read(p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := load(t, dir, model).Encode(text)
			if err != nil {
				t.Fatal(err)
			}
			if d := firstDiff(got, g.Header.Tokens); d != "" {
				t.Error(d)
			}
		})
	}
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return len(s)
}

// TestOracleTokenizers pins what Load reads from each kind of oracle model
// (the vocabulary type, the pre-tokenizer it resolves to, the size and the
// special-token rule), so that a golden mismatch is not the first sign of a
// misread file. TestGolden checks their tokens.
func TestOracleTokenizers(t *testing.T) {
	dir := oracle.Require(t)
	for _, c := range []struct {
		stem, model, pre string
		n                int
		bos, eos         int32
		addBOS           bool
	}{
		{"tiny-llama-spm-f16", "llama", "default", 32000, 1, 2, true},
		{"tiny-llama3-q8_0", "gpt2", "llama3", 128256, 128000, 128001, true},
		{"tiny-qwen3-q8_0", "gpt2", "qwen2", 151669, 151643, 151645, false},
		{"tiny-qwen35", "gpt2", "qwen35", 151669, 151643, 151645, false},
		{"tiny-gemma3", "llama", "default", 262144, 2, 106, true},
		{"tiny-gpt-oss", "gpt2", "gpt-4o", 201088, 199998, 200002, false},
		{"tiny-qwen3moe", "llama", "default", 32000, 1, 2, true},
		{"tiny-qwen35moe", "llama", "default", 32000, 1, 2, true},
		{"tiny-deepseek2", "llama", "default", 32000, 1, 2, true},
		{"tiny-glm4moe", "llama", "default", 32000, 1, 2, true},
		{"tiny-mistral3", "llama", "default", 32000, 1, 2, true},
		{"tiny-qwen3next", "llama", "default", 32000, 1, 2, true},
		{"tiny-gemma4", "llama", "default", 32000, 1, 2, true},
	} {
		t.Run(c.stem, func(t *testing.T) {
			if _, err := os.Stat(oracle.Model(dir, c.stem)); err != nil {
				t.Skipf("not in this oracle: %v", err)
			}
			tk := load(t, dir, c.stem)
			if tk.Model() != c.model || tk.Pre() != c.pre || tk.NVocab() != c.n || tk.BOS() != c.bos || tk.EOS() != c.eos ||
				tk.AddBOS() != c.addBOS || tk.AddEOS() {
				t.Errorf("model %s pre %s n %d bos %d eos %d add_bos %v add_eos %v; want %s %s %d %d %d %v false",
					tk.Model(), tk.Pre(), tk.NVocab(), tk.BOS(), tk.EOS(), tk.AddBOS(), tk.AddEOS(),
					c.model, c.pre, c.n, c.bos, c.eos, c.addBOS)
			}
		})
	}
}

// TestGemma3Specials checks Gemma 3's conventions on the oracle model:
// USER_DEFINED tokens (HTML tags, runs of spaces, tabs and newlines) are
// cut out of the raw text first, CONTROL tokens written in the text are
// plain text, and "</s>" (an HTML tag there) is treated as control, as
// llama.cpp does.
func TestGemma3Specials(t *testing.T) {
	dir := oracle.Require(t)
	if _, err := os.Stat(oracle.Model(dir, "tiny-gemma3")); err != nil {
		t.Skipf("not in this oracle: %v", err)
	}
	tk := load(t, dir, "tiny-gemma3")
	id := map[string]int32{}
	for i := 0; i < tk.NVocab(); i++ {
		id[tk.Token(int32(i))] = int32(i)
	}
	for _, s := range []string{"<table>", "</s>", "<start_of_turn>", "   ", "\t\t"} {
		if _, ok := id[s]; !ok {
			t.Fatalf("no token %q", s)
		}
	}
	has := func(ids []int32, x int32) bool {
		for _, v := range ids {
			if v == x {
				return true
			}
		}
		return false
	}
	got, err := tk.Encode([]byte("a<table>b   c\t\td</s>e<start_of_turn>f"))
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != tk.BOS() {
		t.Errorf("no BOS first: %v", got)
	}
	for _, s := range []string{"<table>", "   ", "\t\t"} {
		if !has(got, id[s]) {
			t.Errorf("user-defined %q not cut out: %v", s, got)
		}
	}
	for _, s := range []string{"</s>", "<start_of_turn>"} {
		if has(got, id[s]) {
			t.Errorf("control %q matched in text: %v", s, got)
		}
	}
	if d := tk.Decode(got); string(d) != "a<table>b   c\t\td</s>e<start_of_turn>f" {
		t.Errorf("decode %q", d)
	}
}
