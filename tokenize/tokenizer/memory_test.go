package tokenizer_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/tokenize/tokenizer"
)

// shortlex returns the first n strings over a-z in shortlex order ("a" ...
// "z", "aa" ...): distinct, a few bytes each, like most of a real
// vocabulary.
func shortlex(n int) []string {
	out := make([]string, 0, n)
	cur := []byte{'a' - 1}
	for len(out) < n {
		i := len(cur) - 1
		for i >= 0 && cur[i] == 'z' {
			cur[i] = 'a'
			i--
		}
		if i < 0 {
			cur = append([]byte{'a'}, cur...)
		} else {
			cur[i]++
		}
		out = append(out, string(cur))
	}
	return out
}

// writeBigVocab writes a GGUF file with only a tokenizer of n tokens:
// SentencePiece ("llama": specials, byte tokens, then "▁"+shortlex pieces,
// with scores and types) or byte-level BPE ("gpt2", qwen2: shortlex
// tokens, each of two or more letters the merge of its prefix and its last
// letter).
func writeBigVocab(t testing.TB, model string, n int) string {
	t.Helper()
	w := gguf.NewWriter()
	w.Add("general.architecture", "llama")
	w.Add(tokenizer.KeyModel, model)
	var toks []string
	var types []int32
	switch model {
	case "llama":
		toks = []string{"<unk>", "<s>", "</s>"}
		types = []int32{tokenizer.TypeUnknown, tokenizer.TypeControl, tokenizer.TypeControl}
		for b := 0; b < 256; b++ {
			toks = append(toks, fmt.Sprintf("<0x%02X>", b))
			types = append(types, tokenizer.TypeByte)
		}
		for _, s := range shortlex(n - len(toks)) {
			toks = append(toks, "\u2581"+s)
			types = append(types, tokenizer.TypeNormal)
		}
		scores := make([]float32, len(toks))
		for i := range scores {
			scores[i] = -float32(i)
		}
		w.Add(tokenizer.KeyScores, scores)
	case "gpt2":
		toks = shortlex(n)
		types = make([]int32, n)
		var merges []string
		for i, s := range toks {
			types[i] = tokenizer.TypeNormal
			if len(s) > 1 {
				merges = append(merges, s[:len(s)-1]+" "+s[len(s)-1:])
			}
		}
		w.Add(tokenizer.KeyPre, "qwen2")
		w.Add(tokenizer.KeyMerges, merges)
	}
	w.Add(tokenizer.KeyTokens, toks)
	w.Add(tokenizer.KeyTypes, types)
	path := filepath.Join(t.TempDir(), model+".gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// loadMemory opens path and loads its tokenizer, and returns the bytes the
// process allocated meanwhile and those still live once the file is
// closed, both per vocabulary token.
func loadMemory(t testing.TB, path string) (alloc, live float64, tk tokenizer.Tokenizer) {
	t.Helper()
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	tk, err = tokenizer.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	n := float64(tk.NVocab())
	return float64(m1.TotalAlloc-m0.TotalAlloc) / n, (float64(m1.HeapAlloc) - float64(m0.HeapAlloc)) / n, tk
}

// TestVocabMemory holds loading a tokenizer to a few bytes per vocabulary
// token beyond the text (issue #20: a 3-million-token vocabulary cost 8 to
// 18 times its file size): a copy of the text with 4-byte offsets in the
// file's metadata, which the tokenizer keeps, 6 bytes of index, a 2-byte
// attribute, a 4-byte score (SentencePiece, the file's array kept as it
// is) and, for BPE, about 23 bytes of pair table per merge; loading adds
// the file's 4-byte token types, dropped once read. The vocabularies have 400,000 tokens of 4.8
// letters on average (7.8 bytes for SentencePiece, with "▁"); the bounds
// are what the code achieves plus a few bytes, in bytes per token and
// against the file's size. (Before, with a []string and two
// map[string]int32: 156 allocated and 107 live for SentencePiece, 178 and
// 89 for BPE.)
func TestVocabMemory(t *testing.T) {
	const n = 400_000
	for _, tc := range []struct {
		model string
		// per token: allocated while loading, live after; both also as a
		// multiple of the file's bytes per token
		alloc, live, allocX, liveX float64
	}{
		{"llama", 30, 25, 1.3, 1.1}, // achieved: 27.7 and 23.0 (1.21x, 1.00x)
		{"gpt2", 57, 43, 2.0, 1.5},  // achieved: 53.4 and 39.7 (1.85x, 1.37x)
	} {
		t.Run(tc.model, func(t *testing.T) {
			path := writeBigVocab(t, tc.model, n)
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			alloc, live, tk := loadMemory(t, path)
			if tk.NVocab() != n {
				t.Fatalf("%d tokens, want %d", tk.NVocab(), n)
			}
			file := float64(st.Size()) / n
			t.Logf("%s, %d tokens: file %.1f B/token; loading allocated %.1f B/token (%.2fx), %.1f B/token live after (%.2fx)",
				tc.model, n, file, alloc, alloc/file, live, live/file)
			if alloc > tc.alloc || alloc > tc.allocX*file {
				t.Errorf("loading allocated %.1f bytes per token (%.2f times the file), want at most %.0f (%.1f times)", alloc, alloc/file, tc.alloc, tc.allocX)
			}
			if live > tc.live || live > tc.liveX*file {
				t.Errorf("the tokenizer holds %.1f bytes per token (%.2f times the file), want at most %.0f (%.1f times)", live, live/file, tc.live, tc.liveX)
			}
			runtime.KeepAlive(tk)
		})
	}
}
