package nn

import (
	"math"
	"unsafe"

	"ppl.dev/gguf"
	"ppl.dev/quant"
)

// llama.cpp's CPU arithmetic, for the model's int8 modes (Context.LlamaCPP:
// with Int8's activations, every float32 operation as ggml-cpu rounds it).
//
// The int8 modes exist to reproduce llama.cpp's numbers, and with 8-bit
// activations that means reproducing its float32 arithmetic to the bit:
// an activation one ulp away from llama.cpp's rounds to another 8-bit
// value once in a while, that step (1/127 of its block's maximum) moves
// the next product's outputs by far more than an ulp, and the difference
// spreads through every later quantization. On the tiny oracle models a
// one-ulp perturbation of the attention output alone moves the int8
// log-probs by 5e-3 per token on average (as much as the whole budget
// against llama.cpp), so "the same formula in another order" is not
// enough. llama.cpp's own numbers depend on the CPU build that it loads:
// Debian's packages select libggml-cpu-zen4 (or another AVX-512 build,
// which agree with it here) on a machine with AVX-512 and
// libggml-cpu-haswell on one with AVX2 only, and the two differ in their
// e^x and in the lanes of their sums (on the oracle's low-bit models about
// half of the windows differ, by up to 0.09 per token). The default is the
// AVX-512 build; Context.GGMLAVX2 selects the AVX2 build's operations
// where they differ (SWIGLU, FLASH_ATTN_EXT). These are the operations of
// ggml-cpu 0.27.0 (ops.cpp, vec.h, vec.cpp, tiled/, arch/x86/quants.c and
// repack.cpp) as they round:
//
//   - RMS_NORM then MUL: sum = Σ double(x·x) (float32 squares, summed in
//     order in float64), mean = float32(sum/n), scale = 1/sqrtf(mean + eps),
//     y = (x·scale)·w, each product rounded to float32.
//   - SWIGLU, row by row: silu(g)·u with silu(g) = g / (1 + ggml_v_expf(-g))
//     on lanes of 16 (AVX-512: ggmlExpf) or 8 (AVX2: ggmlExpfAVX2),
//     g / (1 + expf(-g)) past the last multiple of the lane count.
//   - GEGLU through ggml's float16 GELU table, SWIGLU_OAI with glibc's
//     expf, the final soft-cap as SCALE, TANH, SCALE (ggml_gelu.go; the two
//     builds agree on them).
//   - ROPE: per position the cache of ggml_rope_cache_init in float32:
//     θ starts at the position and is multiplied by powf(base, -2/n_dims)
//     from pair to pair, cos and sin are glibc's cosf(θ)·mscale and
//     sinf(θ)·mscale (libm.go: they are not correctly rounded, and
//     float32(math.Cos) differs from them about once in a hundred); then
//     fma(x0, cos, -(x1·sin)) and fma(x0, sin, x1·cos), the contraction
//     GCC makes of x0·cos - x1·sin and x0·sin + x1·cos.
//   - FLASH_ATTN_EXT over an F16 cache (llama.cpp's default on the CPU:
//     flash attention is on unless disabled, and then the cache is F16
//     even when it is stored F32): see ggmlAttention.
//   - MUL_MAT, by weight type (ggmlPanels; checked on the oracle models'
//     and zoo's tensors for both builds): Q8_0, Q5_0, Q4_1, Q5_1 and NVFP4 in their vec_dot
//     kernels' 8 lanes (panelLanes); the types ggml repacks on x86 when
//     the row count is a multiple of 8: Q4_0, IQ4_NL, MXFP4 (one FMA per
//     block of 32 in block order, as int8Generic, for the GEMM and the
//     GEMV of the last rows alike; their vec_dot lanes otherwise:
//     panelRepackable), Q4_K and Q2_K (their
//     GEMM's and GEMV's orders: panelKRepacked; the AVX2 build does
//     not repack Q2_K, the only difference between the two builds'
//     products); the other K-quants
//     and the i-quants in the order of the tiled kernel for ggmlTiledRows
//     rows or more (panelTiled, with the minima of the types that have
//     them) and of their vec_dot kernels below (ggml_kquants*.go,
//     ggml_iquants*.go); TQ1_0 and TQ2_0 in their vec_dot kernels' lanes
//     (panelTernary); Q1_0 and Q2_0 in their vec_dot kernels' lanes
//     (panelQ1_0, panelLanes); F16 and F32 as ggml_vec_dot_f16 and _f32 per output
//     (panelHalf, panelF32; the build has no llamafile GEMM); BF16 as
//     ggml_vec_dot_bf16 per output (panelHalf: _mm512_dpbf16_ps's order
//     in the AVX-512 build, by VDPBF16PS itself in panelBF16Raw where the
//     CPU has it).
//   - MUL_MAT_ID, an expert's rows: as MUL_MAT on the rows routed to the
//     expert, but the types repacked in groups of 4 rows (Q4_K, and Q2_K
//     in the AVX-512 build) in their GEMV's order for every row
//     (Linear.Routed).
//   - Gated DeltaNet's L2 norms, gates and GATED_DELTA_NET
//     (ggml_deltanet.go).
//
// Each is checked bit for bit against libggml and glibc
// (TestGGMLArithmetic, TestGGMLProducts). The attention, the lanes'
// products and those of ggml's repacked and tiled kernels have vector
// kernels on AVX-512 VNNI and on AVX2 (GemmAcc, ggmlExpfAVX512 and
// ggmlExpf8AVX2, and the AVX-512 build's e^x on AVX2 and NEON too,
// ggmlExpfW16AVX2 and ggmlExpfNEON; the lanes, ternary, tiled, q4k and q2k kernels in VNNI
// and AVX2 forms; the F16 and BF16 dot products); the vec_dot orders of
// the other types (for fewer than ggmlTiledRows rows) are plain Go.

// ggmlExpf is ggml_v_expf, ggml-cpu's vector e^x on AVX-512, for one lane.
func ggmlExpf(x float32) float32 {
	const r = float32(0x1.8p23)
	z := fma32(x, 0x1.715476p+0, r)
	n := z - r
	b := fma32(-n, 0x1.7f7d1cp-20, fma32(-n, 0x1.62e4p-1, x))
	u := b * b
	j := fma32(fma32(fma32(0x1.0e4020p-7, b, 0x1.573e2ep-5), u, fma32(0x1.555e66p-3, b, 0x1.fffdb6p-2)), u,
		fma32(0x1.ffffecp-1, b, 1))
	if n != n || x != x {
		return float32(math.NaN())
	}
	if float32(math.Abs(float64(n))) > 192 {
		if n <= 0 {
			return 0
		}
		return float32(math.Inf(1))
	}
	// _mm512_scalef_ps: j·2^n rounded once (n is an integer here).
	return float32(float64(j) * math.Ldexp(1, int(n)))
}

// ggmlExpfAVX2 is ggml_v_expf of ggml-cpu's AVX2 build, for one lane: the
// same polynomial as ggmlExpf's, ending in k + k·j (k = 2^n from the bits of
// z) instead of a scaling, and |n| > 126 handled by two factors.
func ggmlExpfAVX2(x float32) float32 {
	const r = float32(0x1.8p23)
	z := fma32(x, 0x1.715476p+0, r)
	n := z - r
	b := fma32(-n, 0x1.7f7d1cp-20, fma32(-n, 0x1.62e4p-1, x))
	e := math.Float32bits(z) << 23
	k := math.Float32frombits(e + 0x3f800000)
	u := b * b
	j := fma32(fma32(fma32(0x1.0e4020p-7, b, 0x1.573e2ep-5), u, fma32(0x1.555e66p-3, b, 0x1.fffdb6p-2)), u,
		float32(0x1.ffffecp-1)*b)
	an := float32(math.Abs(float64(n)))
	if !(an > 126) { // also NaN
		return fma32(j, k, k)
	}
	var g uint32
	if n <= 0 {
		g = 0x82000000
	}
	s1 := math.Float32frombits(g + 0x7f000000)
	s2 := math.Float32frombits(e - g)
	if an > 192 {
		return s1 * s1
	}
	return fma32(s2, j, s2) * s1
}

