package nn

import (
	"fmt"
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
	l := NewCompressedLayout(NewContext(0), 10, 4, 3, vis)
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

// compressedKeysRef is NewCompressedLayout's key set key by key.
func compressedKeysRef(n, ratio, window int, vis *KeySet) *KeySet {
	R, M := (n+63)/64*64, n/ratio
	P := R + M
	set := NewKeySet(P + n)
	for r := range P {
		set.Add(r, r)
	}
	for i := range n {
		for j := max(0, i-window+1); j <= i; j++ {
			set.Add(P+i, j)
		}
		for b := range (i + 1) / ratio {
			if vis == nil || vis.Has(i, b*ratio) {
				set.Add(P+i, R+b)
			}
		}
	}
	return set
}

// blocksChosen is an indexer's choice over n keys in blocks of block:
// each row reads every key of each block with probability 1/every.
func blocksChosen(r *rand.Rand, n, block, every int) *KeySet {
	vis := NewKeySet(n)
	for i := range n {
		for b := 0; b <= i; b += block {
			if r.IntN(every) == 0 {
				vis.AddKeys(0, i, b, min(b+block, i+1))
			}
		}
	}
	return vis
}

// NewCompressedLayout's key set (on 2 workers) against compressedKeysRef's
// over 300 queries, blocks of 4, 5 and 128, windows of 1, 64 and 200, with
// the indexer's choice (blocks of the ratio chosen, and single keys: the
// bits past a block's first read by neither) and without.
func TestCompressedLayoutKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	c := NewContext(2)
	for _, ratio := range []int{4, 5, 128} {
		choices := map[string]*KeySet{"none": nil, "blocks": blocksChosen(r, 300, ratio, 3), "keys": blocksChosen(r, 300, 1, 2)}
		for _, window := range []int{1, 64, 200} {
			for name, v := range choices {
				got := NewCompressedLayout(c, 300, ratio, window, v).Keys.Words()
				if !slices.Equal(got, compressedKeysRef(300, ratio, window, v).Words()) {
					t.Errorf("ratio %d, window %d, choice %s: the key set differs from the reference's", ratio, window, name)
				}
			}
		}
	}
}

// BenchmarkCompressedLayout: the key set of a window of 8192 queries on
// one worker, a window of 128 raw keys, blocks of 4 (a quarter chosen,
// DeepSeek-V4's indexer's 512 of 2048 at the end) and of 128 (all); ref is
// compressedKeysRef, key by key.
func BenchmarkCompressedLayout(b *testing.B) {
	const n, window = 8192, 128
	vis := blocksChosen(rand.New(rand.NewPCG(35, 36)), n, 4, 4)
	c := NewContext(1)
	for _, x := range []struct {
		ratio int
		vis   *KeySet
	}{{4, vis}, {128, nil}} {
		b.Run(fmt.Sprintf("ratio%d/words", x.ratio), func(b *testing.B) {
			for b.Loop() {
				NewCompressedLayout(c, n, x.ratio, window, x.vis)
			}
		})
		b.Run(fmt.Sprintf("ratio%d/ref", x.ratio), func(b *testing.B) {
			for b.Loop() {
				compressedKeysRef(n, x.ratio, window, x.vis)
			}
		})
	}
}
