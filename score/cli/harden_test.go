package cli

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ppl.dev/cache"
	"ppl.dev/command"
	"ppl.dev/gguf"
	"ppl.dev/oracle"
)

// Non-finite or negative RoPE settings are usage errors, not a run whose
// every log-prob is -ln(vocab).
func TestRopeFlagsFinite(t *testing.T) {
	for _, args := range [][]string{
		{"--rope-freq-base", "NaN"},
		{"--rope-freq-base", "+Inf"},
		{"--rope-freq-base=-10000"},
		{"--rope-scaling-factor", "NaN"},
		{"--rope-yarn-factor", "Inf"},
	} {
		var out, errb bytes.Buffer
		err := runArgs(t, append([]string{"--model", "absent.gguf"}, args...), nil, &out, &errb)
		var u command.UsageError
		name, _, _ := strings.Cut(args[0], "=")
		if !errors.As(err, &u) || !strings.Contains(err.Error(), name+" ") || !strings.Contains(err.Error(), "want a finite positive number") {
			t.Errorf("%q: %v", args, err)
		}
	}
}

// failWriter fails every write, as a pipe whose reader has gone.
type failWriter struct{ writes int }

func (w *failWriter) Write(p []byte) (int, error) {
	w.writes++
	return 0, errors.New("broken pipe")
}

// entries returns the window cache's entry files.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	var ps []string
	filepath.WalkDir(filepath.Join(dir, "score"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".ndjson.zst") {
			ps = append(ps, p)
		}
		return nil
	})
	return ps
}

// When downstream is gone, scoring stops at the first failed write rather
// than going on until the output buffer fills.
func TestStopsAtFirstFailedWrite(t *testing.T) {
	dir := oracle.Require(t)
	g, err := oracle.Read(oracle.Golden(dir, "tiny-llama-spm-f16", "mixed-unicode", "sliding"))
	if err != nil {
		t.Fatal(err)
	}
	model := oracle.Model(dir, "tiny-llama-spm-f16")
	cacheDir := t.TempDir()
	var errb bytes.Buffer
	w := &failWriter{}
	err = run(t.Context(), []string{"--model", model, "--kv-dtype", "f16", "--device", "cpu", "--cache-dir", cacheDir},
		bytes.NewReader(pipeline(t, model, g, false)), w, &errb)
	if err == nil || !strings.Contains(err.Error(), "broken pipe") {
		t.Fatalf("err %v", err)
	}
	if n := len(entries(t, cacheDir)); n > 1 {
		t.Errorf("%d of %d windows scored after the first failed write", n, len(g.Windows))
	}
}

