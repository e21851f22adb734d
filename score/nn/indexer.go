package nn

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"

	"ppl.dev/gguf"
)

// LightningTopK is the key selection of DeepSeek's sparse attention (DSA):
// its lightning indexer scores key j for query row i as
//
//	score(i, j) = Σ_h relu(q[i,h]·k[j]) · w[i,h]
//
// (q (n, heads·dim), k (n, dim): one key head; w (n, heads), the heads'
// weights, scale included), and row i keeps the topK keys j <= i of the
// highest scores: every key j <= i while i < topK. Scores are float32 dot
// products (Gemm) summed over heads in order; among equal scores at the
// boundary (relu's zeros make many) the keys ggml's TOP_K keeps (TopKeys).
func LightningTopK(c *Context, q, k, w []float32, n, heads, dim, topK int) *KeySet {
	check("indexer q", len(q), n*heads*dim)
	check("indexer k", len(k), n*dim)
	check("indexer weights", len(w), n*heads)
	set := NewKeySet(n)
	np := (n + 31) / 32 * 32
	mark := c.Mark()
	defer c.Release(mark)
	kt := c.Alloc(dim * np) // kt[d·np + j] = k[j][d], zero past n
	for j := range n {
		for d := range dim {
			kt[d*np+j] = k[j*dim+d]
		}
	}
	c.Parallel(n, func(_, lo, hi int) {
		sc := make([]float32, heads*np)
		score := make([]float32, np)
		order := make([]int32, np)
		for i := lo; i < hi; i++ {
			if i < topK {
				set.AddKeys(0, i, 0, i+1)
				continue
			}
			m := (i + 32) / 32 * 32 // keys [0, i] in panels of 32
			for z := 0; z < m; z += 32 {
				Gemm(heads, 32, q[i*heads*dim:], dim, kt[z:], np, dim, sc[z:], np, nil)
			}
			wi := w[i*heads : (i+1)*heads]
			for j := range i + 1 {
				var s float32
				for h, wh := range wi {
					s += float32(max(sc[h*np+j], 0) * wh)
				}
				score[j] = s
			}
			addTopKeys(set, i, score, order, topK)
		}
	})
	return set
}

// addTopKeys puts in row i of set the topK keys j <= i of the highest
// score[j] (score holds at least i+1), choosing among equal scores as
// ggml's TOP_K does (TopKeys); order is scratch of at least i+1.
func addTopKeys(set *KeySet, i int, score []float32, order []int32, topK int) {
	for _, j := range TopKeys(score[:i+1], order[:i+1], topK) {
		set.Add(i, int(j))
	}
}

// TopKeys returns the indices of the k highest of score, choosing among
// equal scores as ggml's TOP_K does on the CPU: libstdc++'s
// std::partial_sort of the indices 0..n-1 by score[a] > score[b], whose
// heap selection keeps the first k indices in a heap (its root the lowest
// score) and lets a later index in only when its score is higher than the
// root's. order is scratch of len(score).
func TopKeys(score []float32, order []int32, k int) []int32 {
	for j := range order {
		order[j] = int32(j)
	}
	if k >= len(order) {
		return order
	}
	h := order[:k]
	less := func(a, b int32) bool { return score[a] > score[b] } // libstdc++'s comp
	// __make_heap, then __heap_select's replacements by __pop_heap.
	for p := (k - 2) / 2; p >= 0 && k >= 2; p-- {
		adjustHeap(h, p, h[p], less)
	}
	for _, j := range order[k:] {
		if less(j, h[0]) {
			adjustHeap(h, 0, j, less)
		}
	}
	return h
}

// adjustHeap is libstdc++'s __adjust_heap with its __push_heap: the hole
// at hole sifted down to a leaf along the preferred children, then v
// pushed up from there.
func adjustHeap(h []int32, hole int, v int32, less func(a, b int32) bool) {
	n, top := len(h), hole
	child := hole
	for child < (n-1)/2 {
		child = 2 * (child + 1)
		if less(h[child], h[child-1]) {
			child--
		}
		h[hole] = h[child]
		hole = child
	}
	if n%2 == 0 && child == (n-2)/2 {
		child = 2 * (child + 1)
		h[hole] = h[child-1]
		hole = child - 1
	}
	for parent := (hole - 1) / 2; hole > top && less(h[parent], v); parent = (hole - 1) / 2 {
		h[hole] = h[parent]
		hole = parent
	}
	h[hole] = v
}

// topKeysRef is TopKeys by sorting, for scores without ties: the
// reference it is tested against.
func topKeysRef(score []float32, k int) []int32 {
	order := make([]int32, len(score))
	for j := range order {
		order[j] = int32(j)
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		switch {
		case score[a] > score[b]:
			return -1
		case score[a] < score[b]:
			return 1
		}
		return 0
	})
	return order[:k]
}

