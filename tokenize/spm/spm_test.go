package spm

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// testVocab is a small SentencePiece vocabulary: specials, the 256 byte
// tokens, then pieces with scores.
type testVocab struct {
	tokens []string
	scores []float32
}

func newVocab(pieces ...any) *testVocab {
	v := &testVocab{tokens: []string{"<unk>", "<s>", "</s>"}, scores: []float32{0, 0, 0}}
	for b := 0; b < 256; b++ {
		v.tokens = append(v.tokens, fmt.Sprintf("<0x%02X>", b))
		v.scores = append(v.scores, 0)
	}
	for i := 0; i < len(pieces); i += 2 {
		v.tokens = append(v.tokens, pieces[i].(string))
		v.scores = append(v.scores, float32(pieces[i+1].(float64)))
	}
	return v
}

func (v *testVocab) id(t testing.TB, s string) int32 {
	for i, x := range v.tokens {
		if x == s {
			return int32(i)
		}
	}
	t.Fatalf("no token %q", s)
	return -1
}

func (v *testVocab) texts(ids []int32) []string {
	var out []string
	for _, id := range ids {
		out = append(out, v.tokens[id])
	}
	return out
}

func TestEncode(t *testing.T) {
	v := newVocab("▁", -5.0, "a", -3.0, "b", -3.0, "c", -3.0, "ab", -1.0, "bc", -0.5, "abc", -0.1,
		"▁a", -2.0, "aa", -1.0, "▁▁", -1.5, "x", -4.0)
	m, err := New(v.tokens, v.scores)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in     string
		prefix bool
		want   []string
	}{
		// bc (-0.5) beats ab (-1) and ▁a (-2); then a+bc forms abc (-0.1).
		{"abc", true, []string{"▁", "abc"}},
		{"abc", false, []string{"abc"}},
		// Equal scores: the leftmost pair merges first.
		{"aaa", false, []string{"aa", "a"}},
		{"a a", false, []string{"a", "▁a"}},
		// "▁▁" is a token, so runs of spaces merge pairwise.
		{"  x", false, []string{"▁▁", "x"}},
		// é has no piece: its UTF-8 bytes.
		{"é", false, []string{"<0xC3>", "<0xA9>"}},
		{"", false, nil},
		{"", true, []string{"▁"}},
		// Characters are cut by lead byte without validation: 0xFF
		// announces four bytes and swallows the "a"; no such piece, so bytes.
		{"\xffa", false, []string{"<0xFF>", "<0x61>"}},
		{"\x80a", false, []string{"<0x80>", "a"}},
	} {
		ids, err := m.Encode(nil, []byte(c.in), c.prefix)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if got := v.texts(ids); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Encode(%q, %v) = %q, want %q", c.in, c.prefix, got, c.want)
		}
	}
}

func TestChunkedMatchesWhole(t *testing.T) {
	v := newVocab("▁", -5.0, "▁the", -1.0, "▁t", -2.0, "he", -1.5, "th", -1.2, "e", -3.0, "t", -3.0, "h", -3.0,
		"▁▁", -0.5, "▁▁▁▁", -0.4, "n", -3.0, "▁then", -0.2, "en", -2.5)
	m, err := New(v.tokens, v.scores)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Chunked() {
		t.Fatal("vocabulary should allow chunking")
	}
	s := &session{cache: map[string][]int32{}}
	for _, in := range []string{"the then  the    then", " the", "thethe the", "x the\nthe"} {
		got, err := m.Encode(nil, []byte(in), true)
		if err != nil {
			t.Fatal(err)
		}
		esc := Space + strings.ReplaceAll(in, " ", Space)
		whole, err := m.encodeChunk(nil, []byte(esc), s)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, whole) {
			t.Errorf("%q: chunked %q, whole %q", in, v.texts(got), v.texts(whole))
		}
	}
}

func TestNotChunked(t *testing.T) {
	v := newVocab("a", -2.0, "▁", -2.0, "b", -2.0, "a▁", -1.5, "a▁b", -1.0)
	m, err := New(v.tokens, v.scores)
	if err != nil {
		t.Fatal(err)
	}
	if m.Chunked() {
		t.Fatal(`"a▁b" crosses a chunk start; chunking must be off`)
	}
	ids, err := m.Encode(nil, []byte("a b"), false)
	if err != nil {
		t.Fatal(err)
	}
	if got := v.texts(ids); !reflect.DeepEqual(got, []string{"a▁b"}) {
		t.Errorf("got %q", got)
	}
}

func TestMissingByteToken(t *testing.T) {
	m, err := New([]string{"<unk>", "a"}, []float32{0, 0})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Encode(nil, []byte("ab"), false)
	var be *ByteError
	if !errors.As(err, &be) || be.Byte != 'b' {
		t.Fatalf("err = %v, want ByteError for 'b'", err)
	}
}

func TestLongWordLinear(t *testing.T) {
	v := newVocab("a", -1.0, "aa", -0.5, "aaaa", -0.25, "b", -1.0, "ab", -0.7)
	m, err := New(v.tokens, v.scores)
	if err != nil {
		t.Fatal(err)
	}
	in := bytes.Repeat([]byte("aab"), 100_000/3)
	ids, err := m.Encode(nil, in, true)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, id := range ids {
		out = append(out, decodePiece(v.tokens[id])...)
	}
	if want := append([]byte(Space), in...); !bytes.Equal(out, want) {
		t.Fatalf("round trip differs")
	}
}

// decodePiece turns a piece back into escaped text bytes.
func decodePiece(s string) []byte {
	var b byte
	if n, _ := fmt.Sscanf(s, "<0x%02X>", &b); n == 1 && len(s) == 6 {
		return []byte{b}
	}
	return []byte(s)
}

// FuzzEncode: no panic, deterministic, and the pieces spell the escaped
// input exactly (byte fallback makes SentencePiece lossless, even on bytes
// that are not UTF-8).
func FuzzEncode(f *testing.F) {
	v := newVocab("▁", -5.0, "▁the", -1.0, "he", -1.5, "th", -1.2, "e", -3.0, "t", -3.0, "h", -3.0,
		"▁▁", -0.5, "é", -2.0, "▁é", -1.0, "世界", -1.0, "世", -3.0, "界", -3.0)
	m, err := New(v.tokens, v.scores)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"", " ", "the the", "é世界", "\x00\r\n", "\xe2\x96", "▁▁ ▁"} {
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, in []byte, prefix bool) {
		ids, err := m.Encode(nil, in, prefix)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := m.Encode(nil, in, prefix)
		if !reflect.DeepEqual(ids, again) {
			t.Fatal("not deterministic")
		}
		var out []byte
		for _, id := range ids {
			out = append(out, decodePiece(v.tokens[id])...)
		}
		want := bytes.ReplaceAll(in, []byte(" "), []byte(Space))
		if prefix {
			want = append([]byte(Space), want...)
		}
		if !bytes.Equal(out, want) {
			t.Fatalf("pieces %q spell %q, want %q", v.texts(ids), out, want)
		}
	})
}
