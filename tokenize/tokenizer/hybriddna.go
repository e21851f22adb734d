package tokenizer

import (
	"bytes"

	"ppl.dev/tokenize/bpe"
	"ppl.dev/tokenize/internal/vocab"
)

// dnaMarker ends the text of every k-mer token, dnaK is the k-mer length,
// and the tags are the tokens llama.cpp looks for by these texts.
const (
	dnaMarker = "\uE000"
	dnaK      = 6
	dnaOpen   = "<dna>"
	dnaClose  = "</dna>"
	dnaOOV    = "<oov>"
)

// dnaModel tokenizes HybriDNA's vocabulary (tokenizer.ggml.model
// "hybriddna"): a byte-level BPE vocabulary, read and pre-tokenized like
// "gpt2", plus DNA k-mers.
// llama.cpp (llm_tokenizer_hybriddna_session) tokenizes each text fragment
// as BPE except between "<dna>" and "</dna>":
//
//   - the tags themselves are emitted as their tokens, and the text before,
//     between and after DNA spans is BPE-tokenized piece by piece (so a
//     span ends a pre-tokenizer word);
//   - the sequence inside is upper-cased (ASCII only) and cut into k-mers
//     of 6 bytes from its start, the last one padded with 'A' to 6; each
//     k-mer is the token whose text is the k-mer followed by U+E000 (the
//     reserved marker that keeps k-mers apart from BPE tokens of the same
//     letters), or "<oov>" when there is none (a letter other than ACGT,
//     a space, a byte of a multi-byte character);
//   - a "<dna>" without a "</dna>" runs to the end of the fragment.
//
// The tags must be in the text of one fragment: a user-defined "</dna>" is
// cut out of the text first (as every user-defined token is), which leaves
// its "<dna>" unclosed inside its fragment. Without all three of "<dna>",
// "</dna>" and "<oov>" in the vocabulary, llama.cpp tokenizes as plain BPE.
//
// When it loads such a vocabulary, llama.cpp also erases the marker from
// the text of every token after "<oov>" whose text ends with it (and is
// longer), but keeps the marked texts for looking tokens up: the k-mers
// read as plain "ACGTAC" wherever a token's text is used (Token, Decode,
// the user-defined cut, the end-of-generation and FIM names), and only the
// k-mer search ever finds them by text.
type dnaModel struct {
	bpe              *bpe.Model
	voc              *vocab.Vocab
	open, close, oov int32
}

// newDNA returns the DNA tokenizer over a BPE model, or nil when the
// vocabulary lacks one of the tags (llama.cpp then tokenizes plain BPE).
func newDNA(v *vocab.Vocab, m *bpe.Model) *dnaModel {
	open, ok1 := v.ID(dnaOpen)
	closeID, ok2 := v.ID(dnaClose)
	oov, ok3 := v.ID(dnaOOV)
	if !ok1 || !ok2 || !ok3 {
		return nil
	}
	return &dnaModel{bpe: m, voc: v, open: open, close: closeID, oov: oov}
}

func (m *dnaModel) encode(dst []int32, text []byte) []int32 {
	for len(text) > 0 {
		i := bytes.Index(text, []byte(dnaOpen))
		if i < 0 {
			return m.bpe.Encode(dst, text)
		}
		if i > 0 {
			dst = m.bpe.Encode(dst, text[:i])
		}
		dst = append(dst, m.open)
		text = text[i+len(dnaOpen):]
		j := bytes.Index(text, []byte(dnaClose))
		if j < 0 {
			return m.kmers(dst, text)
		}
		dst = m.kmers(dst, text[:j])
		dst = append(dst, m.close)
		text = text[j+len(dnaClose):]
	}
	return dst
}

// kmers appends the k-mer tokens of a DNA sequence.
func (m *dnaModel) kmers(dst []int32, seq []byte) []int32 {
	var key [dnaK + len(dnaMarker)]byte
	copy(key[dnaK:], dnaMarker)
	for i := 0; i < len(seq); i += dnaK {
		for j := range dnaK {
			c := byte('A')
			if i+j < len(seq) {
				c = seq[i+j]
			}
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			key[j] = c
		}
		id, ok := m.voc.IDBytes(key[:])
		if !ok {
			id = m.oov
		}
		dst = append(dst, id)
	}
	return dst
}

// dnaStripFrom returns the id after which llama.cpp erases the k-mer
// marker from token texts: that of "<oov>" in a hybriddna vocabulary, -1
// when none is erased.
func dnaStripFrom(model string, v *vocab.Vocab) int32 {
	if model != "hybriddna" {
		return -1
	}
	if id, ok := v.ID(dnaOOV); ok {
		return id
	}
	return -1
}
