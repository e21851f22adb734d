package bpe

import (
	"unicode"
	"unicode/utf8"
)

// Split cuts text into the pieces of the GPT-2 pre-tokenizer
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// scanned the way llama.cpp's unicode_regex_split_custom_gpt2 does. The
// pieces are subslices of text and cover it exactly. Invalid UTF-8 bytes
// count as one code point of punctuation each.
func Split(text []byte) [][]byte {
	var runes []rune
	var offs []int
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRune(text[i:])
		runes = append(runes, r)
		offs = append(offs, i)
		i += n
	}
	offs = append(offs, len(text))
	end := len(runes)
	const (
		none = iota
		letter
		number
		space
		other
	)
	class := func(p int) int {
		if p >= end {
			return none
		}
		r := runes[p]
		switch {
		case r < utf8.RuneSelf && (r == ' ' || r >= '\t' && r <= '\r'):
			return space
		case r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'):
			return letter
		case r < utf8.RuneSelf && r >= '0' && r <= '9':
			return number
		case unicode.IsSpace(r):
			return space
		case unicode.IsLetter(r):
			return letter
		case unicode.IsNumber(r):
			return number
		}
		return other
	}
	var out [][]byte
	start := 0
	for pos := 0; pos < end; {
		c := runes[pos]
		if c == '\'' && pos+1 < end {
			n := runes[pos+1]
			if n == 's' || n == 't' || n == 'm' || n == 'd' {
				pos += 2
				out = append(out, text[offs[start]:offs[pos]])
				start = pos
				continue
			}
			if pos+2 < end {
				nn := runes[pos+2]
				if n == 'r' && nn == 'e' || n == 'v' && nn == 'e' || n == 'l' && nn == 'l' {
					pos += 3
					out = append(out, text[offs[start]:offs[pos]])
					start = pos
					continue
				}
			}
		}
		k := class(pos)
		if c == ' ' {
			k = class(pos + 1)
		}
		switch k {
		case letter, number, other:
			if c == ' ' {
				pos++
			}
			for class(pos) == k {
				pos++
			}
		default:
			n := 0
			for class(pos+n) == space {
				n++
			}
			switch {
			case n > 1 && pos+n < end: // \s+(?!\S)
				pos += n - 1
			case n > 0: // \s+
				pos += n
			default:
				pos++
			}
		}
		out = append(out, text[offs[start]:offs[pos]])
		start = pos
	}
	return out
}
