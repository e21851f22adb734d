package nn

import "math"

// Gemma 3n's operations (ml.AltUp and ml.MLP.TopK), each twice: the
// reference in float64, rounded to float32 once, and as llama.cpp's graph
// computes it from ggml operations, each rounding to float32 (the int8
// modes). ggml's sums of a row (SUM_ROWS, MEAN) add in float64 and round
// once; its F32 MUL_MAT over 4 values adds the products in float32 in
// order, without fused multiply-adds (dotF32's tail).

// GaussianTopK sparsifies a row: g = max(g - (mean + k·std), 0), std the
// sample standard deviation (n-1), in float64.
func GaussianTopK(g []float32, k float64) {
	n := float64(len(g))
	var s float64
	for _, v := range g {
		s += float64(v)
	}
	mean := s / n
	var ss float64
	for _, v := range g {
		d := float64(v) - mean
		ss += float64(d * d)
	}
	cut := mean + float64(k*math.Sqrt(ss/(n-1)))
	for i, v := range g {
		g[i] = float32(math.Max(float64(v)-cut, 0))
	}
}

// GGMLGaussianTopK is GaussianTopK as llama.cpp's gemma3n graph computes
// it: mean = f32(Σ g)/n (MEAN), d = g - mean, σ = sqrtf(f32(Σ d·d) ·
// (1/(n-1))) (SQR, SUM_ROWS, SCALE, SQRT), cut = mean + σ·k (SCALE, ADD),
// g = relu(g - cut).
func GGMLGaussianTopK(g []float32, k float32) {
	n := len(g)
	var s float64
	for _, v := range g {
		s += float64(v)
	}
	mean := float32(s) / float32(n)
	var ss float64
	for _, v := range g {
		d := v - mean
		ss += float64(d * d)
	}
	sd := float32(math.Sqrt(float64(float32(ss) * (1 / float32(n-1)))))
	cut := mean + float32(sd*k)
	for i, v := range g {
		g[i] = max(v-cut, 0)
	}
}

// MatchNorm rescales row x to the Euclidean norm of row ref: x =
// x·‖ref‖/‖x‖, in float64.
func MatchNorm(x, ref []float32) {
	var sx, sr float64
	for _, v := range x {
		sx += float64(float64(v) * float64(v))
	}
	for _, v := range ref {
		sr += float64(float64(v) * float64(v))
	}
	f := math.Sqrt(sr) / math.Sqrt(sx)
	for i, v := range x {
		x[i] = float32(float64(v) * f)
	}
}

// GGMLMatchNorm is MatchNorm as llama.cpp's gemma3n graph computes it:
// each norm sqrtf(f32(Σ f32(v·v))) (SQR, SUM_ROWS, SQRT), then x =
// (x·‖ref‖)/‖x‖ (MUL, DIV).
func GGMLMatchNorm(x, ref []float32) {
	nx, nr := ggmlNorm(x), ggmlNorm(ref)
	for i, v := range x {
		x[i] = v * nr / nx
	}
}

func ggmlNorm(x []float32) float32 {
	var s float64
	for _, v := range x {
		s += float64(v * v)
	}
	return float32(math.Sqrt(float64(float32(s))))
}

// AltUpPredict predicts one token's streams: dst[j] = x[j] + Σ_k
// coef[j·A+k]·x[k] for A = len(x) streams, in float64.
func AltUpPredict(dst, x [][]float32, coef []float32) {
	A := len(x)
	for j := range A {
		for e := range dst[j] {
			s := float64(x[j][e])
			for k := range A {
				s += float64(float64(coef[j*A+k]) * float64(x[k][e]))
			}
			dst[j][e] = float32(s)
		}
	}
}

// GGMLAltUpPredict is AltUpPredict as llama.cpp computes it: the sum of
// the products in float32 in order of k (MUL_MAT over A values), then x[j]
// added (ADD).
func GGMLAltUpPredict(dst, x [][]float32, coef []float32) {
	A := len(x)
	for j := range A {
		for e := range dst[j] {
			var s float32
			for k := range A {
				p := float32(x[k][e] * coef[j*A+k])
				s += p
			}
			dst[j][e] = s + x[j][e]
		}
	}
}

// AltUpCorrect corrects one token's streams from the active one's output
// act: dst[j] = pred[j] + (act - pred[active])·(coef[j] + 1), in float64.
// dst may be pred.
func AltUpCorrect(dst, pred [][]float32, act, coef []float32, active int) {
	for e := range act {
		inn := float64(act[e]) - float64(pred[active][e])
		for j := range pred {
			dst[j][e] = float32(float64(pred[j][e]) + float64(inn*(float64(coef[j])+1)))
		}
	}
}

// GGMLAltUpCorrect is AltUpCorrect as llama.cpp computes it: the
// innovation act - pred[active] (SUB), coef + 1 (SCALE with bias), their
// product (MUL), then pred[j] added (ADD), each rounded to float32.
func GGMLAltUpCorrect(dst, pred [][]float32, act, coef []float32, active int) {
	for e := range act {
		inn := act[e] - pred[active][e]
		for j := range pred {
			p := float32(inn * (coef[j] + 1))
			dst[j][e] = p + pred[j][e]
		}
	}
}

// Tanh is x = tanh(x) in float64, rounded once: glibc's tanhf too (ggml's
// TANH), which is correctly rounded.
func Tanh(x []float32) {
	for i, v := range x {
		x[i] = float32(math.Tanh(float64(v)))
	}
}
