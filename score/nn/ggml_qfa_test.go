package nn

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/quant"
)

// q8Round returns x's Q8_0 blocks (as quantQ80Generic quantizes them)
// decoded: d·q, each a float32 product.
func q8Round(x []float32) []float32 {
	q, d, xs := make([]byte, len(x)), make([]float32, len(x)/32), make([]int32, len(x)/16)
	quantQ80Generic(x, q, d, xs)
	out := make([]float32, len(x))
	for i := range x {
		out[i] = d[i/32] * float32(int8(q[i]))
	}
	return out
}

// attentionGap is the largest difference of a's output got from causal
// attention (a's heads, window and scale) in float64 over the queries q,
// keys k and values v given.
func attentionGap(a *Attention, got, q, k, v []float32, n int) float64 {
	heads, kvh, hd := a.Heads, a.KVHeads, a.HeadDim
	var worst float64
	for i := range n {
		for h := range heads {
			g := h / (heads / kvh)
			first := 0
			if a.Window > 0 {
				first = max(0, i-a.Window+1)
			}
			s := make([]float64, i+1)
			m := math.Inf(-1)
			for j := first; j <= i; j++ {
				for d := range hd {
					s[j] += float64(q[(i*heads+h)*hd+d]) * float64(k[(j*kvh+g)*hd+d])
				}
				s[j] *= a.Scale
				m = max(m, s[j])
			}
			var z float64
			for j := first; j <= i; j++ {
				s[j] = math.Exp(s[j] - m)
				z += s[j]
			}
			for d := range hd {
				var o float64
				for j := first; j <= i; j++ {
					o += s[j] * float64(v[(j*kvh+g)*hd+d])
				}
				worst = max(worst, math.Abs(o/z-float64(got[(i*heads+h)*hd+d])))
			}
		}
	}
	return worst
}

// TestGGMLBlockAttention: llama.cpp's flash attention over keys of Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL blocks (KeyBlocks; quant.Quantize's,
// IQ4_NL's random) against causal attention in float64 over the same keys
// decoded, the Q8_0-rounded queries and the values, with grouped heads, a
// window, a zero block and 300 query rows (two of ggmlBlockAttention's
// blocks of 256): within float32's roundings (measured 2.9e-7 to
// 6.7e-7), and for Q4_1 and Q5_1 those of Q8_1's s, d·Σq rounded to
// float16, which their minimum multiplies (measured up to 7.0e-4 and
// 9.7e-4). TestQuantCacheLlama holds it to llama.cpp.
func TestGGMLBlockAttention(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	const n, heads, kvh, hd = 300, 4, 2, 64
	for _, c := range []struct {
		t     gguf.Type
		bound float64
	}{
		{gguf.TypeQ8_0, 8e-7}, {gguf.TypeQ4_0, 8e-7}, {gguf.TypeQ4_1, 1.3e-3}, {gguf.TypeQ5_0, 8e-7}, {gguf.TypeQ5_1, 1.3e-3}, {gguf.TypeIQ4_NL, 8e-7},
	} {
		for _, window := range []int{0, 9} {
			q, k, v := randVec(r, n*heads*hd), randVec(r, n*kvh*hd), randVec(r, n*kvh*hd)
			for i := range 32 {
				k[5*kvh*hd+i] = 0 // a zero block
			}
			blocks := make([]byte, len(k)/32*c.t.TypeSize())
			if c.t == gguf.TypeIQ4_NL { // no reference quantizer in quant: random blocks
				for b := range len(k) / 32 {
					blk := blocks[b*18 : (b+1)*18]
					binary.LittleEndian.PutUint16(blk, quant.F32ToF16(float32(r.Float64()/64)))
					for i := 2; i < 18; i++ {
						blk[i] = byte(r.IntN(256))
					}
				}
				clear(blocks[5*kvh*2*18 : (5*kvh*2+1)*18]) // the zero block
			} else if err := quant.Quantize(c.t, k, blocks); err != nil {
				t.Fatal(err)
			}
			kd := make([]float32, len(k))
			quant.DequantizeRow(c.t, blocks, kd)
			a := &Attention{Heads: heads, KVHeads: kvh, HeadDim: hd, Scale: 0.125, Window: window, KeyBlocks: blocks, KeyType: c.t}
			got := make([]float32, n*heads*hd)
			a.Forward(NewContext(2), got, q, kd, v, n)
			worst := attentionGap(a, got, q8Round(q), kd, v, n)
			t.Logf("%v, window %d: %.2g from float64", c.t, window, worst)
			if worst > c.bound {
				t.Errorf("%v, window %d: %.2g from float64, want at most %.2g", c.t, window, worst, c.bound)
			}
		}
	}
}
