package cuda

import (
	"math/rand/v2"
	"testing"

	"ppl.dev/score/kvcache"
	"ppl.dev/score/nn"
)

// IndexKeys (sparse.go, kernels/sparse.cu: DSA's scores on the device, the
// top_k on the host) against nn.LightningTopK over the same inputs, as the
// CPU backend computes it (q and k rotated, k through the bf16 cache):
// 300 rows, 4 heads of 32, top_k 40, the rows in blocks of 24 (lidProducts
// lowered). Queries, keys and weights of small integers make every
// product and sum exact in any order: the scores are the CPU's to the bit
// and so are the sets, ties (the many equal integer scores, relu's zeros)
// broken as ggml's TOP_K. Rotated, the scores differ by roundings and
// near ties go either way: measured 6 of the 11,220 chosen keys apart.
func TestIndexKeysParity(t *testing.T) {
	defer func(v int) { lidProducts = v }(lidProducts)
	lidProducts = 24 * 4 * 300
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		b := testBackend(e)
		defer b.Close()
		rng := rand.New(rand.NewPCG(73, 1))
		const n, heads, dim, topK = 300, 4, 32, 40
		ints := func(m, lo, hi int) []float32 {
			v := make([]float32, m)
			for i := range v {
				v[i] = float32(lo + rng.IntN(hi-lo+1))
			}
			return v
		}
		q, k, w := ints(n*heads*dim, -2, 2), ints(n*dim, -2, 2), ints(n*heads, -1, 2)
		for _, rotate := range []bool{false, true} {
			qr, kr := append([]float32(nil), q...), append([]float32(nil), k...)
			c := nn.NewContext(0)
			if rotate {
				rot := nn.HadamardMatrix(dim)
				rot.Forward(c, qr, q, n*heads)
				rot.Forward(c, kr, k, n)
			}
			var blk kvcache.Block
			kvcache.RoundTrip(kvcache.BF16{}, &blk, kr, n, 1, dim)
			want := nn.LightningTopK(c, qr, kr, w, n, heads, dim, topK)
			got := b.IndexKeys(b.put(t, n, heads*dim, q), b.put(t, n, dim, k), b.put(t, n, heads, w), heads, topK, rotate)
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			apart, chosen := 0, 0
			for i := range n {
				for j := 0; j <= i; j++ {
					if want.Has(i, j) {
						chosen++
					}
					if got.Has(i, j) != want.Has(i, j) {
						apart++
					}
				}
			}
			t.Logf("rotate %v: %d of %d chosen keys apart", rotate, apart, chosen)
			if bound := map[bool]int{false: 0, true: 12}[rotate]; apart > bound {
				t.Errorf("rotate %v: %d of %d chosen keys apart, want at most %d", rotate, apart, chosen, bound)
			}
		}
	})
}
