package pretokenize

// A stage splits the piece [start, end) of t and appends the end offsets of
// its sub-pieces (in code points, absolute, ascending, the last one == end)
// to dst. Stages never produce empty pieces.
type stage func(dst []int, t *Text, start, end int) []int

// splitGPT2 is the GPT-2 pattern
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// as a scanner, decision for decision the one in llama.cpp's unicode.cpp.
func splitGPT2(dst []int, t *Text, start, end int) []int {
	for pos := start; pos < end; {
		c, f := t.Runes[pos], t.Flags[pos]
		if c == '\'' && pos+1 < end {
			n := t.Runes[pos+1]
			if n == 's' || n == 't' || n == 'm' || n == 'd' {
				pos += 2
				dst = append(dst, pos)
				continue
			}
			if pos+2 < end {
				nn := t.Runes[pos+2]
				if (n == 'r' && nn == 'e') || (n == 'v' && nn == 'e') || (n == 'l' && nn == 'l') {
					pos += 3
					dst = append(dst, pos)
					continue
				}
			}
		}
		f2 := f
		if c == ' ' {
			f2 = t.flag(pos+1, end)
		}
		switch {
		case f2&Letter != 0: // <space>?\p{L}+
			if c == ' ' {
				pos++
			}
			for t.flag(pos, end)&Letter != 0 {
				pos++
			}
		case f2&Number != 0: // <space>?\p{N}+
			if c == ' ' {
				pos++
			}
			for t.flag(pos, end)&Number != 0 {
				pos++
			}
		case f2&(Whitespace|Letter|Number) == 0 && f2 != 0: // <space>?[^\s\p{L}\p{N}]+
			pos, _ = t.punctRun(pos, end)
		default:
			n := 0
			for t.flag(pos+n, end)&Whitespace != 0 {
				n++
			}
			switch {
			case n > 1 && pos+n < end: // \s+(?!\S)
				pos += n - 1
			case n > 0: // \s+
				pos += n
			default: // no match
				pos++
			}
		}
		dst = append(dst, pos)
	}
	return dst
}

// llamaRule is the family of patterns that Llama-3 started:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?W+|\p{N}{1,D}| ?[^\s\p{N}W]+T*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// with the word class W (\p{L}, or [\p{L}\p{M}] for Qwen3.5, Youtu and
// tiny_aya, plus ZWNJ and ZWJ for k2-horizon), the digit run D and the
// punctuation tail T ([\r\n], [\r\n/], or nothing for Seed-Coder); Youtu
// and tiny_aya put the contractions after the word instead (their cased
// classes collapse to one in llama.cpp). D = 3 is llama.cpp's custom Llama-3
// splitter (k2-horizon has one of its own); the other members it runs
// through std::regex on its collapsed text, where, checked alternative by
// alternative, the expression matches exactly what this scanner does: every
// code point starts a match at the position the previous one ended, so the
// leftmost match is always the first alternative that applies there
// (reference_test.go checks it against the expressions themselves).
type llamaRule struct {
	noContractions bool  // drop the (?i:'s|...) alternative (ufakzeka)
	word           uint8 // flag bits of W: Letter, or Letter|Mark
	joiners        bool  // W also holds U+200C and U+200D (k2-horizon)
	punctStop      uint8 // flags that end the punctuation run; 0: \s, \p{N} and W
	maxDigits      int   // D; a large value for \p{N}+
	noTail         bool  // T empty
	slashTail      bool  // T is [\r\n/]
	suffix         bool  // the word takes an optional contraction after it: W+(?i:'s|...)?
	cascade        bool  // Jais-2's whitespace: \s{512}(?!\S)|...|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}
}

// llama3Splitter is the Llama-3 pattern with D = maxDigits (1 for Qwen2).
func llama3Splitter(maxDigits int) stage {
	return llamaRule{word: Letter, maxDigits: maxDigits}.stage()
}

