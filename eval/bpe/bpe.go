// Package bpe trains byte-level BPE vocabularies of the GPT-2 kind, as
// llama.cpp loads them from GGUF (tokenizer.ggml.model "gpt2",
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
// pair occurs twice. Only training lives here: the pieces come from
// ppl.dev/tokenize/pretokenize's "gpt-2" pre-tokenizer and Vocab.Encode is
// ppl.dev/tokenize/bpe's encoder (both checked bit-exact against
// llama.cpp), so a vocabulary is trained on the very pieces it is later
// applied to, and Encode gives the tokens ppl-tokenize and llama.cpp give.
package bpe

import "ppl.dev/tokenize/pretokenize"

// gpt2 is llama.cpp's "gpt-2" pre-tokenizer, the one the vocabularies
// trained here are written for (see mkmodel.BPETokenizer).
var gpt2 = func() *pretokenize.Pretokenizer {
	p, err := pretokenize.Lookup("gpt-2")
	if err != nil {
		panic("bpe: " + err.Error()) // registered by pretokenize itself
	}
	return p
}()
