package pretokenize

// Tekken (Mistral Nemo and later) splits on letter case. llama.cpp runs
//
//	[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+
//	|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*
//	|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// through std::regex on the collapsed text, where every non-ASCII letter is
// the same byte: "upper" (UL) is A-Z or any non-ASCII letter, "lower" (LL)
// is a-z or any non-ASCII letter. The scanner below follows the backtracking
// of that expression alternative by alternative.

func (t *Text) tkLetter(p, end int) bool { return p < end && t.Flags[p]&Letter != 0 }

func (t *Text) tkUpper(p, end int) bool {
	if !t.tkLetter(p, end) {
		return false
	}
	r := t.Runes[p]
	return r >= 0x80 || (r >= 'A' && r <= 'Z')
}

func (t *Text) tkLower(p, end int) bool {
	if !t.tkLetter(p, end) {
		return false
	}
	r := t.Runes[p]
	return r >= 0x80 || (r >= 'a' && r <= 'z')
}

// tkPrefix is [^\r\n\p{L}\p{N}].
func (t *Text) tkPrefix(p, end int) bool {
	if p >= end {
		return false
	}
	r, f := t.Runes[p], t.Flags[p]
	return r != '\r' && r != '\n' && f&(Letter|Number) == 0
}

// tkAlt1 matches UL*LL+ at p: the greedy UL* gives back one code point at
// a time until LL+ can start.
func (t *Text) tkAlt1(p, end int) (int, bool) {
	u := 0
	for t.tkUpper(p+u, end) {
		u++
	}
	for k := u; k >= 0; k-- {
		if t.tkLower(p+k, end) {
			e := p + k + 1
			for t.tkLower(e, end) {
				e++
			}
			return e, true
		}
	}
	return 0, false
}

// tkAlt2 matches UL+LL* at p.
func (t *Text) tkAlt2(p, end int) (int, bool) {
	e := p
	for t.tkUpper(e, end) {
		e++
	}
	if e == p {
		return 0, false
	}
	for t.tkLower(e, end) {
		e++
	}
	return e, true
}

// caseRule is the Tekken pattern and its o200k (GPT-4o, gpt-oss) sibling,
// which llama.cpp writes
//
//	[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+C?
//	|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*C?
//	|\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// with C = (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]) for
// o200k (absent for Tekken) and D = 3 for o200k, 1 for Tekken. (The
// tokenizer.json pattern also counts \p{M} in both letter classes;
// llama.cpp's adaptation does not, and neither do we.) The optional C is
// greedy and nothing after it can fail, so it extends whichever word the
// alternatives without it found.
type caseRule struct {
	suffix    bool
	maxDigits int
}

var splitTekken = caseRule{maxDigits: 1}.stage()

func (r caseRule) stage() stage {
	return func(dst []int, t *Text, start, end int) []int {
		for pos := start; pos < end; {
			f := t.Flags[pos]
			// Letters: alternatives 1 and 2, each first with the optional prefix.
			if e, ok := t.tkWord(pos, end); ok {
				pos = e
				if r.suffix && t.cp(pos, end) == '\'' {
					pos = t.contraction(pos, end)
				}
				dst = append(dst, pos)
				continue
			}
			if f&Number != 0 { // \p{N}{1,D}
				ini := pos
				for pos < end && t.Flags[pos]&Number != 0 && pos-ini < r.maxDigits {
					pos++
				}
				dst = append(dst, pos)
				continue
			}
			// <space>?[^\s\p{L}\p{N}]+[\r\n/]*
			if p, ok := t.punctRun(pos, end); ok {
				pos = p
				for r := t.cp(pos, end); r == '\r' || r == '\n' || r == '/'; r = t.cp(pos, end) {
					pos++
				}
				dst = append(dst, pos)
				continue
			}
			pos = t.spaceTail(pos, end) // \s*[\r\n]+|\s+(?!\S)|\s+
			dst = append(dst, pos)
		}
		return dst
	}
}

// tkWord tries alternatives 1 and 2 at pos.
func (t *Text) tkWord(pos, end int) (int, bool) {
	pre := t.tkPrefix(pos, end)
	if pre {
		if e, ok := t.tkAlt1(pos+1, end); ok {
			return e, true
		}
	}
	if e, ok := t.tkAlt1(pos, end); ok {
		return e, true
	}
	if pre {
		if e, ok := t.tkAlt2(pos+1, end); ok {
			return e, true
		}
	}
	return t.tkAlt2(pos, end)
}
