package nn

import (
	"fmt"
	"math"
)

// ConvSiLU is the causal depthwise convolution over time of Gated DeltaNet
// and Mamba-2 layers, then SiLU: out[t, c] = silu(Σ_{j<K} w[c·K + j] ·
// x[t-K+1+j, c] + bias[c]), tap 0 multiplying the oldest input, where the
// rows x[-K+1..-1] are hist (K - 1 rows of C; zeros at a window's first
// token); bias is nil (none) or C values. x and out are n × C; out is not
// x. On return hist holds the last K - 1 inputs. Each sum is float64
// rounded once, the bias added in float32 (as llama.cpp adds it), then silu
// in float32 (swiglu32's, within 4 ulp of float64): within 5 ulp of
// ConvSiLURef times silu's condition number at the sum a, 1 + |a| (the
// roundings of a before silu). With Context.LlamaCPP it is llama.cpp's
// float32 sequence instead (ggmlConvSiLU).
func ConvSiLU(c *Context, out, x, hist, w, bias []float32, n, C, K int) {
	checkConv(out, x, hist, w, bias, n, C, K)
	if c.LlamaCPP {
		ggmlConvSiLU(c, out, x, hist, w, bias, n, C, K)
		return
	}
	// The taps by row: wt[j·C + c] = w[c·K + j].
	wt := make([]float64, K*C)
	for ch := range C {
		for j := range K {
			wt[j*C+ch] = float64(w[ch*K+j])
		}
	}
	in := func(tt int) []float32 {
		if tt < 0 {
			return hist[(tt+K-1)*C : (tt+K)*C]
		}
		return x[tt*C : (tt+1)*C]
	}
	c.Parallel(n, func(_, lo, hi int) {
		acc := make([]float64, C)
		for t := lo; t < hi; t++ {
			clear(acc)
			for j := range K {
				xr, wr := in(t - K + 1 + j)[:C], wt[j*C:(j+1)*C]
				for ch, v := range xr {
					acc[ch] += float64(wr[ch] * float64(v))
				}
			}
			o := out[t*C : (t+1)*C]
			for ch, a := range acc {
				o[ch] = float32(a)
			}
			if bias != nil {
				for ch, b := range bias[:C] {
					o[ch] += b
				}
			}
			SiLU(o, o)
		}
	})
	shiftHist(x, hist, n, C, K)
}

// ggmlConvSiLU is SSM_CONV (Conv), then ADD of the bias, then SILU, as
// ggml-cpu rounds them: the bias added in float32, then silu per row as
// ggml_vec_silu_f32 (ggmlSwiGLURow with up = 1).
func ggmlConvSiLU(c *Context, out, x, hist, w, bias []float32, n, C, K int) {
	Conv(c, out, x, hist, w, n, C, K)
	c.Parallel(n, func(_, lo, hi int) {
		ones := make([]float32, C)
		for i := range ones {
			ones[i] = 1
		}
		for t := lo; t < hi; t++ {
			o := out[t*C : (t+1)*C]
			if bias != nil {
				for ch, b := range bias[:C] {
					o[ch] += b
				}
			}
			ggmlSwiGLURow(o, o, ones, c.GGMLAVX2)
		}
	})
}

// Conv is the causal depthwise convolution over time alone, ggml's
// SSM_CONV: out[t, c] = Σ_{j<K} w[c·K + j] · x[t-K+1+j, c] with hist's
// rows before x (as ConvSiLU's), each channel's taps from the oldest, each
// product and each sum rounded to float32 (the build does not contract
// sumf += s·c). On return hist holds the last K - 1 inputs. out is not x.
func Conv(c *Context, out, x, hist, w []float32, n, C, K int) {
	checkConv(out, x, hist, w, nil, n, C, K)
	in := func(tt int) []float32 {
		if tt < 0 {
			return hist[(tt+K-1)*C : (tt+K)*C]
		}
		return x[tt*C : (tt+1)*C]
	}
	c.Parallel(n, func(_, lo, hi int) {
		for t := lo; t < hi; t++ {
			o := out[t*C : (t+1)*C]
			clear(o)
			for j := range K {
				for ch, v := range in(t - K + 1 + j)[:C] {
					o[ch] += float32(v * w[ch*K+j]) // rounded apart: no fused multiply-add
				}
			}
		}
	})
	shiftHist(x, hist, n, C, K)
}

