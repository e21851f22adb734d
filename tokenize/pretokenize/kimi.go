package pretokenize

// isHan is llama.cpp's unicode_cpt_is_han: the CJK ideograph blocks.
func isHan(r rune) bool {
	switch {
	case r >= 0x4E00 && r <= 0x9FFF, r >= 0x3400 && r <= 0x4DBF, r >= 0x20000 && r <= 0x2A6DF,
		r >= 0x2A700 && r <= 0x2B73F, r >= 0x2B740 && r <= 0x2B81F, r >= 0x2B820 && r <= 0x2CEAF,
		r >= 0x2CEB0 && r <= 0x2EBEF, r >= 0xF900 && r <= 0xFAFF, r >= 0x2F800 && r <= 0x2FA1F:
		return true
	}
	return false
}

// splitKimiK2 is Kimi K2's pattern (tokenization_kimi.py)
//
//	[\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// as llama.cpp's custom splitter runs it: Han runs; otherwise a run of
// non-Han letters (case plays no part), after an optional prefix, with an
// optional contraction; then as Llama-3.
func splitKimiK2(dst []int, t *Text, start, end int) []int {
	letter := func(p int) bool { return p < end && t.Flags[p]&Letter != 0 && !isHan(t.Runes[p]) }
	for pos := start; pos < end; {
		c, f := t.Runes[pos], t.Flags[pos]
		if isHan(c) {
			for pos < end && isHan(t.Runes[pos]) {
				pos++
			}
			dst = append(dst, pos)
			continue
		}
		lead := !(c == '\r' || c == '\n' || f&(Letter|Number) != 0)
		if (f&Letter != 0 && !isHan(c)) || (lead && letter(pos+1)) {
			if lead {
				pos++
			}
			for letter(pos) {
				pos++
			}
			if t.cp(pos, end) == '\'' {
				pos = t.contraction(pos, end)
			}
			dst = append(dst, pos)
			continue
		}
		if f&Number != 0 { // \p{N}{1,3}
			ini := pos
			for pos < end && t.Flags[pos]&Number != 0 && pos-ini < 3 {
				pos++
			}
			dst = append(dst, pos)
			continue
		}
		// <space>?[^\s\p{L}\p{N}]+[\r\n]*
		if p, ok := t.punctRun(pos, end); ok {
			pos = p
			for r := t.cp(pos, end); r == '\r' || r == '\n'; r = t.cp(pos, end) {
				pos++
			}
			dst = append(dst, pos)
			continue
		}
		pos = t.spaceTail(pos, end)
		dst = append(dst, pos)
	}
	return dst
}
