package nn

import (
	"math"

	"ppl.dev/quant"
)

// The gating functions of llama.cpp's MoE router (build_moe_ffn) as
// ggml-cpu computes them, for ml.Router in the int8 modes.

// GGMLSoftMax is ggml_compute_forward_soft_max_f32 for one row, without
// mask, scale or sinks: m = max(x); y_i = e^(x_i - m), ggml_v_expf on the
// lanes of 16 of the AVX-512 build (ggmlExpf) or of 8 of the AVX2 build
// (ggmlExpfAVX2) and glibc's expf past the last full lane; the sum in
// float64 of each lane group's float32 sum (reduce16, hsum8), then of the
// tail's terms; then y times float32(1/sum). y may alias x.
func GGMLSoftMax(y, x []float32, avx2 bool) {
	check("GGMLSoftMax", len(y), len(x))
	m := float32(math.Inf(-1))
	for _, v := range x {
		if !(m > v) { // ggml's MAX(m, v)
			m = v
		}
	}
	inv := float32(1 / ggmlSoftMax(y, x, m, avx2))
	for i := range y {
		y[i] *= inv
	}
}

// ggmlSoftMax is ggml_vec_soft_max_f32: y = e^(x - m) in float32 and
// their sum in float64. The AVX-512 build (avx2 false) computes lanes of
// 16, ggml_v_expf of each difference, each 16's sum reduced as
// _mm512_reduce_add_ps (reduce16) and added to the sum; the AVX2 build
// lanes of 8 (ggmlExpfAVX2, hsum8); past the last whole lanes glibc's
// expf one by one. y may alias x.
func ggmlSoftMax(y, x []float32, m float32, avx2 bool) float64 {
	lanes := 16
	if avx2 {
		lanes = 8
	}
	nv := len(x) / lanes * lanes
	var sum float64
	f := kern.ggmlSoftMax
	if avx2 {
		f = kern.ggmlSoftMax8
	}
	if f != nil && nv > 0 {
		sum = f(&y[0], &x[0], nv, m)
	} else {
		var e [16]float32
		for i := 0; i < nv; i += lanes {
			for l := range lanes {
				e[l] = x[i+l] - m
			}
			ggmlExpfs(e[:lanes], e[:lanes], avx2)
			copy(y[i:i+lanes], e[:lanes])
			if avx2 {
				sum += float64(hsum8((*[8]float32)(e[:8])))
			} else {
				sum += float64(reduce16(&e))
			}
		}
	}
	for i := nv; i < len(x); i++ {
		y[i] = LibcExpf(x[i] - m)
		sum += float64(y[i])
	}
	return sum
}

// GGMLSiLUDiv is the sigmoid as llama.cpp's qwen2moe graph writes its
// shared expert's gate: ggml's SILU, x / (1 + expf(-x)), then DIV by x,
// each rounded to float32 (glibc's expf; both builds: the gate is one
// value a row, which never reaches ggml's vector code). At x = 0, where
// that is 0/0 (NaN in llama.cpp), it gives the sigmoid's 0.5. y may alias
// x.
func GGMLSiLUDiv(y, x []float32) {
	check("GGMLSiLUDiv", len(y), len(x))
	for i, v := range x {
		if v == 0 {
			y[i] = 0.5
			continue
		}
		y[i] = v / (1 + LibcExpf(-v)) / v
	}
}

// GGMLSigmoid is ggml's SIGMOID: y = 1 / (1 + expf(-x)) in float32 with
// glibc's expf (both builds). y may alias x.
func GGMLSigmoid(y, x []float32) {
	check("GGMLSigmoid", len(y), len(x))
	for i, v := range x {
		y[i] = -v
	}
	LibcExpfs(y, y) // glibc's expf in vector kernels, the same bits
	for i, e := range y {
		y[i] = 1 / (1 + e)
	}
}

// GGMLSoftplus is ggml's SOFTPLUS: y = x past 20, else logf(1 + expf(x))
// in float32 with glibc's logf and expf (both builds). y may alias x.
func GGMLSoftplus(y, x []float32) {
	check("GGMLSoftplus", len(y), len(x))
	for i, v := range x {
		y[i] = ggmlSoftplus(v)
	}
}

// GGMLSoftplus2 is log2(1 + 2^x) as llama.cpp computes K2-Horizon's gate:
// SCALE by float32(ln 2), SOFTPLUS (GGMLSoftplus), SCALE by float32(1/ln 2),
// each step rounded to float32. y may alias x.
func GGMLSoftplus2(y, x []float32) {
	check("GGMLSoftplus2", len(y), len(x))
	const ln2, invLn2 = float32(math.Ln2), float32(1 / math.Ln2)
	for i, v := range x {
		y[i] = ggmlSoftplus(v*ln2) * invLn2
	}
}

