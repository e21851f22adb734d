package mkmodel

import (
	"errors"
	"fmt"
	"math"
)

// Bigram holds smoothed bigram statistics of a token corpus and their
// low-rank factorization.
//
// The demo model predicts the next token from the current one only, so
// the best it can do is the corpus's bigram distribution P(j | i). We
// smooth the counts toward the unigram distribution,
//
//	P(j | i) = (c(i,j) + Alpha·u(j)) / (c(i) + Alpha),  u(j) = (c(j) + Beta) / (N + Beta·V)
//
// take logarithms and factor the matrix L[i][j] = ln P(j | i) as A·Bᵀ of
// rank Rank+1. Softmax ignores a constant added to a row, so each row is
// centered first; the weighted column mean c(j) becomes an explicit
// rank-one term (A[i][0] = 1, B[j][0] = c(j)); the rest is a truncated SVD
// of the centered matrix with row i weighted by c(i)+1, so the contexts
// that occur often are approximated best.
type Bigram struct {
	V     int
	Rank  int
	Alpha float64
	Beta  float64

	Counts []float64 // V×V, row = previous token
	A, B   *Dense    // V×(Rank+1) each: logits[i][j] ≈ A[i]·B[j]
}

// CountBigrams counts adjacent token pairs in each sequence (pairs never
// span two sequences).
func CountBigrams(v int, seqs [][]int32) ([]float64, error) {
	c := make([]float64, v*v)
	for _, s := range seqs {
		for k := 0; k+1 < len(s); k++ {
			i, j := s[k], s[k+1]
			if i < 0 || int(i) >= v || j < 0 || int(j) >= v {
				return nil, fmt.Errorf("token id out of range [0, %d)", v)
			}
			c[int(i)*v+int(j)]++
		}
	}
	return c, nil
}

// LogProbs returns the smoothed ln P(j | i) as a V×V matrix.
func (g *Bigram) LogProbs() *Dense {
	v := g.V
	uni := make([]float64, v)
	var n float64
	for i := 0; i < v; i++ {
		for j := 0; j < v; j++ {
			uni[j] += g.Counts[i*v+j]
		}
	}
	for _, x := range uni {
		n += x
	}
	for j := range uni {
		uni[j] = (uni[j] + g.Beta) / (n + float64(g.Beta*float64(v)))
	}
	l := newDense(v, v)
	for i := 0; i < v; i++ {
		row := g.Counts[i*v : (i+1)*v]
		var ci float64
		for _, x := range row {
			ci += x
		}
		lr := l.row(i)
		for j, x := range row {
			lr[j] = math.Log((x + float64(g.Alpha*uni[j])) / (ci + g.Alpha))
		}
	}
	return l
}

// Factor computes A and B.
func (g *Bigram) Factor(seed uint64) error {
	v, r := g.V, g.Rank
	if r < 1 || r >= v {
		return fmt.Errorf("bigram: rank %d must be in [1, %d)", r, v)
	}
	if len(g.Counts) != v*v {
		return errors.New("bigram: counts do not match the vocabulary")
	}
	l := g.LogProbs()
	w := make([]float64, v)
	var wsum float64
	for i := 0; i < v; i++ {
		lr := l.row(i)
		var mean, ci float64
		for j, x := range lr {
			mean += x
			ci += g.Counts[i*v+j]
		}
		mean /= float64(v)
		for j := range lr {
			lr[j] -= mean
		}
		w[i] = ci + 1
		wsum += w[i]
	}
	col := make([]float64, v)
	for i := 0; i < v; i++ {
		for j, x := range l.row(i) {
			col[j] += float64(w[i] * x)
		}
	}
	for j := range col {
		col[j] /= wsum
	}
	m := newDense(v, v)
	for i := 0; i < v; i++ {
		s := math.Sqrt(w[i])
		mr, lr := m.row(i), l.row(i)
		for j := range mr {
			mr[j] = s * (lr[j] - col[j])
		}
	}
	a, b := lowRank(m, r, seed)
	g.A, g.B = newDense(v, r+1), newDense(v, r+1)
	for i := 0; i < v; i++ {
		g.A.D[i*(r+1)] = 1
		g.B.D[i*(r+1)] = col[i]
		s := 1 / math.Sqrt(w[i])
		for k := 0; k < r; k++ {
			g.A.D[i*(r+1)+1+k] = a.D[i*r+k] * s
			g.B.D[i*(r+1)+1+k] = b.D[i*r+k]
		}
	}
	return nil
}

