package tokenizer

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"ppl.dev/tokenize/bpe"
)

func u32(x uint32) *uint32 { return &x }
func bptr(b bool) *bool    { return &b }

// spmConfig is a small SentencePiece definition: <unk> <s> </s>, bytes,
// then pieces (score = -index).
func spmConfig(pieces ...string) Config {
	c := Config{Model: "llama", Tokens: []string{"<unk>", "<s>", "</s>"}, Types: []int32{TypeUnknown, TypeControl, TypeControl}}
	for b := 0; b < 256; b++ {
		c.Tokens = append(c.Tokens, fmt.Sprintf("<0x%02X>", b))
		c.Types = append(c.Types, TypeByte)
	}
	for _, p := range pieces {
		typ := TypeNormal
		if strings.HasPrefix(p, "USER:") {
			p, typ = p[5:], TypeUserDefined
		}
		c.Tokens = append(c.Tokens, p)
		c.Types = append(c.Types, typ)
	}
	c.Scores = make([]float32, len(c.Tokens))
	for i := range c.Scores {
		c.Scores[i] = -float32(i)
	}
	return c
}

// bpeConfig is a byte-level definition: the byte alphabet, then tokens
// ("USER:" or "CTRL:" prefixed for those types), with merges "l|r".
func bpeConfig(pre string, tokens []string, merges []string) Config {
	c := Config{Model: "gpt2", Pre: pre}
	for b := 0; b < 256; b++ {
		c.Tokens = append(c.Tokens, bpe.EncodeBytes([]byte{byte(b)}))
		c.Types = append(c.Types, TypeNormal)
	}
	for _, t := range tokens {
		typ := TypeNormal
		switch {
		case strings.HasPrefix(t, "USER:"):
			t, typ = t[5:], TypeUserDefined
		case strings.HasPrefix(t, "CTRL:"):
			t, typ = t[5:], TypeControl
		default:
			t = bpe.EncodeBytes([]byte(t))
		}
		c.Tokens = append(c.Tokens, t)
		c.Types = append(c.Types, typ)
	}
	c.Merges = []string{}
	for _, m := range merges {
		l, r, _ := strings.Cut(m, "|")
		c.Merges = append(c.Merges, bpe.EncodeBytes([]byte(l))+" "+bpe.EncodeBytes([]byte(r)))
	}
	return c
}

