package vocab

import (
	"fmt"
	"testing"
)

// lookupTexts is a vocabulary of n tokens and texts to look up, half of
// them tokens and half not (as in the merge loops).
func lookupTexts(n int) ([]string, [][]byte) {
	tokens := make([]string, n)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("\u2581w%x", i*7919%n)
	}
	var texts [][]byte
	for i := 0; i < 4096; i++ {
		texts = append(texts, []byte(tokens[i*31%n]), []byte(fmt.Sprintf("\u2581x%x", i)))
	}
	return tokens, texts
}

// BenchmarkID is a lookup in a Vocab; BenchmarkMap the same in the
// map[string]int32 it replaced.
func BenchmarkID(b *testing.B) {
	for _, n := range []int{32000, 150000} {
		tokens, texts := lookupTexts(n)
		v, _ := New(tokens)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			found := 0
			for i := 0; i < b.N; i++ {
				if _, ok := v.IDBytes(texts[i%len(texts)]); ok {
					found++
				}
			}
		})
	}
}

func BenchmarkMap(b *testing.B) {
	for _, n := range []int{32000, 150000} {
		tokens, texts := lookupTexts(n)
		m := make(map[string]int32, n)
		for i, t := range tokens {
			m[t] = int32(i)
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			found := 0
			for i := 0; i < b.N; i++ {
				if _, ok := m[string(texts[i%len(texts)])]; ok {
					found++
				}
			}
		})
	}
}
