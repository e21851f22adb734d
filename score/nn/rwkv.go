package nn

import (
	"fmt"
	"maps"
	"math"
	"slices"
)

// RWKV-7's operations (ml.RWKV): the WKV7 recurrence of one head, its
// decay and its current-token term, each in two forms: in float64 rounded
// once (the reference, the CPU's float32 mode) and as ggml-cpu rounds it
// (the int8 modes, llama.cpp's numbers).

// rwkvDecayScale is the factor of RWKV-7's decay, exp(rwkvDecayScale ·
// sigmoid(w)): -exp(-0.5) as llama.cpp writes it (0.606531).
const rwkvDecayScale = -0.606531

// WKV7Head is one head's operands for a window's tokens: token t's values
// of r, w, k, v, a and b at [t·S, t·S+D), its output at Out[t·S:]; the D × D
// state S, row i holding S[i][·].
type WKV7Head struct {
	R, W, K, V, A, B, Out []float32
	S                     []float32
	Stride, D, T          int
}

func (h *WKV7Head) check() {
	checkWKV("wkv7", h.T, h.Stride, h.D, h.S, map[string][]float32{"r": h.R, "w": h.W, "k": h.K, "v": h.V, "a": h.A, "b": h.B, "output": h.Out})
}

// checkWKV panics when a head's operands (by name) are shorter than T
// tokens at stride, its state shorter than D × D, or stride below D.
func checkWKV(op string, T, stride, D int, S []float32, ops map[string][]float32) {
	if T == 0 {
		return
	}
	if stride < D {
		panic(fmt.Sprintf("nn: %s stride %d for a head of %d", op, stride, D))
	}
	for _, name := range slices.Sorted(maps.Keys(ops)) {
		check(op+" "+name, len(ops[name]), (T-1)*stride+D)
	}
	check(op+" state", len(S), D*D)
}

// WKV7Ref runs the recurrence (ml.RWKV's WKV7) in float64, each output
// rounded once and the state rounded to float32 after the last token.
func WKV7Ref(h *WKV7Head) {
	h.check()
	D := h.D
	s := make([]float64, D*D)
	for i, v := range h.S[:D*D] {
		s[i] = float64(v)
	}
	for t := range h.T {
		o := t * h.Stride
		r, w, k, v, a, b := h.R[o:o+D], h.W[o:o+D], h.K[o:o+D], h.V[o:o+D], h.A[o:o+D], h.B[o:o+D]
		for i := range D {
			row := s[i*D : (i+1)*D]
			var sa float64
			for j, x := range row {
				sa += float64(float64(a[j]) * x)
			}
			var y float64
			for j := range row {
				row[j] = float64(row[j]*float64(w[j])) + float64(float64(v[i])*float64(k[j])) + float64(sa*float64(b[j]))
				y += float64(row[j] * float64(r[j]))
			}
			h.Out[o+i] = float32(y)
		}
	}
	for i, v := range s {
		h.S[i] = float32(v)
	}
}

// WKV7GGML runs the recurrence as ggml-cpu's RWKV_WKV7 rounds it: per row
// i, sa FMA-accumulated per lane over steps of ARR vectors of EPR lanes
// (ggmlLanes; AVX-512's or, with avx2, AVX2's) and folded as
// GGML_F32_VEC_REDUCE; each state element s = fma(sa, b, fma(s, w, v·k))
// stored back, the output FMA-accumulated as s·r per lane and folded the
// same way. Columns past the last whole step (none in RWKV-7's heads of
// 64) are taken one at a time after the fold, as ggml's leftover loop
// writes them.
func WKV7GGML(h *WKV7Head, avx2 bool) { wkv7GGML(h, avx2, true) }

