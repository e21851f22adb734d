package mkmodel

import (
	"math"
	"runtime"
	"sync"
)

// refine improves A and B by maximizing the likelihood of the bigram
// counts under logits A[i]·B[j] (full softmax), with Adam for iters steps;
// A[i][0] stays 1. It returns the mean NLL per counted pair at the last
// step (before its update), or that of the unrefined factors when iters
// is 0. Work is split by rows and the per-worker gradients are summed in
// a fixed order, so the result does not depend on scheduling.
func (g *Bigram) refine(iters int, lr float64) float64 {
	v, k := g.V, g.A.C
	type acc struct {
		dB   []float64
		loss float64
	}
	// The rows are cut into a fixed number of parts, whatever the number
	// of CPUs, so the gradient sums are the same everywhere.
	const parts = 8
	accs := make([]acc, parts)
	for w := range accs {
		accs[w].dB = make([]float64, v*k)
	}
	dA := make([]float64, v*k)
	mA, vA := make([]float64, v*k), make([]float64, v*k)
	mB, vB := make([]float64, v*k), make([]float64, v*k)
	rows := make([]float64, v)
	var total float64
	var active []int
	for i := 0; i < v; i++ {
		for _, c := range g.Counts[i*v : (i+1)*v] {
			rows[i] += c
		}
		total += rows[i]
		if rows[i] > 0 {
			active = append(active, i)
		}
	}
	const b1, b2, eps = 0.9, 0.999, 1e-8
	var loss float64
	for it := 1; it <= max(iters, 1); it++ {
		var wg sync.WaitGroup
		sem := make(chan struct{}, runtime.GOMAXPROCS(0))
		for w := 0; w < parts; w++ {
			lo, hi := len(active)*w/parts, len(active)*(w+1)/parts
			a := &accs[w]
			clear(a.dB)
			a.loss = 0
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				z := make([]float64, v)
				for _, i := range active[lo:hi] {
					ai := g.A.row(i)
					mx := math.Inf(-1)
					for j := 0; j < v; j++ {
						z[j] = dot4(ai, g.B.row(j))
						mx = max(mx, z[j])
					}
					cnt := g.Counts[i*v : (i+1)*v]
					for j, c := range cnt {
						if c > 0 {
							a.loss -= float64(c * (z[j] - mx))
						}
					}
					var se float64
					for j := range z {
						z[j] = math.Exp(z[j] - mx)
						se += z[j]
					}
					a.loss += float64(rows[i] * math.Log(se))
					da := dA[i*k : (i+1)*k]
					clear(da)
					for j := 0; j < v; j++ {
						gj := rows[i]*z[j]/se - cnt[j]
						if gj == 0 {
							continue
						}
						axpy2(da, a.dB[j*k:(j+1)*k], gj, g.B.row(j), ai)
					}
				}
			}()
		}
		wg.Wait()
		loss = 0
		for w := range accs {
			loss += accs[w].loss
		}
		loss /= total
		if iters == 0 {
			break
		}
		c1, c2 := 1-math.Pow(b1, float64(it)), 1-math.Pow(b2, float64(it))
		for x := range dA {
			var gb float64
			for w := range accs {
				gb += accs[w].dB[x]
			}
			ga := dA[x] / total
			gb /= total
			if x%k == 0 {
				ga = 0 // A[i][0] stays the constant 1
			}
			mA[x] = float64(b1*mA[x]) + float64((1-b1)*ga)
			vA[x] = float64(b2*vA[x]) + float64((1-b2)*ga*ga)
			g.A.D[x] -= lr * (mA[x] / c1) / (math.Sqrt(vA[x]/c2) + eps)
			mB[x] = float64(b1*mB[x]) + float64((1-b1)*gb)
			vB[x] = float64(b2*vB[x]) + float64((1-b2)*gb*gb)
			g.B.D[x] -= lr * (mB[x] / c1) / (math.Sqrt(vB[x]/c2) + eps)
		}
	}
	return loss
}

// dot4 is the dot product of a and b with four accumulators.
func dot4(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += float64(a[i] * b[i])
		s1 += float64(a[i+1] * b[i+1])
		s2 += float64(a[i+2] * b[i+2])
		s3 += float64(a[i+3] * b[i+3])
	}
	for ; i < len(a); i++ {
		s0 += float64(a[i] * b[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy2 does x += g*bx and y += g*by.
func axpy2(x, y []float64, g float64, bx, by []float64) {
	y, bx, by = y[:len(x)], bx[:len(x)], by[:len(x)]
	for c := range x {
		x[c] += float64(g * bx[c])
		y[c] += float64(g * by[c])
	}
}
