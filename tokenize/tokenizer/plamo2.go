package tokenizer

import (
	"fmt"
	"math"
	"unicode/utf8"

	"ppl.dev/tokenize/internal/vocab"
)

// plamo2Model is llama.cpp's PLaMo-2 tokenizer (llm_tokenizer_plamo2): a
// Viterbi search over the code points of a text for the cut into tokens
// with the largest total score, each score rounded to an integer as
// round(score·1e4); a code point no token covers costs 1e7 and becomes the
// <0xNN> tokens of its UTF-8 bytes. At one position the candidates are
// tried longest first, the unknown code point last, and a later one wins
// only with a strictly better total. Every token that is not a byte token
// takes part, control tokens too. BOS and EOS follow the file's flags
// (default off).
//
// llama.cpp runs the same tokenizer for PLaMo-3, with one switch
// (preSegment): PLaMo-2 drops a leading U+FEFF and searches the whole text;
// PLaMo-3 keeps the U+FEFF, cuts the text into segments first
// (plamo3Segments) and searches each segment on its own, so that no token
// spans a cut.
type plamo2Model struct {
	root       *plamoNode
	bytes      [256]int32
	preSegment bool
}

type plamoNode struct {
	next  map[rune]*plamoNode
	id    int32 // token ending here, -1 for none
	score int32
}

const (
	plamoInvalid = -20000000
	plamoUnknown = -10000000
)

// newPLaMo builds the tokenizer of a PLaMo-2 vocabulary, or of PLaMo-3's
// (plamo3: segment the text first).
func newPLaMo(v *vocab.Vocab, scores []float32, attrs []uint16, plamo3 bool) (*plamo2Model, error) {
	m := &plamo2Model{root: &plamoNode{id: -1}, preSegment: plamo3}
	for i := range m.bytes {
		m.bytes[i] = -1
	}
	for id := range v.Len() {
		s := v.Token(int32(id))
		if attrs[id]&attrByte != 0 {
			if b, ok := byteTokenValue(s); ok {
				m.bytes[b] = int32(id)
			}
			continue
		}
		n := m.root
		for _, r := range s {
			c, ok := n.next[r]
			if !ok {
				if n.next == nil {
					n.next = map[rune]*plamoNode{}
				}
				c = &plamoNode{id: -1}
				n.next[r] = c
			}
			n = c
		}
		if n == m.root {
			continue
		}
		sc := int32(plamoInvalid)
		if f := float64(scores[id]); !math.IsNaN(f) && !math.IsInf(f, 0) {
			sc = int32(math.Round(f * 1e4))
		}
		if n.id < 0 { // llama.cpp maps a text to its first id
			n.id = int32(id)
		}
		n.score = sc
	}
	for b, id := range m.bytes {
		if id < 0 {
			name := "PLaMo-2"
			if plamo3 {
				name = "PLaMo-3"
			}
			return nil, fmt.Errorf("%s vocabulary (%s) without the byte token <0x%02X>", name, KeyTokens, b)
		}
	}
	return m, nil
}

func (m *plamo2Model) encode(dst []int32, text []byte) []int32 {
	cps := []rune(string(text))
	if !m.preSegment {
		if len(cps) > 0 && cps[0] == 0xFEFF {
			cps = cps[1:]
		}
		return m.search(dst, cps)
	}
	for _, s := range plamo3Segments(cps) {
		dst = m.search(dst, cps[s[0]:s[1]])
	}
	return dst
}

// search appends the tokens of the best-scoring cut of cps.
func (m *plamo2Model) search(dst []int32, cps []rune) []int32 {
	n := len(cps)
	if n == 0 {
		return dst
	}
	best := make([]int64, n+1)
	length := make([]int32, n+1)
	tokID := make([]int32, n+1)
	var cand []*plamoNode
	var candLen []int32
	for i := n - 1; i >= 0; i-- {
		best[i] = 1 << 60
		// the tokens that start at i, longest first
		cand, candLen = cand[:0], candLen[:0]
		nd := m.root
		for j := i; j < n; j++ {
			c, ok := nd.next[cps[j]]
			if !ok {
				break
			}
			nd = c
			if nd.id >= 0 {
				cand = append(cand, nd)
				candLen = append(candLen, int32(j-i+1))
			}
		}
		for k := len(cand) - 1; k >= 0; k-- {
			if sc := cand[k].score; sc > plamoInvalid {
				if s := best[i+int(candLen[k])] - int64(sc); s < best[i] {
					best[i], length[i], tokID[i] = s, candLen[k], cand[k].id
				}
			}
		}
		if s := best[i+1] - plamoUnknown; s < best[i] {
			best[i], length[i], tokID[i] = s, 1, -1
		}
	}
	var buf [utf8.UTFMax]byte
	for pos := 0; pos < n; pos += int(length[pos]) {
		if tokID[pos] >= 0 {
			dst = append(dst, tokID[pos])
			continue
		}
		for _, b := range buf[:utf8.EncodeRune(buf[:], cps[pos])] {
			dst = append(dst, m.bytes[b])
		}
	}
	return dst
}
