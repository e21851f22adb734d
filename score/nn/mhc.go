package nn

import "math"

// SinkhornMix sets each row of dst (n, S·S) to the streams' mixing matrix
// of a manifold-constrained hyper-connection (DeepSeek-V4's mHC, GLM5-Next
// as llama.cpp 0.7.0 runs it), from the mixes m (n, cols): element (d, s)
// of row t, dst[t·S·S + d + S·s] (d the stream written, s the one read),
// starts as m[t, off + d + S·s]·scale + base[d + S·s]; a softmax over d for
// each s (glibc's expf, the sum in float32 in order), plus eps; then the
// columns normalized (each d's values over s divided by eps + their sum),
// and iters - 1 times the rows (each s's over d), then the columns again.
// Every step in float32, in ggml's fused DSV4_HC_COMB's order, its two
// multiply-adds fused (its compiler contracts them to FMAs; probed: with
// them rounded twice, llama.cpp's log-probs differ from the fourth
// token of a window on).
func SinkhornMix(dst, m []float32, n, cols, off, S int, scale float32, base []float32, eps float32, iters int) {
	check("Sinkhorn mix", len(dst), n*S*S)
	check("Sinkhorn mixes", len(m), n*cols)
	check("Sinkhorn base", len(base), S*S)
	if off+S*S > cols || iters < 1 {
		panic("nn: Sinkhorn mix past its mixes, or without an iteration")
	}
	norm := func(c []float32, byRows bool) {
		for a := range S {
			sum := eps
			for b := range S {
				sum += c[sinkhornAt(a, b, S, byRows)]
			}
			inv := 1 / sum
			for b := range S {
				c[sinkhornAt(a, b, S, byRows)] *= inv
			}
		}
	}
	for t := range n {
		c := dst[t*S*S : (t+1)*S*S]
		for s := range S {
			mx := float32(math.Inf(-1))
			for d := range S {
				v := fma32(m[t*cols+off+d+S*s], scale, base[d+S*s])
				c[d+S*s] = v
				mx = max(mx, v)
			}
			var sum float32
			for d := range S {
				v := LibcExpf(c[d+S*s] - mx)
				c[d+S*s] = v
				sum += v
			}
			inv := 1 / sum
			for d := range S {
				c[d+S*s] = fma32(c[d+S*s], inv, eps)
			}
		}
		norm(c, false)
		for range iters - 1 {
			norm(c, true)
			norm(c, false)
		}
	}
}

// sinkhornAt is the index of element b of line a of a Sinkhorn matrix: a row
// (fixed s = a, over d = b) with byRows, else a column (fixed d = a, over
// s = b).
func sinkhornAt(a, b, S int, byRows bool) int {
	if byRows {
		return b + S*a // s = a, d = b
	}
	return a + S*b // d = a, s = b
}
