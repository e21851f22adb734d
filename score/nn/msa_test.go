package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// msaBlocksRef is MSABlocks' definition by sorting, for scores without
// ties: per row and head the block maxima of dot's scores, 1e30 added to
// the last local blocks in float32, the topK highest blocks' keys up to
// the row.
func msaBlocksRef(q, k []float32, n, heads, dim, block, topK, local int, dot func(x, y []float32) float32) *KeySet {
	set := NewKeySets(n, heads)
	for i := range n {
		last := i / block
		for g := range heads {
			score := make([]float32, last+1)
			for b := range score {
				score[b] = float32(math.Inf(-1))
				for j := b * block; j <= min((b+1)*block-1, i); j++ {
					score[b] = max(score[b], dot(k[j*dim:(j+1)*dim], q[(i*heads+g)*dim:(i*heads+g+1)*dim]))
				}
				if b > last-local {
					score[b] += 1e30
				}
			}
			chosen := topKeysRef(score, min(topK, len(score)))
			for j := range i + 1 {
				if slices.Contains(chosen, int32(j/block)) {
					set.AddIn(g, i, j)
				}
			}
		}
	}
	return set
}

// dotFMA is x·y as one chain of fused multiply-adds in order (Gemm's).
func dotFMA(x, y []float32) float32 {
	var s float32
	for i, v := range x {
		s = fma32(v, y[i], s)
	}
	return s
}

// TestMSABlocks: MiniMax's block choice against its definition by sorting
// in both arithmetics (ggml's float32 products in both builds' orders, and
// Gemm's FMA chains), over geometries where rows end mid-block, blocks of one key,
// no local blocks, all blocks local, and windows short of top_k blocks
// (every key read); and the counts the definition implies: a row reads its
// own key whenever a local block is forced, and at most topK·block keys.
func TestMSABlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ n, heads, dim, block, topK, local int }{
		{150, 2, 64, 16, 4, 2}, {150, 2, 32, 16, 4, 1}, {97, 4, 40, 7, 3, 0}, {64, 1, 16, 1, 5, 1},
		{120, 2, 24, 10, 3, 3}, {40, 2, 32, 16, 4, 2}, {130, 3, 128, 32, 2, 1},
	} {
		q, k := randVec(r, c.n*c.heads*c.dim), randVec(r, c.n*c.dim)
		for _, mode := range []struct {
			ggml, avx2 bool
			dot        func(x, y []float32) float32
		}{
			{false, false, dotFMA},
			{true, false, func(x, y []float32) float32 { return dotF32(x, y, false) }},
			{true, true, func(x, y []float32) float32 { return dotF32(x, y, true) }},
		} {
			name := fmt.Sprintf("%+v ggml %v avx2 %v", c, mode.ggml, mode.avx2)
			ctx := NewContext(2)
			ctx.GGMLAVX2 = mode.avx2
			got := MSABlocks(ctx, q, k, c.n, c.heads, c.dim, c.block, c.topK, c.local, mode.ggml)
			want := msaBlocksRef(q, k, c.n, c.heads, c.dim, c.block, c.topK, c.local, mode.dot)
			if got.Groups() != c.heads || !slices.Equal(got.bits, want.bits) {
				t.Fatalf("%s: the sets differ from the definition's", name)
			}
			for g := range c.heads {
				for i := range c.n {
					keys := 0
					for j := range c.n {
						if got.HasIn(g, i, j) {
							keys++
						}
					}
					if keys > max(c.topK*c.block, (i/c.block+1)*c.block) || c.local > 0 && !got.HasIn(g, i, i) || i/c.block < c.topK && keys != i+1 {
						t.Fatalf("%s: head %d row %d reads %d keys", name, g, i, keys)
					}
				}
			}
		}
	}
}

// TestAttentionGroupedKeys: a KeySet of a group per KV head gives each KV
// head's query heads the bits of a one-group set of that head's keys, in
// every path (float32 flash with head sizes of 16 and of 24, the plain
// loop; ggml's one-chunk and tiled kernels), and the float64 definition to
// float32 rounding.
func TestAttentionGroupedKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const heads, kvheads = 4, 2
	for _, c := range []struct{ n, hd int }{{150, 16}, {150, 24}, {40, 32}} {
		q, k, v := randVec(r, c.n*heads*c.hd), randVec(r, c.n*kvheads*c.hd), randVec(r, c.n*kvheads*c.hd)
		for i := range k {
			k[i], v[i] = roundF16(k[i]), roundF16(v[i])
		}
		grouped := NewKeySets(c.n, kvheads)
		single := []*KeySet{NewKeySet(c.n), NewKeySet(c.n)}
		for g := range kvheads {
			for i := range c.n {
				for j := range i + 1 {
					if j == i || (i*(3+4*g)+j*(5+g))%7 > 2 {
						grouped.AddIn(g, i, j)
						single[g].Add(i, j)
					}
				}
			}
		}
		for _, ggml := range []bool{false, true} {
			name := fmt.Sprintf("%+v ggml %v", c, ggml)
			a := &Attention{Heads: heads, KVHeads: kvheads, HeadDim: c.hd, Scale: 0.2, Keys: grouped, GGMLF16: ggml}
			got := make([]float32, len(q))
			a.Forward(NewContext(2), got, q, k, v, c.n)
			for g, s := range single {
				one := &Attention{Heads: heads, KVHeads: kvheads, HeadDim: c.hd, Scale: 0.2, Keys: s, GGMLF16: ggml}
				want := make([]float32, len(q))
				one.Forward(NewContext(2), want, q, k, v, c.n)
				for i := range c.n {
					for h := g * heads / kvheads; h < (g+1)*heads/kvheads; h++ {
						o := (i*heads + h) * c.hd
						if !slices.Equal(got[o:o+c.hd], want[o:o+c.hd]) {
							t.Fatalf("%s: row %d head %d differs from its KV head's one-group set", name, i, h)
						}
					}
				}
			}
			for i, e := range a.Exact(q, k, v, c.n) {
				if math.Abs(float64(got[i])-e) > 2e-3 {
					t.Fatalf("%s: out[%d] = %v, want %v", name, i, got[i], e)
				}
			}
		}
	}
}
