package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ppl.dev/gguf"
)

// writeNoBytes writes a SentencePiece model without byte-fallback tokens.
func writeNoBytes(t *testing.T, path string) {
	t.Helper()
	tokens := []string{"<unk>", "<s>", "</s>", "▁", "h", "i", "▁hi"}
	types := []int32{2, 3, 3, 1, 1, 1, 1}
	scores := make([]float32, len(tokens))
	w := gguf.NewWriter()
	w.Add("general.architecture", "llama")
	w.Add("tokenizer.ggml.model", "llama")
	w.Add("tokenizer.ggml.tokens", tokens)
	w.Add("tokenizer.ggml.scores", scores)
	w.Add("tokenizer.ggml.token_type", types)
	w.Add("tokenizer.ggml.bos_token_id", uint32(1))
	w.Add("tokenizer.ggml.eos_token_id", uint32(2))
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
}

// Text a vocabulary without byte tokens cannot encode is not blamed on
// its UTF-8: no --utf8 replace advice, and the model named once a line.
func TestNoByteTokensHint(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "nobytes.gguf")
	writeNoBytes(t, model)
	text := filepath.Join(dir, "x.txt")
	os.WriteFile(text, []byte("hi q"), 0o644)
	code, _, stderr := runTool("--model", model, "--no-cache", "--text", text)
	if code != 1 || strings.Contains(stderr, "--utf8 replace") || !strings.Contains(stderr, "no byte-fallback tokens, so it cannot tokenize this text") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	for _, line := range strings.Split(stderr, "\n") {
		if n := strings.Count(line, "nobytes.gguf"); n > 1 {
			t.Errorf("model named %d times in one line: %s", n, line)
		}
	}
}

// A replayed entry holds ids of the vocabulary, and no nulls.
func TestReplayIDs(t *testing.T) {
	if ids, err := replayIDs([]byte("[1,2,277]\n"), 278); err != nil || len(ids) != 3 {
		t.Fatalf("%v %v", ids, err)
	}
	for _, c := range []struct{ payload, want string }{
		{"[1,278]", "ids[1] = 278 is not a token of the 278-token vocabulary"},
		{"[-1]", "ids[0] = -1 is not a token of the 278-token vocabulary"},
		{"[1,null]", "null id"},
		{"{", "unreadable"},
	} {
		if _, err := replayIDs([]byte(c.payload), 278); err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.payload, err, c.want)
		}
	}
}
