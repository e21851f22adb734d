package pretokenize

// Expressions without a Unicode category, which llama.cpp runs with
// std::wregex over the code points themselves (non-ASCII whitespace
// replaced by \v, so that \s, which is ASCII-only there, matches it).

// isBloomWord is [^(\s|.,!?…。，、।۔،)]: anything but whitespace and the
// listed characters (the parentheses and '|' are literal members of the
// class).
func isBloomWord(t *Text, p int) bool {
	r := t.wide(p)
	switch r {
	case '(', ')', '|', '.', ',', '!', '?', '…', '。', '，', '、', '।', '۔', '،':
		return false
	}
	return !isSpaceC(r)
}

// optSpaceRunOf returns a matcher for " ?in+" (a literal space).
func optSpaceRunOf(in func(t *Text, p int) bool) matcher {
	return func(t *Text, from, end int) (int, int, bool) {
		for i := from; i < end; i++ {
			s := i
			if t.Runes[i] == ' ' && i+1 < end && in(t, i+1) {
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

// bloomStages is " ?[^(\s|.,!?…。，、।۔،)]+" (BLOOM, GPT-3-Finnish, Poro);
// vikingStages adds \p{N}.
var (
	bloomStages  = []stage{regexStage(optSpaceRunOf(isBloomWord))}
	vikingStages = []stage{regexStage(optSpaceRunOf(isBloomWord)), splitEachNumber}
)

// isPunctOrASCIISym is Chameleon's [\p{P}!-/:-@\[-`{-~]: every ASCII
// punctuation or symbol character and non-ASCII punctuation.
func isPunctOrASCIISym(t *Text, p int) bool {
	if r := t.Runes[p]; r < 0x80 {
		return isASCIIPunctSym(r)
	}
	return collapsedIs(t, p, Punct)
}

// chameleonStages is llama.cpp's list for "chameleon":
//
//	<sentinel:[0-9]+>
//	(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z
//	([\t\n]|    |  )
//	\p{N}
//	[\p{P}!-/:-@\[-`{-~]
//	the GPT-2 pattern
var chameleonStages = []stage{
	regexStage(searchAt(sentinelAt)),
	regexStage(searchAt(imageAt)),
	regexStage(searchAt(chameleonSpaceAt)),
	splitEachNumber,
	eachOf(isPunctOrASCIISym),
	splitGPT2,
}

// hasPrefix reports whether the piece has the ASCII string s at p.
func (t *Text) hasPrefix(p, end int, s string) bool {
	if end-p < len(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if t.Runes[p+i] != rune(s[i]) {
			return false
		}
	}
	return true
}

func sentinelAt(t *Text, p, end int) int {
	if !t.hasPrefix(p, end, "<sentinel:") {
		return -1
	}
	e := p + len("<sentinel:")
	d := e
	for r := t.cp(d, end); r >= '0' && r <= '9'; r = t.cp(d, end) {
		d++
	}
	if d == e || t.cp(d, end) != '>' {
		return -1
	}
	return d + 1
}

// imageAt matches IMGIMG[A-I]{1,4}Z: fewer letters than the run has leave
// an A-I where Z must be, so only the whole run (of at most 4) can match.
func imageAt(t *Text, p, end int) int {
	if !t.hasPrefix(p, end, "IMGIMG") {
		return -1
	}
	e := p + 6
	k := 0
	for r := t.cp(e+k, end); r >= 'A' && r <= 'I' && k < 4; r = t.cp(e+k, end) {
		k++
	}
	if k == 0 || t.cp(e+k, end) != 'Z' {
		return -1
	}
	return e + k + 1
}

// chameleonSpaceAt matches [\t\n]|    |  .
func chameleonSpaceAt(t *Text, p, end int) int {
	switch {
	case t.Runes[p] == '\t' || t.Runes[p] == '\n':
		return p + 1
	case t.hasPrefix(p, end, "    "):
		return p + 4
	case t.hasPrefix(p, end, "  "):
		return p + 2
	}
	return -1
}

// superBPEDigits is SuperBPE's second expression, (?=(\d{3})+(?!\d)): an
// empty match, so a split point, wherever the ASCII digits from there to the
// next non-digit (or the piece end) are a positive multiple of three.
// llama.cpp's empty pieces at the start of such runs tokenize to nothing;
// here they are not made.
func superBPEDigits(dst []int, t *Text, start, end int) []int {
	isD := func(p int) bool { r := t.Runes[p]; return r >= '0' && r <= '9' }
	for p := start; p < end; {
		if !isD(p) {
			p++
			continue
		}
		q := p
		for q < end && isD(q) {
			q++
		}
		// split points p+k with (q-(p+k)) % 3 == 0, k > 0 (k = 0 splits
		// nothing new: either start or just after a non-digit of the piece,
		// handled below)
		if p > start && (q-p)%3 == 0 {
			dst = appendOnce(dst, p)
		}
		for k := p + 1; k < q; k++ {
			if (q-k)%3 == 0 {
				dst = appendOnce(dst, k)
			}
		}
		p = q
	}
	return appendOnce(dst, end)
}

// appendOnce appends e unless it is already the last bound.
func appendOnce(dst []int, e int) []int {
	if n := len(dst); n > 0 && dst[n-1] == e {
		return dst
	}
	return append(dst, e)
}

var superBPEStages = []stage{regexStage(runOf(isNumberRun)), superBPEDigits}

// lagunaLines is [^\n]+|[\n]+: runs of newlines and of everything else.
var lagunaLines = regexStage(func(t *Text, from, end int) (int, int, bool) {
	if from >= end {
		return 0, 0, false
	}
	nl := t.Runes[from] == '\n'
	j := from + 1
	for j < end && (t.Runes[j] == '\n') == nl {
		j++
	}
	return from, j, true
})

// exaoneMoE is EXAONE MoE's pattern
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+
//
// on llama.cpp's collapsed text: a word runs on over marks and over single
// spaces that stand between letters, so "a b c" is one piece.
func exaoneMoE(dst []int, t *Text, start, end int) []int {
	isL := func(p int) bool { return p < end && t.Flags[p]&Letter != 0 }
	for pos := start; pos < end; {
		c, f := t.Runes[pos], t.Flags[pos]
		if e := t.contraction(pos, end); e > pos {
			pos = e
			dst = append(dst, pos)
			continue
		}
		if f&Letter != 0 || (!(c == '\r' || c == '\n' || f&Number != 0) && isL(pos+1)) {
			pos++
			if f&Letter == 0 {
				pos++ // the prefix, then the first letter
			}
			for pos < end {
				switch {
				case t.Flags[pos]&(Letter|Mark) != 0 && t.Flags[pos]&Whitespace == 0:
					pos++
				case t.Runes[pos] == ' ' && isL(pos+1):
					pos += 2
				default:
					goto word
				}
			}
		word:
			dst = append(dst, pos)
			continue
		}
		if f&Number != 0 {
			pos++
			dst = append(dst, pos)
			continue
		}
		if p, ok := t.punctRun(pos, end); ok {
			pos = p
			if r := t.cp(pos, end); r == '\r' || r == '\n' || r == '/' {
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
