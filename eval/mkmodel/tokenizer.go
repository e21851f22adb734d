package mkmodel

import (
	"fmt"
	"strings"

	"ppl.dev/eval/bpe"
	"ppl.dev/gguf"
)

// Tokenizer is the tokenizer.* metadata of a model and its size.
type Tokenizer struct {
	KVs    []gguf.KV
	NVocab int
}

// BPETokenizer returns the metadata of a byte-level BPE vocabulary as
// llama.cpp's convert script writes it for a GPT-2-style tokenizer: model
// "gpt2", pre-tokenizer "gpt-2" (llama.cpp's name for GPT-2's regex),
// tokens, types, merges, and BOS = EOS = "<|endoftext|>" (which must be
// one of the vocabulary's special tokens), not added to the text.
func BPETokenizer(v *bpe.Vocab) (Tokenizer, error) {
	tokens, types, merges := v.GGUF()
	eos := -1
	for i, t := range tokens {
		if i >= v.NumNormal() && t == "<|endoftext|>" {
			eos = i
			break
		}
	}
	if eos < 0 {
		return Tokenizer{}, fmt.Errorf("vocabulary has no <|endoftext|> token")
	}
	var kvs []gguf.KV
	add := func(k string, x any) {
		val, err := gguf.NewValue(x)
		if err != nil {
			panic(fmt.Sprintf("mkmodel: metadata %s: %v", k, err)) // our own values; cannot fail
		}
		kvs = append(kvs, gguf.KV{Key: k, Value: val})
	}
	add("tokenizer.ggml.model", "gpt2")
	add("tokenizer.ggml.pre", "gpt-2")
	add("tokenizer.ggml.tokens", tokens)
	add("tokenizer.ggml.token_type", types)
	add("tokenizer.ggml.merges", merges)
	add("tokenizer.ggml.bos_token_id", uint32(eos))
	add("tokenizer.ggml.eos_token_id", uint32(eos))
	add("tokenizer.ggml.add_bos_token", false)
	return Tokenizer{KVs: kvs, NVocab: len(tokens)}, nil
}

// TokenizerFrom copies every tokenizer.* key of an existing GGUF model, in
// file order, so a generated model tokenizes exactly as that one does.
func TokenizerFrom(path string) (Tokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return Tokenizer{}, err
	}
	defer f.Close()
	var t Tokenizer
	for _, kv := range f.Metadata {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			t.KVs = append(t.KVs, gguf.KV{Key: kv.Key, Value: copyValue(kv.Value)})
		}
	}
	toks, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return Tokenizer{}, fmt.Errorf("%s: %w", path, err)
	}
	t.NVocab = len(toks)
	return t, nil
}

// copyValue detaches a value from the mapped file it was read from.
func copyValue(v gguf.Value) gguf.Value {
	var x any
	switch a := v.Any().(type) {
	case []string:
		c := make([]string, len(a))
		for i, s := range a {
			c[i] = strings.Clone(s)
		}
		x = c
	case string:
		x = strings.Clone(a)
	case []int32:
		x = append([]int32(nil), a...)
	case []float32:
		x = append([]float32(nil), a...)
	case []uint32:
		x = append([]uint32(nil), a...)
	case []uint8:
		x = append([]uint8(nil), a...)
	default:
		return v
	}
	c, err := gguf.NewValue(x)
	if err != nil {
		return v
	}
	return c
}

// Truncate keeps a SentencePiece vocabulary's first n tokens (their
// tokens, scores and types), for models whose size grows with the
// vocabulary (Gemma 3n's per-layer embedding: 256 values per layer and
// token); the special token ids must be among them. A BPE vocabulary,
// whose merges name later tokens, is refused.
func (t Tokenizer) Truncate(n int) (Tokenizer, error) {
	if n <= 0 || n > t.NVocab {
		return Tokenizer{}, fmt.Errorf("mkmodel: truncate a vocabulary of %d tokens to %d", t.NVocab, n)
	}
	out := Tokenizer{NVocab: n}
	for _, kv := range t.KVs {
		v := kv.Value
		var x any
		switch kv.Key {
		case "tokenizer.ggml.merges":
			return Tokenizer{}, fmt.Errorf("mkmodel: a BPE vocabulary (with merges) cannot be truncated")
		case "tokenizer.ggml.tokens":
			x = v.Any().([]string)[:n]
		case "tokenizer.ggml.scores":
			x = v.Any().([]float32)[:n]
		case "tokenizer.ggml.token_type":
			x = v.Any().([]int32)[:n]
		case "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id":
			if id, ok := v.Any().(uint32); ok && int(id) >= n {
				return Tokenizer{}, fmt.Errorf("mkmodel: %s = %d is past the first %d tokens", kv.Key, id, n)
			}
		}
		if x != nil {
			var err error
			if v, err = gguf.NewValue(x); err != nil {
				return Tokenizer{}, err
			}
		}
		out.KVs = append(out.KVs, gguf.KV{Key: kv.Key, Value: v})
	}
	return out, nil
}
