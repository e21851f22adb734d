package pretokenize

// A reference for the pre-tokenizers that llama.cpp runs through std::regex:
// a small backtracking matcher with ECMAScript's semantics (leftmost match,
// alternatives and greedy quantifiers tried in order, lookahead), fed the
// expressions exactly as llama-vocab.cpp writes them, collapsed as
// unicode.cpp collapses them, and split the way its regex_iterator loop
// splits (matches and the gaps between them are pieces). It is slow and
// independent of the scanners, which must agree with it on every input.

import (
	"fmt"
	"strconv"
	"strings"
)

type reNode interface{}

type (
	reChar func(r rune) bool
	reSeq  []reNode
	reAlt  []reNode
	reRep  struct {
		n        reNode
		min, max int // max < 0: unbounded
	}
	reLook struct {
		n   reNode
		neg bool
	}
	reEnd   struct{} // $
	reWordB struct{} // \b, with \w = [A-Za-z0-9_]
)

type reParser struct {
	s   []rune
	i   int
	err error
}

func parseRegex(expr string) (reNode, error) {
	p := &reParser{s: []rune(expr)}
	n := p.alt()
	if p.err == nil && p.i < len(p.s) {
		p.err = fmt.Errorf("unexpected %q at %d", p.s[p.i], p.i)
	}
	return n, p.err
}

func (p *reParser) peek() rune {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return -1
}

func (p *reParser) alt() reNode {
	var alts reAlt
	for {
		alts = append(alts, p.seq())
		if p.peek() != '|' {
			break
		}
		p.i++
	}
	if len(alts) == 1 {
		return alts[0]
	}
	return alts
}

func (p *reParser) seq() reNode {
	var s reSeq
	for p.err == nil && p.i < len(p.s) && p.peek() != '|' && p.peek() != ')' {
		a := p.atom()
		s = append(s, p.quant(a))
	}
	return s
}

func (p *reParser) quant(a reNode) reNode {
	switch p.peek() {
	case '*':
		p.i++
		return reRep{a, 0, -1}
	case '+':
		p.i++
		return reRep{a, 1, -1}
	case '?':
		p.i++
		return reRep{a, 0, 1}
	case '{':
		j := p.i + 1
		for j < len(p.s) && p.s[j] != '}' {
			j++
		}
		body := string(p.s[p.i+1 : j])
		p.i = j + 1
		lo, hi, found := strings.Cut(body, ",")
		mn, _ := strconv.Atoi(lo)
		mx := mn
		if found {
			mx = -1
			if hi != "" {
				mx, _ = strconv.Atoi(hi)
			}
		}
		return reRep{a, mn, mx}
	}
	return a
}

func isSpaceECMA(r rune) bool { return r == ' ' || (r >= '\t' && r <= '\r') }

func (p *reParser) escape() reChar {
	c := p.s[p.i]
	p.i++
	switch c {
	case 's':
		return isSpaceECMA
	case 'S':
		return func(r rune) bool { return !isSpaceECMA(r) }
	case 'd':
		return func(r rune) bool { return r >= '0' && r <= '9' }
	case 'r':
		return lit('\r')
	case 'n':
		return lit('\n')
	case 't':
		return lit('\t')
	case 'x':
		v, _ := strconv.ParseUint(string(p.s[p.i:p.i+2]), 16, 8)
		p.i += 2
		return lit(rune(v))
	}
	return lit(c)
}

func isWordECMA(r rune) bool {
	return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_'
}

func lit(c rune) reChar { return func(r rune) bool { return r == c } }

func (p *reParser) atom() reNode {
	c := p.s[p.i]
	p.i++
	switch c {
	case '(':
		var look *reLook
		if p.peek() == '?' {
			switch p.s[p.i+1] {
			case ':':
			case '=':
				look = &reLook{}
			case '!':
				look = &reLook{neg: true}
			}
			p.i += 2
		}
		n := p.alt()
		if p.peek() != ')' {
			p.err = fmt.Errorf("missing ) at %d", p.i)
			return n
		}
		p.i++
		if look != nil {
			look.n = n
			return *look
		}
		return n
	case '[':
		return p.class()
	case '\\':
		if p.peek() == 'b' {
			p.i++
			return reWordB{}
		}
		return p.escape()
	case '$':
		return reEnd{}
	}
	return lit(c)
}