// wkv7GGML is WKV7GGML, taking the vector kernels (kern.wkv7GGML,
// wkv7GGML8) where the head is whole steps if kernels, else the Go loop.
func wkv7GGML(h *WKV7Head, avx2, kernels bool) {
	h.check()
	D := h.D
	epr, arr := ggmlLanes(avx2)
	step := epr * arr
	np := D - D%step
	k := kern.wkv7GGML
	if avx2 {
		k = kern.wkv7GGML8
	}
	if !kernels || np != D {
		k = nil
	}
	var lanes [64]float32
	acc := lanes[:step]
	for t := range h.T {
		o := t * h.Stride
		if k != nil {
			k(&h.S[0], D, &h.R[o], &h.W[o], &h.K[o], &h.V[o], &h.A[o], &h.B[o], np, &h.Out[o])
			continue
		}
		r, w, k, v, a, b := h.R[o:o+D], h.W[o:o+D], h.K[o:o+D], h.V[o:o+D], h.A[o:o+D], h.B[o:o+D]
		for i := range D {
			row := h.S[i*D : (i+1)*D]
			clear(acc)
			for j := range np {
				acc[j%step] = fma32(a[j], row[j], acc[j%step])
			}
			sa := ggmlReduce(acc, epr, arr, avx2)
			for j := np; j < D; j++ {
				sa += float32(a[j] * row[j])
			}
			vi := v[i]
			clear(acc)
			for j := range np {
				s := fma32(sa, b[j], fma32(row[j], w[j], vi*k[j]))
				row[j] = s
				acc[j%step] = fma32(s, r[j], acc[j%step])
			}
			y := ggmlReduce(acc, epr, arr, avx2)
			for j := np; j < D; j++ {
				s := float32(float32(row[j]*w[j])+float32(vi*k[j])) + float32(sa*b[j])
				row[j] = s
				y += float32(s * r[j])
			}
			h.Out[o+i] = y
		}
	}
}

// RWKVDecay sets x to exp(-0.606531·sigmoid(x)) in float64, rounded once.
func RWKVDecay(x []float32) {
	for i, v := range x {
		x[i] = float32(math.Exp(rwkvDecayScale / (1 + math.Exp(-float64(v)))))
	}
}

// GGMLRWKVDecay is RWKV-7's decay as llama.cpp's graph rounds it: SIGMOID
// (GGMLSigmoid), SCALE by float32(-0.606531), EXP (glibc's expf).
func GGMLRWKVDecay(x []float32) {
	GGMLSigmoid(x, x)
	for i, v := range x {
		x[i] = LibcExpf(float32(v * float32(rwkvDecayScale)))
	}
}

// RWKV6Decay sets x to exp(-exp(x)) in float64, rounded once.
func RWKV6Decay(x []float32) {
	for i, v := range x {
		x[i] = float32(math.Exp(-math.Exp(float64(v))))
	}
}

// GGMLRWKV6Decay is RWKV-6's decay as llama.cpp's graph rounds it: EXP,
// NEG, EXP (glibc's expf).
func GGMLRWKV6Decay(x []float32) {
	for i, v := range x {
		x[i] = LibcExpf(-LibcExpf(v))
	}
}

// Sigmoid sets y to 1/(1 + e^-x) in float64, rounded once. y may alias x.
func Sigmoid(y, x []float32) {
	check("Sigmoid", len(y), len(x))
	for i, v := range x {
		y[i] = float32(1 / (1 + math.Exp(-float64(v))))
	}
}

// RWKVBonus adds RWKV-7's current-token term to dst for one token's heads
// of d: dst[h,:] += v[h,:] · Σ_i r[h,i]·k[h,i]·u[h·d+i], in float64 with
// each result rounded once.
func RWKVBonus(dst, r, k, v, u []float32, d int) {
	for h0 := 0; h0 < len(dst); h0 += d {
		var s float64
		for i := h0; i < h0+d; i++ {
			s += float64(float64(r[i]) * float64(k[i]) * float64(u[i]))
		}
		for i := h0; i < h0+d; i++ {
			dst[i] = float32(float64(dst[i]) + float64(float64(v[i])*s))
		}
	}
}

// GGMLRWKVBonus is RWKVBonus as llama.cpp's graph rounds it: MUL (k·r),
// MUL (by u), SUM_ROWS (a float64 sum rounded once), MUL (v by the sum),
// ADD.
func GGMLRWKVBonus(dst, r, k, v, u []float32, d int) {
	for h0 := 0; h0 < len(dst); h0 += d {
		var s float64
		for i := h0; i < h0+d; i++ {
			s += float64(float32(k[i]*r[i]) * u[i])
		}
		sf := float32(s)
		for i := h0; i < h0+d; i++ {
			dst[i] += float32(v[i] * sf)
		}
	}
}

// WKV6Head is one head's operands of RWKV-6's recurrence for a window's
// tokens: token t's r, k, v and w at [t·Stride, t·Stride+D), its output at
// Out[t·Stride:]; the bonus U (D values; nil: gated linear attention); the
// D × D state S, row i (a key channel) holding S[i][·].
type WKV6Head struct {
	R, K, V, W, Out []float32
	U               []float32
	S               []float32
	Stride, D, T    int
}

