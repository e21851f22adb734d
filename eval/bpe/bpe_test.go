package bpe

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTrain(t *testing.T) {
	// "ab" occurs 4 times, then "abc" 2 times (ab+c), " ab" ...
	texts := [][]byte{[]byte("ab ab abc abc")}
	v, err := Train(texts, TrainOptions{Size: 256 + 4 + 1, Special: []string{"<|endoftext|>"}})
	if err != nil {
		t.Fatal(err)
	}
	var toks []string
	for _, tk := range v.Tokens[256:] {
		toks = append(toks, string(tk))
	}
	// Pieces: "ab", " ab", " abc", " abc". Pair counts: (a,b) 4, (' ',a) 3,
	// (b,c) 2. Merge a+b; then ' '+ab 3; then ' ab'+c 2. No pair left twice,
	// so the last id is reserved.
	want := []string{"ab", " ab", " abc", "<|endoftext|>", "<|reserved_0|>"}
	if !slices.Equal(toks, want) {
		t.Errorf("tokens %q, want %q", toks, want)
	}
	if v.Size() != 261 || v.NumNormal() != 259 || len(v.Merges) != 3 {
		t.Errorf("size %d normal %d merges %d, want 261 259 3", v.Size(), v.NumNormal(), len(v.Merges))
	}
	if got := v.Encode([]byte("ab abc x")); !slices.Equal(got, []int32{256, 258, ' ', 'x'}) {
		t.Errorf("Encode = %v", got)
	}
	tokens, types, merges := v.GGUF()
	if tokens[257] != "Ġab" || types[257] != 1 || types[259] != 3 || !slices.Equal(merges, []string{"a b", "Ġ ab", "Ġab c"}) {
		t.Errorf("GGUF: %q %v %q", tokens[256:], types[256:], merges)
	}
	if _, err := Train(texts, TrainOptions{Size: 100}); err == nil {
		t.Error("size below 256 accepted")
	}
}

// TestEncodeOrder checks the llama.cpp rule that matters when merges
// compete: lowest rank first, one merge at a time, leftmost among equals.
func TestEncodeOrder(t *testing.T) {
	v := &Vocab{}
	for b := 0; b < 256; b++ {
		v.Tokens = append(v.Tokens, []byte{byte(b)})
	}
	add := func(a, b int32) int32 {
		id := int32(len(v.Tokens))
		v.Tokens = append(v.Tokens, slices.Concat(v.Tokens[a], v.Tokens[b]))
		v.Merges = append(v.Merges, [2]int32{a, b})
		v.Result = append(v.Result, id)
		return id
	}
	bc := add('b', 'c') // rank 0
	ab := add('a', 'b') // rank 1
	abc := add(ab, 'c') // rank 2
	v.normal = len(v.Tokens)
	for _, c := range []struct {
		in   string
		want []int32
	}{
		{"abc", []int32{'a', bc}}, // b+c outranks a+b
		{"abab", []int32{ab, ab}},
		{"abbc", []int32{ab, bc}},
		{"aab", []int32{'a', ab}},
	} {
		if got := v.Encode([]byte(c.in)); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.in, got, c.want)
		}
	}
	_ = abc
}

func TestFromGGUF(t *testing.T) {
	texts := [][]byte{[]byte(strings.Repeat("the cat sat on the mat; 困惑度，困惑度。 ", 20))}
	v, err := Train(texts, TrainOptions{Size: 300, Special: []string{"<|endoftext|>"}})
	if err != nil {
		t.Fatal(err)
	}
	tokens, types, merges := v.GGUF()
	w, err := FromGGUF(tokens, types, merges)
	if err != nil {
		t.Fatal(err)
	}
	if w.NumNormal() != v.NumNormal() || w.Size() != v.Size() {
		t.Fatalf("round trip: %d/%d tokens, want %d/%d", w.NumNormal(), w.Size(), v.NumNormal(), v.Size())
	}
	for _, s := range []string{"the cat", "困惑度。", "mat; the"} {
		if a, b := v.Encode([]byte(s)), w.Encode([]byte(s)); !slices.Equal(a, b) {
			t.Errorf("Encode(%q): %v after round trip, %v before", s, b, a)
		}
	}
	types[3] = 3
	if _, err := FromGGUF(tokens, types, merges); err == nil {
		t.Error("normal token after a control token accepted")
	}
}

func TestEncodeCoversText(t *testing.T) {
	text := []byte("Perplexity 困惑度 measures fit; x := y[i]\n\n\tdone. \xe2\x82")
	v, err := Train([][]byte{text}, TrainOptions{Size: 280})
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, id := range v.Encode(text) {
		out = append(out, v.Tokens[id]...)
	}
	if !bytes.Equal(out, text) {
		t.Errorf("decoded %q, want %q", out, text)
	}
	if utf8.Valid(text) {
		t.Fatal("test text should end with a broken UTF-8 sequence")
	}
}
