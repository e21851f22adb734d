package nn

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"ppl.dev/quant"
)

// TestTopKeys: on scores without ties the k highest (the sort's); among
// ties the keys libggml 0.27.0's TOP_K keeps (testdata/ggml_ops.py topk,
// the hash of each row's sorted keys): a few small rows, and 8 rows of 300
// tie-heavy scores (a few levels, relu-like zeros), k 64.
func TestTopKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ n, k int }{{1, 1}, {10, 3}, {100, 64}, {100, 99}, {100, 100}, {1000, 500}} {
		score := randVec(r, c.n)
		got := slices.Clone(TopKeys(score, make([]int32, c.n), c.k))
		slices.Sort(got)
		want := slices.Clone(topKeysRef(score, c.k))
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("n %d, k %d: %v, want %v", c.n, c.k, got, want)
		}
	}
	for _, c := range []struct {
		score []float32
		k     int
		want  []int32 // libggml's
	}{
		{make([]float32, 10), 3, []int32{0, 1, 2}},
		{[]float32{1, 0, 0, 0, 0, 2, 0, 0, 0, 0}, 4, []int32{0, 1, 3, 5}},
		{make([]float32, 300), 64, nil}, // 0..63
	} {
		got := slices.Clone(TopKeys(c.score, make([]int32, len(c.score)), c.k))
		slices.Sort(got)
		want := c.want
		if want == nil {
			for j := range c.k {
				want = append(want, int32(j))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v, k %d: %v, libggml's %v", c.score, c.k, got, want)
		}
	}
	const rows, n, k = 8, 300, 64
	x := tieScores(rows, n)
	var keys []float32
	for row := range rows {
		got := slices.Clone(TopKeys(x[row*n:(row+1)*n], make([]int32, n), k))
		slices.Sort(got)
		for _, j := range got {
			keys = append(keys, float32(j))
		}
	}
	if h := fnvBits(keys); h != 0xca7f0d914ab0a32f {
		t.Errorf("tie-heavy rows: hash %#x, libggml's %#x", h, uint64(0xca7f0d914ab0a32f))
	}
}

// tieScores are TestTopKeys' tie-heavy rows: values in {0, 1, 2, 3} in
// even rows; normals, half of them zeroed, in odd ones.
func tieScores(rows, n int) []float32 {
	r := rand.New(rand.NewPCG(11, 12))
	x := make([]float32, rows*n)
	for i := range x {
		if (i/n)%2 == 0 {
			x[i] = float32(r.IntN(4))
		} else if r.IntN(2) == 0 {
			x[i] = float32(r.NormFloat64())
		}
	}
	return x
}

// TestLightningTopK against its definition: the scores in float64 (then
// float32) and TopKeys' choice among them; every row keeps its topK keys
// (all of them below topK), on random queries, keys and weights of both
// signs, whose many scores of exactly 0 (every head's relu 0) tie.
func TestLightningTopK(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n, heads, dim, topK = 150, 4, 24, 40
	q, k, w := randVec(r, n*heads*dim), randVec(r, n*dim), randVec(r, n*heads)
	set := LightningTopK(NewContext(3), q, k, w, n, heads, dim, topK)
	zeros := 0
	for i := range n {
		score := make([]float32, i+1)
		for j := range score {
			var s float64
			for h := range heads {
				var d float64
				for x := range dim {
					d += float64(q[(i*heads+h)*dim+x]) * float64(k[j*dim+x])
				}
				s += math.Max(d, 0) * float64(w[i*heads+h])
			}
			score[j] = float32(s)
			if s == 0 {
				zeros++
			}
		}
		want := map[int32]bool{}
		for _, j := range TopKeys(score, make([]int32, i+1), min(topK, i+1)) {
			want[j] = true
		}
		for j := range n {
			if set.Has(i, j) != want[int32(j)] {
				t.Fatalf("row %d key %d: kept %v, want %v", i, j, set.Has(i, j), want[int32(j)])
			}
		}
	}
	if zeros < n {
		t.Errorf("only %d scores of 0: the ties are not exercised", zeros)
	}
}

// TestLayerNorm against the float64 formula, rows of constant value
// (variance 0: eps alone) included, with weights of 3 rows (row r takes
// row r mod 3 of w and b).
func TestLayerNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const rows, cols, eps = 5, 33, 1e-6
	x, w, b := randVec(r, rows*cols), randVec(r, 3*cols), randVec(r, 3*cols)
	for c := range cols {
		x[2*cols+c] = 3
	}
	out := make([]float32, len(x))
	LayerNorm(out, x, w, b, eps, rows, cols)
	for rr := range rows {
		var mean, v float64
		for c := range cols {
			mean += float64(x[rr*cols+c]) / cols
		}
		for c := range cols {
			v += (float64(x[rr*cols+c]) - mean) * (float64(x[rr*cols+c]) - mean) / cols
		}
		for c := range cols {
			k := rr%3*cols + c
			want := (float64(x[rr*cols+c])-mean)/math.Sqrt(v+eps)*float64(w[k]) + float64(b[k])
			if math.Abs(float64(out[rr*cols+c])-want) > 1e-6*math.Max(1, math.Abs(want)) {
				t.Fatalf("row %d col %d: %v, want %v", rr, c, out[rr*cols+c], want)
			}
		}
	}
}