// XIELU is xIELU's parameters as ggml_xielu makes them from a file's
// (Apertus: xielu.alpha_n, alpha_p, beta, eps per layer): AlphaN = beta +
// softplus(alpha_n), AlphaP = softplus(alpha_p), softplus(x) = x past 20,
// else logf(1 + expf(x)) (glibc's, in float32).
type XIELU struct{ AlphaN, AlphaP, Beta, Eps float32 }

// NewXIELU makes the parameters from a file's values.
func NewXIELU(alphaN, alphaP, beta, eps float32) XIELU {
	return XIELU{AlphaN: beta + ggmlSoftplus(alphaN), AlphaP: ggmlSoftplus(alphaP), Beta: beta, Eps: eps}
}

// Forward computes out = xielu(x) as ggml-cpu's XIELU does, in float32
// with its compiler's fused multiply-adds (both builds): x > 0:
// fma(AlphaP·x, x, Beta·x); else fma(expm1f(min(x, Eps)) - x, AlphaN,
// Beta·x) (glibc 2.43's expm1f is correctly rounded, as float32 of
// math.Expm1 is). out may be x.
func (p XIELU) Forward(out, x []float32) {
	check("XIELU", len(out), len(x))
	fma := func(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }
	for i, v := range x {
		if v > 0 {
			out[i] = fma(float32(p.AlphaP*v), v, float32(p.Beta*v))
			continue
		}
		e := float32(math.Expm1(float64(min(v, p.Eps))))
		out[i] = fma(float32(e-v), p.AlphaN, float32(p.Beta*v))
	}
}

// Ref is Forward in float64, each output rounded once: the reference.
func (p XIELU) Ref(out, x []float32) {
	check("XIELU", len(out), len(x))
	an, ap, b, eps := float64(p.AlphaN), float64(p.AlphaP), float64(p.Beta), float64(p.Eps)
	for i, v := range x {
		f := float64(v)
		if f > 0 {
			out[i] = float32(float64(ap*f*f) + float64(b*f))
			continue
		}
		out[i] = float32(float64((math.Expm1(min(f, eps))-f)*an) + float64(b*f))
	}
}

// ScalarAttention is the causal attention of a query of 1 over keys and
// values of one dimension, in float64 rounded once: out[t] =
// Σ_{j≤t} e^k[j]·v[j] / Σ_{j≤t} e^k[j] (Granite Switch's adapter router:
// the reference for GGMLScalarAttention).
func ScalarAttention(out, k, v []float32) {
	check("ScalarAttention keys", len(k), len(out))
	check("ScalarAttention values", len(v), len(out))
	m, s, a := math.Inf(-1), 0.0, 0.0
	for t := range out {
		kt := float64(k[t])
		if kt > m { // rescale the sums to the new maximum
			r := math.Exp(m - kt)
			s, a, m = s*r, a*r, kt
		}
		w := math.Exp(kt - m)
		s += w
		a += float64(w * float64(v[t]))
		out[t] = float32(a / s)
	}
}

// GGMLScalarAttention is ScalarAttention as ggml-cpu's flash attention
// over an F16 cache computes it for each query t, the keys 0..t in order:
// k and v rounded to f16; per key, a new maximum M rescales the f16
// accumulator by expf(M_old − M) (0 the first time), else the key weighs
// vs = expf(k − M); the accumulator += v·vs rounded to f16, the sum S =
// S·ms + vs in float32, each a fused multiply-add; out[t] = accumulator ·
// (1/S). glibc's expf.
func GGMLScalarAttention(out, k, v []float32) {
	check("GGMLScalarAttention keys", len(k), len(out))
	check("GGMLScalarAttention values", len(v), len(out))
	f16 := func(x float32) float32 { return quant.F16ToF32(quant.F32ToF16(x)) }
	m, s, acc := float32(math.Inf(-1)), float32(0), float32(0)
	for t := range out {
		kt, vt := f16(k[t]), f16(v[t])
		ms, vs := float32(1), float32(1)
		if kt > m {
			ms = LibcExpf(m - kt)
			m = kt
			acc = f16(acc * ms)
		} else {
			vs = LibcExpf(kt - m)
		}
		acc = f16(fma32(vt, vs, acc)) // ggml_vec_mad_f16's fused multiply-add
		s = fma32(s, ms, vs)          // S·ms + vs, contracted by the compiler
		inv := float32(0)
		if s != 0 {
			inv = 1 / s
		}
		out[t] = acc * inv
	}
}
