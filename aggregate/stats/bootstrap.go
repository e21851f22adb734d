package stats

import "math"

// Interval is a bootstrap estimate of the uncertainty of a ratio statistic.
type Interval struct {
	SE     float64 // standard deviation of the replicates (divided by B−1)
	Lo, Hi float64 // nearest-rank 2.5% and 97.5% quantiles of the replicates
}

// Confidence levels of Interval: a central 95% interval.
const (
	LoQuantile = 0.025
	HiQuantile = 0.975
)

// Replicates draws b bootstrap replicates of the ratio Σnum/Σden over
// blocks: each replicate draws len(num) block indices uniformly with
// replacement (r.IntN) and sums num and den over them in draw order. For
// perplexity a block is a window, num its summed NLL and den its number of
// scored tokens, so a replicate is the token-weighted mean NLL of a
// resampled corpus; resampling whole windows keeps the correlation between
// neighbouring tokens inside each block, which the naive σ/√(N−1) ignores.
// It returns nil for fewer than two blocks or b < 2.
func Replicates(num, den []float64, b int, r *Rand) []float64 {
	m := len(num)
	if m < 2 || b < 2 || len(den) != m {
		return nil
	}
	out := make([]float64, b)
	for i := range out {
		var sn, sd float64
		for j := 0; j < m; j++ {
			k := r.IntN(m)
			sn += num[k]
			sd += den[k]
		}
		out[i] = sn / sd
	}
	return out
}

// Summarize returns the standard deviation and the central 95% percentile
// interval of replicates (at least two).
func Summarize(replicates []float64) Interval {
	mean := Mean(replicates)
	var ss Sum
	for _, x := range replicates {
		d := x - mean
		ss.Add(d * d)
	}
	s := Sorted(replicates)
	return Interval{
		SE: math.Sqrt(ss.Value() / float64(len(replicates)-1)),
		Lo: Percentile(s, LoQuantile),
		Hi: Percentile(s, HiQuantile),
	}
}
