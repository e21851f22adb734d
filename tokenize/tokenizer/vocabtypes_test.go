package tokenizer

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestRWKVUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`a\tb`: "a\tb", `\n\r`: "\n\r", `\\`: `\`, `\x00\xff`: "\x00\xff", `\'x`: "'x", "é": "é", `\x4a`: "J",
	} {
		if got := string(rwkvUnescape(in)); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

func TestRWKV(t *testing.T) {
	c := Config{Model: "rwkv", Tokens: []string{"<unk>", "a", "b", "ab", "abc", `\n`, `\x00`}, UNK: u32(0), AddBOS: bptr(true), BOS: u32(0)}
	tk := mustNew(t, c)
	if tk.AddBOS() || tk.AddEOS() {
		t.Error("RWKV adds no BOS or EOS")
	}
	// llama-perplexity's chunks still start with BOS by the file's flag
	// (false when absent); a flag without a BOS id is refused.
	if !tk.ChunkBOS() {
		t.Error("RWKV with add_bos_token: ChunkBOS false, want true")
	}
	c.AddBOS = nil
	if mustNew(t, c).ChunkBOS() {
		t.Error("RWKV without add_bos_token: ChunkBOS true, want false")
	}
	c.AddBOS, c.BOS = bptr(true), nil
	if _, err := New(c); err == nil || !strings.Contains(err.Error(), "bos_token_id is not set") {
		t.Errorf("RWKV with add_bos_token and no BOS id: error %v", err)
	}
	for in, want := range map[string][]int32{
		"abcab":    {4, 3}, // longest match at each byte
		"abd":      {3, 0}, // 'd' starts no token: unknown
		"ab\n\x00": {3, 5, 6},
		"":         {},
	} {
		got, err := tk.Encode([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 && len(want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %v, want %v", in, got, want)
		}
	}
	if got := string(tk.Decode([]int32{4, 5, 6})); got != "abc\n\x00" {
		t.Errorf("decode %q", got)
	}
}

func plamoConfig(pieces map[string]float32) Config {
	c := Config{Model: "plamo2", Tokens: []string{"<unk>", "<s>", "</s>"}, Types: []int32{TypeUnknown, TypeControl, TypeControl}, Scores: []float32{0, 0, 0}}
	for b := 0; b < 256; b++ {
		c.Tokens = append(c.Tokens, fmt.Sprintf("<0x%02X>", b))
		c.Types = append(c.Types, TypeByte)
		c.Scores = append(c.Scores, 0)
	}
	for _, p := range []string{"a", "b", "ab", "abc", "bc", "c"} {
		c.Tokens = append(c.Tokens, p)
		c.Types = append(c.Types, TypeNormal)
		c.Scores = append(c.Scores, pieces[p])
	}
	return c
}

func TestPLaMo2(t *testing.T) {
	id := func(i int) int32 { return int32(259 + i) } // a b ab abc bc c
	for _, tc := range []struct {
		scores map[string]float32
		in     string
		want   []int32
	}{
		// the best total score wins: abc (-1) beats ab+c (-2) and a+bc (-2)
		{map[string]float32{"a": -1, "b": -1, "ab": -1, "abc": -1, "bc": -1, "c": -1}, "abc", []int32{id(3)}},
		// a+bc (-0.5) beats abc (-3)
		{map[string]float32{"a": -0.25, "b": -5, "ab": -5, "abc": -3, "bc": -0.25, "c": -5}, "abc", []int32{id(0), id(4)}},
		// equal totals: the longer first piece at a position wins
		{map[string]float32{"a": -1, "b": -1, "ab": -2, "abc": -9, "bc": -9, "c": -9}, "ab", []int32{id(2)}},
		// an unknown code point is its UTF-8 bytes; a leading BOM is dropped
		{map[string]float32{"a": -1, "b": -1, "ab": -1, "abc": -1, "bc": -1, "c": -1}, "\uFEFFaé", []int32{id(0), 3 + 0xC3, 3 + 0xA9}},
	} {
		tk := mustNew(t, plamoConfig(tc.scores))
		got, err := tk.Encode([]byte(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q with %v: got %v, want %v", tc.in, tc.scores, got, tc.want)
		}
	}
	c := plamoConfig(nil)
	c.Tokens[3+0x41] = "x" // no <0x41>
	c.Types[3+0x41] = TypeNormal
	if _, err := New(c); err == nil {
		t.Error("a PLaMo-2 vocabulary without every byte token loads")
	}
}

func TestPLaMo3Segments(t *testing.T) {
	long := strings.Repeat("xy", 32) // a 64-code-point body
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"Hello world", []string{"Hello world"}},
		// fences: cut on both sides, empty body allowed
		{"a<|plamo:bos|>b<|plamo:|>c", []string{"a", "<|plamo:bos|>", "b", "<|plamo:|>", "c"}},
		// no fence: whitespace or U+001C..U+001F in the body, no "|>", body over 64
		{"<|plamo:a b|>", []string{"<|plamo:a b|>"}},
		{"<|plamo:a\x1fb|>", []string{"<|plamo:a\x1fb|>"}},
		{"<|plamo:a\x1bb|>", []string{"<|plamo:a\x1bb|>"}},
		{"<|plamo:x|y>", []string{"<|plamo:x|y>"}},
		{"<|plamo:" + long + "|>.", []string{"<|plamo:" + long + "|>", "."}},
		{"<|plamo:" + long + "z|>.", []string{"<|plamo:" + long + "z|>."}},
		// the inner prefix starts the fence
		{"<|plamo:<|plamo:x|>|>", []string{"<|plamo:", "<|plamo:x|>", "|>"}},
		// runs: 4 or more of one code point, 2 or more spaces; not newlines
		{"baaab", []string{"baaab"}},
		{"baaaab", []string{"b", "aaaa", "b"}},
		{"a b  c   d", []string{"a b", "  ", "c", "   ", "d"}},
		{"x\n\n\n\n\ny", []string{"x\n\n\n\n\ny"}},
		{"ééééé日日日日", []string{"ééééé", "日日日日"}},
		// a run does not cross a fence, but is found inside one
		{"<|plamo:aaaa|>aaaa", []string{"<|plamo:", "aaaa", "|>", "aaaa"}},
		// U+EE00 ends a segment and is dropped; U+FEFF is kept
		{"a\uEE00b\uEE00\uEE00", []string{"a", "b"}},
		{"\uFEFFab", []string{"\uFEFFab"}},
		{"", nil},
	} {
		cps := []rune(tc.in)
		var got []string
		for _, s := range plamo3Segments(cps) {
			got = append(got, string(cps[s[0]:s[1]]))
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPLaMo3(t *testing.T) {
	sc := map[string]float32{"a": -1, "b": -1, "ab": -0.1, "abc": -1, "bc": -1, "c": -1}
	p2 := mustNew(t, plamoConfig(sc))
	c := plamoConfig(sc)
	c.Model = "plamo3"
	p3 := mustNew(t, c)
	if p3.Model() != "plamo3" || p3.Pre() != "plamo3" {
		t.Errorf("model %q, pre %q", p3.Model(), p3.Pre())
	}
	id := func(i int) int32 { return int32(259 + i) } // a b ab abc bc c
	by := func(b byte) int32 { return 3 + int32(b) }
	for _, tc := range []struct {
		in    string
		want2 []int32 // PLaMo-2
		want3 []int32 // PLaMo-3
	}{
		// the boundary splits "ab" and is dropped
		{"a\uEE00b", []int32{id(0), by(0xEE), by(0xB8), by(0x80), id(1)}, []int32{id(0), id(1)}},
		// PLaMo-3 keeps a leading BOM
		{"\uFEFFab", []int32{id(2)}, []int32{by(0xEF), by(0xBB), by(0xBF), id(2)}},
		// a run of spaces is its own segment: "ab" still whole on both sides
		{"ab  ab", []int32{id(2), by(' '), by(' '), id(2)}, []int32{id(2), by(' '), by(' '), id(2)}},
		// a run of four: "ab" cannot take the last a
		{"aaaab", []int32{id(0), id(0), id(0), id(2)}, []int32{id(0), id(0), id(0), id(0), id(1)}},
	} {
		for _, x := range []struct {
			tk   Tokenizer
			want []int32
		}{{p2, tc.want2}, {p3, tc.want3}} {
			got, err := x.tk.Encode([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, x.want) {
				t.Errorf("%s %q: got %v, want %v", x.tk.Model(), tc.in, got, x.want)
			}
		}
	}
	c.Tokens = slices.Clone(c.Tokens)
	c.Tokens[3+0x41] = "x" // no <0x41>
	_, err := New(c)
	if err == nil || !strings.Contains(err.Error(), "PLaMo-3") || !strings.Contains(err.Error(), KeyTokens) {
		t.Errorf("a PLaMo-3 vocabulary without every byte token: %v", err)
	}
}

func dnaConfig() Config {
	toks := []string{"A", "C", "G", "T", "x", "Ġ", "AAAAAA\uE000", "<oov>", "<dna>", "</dna>",
		"ACGTAC\uE000", "GTAAAA\uE000", "TTTTTT\uE000", "<", ">", "d", "n", "a", "/", "N"}
	types := make([]int32, len(toks))
	for i := range types {
		types[i] = TypeNormal
	}
	types[7] = TypeControl      // <oov>
	types[12] = TypeUserDefined // TTTTTT
	return Config{Model: "hybriddna", Pre: "gpt-2", Tokens: toks, Types: types, Merges: []string{}}
}

func TestHybridDNA(t *testing.T) {
	tk := mustNew(t, dnaConfig())
	for _, tc := range []struct {
		in   string
		want []int32
	}{
		// k-mers of 6 from the start, the last padded with A
		{"<dna>ACGTACGTA</dna>", []int32{8, 10, 11, 9}},
		// lower case is upper-cased; other letters have no k-mer
		{"<dna>acgtac</dna>", []int32{8, 10, 9}},
		{"<dna>ACGTNN</dna>", []int32{8, 7, 9}},
		{"<dna>ACGTA\nACGTAC</dna>", []int32{8, 7, 10, 9}},
		{"<dna></dna>", []int32{8, 9}},
		// unclosed: to the end; a marked k-mer before <oov> is still found
		{"x<dna>A", []int32{4, 8, 6}},
		// outside the tags, plain BPE (no merges here: one token a byte)
		{"ACGT x", []int32{0, 1, 2, 3, 5, 4}},
		{"</dna>A", []int32{13, 18, 15, 16, 17, 14, 0}},
		// a user-defined k-mer is cut out by its text without the marker,
		// inside a span too: that leaves "<dna>" unclosed in its fragment
		// and "</dna>" plain text in the next
		{"TTTTTT x<dna>TTTTTT</dna>", []int32{12, 5, 4, 8, 12, 13, 18, 15, 16, 17, 14}},
	} {
		got, err := tk.Encode([]byte(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %v, want %v", tc.in, got, tc.want)
		}
	}
	// token texts lose the marker after <oov> only
	if tk.Token(10) != "ACGTAC" || tk.Token(6) != "AAAAAA\uE000" {
		t.Errorf("texts %q %q", tk.Token(10), tk.Token(6))
	}
	if got := string(tk.Decode([]int32{8, 10, 11, 9})); got != "<dna>ACGTACGTAAAA</dna>" {
		t.Errorf("decode %q", got)
	}
	// without all three tags, plain BPE
	c := dnaConfig()
	c.Tokens = slices.Clone(c.Tokens)
	c.Tokens[9] = "</DNA>"
	tk = mustNew(t, c)
	got, err := tk.Encode([]byte("<dna>ACG"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int32{13, 15, 16, 17, 14, 0, 1, 2}; !reflect.DeepEqual(got, want) {
		t.Errorf("no </dna>: got %v, want %v", got, want)
	}
	c = dnaConfig()
	c.Merges = nil
	if _, err := New(c); err == nil || !strings.Contains(err.Error(), "tokenizer.ggml.merges") {
		t.Errorf("hybriddna without merges: %v", err)
	}
}