// ggmlExpfs sets dst[i] to ggml_v_expf(x[i]) of the AVX-512 build
// (ggmlExpf) or, with avx2, of the AVX2 build (ggmlExpfAVX2); dst may
// alias x.
func ggmlExpfs(dst, x []float32, avx2 bool) {
	i := 0
	if avx2 {
		if f := kern.ggmlExpf8; f != nil && len(x) >= 8 {
			i = len(x) &^ 7
			f(&dst[0], &x[0], i)
		}
		for ; i < len(x); i++ {
			dst[i] = ggmlExpfAVX2(x[i])
		}
		return
	}
	if f := kern.ggmlExpf; f != nil && len(x) >= 16 {
		i = len(x) &^ 15
		f(&dst[0], &x[0], i)
	}
	for ; i < len(x); i++ {
		dst[i] = ggmlExpf(x[i])
	}
}

// ggmlSwiGLU is ggml_vec_swiglu_f32 of the AVX-512 build for one row: out
// = silu(gate)·up, silu(g) = g / (1 + ggml_v_expf(-g)) on lanes of 16 and
// g / (1 + expf(-g)) past the last multiple of 16. out may alias gate or up.
func ggmlSwiGLU(out, gate, up []float32) { ggmlSwiGLURow(out, gate, up, false) }

// ggmlSwiGLUAVX2 is ggmlSwiGLU as the AVX2 build computes it: lanes of 8
// and its ggml_v_expf (ggmlExpfAVX2).
func ggmlSwiGLUAVX2(out, gate, up []float32) { ggmlSwiGLURow(out, gate, up, true) }

// GGMLSwiGLU is ggml's SWIGLU of rows of gate and up as llama.cpp's CPU
// build computes it (ggmlSwiGLU; with avx2 ggmlSwiGLUAVX2): the int8
// modes' GLU of a gate and an up computed apart (bitnet's scaled ones).
func GGMLSwiGLU(out, gate, up []float32, avx2 bool) { ggmlSwiGLURow(out, gate, up, avx2) }

// GGMLClampSwiGLU is Step-3.5's clamped SwiGLU for the limit l > 0 as
// llama.cpp's CPU build computes it, a row at a time: ggml_silu (the lanes
// of ggml_vec_silu_f32, GGMLSwiGLU's), clamped above at l, times up
// clamped to [-l, l], each rounded to float32.
func GGMLClampSwiGLU(l float32, avx2 bool) func(out, gate, up []float32) {
	return func(out, gate, up []float32) { ggmlGLURow(out, gate, up, avx2, l) }
}

// GGMLSwiGLUClampIn is SwiGLUClampIn for the limit l > 0 as libggml's
// SWIGLU_CLAMP computes it, the same in both CPU builds (probed, bit for
// bit): g = min(gate, l), then g / (1 + expf(-g)) with glibc's scalar expf,
// times clamp(up, -l, l), each rounded to float32. out may alias gate or
// up.
func GGMLSwiGLUClampIn(l float32) func(out, gate, up []float32) {
	return func(out, gate, up []float32) {
		check("GGMLSwiGLUClampIn gate", len(gate), len(out))
		check("GGMLSwiGLUClampIn up", len(up), len(out))
		for i := range out {
			g := min(gate[i], l)
			out[i] = float32(g/(1+LibcExpf(-g))) * max(min(up[i], l), -l)
		}
	}
}

func ggmlSwiGLURow(out, gate, up []float32, avx2 bool) { ggmlGLURow(out, gate, up, avx2, 0) }

// ggmlGLURow is ggml's SWIGLU of a row, or with limit > 0 its SILU, CLAMP
// and MUL of Step-3.5's clamped form (the silu the same bits in both).
func ggmlGLURow(out, gate, up []float32, avx2 bool, limit float32) {
	check("ggmlSwiGLU gate", len(gate), len(out))
	check("ggmlSwiGLU up", len(up), len(out))
	nv := len(out) &^ 15
	if avx2 {
		nv = len(out) &^ 7
	}
	var e [256]float32
	for i0 := 0; i0 < len(out); i0 += len(e) {
		m := min(len(e), len(out)-i0)
		for i := range m {
			e[i] = -gate[i0+i]
		}
		v := e[:min(m, max(0, nv-i0))]
		ggmlExpfs(v, v, avx2)
		for i := range m {
			g := gate[i0+i]
			if i0+i >= nv {
				e[i] = LibcExpf(-g)
			}
			if limit > 0 {
				out[i0+i] = min(float32(g/(1+e[i])), limit) * max(min(up[i0+i], limit), -limit)
				continue
			}
			out[i0+i] = g / (1 + e[i]) * up[i0+i]
		}
	}
}

// InvSqrtf is 1.0f/sqrtf(float(d)), llama.cpp's and ggml's 1/sqrt of a
// head size: float32(1/math.Sqrt(d)) is an ulp away for some d (72, 96,
// 112, ...), which the int8 modes carry into the log-probs.
func InvSqrtf(d int) float32 { return 1 / float32(math.Sqrt(float64(d))) }

// ggmlRMSRow is RMS_NORM then MUL for one row.
func ggmlRMSRow(out, x, w []float32, eps float32) {
	scale := ggmlRMSScale(x, eps)
	for i, v := range x {
		out[i] = v * scale * w[i]
	}
}

// YaRNMagnitude is the magnitude YaRN multiplies cos and sin by at
// frequency scale fs, 1 + 0.1·ln(1/fs), as ggml's rope_yarn computes it: in
// float32, with glibc's logf.
func YaRNMagnitude(fs float32) float32 { return 1 + float32(0.1*LibcLogf(1/fs)) }

// ggmlRoPE is Forward with llama.cpp's float32 cache and rotation.
func (r *RoPE) ggmlRoPE(c *Context, x []float32, n, heads int) {
	check("RoPE input", len(x), n*heads*r.HeadDim)
	h := r.Dims / 2
	base, fs := float32(r.Base), float32(r.FreqScale)
	if fs == 0 {
		fs = 1
	}
	ms := float32(r.AttnFactor)
	if ms == 0 {
		ms = 1
	}
	thetaScale := libcPowf(base, float32(-2)/float32(r.Dims))
	ext := float32(r.ExtFactor)
	var low, high float32
	if ext != 0 {
		l, hh := r.CorrDims()
		low, high = float32(l), float32(hh)
		ms *= YaRNMagnitude(fs)
	}
	c.Parallel(n, func(_, lo, hi int) {
		cs := make([]float32, 2*h)
		for t := lo; t < hi; t++ {
			theta := float32(t)
			for i := range h {
				te := theta
				if r.FreqFactors != nil {
					te = theta / r.FreqFactors[i]
				}
				th := fs * te
				if ext != 0 {
					y := (float32(i) - low) / max(0.001, high-low)
					ramp := (1 - min(1, max(0, y))) * ext
					// GCC contracts rope_yarn's theta_interp·(1 −
					// ramp_mix) + theta_extrap·ramp_mix into one
					// fused multiply-add on the first product.
					th = fma32(th, 1-ramp, te*ramp)
				}
				cs[2*i] = libcCosf(th) * ms
				cs[2*i+1] = libcSinf(th) * ms
				if r.Back {
					cs[2*i+1] = -cs[2*i+1]
				}
				theta *= thetaScale
			}
			for hd := range heads {
				v := x[(t*heads+hd)*r.HeadDim : (t*heads+hd+1)*r.HeadDim]
				for i := range h {
					ia, ib := 2*i, 2*i+1
					if r.NeoX {
						ia, ib = i, i+h
					}
					c0, s0 := cs[2*i], cs[2*i+1]
					a, b := v[ia], v[ib]
					v[ia] = fma32(a, c0, -(b * s0))
					v[ib] = fma32(a, s0, b*c0)
				}
			}
		}
	})
}

// reduce16 is _mm512_reduce_add_ps: lanes i and i+8, then i and i+4, then
// i and i+2, then the last two.
func reduce16(v *[16]float32) float32 {
	var a [8]float32
	for i := range 8 {
		a[i] = v[i] + v[i+8]
	}
	for i := range 4 {
		a[i] += a[i+4]
	}
	a[0] += a[2]
	a[1] += a[3]
	return a[0] + a[1]
}

// ggmlTileQ and ggmlTileKV are ggml-cpu's flash-attention tile sizes
// (GGML_FA_TILE_Q, GGML_FA_TILE_KV): a batch of at least ggmlTileQ query
// rows takes the tiled kernel.
const ggmlTileQ, ggmlTileKV = 64, 64

