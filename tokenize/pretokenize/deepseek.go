package pretokenize

// deepseekCased is the letter class of the deepseek-llm pre-tokenizer's
// second expression (the cased letters of Unicode), as inclusive ranges.
var deepseekCased = [][2]rune{
	{0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA},
	{0x1BC, 0x1BF}, {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377},
	{0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C},
	{0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556},
	{0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF},
	{0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D},
	{0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B},
	{0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE},
	{0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC},
	{0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113},
	{0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128},
	{0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
	{0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE},
	{0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787},
	{0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A},
	{0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
	{0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
}

// deepseekPunct is the class of the third expression: ASCII punctuation and
// letters (:-~ spans them), full-width forms, curly quotes, 　-。.
var deepseekPunct = [][2]rune{
	{0x21, 0x2F}, {0x3A, 0x7E}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002},
}

// deepseekCJK is the class of the fifth expression: [一-龥ࠀ-一가-퟿].
var deepseekCJK = [][2]rune{{0x4E00, 0x9FA5}, {0x0800, 0x4E00}, {0xAC00, 0xD7FF}}

func inRanges(rs [][2]rune, r rune) bool {
	for _, x := range rs {
		if r >= x[0] && r <= x[1] {
			return true
		}
	}
	return false
}

// wideIn tests the code point std::wregex sees (non-ASCII whitespace
// replaced by \v, so U+3000 never matches its literal range).
func wideIn(rs [][2]rune) func(t *Text, p int) bool {
	return func(t *Text, p int) bool { return inRanges(rs, t.wide(p)) }
}

func isCRLF(t *Text, p int) bool { r := t.Runes[p]; return r == '\r' || r == '\n' }

// deepseekLLM is llama.cpp's expression list for "deepseek-llm", applied in
// order, each splitting the pieces of the one before:
//
//	[\r\n]
//	\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓ...𞤀-𞥃]+
//	\s?[!-/:-~！-／：-～‘-‟　-。]+
//	\s+$
//	[一-龥ࠀ-一가-퟿]+
//	\p{N}+
var deepseekLLM = []stage{
	regexStage(func(t *Text, from, end int) (int, int, bool) {
		for i := from; i < end; i++ {
			if isCRLF(t, i) {
				return i, i + 1, true
			}
		}
		return 0, 0, false
	}),
	regexStage(spaceRunOf(wideIn(deepseekCased))),
	regexStage(spaceRunOf(wideIn(deepseekPunct))),
	regexStage(trailingSpace),
	regexStage(runOf(wideIn(deepseekCJK))),
	regexStage(runOf(isNumberRun)),
}

// The predicates below are classes of the expressions llama.cpp runs with
// std::regex over its collapsed text (see isNumberRun): an ASCII code point
// is itself, non-ASCII whitespace is \v, and any other non-ASCII code point
// is the byte of its category, so \p{X} there is X's ASCII members plus
// every non-ASCII code point of category X that is not whitespace.

func collapsedIs(t *Text, p int, cat uint8) bool {
	f := t.Flags[p]
	return f&Whitespace == 0 && f&cat != 0
}

// isLetterC is \p{L}: A-Za-z, non-ASCII letters.
func isLetterC(t *Text, p int) bool {
	r := t.Runes[p]
	if r < 0x80 {
		return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z'
	}
	return collapsedIs(t, p, Letter)
}

// isPunctC is \p{P}: !-#%-*,-/:-;?-@[-]_{} and non-ASCII punctuation.
func isPunctC(t *Text, p int) bool {
	r := t.Runes[p]
	if r < 0x80 {
		return r >= '!' && r <= '#' || r >= '%' && r <= '*' || r >= ',' && r <= '/' ||
			r == ':' || r == ';' || r == '?' || r == '@' || r >= '[' && r <= ']' || r == '_' || r == '{' || r == '}'
	}
	return collapsedIs(t, p, Punct)
}

// isSymbolC is \p{S}: $+<=>^`|~ and non-ASCII symbols.
func isSymbolC(t *Text, p int) bool {
	r := t.Runes[p]
	if r < 0x80 {
		return r == '$' || r == '+' || r == '<' || r == '=' || r == '>' || r == '^' || r == '`' || r == '|' || r == '~'
	}
	return collapsedIs(t, p, Symbol)
}

// isMarkC is \p{M}: non-ASCII marks only.
func isMarkC(t *Text, p int) bool { return t.Runes[p] >= 0x80 && collapsedIs(t, p, Mark) }

func isSpaceAt(t *Text, p int) bool { return isSpaceC(t.wide(p)) }

// eachOf returns a stage that makes every code point satisfying in a piece
// of its own (the expression [class] without a quantifier).
func eachOf(in func(t *Text, p int) bool) stage {
	return regexStage(func(t *Text, from, end int) (int, int, bool) {
		for i := from; i < end; i++ {
			if in(t, i) {
				return i, i + 1, true
			}
		}
		return 0, 0, false
	})
}

// deepseekCoder is llama.cpp's expression list for "deepseek-coder":
//
//	[\r\n]
//	\s?\p{L}+
//	\s?\p{P}+
//	[一-龥ࠀ-一가-퟿]+
//	\p{N}
var deepseekCoder = []stage{
	eachOf(isCRLF),
	regexStage(spaceRunOf(isLetterC)),
	regexStage(spaceRunOf(isPunctC)),
	regexStage(runOf(wideIn(deepseekCJK))),
	splitEachNumber,
}

// upToThreeNumbers matches \p{N}{1,3}.
func upToThreeNumbers(t *Text, from, end int) (int, int, bool) {
	for i := from; i < end; i++ {
		if isNumberRun(t, i) {
			j := i + 1
			for j < end && j-i < 3 && isNumberRun(t, j) {
				j++
			}
			return i, j, true
		}
	}
	return 0, 0, false
}

// deepseekV3Kana is [一-龥぀-ゟ゠-ヿ]: CJK ideographs to U+9FA5, hiragana
// and katakana.
var deepseekV3Kana = [][2]rune{{0x4E00, 0x9FA5}, {0x3040, 0x309F}, {0x30A0, 0x30FF}}

// deepseekV3 is the list for "deepseek-v3" (also Hunyuan-Dense, JoyAI, HY-V4):
//
//	\p{N}{1,3}
//	[一-龥぀-ゟ゠-ヿ]+
//	[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
var deepseekV3 = []stage{
	regexStage(upToThreeNumbers),
	regexStage(runOf(wideIn(deepseekV3Kana))),
	regexStage(searchAt(deepseekV3Word(false))),
}

// spark25 is the list for "spark2_5": deepseekV3 with [\r\n] alone instead
// of \s*[\r\n]+ and, last, \p{N} (every number code point alone).
var spark25 = []stage{
	regexStage(upToThreeNumbers),
	regexStage(runOf(wideIn(deepseekV3Kana))),
	regexStage(searchAt(deepseekV3Word(true))),
	splitEachNumber,
}

// searchAt turns a function that matches at one position (returning the end,
// or -1) into the leftmost-match search of std::regex_search.
func searchAt(at func(t *Text, p, end int) int) matcher {
	return func(t *Text, from, end int) (int, int, bool) {
		for i := from; i < end; i++ {
			if e := at(t, i, end); e > i {
				return i, e, true
			}
		}
		return 0, 0, false
	}
}

func isASCIILetter(r rune) bool { return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' }

func isASCIIPunctSym(r rune) bool {
	return r >= '!' && r <= '/' || r >= ':' && r <= '@' || r >= '[' && r <= '`' || r >= '{' && r <= '~'
}

// deepseekV3Word matches the third deepseek-v3 expression at p (the
// alternatives in order); with lone, spark2_5's variant.
func deepseekV3Word(lone bool) func(t *Text, p, end int) int {
	isLM := func(t *Text, p, end int) bool { return p < end && (isLetterC(t, p) || isMarkC(t, p)) }
	isPS := func(t *Text, p, end int) bool { return p < end && (isPunctC(t, p) || isSymbolC(t, p)) }
	return func(t *Text, p, end int) int {
		c := t.Runes[p]
		// [!"#...~][A-Za-z]+
		if isASCIIPunctSym(c) && p+1 < end && isASCIILetter(t.Runes[p+1]) {
			e := p + 2
			for e < end && isASCIILetter(t.Runes[e]) {
				e++
			}
			return e
		}
		// [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
		pre := c != '\r' && c != '\n' && !isLetterC(t, p) && !isPS(t, p, end)
		if (pre && isLM(t, p+1, end)) || isLM(t, p, end) {
			e := p + 1
			for isLM(t, e, end) {
				e++
			}
			return e
		}
		// <space>?[\p{P}\p{S}]+[\r\n]*
		if s := p + btoi(c == ' '); isPS(t, s, end) {
			e := s + 1
			for isPS(t, e, end) {
				e++
			}
			if !lone {
				for r := t.cp(e, end); r == '\r' || r == '\n'; r = t.cp(e, end) {
					e++
				}
			}
			return e
		}
		if !isSpaceAt(t, p) {
			return -1
		}
		if lone {
			// [\r\n]|\s+(?!\S)|\s+
			if c == '\r' || c == '\n' {
				return p + 1
			}
			n := 0
			for p+n < end && isSpaceAt(t, p+n) {
				n++
			}
			if n > 1 && p+n < end {
				return p + n - 1
			}
			return p + n
		}
		return t.spaceTail(p, end) // \s*[\r\n]+|\s+(?!\S)|\s+
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// afmoeDigits is llama.cpp's custom AFMoE digit splitter: a run of n number
// code points ends pieces after its first n mod 3 (when not 0) and then
// after every three. Whatever precedes the run in the piece stays in front
// of its first group, as llama.cpp emits it.
func afmoeDigits(dst []int, t *Text, start, end int) []int {
	prev := start
	for pos := start; pos < end; {
		if t.Flags[pos]&Number == 0 {
			pos++
			continue
		}
		ds := pos
		for pos < end && t.Flags[pos]&Number != 0 {
			pos++
		}
		cur := ds
		if rem := (pos - ds) % 3; rem > 0 {
			cur += rem
			dst = append(dst, cur)
			prev = cur
		}
		for ; cur < pos; cur += 3 {
			dst = append(dst, cur+3)
			prev = cur + 3
		}
	}
	if prev < end {
		dst = append(dst, end)
	}
	return dst
}

// afmoeAsian is AFMoE's second expression: CJK, kana, half-width forms,
// Kangxi radicals, Thai, Lao, Khmer, Myanmar and Hangul blocks. Its third
// range starts at U+8C48, not at U+F900 (豈, which NFC turns into U+8C48):
// so llama.cpp 0.7.0's string reads, and so its tokens show (the range
// takes in Hangul syllables, surrogates and the private use area).
var afmoeAsian = [][2]rune{
	{0x4E00, 0x9FFF}, {0x3400, 0x4DBF}, {0x8C48, 0xFAFF}, {0x3040, 0x309F}, {0x30A0, 0x30FF},
	{0xFF65, 0xFF9F}, {0x2F00, 0x2FDF}, {0x0E40, 0x0E7F}, {0x0E80, 0x0EFF}, {0x1780, 0x17FF},
	{0x1000, 0x109F}, {0xAA60, 0xAA7F}, {0xA9E0, 0xA9FF}, {0xAC00, 0xD7AF}, {0x1100, 0x11FF},
}

// afmoe is the list for "afmoe": its digits, the Asian-script runs, then the
// third deepseek-v3 expression.
var afmoe = []stage{
	afmoeDigits,
	regexStage(runOf(wideIn(afmoeAsian))),
	regexStage(searchAt(deepseekV3Word(false))),
}

// youtuCJK are the classes of Youtu's first expression,
//
//	[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+
//
// (Hangul, CJK punctuation, Bopomofo, CJK and kana); they do not overlap,
// so a match is a run of one class.
var youtuCJK = [][][2]rune{
	{{0xAC00, 0xD7A3}, {0x3131, 0x318E}},
	{{0xFF01, 0xFF01}, {0x2026, 0x2026}, {0x201C, 0x201D}, {0x2018, 0x2019}, {0x2014, 0x2014},
		{0xFF1A, 0xFF1B}, {0xFF0C, 0xFF0C}, {0x3001, 0x303F}, {0xFE30, 0xFE4F}},
	{{0x3105, 0x312F}},
	{{0x4E00, 0x9FA5}, {0x3040, 0x309F}, {0x30A0, 0x30FF}},
}

func youtuCJKAt(t *Text, p, end int) int {
	for _, cls := range youtuCJK {
		if inRanges(cls, t.wide(p)) {
			e := p + 1
			for e < end && inRanges(cls, t.wide(e)) {
				e++
			}
			return e
		}
	}
	return -1
}
