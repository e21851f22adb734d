package pretokenize

import (
	"sync"
	"unicode"
)

// Flag bits describe a code point the way llama.cpp's unicode_cpt_flags do:
// one general-category bit plus the White_Space property. Every code point
// below 0x110000 has at least one bit set (unassigned ones get Undefined), so
// a zero value means "outside the piece", as llama.cpp's OUT_OF_RANGE does.
const (
	Number     uint8 = 1 << iota // \p{N}
	Letter                       // \p{L}
	Whitespace                   // White_Space property (not a category)
	Mark                         // \p{M}
	Punct                        // \p{P}
	Symbol                       // \p{S}
	Other                        // \p{C} (Cc, Cf, Co, Cs) and non-space \p{Z}
	Undefined                    // unassigned (Cn)
)

// otherTables are \p{C} without Cn and \p{Z}. (Go's unicode.C also holds
// the unassigned code points, which llama.cpp marks undefined instead.)
var otherTables = []*unicode.RangeTable{unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs, unicode.Z}

var asciiFlags [128]uint8

var table struct {
	once sync.Once
	f    []uint8
}

func init() {
	for r := rune(0); r < 128; r++ {
		asciiFlags[r] = computeFlags(r)
	}
}

// computeFlags classifies one code point with Go's Unicode tables (Unicode
// 15.0.0). llama.cpp's table comes from Python's regex module of its day;
// the two agree on every code point assigned in Unicode 15.0.
func computeFlags(r rune) uint8 {
	var f uint8
	switch {
	case unicode.IsLetter(r):
		f = Letter
	case unicode.IsNumber(r):
		f = Number
	case unicode.IsMark(r):
		f = Mark
	case unicode.IsPunct(r):
		f = Punct
	case unicode.IsSymbol(r):
		f = Symbol
	case unicode.In(r, otherTables...):
		f = Other
	default:
		f = Undefined
	}
	if isWhiteSpace(r) {
		f |= Whitespace
	}
	return f
}

// isWhiteSpace is the Unicode White_Space property, the set llama.cpp
// generates from PropList.txt.
func isWhiteSpace(r rune) bool {
	switch {
	case r >= 0x09 && r <= 0x0D, r == 0x20, r == 0x85, r == 0xA0, r == 0x1680,
		r >= 0x2000 && r <= 0x200A, r == 0x2028, r == 0x2029, r == 0x202F, r == 0x205F, r == 0x3000:
		return true
	}
	return false
}

func buildTable() {
	f := make([]uint8, unicode.MaxRune+1)
	for i := range f {
		f[i] = Undefined
	}
	set := func(t *unicode.RangeTable, bit uint8) {
		for _, r := range t.R16 {
			for c := uint32(r.Lo); c <= uint32(r.Hi); c += uint32(r.Stride) {
				f[c] = bit
			}
		}
		for _, r := range t.R32 {
			for c := r.Lo; c <= r.Hi; c += r.Stride {
				f[c] = bit
			}
		}
	}
	// Order matters only where tables overlap, and the categories do not.
	for _, t := range otherTables {
		set(t, Other)
	}
	set(unicode.S, Symbol)
	set(unicode.P, Punct)
	set(unicode.M, Mark)
	set(unicode.N, Number)
	set(unicode.L, Letter)
	for _, r := range unicode.White_Space.R16 {
		for c := uint32(r.Lo); c <= uint32(r.Hi); c += uint32(r.Stride) {
			f[c] |= Whitespace
		}
	}
	table.f = f
}

// Table returns the flags of every code point, indexed by code point
// (length 0x110000). It is built on first use and shared read-only.
func Table() []uint8 {
	table.once.Do(buildTable)
	return table.f
}

// Flags returns the flags of r, 0 for values outside Unicode.
func Flags(r rune) uint8 {
	if r >= 0 && r < 128 {
		return asciiFlags[r]
	}
	if r < 0 || r > unicode.MaxRune {
		return 0
	}
	return Table()[r]
}