// ggmlAttention is ggml-cpu's FLASH_ATTN_EXT over F16 keys and values (k
// and v hold f16 values; q is float32), each query row on its own:
//
// n >= 64 query rows, whatever the size of the values (DV:
// Attention.ValueDim or HeadDim; ggml-cpu 0.27.0 does not test it), take
// ggml_compute_forward_flash_attn_ext_tiled: for each tile of 64 keys
// with a visible key, s_j = the float32 FMA chain of
// q·k_j over the head dimension in order, times Scale; masked keys -Inf;
// M' = max(M, max_j s_j), and on a new maximum the output and the sum are
// multiplied by expf(M - M'); p_j = ggml_v_expf(s_j - M') in lanes of 16,
// the sum of each 16 (reduce16) added to S in float64; the output gets the
// FMA chain of p_j·v_j over the tile's keys in order (its vectors' columns,
// then one column at a time past the last whole vector: the same chains).
// At the end sinks as below, and the output times 1/S. See ggmlTiled.
//
// Otherwise (ggml_compute_forward_flash_attn_ext_f16_one_chunk): q rounded to
// f16; per visible key in order s = ggml_vec_dot_f16(k, q)·Scale; a new
// maximum multiplies the F16 accumulator by ms = expf(M - s) (each element
// rounded to f16), otherwise vs = expf(s - M); the accumulator becomes
// f16(fma(v, vs, acc)) and S = S·ms + vs. At the end sinks, and the
// accumulator, in float32, times 1/S.
//
// Sinks: with s the head's sink, if s > M the output is multiplied by
// ms = expf(M - s), and S = S·ms + vs (vs = expf(s - M) otherwise), one
// FMA in the tiled kernel.
//
// A soft-cap divides Scale by it and replaces each scaled score s by
// cap·tanhf(s) in both (ggmlScale). ALiBi adds its bias to each scaled
// (capped) score in both, a float32 sum (ggmlBias).
func (a *Attention) ggmlAttention(c *Context, out, q, k, v []float32, n int) {
	P := a.Placeholders
	if n-P >= ggmlTileQ {
		a.ggmlTiled(c, out, q, k, v, n)
		return
	}
	hd, qs, ks := a.HeadDim, a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	group := a.Heads / a.KVHeads
	c.Parallel((n-P)*a.Heads, func(_, lo, hi int) {
		acc := make([]float32, hd)
		qh := make([]float32, hd)
		for it := lo; it < hi; it++ {
			i, h := P+it/a.Heads, it%a.Heads
			g := h / group
			for d, x := range q[i*qs+h*hd : i*qs+(h+1)*hd] {
				qh[d] = quant.F16ToF32(quant.F32ToF16(x))
			}
			clear(acc)
			M, S := a.ggmlOneChunk(i, h,
				func(j int) float32 { return dotF16(qh, k[j*ks+g*hd:j*ks+(g+1)*hd], c.GGMLAVX2) },
				func(ms float32) {
					for d := range acc {
						acc[d] = roundF16(acc[d] * ms)
					}
				},
				func(j int, vs float32) {
					for d, x := range v[j*ks+g*hd : j*ks+(g+1)*hd] {
						acc[d] = roundF16(fma32(x, vs, acc[d]))
					}
				})
			a.ggmlFinish(out[i*qs+h*hd:i*qs+(h+1)*hd], acc, h, M, S, false)
		}
	})
}

// ggmlOneChunk is ggml_compute_forward_flash_attn_ext_f16_one_chunk's online
// softmax for query row i and head h over the keys it sees, in order: s =
// dot(j)·Scale (soft-capped, plus ALiBi's bias: ggmlScale, ggmlBias, two
// roundings as ggml's two statements); a new maximum calls rescale(ms =
// expf(M - s)), otherwise vs = expf(s - M); then add(j, vs), and S =
// fma(S, ms, vs). It returns M and S for ggmlFinish.
func (a *Attention) ggmlOneChunk(i, h int, dot func(j int) float32, rescale func(ms float32), add func(j int, vs float32)) (M, S float32) {
	scale, capf := a.ggmlScale()
	g := h / (a.Heads / a.KVHeads)
	first := 0
	if a.Window > 0 {
		first = max(0, i-a.Window+1)
	}
	M = float32(math.Inf(-1))
	for j := first; j <= i; j++ {
		if !a.sees(g, i, j) {
			continue // a key masked by -inf: ggml skips it
		}
		mv, seen := a.ggmlBias(h, i, j)
		if !seen {
			continue // -Inf: past float16's range
		}
		s := float32(capf(dot(j)*scale)) + mv
		ms, vs := float32(1), float32(1)
		if s > M {
			Mold := M
			M = s
			ms = LibcExpf(Mold - M)
			rescale(ms)
		} else {
			vs = LibcExpf(s - M)
		}
		add(j, vs)
		S = fma32(S, ms, vs)
	}
	return M, S
}

// ggmlMatMulAttention is llama.cpp's attention without flash attention
// (build_attn_mha: MUL_MAT of the F16 keys and q, the scores' scale and
// soft-cap, SOFT_MAX with the mask, MUL_MAT of the F16 values and the
// probabilities) as ggml-cpu computes it, each query row on its own:
// s_j = float32(ggml_vec_dot_f16(k_j, f16(q))) for each visible key, then
// s_j·Scale, or with a soft-cap cap·tanhf(s_j·float32(Scale/cap)) (Grok's
// SCALE, TANH, SCALE; SOFT_MAX's own scale then 1), -Inf for the others;
// GGMLSoftMax over the row padded with -Inf to a multiple of 64 keys
// (llama.cpp's row is its cache's n_kv, a multiple of 256 whose masked
// keys add zeros to the same lanes); each output element
// float32(ggml_vec_dot_f16(v column, f16(p))) over the padded row, the
// values of keys past the row's last 0 (their probabilities are 0).
func (a *Attention) ggmlMatMulAttention(c *Context, out, q, k, v []float32, n int) {
	if a.Sinks != nil || a.Slopes != nil {
		panic("nn: matrix-product attention takes no sinks and no ALiBi")
	}
	hd, qs, ks := a.HeadDim, a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	group := a.Heads / a.KVHeads
	scale, capf := a.ggmlScale()
	avx2 := c.GGMLAVX2
	pad := (n + 63) &^ 63
	c.Parallel(n*a.Heads, func(_, lo, hi int) {
		qh, row, vcol := make([]float32, hd), make([]float32, pad), make([]float32, pad)
		for it := lo; it < hi; it++ {
			i, h := it/a.Heads, it%a.Heads
			g := h / group
			L := (i + 64) &^ 63 // the keys up to i, padded
			for d, x := range q[i*qs+h*hd : i*qs+(h+1)*hd] {
				qh[d] = roundF16(x)
			}
			first := 0
			if a.Window > 0 {
				first = max(0, i-a.Window+1)
			}
			for j := range L {
				row[j] = float32(math.Inf(-1))
				if j >= first && j <= i && a.sees(g, i, j) {
					row[j] = capf(dotF16(k[j*ks+g*hd:j*ks+(g+1)*hd], qh, avx2) * scale)
				}
			}
			GGMLSoftMax(row[:L], row[:L], avx2)
			for j := range L {
				row[j] = roundF16(row[j])
			}
			o := out[i*qs+h*hd : i*qs+(h+1)*hd]
			for d := range o {
				for j := range L {
					vcol[j] = 0
					if j <= i {
						vcol[j] = v[j*ks+g*hd+d]
					}
				}
				o[d] = dotF16(vcol[:L], row[:L], avx2)
			}
		}
	})
}

// ggmlScale is FLASH_ATTN_EXT's score scale and its soft-cap: with a cap,
// the scale divided by it (float32), and each scaled score s becomes
// cap·tanhf(s) (glibc's tanhf is correctly rounded).
func (a *Attention) ggmlScale() (float32, func(float32) float32) {
	scale, cp := float32(a.Scale), float32(a.SoftCap)
	if cp == 0 {
		return scale, func(s float32) float32 { return s }
	}
	return scale / cp, func(s float32) float32 { return cp * float32(math.Tanh(float64(s))) }
}

// ggmlBias is the ALiBi bias of head h's score of key j for query row i
// as llama.cpp's flash attention computes it from its F16 mask,
// Slopes[h]·f16(j − i) in float32 (0 without Slopes), and false where
// the distance is past float16's range: the mask's -Inf, a key unseen.
// Small enough to inline where there are no Slopes: the kernels call it
// for every key.
func (a *Attention) ggmlBias(h, i, j int) (float32, bool) {
	if a.Slopes == nil {
		return 0, true
	}
	return a.ggmlALiBi(h, i, j)
}