// Embeddings lays the factors out as a transformer's token embedding and
// output matrices of width d (each V×d, row-major), so that a model whose
// blocks add nothing computes logits = A[i]·B[j] for previous token i.
//
// The final RMSNorm divides the hidden state by its root mean square, so
// the embedding's direction survives but not its length. Every embedding
// row therefore gets the same length: row i is [A[i], p(i), 0...] with the
// padding p(i) = sqrt(R² − |A[i]|²), R the longest |A[i]|, all scaled to
// root mean square 1. RMSNorm then leaves it unchanged (up to its epsilon),
// and output row j = [B[j], 0, 0...]·R/sqrt(d) restores the scale.
func (g *Bigram) Embeddings(d int) (embd, out []float32, err error) {
	k := g.Rank + 1
	if d < k+1 {
		return nil, nil, fmt.Errorf("bigram: width %d is too small for rank %d (need at least %d)", d, g.Rank, k+1)
	}
	var rmax float64
	norms := make([]float64, g.V)
	for i := 0; i < g.V; i++ {
		norms[i] = math.Sqrt(dot(g.A.row(i), g.A.row(i)))
		rmax = max(rmax, norms[i])
	}
	scale := math.Sqrt(float64(d)) / rmax
	embd = make([]float32, g.V*d)
	out = make([]float32, g.V*d)
	for i := 0; i < g.V; i++ {
		e := embd[i*d : (i+1)*d]
		for c, x := range g.A.row(i) {
			e[c] = float32(x * scale)
		}
		e[k] = float32(math.Sqrt(max(float64(rmax*rmax)-float64(norms[i]*norms[i]), 0)) * scale)
		o := out[i*d : (i+1)*d]
		for c, x := range g.B.row(i) {
			o[c] = float32(x / scale)
		}
	}
	return embd, out, nil
}

// BigramOptions control TrainBigram.
type BigramOptions struct {
	Rank   int     // rank of the factorization beyond the column-mean term
	Alpha  float64 // smoothing toward the unigram distribution (default 0.5)
	Beta   float64 // add-Beta smoothing of the unigram (default 0.5)
	Refine int     // Adam steps of likelihood refinement after the SVD
	LR     float64 // Adam step size (default 0.05)
	Seed   uint64  // seed of the randomized SVD
}

// TrainBigram counts the bigrams of the token sequences, factors their
// smoothed log-probabilities (truncated SVD, see Bigram), then refines the
// factors for Refine steps by maximizing the likelihood of the counts
// under the softmax of A·Bᵀ, which is what a model's perplexity measures:
// the SVD minimizes squared error in log-probability, which spends most of
// its effort on pairs that never occur. It returns the mean negative
// log-likelihood per bigram of the result.
func TrainBigram(v int, seqs [][]int32, opt BigramOptions) (*Bigram, float64, error) {
	if opt.Alpha == 0 {
		opt.Alpha = 0.5
	}
	if opt.Beta == 0 {
		opt.Beta = 0.5
	}
	if opt.LR == 0 {
		opt.LR = 0.05
	}
	counts, err := CountBigrams(v, seqs)
	if err != nil {
		return nil, 0, err
	}
	g := &Bigram{V: v, Rank: opt.Rank, Alpha: opt.Alpha, Beta: opt.Beta, Counts: counts}
	if err := g.Factor(opt.Seed); err != nil {
		return nil, 0, err
	}
	nll := g.refine(opt.Refine, opt.LR)
	return g, nll, nil
}
