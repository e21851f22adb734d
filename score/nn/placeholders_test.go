package nn

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestGGMLPlaceholders: with Placeholders, llama.cpp's kernel is chosen
// by the queries that follow them. Their outputs are those of the same
// rows without placeholders when both take the tiled kernel (70 queries
// after 80 rows), and, where the queries are too few for it (30 after
// 80), those of the one-chunk kernel over each query's keys alone (a
// window of fewer than 64 rows, the query last).
func TestGGMLPlaceholders(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	const hd, heads, P = 32, 2, 80
	for _, nq := range []int{70, 30} {
		N := P + nq
		q, k, v := randVec(r, N*heads*hd), make([]float32, N*hd), make([]float32, N*hd)
		for i := range k {
			k[i], v[i] = roundF16(float32(r.NormFloat64())), roundF16(float32(r.NormFloat64()))
		}
		set := NewKeySet(N)
		for i := range N {
			set.Add(i, i)
			for j := range i {
				if i >= P && r.IntN(5) == 0 {
					set.Add(i, j)
				}
			}
		}
		c := NewContext(2)
		a := &Attention{Heads: heads, KVHeads: 1, HeadDim: hd, Scale: 0.17, Keys: set, GGMLF16: true, Placeholders: P}
		got := make([]float32, N*heads*hd)
		a.Forward(c, got, q, k, v, N)
		for i := P; i < N; i++ {
			var want []float32
			if nq >= ggmlTileQ {
				all := make([]float32, N*heads*hd)
				b := *a
				b.Placeholders = 0
				b.Forward(c, all, q, k, v, N)
				want = all[i*heads*hd : (i+1)*heads*hd]
			} else { // row i's keys, in order, then the query
				var keys []int
				for j := 0; j <= i; j++ {
					if set.Has(i, j) && j != i {
						keys = append(keys, j)
					}
				}
				keys = append(keys, i)
				m := len(keys)
				qs, ks, vs := make([]float32, m*heads*hd), make([]float32, m*hd), make([]float32, m*hd)
				for x, j := range keys {
					copy(ks[x*hd:(x+1)*hd], k[j*hd:])
					copy(vs[x*hd:(x+1)*hd], v[j*hd:])
				}
				copy(qs[(m-1)*heads*hd:], q[i*heads*hd:(i+1)*heads*hd])
				out := make([]float32, m*heads*hd)
				(&Attention{Heads: heads, KVHeads: 1, HeadDim: hd, Scale: 0.17, GGMLF16: true}).Forward(c, out, qs, ks, vs, m)
				want = out[(m-1)*heads*hd:]
			}
			if !slices.Equal(got[i*heads*hd:(i+1)*heads*hd], want) {
				t.Fatalf("%d queries: row %d differs", nq, i)
			}
			if nq >= ggmlTileQ {
				break // one full pass compared
			}
		}
	}
}
