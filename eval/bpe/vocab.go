package bpe

import (
	"fmt"
	"strings"

	tbpe "ppl.dev/tokenize/bpe"
)

// Vocab is a byte-level BPE vocabulary: token i is the byte string
// Tokens[i], and no two tokens are equal. Ids 0..255 are the single bytes
// in byte order, then the merged tokens in order of creation, then the
// special tokens.
type Vocab struct {
	Tokens [][]byte
	// Merges[r] is the merge of rank r: it joins two tokens into
	// Result[r]. Two merges can make the same token ("ab"+"c" and
	// "a"+"bc"), so there may be more merges than merged tokens.
	Merges  [][2]int32
	Result  []int32
	Special []string // control tokens, after the normal ones
	normal  int      // number of byte and merged tokens
	model   *tbpe.Model
}

// NumNormal returns the number of normal (byte and merged) tokens; the
// special tokens follow them.
func (v *Vocab) NumNormal() int { return v.normal }

// Size returns the number of tokens, special ones included.
func (v *Vocab) Size() int { return len(v.Tokens) }

// Encode returns the token ids of text as ppl.dev/tokenize/bpe encodes it
// with the vocabulary's GGUF arrays and the "gpt-2" pre-tokenizer: merges
// applied by rank (lowest first; leftmost first among equal ranks) within
// each piece. Special tokens are never produced. Invalid UTF-8 bytes stay
// byte tokens (EncodeRaw), so the tokens always spell text.
func (v *Vocab) Encode(text []byte) []int32 {
	if v.model == nil {
		v.index()
	}
	return v.model.EncodeRaw(nil, text)
}

// index builds the encoder from the vocabulary's GGUF form.
func (v *Vocab) index() {
	tokens, _, merges := v.GGUF()
	m, err := tbpe.New(tokens, merges, gpt2)
	if err != nil {
		panic("bpe: " + err.Error()) // New fails only without a pre-tokenizer
	}
	v.model = m
}

// GGUF returns the vocabulary as GGUF tokenizer arrays: the tokens and the
// merges in GPT-2's byte-to-rune form ("Ġ t"), and the token types (1
// normal, 3 control).
func (v *Vocab) GGUF() (tokens []string, types []int32, merges []string) {
	for i, t := range v.Tokens {
		if i < v.NumNormal() {
			tokens = append(tokens, tbpe.EncodeBytes(t))
			types = append(types, 1)
		} else {
			tokens = append(tokens, string(t))
			types = append(types, 3)
		}
	}
	for _, m := range v.Merges {
		merges = append(merges, tbpe.EncodeBytes(v.Tokens[m[0]])+" "+tbpe.EncodeBytes(v.Tokens[m[1]]))
	}
	return tokens, types, merges
}

// FromGGUF rebuilds a vocabulary from GGUF tokenizer arrays: tokens in
// GPT-2's byte-to-rune form, their types (normal tokens first, then
// control tokens), and the merges in rank order. The first 256 tokens must
// be the single bytes in byte order, as Train lays them out.
func FromGGUF(tokens []string, types []int32, merges []string) (*Vocab, error) {
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
		b, ok := tbpe.DecodeToken(t)
		if !ok {
			return nil, fmt.Errorf("bpe: token %d: rune %U is not a GPT-2 byte rune", i, firstNonByteRune(t))
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

// firstNonByteRune returns the first rune of s outside the GPT-2 byte
// alphabet, for an error message.
func firstNonByteRune(s string) rune {
	for _, r := range s {
		if _, ok := tbpe.DecodeToken(string(r)); !ok {
			return r
		}
	}
	return 0
}
