package nn

import (
	"fmt"
	"math"
)

// MiniMax-01's lightning attention (llama.cpp's minimax-01 graph): a
// linear attention whose scores decay with the distance between query and
// key, per head h of size d, over a window from no state:
//
//	out[j] = Σ_{i≤j} D_h(j−i) · (q_j·k_i) · v_i,   D_h(m) = exp(−s_h·c·m)
//
// s_h the head's slope (LightningSlopes), c the layer's slope scale
// (LightningScale). q, k and v come packed per head: row t of qkv holds,
// for each head in turn, q (d values), k (d), v (d); out is (tokens,
// heads·d).
//
// llama.cpp computes a window of n tokens (one ubatch) as two float32
// matrix products: qk[j][i] = q_j·k_i (ggml_vec_dot_f32 over d), times the
// decay D_h(j−i) (0 for i > j: exp(−∞)), then out[j][e] = Σ_i v_i[e] ·
// qk[j][i] over all n keys (ggml_vec_dot_f32 over n, the zeros included:
// they leave the lanes' sums as they are, but the lanes are counted from
// key 0). Lightning computes exactly that; LightningRef is the same sums
// in float64.

// LightningSlopes are the heads' slopes as llama.cpp computes them in
// float32: start = 2^(−2^(−(log2 heads − 3))), s_h = start·start^h, with
// glibc's powf (log2 of a power of two is exact; MiniMax-01 has 64 heads).
func LightningSlopes(heads int) []float32 {
	l2 := float32(math.Log2(float64(heads)))
	start := libcPowf(2, -libcPowf(2, -(l2-3)))
	s := make([]float32, heads)
	for h := range s {
		s[h] = start * libcPowf(start, float32(h))
	}
	return s
}

// LightningScale is layer il's slope scale of layers: 1 − il/(layers − 1)
// + 1e-5, in float64 then float32, as llama.cpp passes it to ggml_scale.
func LightningScale(il, layers int) float32 {
	return float32(1.0 - 1.0*float64(il)/float64(layers-1) + 1e-5)
}

// LightningDecay returns the decay factors D_h(m) for m < n of each head,
// decay[h·n + m], as llama.cpp computes them: −s_h·m in float32, times
// scale in float32, then glibc's expf.
func LightningDecay(slopes []float32, scale float32, n int) []float32 {
	d := make([]float32, len(slopes)*n)
	for h, s := range slopes {
		for m := range n {
			d[h*n+m] = LibcExpf(-s * float32(m) * scale)
		}
	}
	return d
}

// checkLightning panics unless qkv holds n rows of heads·3d values and out
// n rows of heads·d.
func checkLightning(out, qkv []float32, n, heads, d int) {
	if n < 0 || heads <= 0 || d <= 0 || len(qkv) < n*heads*3*d || len(out) < n*heads*d {
		panic(fmt.Sprintf("nn: lightning attention of %d tokens, %d heads of %d: qkv %d values, out %d", n, heads, d, len(qkv), len(out)))
	}
}

// Lightning computes out from qkv for the heads [h0, h1) as ggml-cpu
// computes llama.cpp's graph (the package's lightning doc), decay from
// LightningDecay for n tokens; with avx2 in the AVX2 build's lanes.
func Lightning(out, qkv []float32, n, heads, d int, decay []float32, h0, h1 int, avx2 bool) {
	checkLightning(out, qkv, n, heads, d)
	if len(decay) < heads*n {
		panic(fmt.Sprintf("nn: lightning attention of %d tokens, %d heads: %d decay factors", n, heads, len(decay)))
	}
	w := heads * 3 * d
	q, k := make([]float32, n*d), make([]float32, n*d)
	vt := make([]float32, d*n) // v transposed: vt[e·n + i] = v_i[e]
	s := make([]float32, n)
	for h := h0; h < h1; h++ {
		for t := range n {
			row := qkv[t*w+h*3*d:]
			copy(q[t*d:(t+1)*d], row[:d])
			copy(k[t*d:(t+1)*d], row[d:2*d])
			for e, v := range row[2*d : 3*d] {
				vt[e*n+t] = v
			}
		}
		dh := decay[h*n : (h+1)*n]
		for j := range n {
			qj := q[j*d : (j+1)*d]
			for i := range n {
				s[i] = 0
				if i <= j {
					s[i] = dotF32(k[i*d:(i+1)*d], qj, avx2) * dh[j-i]
				}
			}
			o := out[j*heads*d+h*d:]
			for e := range d {
				o[e] = dotF32(vt[e*n:(e+1)*n], s, avx2)
			}
		}
	}
}

// LightningRef is Lightning in float64 (the decay exp(−s_h·scale·m) too),
// each output rounded to float32 once: the reference its tests hold it
// to.
func LightningRef(out, qkv []float32, n, heads, d int, slopes []float32, scale float32) {
	checkLightning(out, qkv, n, heads, d)
	w := heads * 3 * d
	at := func(t, h, part, e int) float64 { return float64(qkv[t*w+h*3*d+part*d+e]) }
	acc := make([]float64, d)
	for h := range heads {
		c := float64(slopes[h]) * float64(scale)
		for j := range n {
			clear(acc)
			for i := 0; i <= j; i++ {
				qk := 0.0
				for e := range d {
					qk += float64(at(j, h, 0, e) * at(i, h, 1, e))
				}
				qk *= math.Exp(-c * float64(j-i))
				for e := range d {
					acc[e] += float64(qk * at(i, h, 2, e))
				}
			}
			for e, a := range acc {
				out[j*heads*d+h*d+e] = float32(a)
			}
		}
	}
}
