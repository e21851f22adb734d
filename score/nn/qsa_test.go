package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// qsaBlocksRef is QSABlocks' definition by sorting, for scores without
// ties: per row the whole blocks' scores by score, the topK/block highest
// blocks' keys, and the row's unfinished block.
func qsaBlocksRef(q, p []float32, n, heads, dim, block, topK int, score func(i int, q, k []float32) float32) *KeySet {
	set := NewKeySet(n)
	for i := range n {
		whole := (i + 1) / block
		s := make([]float32, whole)
		for b := range s {
			s[b] = score(i, q[i*heads*dim:(i+1)*heads*dim], p[b*block*dim:(b*block+1)*dim])
		}
		chosen := topKeysRef(s, min(topK/block, whole))
		for j := range i + 1 {
			if j >= whole*block || slices.Contains(chosen, int32(j/block)) {
				set.Add(i, j)
			}
		}
	}
	return set
}

// TestQSABlocks: the block choice of Qwen3.8 (each head's term by
// 1/sqrt(dim)) and of GLM5-Next (by its weight)
// against its definition by sorting in both arithmetics (llama.cpp's
// lightning indexer: ggml's products in both builds' orders, each head's
// rectified term fused into a float32 sum; and float64 sums), over
// geometries where windows end mid-block, blocks of 2, and windows short of
// the budget (every key read); and the counts the definition implies: at
// most topK + block - 1 keys, the row's own unless its block is whole
// (then it competes as the others do).
func TestQSABlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct {
		n, heads, dim, block, topK int
		weighted                   bool
	}{
		{150, 2, 32, 4, 16, false}, {97, 3, 40, 8, 16, false}, {64, 1, 16, 2, 6, false}, {130, 4, 128, 16, 32, false}, {20, 2, 32, 4, 16, false},
		{150, 4, 32, 4, 16, true}, {97, 3, 40, 8, 16, true}, {20, 2, 32, 4, 16, true},
	} {
		q, p := randVec(r, c.n*c.heads*c.dim), randVec(r, c.n*c.dim)
		var w []float32
		weight := func(i, h int) float32 { return 1 / float32(math.Sqrt(float64(c.dim))) }
		if c.weighted { // positive: negative ones put many blocks at 0, where sorting and ggml's heap break ties apart
			w = randVec(r, c.n*c.heads)
			for i := range w {
				w[i] = 0.1 + float32(math.Abs(float64(w[i])))
			}
			weight = func(i, h int) float32 { return w[i*c.heads+h] }
		}
		ggmlScore := func(avx2 bool) func(i int, q, k []float32) float32 {
			return func(i int, q, k []float32) float32 {
				var s float32
				for h := range c.heads {
					s = fma32(max(dotF32(q[h*c.dim:(h+1)*c.dim], k, avx2), 0), weight(i, h), s)
				}
				return s
			}
		}
		for _, mode := range []struct {
			ggml, avx2 bool
			score      func(i int, q, k []float32) float32
		}{
			{false, false, func(i int, q, k []float32) float32 {
				var s float64
				for h := range c.heads {
					var qk float64
					for d, x := range q[h*c.dim : (h+1)*c.dim] {
						qk += float64(x) * float64(k[d])
					}
					if c.weighted {
						s += max(qk, 0) * float64(weight(i, h))
					} else {
						s += max(qk, 0)
					}
				}
				if !c.weighted {
					s /= math.Sqrt(float64(c.dim))
				}
				return float32(s)
			}},
			{true, false, ggmlScore(false)},
			{true, true, ggmlScore(true)},
		} {
			name := fmt.Sprintf("%+v ggml %v avx2 %v", c, mode.ggml, mode.avx2)
			ctx := NewContext(2)
			ctx.GGMLAVX2 = mode.avx2
			got := QSABlocks(ctx, q, p, w, c.n, c.heads, c.dim, c.block, c.topK, mode.ggml)
			want := qsaBlocksRef(q, p, c.n, c.heads, c.dim, c.block, c.topK, mode.score)
			if !slices.Equal(got.bits, want.bits) {
				t.Fatalf("%s: the sets differ from the definition's", name)
			}
			for i := range c.n {
				keys := 0
				for j := range c.n {
					if got.Has(i, j) {
						keys++
					}
				}
				if keys > c.topK+c.block-1 || !got.Has(i, i) && (i+1)%c.block != 0 || i < c.topK+c.block-1 && keys != i+1 {
					t.Fatalf("%s: row %d reads %d keys", name, i, keys)
				}
			}
		}
	}
}