// ggmlALiBi is ggmlBias with Slopes.
func (a *Attention) ggmlALiBi(h, i, j int) (float32, bool) {
	d := roundF16(float32(j - i))
	if math.IsInf(float64(d), -1) {
		return 0, false
	}
	return float32(a.Slopes[h] * d), true
}

// ggmlFinish applies the head's sink to a query row's output acc, maximum
// M and sum S, and writes acc/S to o; fused: the sink's S·ms + vs in one
// FMA, as GCC contracts it in ggml's tiled kernel (not in the one-chunk
// kernel; both pinned in TestGGMLArithmetic).
func (a *Attention) ggmlFinish(o, acc []float32, h int, M, S float32, fused bool) {
	if a.Sinks != nil {
		s := a.Sinks[h]
		ms, vs := float32(1), float32(1)
		if s > M {
			ms = LibcExpf(M - s)
			for d := range acc {
				acc[d] *= ms
			}
		} else {
			vs = LibcExpf(s - M)
		}
		if fused {
			S = fma32(S, ms, vs)
		} else {
			S = float32(S*ms) + vs
		}
	}
	var inv float32
	if S != 0 {
		inv = 1 / S
	}
	for d := range o {
		o[d] = acc[d] * inv
	}
}

// ggmlTiled is ggmlAttention's tiled form for blocks of up to gemmTileRows
// query rows of one head at a time: the scores of a tile are one Gemm (each
// an FMA chain over the head dimension from zero, as ggml's), and the
// output one GemmAcc (each element's chain continuing over the tile's keys
// in order). A key that a row does not see has p = 0 there, so its FMA
// leaves that row's output as it is, as ggml's skipping it does; a tile in
// which a row sees no key is skipped for that row, as ggml skips it.
func (a *Attention) ggmlTiled(c *Context, out, q, k, v []float32, n int) {
	hd, qs, ks, dv := a.HeadDim, a.Heads*a.HeadDim, a.KVHeads*a.HeadDim, a.valueDim()
	group := a.Heads / a.KVHeads
	scale, capf := a.ggmlScale()
	d16 := dv &^ 15 // the columns of whole vectors; the rest one at a time
	nr := 32
	if d16%32 != 0 {
		nr = 16
	}
	// Keys transposed per KV head, kt[(g·hd + d)·np + j] = k_j[d], zero past n.
	np := (n + ggmlTileKV - 1) / ggmlTileKV * ggmlTileKV
	kt := c.Alloc(a.KVHeads * hd * np)
	c.Parallel(a.KVHeads*hd, func(_, lo, hi int) {
		for gd := lo; gd < hi; gd++ {
			g, d := gd/hd, gd%hd
			row := kt[gd*np : (gd+1)*np]
			for j := range n {
				row[j] = k[j*ks+g*hd+d]
			}
			clear(row[n:])
		}
	})
	const T = ggmlTileKV
	// Without a soft-cap, a row's scores in a tile are its products times
	// Scale (scaleMax's vector loop), -Inf outside the keys [first, i] (of
	// its window and its chunk) and those its KeySet leaves out, plus
	// ALiBi's bias.
	plain := a.SoftCap == 0
	capped, cp := a.Slopes == nil && a.SoftCap != 0 && a.Keys == nil, float32(a.SoftCap)
	rows := gemmTileRows
	blocks := (n - a.Placeholders + rows - 1) / rows
	c.Parallel(blocks*a.Heads, func(_, lo, hi int) {
		sc := make([]float32, rows*T)
		p := make([]float32, rows*T)
		acc := make([]float32, rows*hd)
		M := make([]float32, rows)
		S := make([]float32, rows)
		for it := lo; it < hi; it++ {
			b, h := it/a.Heads, it%a.Heads
			g := h / group
			i0 := a.Placeholders + b*rows
			m := min(rows, n-i0)
			clear(acc)
			clear(S)
			for r := range m {
				M[r] = float32(math.Inf(-1))
			}
			firstOf := func(i int) int { // the row's first key
				first := 0
				if a.Window > 0 {
					first = max(0, i-a.Window+1)
				}
				if a.Chunk > 0 {
					first = max(first, i/a.Chunk*a.Chunk)
				}
				return first
			}
			for t0 := firstOf(i0) / T * T; t0 < i0+m; t0 += T {
				if a.Keys != nil && !a.Keys.any(g, i0, m, t0, T) {
					continue // no row of the block sees a key of the tile: ggml skips them all
				}
				for z := 0; z < T; z += 32 {
					Gemm(m, 32, q[i0*qs+h*hd:], qs, kt[g*hd*np+t0+z:], np, hd, sc[z:], T, nil)
				}
				for r := range m {
					i := i0 + r
					first := firstOf(i)
					pr := p[r*T : (r+1)*T]
					if t0 > i || t0+T <= first {
						clear(pr)
						continue
					}
					var tmax float32
					if plain {
						tmax = scaleMax(pr, sc[r*T:(r+1)*T], scale)
						switch lo, hi := first-t0, i-t0+1; {
						case a.Slopes != nil:
							tmax = a.alibiMax(pr, lo, hi, g, h, i, t0)
						case a.Keys != nil:
							tmax = a.keyedMax(pr, lo, hi, g, i, t0, tmax)
						case lo > 0 || hi < T:
							tmax = maskedMax(pr, lo, hi)
						}
					} else if capped {
						// A soft-cap alone: plain's keys, each score capped,
						// tanhf by TanhCaps (GGMLSoftCap's); the maximum as
						// scaleMax's: ±0 and NaN as they come.
						lo, hi := max(first-t0, 0), min(i-t0+1, T)
						tmax = float32(math.Inf(-1))
						for jj := range T {
							if jj < lo || jj >= hi {
								pr[jj] = float32(math.Inf(-1))
							} else {
								pr[jj] = sc[r*T+jj] * scale
							}
						}
						if lo < hi {
							TanhCaps(pr[lo:hi], pr[lo:hi], 1, 1)
						}
						for jj := lo; jj < hi; jj++ {
							v := cp * pr[jj]
							pr[jj] = v
							if v > tmax {
								tmax = v
							}
						}
					} else {
						tmax = float32(math.Inf(-1))
						for jj := range T {
							j := t0 + jj
							mv, seen := a.ggmlBias(h, i, j)
							if j > i || j < first || !a.sees(g, i, j) || !seen {
								pr[jj] = float32(math.Inf(-1))
								continue
							}
							pr[jj] = float32(capf(sc[r*T+jj]*scale)) + mv
							tmax = max(tmax, pr[jj])
						}
					}
					if math.IsInf(float64(tmax), -1) { // Keys left the row no key here
						clear(pr)
						continue
					}
					Mn := max(M[r], tmax)
					if Mn > M[r] {
						ms := LibcExpf(M[r] - Mn)
						for d := range hd {
							acc[r*hd+d] *= ms
						}
						S[r] *= ms
					}
					M[r] = Mn
					S[r] = float32(float64(S[r]) + ggmlSoftMax(pr, pr, Mn, c.GGMLAVX2))
				}
				kk := min(T, n-t0)
				for z := 0; z < d16; z += nr {
					GemmAcc(m, nr, p, T, v[t0*ks+g*hd+z:], ks, kk, acc[z:], hd)
				}
				for d := d16; d < dv; d++ {
					for r := range m {
						s := acc[r*hd+d]
						for j := range kk {
							s = fma32(p[r*T+j], v[(t0+j)*ks+g*hd+d], s)
						}
						acc[r*hd+d] = s
					}
				}
			}
			for r := range m {
				i := i0 + r
				a.ggmlFinish(out[i*qs+h*hd:i*qs+(h+1)*hd], acc[r*hd:(r+1)*hd], h, M[r], S[r], true)
			}
		}
	})
}

// scaleMax sets dst = scale·src (len(src) a multiple of 16) and returns
// the largest of dst; the vector kernels may return -0 for +0 or skip a
// NaN where the plain loop does not, which ggmlTiled cannot tell: a
// maximum of ±0 gives the same differences and exponentials, and a NaN
// score makes its row's output NaN either way.
func scaleMax(dst, src []float32, scale float32) float32 {
	if f := kern.scaleMax; f != nil {
		return f(&dst[0], &src[0], len(src), scale)
	}
	return scaleMaxGeneric(dst, src, scale)
}