// TestHadamardMatrix: the normalized Sylvester matrix is orthogonal
// (H·Hᵀ = I to float32 rounding) and its rows are ±1/sqrt(dim) with the
// Sylvester signs, H_ij = -H_i(j+dim/2) exactly in the lower half.
func TestHadamardMatrix(t *testing.T) {
	for _, dim := range []int{1, 2, 64, 128} {
		l := HadamardMatrix(dim)
		h := make([]float32, dim*dim)
		if err := quant.Dequantize(l.Type, l.Data, h); err != nil {
			t.Fatal(err)
		}
		for i := range dim {
			for j := range dim {
				var d float64
				for x := range dim {
					d += float64(h[i*dim+x]) * float64(h[j*dim+x])
				}
				want := 0.0
				if i == j {
					want = 1
				}
				if math.Abs(d-want) > 1e-6 {
					t.Fatalf("dim %d: (H·Hᵀ)[%d][%d] = %v", dim, i, j, d)
				}
			}
			if i >= dim/2 && dim > 1 {
				for j := range dim / 2 {
					if h[i*dim+j] != h[(i-dim/2)*dim+j] || h[i*dim+j+dim/2] != -h[(i-dim/2)*dim+j+dim/2] {
						t.Fatalf("dim %d: row %d is not [H, -H] of row %d", dim, i, i-dim/2)
					}
				}
			}
		}
	}
}

// TestGGMLLayerNorm: ggml's NORM then MUL and ADD against the float64
// LayerNorm to float32 rounding (its bits are held to llama.cpp by the
// DSA variants of package model), in both builds' reductions, over a width
// with a tail past the lanes.
func TestGGMLLayerNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const rows, cols = 6, 70
	x, w, b := randVec(r, rows*cols), randVec(r, 2*cols), randVec(r, 2*cols) // weights of 2 rows, taken in turn
	want := make([]float32, len(x))
	LayerNorm(want, x, w, b, 1e-6, rows, cols)
	for _, avx2 := range []bool{false, true} {
		got := make([]float32, len(x))
		GGMLLayerNorm(got, x, w, b, 1e-6, rows, cols, avx2)
		for i := range got {
			if math.Abs(float64(got[i]-want[i])) > 2e-6*math.Max(1, math.Abs(float64(want[i]))) {
				t.Fatalf("avx2 %v: out[%d] = %v, want %v", avx2, i, got[i], want[i])
			}
		}
	}
}

// TestAttentionChunk: Chunk (Llama 4's chunked attention) gives the bits
// of the same keys as a KeySet in every path (float32 flash, the plain
// loop, ggml's one-chunk and tiled kernels), and the float64 definition
// to float32 rounding.
func TestAttentionChunk(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, c := range []struct{ n, hd, chunk int }{{150, 16, 40}, {150, 24, 64}, {40, 16, 16}} {
		q, k, v := randVec(r, c.n*4*c.hd), randVec(r, c.n*2*c.hd), randVec(r, c.n*2*c.hd)
		for i := range k {
			k[i], v[i] = roundF16(k[i]), roundF16(v[i])
		}
		set := NewKeySet(c.n)
		for i := range c.n {
			for j := i / c.chunk * c.chunk; j <= i; j++ {
				set.Add(i, j)
			}
		}
		for _, ggml := range []bool{false, true} {
			chunked := &Attention{Heads: 4, KVHeads: 2, HeadDim: c.hd, Scale: 0.2, Chunk: c.chunk, GGMLF16: ggml}
			keyed := &Attention{Heads: 4, KVHeads: 2, HeadDim: c.hd, Scale: 0.2, Keys: set, GGMLF16: ggml}
			got, want := make([]float32, len(q)), make([]float32, len(q))
			chunked.Forward(NewContext(2), got, q, k, v, c.n)
			keyed.Forward(NewContext(2), want, q, k, v, c.n)
			if !slices.Equal(got, want) {
				t.Fatalf("%+v, ggml %v: chunked and keyed attention differ", c, ggml)
			}
			for i, e := range chunked.Exact(q, k, v, c.n) {
				if math.Abs(float64(got[i])-e) > 2e-3 {
					t.Fatalf("%+v, ggml %v: out[%d] = %v, want %v", c, ggml, i, got[i], e)
				}
			}
		}
	}
}

// AddKeys against Add key by key: ranges empty, within a word, ending and
// starting at word edges, across several words, in either group.
func TestAddKeys(t *testing.T) {
	const n = 200
	for _, c := range []struct{ g, i, lo, hi int }{
		{0, 0, 0, 0}, {0, 5, 3, 3}, {0, 7, 0, 1}, {1, 9, 63, 65}, {0, 199, 0, 64}, {1, 100, 64, 128},
		{0, 150, 5, 200}, {1, 199, 127, 128}, {0, 3, 1, 63}, {1, 0, 0, 200}, {0, 64, 130, 192},
	} {
		got, want := NewKeySets(n, 2), NewKeySets(n, 2)
		got.AddIn(c.g, c.i, 64) // a key already in
		want.AddIn(c.g, c.i, 64)
		got.AddKeys(c.g, c.i, c.lo, c.hi)
		for j := c.lo; j < c.hi; j++ {
			want.AddIn(c.g, c.i, j)
		}
		if !slices.Equal(got.Words(), want.Words()) {
			t.Errorf("AddKeys(%d, %d, %d, %d): the set differs from Add's", c.g, c.i, c.lo, c.hi)
		}
	}
}
