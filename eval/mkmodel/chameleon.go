package mkmodel

// ChameleonText returns a copy of toks with the ids among Chameleon's
// image tokens, [4, 8196), moved 8192 up: text a generated chameleon file
// can be scored on, since llama.cpp (and ppl, model.Head.Suppressed) set
// the image tokens' logits to -FLT_MAX in the first row of logits a window
// computes, where a target among them would have no probability.
func ChameleonText(toks []int32) []int32 {
	out := make([]int32, len(toks))
	for i, x := range toks {
		if x >= 4 && x < 8196 {
			x += 8192
		}
		out[i] = x
	}
	return out
}
