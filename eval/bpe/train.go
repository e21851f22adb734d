package bpe

import (
	"container/heap"
	"fmt"
	"slices"
	"sort"
)

// TrainOptions control Train.
type TrainOptions struct {
	// Size is the vocabulary size to reach, special tokens included.
	// Training stops early when no pair occurs MinCount times; the
	// remaining ids are then filled with reserved control tokens
	// "<|reserved_N|>" so the vocabulary has exactly Size entries.
	Size int
	// MinCount is the least number of occurrences a merged pair must have
	// (default 2).
	MinCount int
	// Special are control tokens appended after the merges (for example
	// "<|endoftext|>").
	Special []string
}

// Train learns a vocabulary from texts, each cut into pieces by the
// "gpt-2" pre-tokenizer.
// The result depends only on the texts and the options.
func Train(texts [][]byte, opt TrainOptions) (*Vocab, error) {
	if opt.MinCount <= 0 {
		opt.MinCount = 2
	}
	if opt.Size < 256+len(opt.Special) {
		return nil, fmt.Errorf("bpe: vocabulary size %d is below 256 byte tokens + %d special tokens", opt.Size, len(opt.Special))
	}
	maxTokens := opt.Size - len(opt.Special)

	// Unique pieces with their frequencies, in a deterministic order.
	freq := map[string]int{}
	for _, t := range texts {
		for _, p := range gpt2.Pieces(t) {
			freq[string(p)]++
		}
	}
	keys := make([]string, 0, len(freq))
	for k := range freq {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	t := &trainer{pairs: map[[2]int32]int{}, where: map[[2]int32][]int32{}}
	for _, k := range keys {
		syms := make([]int32, len(k))
		for i := 0; i < len(k); i++ {
			syms[i] = int32(k[i])
		}
		t.words = append(t.words, word{syms: syms, freq: freq[k]})
	}
	for i := range t.words {
		t.addPairs(int32(i), +1)
	}
	for p := range t.pairs {
		heap.Push(&t.heap, pairCount{p, t.pairs[p]})
	}

	v := &Vocab{}
	for b := 0; b < 256; b++ {
		v.Tokens = append(v.Tokens, []byte{byte(b)})
	}
	ids := map[string]int32{}
	for i, b := range v.Tokens {
		ids[string(b)] = int32(i)
	}
	stamp := make([]int, len(t.words))
	for len(v.Tokens) < maxTokens {
		best, ok := t.pop()
		if !ok || best.n < opt.MinCount {
			break
		}
		joined := slices.Concat(v.Tokens[best.p[0]], v.Tokens[best.p[1]])
		id, ok := ids[string(joined)]
		if !ok {
			id = int32(len(v.Tokens))
			ids[string(joined)] = id
			v.Tokens = append(v.Tokens, joined)
		}
		v.Merges = append(v.Merges, best.p)
		v.Result = append(v.Result, id)
		changed := map[[2]int32]bool{}
		for _, wi := range t.where[best.p] {
			if stamp[wi] == len(v.Merges) {
				continue
			}
			stamp[wi] = len(v.Merges)
			w := &t.words[wi]
			if !contains(w.syms, best.p) {
				continue
			}
			t.touch(wi, -1, changed)
			w.syms = mergeAll(w.syms, best.p, id)
			t.touch(wi, +1, changed)
		}
		delete(t.where, best.p)
		delete(t.pairs, best.p)
		cs := make([][2]int32, 0, len(changed))
		for p := range changed {
			cs = append(cs, p)
		}
		slices.SortFunc(cs, cmpPair)
		for _, p := range cs {
			if n := t.pairs[p]; n > 0 && p != best.p {
				heap.Push(&t.heap, pairCount{p, n})
			}
		}
	}
	v.normal = len(v.Tokens)
	v.Special = append(v.Special, opt.Special...)
	for i := 0; len(v.Tokens)+len(v.Special) < opt.Size; i++ {
		v.Special = append(v.Special, fmt.Sprintf("<|reserved_%d|>", i))
	}
	for _, s := range v.Special {
		v.Tokens = append(v.Tokens, []byte(s))
	}
	v.index()
	return v, nil
}

type word struct {
	syms []int32
	freq int
}

type pairCount struct {
	p [2]int32
	n int
}

// pairHeap pops the most frequent pair, the smaller ids first on ties.
type pairHeap []pairCount

func (h pairHeap) Len() int { return len(h) }
func (h pairHeap) Less(i, j int) bool {
	if h[i].n != h[j].n {
		return h[i].n > h[j].n
	}
	return cmpPair(h[i].p, h[j].p) < 0
}
func (h pairHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pairHeap) Push(x any)   { *h = append(*h, x.(pairCount)) }
func (h *pairHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func cmpPair(a, b [2]int32) int {
	if a[0] != b[0] {
		return int(a[0] - b[0])
	}
	return int(a[1] - b[1])
}

type trainer struct {
	words []word
	pairs map[[2]int32]int
	where map[[2]int32][]int32 // words that contain (or once contained) a pair
	heap  pairHeap
}

// pop returns the most frequent pair, skipping stale heap entries.
func (t *trainer) pop() (pairCount, bool) {
	for t.heap.Len() > 0 {
		pc := heap.Pop(&t.heap).(pairCount)
		if t.pairs[pc.p] == pc.n {
			return pc, true
		}
	}
	return pairCount{}, false
}

func (t *trainer) addPairs(wi int32, sign int) {
	w := &t.words[wi]
	for i := 0; i+1 < len(w.syms); i++ {
		p := [2]int32{w.syms[i], w.syms[i+1]}
		t.pairs[p] += sign * w.freq
		if sign > 0 {
			t.where[p] = append(t.where[p], wi)
		}
	}
}

func (t *trainer) touch(wi int32, sign int, changed map[[2]int32]bool) {
	w := &t.words[wi]
	for i := 0; i+1 < len(w.syms); i++ {
		changed[[2]int32{w.syms[i], w.syms[i+1]}] = true
	}
	t.addPairs(wi, sign)
}

func contains(s []int32, p [2]int32) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == p[0] && s[i+1] == p[1] {
			return true
		}
	}
	return false
}

// mergeAll replaces every occurrence of p in s, left to right, by id.
func mergeAll(s []int32, p [2]int32, id int32) []int32 {
	out := s[:0]
	for i := 0; i < len(s); i++ {
		if i+1 < len(s) && s[i] == p[0] && s[i+1] == p[1] {
			out = append(out, id)
			i++
			continue
		}
		out = append(out, s[i])
	}
	return out
}
