// Package testmodel writes tiny GGUF files that hold only a tokenizer, for
// the tests of the tools that read one (ppl-tokenize's unit tests and the
// end-to-end scripts in tests/).
package testmodel

import (
	"fmt"

	"ppl.dev/gguf"
)

// WriteTinySPM writes a GGUF file with only a small SentencePiece
// tokenizer (no tensors): enough for ppl-tokenize. Its 278 tokens are
// <unk>, <s>, </s>, the 256 byte tokens and a few pieces of "hello, world".
func WriteTinySPM(path string) error {
	tokens := []string{"<unk>", "<s>", "</s>"}
	types := []int32{2, 3, 3}
	for b := 0; b < 256; b++ {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		types = append(types, 6)
	}
	for _, p := range []string{"▁", "h", "e", "l", "o", "w", "r", "d", ",", "he", "ll", "llo", "hello", "▁hello", "▁w", "or", "▁wor", "ld", "▁world"} {
		tokens = append(tokens, p)
		types = append(types, 1)
	}
	scores := make([]float32, len(tokens))
	for i := range scores {
		scores[i] = -float32(i)
	}
	w := gguf.NewWriter()
	w.Add("general.architecture", "llama")
	w.Add("general.name", "tiny")
	w.Add("tokenizer.ggml.model", "llama")
	w.Add("tokenizer.ggml.tokens", tokens)
	w.Add("tokenizer.ggml.scores", scores)
	w.Add("tokenizer.ggml.token_type", types)
	w.Add("tokenizer.ggml.bos_token_id", uint32(1))
	w.Add("tokenizer.ggml.eos_token_id", uint32(2))
	w.Add("tokenizer.ggml.add_bos_token", true)
	w.Add("tokenizer.ggml.add_eos_token", false)
	return w.WriteFile(path)
}

// WriteRWKVBytes writes a tokenizer-only RWKV World vocabulary to path:
// "<s>" (id 0, BOS and EOS), then the 256 bytes in order, printable ASCII
// as itself and the others escaped as World vocabularies write them (\n,
// \t, \r, \\, \xNN), with tokenizer.ggml.add_bos_token = addBOS.
func WriteRWKVBytes(path string, addBOS bool) error {
	tokens, types := []string{"<s>"}, []int32{3}
	for b := 0; b < 256; b++ {
		var s string
		switch {
		case b == '\\':
			s = `\\`
		case b == '\n':
			s = `\n`
		case b == '\t':
			s = `\t`
		case b == '\r':
			s = `\r`
		case b >= 0x20 && b < 0x7f:
			s = string(rune(b))
		default:
			s = fmt.Sprintf(`\x%02x`, b)
		}
		tokens, types = append(tokens, s), append(types, 1)
	}
	w := gguf.NewWriter()
	w.Add("general.architecture", "rwkv6")
	w.Add("tokenizer.ggml.model", "rwkv")
	w.Add("tokenizer.ggml.tokens", tokens)
	w.Add("tokenizer.ggml.token_type", types)
	w.Add("tokenizer.ggml.bos_token_id", uint32(0))
	w.Add("tokenizer.ggml.eos_token_id", uint32(0))
	w.Add("tokenizer.ggml.add_bos_token", addBOS)
	return w.WriteFile(path)
}
