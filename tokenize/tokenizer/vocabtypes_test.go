package tokenizer

import (
	"fmt"
	"reflect"
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
