package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"ppl.dev/command"
	"ppl.dev/oracle"
	"ppl.dev/pipe"
	"ppl.dev/tokenize/testmodel"
)

// runTool runs ppl-tokenize in-process: exit status, stdout, stderr.
func runTool(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
	return command.Exit(tool, err, &stderr), stdout.String(), stderr.String()
}

// readBack checks the output with pipe.Reader (stage accounting included)
// and returns the header and each stream's tokens.
func readBack(t *testing.T, out string) (*pipe.Header, []*pipe.StreamTokens) {
	t.Helper()
	r := pipe.NewReader(strings.NewReader(out), "out")
	ss := pipe.NewStreams()
	var h *pipe.Header
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Header != nil {
			h = rec.Header
		}
		if _, err := ss.Add(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := ss.CheckComplete(); err != nil {
		t.Fatal(err)
	}
	return h, ss.All()
}

func TestTextFiles(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny.gguf")
	if err := testmodel.WriteTinySPM(model); err != nil {
		t.Fatal(err)
	}
	a := filepath.Join(dir, "a.txt")
	b := filepath.Join(dir, "sub.b.md")
	os.WriteFile(a, []byte("hello, world"), 0o644)
	os.WriteFile(b, []byte("\xffhello"), 0o644)

	code, out, errs := runTool("--model", model, "--text", a, "--cache-dir", filepath.Join(dir, "c"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	h, streams := readBack(t, out)
	if h.Tool != tool || h.Tokenizer.Model != "llama" || h.Tokenizer.NVocab != 278 || !h.Tokenizer.AddBOS || h.Tokenizer.BOS != 1 ||
		len(h.Tokenizer.ID) != 64 || h.Model.Name != "tiny.gguf" || len(h.Model.SHA256) != 64 || h.Model.Arch != "llama" ||
		h.Corpus.Name != "text" || !reflect.DeepEqual(h.Corpus.Streams, []string{"a"}) {
		t.Errorf("header %+v tokenizer %+v model %+v corpus %+v", h, h.Tokenizer, h.Model, h.Corpus)
	}
	st := streams[0]
	// <s> ▁hello , ▁world
	if st.ID != "a" || st.Domain != "text" || st.Bytes != 12 || st.Words != 2 || st.Source != a ||
		!reflect.DeepEqual(st.IDs, []int32{1, 272, 267, 277}) {
		t.Errorf("stream %+v ids %v", st.Stream, st.IDs)
	}

	// Invalid UTF-8: strict stops with the offset, replace counts.
	code, out, errs = runTool("--model", model, "--text", a, b, "--no-cache", "--log-level", "error")
	if code != 1 || out != "" || errs != `ppl-tokenize: stream "sub.b" (`+b+`): invalid UTF-8 at byte offset 0 (0xFF); fix the text or use --utf8 replace`+"\n" {
		t.Errorf("strict: exit %d, stderr %q", code, errs)
	}
	code, out, errs = runTool("--model", model, "--text", a, b, "--no-cache", "--utf8", "replace", "--log-level", "warn")
	if code != 0 {
		t.Fatalf("replace: exit %d: %s", code, errs)
	}
	if want := `ppl-tokenize: stream "sub.b" (` + b + "): replaced 1 invalid UTF-8 bytes with U+FFFD\n"; errs != want {
		t.Errorf("replace: stderr %q, want %q", errs, want)
	}
	_, streams = readBack(t, out)
	if st := streams[1]; st.ID != "sub.b" || st.Replaced != 1 || st.Bytes != 6 || st.SHA256 != fmt.Sprintf("%x", sha(b)) {
		t.Errorf("replaced stream %+v", st.Stream)
	}
}

func sha(path string) [32]byte {
	b, _ := os.ReadFile(path)
	return sha256Sum(b)
}

// TestChunks: a stream of more than 65,536 tokens is split into records of
// at most that many ids, in order.
func TestChunks(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny.gguf")
	if err := testmodel.WriteTinySPM(model); err != nil {
		t.Fatal(err)
	}
	txt := filepath.Join(dir, "long.txt")
	os.WriteFile(txt, bytes.Repeat([]byte("hello "), 70000), 0o644) // 70,000 "▁hello" + BOS (+ "▁")
	code, out, errs := runTool("--model", model, "--text", txt, "--no-cache")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var sizes []int
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, `{"type":"tokens"`) {
			sizes = append(sizes, strings.Count(line, ",")-2) // ids: commas between them + 1, minus the record's 3
		}
	}
	_, streams := readBack(t, out)
	n := streams[0].NTokens
	if n != 70002 || !reflect.DeepEqual(sizes, []int{65536, n - 65536}) {
		t.Errorf("n_tokens %d, chunk comma counts %v", n, sizes)
	}
}

// TestGoldenOracle tokenizes the oracle texts as a corpus and compares the
// ids with llama.cpp's.
func TestGoldenOracle(t *testing.T) {
	dir := oracle.Require(t)
	texts := oracle.Texts(dir)
	var args []string
	for _, x := range texts {
		args = append(args, oracle.Text(dir, x))
	}
	for _, m := range []string{"tiny-llama-spm-q8_0", "tiny-qwen3-q8_0"} {
		code, out, errs := runTool(append([]string{"--model", oracle.Model(dir, m), "--no-cache", "--text"}, args...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", m, code, errs)
		}
		_, streams := readBack(t, out)
		for i, st := range streams {
			g, err := oracle.Read(oracle.Golden(dir, m, texts[i], "sliding"))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(st.IDs, g.Header.Tokens) {
				t.Errorf("%s %s: ids differ from llama.cpp's", m, st.ID)
			}
		}
	}
}

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }
