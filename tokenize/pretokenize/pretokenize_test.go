package pretokenize

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func split(t testing.TB, pre, s string) []string {
	t.Helper()
	p, err := Lookup(pre)
	if err != nil {
		t.Fatal(err)
	}
	var txt Text
	txt.Reset([]byte(s))
	bounds, _ := p.Split(nil, &txt, nil)
	var out []string
	start := 0
	for _, e := range bounds {
		if e <= start {
			t.Fatalf("%s %q: bounds not increasing: %v", pre, s, bounds)
		}
		out = append(out, string(txt.Runes[start:e]))
		start = e
	}
	if start != txt.Len() {
		t.Fatalf("%s %q: bounds %v do not end at %d", pre, s, bounds, txt.Len())
	}
	return out
}

func TestSplit(t *testing.T) {
	for _, c := range []struct {
		pre, in string
		want    []string
	}{
		{"llama-bpe", "Hello world", []string{"Hello", " world"}},
		{"llama-bpe", "don't DON'T", []string{"don", "'t", " DON", "'T"}},
		{"llama-bpe", "they'll we've I'M", []string{"they", "'ll", " we", "'ve", " I", "'M"}},
		{"llama-bpe", "'sup", []string{"'s", "up"}},
		{"llama-bpe", "12345", []string{"123", "45"}},
		{"llama-bpe", "x1234567y", []string{"x", "123", "456", "7", "y"}},
		{"llama-bpe", "  hi", []string{" ", " hi"}},
		{"llama-bpe", "a\n\nb", []string{"a", "\n\n", "b"}},
		{"llama-bpe", "x  \n y", []string{"x", "  \n", " y"}},
		{"llama-bpe", "end  ", []string{"end", "  "}},
		{"llama-bpe", "(foo) ...\n\nbar", []string{"(foo", ")", " ...\n\n", "bar"}},
		{"llama-bpe", "\tword", []string{"\tword"}},
		{"llama-bpe", "\u3000word", []string{"\u3000word"}},
		{"llama-bpe", "e\u0301!", []string{"e", "\u0301!"}},
		{"llama-bpe", "CRLF\r\nline", []string{"CRLF", "\r\n", "line"}},
		{"llama-bpe", " ", []string{" "}},
		{"llama-bpe", "a ", []string{"a", " "}},
		{"qwen2", "12345 ab1", []string{"1", "2", "3", "4", "5", " ab", "1"}},
		{"qwen2", "don't", []string{"don", "'t"}},
		{"gpt-2", "Hello world", []string{"Hello", " world"}},
		{"gpt-2", "don't DON'T", []string{"don", "'t", " DON", "'", "T"}},
		{"gpt-2", "12345", []string{"12345"}},
		{"gpt-2", "a\n\nb", []string{"a", "\n", "\n", "b"}},
		{"gpt-2", "  hi", []string{" ", " hi"}},
		{"gpt-2", " 42 !!", []string{" 42", " !!"}},
		{"gpt-2", "\tword", []string{"\t", "word"}},
		{"default", "Hello, world! 12345", []string{"Hello", ",", " world", "!", " ", "123", "45"}},
		{"default", "a`b", []string{"a", "`", "b"}},
		{"starcoder", "x 123", []string{"x", " ", "1", "2", "3"}},
		{"deepseek-llm", "Hello 世界 123\n", []string{"Hello", " ", "世界", " ", "123", "\n"}},
		{"deepseek-llm", "a, b.", []string{"a", ",", " b", "."}},
		{"deepseek-llm", "end  ", []string{"end", "  "}},
		{"tekken", "HelloWorld ABC abc", []string{"Hello", "World", " ABC", " abc"}},
		{"tekken", "ÉCOLEétudiant ABCé", []string{"ÉCOLEétudiant", " ABCé"}},
		{"tekken", "a/b\n/", []string{"a", "/b", "\n", "/"}},
		{"tekken", "x12", []string{"x", "1", "2"}},
		// qwen35: marks count as letters, so a combining accent stays on its
		// base and one after a space starts a word; qwen2 splits them off.
		{"qwen35", "e\u0301t\u00e9 \u0301x", []string{"e\u0301t\u00e9", " \u0301x"}},
		{"qwen2", "e\u0301t\u00e9 \u0301x", []string{"e", "\u0301t\u00e9", " \u0301", "x"}},
		{"qwen35", "\u0915\u093f\u0924\u093e\u092c 12", []string{"\u0915\u093f\u0924\u093e\u092c", " ", "1", "2"}},
		{"qwen35", "don'T\r\n\r\n  x", []string{"don", "'T", "\r\n\r\n", " ", " x"}},
		// gpt-4o (o200k): case splits words, a contraction stays on its
		// word, digits go in threes, '/' and newlines follow punctuation.
		{"gpt-4o", "HelloWorld don't I'M", []string{"Hello", "World", " don't", " I'M"}},
		{"gpt-4o", "1234567 x1", []string{"123", "456", "7", " x", "1"}},
		{"gpt-4o", "a+/\n/b \U0001F600\u200d\U0001F600", []string{"a", "+/\n/", "b", " \U0001F600\u200d\U0001F600"}},
		{"gpt-4o", "\u4e16\u754c\u00c9T\u00c9 e\u0301", []string{"\u4e16\u754c\u00c9T\u00c9", " e", "\u0301"}},
		{"gpt-4o", "'s 'Sx", []string{"'s", " '", "Sx"}},
		// falcon: punctuation runs (backquote included) first, then GPT-2,
		// then every run of three ASCII digits.
		{"falcon", "a`b, 12345!", []string{"a", "`", "b", ",", " ", "123", "45", "!"}},
		// deepseek-coder: newlines alone, letters and punctuation runs with
		// one leading space, CJK runs, single digits.
		{"deepseek-coder", "x = foo(1, 23);\n\u4e16\u754c", []string{"x", " =", " foo", "(", "1", ",", " ", "2", "3", ");", "\n", "\u4e16\u754c"}},
		// deepseek-v3: digits in threes, CJK and kana runs, ASCII
		// punctuation joined to the letters after it.
		{"deepseek-v3", "12345 x.net \u3053\u3093\u306b\u3061\u306f\u4e16\u754c x~y", []string{"123", "45", " x", ".net", " ", "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c", " x", "~y"}},
		{"deepseek-v3", "e\u0301!!\n\n  a", []string{"e\u0301", "!!\n\n", " ", " a"}},
		// glm4: the Llama-3 split.
		{"glm4", "don't 12345", []string{"don", "'t", " ", "123", "45"}},
		// seed-coder: no newlines after punctuation.
		{"seed-coder", "x;\n", []string{"x", ";", "\n"}},
		// jais-2: whitespace in runs of powers of two.
		{"jais-2", "a" + strings.Repeat(" ", 13) + "b", []string{"a", strings.Repeat(" ", 8), strings.Repeat(" ", 4), " b"}},
		// kimi-k2: Han runs apart, letters regardless of case, contractions
		// kept, digits in threes.
		{"kimi-k2", "\u4f60\u597dHelloWorld's 12345 \u4e16x", []string{"\u4f60\u597d", "HelloWorld's", " ", "123", "45", " ", "\u4e16", "x"}},
		// bloom and viking: words with one leading space, split at
		// whitespace and sentence punctuation; viking splits digits too.
		{"bloom", "hello, world. (x)12", []string{"hello", ",", " world", ". (", "x", ")", "12"}},
		{"viking", "ab12 c", []string{"ab", "1", "2", " c"}},
		// chameleon: image codes whole (sentinels are cut first, then
		// split by the later stages), tabs, newlines and space pairs
		// alone, punctuation and digits alone.
		{"chameleon", "<sentinel:7>IMGIMGABZ  x\t1.5", []string{"<", "sentinel", ":", "7", ">", "IMGIMGABZ", "  ", "x", "\t", "1", ".", "5"}},
		// superbpe: no word split; ASCII digit runs in threes from the right.
		{"superbpe", "a b 1234567!", []string{"a b ", "1", "234", "567", "!"}},
		// afmoe: digit groups take what precedes them in the piece.
		{"afmoe", "\u200d12 x~1", []string{"\u200d12", " x", "~", "1"}},
		// afmoe's Asian-script class runs from U+8C48 to U+FAFF, private use
		// area included, which leaves the two spaces at a piece end.
		{"afmoe", "x  \ue000", []string{"x", "  ", "\ue000"}},
	} {
		if got := split(t, c.pre, c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %q:\n got %q\nwant %q", c.pre, c.in, got, c.want)
		}
	}
}