func scaleMaxGeneric(dst, src []float32, scale float32) float32 {
	m := float32(math.Inf(-1))
	for i, v := range src {
		v *= scale
		dst[i] = v
		m = max(m, v)
	}
	return m
}

// maskedMax sets x outside [lo, hi) to -Inf and returns the largest of
// the rest.
func maskedMax(x []float32, lo, hi int) float32 {
	inf := float32(math.Inf(-1))
	m := inf
	for j := range x {
		if j < lo || j >= hi {
			x[j] = inf
			continue
		}
		m = max(m, x[j])
	}
	return m
}

// keyedMax is maskedMax that also sets -Inf where KV head g's row i does
// not see key t0 + j (Keys; the window and chunk are in [lo, hi)); tmax is
// the largest of all of x. A tile of 64 keys a block choice (MSA) takes or
// leaves whole is one word of the row's set: all of it, or none.
func (a *Attention) keyedMax(x []float32, lo, hi, g, i, t0 int, tmax float32) float32 {
	row := a.Keys.row(g, i)
	if len(x) == 64 && t0%64 == 0 {
		switch row[t0/64] {
		case ^uint64(0):
			if lo > 0 || hi < len(x) {
				return maskedMax(x, lo, hi)
			}
			return tmax
		case 0:
			return maskedMax(x, 0, 0)
		}
	}
	inf := float32(math.Inf(-1))
	m := inf
	for j := range x {
		if k := t0 + j; j < lo || j >= hi || row[k/64]>>(k%64)&1 == 0 {
			x[j] = inf
			continue
		}
		m = max(m, x[j])
	}
	return m
}

// alibiMax adds ALiBi's bias to head h's scaled scores x of keys t0 + j
// for query row i (ggmlALiBi's: the F16 mask's distance, exact down to
// -2048), -Inf outside [lo, hi), for the keys KV head g's row does not
// see and past float16's range, and returns the largest.
func (a *Attention) alibiMax(x []float32, lo, hi, g, h, i, t0 int) float32 {
	inf := float32(math.Inf(-1))
	slope := a.Slopes[h]
	m := inf
	for j := range x {
		if j < lo || j >= hi || a.Keys != nil && !a.Keys.HasIn(g, i, t0+j) {
			x[j] = inf
			continue
		}
		d := float32(t0 + j - i)
		if d < -2048 {
			if d = roundF16(d); math.IsInf(float64(d), -1) {
				x[j] = inf
				continue
			}
		}
		x[j] += float32(slope * d)
		m = max(m, x[j])
	}
	return m
}

// roundF16 rounds x to the nearest f16 value.
func roundF16(x float32) float32 { return quant.F16ToF32(quant.F32ToF16(x)) }

// dotF16 is ggml_vec_dot_f16 for f16 values held as float32: dotLanes,
// then the elements past its last block added in float64 in order, the
// sum rounded to float32.
func dotF16(x, y []float32, avx2 bool) float32 {
	sum, np := dotLanes(x, y, avx2)
	s := float64(sum)
	for e := np; e < len(x); e++ {
		s += float64(x[e] * y[e])
	}
	return float32(s)
}

// dotF32 is ggml_vec_dot_f32: dotLanes, then the elements past its last
// block added in float32 in order (no fused multiply-add).
func dotF32(x, y []float32, avx2 bool) float32 {
	sum, np := dotLanes(x, y, avx2)
	for e := np; e < len(x); e++ {
		sum += float32(x[e] * y[e])
	}
	return sum
}

// dotLanes is the vector part of ggml's float dot products (GGML_F32_STEP
// blocks, dotLanesGeneric), in a kernel where the level has one (kern.dotF32
// and dotF32x8; an f16 row is multiplied as the float32 values it holds).
// It returns the sum and the number of elements it covered.
func dotLanes(x, y []float32, avx2 bool) (float32, int) {
	kd, np := kern.dotF32, len(x)&^63
	if avx2 {
		kd, np = kern.dotF32x8, len(x)&^31
	}
	if kd == nil {
		return dotLanesGeneric(x, y, avx2)
	}
	if np == 0 {
		return 0, 0
	}
	return kd(&x[0], &y[0], np), np
}

// dotLanesGeneric is dotLanes in plain Go: on AVX-512, four accumulators of 16 lanes over each 64 elements
// (FMA), folded (0+2, 1+3, then 0+1) and reduced (reduce16); on the AVX2
// build (avx2), four of 8 lanes over each 32 elements, folded alike, the 8
// lanes summed as i + (i+4), then hadd twice ((0+1) + (2+3)). It returns
// the sum and the number of elements it covered.
func dotLanesGeneric(x, y []float32, avx2 bool) (float32, int) {
	w := 16
	if avx2 {
		w = 8
	}
	n := len(x)
	np := n / (4 * w) * (4 * w)
	if np == 0 {
		return 0, 0
	}
	var acc [4][16]float32
	for i := 0; i < np; i += 4 * w {
		for j := range 4 {
			for l := range w {
				e := i + w*j + l
				acc[j][l] = fma32(x[e], y[e], acc[j][l])
			}
		}
	}
	for l := range w {
		acc[0][l] += acc[2][l]
		acc[1][l] += acc[3][l]
	}
	for l := range w {
		acc[0][l] += acc[1][l]
	}
	if avx2 {
		a := &acc[0]
		t0, t1, t2, t3 := a[0]+a[4], a[1]+a[5], a[2]+a[6], a[3]+a[7]
		return (t0 + t1) + (t2 + t3), np
	}
	return reduce16(&acc[0]), np
}

// ggmlPanels holds, per weight type, the panel (panelInt8's job) that sums
// in llama.cpp's order where that differs from panelInt8's. Each is
// checked bit for bit against libggml's MUL_MAT on an oracle model's
// tensors (TestGGMLProducts).
var ggmlPanels = map[gguf.Type]ggmlPanel{
	gguf.TypeQ8_0:    (*Linear).panelLanes,
	gguf.TypeQ4_K:    (*Linear).panelQ4K,
	gguf.TypeQ6_K:    (*Linear).panelQ6K,
	gguf.TypeIQ2_XXS: (*Linear).panelIQ2XXS,
	gguf.TypeIQ3_S:   (*Linear).panelIQ3S,
	gguf.TypeIQ1_M:   (*Linear).panelIQ1M,
	gguf.TypeNVFP4:   (*Linear).panelLanes,
	gguf.TypeIQ2_XS:  (*Linear).panelIQ2XS,
	gguf.TypeIQ2_S:   (*Linear).panelIQ2S,
	gguf.TypeIQ3_XXS: (*Linear).panelIQ3XXS,
	gguf.TypeIQ1_S:   (*Linear).panelIQ1S,
	gguf.TypeIQ4_XS:  (*Linear).panelIQ4XS,
	gguf.TypeQ2_K:    (*Linear).panelQ2K,
	gguf.TypeQ3_K:    (*Linear).panelQ3K,
	gguf.TypeQ5_K:    (*Linear).panelQ5K,
	gguf.TypeQ5_0:    (*Linear).panelLanes,
	gguf.TypeQ4_1:    (*Linear).panelLanes,
	gguf.TypeQ5_1:    (*Linear).panelLanes,
	gguf.TypeQ4_0:    (*Linear).panelRepackable,
	gguf.TypeIQ4_NL:  (*Linear).panelRepackable,
	gguf.TypeMXFP4:   (*Linear).panelRepackable,
	gguf.TypeTQ1_0:   (*Linear).panelTernary,
	gguf.TypeTQ2_0:   (*Linear).panelTernary,
	gguf.TypeQ1_0:    (*Linear).panelQ1_0,
	gguf.TypeQ2_0:    (*Linear).panelLanes,
}

// ggmlTiledRows is the number of activation rows from which ggml-cpu's
// MUL_MAT hands the K-quants and the i-quants it does not repack to its
// tiled kernel (ggml_compute_forward_mul_mat_tiled, ggml_tiled_min_batch;
// GGML_CPU_TILED_MM=0 turns it off, which llama.cpp does not do by
// default); below it they take their vec_dot kernels. MUL_MAT_ID (an
// expert's rows) decides the same way on the rows routed to the expert.
const ggmlTiledRows = 8

