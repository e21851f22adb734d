// Package bpe is byte-level BPE (GPT-2, Llama 3, Qwen 2/3, ...) as
// llama.cpp's llm_tokenizer_bpe_session runs it: pre-tokenize a text
// fragment into pieces, map each piece's bytes to the GPT-2 alphabet, then
// repeatedly merge the adjacent pair with the lowest merge rank (leftmost
// first on ties) until no listed merge applies.
//
// Why it works in byte space: the GPT-2 alphabet maps each of the 256 bytes
// to one code point, so a piece of n bytes is n symbols and every token,
// merge side and merge result has a unique byte string. Interning those byte
// strings once ("pieces") turns the merge table into a map from a pair of
// small integers to (rank, result), and the inner loop allocates nothing.
// A binary heap of candidate pairs over a doubly linked list of symbols keeps
// a long piece (a megabyte without spaces) at O(n log n), not O(n^2).
package bpe

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"ppl.dev/tokenize/internal/freelist"
	"ppl.dev/tokenize/internal/vocab"
	"ppl.dev/tokenize/pretokenize"
)

// Model is a byte-level BPE vocabulary with its merges and pre-tokenizer.
// It is safe for concurrent use.
type Model struct {
	pre *pretokenize.Pretokenizer

	vocab     *vocab.Vocab     // token texts and ids
	ntok      int32            // pieces below ntok are tokens
	extra     map[string]int32 // texts of merge sides and results that are not tokens
	bytePiece [256]int32       // piece of each single byte
	// byteFallback is what llama.cpp emits for one byte of a final symbol
	// that is not a token: the tokens whose text is a single byte of the
	// byte's GPT-2 character (usually the character itself), -1 for none.
	byteFallback [256][2]int32
	merges       map[uint64]merge

	pool *freelist.List[*session]
}

type merge struct {
	rank   int32
	result int32
}

// byteRune is the GPT-2 byte-to-unicode table (llama.cpp's
// unicode_byte_to_utf8_map): printable Latin-1 bytes map to themselves, the
// other 68 to U+0100 upwards in byte order.
var byteRune [256]rune

// byteText is byteRune[b] as UTF-8.
var byteText [256]string

// runeByte inverts byteRune for code points below 0x144; -1 elsewhere.
var runeByte [0x144]int16

func init() {
	for i := range runeByte {
		runeByte[i] = -1
	}
	n := rune(0)
	for b := 0; b < 256; b++ {
		if (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteRune[b] = rune(b)
		} else {
			byteRune[b] = 256 + n
			n++
		}
		runeByte[byteRune[b]] = int16(b)
		byteText[b] = string(byteRune[b])
	}
}

// DecodeToken returns the bytes a token text in the GPT-2 alphabet stands
// for, and false when it has a character outside that alphabet.
func DecodeToken(s string) ([]byte, bool) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r < 0 || int(r) >= len(runeByte) || runeByte[r] < 0 {
			return nil, false
		}
		out = append(out, byte(runeByte[r]))
	}
	return out, true
}

// EncodeBytes maps raw bytes to the GPT-2 alphabet (for tests and tools).
func EncodeBytes(b []byte) string { return string(appendEncoded(nil, b)) }

func appendEncoded(dst, b []byte) []byte {
	for _, c := range b {
		dst = append(dst, byteText[c]...)
	}
	return dst
}

func pairKey(l, r int32) uint64 { return uint64(uint32(l))<<32 | uint64(uint32(r)) }

// New builds a model from token texts (index = id, in the GPT-2 alphabet)
// and merges ("left right", rank = index; the first of duplicates wins, as
// llama.cpp's map emplace does). Of duplicate token texts the first id
// wins.
//
// Symbols are identified by "pieces": a token's piece is its id, and the
// rare merge side or result that is not a token gets a piece above the
// vocabulary. Equal pieces mean equal text, which is all the merge loop
// needs to know.
func New(tokens []string, merges []string, pre *pretokenize.Pretokenizer) (*Model, error) {
	if pre == nil {
		return nil, fmt.Errorf("bpe: no pre-tokenizer")
	}
	v, err := vocab.New(tokens)
	if err != nil {
		return nil, fmt.Errorf("bpe: %w", err)
	}
	return FromVocab(v, len(merges), func(i int) string { return merges[i] }, pre)
}

