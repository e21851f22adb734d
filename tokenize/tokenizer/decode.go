package tokenizer

import (
	"strings"

	"ppl.dev/tokenize/bpe"
	"ppl.dev/tokenize/spm"
)

// Decode implements Tokenizer, following llama.cpp's token_to_piece with
// special = false: control and unknown tokens write nothing, user-defined
// tokens their text, byte tokens their byte, normal tokens their text with
// "▁" as a space (SentencePiece) or mapped back from the GPT-2 alphabet.
func (t *tok) Decode(ids []int32) []byte {
	var out []byte
	for _, id := range ids {
		if id < 0 || int(id) >= t.voc.Len() {
			continue
		}
		a, s := t.attrs[id], t.text(id)
		if t.rwkv != nil { // every token its unescaped bytes
			out = append(out, rwkvUnescape(s)...)
			continue
		}
		switch {
		case a&(attrControl|attrUnknown) != 0:
		case a&attrUser != 0:
			out = append(out, s...)
		case a&attrNormal != 0:
			if t.plamo2 != nil {
				out = append(out, s...)
			} else if t.spm != nil || t.escape {
				out = append(out, strings.ReplaceAll(s, spm.Space, " ")...)
			} else if raw, ok := bpe.DecodeToken(s); ok {
				out = append(out, raw...)
			} else {
				out = append(out, s...)
			}
		case a&attrByte != 0:
			if b, ok := byteTokenValue(s); ok {
				out = append(out, b)
			}
		}
	}
	return out
}

// byteTokenValue parses "<0xNN>" (as llama.cpp does, by position).
func byteTokenValue(s string) (byte, bool) {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	var v byte
	for _, c := range []byte(s[3:5]) {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | (c - '0')
		case c >= 'A' && c <= 'F':
			v = v<<4 | (c - 'A' + 10)
		case c >= 'a' && c <= 'f':
			v = v<<4 | (c - 'a' + 10)
		default:
			return 0, false
		}
	}
	return v, true
}