func TestLookupUnknown(t *testing.T) {
	_, err := Lookup("no-such-pre")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`"no-such-pre"`, "llama-bpe", "qwen2", "gpt-2", "default", "deepseek-llm", "tekken",
		"qwen35", "gpt-4o", "falcon", "deepseek-coder", "deepseek-v3", "glm4"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestFlags(t *testing.T) {
	for _, c := range []struct {
		r    rune
		want uint8
	}{
		{'a', Letter}, {'7', Number}, {' ', Other | Whitespace}, {'\n', Other | Whitespace},
		{'$', Symbol}, {'!', Punct}, {'\u0301', Mark}, {'\u00A0', Other | Whitespace},
		{'\u3000', Other | Whitespace}, {'世', Letter}, {'\u0378', Undefined}, {'\uE000', Other},
		{0x1F600, Symbol}, {'\u2028', Other | Whitespace}, {0x1C, Other}, {-1, 0}, {0x110000, 0},
	} {
		if got := Flags(c.r); got != c.want {
			t.Errorf("Flags(%U) = %#x, want %#x", c.r, got, c.want)
		}
	}
}

// TestSplitCovers checks on assorted inputs that every pre-tokenizer
// returns increasing bounds that cover the text.
func TestSplitCovers(t *testing.T) {
	inputs := []string{"", "a", " ", "\n", "\x00", "\r\n\r\n", strings.Repeat(" ", 100),
		"a\u0301\u0302 b", "😀😀 x", "\uFFFD\uFFFD", "1 2 3 4 5 6 7 8 9 0", "'''s'S", "\u2028\u2029\u0085"}
	for _, name := range Names() {
		for _, in := range inputs {
			got := split(t, name, in)
			if strings.Join(got, "") != in {
				t.Errorf("%s %q: pieces %q do not join to the input", name, in, got)
			}
		}
	}
}

func FuzzSplit(f *testing.F) {
	for _, s := range []string{"Hello world", "don't 123456", "a\r\n b  c\t", "世界 😀 e\u0301", "\xff\xfe"} {
		f.Add(s)
	}
	names := Names()
	f.Fuzz(func(t *testing.T, s string) {
		var txt Text
		txt.Reset([]byte(s))
		for _, name := range names {
			p, _ := Lookup(name)
			bounds, _ := p.Split(nil, &txt, nil)
			start := 0
			for _, e := range bounds {
				if e <= start || e > txt.Len() {
					t.Fatalf("%s %q: bad bounds %v", name, s, bounds)
				}
				start = e
			}
			if start != txt.Len() {
				t.Fatalf("%s %q: bounds %v end at %d of %d", name, s, bounds, start, txt.Len())
			}
		}
		if utf8.ValidString(s) && string(txt.Runes) != s {
			t.Fatalf("decode changed valid text")
		}
	})
}

func TestPiecesGPT2(t *testing.T) {
	p, err := Lookup("gpt-2")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Hello world", []string{"Hello", " world"}},
		{"it's they're we'll I'd", []string{"it", "'s", " they", "'re", " we", "'ll", " I", "'d"}},
		{"a  b", []string{"a", " ", " b"}},
		{"a   \n\nb", []string{"a", "   \n", "\n", "b"}},
		{"end  ", []string{"end", "  "}},
		{"x\ny", []string{"x", "\n", "y"}},
		{"v1.2 and 2024!", []string{"v", "1", ".", "2", " and", " 2024", "!"}},
		{"f(x) = y;", []string{"f", "(", "x", ")", " =", " y", ";"}},
		{"困惑度是 PPL。", []string{"困惑度是", " PPL", "。"}},
		{"  if err != nil {", []string{" ", " if", " err", " !=", " nil", " {"}},
		{"'", []string{"'"}},
		{"x'S", []string{"x", "'", "S"}},
		{"\t\tx", []string{"\t", "\t", "x"}},
		{"½ ²", []string{"½", " ²"}},
		{"a\xff\xfeb", []string{"a", "\xff\xfe", "b"}},
	} {
		var got []string
		for _, piece := range p.Pieces([]byte(c.in)) {
			got = append(got, string(piece))
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Pieces(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func FuzzPieces(f *testing.F) {
	for _, s := range []string{"Hello world", "a  b\n\n", "it's", "困惑度 123", "\xff\xfe x"} {
		f.Add([]byte(s))
	}
	names := Names()
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, name := range names {
			p, _ := Lookup(name)
			ps := p.Pieces(b)
			if got := bytes.Join(ps, nil); !bytes.Equal(got, b) {
				t.Fatalf("%s: pieces %q do not cover %q", name, ps, b)
			}
			for _, piece := range ps {
				if len(piece) == 0 {
					t.Fatalf("%s: empty piece in %q", name, ps)
				}
			}
		}
	})
}

// TestTable checks the lazily built table against the direct
// classification for every code point.
func TestTable(t *testing.T) {
	step := rune(1)
	if testing.Short() {
		step = 97
	}
	tab := Table()
	for r := rune(0); r < rune(len(tab)); r += step {
		if got, want := tab[r], computeFlags(r); got != want {
			t.Fatalf("table[%U] = %#x, computeFlags = %#x", r, got, want)
		}
	}
}
