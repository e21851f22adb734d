package nn

import (
	"math"

	"ppl.dev/quant"
)

// ggmlQ8Attention is ggml-cpu's FLASH_ATTN_EXT over Q8_0 keys and values
// (k and v hold their decoded values, d·q per block of 32 of each head;
// the head size a multiple of 32), which always takes
// ggml_compute_forward_flash_attn_ext_f16_one_chunk: each query row on its
// own, q quantized to Q8_0 as ggml-cpu quantizes activations
// (quantQ80Generic: d = f16(amax/127), q = rne(x·127/amax)); per visible
// key in order s = ggml_vec_dot_q8_0_q8_0(k, q) (q8Dot: the AVX2 kernel's
// eight float lanes, one FMA per block of 32, then hsum_float_8), times
// Scale (a soft-cap's tanhf, ALiBi's bias as ggmlAttention); a new maximum
// multiplies the float32 accumulator by ms = expf(M - s), otherwise vs =
// expf(s - M); the accumulator becomes fma(v, vs, acc) (ggml_vec_mad_f32,
// the values dequantized to float32) and S = fma(S, ms, vs). At the end
// sinks, and the accumulator times 1/S (ggmlFinish).
func (a *Attention) ggmlQ8Attention(c *Context, out, q, k, v []float32, n int) {
	hd, qs, ks := a.HeadDim, a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	group := a.Heads / a.KVHeads
	// The keys' blocks back as ggml stores them: in each block of 32 the
	// value of largest magnitude is 127·d exactly, the others q·d.
	kq, kd := make([]int8, n*ks), make([]float32, n*ks/32)
	c.Parallel(n*ks/32, func(_, lo, hi int) {
		for b := lo; b < hi; b++ {
			kd[b] = q8Block(kq[32*b:32*b+32], k[32*b:32*b+32])
		}
	})
	c.Parallel(n*a.Heads, func(_, lo, hi int) {
		acc := make([]float32, hd)
		qq, qd, xs := make([]byte, hd), make([]float32, hd/32), make([]int32, hd/16)
		for it := lo; it < hi; it++ {
			i, h := it/a.Heads, it%a.Heads
			g := h / group
			quantQ80Generic(q[i*qs+h*hd:i*qs+(h+1)*hd], qq, qd, xs)
			a.ggmlRowF32(out[i*qs+h*hd:i*qs+(h+1)*hd], acc, v, i, h, func(j int) float32 {
				o := j*ks + g*hd
				return q8Dot(kq[o:o+hd], kd[o/32:(o+hd)/32], qq, qd)
			})
		}
	})
}

// ggmlRowF32 is query row i's output for head h (into out) over values v
// decoded to float32, as ggml's one-chunk flash attention computes it
// for a cache that is not F16: ggmlOneChunk with dot's scores, the
// accumulator acc (HeadDim floats of scratch) rescaled by ms and
// fma(v, vs, acc) (ggml_vec_mad_f32), then ggmlFinish.
func (a *Attention) ggmlRowF32(out, acc, v []float32, i, h int, dot func(j int) float32) {
	hd, ks := a.HeadDim, a.KVHeads*a.HeadDim
	g := h / (a.Heads / a.KVHeads)
	clear(acc)
	M, S := a.ggmlOneChunk(i, h, dot,
		func(ms float32) {
			for d := range acc {
				acc[d] *= ms
			}
		},
		func(j int, vs float32) {
			for d, x := range v[j*ks+g*hd : j*ks+(g+1)*hd] {
				acc[d] = fma32(x, vs, acc[d])
			}
		})
	a.ggmlFinish(out, acc, h, M, S, false)
}

// q8Block recovers a Q8_0 block from its 32 decoded values x = q·d: the
// largest magnitude is 127·d (exact in float32: d is a float16), so d =
// amax/127 and q = x/d, both exact; an all-zero block gives d = 0.
func q8Block(q []int8, x []float32) float32 {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	if amax == 0 {
		clear(q)
		return 0
	}
	d := amax / 127
	for i, v := range x {
		q[i] = int8(math.RoundToEven(float64(v / d)))
	}
	return quant.F16ToF32(quant.F32ToF16(d))
}

// q8Dot is ggml_vec_dot_q8_0_q8_0 of a key's blocks (kq, scales kd) and
// the query's (qq, qd) as ggml-cpu's AVX2 kernel computes it (both builds):
// eight float32 lanes from 0; per block of 32, lane s = fma(dk·dq,
// float32(Σ of the products of elements 4s..4s+3), lane s); then
// hsum_float_8.
func q8Dot(kq []int8, kd []float32, qq []byte, qd []float32) float32 {
	var lanes [8]float32
	for b := range kd {
		d := kd[b] * qd[b]
		for s := range 8 {
			var p int32
			for t := 4 * s; t < 4*s+4; t++ {
				p += int32(kq[32*b+t]) * int32(int8(qq[32*b+t]))
			}
			lanes[s] = fma32(d, float32(p), lanes[s])
		}
	}
	return hsum8(&lanes)
}