func (r llamaRule) stage() stage {
	word := r.word
	punctOut := r.punctStop
	if punctOut == 0 {
		punctOut = Whitespace | Number | word
	}
	joiners, contractions := r.joiners, !r.noContractions
	return func(dst []int, t *Text, start, end int) []int {
		// W at p, written out where used: a closure would not be inlined,
		// and this loop is the hot path of Llama 3 and Qwen.
		for pos := start; pos < end; {
			c, f := t.Runes[pos], t.Flags[pos]
			if contractions && c == '\'' {
				if e := t.contraction(pos, end); e > pos {
					pos = e
					dst = append(dst, pos)
					continue
				}
			}
			// [^\r\n\p{L}\p{N}]?W+ (a mark as the optional prefix
			// ends where the run from it ends)
			if !(c == '\r' || c == '\n' || f&Number != 0) &&
				(f&word != 0 || t.flag(pos+1, end)&word != 0 || joiners && (isJoiner(t.cp(pos, end)) || isJoiner(t.cp(pos+1, end)))) {
				pos++
				for t.flag(pos, end)&word != 0 || joiners && isJoiner(t.cp(pos, end)) {
					pos++
				}
				if r.suffix && t.cp(pos, end) == '\'' {
					pos = t.contraction(pos, end)
				}
				dst = append(dst, pos)
				continue
			}
			// \p{N}{1,D}
			if f&Number != 0 {
				ini := pos
				for t.flag(pos, end)&Number != 0 {
					pos++
					if pos-ini >= r.maxDigits {
						dst = append(dst, pos)
						ini = pos
					}
				}
				if pos > ini {
					dst = append(dst, pos)
				}
				continue
			}
			// <space>?[^\s\p{N}W]+T*
			f2 := f
			if c == ' ' {
				f2 = t.flag(pos+1, end)
			}
			if f2&punctOut == 0 && f != 0 {
				if c == ' ' {
					pos++
				}
				for g := t.flag(pos, end); g&punctOut == 0 && g != 0; g = t.flag(pos, end) {
					pos++
				}
				if !r.noTail {
					for c := t.cp(pos, end); c == '\r' || c == '\n' || (r.slashTail && c == '/'); c = t.cp(pos, end) {
						pos++
					}
				}
				dst = append(dst, pos)
				continue
			}
			if r.cascade {
				pos = t.cascadeTail(pos, end)
			} else {
				pos = t.spaceTail(pos, end)
			}
			dst = append(dst, pos)
		}
		return dst
	}
}

// isJoiner reports ZWNJ and ZWJ, which k2-horizon counts as letters.
func isJoiner(r rune) bool { return r == 0x200C || r == 0x200D }

// contraction matches (?i:'s|'t|'re|'ve|'m|'ll|'d) at pos and returns the
// end of the match, pos when none. (llama.cpp lowercases with Unicode's
// table, but no other code point lowercases to one of these ASCII letters.)
func (t *Text) contraction(pos, end int) int {
	if t.Runes[pos] != '\'' || pos+1 >= end {
		return pos
	}
	n := asciiLower(t.Runes[pos+1])
	if n == 's' || n == 't' || n == 'm' || n == 'd' {
		return pos + 2
	}
	if pos+2 < end {
		nn := asciiLower(t.Runes[pos+2])
		if (n == 'r' && nn == 'e') || (n == 'v' && nn == 'e') || (n == 'l' && nn == 'l') {
			return pos + 3
		}
	}
	return pos
}

// punctRun matches <space>?[^\s\p{L}\p{N}]+ at pos: the position after
// the run, and whether there is one.
func (t *Text) punctRun(pos, end int) (int, bool) {
	p := pos
	if t.cp(p, end) == ' ' {
		p++
	}
	if g := t.flag(p, end); g&(Whitespace|Letter|Number) != 0 || g == 0 {
		return pos, false
	}
	for g := t.flag(p, end); g&(Whitespace|Letter|Number) == 0 && g != 0; g = t.flag(p, end) {
		p++
	}
	return p, true
}

// cascadeTail matches \s*[\r\n]+ or Jais-2's cascade of fixed-length
// whitespace runs at pos: \s{k}(?!\S) for k = 512, 256, ..., 4, then
// \s{1,2}(?!\S), then \s{1}. With n whitespace code points at pos, the
// first k <= n whose end is followed by whitespace or the piece end wins.
func (t *Text) cascadeTail(pos, end int) int {
	n, lastRN := 0, 0
	for t.flag(pos+n, end)&Whitespace != 0 {
		if r := t.Runes[pos+n]; r == '\r' || r == '\n' {
			lastRN = pos + n + 1
		}
		n++
	}
	if lastRN > 0 {
		return lastRN
	}
	if n == 0 {
		return pos + 1
	}
	ok := func(k int) bool { return k <= n && (k < n || pos+n == end) }
	for k := 512; k >= 4; k /= 2 {
		if ok(k) {
			return pos + k
		}
	}
	for _, k := range []int{2, 1} { // \s{1,2}(?!\S), greedy
		if ok(k) {
			return pos + k
		}
	}
	return pos + 1 // \s{1}
}

