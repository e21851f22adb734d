package nn

// Lookup writes the rows of W named by tokens: out (len(tokens), In). It is
// the token embedding: a Linear of shape (vocabulary, width) read by row.
// Token ids must be in [0, Out); callers check them against the vocabulary.
func (l *Linear) Lookup(c *Context, out []float32, tokens []int32) {
	check(l.Name+" lookup output", len(out), len(tokens)*l.In)
	c.Parallel(len(tokens), func(_, lo, hi int) {
		for t := lo; t < hi; t++ {
			l.Row(out[t*l.In:(t+1)*l.In], int(tokens[t]))
		}
	})
}
