package nn

import (
	"cmp"

	"ppl.dev/gguf"
	"ppl.dev/quant"
)

// llama.cpp's CPU backend built for a CPU with AMX-INT8 (Debian's
// libggml-cpu-sapphirerapids, loaded on Intel Xeons from Sapphire Rapids
// on; any build with -march=native there) places the weight matrices of
// some types in its AMX buffer (ggml-cpu/amx) and multiplies them with its
// own kernels, for any number of activation rows (one row: AVX-512 VNNI,
// more: AMX tiles, in the same order). Its other operations are its
// AVX-512 build's. Context.GGMLAMX computes so: AMXTaken says which
// matrices, panelAMX multiplies them.

// amxAlign is what the AMX buffer requires a matrix's input width to be a
// multiple of, per type it takes (amx.cpp's supports_op: TILE_K for the
// blocks of 32, QK_K for the super-blocks, 16 for F16).
var amxAlign = map[gguf.Type]int{
	gguf.TypeQ4_0: 32, gguf.TypeQ4_1: 32, gguf.TypeQ8_0: 32,
	gguf.TypeQ4_K: 256, gguf.TypeQ5_K: 256, gguf.TypeQ6_K: 256, gguf.TypeIQ4_XS: 256,
	gguf.TypeF16: 16,
}

// AMXTaken says whether llama.cpp's AMX buffer takes a weight matrix of
// type t, in inputs and out outputs, that MUL_MAT multiplies (not an
// expert's, routed: MUL_MAT_ID): of a type above, its rows a multiple of
// 32 (2·TILE_N) and its input width of amxAlign. A tied output head is
// one too: llama.cpp loads it as a duplicate of the token embedding,
// placed by its MUL_MAT (the embedding itself, read by GET_ROWS, stays in
// the plain buffer; a 100M Llama's tied Q8_0 head in the plain buffer's
// order missed llama.cpp's sums by 5e-6 per window of 512).
func AMXTaken(t gguf.Type, in, out int, routed bool) bool {
	a := amxAlign[t]
	return a > 0 && !routed && out%32 == 0 && in%a == 0
}

// amxTaken is AMXTaken of l's tensor.
func (l *Linear) amxTaken() bool {
	return AMXTaken(l.Type, l.In, cmp.Or(l.TensorRows, l.Out), l.Routed)
}

// panelAMX computes columns [r0, r1) of out for a matrix of a quantized
// type AMXTaken takes, in the AMX kernels' order: per output, over the
// blocks (Q4_0, Q4_1, Q8_0: 32 weights, d the weight's scale, dx the
// activations')
//
//	acc = fma(float32(Σ w·qx), d·dx, acc)   (then, Q4_1, acc = fma(m, s, acc))
//
// from 0, panelInt8's order (int8Generic), or over the super-blocks the
// tiled kernel's integers in the AMX order (tiledGeneric with amx).
func (l *Linear) panelAMX(buf []float32, r0, r1 int, a *qacts, f quant.Int8Format, out []float32) {
	switch l.Type {
	case gguf.TypeQ4_K:
		l.panelTiledOrder(buf, r0, r1, a, out, q4kFormat.scales, true)
	case gguf.TypeQ5_K:
		l.panelTiledOrder(buf, r0, r1, a, out, q5kFormat.scales, true)
	case gguf.TypeQ6_K:
		l.panelTiledOrder(buf, r0, r1, a, out, q6kScales, true)
	case gguf.TypeIQ4_XS:
		l.panelTiledOrder(buf, r0, r1, a, out, iqKindIQ4XS.tiledScales, true)
	default: // Q4_0, Q4_1 (its minima times Q8_1's s), Q8_0
		l.panelInt8(buf, r0, r1, a, f, f.HasMin, out)
	}
}

// panelF16AMX computes columns [r0, r1) of out for an F16 matrix AMXTaken
// takes, as the AMX buffer's F16 kernel (tinygemm_kernel_avx) does: the
// activations x (n rows) in float32, not rounded to f16, and per output
// dotLanes16 of the weight row and the activation row. buf holds a row of
// weights (l.In floats).
func (l *Linear) panelF16AMX(buf []float32, r0, r1 int, x []float32, n int, out []float32) {
	k := l.In
	w := buf[:k]
	var o [4]float32
	for r := r0; r < r1; r++ {
		row := l.Data[r*l.RowBytes : (r+1)*l.RowBytes]
		for i := range w {
			w[i] = quant.F16ToF32(uint16(row[2*i]) | uint16(row[2*i+1])<<8)
		}
		for t0 := 0; t0 < n; t0 += len(o) {
			m := min(len(o), n-t0)
			if f := kern.dotLanes16[m-1]; f != nil {
				f(&w[0], &x[t0*k], k, k, &o[0])
			} else {
				dotLanes16Generic(w, x[t0*k:], k, m, o[:m])
			}
			for i := range m {
				out[(t0+i)*l.Out+r] = o[i]
			}
		}
	}
}

// dotLanes16Generic sets out[i] to the dot product of w (n values, a
// multiple of 16) with row i of x (ldx apart) in 16 lanes: lane j adds
// fma(w_e, x_e, lane) for the e ≡ j mod 16 in order from 0, then
// _mm512_reduce_add_ps (reduce16).
func dotLanes16Generic(w, x []float32, ldx, m int, out []float32) {
	n := len(w)
	for i := range m {
		xi := x[i*ldx : i*ldx+n]
		var lanes [16]float32
		for e := 0; e < n; e += 16 {
			for j := range lanes {
				lanes[j] = fma32(xi[e+j], w[e+j], lanes[j])
			}
		}
		out[i] = reduce16(&lanes)
	}
}