// ggmlGemmRows is how many of a's rows the GEMM of a type ggml repacks in
// 4-row groups takes (the rest take its GEMV): n - n%4 for MUL_MAT, none
// for an expert's matrix (MUL_MAT_ID runs the GEMV row by row).
func (l *Linear) ggmlGemmRows(a *qacts) int {
	if l.Routed {
		return 0
	}
	return a.n - a.n%4
}

// ggmlPanel computes out[t·l.Out + r] for weight rows r in [r0, r1) and the
// activation rows t in [0, a.n), with buf, int8Scratch floats, as scratch.
type ggmlPanel func(l *Linear, buf []float32, r0, r1 int, a *qacts, out []float32)

// panelF32 computes columns [r0, r1) of out for F32 weights as ggml-cpu's
// MUL_MAT does: per output, ggml_vec_dot_f32 (dotF32, in the AVX2 build's
// lanes with avx2) of the weight row with the activation row (x, n rows).
// Routers (ffn_gate_inp) and small projections are often F32 in quantized
// files; their products decide which experts run.
func (l *Linear) panelF32(r0, r1 int, x []float32, n int, avx2 bool, out []float32) {
	k := l.In
	for r := r0; r < r1; r++ {
		w := unsafe.Slice((*float32)(unsafe.Pointer(&l.Data[r*l.RowBytes])), k)
		for t := range n {
			out[t*l.Out+r] = dotF32(w, x[t*k:(t+1)*k], avx2)
		}
	}
}

// panelHalf computes columns [r0, r1) of out for F16 or BF16 weights as
// ggml-cpu's MUL_MAT does (Debian's build has no llamafile GEMM): per
// output, the type's ggml_vec_dot (dotF16, dotBF16; in the AVX2 build's
// order with avx2) of the weight row with the activation row rounded to
// the weights' type (x, n rows; in bf16Pairs's order with pairs). The
// AVX-512 build's kernels (kern.dotF16, kern.dotBF16) take 4 activation
// rows at a time. The panel's rows are decoded into buf (fp32Scratch
// floats) first, and each activation row (or 4) meets all of them while
// it is in the cache.
func (l *Linear) panelHalf(buf []float32, r0, r1 int, x []float32, n int, avx2, pairs bool, out []float32) {
	k, rows := l.In, r1-r0
	w := buf[:rows*k]
	l.dequantize(w, r0, r1)
	var rowsKernel [4]func(w, x *float32, ldx, n int, out *float64)
	switch {
	case pairs:
		rowsKernel = kern.dotBF16
		tmp := buf[rows*k : (rows+1)*k]
		for r := range rows {
			copy(tmp, w[r*k:(r+1)*k])
			bf16Pairs(w[r*k:(r+1)*k], tmp)
		}
	case l.Type == gguf.TypeF16 && !avx2:
		rowsKernel = kern.dotF16
	}
	// Rows shorter than a vector block are all the products' tail: float32
	// products summed in float64 in order (dotRowsBy4's past k&^63, dotF16's
	// past the AVX2 build's k&^31), here four rows' chains at a time.
	if rowsKernel[0] != nil && k < 64 || l.Type == gguf.TypeF16 && avx2 && k < 32 {
		for t := range n {
			xt, o := x[t*k:(t+1)*k], out[t*l.Out+r0:]
			r := 0
			for ; r+4 <= rows; r += 4 {
				w0, w1, w2, w3 := w[r*k:(r+1)*k], w[(r+1)*k:(r+2)*k], w[(r+2)*k:(r+3)*k], w[(r+3)*k:(r+4)*k]
				var s0, s1, s2, s3 float64
				for e, v := range xt {
					s0 += float64(w0[e] * v)
					s1 += float64(w1[e] * v)
					s2 += float64(w2[e] * v)
					s3 += float64(w3[e] * v)
				}
				o[r], o[r+1], o[r+2], o[r+3] = float32(s0), float32(s1), float32(s2), float32(s3)
			}
			for ; r < rows; r++ {
				var s float64
				for e, v := range w[r*k : (r+1)*k] {
					s += float64(v * xt[e])
				}
				o[r] = float32(s)
			}
		}
		return
	}
	if rowsKernel[0] == nil {
		dot := dotF16
		if l.Type == gguf.TypeBF16 {
			dot = dotBF16
		}
		for t := range n {
			xt := x[t*k : (t+1)*k]
			for r := range rows {
				out[t*l.Out+r0+r] = dot(w[r*k:(r+1)*k], xt, avx2)
			}
		}
		return
	}
	dotRowsBy4(rowsKernel, func(r int) []float32 { return w[r*k : (r+1)*k] }, rows, x, n, func(v float32) float32 { return v }, out[r0:], l.Out)
}

// dotRowsBy4 sets out[t·ldo + r] to the dot product of weight row wrow(r),
// r in [0, rows), with activation row t of x (n rows of k = len(wrow(r))
// elements), 4 activation rows to a kernel call: kernel[m-1] sums the
// first k&^63 elements of a weight row with m activation rows, into
// float64s; the elements past them are added one float32 product (of
// their values as f32 gives them) at a time, in float64.
func dotRowsBy4[T float32 | uint16](kernel [4]func(w, x *T, ldx, n int, out *float64), wrow func(r int) []T, rows int, x []T, n int, f32 func(T) float32, out []float32, ldo int) {
	if rows == 0 {
		return
	}
	k := len(wrow(0))
	np := k &^ 63
	sums := new([4]float64) // one allocation: a kernel called through a func value lets it escape
	for t0 := 0; t0 < n; t0 += 4 {
		m := min(4, n-t0)
		for r := range rows {
			wr := wrow(r)
			*sums = [4]float64{}
			if np > 0 {
				kernel[m-1](&wr[0], &x[t0*k], k, np, &sums[0])
			}
			for i := range m {
				xt := x[(t0+i)*k : (t0+i+1)*k]
				for e := np; e < k; e++ {
					sums[i] += float64(f32(wr[e]) * f32(xt[e]))
				}
				out[(t0+i)*ldo+r] = float32(sums[i])
			}
		}
	}
}

// bf16Pairs sets dst to v's elements in the order of the AVX-512 build's
// BF16 kernels: of each 64, the odd elements of the first 32, then their
// even ones, then the same of the second 32; the elements past the last
// 64 in order.
func bf16Pairs(dst, v []float32) {
	np := len(v) &^ 63
	for i := 0; i < np; i += 32 {
		for m := range 16 {
			dst[i+m], dst[i+16+m] = v[i+2*m+1], v[i+2*m]
		}
	}
	copy(dst[np:], v[np:])
}

// bf16PairsUsed says whether ForwardShared hands BF16 products their
// activations in bf16Pairs's order: in the AVX-512 build's order with its
// kernels (kern.dotBF16), on a CPU without VDPBF16PS.
func (c *Context) bf16PairsUsed() bool {
	return c.LlamaCPP && !c.GGMLAVX2 && !c.bf16RawUsed() && kern.dotBF16[0] != nil
}

// bf16RawUsed says whether ForwardShared hands BF16 products their
// activations as bf16 values (panelBF16Raw): in the AVX-512 build's order
// on a CPU with VDPBF16PS (kern.dotBF16Raw).
func (c *Context) bf16RawUsed() bool {
	return c.LlamaCPP && !c.GGMLAVX2 && kern.dotBF16Raw[0] != nil
}

// panelBF16Raw is panelHalf's AVX-512 order for BF16 weights with the
// instruction ggml's kernel uses, VDPBF16PS (kern.dotBF16Raw): the file's
// rows and the activations' bf16 values (x, n rows) go to it as they are,
// nothing decoded, 4 activation rows at a time; the elements past the
// last 64 are added in float64 as in dotBF16Generic.
func (l *Linear) panelBF16Raw(r0, r1 int, x []uint16, n int, out []float32) {
	wrow := func(r int) []uint16 {
		return unsafe.Slice((*uint16)(unsafe.Pointer(&l.Data[(r0+r)*l.RowBytes])), l.In)
	}
	dotRowsBy4(kern.dotBF16Raw, wrow, r1-r0, x, n, quant.BF16ToF32, out[r0:], l.Out)
}

