package tokenizer

import "ppl.dev/tokenize/pretokenize"

// plamo3Boundary is the private-use code point PLaMo-3's tokenizer treats as
// a segment boundary: it splits the text there and is dropped itself.
const plamo3Boundary = 0xEE00

// plamo3Segments is llama.cpp's pre-segmentation for PLaMo-3 (the
// pre_segment pass of llm_tokenizer_plamo2::encode), which reproduces the
// regular-expression split of PLaMo-3's own tokenizer before its table
// search. It returns the segments of cps as [start, end) code point
// ranges, in order; the search then runs on each one alone.
//
// Cuts come from two passes over the code points, then the boundaries:
//
//  1. Special-token fences: at each "<|plamo:" a body of at most 64 code
//     points follows, ended by '|' and not holding whitespace (llama.cpp's
//     White_Space set plus U+001C..U+001F, which Python's \s also counts);
//     when the '|' is followed by '>', the whole "<|plamo:…|>" is cut off
//     on both sides and the scan goes on after it, else it goes on at the
//     next code point. The body may be empty.
//  2. Runs: a run of one code point (not crossing a cut of pass 1) is cut
//     off on both sides when it is 4 or more of anything but '\n', or 2 or
//     more spaces. The scan goes on after each run, whether cut or not.
//  3. Every U+EE00 ends a segment and is not part of any.
//
// Empty segments are dropped. The leading U+FEFF that PLaMo-2 drops is
// kept.
func plamo3Segments(cps []rune) [][2]int {
	n := len(cps)
	cut := make([]bool, n+1)
	const prefix = "<|plamo:"
	const maxBody = 64
	for i := 0; i+len(prefix) <= n; {
		if !hasRunePrefix(cps[i:], prefix) {
			i++
			continue
		}
		j := i + len(prefix)
		for j < n && j-(i+len(prefix)) < maxBody && cps[j] != '|' && !plamo3Space(cps[j]) {
			j++
		}
		if j+1 < n && cps[j] == '|' && cps[j+1] == '>' {
			cut[i], cut[j+2] = true, true
			i = j + 2
		} else {
			i++
		}
	}
	for i := 0; i < n; {
		c, run := cps[i], 1
		for i+run < n && cps[i+run] == c && !cut[i+run] {
			run++
		}
		if (c != '\n' && run >= 4) || (c == ' ' && run >= 2) {
			cut[i], cut[i+run] = true, true
		}
		i += run
	}
	var segs [][2]int
	start := 0
	for end := 0; end <= n; end++ {
		boundary := end < n && cps[end] == plamo3Boundary
		if end == n || cut[end] || boundary {
			if start < end {
				segs = append(segs, [2]int{start, end})
			}
			start = end
			if boundary {
				start++
			}
		}
	}
	return segs
}

// hasRunePrefix says whether cps starts with the ASCII string p.
func hasRunePrefix(cps []rune, p string) bool {
	if len(cps) < len(p) {
		return false
	}
	for k := 0; k < len(p); k++ {
		if cps[k] != rune(p[k]) {
			return false
		}
	}
	return true
}

// plamo3Space is what ends a fence body: llama.cpp's whitespace flag or
// U+001C..U+001F.
func plamo3Space(r rune) bool {
	return (r >= 0x1C && r <= 0x1F) || pretokenize.Flags(r)&pretokenize.Whitespace != 0
}
