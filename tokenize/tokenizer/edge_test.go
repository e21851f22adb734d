package tokenizer_test

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"ppl.dev/gguf"
	"ppl.dev/oracle"
	"ppl.dev/tokenize/tokenizer"
)

// everyPlane has a few assigned and unassigned code points of each of the
// 17 planes, private use, noncharacters and the edges of the surrogates.
func everyPlane() []byte {
	var b []byte
	for p := rune(0); p <= 16; p++ {
		for _, lo := range []rune{0x0000, 0x0041, 0x00E9, 0x0300, 0x2000, 0x4E00, 0xD7FF, 0xE000, 0xFFFD, 0xFFFE} {
			r := p<<16 | lo
			if r == 0 {
				continue
			}
			b = utf8.AppendRune(b, r)
			b = append(b, ' ')
		}
	}
	return b
}

// edgeTexts are inputs of our own making; the tokens must come out without
// error, identical on every run.
func edgeTexts() map[string][]byte {
	return map[string][]byte{
		"empty":           {},
		"one-char":        []byte("a"),
		"one-space":       []byte(" "),
		"only-space":      []byte(" \t\n\r\n\v\f  \u00a0\u3000\u2028"),
		"nul":             []byte("a\x00b\x00\x00 \x00"),
		"crlf":            []byte("line one\r\nline two\r\n\r\n"),
		"every-plane":     everyPlane(),
		"1mb-no-spaces":   bytes.Repeat([]byte("Lorem_ipsum,dolor.sit-amet;"), (1<<20)/27+1)[:1<<20],
		"256k-one-letter": bytes.Repeat([]byte("a"), 1<<18),
		"100k-cjk":        bytes.Repeat([]byte("天地玄黃宇宙洪荒"), 100_000/24),
		"specials-text":   []byte("<s></s><unk><|endoftext|><|im_start|><think></think><|begin_of_text|>"),
		"long-digits":     bytes.Repeat([]byte("0123456789"), 1000),
	}
}

func TestEdgeTexts(t *testing.T) {
	dir := oracle.Require(t)
	seen := map[string]bool{}
	for _, m := range oracle.Models(dir) {
		tk := load(t, dir, m)
		if seen[tk.Identity()] {
			continue // same tokenizer as a model already checked
		}
		seen[tk.Identity()] = true
		for name, text := range edgeTexts() {
			t.Run(m+"/"+name, func(t *testing.T) {
				start := time.Now()
				a, err := tk.Encode(text)
				if err != nil {
					t.Fatal(err)
				}
				if d := time.Since(start); d > time.Minute {
					t.Errorf("took %v", d)
				}
				b, _ := tk.Encode(text)
				if !reflect.DeepEqual(a, b) {
					t.Fatal("not deterministic")
				}
				for _, id := range a {
					if id < 0 || int(id) >= tk.NVocab() {
						t.Fatalf("id %d out of range", id)
					}
				}
				checkRoundTrip(t, tk, text, a)
			})
		}
	}
}

// checkRoundTrip: decoding gives the text back, up to SentencePiece's space
// prefix (and its "▁", which reads as a space).
func checkRoundTrip(t *testing.T, tk tokenizer.Tokenizer, text []byte, ids []int32) {
	t.Helper()
	got := tk.Decode(ids)
	want := text
	if tk.Model() == "llama" {
		want = bytes.ReplaceAll(text, []byte("▁"), []byte(" "))
		// the space prefix, where the model adds one (Gemma 3 does not)
		if probe, _ := tk.Encode([]byte("a")); len(text) > 0 && bytes.HasPrefix(tk.Decode(probe), []byte(" ")) {
			want = append([]byte(" "), want...)
		}
	}
	if !bytes.Equal(got, want) {
		n := 0
		for n < len(got) && n < len(want) && got[n] == want[n] {
			n++
		}
		t.Fatalf("decode differs at byte %d: got %q, want %q", n, clip(got[n:]), clip(want[n:]))
	}
}

