package nn

import (
	"fmt"
	"math"
)

// Attention is causal scaled dot-product attention with grouped KV heads
// (GQA): query head h reads key/value head h / (Heads/KVHeads).
type Attention struct {
	Heads, KVHeads, HeadDim int
	Scale                   float64 // score scale; 1/sqrt(HeadDim) in every model we load
}

// Validate reports head counts that do not group.
func (a *Attention) Validate() error {
	if a.Heads <= 0 || a.KVHeads <= 0 || a.HeadDim <= 0 || a.Heads%a.KVHeads != 0 {
		return fmt.Errorf("attention: %d heads, %d KV heads of size %d (heads must be a multiple of KV heads)", a.Heads, a.KVHeads, a.HeadDim)
	}
	return nil
}

// attnGrain is how many (query, head) items a worker takes at a time.
const attnGrain = 8

// Forward computes, for each query row i and head h,
// out[i,h] = Σ_{j<=i} softmax_j(q[i,h]·k[j,g]·Scale) v[j,g], g = h/(Heads/KVHeads):
// q (n, Heads·HeadDim), k, v (n, KVHeads·HeadDim) -> out (n, Heads·HeadDim).
//
// Each score is a float32 dot product; scaling, the softmax and the
// weighted sum of values are float64, rounded to float32 once per output.
func (a *Attention) Forward(c *Context, out, q, k, v []float32, n int) {
	hd, qs, ks := a.HeadDim, a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	check("attention q", len(q), n*qs)
	check("attention k", len(k), n*ks)
	check("attention v", len(v), n*ks)
	check("attention output", len(out), n*qs)
	group := a.Heads / a.KVHeads
	items := n * a.Heads
	w := c.Workers((items + attnGrain - 1) / attnGrain)
	scratch := c.Alloc64(max(w, 1) * (n + hd)) // per worker: n scores, hd sums
	c.ParallelDynamic(items, attnGrain, func(worker, lo, hi int) {
		sc := scratch[worker*(n+hd) : (worker+1)*(n+hd)]
		for it := lo; it < hi; it++ {
			i, h := it/a.Heads, it%a.Heads
			g := h / group
			qi := q[i*qs+h*hd : i*qs+(h+1)*hd]
			s := sc[:i+1]
			m := math.Inf(-1)
			for j := range s {
				s[j] = float64(Dot(qi, k[j*ks+g*hd:j*ks+(g+1)*hd])) * a.Scale
				m = math.Max(m, s[j])
			}
			var sum float64
			for j := range s {
				s[j] = math.Exp(s[j] - m)
				sum += s[j]
			}
			acc := sc[n : n+hd]
			clear(acc)
			for j, p := range s {
				vj := v[j*ks+g*hd : j*ks+(g+1)*hd]
				for d := range acc {
					acc[d] += p * float64(vj[d])
				}
			}
			o := out[i*qs+h*hd : i*qs+(h+1)*hd]
			for d := range o {
				o[d] = float32(acc[d] / sum)
			}
		}
	})
}
