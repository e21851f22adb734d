package bpe

import (
	"fmt"
	"strings"
)

// Encode returns the token ids of text: Split into pieces, then within each
// piece the merges applied by rank (lowest first; leftmost first among
// equal ranks) until none applies. Special tokens are never produced.
func (v *Vocab) Encode(text []byte) []int32 {
	if v.rank == nil {
		v.index()
	}
	var out []int32
	cache := map[string][]int32{}
	for _, p := range Split(text) {
		ids, ok := cache[string(p)]
		if !ok {
			ids = v.encodePiece(p)
			cache[string(p)] = ids
		}
		out = append(out, ids...)
	}
	return out
}

func (v *Vocab) encodePiece(p []byte) []int32 {
	s := make([]int32, len(p))
	for i, b := range p {
		s[i] = int32(b)
	}
	for len(s) > 1 {
		best, at := int32(-1), -1
		for i := 0; i+1 < len(s); i++ {
			if r, ok := v.rank[[2]int32{s[i], s[i+1]}]; ok && (best < 0 || r < best) {
				best, at = r, i
			}
		}
		if at < 0 {
			break
		}
		s[at] = v.Result[best]
		s = append(s[:at+1], s[at+2:]...)
	}
	return s
}

// GGUF returns the vocabulary as GGUF tokenizer arrays: the tokens and the
// merges in GPT-2's byte-to-rune form ("Ġ t"), and the token types (1
// normal, 3 control).
func (v *Vocab) GGUF() (tokens []string, types []int32, merges []string) {
	for i, t := range v.Tokens {
		if i < v.NumNormal() {
			tokens = append(tokens, ByteString(t))
			types = append(types, 1)
		} else {
			tokens = append(tokens, string(t))
			types = append(types, 3)
		}
	}
	for _, m := range v.Merges {
		merges = append(merges, ByteString(v.Tokens[m[0]])+" "+ByteString(v.Tokens[m[1]]))
	}
	return tokens, types, merges
}

// FromGGUF rebuilds a vocabulary from GGUF tokenizer arrays: tokens in
// GPT-2's byte-to-rune form, their types (normal tokens first, then
// control tokens), and the merges in rank order. The first 256 tokens must
// be the single bytes in byte order, as Train lays them out.
func FromGGUF(tokens []string, types []int32, merges []string) (*Vocab, error) {
	unrune := map[rune]byte{}
	for b, r := range byteRunes {
		unrune[r] = byte(b)
	}
	decode := func(s string) ([]byte, error) {
		var b []byte
		for _, r := range s {
			c, ok := unrune[r]
			if !ok {
				return nil, fmt.Errorf("rune %U is not a GPT-2 byte rune", r)
			}
			b = append(b, c)
		}
		return b, nil
	}
	if len(tokens) != len(types) || len(tokens) < 256 {
		return nil, fmt.Errorf("bpe: %d tokens and %d types", len(tokens), len(types))
	}
	v := &Vocab{}
	ids := map[string]int32{}
	for i, t := range tokens {
		if types[i] != 1 {
			if v.normal == 0 {
				v.normal = i
			}
			v.Special = append(v.Special, t)
			v.Tokens = append(v.Tokens, []byte(t))
			continue
		}
		if v.normal != 0 {
			return nil, fmt.Errorf("bpe: normal token %d after a special token", i)
		}
		b, err := decode(t)
		if err != nil {
			return nil, fmt.Errorf("bpe: token %d: %w", i, err)
		}
		if i < 256 && (len(b) != 1 || b[0] != byte(i)) {
			return nil, fmt.Errorf("bpe: token %d is %q, want byte %d", i, t, i)
		}
		v.Tokens = append(v.Tokens, b)
		ids[t] = int32(i)
	}
	if v.normal == 0 {
		v.normal = len(tokens)
	}
	for r, m := range merges {
		a, b, ok := strings.Cut(m, " ")
		ia, oka := ids[a]
		ib, okb := ids[b]
		res, okr := ids[a+b]
		if !ok || !oka || !okb || !okr {
			return nil, fmt.Errorf("bpe: merge %d %q: unknown tokens", r, m)
		}
		v.Merges = append(v.Merges, [2]int32{ia, ib})
		v.Result = append(v.Result, res)
	}
	v.index()
	return v, nil
}
