// Package bpe trains and applies byte-level BPE vocabularies of the GPT-2
// kind, as llama.cpp loads them from GGUF (tokenizer.ggml.model "gpt2",
// pre-tokenizer "gpt-2").
//
// Why our own: the bundled demo model must be built from nothing but this
// repository, deterministically, and its perplexity must mean something.
// A vocabulary trained here on the held-out corpus gives the demo model
// real tokens (whole words, common Chinese characters, Go keywords) whose
// bigram statistics the model then encodes.
//
// Training is the textbook algorithm on pre-tokenized pieces: start from the
// 256 byte tokens, repeatedly merge the most frequent adjacent pair (ties go
// to the pair of smaller token ids), stop at the requested size or when no
// pair occurs twice. Encoding applies the merges in rank order within each
// piece, lowest rank first and leftmost first among equal ranks, which is
// what llama.cpp's BPE session does, so Encode gives the tokens ppl-tokenize
// and llama.cpp give for the same vocabulary.
package bpe

// byteRunes maps each byte to the printable rune GPT-2 uses for it
// (bytes_to_unicode): printable Latin-1 bytes map to themselves, the other
// 68 to U+0100 onwards in byte order, so a space is 'Ġ' (U+0120) and a
// newline 'Ċ' (U+010A).
var byteRunes [256]rune

func init() {
	n := rune(0)
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF {
			byteRunes[b] = rune(b)
		} else {
			byteRunes[b] = 0x100 + n
			n++
		}
	}
}

// ByteString returns b with every byte mapped to its GPT-2 rune: the form
// in which tokens and merges are stored in GGUF.
func ByteString(b []byte) string {
	rs := make([]rune, len(b))
	for i, c := range b {
		rs[i] = byteRunes[c]
	}
	return string(rs)
}
