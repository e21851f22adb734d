package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"ppl.dev/score/kvcache"
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

func randT(b *cpuBackend, rng *rand.Rand, rows, cols int, scale float64) *cpuT {
	x := b.Alloc(rows, cols).(*cpuT)
	for i := range x.d {
		x.d[i] = float32(rng.NormFloat64() * scale)
	}
	return x
}

// TestColumns checks the column copy, and that a range outside either
// tensor panics.
func TestColumns(t *testing.T) {
	b := newCPU(nn.NewContext(1))
	rng := rand.New(rand.NewPCG(1, 2))
	x := randT(b, rng, 3, 7, 1)
	d := randT(b, rng, 3, 5, 1)
	before := append([]float32(nil), d.d...)
	b.Columns(d, 1, x, 4, 3)
	for r := range 3 {
		for c := range 5 {
			want := before[r*5+c]
			if c >= 1 && c < 4 {
				want = x.d[r*7+4+c-1]
			}
			if d.d[r*5+c] != want {
				t.Fatalf("row %d column %d: %v, want %v", r, c, d.d[r*5+c], want)
			}
		}
	}
	for _, bad := range [][3]int{{3, 4, 3}, {0, 5, 3}, {-1, 0, 1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("columns %v: no panic", bad)
				}
			}()
			b.Columns(d, bad[0], x, bad[1], bad[2])
		}()
	}
}

// TestHeadLinearPlain checks HeadLinear against the float64 product of
// each head with its matrix (float32 products over 24 terms: 1e-5).
func TestHeadLinearPlain(t *testing.T) {
	const H, in, out, n = 4, 24, 10, 9
	b := newCPU(nn.NewContext(3))
	rng := rand.New(rand.NewPCG(3, 4))
	w := f32Matrix(t, b, rng, "w", H, in, out)
	x := randT(b, rng, n, H*in, 1)
	got := b.Alloc(n, H*out).(*cpuT)
	b.HeadLinear(got, x, w)
	wf := make([]float32, H*in*out)
	if err := decodeF32(w.Data, wf); err != nil {
		t.Fatal(err)
	}
	for r := range n {
		for h := range H {
			for o := range out {
				var s float64
				for i := range in {
					s += float64(wf[(h*out+o)*in+i]) * float64(x.d[r*H*in+h*in+i])
				}
				if g := float64(got.d[r*H*out+h*out+o]); math.Abs(g-s) > 1e-5*(1+math.Abs(s)) {
					t.Fatalf("row %d head %d output %d: %v, plain %v", r, h, o, g, s)
				}
			}
		}
	}
}

func decodeF32(b []byte, out []float32) error {
	if len(b) != 4*len(out) {
		return fmt.Errorf("%d bytes for %d values", len(b), len(out))
	}
	for i := range out {
		out[i] = math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24)
	}
	return nil
}

// latentPlain is LatentAttention's definition in float64: attention with
// the keys as values, each head's first vd outputs.
func latentPlain(q, k []float32, n int, a *ml.Attn, vd int) []float64 {
	def := nn.Attention{Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: a.HeadDim, Scale: a.Scale, Window: a.Window}
	if a.Sinks != nil {
		def.Sinks = a.Sinks.V
	}
	full := def.Exact(q, k, k, n)
	out := make([]float64, n*a.Heads*vd)
	for r := range n * a.Heads {
		copy(out[r*vd:(r+1)*vd], full[r*a.HeadDim:])
	}
	return out
}