func (p *reParser) class() reNode {
	neg := false
	if p.peek() == '^' {
		neg = true
		p.i++
	}
	var members []reChar
	first := true
	for p.err == nil && p.i < len(p.s) && (p.peek() != ']' || first) {
		first = false
		var lo rune = -1
		var m reChar
		if p.peek() == '\\' {
			p.i++
			e := p.s[p.i]
			m = p.escape()
			switch e {
			case 's', 'S', 'd':
			case 'x':
				v, _ := strconv.ParseUint(string(p.s[p.i-2:p.i]), 16, 8)
				lo = rune(v)
			case 'r':
				lo = '\r'
			case 'n':
				lo = '\n'
			case 't':
				lo = '\t'
			default:
				lo = e
			}
		} else {
			lo = p.s[p.i]
			p.i++
			m = lit(lo)
		}
		if lo >= 0 && p.peek() == '-' && p.i+1 < len(p.s) && p.s[p.i+1] != ']' {
			p.i++
			var hi rune
			if p.peek() == '\\' {
				p.i++
				e := p.s[p.i]
				if e == 'x' {
					p.i++
					v, _ := strconv.ParseUint(string(p.s[p.i:p.i+2]), 16, 8)
					p.i += 2
					hi = rune(v)
				} else {
					p.i++
					hi = e
				}
			} else {
				hi = p.s[p.i]
				p.i++
			}
			l, h := lo, hi
			m = func(r rune) bool { return r >= l && r <= h }
		}
		members = append(members, m)
	}
	if p.peek() != ']' {
		p.err = fmt.Errorf("missing ] at %d", p.i)
	}
	p.i++
	return reChar(func(r rune) bool {
		in := false
		for _, m := range members {
			if m(r) {
				in = true
				break
			}
		}
		return in != neg
	})
}

// match tries n at pos of s[:end] and calls k with each end it can reach, in
// the engine's order of preference, until k accepts.
func reMatch(n reNode, s []rune, end, pos int, k func(int) bool) bool {
	switch n := n.(type) {
	case reChar:
		return pos < end && n(s[pos]) && k(pos+1)
	case reSeq:
		return reSeqMatch(n, s, end, pos, k)
	case reAlt:
		for _, a := range n {
			if reMatch(a, s, end, pos, k) {
				return true
			}
		}
		return false
	case reRep:
		return reRepMatch(n, 0, s, end, pos, k)
	case reLook:
		ok := reMatch(n.n, s, end, pos, func(int) bool { return true })
		return ok != n.neg && k(pos)
	case reEnd:
		return pos == end && k(pos)
	case reWordB:
		// the character before pos is read even before the piece, as
		// regex_iterator's match_prev_avail does after its first match
		before := pos > 0 && isWordECMA(s[pos-1])
		after := pos < end && isWordECMA(s[pos])
		return before != after && k(pos)
	}
	panic(fmt.Sprintf("node %T", n))
}

func reSeqMatch(s reSeq, txt []rune, end, pos int, k func(int) bool) bool {
	if len(s) == 0 {
		return k(pos)
	}
	return reMatch(s[0], txt, end, pos, func(e int) bool { return reSeqMatch(s[1:], txt, end, e, k) })
}

func reRepMatch(r reRep, count int, s []rune, end, pos int, k func(int) bool) bool {
	if r.max < 0 || count < r.max {
		if reMatch(r.n, s, end, pos, func(e int) bool {
			if e == pos && count >= r.min { // an empty iteration ends the loop
				return false
			}
			return reRepMatch(r, count+1, s, end, e, k)
		}) {
			return true
		}
	}
	return count >= r.min && k(pos)
}

// reSearch finds the leftmost match in s[from:end]; notNull and continuous
// are std::regex's match_not_null and match_continuous.
func reSearch(n reNode, s []rune, from, end int, notNull, continuous bool) (int, int, bool) {
	for i := from; i <= end; i++ {
		me := -1
		if reMatch(n, s, end, i, func(e int) bool {
			if notNull && e == i {
				return false
			}
			me = e
			return true
		}) {
			return i, me, true
		}
		if continuous {
			break
		}
	}
	return 0, 0, false
}

