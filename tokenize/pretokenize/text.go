package pretokenize

import "unicode/utf8"

// Text is a fragment decoded for splitting: its code points, their flags
// and their byte offsets. Reset reuses the slices, so one Text serves many
// fragments without allocating.
type Text struct {
	Runes []rune
	Flags []uint8
	// Offs[i] is the byte offset of Runes[i] in the source; Offs[len(Runes)]
	// is the source length.
	Offs []int32
}

// Reset decodes b. Bytes that are not valid UTF-8 become U+FFFD one byte at
// a time, as llama.cpp's unicode_cpts_from_utf8 does (callers normally
// validate first).
func (t *Text) Reset(b []byte) {
	// A text of n bytes has at most n code points: size once, never grow.
	if cap(t.Runes) < len(b) {
		t.Runes = make([]rune, 0, len(b))
		t.Flags = make([]uint8, 0, len(b))
	}
	if cap(t.Offs) < len(b)+1 {
		t.Offs = make([]int32, 0, len(b)+1)
	}
	t.Runes = t.Runes[:0]
	t.Flags = t.Flags[:0]
	t.Offs = t.Offs[:0]
	var tab []uint8
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			t.Runes = append(t.Runes, rune(c))
			t.Flags = append(t.Flags, asciiFlags[c])
			t.Offs = append(t.Offs, int32(i))
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if tab == nil {
			tab = Table()
		}
		t.Runes = append(t.Runes, r)
		t.Flags = append(t.Flags, tab[r])
		t.Offs = append(t.Offs, int32(i))
		i += n
	}
	t.Offs = append(t.Offs, int32(len(b)))
}

// Len returns the number of code points.
func (t *Text) Len() int { return len(t.Runes) }

// flag returns the flags of position p of the piece ending at end, 0 past it.
func (t *Text) flag(p, end int) uint8 {
	if p < end {
		return t.Flags[p]
	}
	return 0
}

// cp returns the code point at p of the piece ending at end, -1 past it.
func (t *Text) cp(p, end int) rune {
	if p < end {
		return t.Runes[p]
	}
	return -1
}

// wide is the code point that llama.cpp's std::wregex fallback sees: non-ASCII
// whitespace is replaced by U+000B so that \s matches it.
func (t *Text) wide(p int) rune {
	r := t.Runes[p]
	if r > 0x7F && t.Flags[p]&Whitespace != 0 {
		return 0x0B
	}
	return r
}

// isSpaceC reports whether r is \s of std::regex in the C locale.
func isSpaceC(r rune) bool {
	return r == ' ' || (r >= '\t' && r <= '\r')
}
