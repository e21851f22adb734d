// Package spm is SentencePiece BPE with scores, as llama.cpp's
// llm_tokenizer_spm_session runs it for tokenizer.ggml.model "llama"
// (Llama 1/2, Mistral 7B v0.1, TinyLlama, ...): spaces become U+2581 "▁",
// the text is cut into UTF-8 characters, and the adjacent pair whose
// concatenation is the vocabulary token with the highest score is merged
// (leftmost first on ties) until no pair forms a token. A character that is
// not a token falls back to its bytes as <0xNN> tokens.
//
// Why chunks: llama.cpp merges over the whole fragment at once. When no
// token has "▁" right after a character other than "▁" (true of every
// SentencePiece vocabulary trained with whitespace splitting, checked at
// New), no merge can cross the start of a "▁" run, and the merges inside
// each chunk happen in the same relative order as in the whole. So the text
// is cut there, each chunk merged alone, and repeated chunks (words) are
// served from a cache: same tokens, a fraction of the work.
package spm

import (
	"bytes"
	"fmt"

	"ppl.dev/tokenize/internal/freelist"
	"ppl.dev/tokenize/internal/vocab"
)

// Model is a SentencePiece vocabulary. It is safe for concurrent use.
type Model struct {
	vocab   *vocab.Vocab
	scores  []float32
	byteTok [256]int32 // <0xNN> token (else the 1-byte token) of each byte, -1 for none
	chunked bool
	pool    *freelist.List[*session]
}

// Space is the escaped space, U+2581.
const Space = "\u2581"

// New builds a model from token texts (index = id) and their scores. Of
// duplicate texts the first id is the one encoding emits.
func New(tokens []string, scores []float32) (*Model, error) {
	v, err := vocab.New(tokens)
	if err != nil {
		return nil, fmt.Errorf("spm: %w", err)
	}
	return FromVocab(v, scores)
}

// FromVocab is New on a vocabulary that is already indexed (package
// tokenizer shares one between its models). The model keeps v and scores,
// which must not change afterwards.
func FromVocab(v *vocab.Vocab, scores []float32) (*Model, error) {
	if len(scores) != v.Len() {
		return nil, fmt.Errorf("spm: %d scores for %d tokens", len(scores), v.Len())
	}
	m := &Model{vocab: v, scores: scores, chunked: true}
	for id := range v.Len() {
		if spaceAfterOther(v.Token(int32(id))) {
			m.chunked = false
			break
		}
	}
	const hex = "0123456789ABCDEF"
	for b := 0; b < 256; b++ {
		m.byteTok[b] = -1
		if id, ok := v.IDBytes([]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'}); ok {
			m.byteTok[b] = id
		} else if id, ok := v.IDBytes([]byte{byte(b)}); ok {
			m.byteTok[b] = id
		}
	}
	m.pool = freelist.New(func() *session { return &session{cache: make(map[string][]int32)} })
	return m, nil
}

// charLen is llama.cpp's unicode_len_utf8: the length a lead byte announces
// (1 for continuation bytes), without validation.
func charLen(c byte) int {
	switch c >> 4 {
	case 0xC, 0xD:
		return 2
	case 0xE:
		return 3
	case 0xF:
		return 4
	}
	return 1
}

// spaceAfterOther reports whether t, cut into characters as the text is,
// has a "▁" right after a character that is not "▁".
func spaceAfterOther(t string) bool {
	prevSpace := true
	for i := 0; i < len(t); {
		n := min(charLen(t[i]), len(t)-i)
		isSpace := t[i:i+n] == Space
		if isSpace && !prevSpace {
			return true
		}
		prevSpace = isSpace
		i += n
	}
	return false
}

// Chunked reports whether the vocabulary allows merging word by word.
func (m *Model) Chunked() bool { return m.chunked }

type symbol struct {
	start, n   int32
	prev, next int32
}

type bigram struct {
	score       float32
	left, right int32
	size        int32
}

// before orders the queue like llama.cpp's comparator: highest score first,
// then leftmost.
func before(a, b *bigram) bool {
	return b.score < a.score || (b.score == a.score && b.left > a.left)
}

const (
	cacheMaxChunk   = 64
	cacheMaxEntries = 1 << 16
)

type session struct {
	buf   []byte
	syms  []symbol
	heap  []bigram
	cache map[string][]int32
}

// ByteError reports a character with no token and no byte token for one of
// its bytes (llama.cpp aborts on it).
type ByteError struct{ Byte byte }

func (e *ByteError) Error() string {
	return fmt.Sprintf("spm: no token for byte 0x%02X and no byte-fallback token <0x%02X>", e.Byte, e.Byte)
}