// reSplit splits each piece [start, end) of s as unicode_regex_split_stl
// does and returns the new bounds (empty pieces left out).
func reSplit(n reNode, s []rune, bounds []int) []int {
	var out []int
	add := func(e int) {
		if len(out) == 0 || out[len(out)-1] != e {
			out = append(out, e)
		}
	}
	start := 0
	for _, end := range bounds {
		pos := start
		ms, me, ok := reSearch(n, s, pos, end, false, false)
		for ok {
			if ms > start {
				add(ms)
			}
			if me > ms {
				add(me)
			}
			pos = me
			if ms == me { // regex_iterator after an empty match
				if pos == end {
					break
				}
				ms, me, ok = reSearch(n, s, pos, end, true, true)
				if !ok {
					ms, me, ok = reSearch(n, s, pos+1, end, false, false)
				}
			} else {
				ms, me, ok = reSearch(n, s, pos, end, false, false)
			}
		}
		if end > start {
			add(end)
		}
		start = end
	}
	return out
}

// The collapsed text and expressions of unicode_regex_split.
var ucatMap = map[string]string{
	"N": "\u00D10-9",
	"L": "\u00D2A-Za-z", "Lu": "\u00D2A-Za-z", "Ll": "\u00D2A-Za-z", "Lt": "\u00D2A-Za-z",
	"Lm": "\u00D2A-Za-z", "Lo": "\u00D2A-Za-z",
	"P": "\u00D3!-#%-*,-/:-;?-@\\[-\\]_\\{\\}",
	"M": "\u00D4",
	"S": "\u00D5\\$\\+<->^`\\|\\~", // llama.cpp 0.7.0's map (older ones lacked '~')
}

func collapseRegex(expr string) (string, bool) {
	if !strings.Contains(expr, `\p{`) {
		return expr, false
	}
	var b strings.Builder
	inside := false
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		if c == '[' && (i == 0 || expr[i-1] != '\\') {
			inside = true
			b.WriteByte(c)
			continue
		}
		if inside && c == ']' && expr[i-1] != '\\' {
			inside = false
			b.WriteByte(c)
			continue
		}
		if strings.HasPrefix(expr[i:], `\p{`) {
			j := strings.IndexByte(expr[i:], '}')
			if m, ok := ucatMap[expr[i+3:i+j]]; ok {
				if !inside {
					b.WriteByte('[')
				}
				b.WriteString(m)
				if !inside {
					b.WriteByte(']')
				}
				i += j
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

func collapsedText(t *Text) []rune {
	out := make([]rune, t.Len())
	for i, r := range t.Runes {
		f := t.Flags[i]
		switch {
		case r < 0x80:
			out[i] = r
		case f&Whitespace != 0:
			out[i] = 0x0B
		case f&Number != 0:
			out[i] = 0xD1
		case f&Letter != 0:
			out[i] = 0xD2
		case f&Punct != 0:
			out[i] = 0xD3
		case f&Mark != 0:
			out[i] = 0xD4
		case f&Symbol != 0:
			out[i] = 0xD5
		default:
			out[i] = 0xD0
		}
	}
	return out
}

func wideText(t *Text) []rune {
	out := make([]rune, t.Len())
	for i := range t.Runes {
		out[i] = t.wide(i)
	}
	return out
}

// Custom splitters llama.cpp runs instead of the expression (unicode.cpp's
// unicode_regex_split_custom); the reference uses ours for them.
var refCustom = map[string]stage{
	`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`:                                                                           splitGPT2,
	`(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: llama3Splitter(3),
	`\p{Han}+`: splitKimiK2,
}

// refSplit runs llama.cpp's expression list for a pre-tokenizer on t.
func refSplit(exprs []string, t *Text) ([]int, error) {
	bounds := []int{t.Len()}
	if t.Len() == 0 {
		return nil, nil
	}
	col, wide := collapsedText(t), wideText(t)
	for _, e := range exprs {
		if st, ok := refCustom[e]; ok {
			var next []int
			start := 0
			for _, end := range bounds {
				next = st(next, t, start, end)
				start = end
			}
			bounds = next
			continue
		}
		ce, collapsed := collapseRegex(e)
		n, err := parseRegex(ce)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", e, err)
		}
		txt := wide
		if collapsed {
			txt = col
		}
		bounds = reSplit(n, txt, bounds)
	}
	return bounds, nil
}
