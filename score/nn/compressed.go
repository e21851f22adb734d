package nn

import "math/bits"

// CompressedLayout is how one window of DeepSeek-V4's attention is laid
// out for a causal attention over a key set (Attention.Keys), its keys in
// llama.cpp's order and tiles: rows [0, R) the n raw keys (R is n rounded
// up to ggml's tile of 64 keys, the padding unread), rows [R, R+M) the M =
// n/ratio compressed keys, then the n queries from row P = R+M (the rows
// before them placeholders: Attention.Placeholders), N rows in all. Query
// i reads the raw keys of its window (i−window < j <= i) and the
// compressed keys of its whole blocks ((b+1)·ratio <= i+1) that vis holds
// (vis.Has(i, b·ratio); every one when vis is nil); a placeholder row
// reads its own key.
type CompressedLayout struct {
	N, P, R, M int
	Keys       *KeySet
}

// CompressedRows is the layout of a window of n queries without its key
// set, for a device that builds the set itself.
func CompressedRows(n, ratio int) *CompressedLayout {
	R, M := (n+ggmlTileKV-1)/ggmlTileKV*ggmlTileKV, n/ratio
	return &CompressedLayout{N: R + M + n, P: R + M, R: R, M: M}
}

// NewCompressedLayout lays out a window of n queries, its rows on c's
// workers, a word at a time: where ratio divides 64, the chosen blocks'
// first keys found among vis's set bits (bits.TrailingZeros64), not
// block by block.
func NewCompressedLayout(c *Context, n, ratio, window int, vis *KeySet) *CompressedLayout {
	l := CompressedRows(n, ratio)
	R := l.R
	l.Keys = NewKeySet(l.N)
	for r := range l.P {
		l.Keys.Add(r, r)
	}
	var firsts uint64 // bits 0, ratio, 2·ratio, ... of a word
	for j := 0; 64%ratio == 0 && j < 64; j += ratio {
		firsts |= 1 << j
	}
	c.Parallel(n, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			l.Keys.AddKeys(0, l.P+i, max(0, i-window+1), i+1)
			nb := (i + 1) / ratio
			switch {
			case vis == nil:
				l.Keys.AddKeys(0, l.P+i, R, R+nb)
			case firsts != 0:
				row := vis.row(0, i)
				for w := 0; w*64 < nb*ratio; w++ {
					for x := row[w] & firsts; x != 0; x &= x - 1 {
						if b := (w*64 + bits.TrailingZeros64(x)) / ratio; b < nb {
							l.Keys.Add(l.P+i, R+b)
						}
					}
				}
			default:
				for b := range nb {
					if vis.Has(i, b*ratio) {
						l.Keys.Add(l.P+i, R+b)
					}
				}
			}
		}
	})
	return l
}

// Place sets qs (N, heads·dim) to the queries q (n, heads·dim) at their
// rows and keys (N, dim) to the raw keys k (n, dim) and the compressed
// keys of c (n, dim; block b's at row b·ratio) at theirs, every other row
// zero.
func (l *CompressedLayout) Place(qs, keys, q, k, c []float32, heads, dim, ratio int) {
	n := l.N - l.P
	check("compressed layout queries", len(qs), l.N*heads*dim)
	check("compressed layout keys", len(keys), l.N*dim)
	clear(keys)
	copy(keys, k[:n*dim])
	for b := range l.M {
		copy(keys[(l.R+b)*dim:(l.R+b+1)*dim], c[b*ratio*dim:])
	}
	clear(qs[:l.P*heads*dim])
	copy(qs[l.P*heads*dim:], q[:n*heads*dim])
}
