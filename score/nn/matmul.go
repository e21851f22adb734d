package nn

// matMul16, when set, is a fast MatMulRows for r = 16 rows (linearBlock) on
// this CPU; its last argument is 16·k floats of scratch.
var matMul16 func(out []float32, stride int, x []float32, n, k int, w, scratch []float32)

// MatMulRows computes r columns of a matrix product from float32 weight rows:
// out[t*stride + j] = x[t] · w[j] for t in [0, n), j in [0, r), where
// x (n, k) is row-major and w (r, k) holds r weight rows.
// out (n, stride) receives columns [0, r) of each row.
//
// This is the reference kernel: four weight rows at a time share each load
// of x, and each dot product sums in float32 with four partial sums per row.
func MatMulRows(out []float32, stride int, x []float32, n, k int, w []float32, r int) {
	if n == 0 || r == 0 {
		return
	}
	check("MatMulRows x", len(x), n*k)
	check("MatMulRows w", len(w), r*k)
	check("MatMulRows out", len(out), (n-1)*stride+r)
	for t := 0; t < n; t++ {
		xt := x[t*k : (t+1)*k : (t+1)*k]
		o := out[t*stride : t*stride+r]
		j := 0
		for ; j+4 <= r; j += 4 {
			o[j], o[j+1], o[j+2], o[j+3] = dot4(xt, w[j*k:(j+1)*k], w[(j+1)*k:(j+2)*k], w[(j+2)*k:(j+3)*k], w[(j+3)*k:(j+4)*k])
		}
		for ; j < r; j++ {
			o[j] = Dot(xt, w[j*k:(j+1)*k])
		}
	}
}

// Dot returns a·b in float32 with four partial sums. len(b) >= len(a).
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// dot4 returns x·w0, x·w1, x·w2, x·w3, each summed like Dot but with two
// partial sums, sharing the loads of x.
func dot4(x, w0, w1, w2, w3 []float32) (float32, float32, float32, float32) {
	k := len(x)
	w0, w1, w2, w3 = w0[:k], w1[:k], w2[:k], w3[:k]
	var a0, a1, b0, b1, c0, c1, d0, d1 float32
	i := 0
	for ; i+2 <= k; i += 2 {
		x0, x1 := x[i], x[i+1]
		a0 += x0 * w0[i]
		a1 += x1 * w0[i+1]
		b0 += x0 * w1[i]
		b1 += x1 * w1[i+1]
		c0 += x0 * w2[i]
		c1 += x1 * w2[i+1]
		d0 += x0 * w3[i]
		d1 += x1 * w3[i+1]
	}
	if i < k {
		x0 := x[i]
		a0 += x0 * w0[i]
		b0 += x0 * w1[i]
		c0 += x0 * w2[i]
		d0 += x0 * w3[i]
	}
	return a0 + a1, b0 + b1, c0 + c1, d0 + d1
}