// FromVocab is New on a vocabulary that is already indexed (package
// tokenizer shares one between its models), with the merges given by their
// count and mergeAt(rank) (so that they need not be a []string). The model
// keeps v, which must not change afterwards; it does not keep the merges.
func FromVocab(v *vocab.Vocab, nMerges int, mergeAt func(rank int) string, pre *pretokenize.Pretokenizer) (*Model, error) {
	if pre == nil {
		return nil, fmt.Errorf("bpe: no pre-tokenizer")
	}
	m := &Model{
		pre:    pre,
		vocab:  v,
		ntok:   int32(v.Len()),
		extra:  map[string]int32{},
		merges: make(map[uint64]merge, nMerges),
	}
	for b := 0; b < 256; b++ {
		m.byteFallback[b] = [2]int32{-1, -1}
		if pre.RawBytes {
			// Gemma 4 style: a byte that no symbol covers is its <0xNN> token.
			m.bytePiece[b] = -1
			if b < utf8.RuneSelf {
				m.bytePiece[b] = m.lookup(string(rune(b)))
			}
			if id, ok := v.ID(fmt.Sprintf("<0x%02X>", b)); ok {
				m.byteFallback[b][0] = id
			}
			continue
		}
		m.bytePiece[b] = m.piece(byteText[b])
		for i := 0; i < len(byteText[b]); i++ {
			if id, ok := v.ID(byteText[b][i : i+1]); ok {
				m.byteFallback[b][i] = id
			}
		}
	}
	var buf []byte
	for rank := range nMerges {
		s := mergeAt(rank)
		// llama.cpp splits at the first space after the first byte.
		sp := -1
		for i := 1; i < len(s); i++ {
			if s[i] == ' ' {
				sp = i
				break
			}
		}
		if sp < 0 || sp == len(s)-1 {
			continue // llama.cpp keys it with an empty side, which no pair matches
		}
		lp, rp := m.piece(s[:sp]), m.piece(s[sp+1:])
		k := pairKey(lp, rp)
		if _, dup := m.merges[k]; dup {
			continue
		}
		buf = append(append(buf[:0], s[:sp]...), s[sp+1:]...)
		res, ok := v.IDBytes(buf)
		if !ok {
			res = m.piece(string(buf))
		}
		m.merges[k] = merge{rank: int32(rank), result: res}
	}
	m.pool = freelist.New(newSession)
	return m, nil
}

// piece returns the piece of a text in the GPT-2 alphabet.
func (m *Model) piece(s string) int32 {
	if id, ok := m.vocab.ID(s); ok {
		return id
	}
	if p, ok := m.extra[s]; ok {
		return p
	}
	p := m.ntok + int32(len(m.extra))
	m.extra[strings.Clone(s)] = p // s may point into the merges, which the model does not keep
	return p
}

// lookup is piece without interning: -1 for a text that is neither a token
// nor a merge side or result (such a symbol never merges).
func (m *Model) lookup(s string) int32 {
	if id, ok := m.vocab.ID(s); ok {
		return id
	}
	if p, ok := m.extra[s]; ok {
		return p
	}
	return -1
}

// Pretokenizer returns the model's pre-tokenizer.
func (m *Model) Pretokenizer() *pretokenize.Pretokenizer { return m.pre }

type symbol struct {
	piece      int32
	prev, next int32
	start, n   int32
}

type bigram struct {
	rank        int32
	left, right int32
	lp, rp      int32 // pieces of left and right when queued
	result      int32
}

// before orders the queue: lowest rank first, then leftmost.
func before(a, b *bigram) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.left < b.left)
}

const (
	cacheMaxWord    = 64
	cacheMaxEntries = 1 << 16
)

type session struct {
	text    pretokenize.Text
	bounds  []int
	scratch []int
	syms    []symbol
	heap    []bigram
	enc     []byte
	cache   map[string][]int32
}

func newSession() *session { return &session{cache: make(map[string][]int32)} }

// Encode appends the tokens of a text fragment to dst. The fragment should
// be valid UTF-8; invalid bytes are read as U+FFFD, as llama.cpp does.
func (m *Model) Encode(dst []int32, text []byte) []int32 {
	return m.encode(dst, text, true)
}

// EncodeRaw is Encode without llama.cpp's repair of invalid UTF-8: an
// invalid byte still splits as one U+FFFD code point, but its piece keeps
// the byte, so the tokens always decode to the text exactly (what a
// vocabulary trainer wants). On valid UTF-8 it is Encode.
func (m *Model) EncodeRaw(dst []int32, text []byte) []int32 {
	return m.encode(dst, text, false)
}

func (m *Model) encode(dst []int32, text []byte, repair bool) []int32 {
	s := m.pool.Get()
	defer m.put(s)
	s.text.Reset(text)
	if repair && !utf8.Valid(text) {
		// Re-encode so that each invalid byte becomes U+FFFD's three bytes.
		text = []byte(string(s.text.Runes))
		s.text.Reset(text)
	}
	s.bounds, s.scratch = m.pre.Split(s.bounds, &s.text, s.scratch)
	start := 0
	for _, end := range s.bounds {
		w := text[s.text.Offs[start]:s.text.Offs[end]]
		start = end
		dst = m.encodeWord(dst, w, s)
	}
	return dst
}

// put returns a session to the pool, without the buffers of a huge text.
func (m *Model) put(s *session) {
	const keep = 1 << 16
	if cap(s.syms) > keep || cap(s.heap) > keep {
		s.syms, s.heap = nil, nil
	}
	if cap(s.text.Runes) > 1<<22 {
		s.text = pretokenize.Text{}
		s.bounds, s.scratch = nil, nil
	}
	m.pool.Put(s)
}

