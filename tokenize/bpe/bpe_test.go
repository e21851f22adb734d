package bpe

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"ppl.dev/tokenize/pretokenize"
)

// testVocab is a byte-level vocabulary: the 256 byte characters, then the
// given tokens (plain text, encoded here), with the given merges ("left|right").
type testVocab struct {
	tokens []string
	merges []string
}

func newVocab(tokens []string, merges []string) *testVocab {
	v := &testVocab{}
	for b := 0; b < 256; b++ {
		v.tokens = append(v.tokens, string(byteRune[b]))
	}
	for _, t := range tokens {
		v.tokens = append(v.tokens, EncodeBytes([]byte(t)))
	}
	for _, m := range merges {
		l, r, _ := strings.Cut(m, "|")
		v.merges = append(v.merges, EncodeBytes([]byte(l))+" "+EncodeBytes([]byte(r)))
	}
	return v
}

func (v *testVocab) model(t testing.TB, pre string) *Model {
	t.Helper()
	p, err := pretokenize.Lookup(pre)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(v.tokens, v.merges, p)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (v *testVocab) texts(ids []int32) []string {
	var out []string
	for _, id := range ids {
		raw, _ := DecodeToken(v.tokens[id])
		out = append(out, string(raw))
	}
	return out
}

func TestByteAlphabet(t *testing.T) {
	if byteRune[' '] != 'Ġ' || byteRune['\n'] != 'Ċ' || byteRune['a'] != 'a' || byteRune[0xAD] != 'Ń' {
		t.Fatalf("GPT-2 alphabet: space %q newline %q a %q 0xAD %q", byteRune[' '], byteRune['\n'], byteRune['a'], byteRune[0xAD])
	}
	seen := map[rune]bool{}
	for b := 0; b < 256; b++ {
		if seen[byteRune[b]] {
			t.Fatalf("rune %U used twice", byteRune[b])
		}
		seen[byteRune[b]] = true
	}
	if raw, ok := DecodeToken("ĠhelloĊ"); !ok || string(raw) != " hello\n" {
		t.Fatalf("DecodeToken = %q %v", raw, ok)
	}
	if _, ok := DecodeToken("世"); ok {
		t.Fatal("世 is not in the alphabet")
	}
}

func TestEncodeBytes(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want string
	}{
		{[]byte("abc"), "abc"},
		{[]byte(" "), "Ġ"},
		{[]byte("\n"), "Ċ"},
		{[]byte("\t"), "ĉ"},
		{[]byte{0}, "Ā"},
		{[]byte{0x7f}, "ġ"},
		{[]byte{0xad}, "Ń"},
		{[]byte{0xa1, 0xff}, "¡ÿ"},
		{[]byte("困"), "åĽ°"},
	} {
		if got := EncodeBytes(c.in); got != c.want {
			t.Errorf("EncodeBytes(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestEncodeRaw checks that EncodeRaw keeps invalid bytes (Encode reads
// them as U+FFFD, TestInvalidUTF8) and equals Encode on valid text.
func TestEncodeRaw(t *testing.T) {
	v := newVocab([]string{"ab", " ab"}, []string{"a|b", " |ab"})
	m := v.model(t, "gpt-2")
	if got := strings.Join(v.texts(m.EncodeRaw(nil, []byte("a\xff\xfe ab"))), "|"); got != "a|\xff|\xfe| ab" {
		t.Errorf("EncodeRaw: %q", got)
	}
	in := []byte("ab ab, abab\n")
	if raw, enc := m.EncodeRaw(nil, in), m.Encode(nil, in); !reflect.DeepEqual(raw, enc) {
		t.Errorf("valid text: EncodeRaw %v, Encode %v", raw, enc)
	}
}

func TestEncode(t *testing.T) {
	v := newVocab(
		[]string{"he", "ll", "hell", "hello", " w", " wo", "or", " wor", " world", "aa", "aaaa", "xy"},
		[]string{"h|e", "l|l", "he|ll", "hell|o", " |w", "o|r", " w|or", " wor|ld", "a|a", "aa|aa", "x|y"},
	)
	// " wor ld" needs "ld" as a piece; it is missing, so " world" cannot form.
	m := v.model(t, "gpt-2")
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"hello", []string{"hello"}},
		{"hello world", []string{"hello", " wor", "l", "d"}},
		{"aaaaaaa", []string{"aaaa", "aa", "a"}},
		{"", nil},
		{"xy", []string{"xy"}},
		{"é", []string{"\xc3", "\xa9"}},
	} {
		if got := v.texts(m.Encode(nil, []byte(c.in))); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Encode(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestMergeResultNotToken(t *testing.T) {
	// "q z" merges, but "qz" is no token: llama.cpp emits the bytes.
	v := newVocab(nil, []string{"q|z"})
	m := v.model(t, "gpt-2")
	if got := v.texts(m.Encode(nil, []byte("qz"))); !reflect.DeepEqual(got, []string{"q", "z"}) {
		t.Errorf("got %q", got)
	}
}

func TestRankOrder(t *testing.T) {
	// b c (rank 0) beats a b (rank 1): "abc" -> a + bc, and "a bc" is no merge.
	v := newVocab([]string{"ab", "bc"}, []string{"b|c", "a|b"})
	m := v.model(t, "gpt-2")
	if got := v.texts(m.Encode(nil, []byte("abc"))); !reflect.DeepEqual(got, []string{"a", "bc"}) {
		t.Errorf("got %q", got)
	}
	// Equal ranks cannot happen between different pairs; the same pair twice
	// merges leftmost first.
	v = newVocab([]string{"aa"}, []string{"a|a"})
	m = v.model(t, "gpt-2")
	if got := v.texts(m.Encode(nil, []byte("aaa"))); !reflect.DeepEqual(got, []string{"aa", "a"}) {
		t.Errorf("got %q", got)
	}
}

func TestIgnoreMerges(t *testing.T) {
	// "abc" is a token but no merge makes it: llama-bpe emits it whole,
	// gpt-2 runs the merges.
	v := newVocab([]string{"ab", "abc"}, []string{"a|b"})
	if got := v.texts(v.model(t, "llama-bpe").Encode(nil, []byte("abc"))); !reflect.DeepEqual(got, []string{"abc"}) {
		t.Errorf("llama-bpe: %q", got)
	}
	if got := v.texts(v.model(t, "gpt-2").Encode(nil, []byte("abc"))); !reflect.DeepEqual(got, []string{"ab", "c"}) {
		t.Errorf("gpt-2: %q", got)
	}
}

func TestInvalidUTF8(t *testing.T) {
	// Bad bytes are read as U+FFFD (EF BF BD), one per byte.
	v := newVocab(nil, nil)
	m := v.model(t, "gpt-2")
	got := strings.Join(v.texts(m.Encode(nil, []byte("a\xff\xfe"))), "")
	if got != "a\uFFFD\uFFFD" {
		t.Errorf("got %q", got)
	}
}

func TestDuplicateMergeFirstWins(t *testing.T) {
	v := newVocab([]string{"ab"}, []string{"a|b", "x|y", "a|b"})
	m := v.model(t, "gpt-2")
	if got := m.merges[pairKey(m.bytePiece['a'], m.bytePiece['b'])].rank; got != 0 {
		t.Errorf("rank of a b = %d, want 0", got)
	}
}

// TestLongWord: a 1 MB piece merges in about a second of CPU; a quadratic
// merge loop would take hours. (The bound is loose for shared machines.)
func TestLongWord(t *testing.T) {
	v := newVocab([]string{"aa", "aaaa", "aaaaaaaa", "ab", "aab"}, []string{"a|a", "aa|aa", "aaaa|aaaa", "a|b", "a|ab"})
	m := v.model(t, "llama-bpe")
	for _, in := range [][]byte{bytes.Repeat([]byte("a"), 1<<20), bytes.Repeat([]byte("aab"), 100_000/3)} {
		start := time.Now()
		ids := m.Encode(nil, in)
		if d := time.Since(start); d > time.Minute {
			t.Errorf("%d bytes took %v", len(in), d)
		}
		if got := strings.Join(v.texts(ids), ""); got != string(in) {
			t.Fatalf("round trip of %d bytes differs", len(in))
		}
	}
}

// FuzzEncode: no panic, deterministic, and for valid UTF-8 the tokens spell
// the input exactly (byte-level BPE is lossless).
func FuzzEncode(f *testing.F) {
	v := newVocab(
		[]string{" t", "he", " the", "in", " in", "\xe4\xb8", "世", "er", "\r\n", "  "},
		[]string{" |t", "h|e", " t|he", "i|n", " |in", "\xe4|\xb8", "e|r", "\r|\n", " | "},
	)
	models := map[string]*Model{}
	for _, p := range pretokenize.Names() {
		if pp, _ := pretokenize.Lookup(p); pp.RawBytes {
			continue // not byte-level: FuzzEncodeRaw
		}
		models[p] = v.model(f, p)
	}
	for _, s := range []string{"", "the in the", "世界 123", "a\r\n\r\n b", "\x00\xff", "don't  stop\t"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		for name, m := range models {
			ids := m.Encode(nil, in)
			if again := m.Encode(nil, in); !reflect.DeepEqual(ids, again) {
				t.Fatalf("%s: not deterministic", name)
			}
			got := strings.Join(v.texts(ids), "")
			want := string(in)
			if !utf8.Valid(in) {
				var b []byte // U+FFFD per bad byte
				for i := 0; i < len(in); {
					r, n := utf8.DecodeRune(in[i:])
					b = utf8.AppendRune(b, r)
					i += n
				}
				want = string(b)
			}
			if got != want {
				t.Fatalf("%s: %q encodes to %q, spelling %q", name, in, v.texts(ids), got)
			}
		}
	})
}

// rawVocab is a Gemma 4 style vocabulary: <0xNN> byte tokens, then UTF-8
// tokens with U+2581 for spaces, merges over the same texts.
func rawVocab() ([]string, []string) {
	var toks []string
	for b := 0; b < 256; b++ {
		toks = append(toks, fmt.Sprintf("<0x%02X>", b))
	}
	toks = append(toks, "▁", "t", "h", "e", "▁t", "he", "▁the", "世", "界", "世界", "\n", "\n\n", "a", "b")
	merges := []string{"▁ t", "h e", "▁t he", "世 界"}
	return toks, merges
}

func TestEncodeRawUTF8(t *testing.T) {
	toks, merges := rawVocab()
	p, _ := pretokenize.Lookup("gemma4")
	m, err := New(toks, merges, p)
	if err != nil {
		t.Fatal(err)
	}
	id := map[string]int32{}
	for i, s := range toks {
		id[s] = int32(i)
	}
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"▁the", []string{"▁the"}},
		{"the▁世界", []string{"t", "he", "▁", "世界"}},
		{"a\n\n\nb", []string{"a", "\n", "\n", "\n", "b"}}, // "\n\n\n" is no token: merged as usual (no merge here)
		{"a\n\nb", []string{"a", "\n\n", "b"}},
		{"é", []string{"<0xC3>", "<0xA9>"}}, // no token: its bytes
	} {
		got := m.Encode(nil, []byte(c.in))
		var want []int32
		for _, s := range c.want {
			want = append(want, id[s])
		}
		if !reflect.DeepEqual(got, want) {
			var gs []string
			for _, g := range got {
				gs = append(gs, toks[g])
			}
			t.Errorf("%q: got %q, want %q", c.in, gs, c.want)
		}
	}
}

// FuzzEncodeRaw: the raw-UTF-8 models spell their (escaped) input exactly,
// every byte no token covers coming back as its <0xNN> token.
func FuzzEncodeRaw(f *testing.F) {
	toks, merges := rawVocab()
	var models []*Model
	for _, name := range pretokenize.Names() {
		if p, _ := pretokenize.Lookup(name); p.RawBytes {
			m, err := New(toks, merges, p)
			if err != nil {
				f.Fatal(err)
			}
			models = append(models, m)
		}
	}
	for _, s := range []string{"▁the▁世界", "a\n\n\nb", "é\n", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !utf8.ValidString(in) {
			return
		}
		for _, m := range models {
			var b []byte
			for _, id := range m.Encode(nil, []byte(in)) {
				s := toks[id]
				if len(s) == 6 && strings.HasPrefix(s, "<0x") {
					var v byte
					fmt.Sscanf(s[3:5], "%02X", &v)
					b = append(b, v)
				} else {
					b = append(b, s...)
				}
			}
			if string(b) != in {
				t.Fatalf("%s: %q spells %q", m.pre.Name, in, b)
			}
		}
	})
}
