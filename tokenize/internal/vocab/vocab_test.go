package vocab

import (
	"fmt"
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	tokens := []string{"a", "", "b", "ab", "a b", "\u2581the", "a", "\x00", strings.Repeat("x", 300), "b"}
	v, err := New(tokens)
	if err != nil {
		t.Fatal(err)
	}
	if v.Len() != len(tokens) {
		t.Fatalf("Len = %d, want %d", v.Len(), len(tokens))
	}
	for i, s := range tokens {
		if got := v.Token(int32(i)); got != s {
			t.Errorf("Token(%d) = %q, want %q", i, got, s)
		}
	}
	// The first id of duplicates wins.
	want := map[string]int32{"a": 0, "": 1, "b": 2, "ab": 3, "a b": 4, "\u2581the": 5, "\x00": 7, strings.Repeat("x", 300): 8}
	for s, id := range want {
		got, ok := v.ID(s)
		if !ok || got != id {
			t.Errorf("ID(%q) = %d, %v, want %d", s, got, ok, id)
		}
		if got, ok := v.IDBytes([]byte(s)); !ok || got != id {
			t.Errorf("IDBytes(%q) = %d, %v, want %d", s, got, ok, id)
		}
	}
	for _, s := range []string{"c", "a ", "ba", "\u2581", "\x00\x00", strings.Repeat("x", 299)} {
		if id, ok := v.ID(s); ok {
			t.Errorf("ID(%q) = %d, want none", s, id)
		}
	}
	if a, b, ok := v.Duplicate(); !ok || a != 0 || b != 6 {
		t.Errorf("Duplicate = %d, %d, %v, want 0, 6, true", a, b, ok)
	}
}

// TestMany checks every id of a vocabulary large enough to fill many
// probe runs, and texts that are not tokens.
func TestMany(t *testing.T) {
	const n = 100_000
	tokens := make([]string, n)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("t%x", i)
	}
	v, err := New(tokens)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := v.Duplicate(); ok {
		t.Fatal("duplicates reported")
	}
	for i, s := range tokens {
		if id, ok := v.ID(s); !ok || id != int32(i) {
			t.Fatalf("ID(%q) = %d, %v, want %d", s, id, ok, i)
		}
		if id, ok := v.ID(s + "!"); ok {
			t.Fatalf("ID(%q) = %d, want none", s+"!", id)
		}
	}
	// 1.5 slots a token, 4 bytes each; the text and n+1 offsets.
	if got, want := v.Bytes(), len(v.data)+4*(n+1)+4*(n+n/2+8); got != want {
		t.Errorf("Bytes = %d, want %d", got, want)
	}
}

func TestEmpty(t *testing.T) {
	v, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.Len() != 0 {
		t.Errorf("Len = %d", v.Len())
	}
	if id, ok := v.ID("a"); ok {
		t.Errorf("ID(a) = %d in an empty vocabulary", id)
	}
}

func TestFromArena(t *testing.T) {
	data := []byte("abcde")
	v, err := FromArena(data, []uint32{0, 1, 3, 3, 5})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"a", "bc", "", "de"} {
		if got := v.Token(int32(i)); got != want {
			t.Errorf("Token(%d) = %q, want %q", i, got, want)
		}
	}
	if id, ok := v.ID("de"); !ok || id != 3 {
		t.Errorf("ID(de) = %d, %v", id, ok)
	}
	for _, tc := range []struct {
		offs []uint32
		want string
	}{
		{nil, "vocab: offsets must start at 0"},
		{[]uint32{1, 2}, "vocab: offsets must start at 0"},
		{[]uint32{0, 3, 2}, "vocab: offset 2 of token 1 out of order or beyond the 5 bytes of text"},
		{[]uint32{0, 6}, "vocab: offset 6 of token 0 out of order or beyond the 5 bytes of text"},
	} {
		if _, err := FromArena(data, tc.offs); err == nil || err.Error() != tc.want {
			t.Errorf("FromArena(%v) = %v, want %q", tc.offs, err, tc.want)
		}
	}
}
