// Package oracle finds and reads the shared ground truth in ../shared/oracle:
// the small GGUF models, the test texts, and the golden outputs of llama.cpp
// and of a float64 reference forward pass (see that directory's README).
//
// Tests across the workspace use it to compare our outputs with the oracle;
// when the directory is absent they skip with a message that says where it
// was looked for, so the project still builds and tests elsewhere, unless
// $PPL_REQUIRE_ORACLE is 1 (CI sets it): then they fail, so that a CI run
// without the oracle cannot pass without checking a number.
package oracle

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// EnvDir overrides the location of the oracle directory.
const EnvDir = "PPL_ORACLE_DIR"

// EnvRequire set to 1 makes a missing oracle fail the tests that need it
// instead of skipping them, as PPL_REQUIRE_GPU does for the GPU tests.
const EnvRequire = "PPL_REQUIRE_ORACLE"

// Dir returns the oracle directory: $PPL_ORACLE_DIR, else ../shared/oracle
// relative to the workspace root (the directory holding go.work) found by
// walking up from the working directory.
func Dir() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		if _, err := os.Stat(filepath.Join(d, "README.md")); err != nil {
			return "", fmt.Errorf("oracle not found at %s=%s", EnvDir, d)
		}
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			o := filepath.Join(filepath.Dir(d), "shared", "oracle")
			if _, err := os.Stat(filepath.Join(o, "README.md")); err != nil {
				return "", fmt.Errorf("oracle not found at %s (set %s)", o, EnvDir)
			}
			return o, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.work above %s; set %s", wd, EnvDir)
		}
	}
}

// Require returns the oracle directory or skips the test with the reason;
// with $PPL_REQUIRE_ORACLE=1 it fails the test instead.
func Require(t testing.TB) string {
	t.Helper()
	d, ok := Optional(t)
	if !ok {
		t.Skipf("skipping: shared oracle unavailable: %v", dirErr())
	}
	return d
}

// Optional returns the oracle directory and true, or false when it is
// absent, for tests that check more with the oracle than without; with
// $PPL_REQUIRE_ORACLE=1 an absent oracle fails the test.
func Optional(t testing.TB) (string, bool) {
	t.Helper()
	d, err := Dir()
	if err != nil && os.Getenv(EnvRequire) == "1" {
		t.Fatalf("shared oracle unavailable, and %s=1: %v", EnvRequire, err)
	}
	return d, err == nil
}

func dirErr() error {
	_, err := Dir()
	return err
}

// Models lists the model stems in models/ (file names without .gguf).
func Models(dir string) []string { return stems(filepath.Join(dir, "models"), ".gguf") }

// Texts lists the text stems in texts/ (file names without .txt).
func Texts(dir string) []string { return stems(filepath.Join(dir, "texts"), ".txt") }

func stems(dir, ext string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "*"+ext))
	var out []string
	for _, p := range m {
		out = append(out, strings.TrimSuffix(filepath.Base(p), ext))
	}
	sort.Strings(out)
	return out
}

// Header is the first line of a golden or exact file.
type Header struct {
	Model     string  `json:"model"`
	Text      string  `json:"text"`
	TextBytes int     `json:"text_bytes"`
	NTokens   int     `json:"n_tokens"`
	Tokens    []int32 `json:"tokens"`
	Protocol  struct {
		Context int    `json:"context"`
		Stride  int    `json:"stride"`
		Mode    string `json:"mode"`
	} `json:"protocol"`
	ScoredTokens  int     `json:"scored_tokens"`
	SumLogprob    float64 `json:"sum_logprob"`
	MeanNLL       float64 `json:"mean_nll"`
	PPL           float64 `json:"ppl"`
	MeanKLD       float64 `json:"mean_kld"`
	P99KLD        float64 `json:"p99_kld"`
	Top1Agreement float64 `json:"top1_agreement"`
}

// Window is one scored window of a golden or exact file.
type Window struct {
	Window    int       `json:"window"`
	Begin     int       `json:"begin"`
	End       int       `json:"end"`
	ScoreFrom int       `json:"score_from"`
	Logprobs  []float64 `json:"logprobs"`
	Argmax    []int32   `json:"argmax"`
	KLD       []float64 `json:"kld"`
	Top1Agree Bools     `json:"top1_agree"`
}

// Bools reads a JSON array of booleans written either as true/false or as
// 1/0 (the golden KLD files use numbers).
type Bools []bool

// UnmarshalJSON implements json.Unmarshaler.
func (b *Bools) UnmarshalJSON(data []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	out := make([]bool, len(raw))
	for i, r := range raw {
		switch string(r) {
		case "true", "1":
			out[i] = true
		case "false", "0":
		default:
			return fmt.Errorf("top1_agree[%d]: %s is not a boolean", i, r)
		}
	}
	*b = out
	return nil
}

// File is a whole golden or exact file.
type File struct {
	Header  Header
	Windows []Window
}

// Read parses a golden or exact NDJSON file.
func Read(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var out File
	line := 0
	for sc.Scan() {
		line++
		if line == 1 {
			if err := json.Unmarshal(sc.Bytes(), &out.Header); err != nil {
				return nil, fmt.Errorf("%s:1: %w", path, err)
			}
			continue
		}
		var w Window
		if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out.Windows = append(out.Windows, w)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if line == 0 {
		return nil, errors.New(path + ": empty")
	}
	return &out, nil
}

// Golden returns the path of golden/<model>__<text>__<protocol>.ndjson.
func Golden(dir, model, text, protocol string) string {
	return filepath.Join(dir, "golden", model+"__"+text+"__"+protocol+".ndjson")
}

// Exact returns the path of exact/<model>__<text>__<protocol>.exact.ndjson.
func Exact(dir, model, text, protocol string) string {
	return filepath.Join(dir, "exact", model+"__"+text+"__"+protocol+".exact.ndjson")
}

// Model returns the path of models/<stem>.gguf.
func Model(dir, stem string) string { return filepath.Join(dir, "models", stem+".gguf") }

// Text returns the path of texts/<stem>.txt.
func Text(dir, stem string) string { return filepath.Join(dir, "texts", stem+".txt") }

// PerplexityRun is one line of golden/llama-perplexity.ndjson.
type PerplexityRun struct {
	Model  string  `json:"model"`
	Text   string  `json:"text"`
	Args   string  `json:"args"`
	Chunks int     `json:"chunks"`
	PPL    float64 `json:"ppl"`
}

// PerplexityRuns reads golden/llama-perplexity.ndjson.
func PerplexityRuns(dir string) ([]PerplexityRun, error) {
	b, err := os.ReadFile(filepath.Join(dir, "golden", "llama-perplexity.ndjson"))
	if err != nil {
		return nil, err
	}
	var out []PerplexityRun
	for i, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r PerplexityRun
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			return nil, fmt.Errorf("llama-perplexity.ndjson:%d: %w", i+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}
