// Package stats holds the arithmetic behind ppl-aggregate and ppl-compare:
// compensated sums, nearest-rank percentiles, moments with llama-perplexity's
// error conventions, and a deterministic bootstrap.
//
// Published perplexities must be reproducible to the last bit, so every
// result here depends only on its inputs and their order: sums are
// Neumaier-compensated and taken in the caller's order, percentiles pick an
// observed value (no interpolation), and the bootstrap draws from a
// generator specified in full below rather than from math/rand, whose
// derived streams are not promised to stay the same across Go releases.
package stats

import (
	"math"
	"math/bits"
	"slices"
)

// Sum is a Neumaier (improved Kahan) compensated sum. The zero Sum is 0.
// Adding n values in a fixed order gives a result within about one ulp of
// the exact sum, whatever n is, and the same bits on every machine.
type Sum struct {
	s, c float64
}

// Add adds x.
func (k *Sum) Add(x float64) {
	x = float64(x) // rounded: a caller's x = a*b is never fused into the sum (the same bits on arm64)
	t := k.s + x
	if math.Abs(k.s) >= math.Abs(x) {
		k.c += (k.s - t) + x
	} else {
		k.c += (x - t) + k.s
	}
	k.s = t
}

// Value returns the sum.
func (k *Sum) Value() float64 { return k.s + k.c }

// SumOf returns the compensated sum of xs in order.
func SumOf(xs []float64) float64 {
	var k Sum
	for _, x := range xs {
		k.Add(x)
	}
	return k.Value()
}

// Mean returns the compensated mean of xs (0 for none).
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return SumOf(xs) / float64(len(xs))
}

// MeanSE returns the mean of xs and its naive standard error
// σ/√(N−1), where σ² = Σ(x−mean)²/N is the population variance: the
// convention of llama-perplexity (sqrt((⟨x²⟩−⟨x⟩²)/(N−1))), computed in two
// passes so that it does not cancel catastrophically. The error is 0 for
// fewer than two values. It treats the values as independent, which
// consecutive tokens are not; see Bootstrap for an error that is not fooled
// by their correlation.
func MeanSE(xs []float64) (mean, se float64) {
	n := len(xs)
	if n == 0 {
		return 0, 0
	}
	mean = Mean(xs)
	if n < 2 {
		return mean, 0
	}
	var ss Sum
	for _, x := range xs {
		d := x - mean
		ss.Add(d * d)
	}
	return mean, math.Sqrt(ss.Value() / float64(n) / float64(n-1))
}

// CovMean returns the covariance of the means of the paired values xs and
// ys, Σ(x−x̄)(y−ȳ)/N/(N−1): the term llama-perplexity subtracts when it
// propagates the errors of two correlated means into their difference.
// It is 0 for fewer than two pairs. xs and ys must have the same length.
func CovMean(xs, ys []float64) float64 {
	n := len(xs)
	if n < 2 || len(ys) != n {
		return 0
	}
	mx, my := Mean(xs), Mean(ys)
	var s Sum
	for i := range xs {
		s.Add((xs[i] - mx) * (ys[i] - my))
	}
	return s.Value() / float64(n) / float64(n-1)
}

// Percentile returns the nearest-rank q-quantile (0 <= q <= 1) of sorted,
// which must be in ascending order and not empty: the value at 1-based
// rank ceil(q·N), clamped to [1, N]; q = 0 gives the minimum. The product
// q·N is taken in float64, exactly as Python's math.ceil(q*len(xs)) does,
// which is how the oracle's p99_kld was computed. Unlike numpy's default
// (and llama-perplexity's) linear interpolation, the result is always one
// of the observed values, which makes it exact and easy to check.
func Percentile(sorted []float64, q float64) float64 {
	n := len(sorted)
	r := int(math.Ceil(q * float64(n)))
	if r < 1 {
		r = 1
	}
	if r > n {
		r = n
	}
	return sorted[r-1]
}

// Sorted returns a sorted copy of xs.
func Sorted(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}

// Rand is SplitMix64 (Steele, Lea and Flood 2014; the generator Java's
// SplittableRandom and many seeding routines use): the state advances by
// 0x9e3779b97f4a7c15 and each output is the state passed through a fixed
// 64-bit mixer. It is specified here in full so that the bootstrap can be
// reproduced in any language.
type Rand struct{ state uint64 }

// NewRand returns a generator seeded with seed.
func NewRand(seed uint64) *Rand { return &Rand{state: seed} }

// Uint64 returns the next output.
func (r *Rand) Uint64() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// IntN returns a uniform integer in [0, n), n > 0, by Lemire's
// multiply-and-reject method: the high word of x·n for the next output x,
// drawing again while the low word falls below 2⁶⁴ mod n.
func (r *Rand) IntN(n int) int {
	un := uint64(n)
	hi, lo := bits.Mul64(r.Uint64(), un)
	if lo < un {
		thresh := -un % un
		for lo < thresh {
			hi, lo = bits.Mul64(r.Uint64(), un)
		}
	}
	return int(hi)
}

// Seed derives the seed of one named bootstrap from the user's seed, so
// that each group's replicates are independent of which other groups exist:
// the FNV-1a 64-bit hash of name, XORed with seed, mixed by one SplitMix64
// step.
func Seed(seed uint64, name string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return NewRand(seed ^ h).Uint64()
}