func (h *WKV6Head) check() {
	checkWKV("wkv6", h.T, h.Stride, h.D, h.S, map[string][]float32{"r": h.R, "k": h.K, "v": h.V, "w": h.W, "output": h.Out})
	if h.T > 0 && h.U != nil {
		check("wkv6 bonus", len(h.U), h.D)
	}
}

// WKV6Ref runs ml.RWKV's WKV6 in float64, each output rounded once and the
// state rounded to float32 after the last token.
func WKV6Ref(h *WKV6Head) {
	h.check()
	D := h.D
	s := make([]float64, D*D)
	for i, v := range h.S[:D*D] {
		s[i] = float64(v)
	}
	y := make([]float64, D)
	for t := range h.T {
		o := t * h.Stride
		r, k, v, w := h.R[o:o+D], h.K[o:o+D], h.V[o:o+D], h.W[o:o+D]
		clear(y)
		for i := range D {
			row := s[i*D : (i+1)*D]
			for j := range row {
				kv := float64(float64(k[i]) * float64(v[j]))
				if h.U != nil {
					y[j] += float64(float64(r[i]) * (row[j] + float64(float64(h.U[i])*kv)))
				}
				row[j] = float64(row[j]*float64(w[i])) + kv
				if h.U == nil {
					y[j] += float64(float64(r[i]) * row[j])
				}
			}
		}
		for j, v := range y {
			h.Out[o+j] = float32(v)
		}
	}
	for i, v := range s {
		h.S[i] = float32(v)
	}
}

// WKV6GGML runs ml.RWKV's WKV6 as ggml-cpu rounds it, RWKV_WKV6 with a
// bonus and GATED_LINEAR_ATTN without (whose scale the caller applies to r
// first, as ggml rounds q·scale): for key channel i in order and each
// column j, kv = v·k; with the bonus y_j = fma(fma(kv, u, s), r, y_j) and
// s = fma(s, w, kv); without, s = fma(s, w, kv) and y_j = fma(s, r, y_j).
// Both builds compute it so (the vectors run along j).
func WKV6GGML(h *WKV6Head) { wkv6GGML(h, true) }

// wkv6GGML is WKV6GGML, taking the vector kernel (kern.wkv6) for heads of
// a multiple of 16 if kernels, else the Go loop.
func wkv6GGML(h *WKV6Head, kernels bool) {
	h.check()
	D := h.D
	kn := kern.wkv6
	if !kernels || D%16 != 0 {
		kn = nil
	}
	for t := range h.T {
		o := t * h.Stride
		r, k, v, w, y := h.R[o:o+D], h.K[o:o+D], h.V[o:o+D], h.W[o:o+D], h.Out[o:o+D]
		clear(y)
		if kn != nil && D > 0 {
			var u *float32
			if h.U != nil {
				u = &h.U[0]
			}
			kn(&h.S[0], D, &r[0], &k[0], &v[0], &w[0], u, &y[0])
			continue
		}
		for i := range D {
			row := h.S[i*D : (i+1)*D]
			ki, ri, wi := k[i], r[i], w[i]
			if h.U != nil {
				ui := h.U[i]
				for j, s := range row {
					kv := v[j] * ki
					y[j] = fma32(fma32(kv, ui, s), ri, y[j])
					row[j] = fma32(s, wi, kv)
				}
				continue
			}
			for j, s := range row {
				s = fma32(s, wi, v[j]*ki)
				row[j] = s
				y[j] = fma32(s, ri, y[j])
			}
		}
	}
}

// SiLU32 sets x to x/(1 + e^-x) in float64, rounded once.
func SiLU32(x []float32) {
	for i, v := range x {
		x[i] = float32(float64(v) / (1 + math.Exp(-float64(v))))
	}
}

// GGMLSiLURows is ggml's SILU over rows of cols values as llama.cpp's CPU
// build computes it (the lanes of ggml_vec_silu_f32 from each row's start,
// GGMLSwiGLU's silu: with avx2 the AVX2 build's).
func GGMLSiLURows(x []float32, cols int, avx2 bool) {
	ones := make([]float32, cols)
	for i := range ones {
		ones[i] = 1
	}
	for r := 0; r+cols <= len(x); r += cols {
		row := x[r : r+cols]
		GGMLSwiGLU(row, row, ones, avx2)
	}
}