func clip(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

func TestInvalidUTF8Oracle(t *testing.T) {
	dir := oracle.Require(t)
	for _, m := range oracle.Models(dir) {
		tk := load(t, dir, m)
		text := []byte("valid text, then \xc3\x28 bad")
		_, err := tk.Encode(text)
		var ue *tokenizer.InvalidUTF8Error
		if !errors.As(err, &ue) || ue.Offset != 17 {
			t.Fatalf("%s: err = %v, want offset 17", m, err)
		}
		fixed, n := tokenizer.Sanitize(text)
		if n != 1 { // 0xC3 before "(" is one bad byte
			t.Fatalf("%d replacements", n)
		}
		ids, err := tk.Encode(fixed)
		if err != nil {
			t.Fatal(err)
		}
		checkRoundTrip(t, tk, fixed, ids)
	}
}

// TestConcurrent encodes from several goroutines at once (sessions are
// pooled, caches per session).
func TestConcurrent(t *testing.T) {
	dir := oracle.Require(t)
	text, err := os.ReadFile(oracle.Text(dir, "mixed-unicode"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"tiny-llama-spm-f16", "tiny-qwen3-q8_0"} {
		tk := load(t, dir, m)
		want, _ := tk.Encode(text)
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					got, err := tk.Encode(text)
					if err != nil || !reflect.DeepEqual(got, want) {
						t.Errorf("%s: concurrent encode differs", m)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
}

func TestIdentityOracle(t *testing.T) {
	dir := oracle.Require(t)
	ids := map[string]string{}
	for _, m := range oracle.Models(dir) {
		ids[m] = load(t, dir, m).Identity()
	}
	// The three Llama-2 models share one tokenizer; the others differ.
	if a, b, c := ids["tiny-llama-spm-f16"], ids["tiny-llama-spm-q8_0"], ids["tiny-llama-spm-q4_k_m"]; a != b || b != c {
		t.Errorf("Llama-2 identities differ: %s %s %s", a, b, c)
	}
	if ids["tiny-llama3-q8_0"] == ids["tiny-qwen3-q8_0"] || ids["tiny-llama3-q8_0"] == ids["tiny-llama-spm-f16"] {
		t.Errorf("distinct tokenizers share an identity: %v", ids)
	}
}

// FuzzEncode runs every oracle tokenizer (SentencePiece and byte-level BPE)
// on arbitrary bytes: no panic; invalid UTF-8 is refused; valid text decodes
// back to itself.
func FuzzEncode(f *testing.F) {
	dir := oracle.Require(f) // fails instead with PPL_REQUIRE_ORACLE=1, as in CI
	var tks []tokenizer.Tokenizer
	for _, m := range []string{"tiny-llama-spm-f16", "tiny-llama3-q8_0", "tiny-qwen3-q8_0"} {
		tks = append(tks, load(f, dir, m))
	}
	for _, s := range []string{"", " ", "Hello, world!", "don't  12345\r\n", "世界 😀 e\u0301", "\x00", "<think>x</think>", "\xff", "▁ ▁"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		for _, tk := range tks {
			ids, err := tk.Encode(text)
			if !utf8.Valid(text) {
				if err == nil {
					t.Fatalf("%s: invalid UTF-8 accepted", tk.Pre())
				}
				fixed, _ := tokenizer.Sanitize(text)
				if ids, err = tk.Encode(fixed); err != nil {
					t.Fatal(err)
				}
				checkRoundTrip(t, tk, fixed, ids)
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			checkRoundTrip(t, tk, text, ids)
		}
	})
}

// benchText is en-gpl3 repeated to about 1 MB.
func benchText(b *testing.B) []byte {
	dir := oracle.Require(b)
	en, err := os.ReadFile(oracle.Text(dir, "en-gpl3"))
	if err != nil {
		b.Fatal(err)
	}
	return bytes.Repeat(en, (1<<20)/len(en))
}

// BenchmarkEncode reports MB/s of one goroutine on English text.
func BenchmarkEncode(b *testing.B) {
	text := benchText(b)
	dir := oracle.Require(b)
	for _, m := range []string{"tiny-llama-spm-f16", "tiny-llama3-q8_0", "tiny-qwen3-q8_0"} {
		tk := load(b, dir, m)
		b.Run(strings.TrimPrefix(m, "tiny-"), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			tk.Encode(text) // warm the word cache, as a long run would be
			b.ResetTimer()
			c0 := cpuTime()
			for i := 0; i < b.N; i++ {
				if _, err := tk.Encode(text); err != nil {
					b.Fatal(err)
				}
			}
			reportCPUThroughput(b, len(text), c0)
		})
	}
}

// BenchmarkEncodeMixed is the speed on all four oracle texts (code, Chinese,
// Unicode edge cases, English), where fewer words repeat.
func BenchmarkEncodeMixed(b *testing.B) {
	dir := oracle.Require(b)
	var text []byte
	for _, x := range []string{"code-go-strings", "zh-tang", "mixed-unicode", "en-gpl3"} {
		t, err := os.ReadFile(oracle.Text(dir, x))
		if err != nil {
			b.Fatal(err)
		}
		text = append(text, t...)
	}
	for _, m := range []string{"tiny-llama-spm-f16", "tiny-llama3-q8_0", "tiny-qwen3-q8_0"} {
		f := load(b, dir, m)
		b.Run(strings.TrimPrefix(m, "tiny-"), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			c0 := cpuTime()
			for i := 0; i < b.N; i++ {
				if _, err := f.Encode(text); err != nil {
					b.Fatal(err)
				}
			}
			reportCPUThroughput(b, len(text), c0)
		})
	}
}

// BenchmarkLoad is the time to build a tokenizer from an open GGUF file.
func BenchmarkLoad(b *testing.B) {
	dir := oracle.Require(b)
	for _, m := range []string{"tiny-llama-spm-f16", "tiny-llama3-q8_0", "tiny-qwen3-q8_0"} {
		b.Run(strings.TrimPrefix(m, "tiny-"), func(b *testing.B) {
			f, err := gguf.Open(oracle.Model(dir, m))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			for i := 0; i < b.N; i++ {
				if _, err := tokenizer.Load(f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