// dotBF16 is ggml_vec_dot_bf16 of bf16 values held as float32 in order:
// the AVX2 build's with its kernel (kern.dotBF16x8), the AVX-512 build's
// with kern.dotBF16Seq, else dotBF16Generic; the elements past the
// kernel's steps added in float64 as there.
func dotBF16(w, x []float32, avx2 bool) float32 {
	var sum float64
	np := len(w) &^ 31
	switch {
	case avx2 && kern.dotBF16x8 != nil && np > 0:
		sum = float64(kern.dotBF16x8(&w[0], &x[0], np))
	case !avx2 && kern.dotBF16Seq != nil && len(w) >= 64:
		np = len(w) &^ 63
		sum = kern.dotBF16Seq(&w[0], &x[0], np)
	default:
		return dotBF16Generic(w, x, avx2)
	}
	for e := np; e < len(w); e++ {
		sum += float64(w[e] * x[e])
	}
	return float32(sum)
}

// dotBF16Generic is ggml_vec_dot_bf16 in plain Go. The AVX-512 build
// (with AVX512-BF16, as llama.cpp's zen4 and sapphirerapids variants are)
// takes 64 elements a step in two accumulators of 16 lanes,
// _mm512_dpbf16_ps on elements [0, 32) and [32, 64): lane m adds the
// product of the pair's second element, then of its first, each an FMA
// with subnormal inputs read as zero and a subnormal result flushed to
// zero (Intel's definition of VDPBF16PS, and libggml's bits on an AMD
// EPYC of family 26, Zen 5; not checked on an Intel CPU nor on Zen 4);
// each accumulator is reduced as _mm512_reduce_add_ps (reduce16)
// and the two added in float64. The AVX2 build takes 32 elements a step in
// four accumulators of 8 lanes, one FMA per element (GCC contracts the
// kernel's multiply and add), folds them as (0+2) + (1+3), and sums the
// 8 lanes as i + (i+4), then (0+2) + (1+3). Both add the elements past
// their last step in float64.
func dotBF16Generic(w, x []float32, avx2 bool) float32 {
	n, e := len(w), 0
	var sum float64
	if avx2 {
		var c [4][8]float32
		for ; e+32 <= n; e += 32 {
			for j := range 4 {
				for m := range 8 {
					i := e + 8*j + m
					c[j][m] = fma32(w[i], x[i], c[j][m])
				}
			}
		}
		var g [4]float32
		for m := range 4 {
			g[m] = ((c[0][m+4] + c[2][m+4]) + (c[1][m+4] + c[3][m+4])) + ((c[0][m] + c[2][m]) + (c[1][m] + c[3][m]))
		}
		sum = float64((g[0] + g[2]) + (g[1] + g[3]))
	} else {
		var c [2][16]float32
		for ; e+64 <= n; e += 64 {
			for h := range 2 {
				for m := range 16 {
					i := e + 32*h + 2*m
					c[h][m] = flushTiny(fma32(flushTiny(w[i+1]), flushTiny(x[i+1]), c[h][m]))
					c[h][m] = flushTiny(fma32(flushTiny(w[i]), flushTiny(x[i]), c[h][m]))
				}
			}
		}
		sum = float64(reduce16(&c[0])) + float64(reduce16(&c[1]))
	}
	for ; e < n; e++ {
		sum += float64(w[e] * x[e])
	}
	return float32(sum)
}

// flushTiny is v, or zero of its sign when v is subnormal (MXCSR's FTZ on a
// result, DAZ on an input).
func flushTiny(v float32) float32 {
	if b := math.Float32bits(v); b&0x7f800000 == 0 {
		return math.Float32frombits(b & 0x80000000)
	}
	return v
}

// laneSums256 is the 8 int32 lanes of ggml's AVX2 dot-product kernels over
// one block of 256 (VPMADDUBSW then VPMADDWD leave each 4 consecutive
// products in one lane): lane m sums w[e]·x[e] over the e with
// (e mod 32)/4 = m.
func laneSums256[W uint8 | int8 | int16 | int32, X int8 | int16 | int32](w []W, x []X) (s [8]int32) {
	w, x = w[:256], x[:256]
	for c := 0; c < 256; c += 32 {
		for m := range 8 {
			e := c + 4*m
			s[m] += int32(w[e])*int32(x[e]) + int32(w[e+1])*int32(x[e+1]) +
				int32(w[e+2])*int32(x[e+2]) + int32(w[e+3])*int32(x[e+3])
		}
	}
	return s
}

// laneSums writes laneSums256 of each block of 256 of the weights w and the
// activations x to s (len(s) blocks): the integer lanes of the vec_dot
// orders, whose weights (a group's integer scale times the code) fit 16
// bits. By kern.laneSums16 where the level has it (every int16·int8 sum is
// exact in its int32 lanes: at most 32·2¹⁵·2⁷ a lane).
func laneSums(s [][8]int32, w []int16, x []int8) {
	n := len(s)
	if n == 0 {
		return
	}
	_, _ = w[256*n-1], x[256*n-1]
	if k := kern.laneSums16; k != nil {
		k(&w[0], &x[0], n, &s[0])
		return
	}
	for b := range s {
		s[b] = laneSums256(w[256*b:], x[256*b:])
	}
}

// panelLanes is panelInt8 for the types ggml multiplies in the 8 float
// lanes of its AVX2 vec_dot kernels with Q8_0 activations, unrepacked:
// Q8_0 and Q5_0 (ggml_vec_dot_q8_0_q8_0, _q5_0_q8_0, one scale per block
// of 32), NVFP4 (ggml_vec_dot_nvfp4_q8_0, a scale per 16) and Q2_0
// (ggml_vec_dot_q2_0_q8_0, a scale per 64, its blocks of 64 in two sets of
// lanes by parity, added lane by lane before hsum8). Per output,
// eight float32 lanes from 0; for each block of 32 in order, lane s (0..7)
// becomes fma(dw·dx, float32(p), lane) with p the exact sum of the
// products of elements 4s..4s+3 (DecodeInt8's integers minus the offset
// times the activations' integers), dx the activation block's scale and
// dw the weight scale of the lane's group (of 32, or of 16: lanes 0-3 and
// 4-7), their product rounded to float32; at the end the lanes are summed
// as hsum_float_8 does (hsum8). NVFP4's integers are the E2M1 values
// doubled and its scales the UE4M3 bytes' values halved (quant's decoding,
// equal to ggml's table ggml_table_f32_ue4m3 for all 256 bytes, subnormals
// included); ggml's NVFP4 kernel is its AVX2 one in both builds. With the
// VNNI kernels (kern.lanes) when the records hold the sums of 4
// (qacts.sums4).
func (l *Linear) panelLanes(buf []float32, r0, r1 int, a *qacts, out []float32) {
	f, _ := l.int8Able()
	k, rows := l.In, r1-r0
	ng := k / f.Group
	rowsQ, panelQ, rs, rm, ps, pm := l.decodeInt8(buf, r0, r1, f)
	// IQ4_NL and MXFP4 (not repacked: panelRepackable) sum the even and the
	// odd blocks of 32 in two sets of lanes, and an odd last block after
	// them (lastBlock); Q2_0 its even and odd blocks of 64.
	pairs := l.Type == gguf.TypeIQ4_NL || l.Type == gguf.TypeMXFP4
	pairs64 := l.Type == gguf.TypeQ2_0
	kl, nbk := kern.lanes[0], k/32
	switch {
	case f.Group == 16:
		kl = kern.lanes[1]
	case pairs64:
		kl = kern.q2
	case pairs:
		kl, nbk = kern.pairs, k/32&^1
	}
	if kl != nil && a.sums4 {
		l.panelKernel(kl, nbk, rowsQ, panelQ, rs, ps, r0, r1, a, f, out)
		if pairs {
			l.lastBlock(rowsQ, rs, r0, r1, a, f, out)
		}
		l.addMinSums(r0, r1, a, out, rm, pm)
		return
	}
	per := 32 / f.Group // groups per block of 32
	for t := 0; t < a.n; t++ {
		rec := a.buf[t*a.rec : (t+1)*a.rec]
		d := unsafe.Slice((*float32)(unsafe.Pointer(&rec[a.dOff])), k/32)
		o := out[t*l.Out+r0 : t*l.Out+r1]
		for r := range rows {
			q, sc := rowsQ[r*k:(r+1)*k], rs[r*ng:(r+1)*ng]
			var lanes [2][8]float32
			nb := k / 32
			if pairs {
				nb &^= 1
			}
			for b := range nb {
				set := 0
				switch {
				case pairs:
					set = b % 2
				case pairs64:
					set = b / 2 % 2
				}
				var p [8]int32
				lanes32(&p, q[32*b:32*b+32], rec[32*b:32*b+32], f.Offset)
				for s := range 8 {
					lanes[set][s] = fma32(sc[per*b+s*per/8]*d[b], float32(p[s]), lanes[set][s])
				}
			}
			for s := range 8 {
				lanes[0][s] += lanes[1][s]
			}
			o[r] = hsum8(&lanes[0])
		}
	}
	if pairs {
		l.lastBlock(rowsQ, rs, r0, r1, a, f, out)
	}
	l.addMinSums(r0, r1, a, out, rm, pm)
}