// TestQSAPool: each row the mean of the block it starts as llama.cpp sums
// it (in order, then times 1/block), the rows that start no whole block
// zero, and the mean within a float32 rounding of the float64 one.
func TestQSAPool(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const n, dim, block = 11, 8, 4
	k := randVec(r, n*dim)
	got := randVec(r, n*dim) // overwritten
	QSAPool(got, k, n, dim, block)
	for row := range n {
		for d := range dim {
			var want float32
			var exact float64
			if row+block <= n {
				for m := range block {
					want += k[(row+m)*dim+d]
					exact += float64(k[(row+m)*dim+d])
				}
				want *= 1 / float32(block)
				exact /= block
			}
			if g := got[row*dim+d]; g != want || math.Abs(float64(g)-exact) > 1e-6*max(1, math.Abs(exact)) {
				t.Fatalf("row %d col %d: %v, want %v (exactly %v)", row, d, g, want, exact)
			}
		}
	}
}

// TestPLEGate: llama.cpp's roundings against the float64 definition on
// random rows (within 2e-7: a few float32 roundings of values below 1),
// and both at the edges: a zero agreement gives 1/2, one below 1e-6 the
// floor's sqrt, a large one sigmoid's saturation.
func TestPLEGate(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const S, E = 4, 64
	for range 50 {
		k, q := randVec(r, S*E), randVec(r, S*E)
		got, want := make([]float32, S), make([]float32, S)
		GGMLPLEGate(got, k, q, InvSqrtf(E))
		PLEGate(want, k, q, float64(InvSqrtf(E)))
		for s := range S {
			if d := math.Abs(float64(got[s] - want[s])); d > 2e-7 {
				t.Fatalf("stream %d: %v, want %v", s, got[s], want[s])
			}
		}
	}
	sig := func(x float64) float32 { return float32(1 / (1 + math.Exp(-x))) }
	for _, c := range []struct {
		k, q  float32
		scale float64
		want  float32
	}{
		{0, 1, 1, 0.5},
		{1e-8, 1, 1, sig(1e-3)},
		{-1e-8, 1, 1, sig(-1e-3)},
		{4, 4, 1, sig(math.Sqrt(16))},
		{-3, 3, 1, sig(-3)},
		{1e4, 1e4, 1, 1},
	} {
		k, q := []float32{c.k}, []float32{c.q}
		g, f := make([]float32, 1), make([]float32, 1)
		GGMLPLEGate(g, k, q, float32(c.scale))
		PLEGate(f, k, q, c.scale)
		if math.Abs(float64(g[0]-c.want)) > 6e-8 || math.Abs(float64(f[0]-c.want)) > 6e-8 {
			t.Errorf("k %v q %v: ggml %v, float64 %v, want %v", c.k, c.q, g[0], f[0], c.want)
		}
	}
}

