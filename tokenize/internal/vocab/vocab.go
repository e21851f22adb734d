// Package vocab is a vocabulary's token texts with an index from text to
// id, in a few flat arrays: what the tokenizers (spm, bpe and the ones of
// package tokenizer) share instead of each building a map[string]int32.
//
// Why: vocabularies reach millions of tokens of a few bytes each, and a
// map[string]int32 costs about 33 bytes a token besides the text (the
// 16-byte string header and the id in a slot, the map's control bytes and
// free slots), a []string 16 more, and each tokenizer kept both. Here a
// token costs its bytes, a 4-byte offset into them (the arena, which is
// gguf's StringArray storage, shared rather than copied) and 1.5 4-byte
// slots of an open-addressing hash table (2/3 full): 10 bytes besides the
// text, once.
//
// The table is linear probing over uint32 slots that hold id+1 in their
// low bits and a few bits of the text's hash in the others (all 32 bits
// the ids leave free), so that a probe compares texts only when the hash
// bits agree: a lookup of a text that is not a token, the common case in
// the merge loops, reads one or two cache lines of slots and no text. The
// table has 3n/2 slots, not a power of two, so its size does not double
// at unlucky vocabulary sizes; a hash picks its first slot by a multiply
// (Lemire's fast range reduction) instead of a mask.
package vocab

import (
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"unsafe"
)

// Vocab is a vocabulary: token texts by id and the id of each text. It is
// immutable and safe for concurrent use.
type Vocab struct {
	data   []byte   // token texts back to back
	offs   []uint32 // len = Len()+1; token i is data[offs[i]:offs[i+1]]
	slots  []uint32 // 0: empty; else tag | id+1
	idMask uint32   // the bits of a slot that hold id+1
	seed   maphash.Seed
	dupA   int32 // first duplicate found: id dupB has the text of dupA; -1 for none
	dupB   int32
}

// MaxTokens is the largest vocabulary (ids are int32).
const MaxTokens = math.MaxInt32 - 1

// FromArena indexes a vocabulary held as data and offs: token i is
// data[offs[i]:offs[i+1]] (gguf.StringArray's layout, shared, not copied;
// neither slice may change afterwards). Of duplicate texts the first id
// wins; Duplicate reports the first pair.
func FromArena(data []byte, offs []uint32) (*Vocab, error) {
	if len(offs) == 0 || offs[0] != 0 {
		return nil, fmt.Errorf("vocab: offsets must start at 0")
	}
	n := len(offs) - 1
	if n > MaxTokens {
		return nil, fmt.Errorf("vocab: %d tokens, at most %d", n, MaxTokens)
	}
	for i := 1; i < len(offs); i++ {
		if offs[i] < offs[i-1] || uint64(offs[i]) > uint64(len(data)) {
			return nil, fmt.Errorf("vocab: offset %d of token %d out of order or beyond the %d bytes of text", offs[i], i-1, len(data))
		}
	}
	v := &Vocab{data: data, offs: offs, seed: maphash.MakeSeed(), dupA: -1, dupB: -1}
	v.index()
	return v, nil
}

// New copies tokens into a Vocab (index = id). Of duplicate texts the
// first id wins; Duplicate reports the first pair.
func New(tokens []string) (*Vocab, error) {
	total := uint64(0)
	for _, t := range tokens {
		total += uint64(len(t))
	}
	if total > math.MaxUint32 {
		return nil, fmt.Errorf("vocab: %d bytes of token text, at most %d", total, uint64(math.MaxUint32))
	}
	data := make([]byte, 0, total)
	offs := make([]uint32, 1, len(tokens)+1)
	for _, t := range tokens {
		data = append(data, t...)
		offs = append(offs, uint32(len(data)))
	}
	return FromArena(data, offs)
}

func (v *Vocab) index() {
	n := v.Len()
	v.slots = make([]uint32, n+n/2+8)               // at most 3n/2+8 < 2^32 slots
	v.idMask = uint32(1)<<bits.Len32(uint32(n)) - 1 // holds n = largest id+1
	for id := range n {
		s := v.Token(int32(id))
		h := maphash.String(v.seed, s)
		tag := uint32(h>>32) &^ v.idMask
		for i := v.first(h); ; i = v.next(i) {
			e := v.slots[i]
			if e == 0 {
				v.slots[i] = tag | uint32(id+1)
				break
			}
			if e&^v.idMask == tag && v.Token(int32(e&v.idMask)-1) == s {
				if v.dupA < 0 {
					v.dupA, v.dupB = int32(e&v.idMask)-1, int32(id)
				}
				break
			}
		}
	}
}

// first is the slot where the probe for hash h starts: the low 32 bits of
// h scaled to [0, len(slots)).
func (v *Vocab) first(h uint64) uint32 {
	return uint32(uint64(uint32(h)) * uint64(len(v.slots)) >> 32)
}

// next is the slot after i, wrapping around.
func (v *Vocab) next(i uint32) uint32 {
	if i++; int(i) == len(v.slots) {
		return 0
	}
	return i
}

// Len returns the number of tokens.
func (v *Vocab) Len() int { return len(v.offs) - 1 }

// Token returns the text of token id (which must be in range); it shares
// the vocabulary's memory.
func (v *Vocab) Token(id int32) string {
	lo, hi := v.offs[id], v.offs[id+1]
	if lo == hi {
		return ""
	}
	return unsafe.String(&v.data[lo], hi-lo)
}

// ID returns the id of a text (the first, of duplicates).
func (v *Vocab) ID(s string) (int32, bool) {
	h := maphash.String(v.seed, s)
	tag := uint32(h>>32) &^ v.idMask
	for i := v.first(h); ; i = v.next(i) {
		e := v.slots[i]
		if e == 0 {
			return -1, false
		}
		if e&^v.idMask == tag {
			id := e&v.idMask - 1
			if lo, hi := v.offs[id], v.offs[id+1]; int(hi-lo) == len(s) && string(v.data[lo:hi]) == s {
				return int32(id), true
			}
		}
	}
}

// IDBytes is ID of a byte slice, without converting it.
func (v *Vocab) IDBytes(b []byte) (int32, bool) {
	return v.ID(unsafe.String(unsafe.SliceData(b), len(b)))
}

// Duplicate returns the first two ids found with the same text (a < b),
// and false when every text is unique.
func (v *Vocab) Duplicate() (a, b int32, ok bool) { return v.dupA, v.dupB, v.dupA >= 0 }

// Bytes returns the memory the vocabulary holds: its text, offsets and
// index.
func (v *Vocab) Bytes() int { return len(v.data) + 4*len(v.offs) + 4*len(v.slots) }