// spaceTail matches \s*[\r\n]+|\s+(?!\S)|\s+ at pos, the alternatives
// that end the Llama-3 (and Tekken) pattern, and returns the end of the
// match; pos+1 when none matches.
func (t *Text) spaceTail(pos, end int) int {
	n, lastRN := 0, 0
	for t.flag(pos+n, end)&Whitespace != 0 {
		if r := t.Runes[pos+n]; r == '\r' || r == '\n' {
			lastRN = pos + n + 1
		}
		n++
	}
	switch {
	case lastRN > 0: // \s*[\r\n]+
		return lastRN
	case n > 1 && pos+n < end: // \s+(?!\S)
		return pos + n - 1
	case n > 0: // \s+
		return pos + n
	}
	return pos + 1
}

func asciiLower(r rune) rune {
	if r >= 'A' && r <= 'Z' {
		return r + ('a' - 'A')
	}
	return r
}

// matcher finds the leftmost match in [from, end) of a regular expression
// that cannot match the empty string, as std::regex_search does.
type matcher func(t *Text, from, end int) (ms, me int, ok bool)

// regexStage turns a matcher into a stage the way llama.cpp's
// unicode_regex_split_stl does: matches and the gaps between them both
// become pieces.
func regexStage(m matcher) stage {
	return func(dst []int, t *Text, start, end int) []int {
		pos := start
		for pos < end {
			ms, me, ok := m(t, pos, end)
			if !ok {
				break
			}
			if ms > pos {
				dst = append(dst, ms)
			}
			dst = append(dst, me)
			pos = me
		}
		if pos < end {
			dst = append(dst, end)
		}
		return dst
	}
}

// runOf returns a matcher for in+, a run of code points satisfying in.
func runOf(in func(t *Text, p int) bool) matcher {
	return func(t *Text, from, end int) (int, int, bool) {
		for i := from; i < end; i++ {
			if in(t, i) {
				j := i + 1
				for j < end && in(t, j) {
					j++
				}
				return i, j, true
			}
		}
		return 0, 0, false
	}
}

// spaceRunOf returns a matcher for \s?in+ (\s of std::regex in the C locale,
// applied to the text llama.cpp hands to std::wregex).
func spaceRunOf(in func(t *Text, p int) bool) matcher {
	return func(t *Text, from, end int) (int, int, bool) {
		for i := from; i < end; i++ {
			s := i
			if isSpaceC(t.wide(i)) && i+1 < end && in(t, i+1) {
				i++
			} else if !in(t, i) {
				continue
			}
			j := i + 1
			for j < end && in(t, j) {
				j++
			}
			return s, j, true
		}
		return 0, 0, false
	}
}

// trailingSpace matches \s+$: the whitespace run that ends the piece.
func trailingSpace(t *Text, from, end int) (int, int, bool) {
	i := end
	for i > from && isSpaceC(t.wide(i-1)) {
		i--
	}
	if i == end {
		return 0, 0, false
	}
	return i, end, true
}

// The expressions llama.cpp runs with std::regex over its "collapsed" text
// see ASCII as is, non-ASCII whitespace as \v and every other non-ASCII
// code point as one byte per category; these predicates are \p{N} and the
// default pre-tokenizer's [\p{P}\$\+<=>\^~\|] on that text.

func isNumberRun(t *Text, p int) bool {
	r := t.Runes[p]
	if r < 0x80 {
		return r >= '0' && r <= '9'
	}
	f := t.Flags[p]
	return f&Whitespace == 0 && f&Number != 0
}

func isPunctRun(t *Text, p int) bool {
	r := t.Runes[p]
	if r < 0x80 {
		// \p{P} collapses to !-#%-*,-/:-;?-@[-]_{} and the class adds $+<=>^~|:
		// every ASCII punctuation or symbol character but the backquote.
		return r >= '!' && r <= '/' || r >= ':' && r <= '@' || r >= '[' && r <= '_' || r >= '{' && r <= '~'
	}
	f := t.Flags[p]
	return f&Whitespace == 0 && f&Punct != 0
}

// isPunctRunTick is isPunctRun with the backquote: falcon's
// [\p{P}\$\+<=>\^~\|`], every ASCII punctuation or symbol character.
func isPunctRunTick(t *Text, p int) bool { return t.Runes[p] == '`' || isPunctRun(t, p) }

// splitEachNumber is the stage \p{N}: every number code point alone.
var splitEachNumber = regexStage(func(t *Text, from, end int) (int, int, bool) {
	for i := from; i < end; i++ {
		if isNumberRun(t, i) {
			return i, i + 1, true
		}
	}
	return 0, 0, false
})

// threeDigits matches [0-9][0-9][0-9].
func threeDigits(t *Text, from, end int) (int, int, bool) {
	run := 0
	for i := from; i < end; i++ {
		if r := t.Runes[i]; r >= '0' && r <= '9' {
			run++
			if run == 3 {
				return i - 2, i + 1, true
			}
		} else {
			run = 0
		}
	}
	return 0, 0, false
}
