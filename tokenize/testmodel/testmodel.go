// Package testmodel writes tiny GGUF files that hold only a tokenizer, for
// the tests of the tools that read one (ppl-tokenize's unit tests and the
// end-to-end scripts in tests/).
package testmodel

import (
	"fmt"
	"strings"
	"unicode/utf8"

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
// "<s>" (id 0, BOS and EOS), then the 256 bytes in order (RWKVEscape),
// with tokenizer.ggml.add_bos_token = addBOS.
func WriteRWKVBytes(path string, addBOS bool) error {
	tokens, types := []string{"<s>"}, []int32{3}
	for b := range 256 {
		tokens, types = append(tokens, RWKVEscape([]byte{byte(b)})), append(types, 1)
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

// RWKVEscape writes bytes as an RWKV World token: \t \n \r and \\
// escaped, other control bytes and the bytes of invalid UTF-8 as \xNN.
func RWKVEscape(b []byte) string {
	var sb strings.Builder
	valid := utf8.Valid(b)
	for _, c := range b {
		switch {
		case c == '\t':
			sb.WriteString(`\t`)
		case c == '\n':
			sb.WriteString(`\n`)
		case c == '\r':
			sb.WriteString(`\r`)
		case c == '\\':
			sb.WriteString(`\\`)
		case c < 0x20 || c == 0x7f || (c >= 0x80 && !valid):
			fmt.Fprintf(&sb, `\x%02x`, c)
		default:
			sb.WriteByte(c)
		}
	}
	return sb.String()
}
