package mkmodel

import (
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
)

// Dense is a row-major float64 matrix.
type Dense struct {
	R, C int
	D    []float64
}

func newDense(r, c int) *Dense { return &Dense{R: r, C: c, D: make([]float64, r*c)} }

func (m *Dense) row(i int) []float64 { return m.D[i*m.C : (i+1)*m.C] }

// parallelRows runs f over [0, n) split into contiguous ranges, one per
// CPU. Each output element is computed by exactly one call in a fixed
// order, so results do not depend on scheduling.
func parallelRows(n int, f func(lo, hi int)) {
	w := min(runtime.GOMAXPROCS(0), n)
	if w <= 1 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	for k := 0; k < w; k++ {
		lo, hi := n*k/w, n*(k+1)/w
		wg.Add(1)
		go func() { defer wg.Done(); f(lo, hi) }()
	}
	wg.Wait()
}

// mul returns a·b: a (n×k) @ b (k×m) -> (n×m).
func mul(a, b *Dense) *Dense {
	out := newDense(a.R, b.C)
	parallelRows(a.R, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			o := out.row(i)
			for k, x := range a.row(i) {
				if x == 0 {
					continue
				}
				for j, y := range b.row(k) {
					o[j] += float64(x * y)
				}
			}
		}
	})
	return out
}

// mulT returns aᵀ·b: a (k×n), b (k×m) -> (n×m).
func mulT(a, b *Dense) *Dense {
	return mul(transpose(a), b)
}

func transpose(a *Dense) *Dense {
	t := newDense(a.C, a.R)
	for i := 0; i < a.R; i++ {
		for j, x := range a.row(i) {
			t.D[j*t.C+i] = x
		}
	}
	return t
}

// orthonormalize makes the columns of a orthonormal in place (modified
// Gram-Schmidt, twice for stability).
func orthonormalize(a *Dense) {
	t := transpose(a) // columns as rows
	for pass := 0; pass < 2; pass++ {
		for j := 0; j < t.R; j++ {
			v := t.row(j)
			for k := 0; k < j; k++ {
				u := t.row(k)
				d := dot(u, v)
				for i := range v {
					v[i] -= float64(d * u[i])
				}
			}
			n := math.Sqrt(dot(v, v))
			if n == 0 {
				continue
			}
			for i := range v {
				v[i] /= n
			}
		}
	}
	copy(a.D, transpose(t).D)
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += float64(a[i] * b[i])
	}
	return s
}

// jacobiEigen returns the eigenvalues (descending) and eigenvectors (as
// columns of the returned matrix, same order) of the symmetric matrix s.
func jacobiEigen(s *Dense) ([]float64, *Dense) {
	n := s.R
	a := &Dense{R: n, C: n, D: append([]float64(nil), s.D...)}
	v := newDense(n, n)
	for i := 0; i < n; i++ {
		v.D[i*n+i] = 1
	}
	for sweep := 0; sweep < 100; sweep++ {
		var off float64
		for p := 0; p < n; p++ {
			for q := p + 1; q < n; q++ {
				off += float64(a.D[p*n+q] * a.D[p*n+q])
			}
		}
		if off < 1e-30 {
			break
		}
		for p := 0; p < n; p++ {
			for q := p + 1; q < n; q++ {
				apq := a.D[p*n+q]
				if math.Abs(apq) < 1e-300 {
					continue
				}
				app, aqq := a.D[p*n+p], a.D[q*n+q]
				theta := (aqq - app) / (2 * apq)
				t := math.Copysign(1, theta) / (math.Abs(theta) + math.Sqrt(float64(theta*theta)+1))
				c := 1 / math.Sqrt(float64(t*t)+1)
				sn := t * c
				for k := 0; k < n; k++ {
					akp, akq := a.D[k*n+p], a.D[k*n+q]
					a.D[k*n+p] = float64(c*akp) - float64(sn*akq)
					a.D[k*n+q] = float64(sn*akp) + float64(c*akq)
				}
				for k := 0; k < n; k++ {
					apk, aqk := a.D[p*n+k], a.D[q*n+k]
					a.D[p*n+k] = float64(c*apk) - float64(sn*aqk)
					a.D[q*n+k] = float64(sn*apk) + float64(c*aqk)
				}
				for k := 0; k < n; k++ {
					vkp, vkq := v.D[k*n+p], v.D[k*n+q]
					v.D[k*n+p] = float64(c*vkp) - float64(sn*vkq)
					v.D[k*n+q] = float64(sn*vkp) + float64(c*vkq)
				}
			}
		}
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	// Selection sort by eigenvalue, descending; stable for ties.
	for i := 0; i < n; i++ {
		best := i
		for j := i + 1; j < n; j++ {
			if a.D[idx[j]*n+idx[j]] > a.D[idx[best]*n+idx[best]] {
				best = j
			}
		}
		idx[i], idx[best] = idx[best], idx[i]
	}
	vals := make([]float64, n)
	vecs := newDense(n, n)
	for k, i := range idx {
		vals[k] = a.D[i*n+i]
		for r := 0; r < n; r++ {
			vecs.D[r*n+k] = v.D[r*n+i]
		}
	}
	return vals, vecs
}

// lowRank returns A (R×r) and B (C×r) with A·Bᵀ the best rank-r
// approximation of m in the Frobenius norm, found by randomized subspace
// iteration (Halko, Martinsson and Tropp 2011) from a fixed seed, with the
// singular values split evenly between the factors.
func lowRank(m *Dense, r int, seed uint64) (a, b *Dense) {
	k := min(r+16, m.R, m.C)
	rng := rand.New(rand.NewPCG(seed, 0x6c6f7772616e6b))
	omega := newDense(m.C, k)
	for i := range omega.D {
		omega.D[i] = rng.NormFloat64()
	}
	y := mul(m, omega) // R×k
	orthonormalize(y)
	for it := 0; it < 2; it++ {
		z := mulT(m, y) // C×k
		orthonormalize(z)
		y = mul(m, z)
		orthonormalize(y)
	}
	bt := mulT(m, y)  // C×k = (yᵀ m)ᵀ
	g := mulT(bt, bt) // k×k = (yᵀm)(yᵀm)ᵀ
	vals, w := jacobiEigen(g)
	u := mul(y, w)   // R×k left singular vectors
	vv := mul(bt, w) // C×k right singular vectors times s
	a, b = newDense(m.R, r), newDense(m.C, r)
	for j := 0; j < r && j < k; j++ {
		s := math.Sqrt(max(vals[j], 0))
		if s == 0 {
			continue
		}
		sa, sb := math.Sqrt(s), 1/math.Sqrt(s)
		for i := 0; i < m.R; i++ {
			a.D[i*r+j] = u.D[i*k+j] * sa
		}
		for i := 0; i < m.C; i++ {
			b.D[i*r+j] = vv.D[i*k+j] * sb
		}
	}
	return a, b
}