// lastBlock adds to outputs [r0, r1) of every activation row the last
// block of 32 of rows of an odd count of them, as ggml's IQ4_NL and MXFP4
// kernels do after summing their two sets of lanes (a scalar loop):
// fma(dx·dw, float32(p), out) with p the block's exact integer dot product.
func (l *Linear) lastBlock(rowsQ []byte, rs []float32, r0, r1 int, a *qacts, f quant.Int8Format, out []float32) {
	k, ng := l.In, l.In/f.Group
	if k/32%2 == 0 {
		return
	}
	b := k/32 - 1
	for t := 0; t < a.n; t++ {
		rec := a.buf[t*a.rec : (t+1)*a.rec]
		d := unsafe.Slice((*float32)(unsafe.Pointer(&rec[a.dOff])), k/32)
		o := out[t*l.Out+r0 : t*l.Out+r1]
		for r := range r1 - r0 {
			o[r] = fma32(d[b]*rs[r*ng+b], float32(lanePair(rowsQ[r*k:(r+1)*k], rec, 32*b, 32, f.Offset)), o[r])
		}
	}
}

// panelKernel computes outputs [r0, r1) of every activation row with kl, a
// kernel of lanesFunc's signature, over the first nb blocks of 32 of the
// rows decodeInt8 decoded (rowsQ, their scales rs), packed into the
// panel's panelQ and ps.
func (l *Linear) panelKernel(kl lanesFunc, nb int, rowsQ []byte, panelQ []uint32, rs, ps []float32, r0, r1 int, a *qacts, f quant.Int8Format, out []float32) {
	k, rows := l.In, r1-r0
	packCodes(panelQ, unsafe.Slice((*uint32)(unsafe.Pointer(&rowsQ[0])), rows*k/4), k/4, rows, kern.flipBias)
	pack32(ps, rs, k/f.Group, rows)
	var c [32]float32
	for t := 0; t < a.n; t++ {
		if rows == 32 { // a whole panel: straight into out
			kl(&a.buf[t*a.rec], &panelQ[0], &ps[0], nb, -f.Offset, &out[t*l.Out+r0], a.dOff, a.xs4Off)
			continue
		}
		kl(&a.buf[t*a.rec], &panelQ[0], &ps[0], nb, -f.Offset, &c[0], a.dOff, a.xs4Off)
		copy(out[t*l.Out+r0:t*l.Out+r1], c[:rows])
	}
}

// panelQ1_0 is panelInt8 for Q1_0 weights in llama.cpp's order
// (ggml_vec_dot_q1_0_q8_0, the same bits in both builds): per output eight
// float32 lanes from 0; per block of 128, eight lanes of its own from 0,
// lane s of each of its four blocks of 32 becoming fma(dx, float32(p), ·)
// with p the exact sum of the products of elements 4s..4s+3 (the signs
// times the activations' integers) and dx the activation block's scale;
// then each output lane fma(d, block lane, lane) with d the block's f16
// scale; at the end hsum8.
func (l *Linear) panelQ1_0(buf []float32, r0, r1 int, a *qacts, out []float32) {
	f, _ := l.int8Able()
	k, rows := l.In, r1-r0
	rowsQ, panelQ, rs, _, ps, _ := l.decodeInt8(buf, r0, r1, f)
	if kern.q1 != nil && a.sums4 {
		l.panelKernel(kern.q1, k/32, rowsQ, panelQ, rs, ps, r0, r1, a, f, out)
		return
	}
	for t := 0; t < a.n; t++ {
		rec := a.buf[t*a.rec : (t+1)*a.rec]
		dx := unsafe.Slice((*float32)(unsafe.Pointer(&rec[a.dOff])), k/32)
		o := out[t*l.Out+r0 : t*l.Out+r1]
		for r := range rows {
			q, sc := rowsQ[r*k:(r+1)*k], rs[r*(k/32):(r+1)*(k/32)]
			var acc [8]float32
			for b := 0; b < k/32; b += 4 {
				var blk [8]float32
				for j := b; j < b+4; j++ {
					var p [8]int32
					lanes32(&p, q[32*j:32*j+32], rec[32*j:32*j+32], f.Offset)
					for s := range 8 {
						blk[s] = fma32(dx[j], float32(p[s]), blk[s])
					}
				}
				for s := range 8 {
					acc[s] = fma32(sc[b], blk[s], acc[s])
				}
			}
			o[r] = hsum8(&acc)
		}
	}
}

// panelRepackable is the panel of the types ggml repacks on x86 when the
// row count is a multiple of 8 (Q4_0, IQ4_NL, MXFP4): panelInt8's order
// then (its GEMM's and GEMV's), else their vec_dot kernels' lanes: Q4_0's
// those of panelLanes, IQ4_NL's and MXFP4's two sets of them, for the even
// and the odd blocks of 32, added lane by lane before hsum8.
func (l *Linear) panelRepackable(buf []float32, r0, r1 int, a *qacts, out []float32) {
	f, _ := l.int8Able()
	if l.Out%8 == 0 {
		l.panelInt8(buf, r0, r1, a, f, false, out)
		return
	}
	l.panelLanes(buf, r0, r1, a, out)
}

// lanes32 writes to p, for each s of 0..7, the exact Σ (q_e - off)·x_e
// over elements 4s..4s+3 of a block of 32 weight integers q and
// activation integers x (a record's bytes, int8).
func lanes32(p *[8]int32, q, x []byte, off int) {
	q, x = q[:32], x[:32]
	o := int32(off)
	for s := range 8 {
		a, b := q[4*s:4*s+4], x[4*s:4*s+4]
		p[s] = (int32(a[0])-o)*int32(int8(b[0])) + (int32(a[1])-o)*int32(int8(b[1])) +
			(int32(a[2])-o)*int32(int8(b[2])) + (int32(a[3])-o)*int32(int8(b[3]))
	}
}

// lanePair is the exact Σ (q_e - off)·x_e over the n elements from e0 of
// a weight row's integers q and an activation record's.
func lanePair(q, rec []byte, e0, n, off int) (p int32) {
	for e := e0; e < e0+n; e++ {
		p += (int32(q[e]) - int32(off)) * int32(int8(rec[e]))
	}
	return p
}

// addMinSums adds, for the types with a minimum per block (Q4_1, Q5_1:
// ggml_vec_dot_q4_1_q8_1 and _q5_1_q8_1), summs = Σ m·s over the blocks
// in order to each output of panelLanes (m the block's f16 minimum, s the
// Q8_1 activations' f16 d·Σq): output = hsum8(lanes) + summs. pm is
// scratch for the panel of rm (32·nb floats).
func (l *Linear) addMinSums(r0, r1 int, a *qacts, out, rm, pm []float32) {
	if f, _ := l.int8Able(); !f.HasMin {
		return
	}
	nb, rows := l.In/32, r1-r0
	if kern.minSums != nil {
		pack32(pm, rm[:rows*nb], nb, rows)
	} else {
		pm = nil
	}
	var c [32]float32
	for t := 0; t < a.n; t++ {
		s81 := unsafe.Slice((*float32)(unsafe.Pointer(&a.buf[t*a.rec+a.s81Off])), nb)
		o := out[t*l.Out+r0 : t*l.Out+r1]
		if pm != nil {
			kern.minSums(&pm[0], &s81[0], nb, &c[0])
		} else {
			for r := range o {
				c[r] = 0
				for b, m := range rm[r*nb : (r+1)*nb] {
					c[r] = fma32(m, s81[b], c[r])
				}
			}
		}
		for r := range o {
			o[r] += c[r]
		}
	}
}

// hsum8 is hsum_float_8: lanes i and i+4, then 0+2 and 1+3, then the two.
func hsum8(v *[8]float32) float32 {
	t0, t1, t2, t3 := v[0]+v[4], v[1]+v[5], v[2]+v[6], v[3]+v[7]
	return (t0 + t2) + (t1 + t3)
}