// A forged cache entry (right key, positive log-probs) is reported,
// removed and scored again, not replayed.
func TestForgedCacheEntryRescored(t *testing.T) {
	dir := oracle.Require(t)
	g, err := oracle.Read(oracle.Golden(dir, "tiny-llama-spm-f16", "mixed-unicode", "sliding"))
	if err != nil {
		t.Fatal(err)
	}
	model := oracle.Model(dir, "tiny-llama-spm-f16")
	in := pipeline(t, model, g, false)
	cacheDir := t.TempDir()
	args := []string{"--model", model, "--kv-dtype", "f16", "--device", "cpu", "--cache-dir", cacheDir}
	var first, errb bytes.Buffer
	if err := runArgs(t, args, in, &first, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	c, err := cache.Open(cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	ps := entries(t, cacheDir)
	if len(ps) != len(g.Windows) {
		t.Fatalf("%d entries for %d windows", len(ps), len(g.Windows))
	}
	for i, p := range ps {
		rel, _ := filepath.Rel(cacheDir, filepath.Dir(filepath.Dir(p)))
		key := strings.TrimSuffix(filepath.Base(p), ".ndjson.zst")
		payload, ok, err := c.Get(filepath.ToSlash(rel), key)
		if !ok || err != nil {
			t.Fatal(ok, err)
		}
		var forged []byte
		switch i % 2 {
		case 0: // a positive log-prob
			forged = bytes.Replace(payload, []byte(`"logprobs":[-`), []byte(`"logprobs":[`), 1)
		default: // an argmax short of the targets
			forged = bytes.Replace(payload, []byte(`"argmax":[`), []byte(`"argmax":[1,`), 1)
		}
		if err := c.Put(filepath.ToSlash(rel), key, forged); err != nil {
			t.Fatal(err)
		}
	}
	var second bytes.Buffer
	errb.Reset()
	if err := runArgs(t, args, in, &second, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	if n := strings.Count(errb.String(), "bad cache entry"); n != len(ps) {
		t.Errorf("%d bad entries reported, want %d:\n%s", n, len(ps), errb.String())
	}
	if !strings.Contains(errb.String(), "(4 scored, 0 from the cache)") || !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Errorf("forged entries replayed:\n%s", errb.String())
	}
	if _, err := os.Stat(ps[0]); err != nil {
		t.Errorf("rescored entry not written back: %v", err)
	}
}

// A tokenizer error names the model file once.
func TestTokenizerErrorNamesModelOnce(t *testing.T) {
	model := filepath.Join(t.TempDir(), "notok.gguf")
	w := gguf.NewWriter()
	w.Add("general.architecture", "llama")
	w.Add("tokenizer.ggml.model", "llama")
	w.Add("tokenizer.ggml.tokens", []string{"a", "b"})
	w.Add("tokenizer.ggml.token_type", []int32{1}) // one type for two tokens
	if err := w.WriteFile(model); err != nil {
		t.Fatal(err)
	}
	in := `{"type":"header","v":1,"stage":"tokenize","tool":"t","version":"0","tokenizer":{"model":"llama","id":"x","n_vocab":2,"add_bos":false,"add_eos":false,"bos":0}}
{"type":"header","v":1,"stage":"window","tool":"t","version":"0","protocol":{"mode":"sliding","context":4,"stride":2}}
{"type":"stream","id":"s","domain":"d","sha256":"` + strings.Repeat("0", 64) + `","bytes":1,"n_tokens":2}
`
	var out, errb bytes.Buffer
	err := runArgs(t, []string{"--model", model, "--no-cache", "--device", "cpu"}, []byte(in), &out, &errb)
	if err == nil || strings.Count(err.Error(), model) != 1 {
		t.Errorf("err %v", err)
	}
}

// A directory at an entry's path is reported and the window scored again,
// not the end of the run; a cache that cannot be written suggests
// --no-cache.
func TestCacheEntryDirectoryAndReadOnly(t *testing.T) {
	dir := oracle.Require(t)
	g, err := oracle.Read(oracle.Golden(dir, "tiny-llama-spm-f16", "mixed-unicode", "sliding"))
	if err != nil {
		t.Fatal(err)
	}
	model := oracle.Model(dir, "tiny-llama-spm-f16")
	in := pipeline(t, model, g, false)
	cacheDir := t.TempDir()
	args := []string{"--model", model, "--kv-dtype", "f16", "--device", "cpu", "--cache-dir", cacheDir}
	var first, errb bytes.Buffer
	if err := runArgs(t, args, in, &first, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	p := entries(t, cacheDir)[0]
	os.Remove(p)
	if err := os.MkdirAll(filepath.Join(p, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	var second bytes.Buffer
	errb.Reset()
	if err := runArgs(t, args, in, &second, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	if !strings.Contains(errb.String(), "not a regular file (a directory)") || !strings.Contains(errb.String(), "(1 scored, 3 from the cache)") ||
		!bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Errorf("directory at an entry:\n%s", errb.String())
	}
	notDir := filepath.Join(t.TempDir(), "file") // a file where the cache should be: fails even for root
	os.WriteFile(notDir, nil, 0o644)
	errb.Reset()
	err = runArgs(t, []string{"--model", model, "--kv-dtype", "f16", "--device", "cpu", "--cache-dir", notDir + "/c"}, in, &second, &errb)
	if err == nil || !strings.Contains(err.Error(), "--no-cache") {
		t.Errorf("unwritable cache: %v", err)
	}
}