// ConvSiLURef is ConvSiLU in float64, each output rounded once: the
// reference.
func ConvSiLURef(out, x, hist, w, bias []float32, n, C, K int) {
	checkConv(out, x, hist, w, bias, n, C, K)
	for t := range n {
		for ch := range C {
			var acc float64
			for j := range K {
				tt := t - K + 1 + j
				var v float32
				if tt < 0 {
					v = hist[(tt+K-1)*C+ch]
				} else {
					v = x[tt*C+ch]
				}
				acc += float64(float64(w[ch*K+j]) * float64(v))
			}
			if bias != nil {
				acc += float64(bias[ch])
			}
			out[t*C+ch] = float32(acc / (1 + math.Exp(-acc)))
		}
	}
	shiftHist(x, hist, n, C, K)
}

func checkConv(out, x, hist, w, bias []float32, n, C, K int) {
	if K < 1 {
		panic(fmt.Sprintf("nn: convolution kernel %d", K))
	}
	check("conv input", len(x), n*C)
	check("conv output", len(out), n*C)
	check("conv history", len(hist), (K-1)*C)
	check("conv weights", len(w), C*K)
	if bias != nil {
		check("conv bias", len(bias), C)
	}
}

// shiftHist leaves in hist the last K - 1 inputs, oldest first (some from
// hist itself when n < K - 1).
func shiftHist(x, hist []float32, n, C, K int) {
	if K == 1 {
		return
	}
	h := K - 1
	if n >= h {
		copy(hist[:h*C], x[(n-h)*C:n*C])
		return
	}
	copy(hist, hist[n*C:h*C]) // the newest h - n kept, moved to the front
	copy(hist[(h-n)*C:h*C], x[:n*C])
}

// onesBuf is the up operand of SiLU's swiglu32 calls.
var onesBuf = func() []float32 {
	o := make([]float32, 256)
	for i := range o {
		o[i] = 1
	}
	return o
}()

// SiLU computes out[i] = x[i] / (1 + e^-x[i]) in float32 (swiglu32 with
// up = 1: within 4 ulp of float64). out may be x.
func SiLU(out, x []float32) {
	check("SiLU input", len(x), len(out))
	for i := 0; i < len(out); i += len(onesBuf) {
		j := min(len(out), i+len(onesBuf))
		swiglu32(out[i:j], x[i:j], onesBuf[:j-i])
	}
}

// GatedRMSNorm computes, over rows of len(w) values, out = x / sqrt(mean(x²)
// + eps) · w · silu(z): the normalised row as RMSNorm's rmsRow (float64
// rounded once), times silu(z) in float32 (swiglu32), within 6 ulp of
// GatedRMSNormRef. With Context.LlamaCPP it is llama.cpp's float32
// sequence (ggmlRMSRow, then ggml's SiLU of z on its lanes per row, times
// the row). x, z and out hold rows × len(w) values; out may be x.
func GatedRMSNorm(c *Context, out, x, z, w []float32, rows int, eps float64) {
	d := len(w)
	check("gated norm input", len(x), rows*d)
	check("gated norm gate", len(z), rows*d)
	check("gated norm output", len(out), rows*d)
	c.Parallel(rows, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			o := out[r*d : (r+1)*d]
			if c.LlamaCPP { // RMS_NORM and MUL, then UNARY silu(z) and MUL
				ggmlRMSRow(o, x[r*d:(r+1)*d], w, float32(eps))
				ggmlSwiGLURow(o, z[r*d:(r+1)*d], o, c.GGMLAVX2)
				continue
			}
			rmsRow(o, x[r*d:(r+1)*d], w, eps)
			swiglu32(o, z[r*d:(r+1)*d], o)
		}
	})
}

// GatedRMSNormRef is GatedRMSNorm in float64, each output rounded once: the
// reference.
func GatedRMSNormRef(out, x, z, w []float32, rows int, eps float64) {
	d := len(w)
	for r := range rows {
		src, zz, o := x[r*d:(r+1)*d], z[r*d:(r+1)*d], out[r*d:(r+1)*d]
		var ss float64
		for _, v := range src {
			ss += float64(float64(v) * float64(v))
		}
		scale := 1 / math.Sqrt(ss/float64(d)+eps)
		for i, v := range src {
			g := float64(zz[i])
			o[i] = float32(float64(v) * scale * float64(w[i]) * (g / (1 + math.Exp(-g))))
		}
	}
}
