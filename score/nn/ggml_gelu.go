package nn

import (
	"math"
	"sync"

	"ppl.dev/quant"
)

// ggml-cpu's GELU (the tanh form) is a table: ggml_table_gelu_f16 holds,
// for every float16 bit pattern h, gelu32(h) rounded to float16, and
// ggml_vec_gelu_f32 / ggml_vec_geglu_f32 round their input to float16 to
// look it up, so llama.cpp's GELU is exact only to float16 (5e-4 relative;
// the oracle README shows what this costs Gemma). Outside (-10, 10) they
// skip the table: 0 at or below -10, the input itself at or above 10. The
// AVX-512 and AVX2 builds compute the same table (checked on all 65,536
// entries against libggml 0.27.0's).

// gelu32 is ggml_gelu_f32 in float32 as GCC compiles it for both builds:
// 0.5·x·(1 + tanhf(√(2/π)·x·fma(0.044715·x, x, 1))), the other operations
// rounded each. glibc's tanhf is correctly rounded, which float32(math.Tanh)
// is too on these arguments (the table check says so for every float16
// input; without the fused multiply-add one entry differs).
func gelu32(x float32) float32 {
	const a, s = float32(0.044715), float32(0.79788456080286535587989211986876)
	inner := s * x * fma32(a*x, x, 1)
	return 0.5 * x * (1 + float32(math.Tanh(float64(inner))))
}

var (
	geluTableOnce sync.Once
	geluTable     []uint16
)

// ggmlGELUTable is ggml_table_gelu_f16, made on first use (128 KB).
func ggmlGELUTable() []uint16 {
	geluTableOnce.Do(func() {
		geluTable = make([]uint16, 1<<16)
		for h := range geluTable {
			geluTable[h] = quant.F32ToF16(gelu32(quant.F16ToF32(uint16(h))))
		}
	})
	return geluTable
}

// GGMLGeGLU is ggml_vec_geglu_f32 (llama.cpp's GeGLU, the fused
// ggml_geglu_split): out[i] = gelu(gate[i]) · up[i] through the table, one
// float32 product. out may alias gate or up.
func GGMLGeGLU(out, gate, up []float32) {
	check("GGMLGeGLU gate", len(gate), len(out))
	check("GGMLGeGLU up", len(up), len(out))
	tab := ggmlGELUTable()
	for i, g := range gate {
		if g <= -10 {
			out[i] = 0 // not 0 · up: +0 whatever up's sign
		} else {
			out[i] = ggmlGELU(tab, g) * up[i]
		}
	}
}

// GGMLOAISwiGLU is ggml_compute_forward_swiglu_oai_f32 (gpt-oss's clamped
// SwiGLU, limit 7, α 1.702): with x = min(gate, 7) and y = clamp(up, -7,
// 7), out = x / (1 + expf(α·(-x))) · (y + 1) in float32 with glibc's expf.
// out may alias gate or up.
func GGMLOAISwiGLU(out, gate, up []float32) {
	check("GGMLOAISwiGLU gate", len(gate), len(out))
	check("GGMLOAISwiGLU up", len(up), len(out))
	const limit, alpha = float32(7), float32(1.702)
	for i, g := range gate {
		x := g
		if limit < x {
			x = limit
		}
		y := up[i]
		if y < -limit {
			y = -limit
		} else if limit < y {
			y = limit
		}
		out[i] = x / (1 + LibcExpf(alpha*(-x))) * (y + 1)
	}
}

// GGMLSoftCap is llama.cpp's final logit soft-capping as ggml-cpu
// computes it: ggml_scale by 1/cap (float32), ggml_tanh (tanhf), ggml_scale
// by cap, each rounded to float32. tanhf is float32(math.Tanh), which
// TanhCap(y, 1, 1) equals on every float32 y (all 2^32 compared by hand,
// 2026-12-05; TestTanhCaps pins 17 million).
func GGMLSoftCap(x []float32, cap float32) {
	inv := 1 / cap
	for i, v := range x {
		x[i] = v * inv
	}
	TanhCaps(x, x, 1, 1)
	for i, v := range x {
		x[i] = v * cap
	}
}

// GGMLGELU is ggml_vec_gelu_f32 (llama.cpp's ungated GELU, ggml_gelu):
// GGMLGeGLU's table without the up factor, out[i] = gelu(x[i]), 0 at or
// below -10 and x at or above 10; up is unused (an ungated MLP's
// activation). out may alias x.
func GGMLGELU(out, x, _ []float32) {
	check("GGMLGELU input", len(x), len(out))
	tab := ggmlGELUTable()
	for i, g := range x {
		out[i] = ggmlGELU(tab, g)
	}
}

// ggmlGELU is ggml's GELU of one value through the table tab: 0 at or
// below -10, g at or above 10.
func ggmlGELU(tab []uint16, g float32) float32 {
	switch {
	case g <= -10:
		return 0
	case g >= 10:
		return g
	}
	return quant.F16ToF32(tab[quant.F32ToF16(g)])
}