func (m *Model) encodeWord(dst []int32, w []byte, s *session) []int32 {
	if len(w) == 0 {
		return dst
	}
	if len(w) <= cacheMaxWord {
		if ids, ok := s.cache[string(w)]; ok {
			return append(dst, ids...)
		}
	}
	n0 := len(dst)
	dst = m.mergeWord(dst, w, s)
	if len(w) <= cacheMaxWord {
		if len(s.cache) >= cacheMaxEntries {
			clear(s.cache)
		}
		s.cache[string(w)] = append([]int32(nil), dst[n0:]...)
	}
	return dst
}

func (m *Model) mergeWord(dst []int32, w []byte, s *session) []int32 {
	raw := m.pre.RawBytes
	if m.pre.IgnoreMerges {
		key := w
		if !raw {
			s.enc = appendEncoded(s.enc[:0], w)
			key = s.enc
		}
		if id, ok := m.vocab.IDBytes(key); ok {
			return append(dst, id)
		}
	}
	if m.pre.NewlineWords && allNewlines(w) {
		// Gemma 4: a run of newlines that is a token is that token.
		if id, ok := m.vocab.IDBytes(w); ok {
			return append(dst, id)
		}
	}
	n := len(w)
	if n == 1 {
		return m.emit(dst, m.bytePiece[w[0]], w)
	}
	if cap(s.syms) < n {
		s.syms = make([]symbol, 0, n)
	}
	if cap(s.heap) < n {
		s.heap = make([]bigram, 0, n+n/4)
	}
	syms := s.syms[:0]
	if raw {
		// One symbol per UTF-8 character (llama.cpp: unicode_len_utf8 of
		// its first byte, cut at the word end).
		for i := 0; i < len(w); {
			l := min(utf8Len(w[i]), len(w)-i)
			p := m.bytePiece[w[i]]
			if l > 1 {
				p = m.lookup(string(w[i : i+l]))
			}
			syms = append(syms, symbol{piece: p, prev: int32(len(syms) - 1), next: int32(len(syms) + 1), start: int32(i), n: int32(l)})
			i += l
		}
		syms[len(syms)-1].next = -1
		n = len(syms)
	} else {
		for i := 0; i < n; i++ {
			next := int32(i + 1)
			if i == n-1 {
				next = -1
			}
			syms = append(syms, symbol{piece: m.bytePiece[w[i]], prev: int32(i - 1), next: next, start: int32(i), n: 1})
		}
	}
	s.syms = syms
	h := s.heap[:0]
	for i := 1; i < n; i++ {
		if mg, ok := m.merges[pairKey(syms[i-1].piece, syms[i].piece)]; ok {
			h = append(h, bigram{rank: mg.rank, left: int32(i - 1), right: int32(i), lp: syms[i-1].piece, rp: syms[i].piece, result: mg.result})
		}
	}
	heapify(h)
	for len(h) > 0 {
		var b bigram
		b, h = pop(h)
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.piece != b.lp || r.piece != b.rp {
			continue // outdated
		}
		l.n += r.n
		l.piece = b.result
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		if l.prev >= 0 {
			p := &syms[l.prev]
			if mg, ok := m.merges[pairKey(p.piece, l.piece)]; ok {
				h = push(h, bigram{rank: mg.rank, left: l.prev, right: b.left, lp: p.piece, rp: l.piece, result: mg.result})
			}
		}
		if l.next >= 0 {
			q := &syms[l.next]
			if mg, ok := m.merges[pairKey(l.piece, q.piece)]; ok {
				h = push(h, bigram{rank: mg.rank, left: b.left, right: l.next, lp: l.piece, rp: q.piece, result: mg.result})
			}
		}
	}
	s.heap = h
	for i := int32(0); i != -1; i = syms[i].next {
		sy := &syms[i]
		dst = m.emit(dst, sy.piece, w[sy.start:sy.start+sy.n])
	}
	return dst
}

// emit appends the token of a final symbol, or llama.cpp's per-byte
// fallback when the symbol is not a token.
func (m *Model) emit(dst []int32, piece int32, raw []byte) []int32 {
	if piece >= 0 && piece < m.ntok {
		return append(dst, piece)
	}
	for _, c := range raw {
		for _, id := range m.byteFallback[c] {
			if id >= 0 {
				dst = append(dst, id)
			}
		}
	}
	return dst
}

// utf8Len is llama.cpp's unicode_len_utf8: the sequence length its first
// byte announces (1 for a stray continuation byte).
func utf8Len(b byte) int {
	switch {
	case b < 0xC0:
		return 1
	case b < 0xE0:
		return 2
	case b < 0xF0:
		return 3
	}
	return 4
}

func allNewlines(w []byte) bool {
	for _, c := range w {
		if c != '\n' {
			return false
		}
	}
	return len(w) > 0
}

func heapify(h []bigram) {
	for i := len(h)/2 - 1; i >= 0; i-- {
		down(h, i)
	}
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
	if last > 0 {
		down(h, 0)
	}
	return top, h
}

func down(h []bigram, i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		j := l
		if r := l + 1; r < n && before(&h[r], &h[l]) {
			j = r
		}
		if !before(&h[j], &h[i]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}