func mustNew(t testing.TB, c Config) Tokenizer {
	t.Helper()
	tk, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func pieces(tk Tokenizer, ids []int32) []string {
	var out []string
	for _, id := range ids {
		out = append(out, tk.Token(id))
	}
	return out
}

func TestSPMSpecials(t *testing.T) {
	c := spmConfig("▁", "a", "b", "▁a", "USER:<x>")
	tk := mustNew(t, c)
	if !tk.AddBOS() || tk.AddEOS() || tk.BOS() != 1 || tk.EOS() != 2 || tk.Pre() != "default" {
		t.Fatalf("defaults: addBOS %v addEOS %v bos %d eos %d pre %q", tk.AddBOS(), tk.AddEOS(), tk.BOS(), tk.EOS(), tk.Pre())
	}
	for _, x := range []struct {
		in   string
		want []string
	}{
		{"", []string{"<s>"}},
		{"a", []string{"<s>", "▁a"}},
		// Control tokens in the text are text; user-defined ones are cut and
		// the text after them gets its own space prefix.
		{"<s>a", []string{"<s>", "▁", "<0x3C>", "<0x73>", "<0x3E>", "a"}},
		{"a<x>a", []string{"<s>", "▁a", "<x>", "▁a"}},
		{"<x>", []string{"<s>", "<x>"}},
	} {
		got, err := tk.Encode([]byte(x.in))
		if err != nil {
			t.Fatal(err)
		}
		if p := pieces(tk, got); !reflect.DeepEqual(p, x.want) {
			t.Errorf("Encode(%q) = %q, want %q", x.in, p, x.want)
		}
	}
}

func TestSPMFlags(t *testing.T) {
	c := spmConfig("▁", "a", "▁a")
	c.AddBOS, c.AddEOS, c.AddSpacePrefix = bptr(false), bptr(true), bptr(false)
	tk := mustNew(t, c)
	got, err := tk.Encode([]byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	if p := pieces(tk, got); !reflect.DeepEqual(p, []string{"a", "</s>"}) {
		t.Errorf("got %q", p)
	}
}

func TestBPESpecials(t *testing.T) {
	c := bpeConfig("qwen2", []string{"he", "hel", "hell", "hello", "USER:<think>", "USER:<|fim_prefix|>", "CTRL:<|endoftext|>", "USER:<think"},
		[]string{"h|e", "he|l", "hel|l", "hell|o"})
	c.BOS, c.EOS = u32(uint32(len(c.Tokens)-2)), u32(uint32(len(c.Tokens)-2))
	tk := mustNew(t, c)
	if tk.AddBOS() || tk.AddEOS() {
		t.Fatal("qwen2 adds no BOS/EOS by default")
	}
	for _, x := range []struct {
		in   string
		want []string
	}{
		{"hello<think>hello", []string{"hello", "<think>", "hello"}},
		// "<|fim_prefix|>" is user-defined in the file but llama.cpp treats
		// FIM tokens as control, so it stays text; so does "<|endoftext|>".
		{"<|fim_prefix|>", strings.Split("<|fim_prefix|>", "")},
		{"<|endoftext|>", strings.Split("<|endoftext|>", "")},
		// Longest user-defined token first: "<think>" wins over "<think".
		{"<think><think", []string{"<think>", "<think"}},
	} {
		got, err := tk.Encode([]byte(x.in))
		if err != nil {
			t.Fatal(err)
		}
		var p []string
		for _, id := range got {
			s := tk.Token(id)
			if raw, ok := bpe.DecodeToken(s); ok && !strings.HasPrefix(s, "<") {
				s = string(raw)
			}
			p = append(p, s)
		}
		if !reflect.DeepEqual(p, x.want) {
			t.Errorf("Encode(%q) = %q, want %q", x.in, p, x.want)
		}
	}
}

func TestBPEAddBOSDefault(t *testing.T) {
	c := bpeConfig("llama-bpe", []string{"CTRL:<|begin_of_text|>"}, nil)
	c.BOS = u32(256)
	tk := mustNew(t, c)
	got, _ := tk.Encode([]byte("a"))
	if !reflect.DeepEqual(got, []int32{256, 'a'}) {
		t.Errorf("got %v", got)
	}
	c.BOS = nil // default BOS id 11 is in range: used
	tk = mustNew(t, c)
	if tk.BOS() != 11 || !tk.AddBOS() {
		t.Errorf("bos %d add %v", tk.BOS(), tk.AddBOS())
	}
}

func TestConfigErrors(t *testing.T) {
	dup := spmConfig("a", "a")
	bad := spmConfig()
	bad.AddBOS = bptr(true)
	bad.Tokens = bad.Tokens[:1]
	bad.Types, bad.Scores = bad.Types[:1], bad.Scores[:1]
	for _, x := range []struct {
		c    Config
		want string
	}{
		{Config{Model: "llama"}, "empty vocabulary"},
		{Config{Model: "bert", Tokens: []string{"a"}}, `unsupported tokenizer.ggml.model "bert"`},
		{bpeConfig("no-such", nil, nil), `unsupported pre-tokenizer "no-such"`},
		{Config{Model: "gpt2", Tokens: []string{"a"}}, "without tokenizer.ggml.merges"},
		{dup, `duplicate token "a"`},
		{bad, "add_bos_token is true, but tokenizer.ggml.bos_token_id is not set"},
		{Config{Model: "llama", Tokens: []string{"a", "b"}, Scores: []float32{0}}, "1 scores for 2 tokens"},
	} {
		_, err := New(x.c)
		if err == nil || !strings.Contains(err.Error(), x.want) {
			t.Errorf("error %v, want %q", err, x.want)
		}
	}
}

func TestInvalidUTF8(t *testing.T) {
	tk := mustNew(t, spmConfig("a"))
	_, err := tk.Encode([]byte("aa\xe2\x96a"))
	var ue *InvalidUTF8Error
	if !errors.As(err, &ue) || ue.Offset != 2 || ue.Byte != 0xE2 {
		t.Fatalf("err = %v", err)
	}
	if err.Error() != "invalid UTF-8 at byte offset 2 (0xE2)" {
		t.Errorf("message %q", err)
	}
	fixed, n := Sanitize([]byte("aa\xe2\x96a\xff"))
	if string(fixed) != "aa\uFFFD\uFFFDa\uFFFD" || n != 3 {
		t.Errorf("Sanitize = %q, %d", fixed, n)
	}
	if s, n := Sanitize([]byte("ok")); string(s) != "ok" || n != 0 {
		t.Errorf("Sanitize(ok) = %q, %d", s, n)
	}
}

func TestIdentity(t *testing.T) {
	base := spmConfig("a", "b")
	id := mustNew(t, base).Identity()
	if len(id) != 64 || id != mustNew(t, spmConfig("a", "b")).Identity() {
		t.Fatalf("identity %q not stable", id)
	}
	change := []func(*Config){
		func(c *Config) { c.Tokens[len(c.Tokens)-1] = "c" },
		func(c *Config) { c.Scores[5] = 1 },
		func(c *Config) { c.Types[5] = TypeNormal },
		func(c *Config) { c.AddEOS = bptr(true) },
		func(c *Config) { c.AddSpacePrefix = bptr(false) },
		func(c *Config) { c.BOS = u32(2) },
		func(c *Config) { c.Pre = "x" },
	}
	for i, f := range change {
		c := spmConfig("a", "b")
		f(&c)
		if got := mustNew(t, c).Identity(); got == id {
			t.Errorf("change %d leaves the identity unchanged", i)
		}
	}
}

func TestDecode(t *testing.T) {
	tk := mustNew(t, spmConfig("▁", "a", "▁a", "USER:<x>"))
	ids, _ := tk.Encode([]byte("a a<x>é"))
	if got := string(tk.Decode(ids)); got != " a a<x> é" {
		t.Errorf("Decode = %q", got)
	}
}