// TestLatentAttentionPlain checks LatentAttention against its float64
// definition: MQA over a latent (DeepSeek's shape), grouped heads with a
// window and sinks, one token, key sizes of nn.Attention's flash path
// (multiples of 16, float32 softmax over blocks of keys), and adversarial
// scores (queries 30 and 300 times larger: softmaxes dominated by one
// key, exp arguments far below -700).
// Float32 dot products over <= 48 terms and the flash path's float32
// softmax leave about 3e-7 relative error in O(1) outputs (see the log);
// the scores' error grows with the query scale, and so does the bound:
// 1e-6 × (1 + scale).
func TestLatentAttentionPlain(t *testing.T) {
	cases := []struct {
		name          string
		heads, kv, hd int
		vd, n, window int
		sinks         bool
		qscale        float64
	}{
		{"mqa-latent", 4, 1, 40, 32, 37, 0, false, 1},
		{"gqa-window-sinks", 4, 2, 16, 16, 29, 5, true, 1},
		{"one-token", 2, 1, 12, 4, 1, 0, true, 1},
		{"large-scores", 4, 1, 40, 32, 23, 0, false, 300},
		{"flash", 4, 1, 48, 32, 150, 0, false, 1},
		{"flash-large-scores", 8, 2, 32, 16, 70, 0, false, 30},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, threads := range []int{1, 3} {
				b := newCPU(nn.NewContext(threads))
				rng := rand.New(rand.NewPCG(5, 6))
				a := &ml.Attn{Heads: c.heads, KVHeads: c.kv, HeadDim: c.hd, Scale: 1 / math.Sqrt(float64(c.hd)), Window: c.window}
				if c.sinks {
					a.Sinks = &ml.Vector{Name: "sinks", V: make([]float32, c.heads)}
					for i := range a.Sinks.V {
						a.Sinks.V[i] = float32(rng.NormFloat64() * 2)
					}
				}
				q := randT(b, rng, c.n, c.heads*c.hd, c.qscale)
				k := randT(b, rng, c.n, c.kv*c.hd, 1)
				got := b.Alloc(c.n, c.heads*c.vd).(*cpuT)
				b.LatentAttention(got, q, k, 0, a, c.vd)
				want := latentPlain(q.d, k.d, c.n, a, c.vd)
				tol := 1e-6 * (1 + c.qscale)
				var worst float64
				for i, w := range want {
					g := float64(got.d[i])
					if math.IsNaN(g) || math.Abs(g-w) > tol*(1+math.Abs(w)) {
						t.Fatalf("threads %d: output %d: %v, plain %v", threads, i, g, w)
					}
					worst = max(worst, math.Abs(g-w)/(1+math.Abs(w)))
				}
				if threads == 1 {
					t.Logf("worst relative error %.2e (bound %.1e)", worst, tol)
				}
			}
		})
	}
}

// TestLatentAttentionCache checks that a latent layer caches its keys
// alone, in the cache's key format: with k8v4 (int8 keys, 4-bit values),
// the result is that of an f32 cache over int8-rounded keys.
func TestLatentAttentionCache(t *testing.T) {
	const H, hd, vd, n = 4, 40, 32, 17
	rng := rand.New(rand.NewPCG(9, 10))
	a := &ml.Attn{Heads: H, KVHeads: 1, HeadDim: hd, Scale: 0.2}
	f, err := kvcache.Lookup("k8v4")
	if err != nil {
		t.Fatal(err)
	}
	b := newCPU(nn.NewContext(1))
	b.c.KV = &kvStore{format: f}
	q := randT(b, rng, n, H*hd, 1)
	k := randT(b, rng, n, hd, 1)
	k2 := &cpuT{d: append([]float32(nil), k.d...), rows: n, cols: hd}
	got := b.Alloc(n, H*vd).(*cpuT)
	b.LatentAttention(got, q, k, 0, a, vd)

	var blk kvcache.Block
	kvcache.RoundTrip(f.K, &blk, k2.d, n, 1, hd)
	plain := newCPU(nn.NewContext(1))
	want := plain.Alloc(n, H*vd).(*cpuT)
	plain.LatentAttention(want, q, k2, 0, a, vd)
	for i := range want.d {
		if math.Float32bits(got.d[i]) != math.Float32bits(want.d[i]) {
			t.Fatalf("output %d: %v, with int8-rounded keys %v", i, got.d[i], want.d[i])
		}
	}
}