// Encode appends the tokens of a text fragment to dst. With prefix, a space
// is put in front of it first (llama.cpp's add_space_prefix rule, applied
// by the caller at the start of the text and after special tokens).
func (m *Model) Encode(dst []int32, text []byte, prefix bool) ([]int32, error) {
	s := m.pool.Get()
	defer m.put(s)
	buf := s.buf[:0]
	if prefix {
		buf = append(buf, Space...)
	}
	for {
		i := bytes.IndexByte(text, ' ')
		if i < 0 {
			buf = append(buf, text...)
			break
		}
		buf = append(append(buf, text[:i]...), Space...)
		text = text[i+1:]
	}
	s.buf = buf
	if !m.chunked {
		return m.encodeChunk(dst, buf, s)
	}
	start := 0
	prevSpace := true
	var err error
	for i := 0; i < len(buf); {
		n := min(charLen(buf[i]), len(buf)-i)
		isSpace := n == 3 && buf[i] == 0xE2 && buf[i+1] == 0x96 && buf[i+2] == 0x81
		if isSpace && !prevSpace && i > start {
			if dst, err = m.cachedChunk(dst, buf[start:i], s); err != nil {
				return dst, err
			}
			start = i
		}
		prevSpace = isSpace
		i += n
	}
	return m.cachedChunk(dst, buf[start:], s)
}

// put returns a session to the pool, without the buffers of a huge text.
func (m *Model) put(s *session) {
	const keep = 1 << 16
	if cap(s.syms) > keep || cap(s.heap) > keep {
		s.syms, s.heap = nil, nil
	}
	if cap(s.buf) > 1<<20 {
		s.buf = nil
	}
	m.pool.Put(s)
}

func (m *Model) cachedChunk(dst []int32, c []byte, s *session) ([]int32, error) {
	if len(c) == 0 {
		return dst, nil
	}
	if len(c) > cacheMaxChunk {
		return m.encodeChunk(dst, c, s)
	}
	if ids, ok := s.cache[string(c)]; ok {
		return append(dst, ids...), nil
	}
	n0 := len(dst)
	dst, err := m.encodeChunk(dst, c, s)
	if err != nil {
		return dst, err
	}
	if len(s.cache) >= cacheMaxEntries {
		clear(s.cache)
	}
	s.cache[string(c)] = append([]int32(nil), dst[n0:]...)
	return dst, nil
}

// encodeChunk is llm_tokenizer_spm_session::tokenize on escaped text.
func (m *Model) encodeChunk(dst []int32, text []byte, s *session) ([]int32, error) {
	if len(text) == 0 {
		return dst, nil
	}
	if cap(s.syms) < len(text) {
		s.syms = make([]symbol, 0, len(text))
	}
	if cap(s.heap) < len(text) {
		s.heap = make([]bigram, 0, len(text)+len(text)/4)
	}
	syms := s.syms[:0]
	for off := 0; off < len(text); {
		n := min(charLen(text[off]), len(text)-off)
		idx := int32(len(syms))
		next := idx + 1
		if off+n == len(text) {
			next = -1
		}
		syms = append(syms, symbol{start: int32(off), n: int32(n), prev: idx - 1, next: next})
		off += n
	}
	s.syms = syms
	h := s.heap[:0]
	try := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		a, b := &syms[l], &syms[r]
		t := text[a.start : a.start+a.n+b.n]
		id, ok := m.vocab.IDBytes(t)
		if !ok {
			return
		}
		h = push(h, bigram{score: m.scores[id], left: l, right: r, size: a.n + b.n})
	}
	for i := int32(1); i < int32(len(syms)); i++ {
		try(i-1, i)
	}
	for len(h) > 0 {
		var b bigram
		b, h = pop(h)
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		try(l.prev, b.left)
		try(b.left, l.next)
	}
	s.heap = h
	for i := int32(0); i != -1; i = syms[i].next {
		sy := &syms[i]
		t := text[sy.start : sy.start+sy.n]
		if id, ok := m.vocab.IDBytes(t); ok {
			dst = append(dst, id)
			continue
		}
		for _, c := range t {
			id := m.byteTok[c]
			if id < 0 {
				return dst, &ByteError{Byte: c}
			}
			dst = append(dst, id)
		}
	}
	return dst, nil
}

func push(h []bigram, b bigram) []bigram {
	h = append(h, b)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !before(&h[i], &h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

func pop(h []bigram) (bigram, []bigram) {
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	n := len(h)
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && before(&h[r], &h[l]) {
			j = r
		}
		if !before(&h[j], &h[i]) {
			break
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
	return top, h
}