// TestGatedPool: GLM5-Next's pooled keys in llama.cpp's arithmetic (both
// builds' softmax lanes) within 4 float32 roundings of the float64
// definition, on random rows and on blocks of 16 (the vector lanes); rows
// that start no whole block zero; equal logits pool the mean, and one
// position's dominating bias pools its key.
func TestGatedPool(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, c := range []struct{ n, dim, block int }{{11, 8, 4}, {40, 32, 4}, {35, 16, 16}, {64, 8, 2}} {
		k, g, ape := randVec(r, c.n*c.dim), randVec(r, c.n*c.dim), randVec(r, c.block*c.dim)
		exact := make([]float32, c.n*c.dim)
		GatedPool(exact, k, g, ape, c.n, c.dim, c.block, false, false)
		for _, avx2 := range []bool{false, true} {
			got := randVec(r, c.n*c.dim) // overwritten
			GatedPool(got, k, g, ape, c.n, c.dim, c.block, true, avx2)
			for row := range c.n {
				for d := range c.dim {
					x, e := got[row*c.dim+d], exact[row*c.dim+d]
					if row%c.block != 0 || row+c.block > c.n {
						if x != 0 || e != 0 {
							t.Fatalf("%+v row %d col %d: %v and %v, want 0", c, row, d, x, e)
						}
						continue
					}
					if math.Abs(float64(x-e)) > 4*6e-8*float64(max(1, math.Abs(float64(e)))) {
						t.Fatalf("%+v avx2 %v row %d col %d: %v, exactly %v", c, avx2, row, d, x, e)
					}
				}
			}
		}
	}
	const n, dim, block = 8, 4, 4
	k := randVec(r, n*dim)
	zeros := make([]float32, n*dim)
	got := make([]float32, n*dim)
	GatedPool(got, k, zeros, make([]float32, block*dim), n, dim, block, false, false)
	for d := range dim {
		mean := (float64(k[d]) + float64(k[dim+d]) + float64(k[2*dim+d]) + float64(k[3*dim+d])) / 4
		if math.Abs(float64(got[d])-mean) > 1e-7 {
			t.Fatalf("equal gates, col %d: %v, want the mean %v", d, got[d], mean)
		}
	}
	ape := make([]float32, block*dim)
	for d := range dim {
		ape[2*dim+d] = 100 // position 2 of every block
	}
	GatedPool(got, k, zeros, ape, n, dim, block, true, false)
	for d := range dim {
		if got[d] != k[2*dim+d] || got[block*dim+d] != k[(block+2)*dim+d] {
			t.Fatalf("a dominating position, col %d: %v and %v, want its keys %v and %v", d, got[d], got[block*dim+d], k[2*dim+d], k[(block+2)*dim+d])
		}
	}
}

// TestOverlapPool: DeepSeek-V4's overlapping compressed keys against a
// plain float64 loop over the 2·block entries of each channel (block 0
// without its previous half), in both arithmetics, on random inputs and on
// gates that saturate the softmax; the rows between blocks and after the
// last whole block are zero.
func TestOverlapPool(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	ref := func(k, g, ape []float32, n, dim, block int) []float64 {
		out := make([]float64, n*dim)
		w := 2 * dim
		for r0 := 0; r0+block <= n; r0 += block {
			for d := range dim {
				var logit, val []float64
				for j := range block {
					if r0 > 0 {
						logit = append(logit, float64(g[(r0-block+j)*w+d])+float64(ape[j*w+d]))
						val = append(val, float64(k[(r0-block+j)*w+d]))
					}
				}
				for j := range block {
					logit = append(logit, float64(g[(r0+j)*w+dim+d])+float64(ape[j*w+dim+d]))
					val = append(val, float64(k[(r0+j)*w+dim+d]))
				}
				m := slices.Max(logit)
				var z, s float64
				for j, l := range logit {
					e := math.Exp(l - m)
					z += e
					s += e * val[j]
				}
				out[r0*dim+d] = s / z
			}
		}
		return out
	}
	for _, c := range []struct {
		n, dim, block int
		scale         float32
	}{{11, 8, 4, 1}, {40, 32, 4, 1}, {64, 16, 4, 30}, {9, 8, 2, 1}} {
		k, g, ape := randVec(r, c.n*2*c.dim), randVec(r, c.n*2*c.dim), randVec(r, c.block*2*c.dim)
		for i := range g {
			g[i] *= c.scale
		}
		want := ref(k, g, ape, c.n, c.dim, c.block)
		for _, mode := range []struct{ ggml, avx2 bool }{{false, false}, {true, false}, {true, true}} {
			got := randVec(r, c.n*c.dim) // overwritten
			OverlapPool(got, k, g, ape, c.n, c.dim, c.block, mode.ggml, mode.avx2)
			bound := 4 * 6e-8 // 4 float32 roundings
			if mode.ggml {
				bound = 2e-6 // ggml_v_expf's errors, grown by saturated gates (measured 1.5e-6)
			}
			for i, e := range want {
				if math.Abs(float64(got[i])-e) > bound*max(1, math.Abs(e)) {
					t.Fatalf("%+v %+v row %d col %d: %v, exactly %v", c, mode, i/c.dim, i%c.dim, got[i], e)
				}
			}
		}
	}
}
