package tokenizer

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"math"
)

// identityVersion changes when the hashed fields or their encoding change.
const identityVersion = "ppl.dev/tokenize identity v1"

// identity hashes the definition as given plus the values that llama.cpp's
// defaults resolve to, each field length-prefixed so that no two
// definitions share an encoding.
func identity(c Config, t *tok) string {
	h := sha256.New()
	w := idWriter{h: h}
	w.str(identityVersion)
	w.str(c.Model)
	w.str(c.Pre)
	w.str(t.pre)
	w.strs(c.tokens())
	if c.Scores == nil {
		w.u64(math.MaxUint64)
	} else {
		w.u64(uint64(len(c.Scores)))
		for _, s := range c.Scores {
			w.u32(math.Float32bits(s))
		}
	}
	if c.Types == nil {
		w.u64(math.MaxUint64)
	} else {
		w.u64(uint64(len(c.Types)))
		for _, x := range c.Types {
			w.u32(uint32(x))
		}
	}
	if merges, ok := c.merges(); !ok {
		w.u64(math.MaxUint64)
	} else {
		w.strs(merges)
	}
	w.u32(uint32(t.bos))
	w.u32(uint32(t.eos))
	w.bool(t.addBOS)
	w.bool(t.addEOS)
	w.bool(t.prefix)
	for _, p := range []*uint32{c.UNK, c.EOT, c.EOM, c.FIMPre, c.FIMSuf, c.FIMMid, c.FIMPad, c.FIMRep, c.FIMSep} {
		if p == nil {
			w.u64(math.MaxUint64)
		} else {
			w.u64(uint64(*p))
		}
	}
	w.flush()
	return hex.EncodeToString(h.Sum(nil))
}

// idWriter buffers the many small fields into large hash writes.
type idWriter struct {
	h   hash.Hash
	buf []byte
}

func (w *idWriter) grow() {
	if len(w.buf) >= 1<<16 {
		w.flush()
	}
}

func (w *idWriter) flush() {
	w.h.Write(w.buf)
	w.buf = w.buf[:0]
}

func (w *idWriter) u64(x uint64) {
	w.buf = binary.LittleEndian.AppendUint64(w.buf, x)
	w.grow()
}

func (w *idWriter) u32(x uint32) {
	w.buf = binary.LittleEndian.AppendUint32(w.buf, x)
	w.grow()
}

func (w *idWriter) bool(b bool) {
	if b {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
	w.grow()
}

func (w *idWriter) str(s string) {
	w.buf = binary.LittleEndian.AppendUint64(w.buf, uint64(len(s)))
	w.buf = append(w.buf, s...)
	w.grow()
}

func (w *idWriter) strs(ss strs) {
	w.u64(uint64(ss.len()))
	for i := range ss.len() {
		w.str(ss.at(i))
	}
}
