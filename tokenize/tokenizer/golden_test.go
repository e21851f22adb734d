package tokenizer_test

import (
	"fmt"
	"os"
	"path/filepath"
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
// llama.cpp's tokens in the golden header.
func TestGolden(t *testing.T) {
	dir := oracle.Require(t)
	models, texts := oracle.Models(dir), oracle.Texts(dir)
	if len(models) == 0 || len(texts) == 0 {
		t.Fatalf("oracle at %s has %d models, %d texts", dir, len(models), len(texts))
	}
	for _, m := range models {
		for _, x := range texts {
			t.Run(m+"/"+x, func(t *testing.T) {
				g, err := oracle.Read(oracle.Golden(dir, m, x, "sliding"))
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
