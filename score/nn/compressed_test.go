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

// TestCompressedLayout: a window of 10 queries, a window of 3 raw keys,
// blocks of 4 (2 whole), the indexer giving query 9 block 1 only: raw keys
// at rows 0..9 (64 rows with the tile's padding), compressed keys at 64
// and 65, queries from 66; the rows each query reads.
func TestCompressedLayout(t *testing.T) {
	vis := NewKeySet(10)
	for i := range 9 {
		for j := 0; j <= i; j++ {
			vis.Add(i, j)
		}
	}
	vis.Add(9, 4) // block 1's first key
	l := NewCompressedLayout(10, 4, 3, vis)
	if l.N != 76 || l.P != 66 || l.R != 64 || l.M != 2 {
		t.Fatalf("layout %+v, want N 76, P 66, R 64, M 2", *l)
	}
	for i, want := range map[int][]int{0: {0}, 2: {0, 1, 2}, 3: {1, 2, 3, 64}, 7: {5, 6, 7, 64, 65}, 9: {7, 8, 9, 65}} {
		var got []int
		for j := range l.N {
			if l.Keys.Has(l.P+i, j) {
				got = append(got, j)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("query %d reads rows %v, want %v", i, got, want)
		}
	}
	for r := range l.P {
		if !l.Keys.Has(r, r) {
			t.Fatalf("placeholder row %d does not read its own key", r)
		}
	}
	q, k, c := make([]float32, 10*2), make([]float32, 10), make([]float32, 10)
	for i := range 10 {
		q[2*i], q[2*i+1], k[i], c[i] = float32(i), -float32(i), float32(100+i), float32(200+i)
	}
	qs, keys := make([]float32, 76*2), make([]float32, 76)
	for i := range keys {
		keys[i] = -1 // overwritten
	}
	l.Place(qs, keys, q, k, c, 2, 1, 4)
	if keys[0] != 100 || keys[9] != 109 || keys[10] != 0 || keys[64] != 200 || keys[65] != 204 || keys[66] != 0 ||
		qs[2*65] != 0 || qs[2*66] != 0 || qs[2*75] != 9 || qs[2*75+1] != -9 {
		t.Errorf("placed keys %v, queries %v", keys, qs)
	}
}
