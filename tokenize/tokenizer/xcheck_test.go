package tokenizer_test

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/oracle"
	"ppl.dev/tokenize/tokenizer"
)

// xcheck is testdata/llamacpp-xcheck.json.gz: texts of our own making
// (edge cases, random mixes of scripts, whitespace, digits, contractions,
// special-token look-alikes, and the first 3 KB of each oracle text) with
// llama.cpp's tokens for them, for the oracle models and for the Llama-3
// vocabulary under other pre-tokenizers (testdata/xcheck.md says how).
type xcheck struct {
	Source string   `json:"source"`
	Texts  []string `json:"texts"`
	Runs   []struct {
		Model  string    `json:"model"`
		Pre    string    `json:"pre"`
		Tokens [][]int32 `json:"tokens"`
	} `json:"runs"`
}

func TestLlamaCppCrossCheck(t *testing.T) {
	dir := oracle.Require(t)
	path := "testdata/llamacpp-xcheck.json.gz"
	if p := os.Getenv("PPL_XCHECK"); p != "" {
		path = p // a larger set made the same way (see testdata/xcheck.md)
	}
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
			if run.Pre != "" {
				cfg.Pre = run.Pre
			}
			tk, err := tokenizer.New(cfg)
			if err != nil {
				t.Fatal(err)
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