// HadamardMatrix is the normalized Sylvester Hadamard matrix of size dim
// (a power of 2), H_ij = (-1)^popcount(i AND j)/sqrt(dim), as an F32
// Linear: the rotation llama.cpp applies to the lightning indexer's
// queries and keys, a matrix product, which does not change their scores
// but by rounding.
func HadamardMatrix(dim int) *Linear {
	if l, ok := hadamards.Load(dim); ok {
		return l.(*Linear)
	}
	l, _ := hadamards.LoadOrStore(dim, newHadamard(dim))
	return l.(*Linear)
}

// hadamards holds the matrices HadamardMatrix built, by size: callers
// turn heads with them in every layer of every window, and a Linear is
// never written once built.
var hadamards sync.Map

// newHadamard builds HadamardMatrix(dim).
func newHadamard(dim int) *Linear {
	inv := 1 / float32(math.Sqrt(float64(dim)))
	data := make([]byte, 4*dim*dim)
	for i := range dim {
		for j := range dim {
			v := inv
			if popcount(i&j)%2 == 1 {
				v = -inv
			}
			binary.LittleEndian.PutUint32(data[4*(i*dim+j):], math.Float32bits(v))
		}
	}
	l, err := NewLinear(fmt.Sprintf("(hadamard %d)", dim), gguf.TypeF32, dim, dim, data)
	if err != nil {
		panic(err) // F32 is always supported
	}
	return l
}

func popcount(x int) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// LayerNorm normalizes each row of x (rows × cols) to zero mean and unit
// variance, eps added to the variance, then scales by w and adds b (none
// when nil): mean and variance in float64, each output rounded once. w
// (and b) hold cols values, or those of several rows: row r takes part r
// mod len(w)/cols (Command R+'s per-head norms, its heads as rows).
func LayerNorm(out, x, w, b []float32, eps float64, rows, cols int) {
	checkLayerNorm(out, x, w, b, rows, cols)
	for r := range rows {
		xr, or := x[r*cols:(r+1)*cols], out[r*cols:(r+1)*cols]
		w, b := normPart(w, r, cols), normPart(b, r, cols)
		var mean, v float64
		for _, e := range xr {
			mean += float64(e)
		}
		mean /= float64(cols)
		for _, e := range xr {
			v += float64((float64(e) - mean) * (float64(e) - mean))
		}
		inv := 1 / math.Sqrt(v/float64(cols)+eps)
		for c, e := range xr {
			y := float64((float64(e) - mean) * inv * float64(w[c]))
			if b != nil {
				y += float64(b[c])
			}
			or[c] = float32(y)
		}
	}
}

// GGMLLayerNorm is LayerNorm (w and b as there) as ggml-cpu computes
// NORM, then MUL by w and ADD b (when not nil): the mean a float64 sum
// rounded to float32, divided in float32;
// the variance a float64 sum of float32 squares of x - mean, 16 at a time
// reduced as _mm512_reduce_add_ps does (8 at a time as hsum_float_8 in the
// AVX2 build), the rest one by one; 1/sqrtf(variance + eps) in float32.
func GGMLLayerNorm(out, x, w, b []float32, eps float32, rows, cols int, avx2 bool) {
	checkLayerNorm(out, x, w, b, rows, cols)
	lanes := 16
	if avx2 {
		lanes = 8
	}
	for r := range rows {
		xr, y := x[r*cols:(r+1)*cols], out[r*cols:(r+1)*cols]
		w, b := normPart(w, r, cols), normPart(b, r, cols)
		var sum float64
		for _, e := range xr {
			sum += float64(e)
		}
		mean := float32(sum) / float32(cols)
		var sq float64
		i := 0
		for ; i+lanes <= cols; i += lanes {
			var v [16]float32
			for l := range lanes {
				y[i+l] = xr[i+l] - mean
				v[l] = y[i+l] * y[i+l]
			}
			if avx2 {
				sq += float64(hsum8((*[8]float32)(v[:8])))
			} else {
				sq += float64(reduce16(&v))
			}
		}
		for ; i < cols; i++ {
			y[i] = xr[i] - mean
			sq += float64(y[i] * y[i])
		}
		scale := 1 / float32(math.Sqrt(float64(float32(sq/float64(cols))+eps)))
		for c := range y {
			y[c] = float32(y[c] * scale * w[c])
			if b != nil {
				y[c] += b[c]
			}
		}
	}
}

// checkLayerNorm checks LayerNorm's arguments.
func checkLayerNorm(out, x, w, b []float32, rows, cols int) {
	check("layer norm input", len(x), rows*cols)
	check("layer norm output", len(out), rows*cols)
	if cols <= 0 || len(w) == 0 || len(w)%cols != 0 {
		panic(fmt.Sprintf("nn: layer norm weights of %d values for rows of %d", len(w), cols))
	}
	if b != nil {
		check("layer norm bias", len(b), len(w))
	}
}

// normPart is the part of a norm's weights w (nil: nil) that row r takes.
func normPart(w []float32, r, cols int) []float32 {
	if w == nil {
		return nil
	}
	p := r % (len(w) / cols) * cols
	return w[p : p+cols]
}
