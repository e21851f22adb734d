package nn

import (
	"math"
	"unsafe"

	"ppl.dev/quant"
)

// llama.cpp's CPU arithmetic, for the ggml mode (Context.LlamaCPP: the int8
// mode's products, and the rest as ggml-cpu rounds it).
//
// The ggml mode exists to reproduce llama.cpp's numbers, and with 8-bit
// activations that means reproducing its float32 arithmetic to the bit:
// an activation one ulp away from llama.cpp's rounds to another 8-bit
// value once in a while, that step (1/127 of its block's maximum) moves
// the next product's outputs by far more than an ulp, and the difference
// spreads through every later quantization. On the tiny oracle models a
// one-ulp perturbation of the attention output alone moves the int8
// log-probs by 5e-3 per token on average (as much as the whole budget
// against llama.cpp), so "the same formula in another order" is not
// enough. These are the operations of ggml-cpu (ops.cpp, vec.h, vec.cpp,
// simd-gemm.h, the AVX-512 build that Debian's packages select on a
// machine with AVX-512) as they round:
//
//   - RMS_NORM then MUL: sum = Σ double(x·x) (float32 squares, summed in
//     order in float64), mean = float32(sum/n), scale = 1/sqrtf(mean + eps),
//     y = (x·scale)·w, each product rounded to float32.
//   - SWIGLU: silu(g)·u with silu(g) = g / (1 + ggml_v_expf(-g)) on lanes
//     of 16 (the AVX-512 polynomial, ggmlExpf), g / (1 + expf(-g)) past the
//     last multiple of 16.
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
//   - MUL_MAT with Q8_0 weights (ggml_vec_dot_q8_0_q8_0): see panelQ8_0.
//     The types ggml repacks on x86 (Q4_0, IQ4_NL, MXFP4) need nothing
//     here: one float32 FMA per block of 32 in block order, as
//     int8Generic.
//
// All of them are plain Go loops, many times slower than the vector
// kernels of the int8 mode (the attention and the Q8_0 products most), so
// they run only in the ggml mode; the int8 mode rounds the activations as
// llama.cpp does but sums in its own order. Each is checked bit for bit
// against libggml and glibc (TestGGMLArithmetic).

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

// ggmlSwiGLU is ggml_vec_swiglu_f32: out = silu(gate)·up. out may alias
// gate or up.
func ggmlSwiGLU(out, gate, up []float32) {
	check("ggmlSwiGLU gate", len(gate), len(out))
	check("ggmlSwiGLU up", len(up), len(out))
	n16 := len(out) &^ 15
	for i, g := range gate {
		var e float32
		if i < n16 {
			e = ggmlExpf(-g)
		} else {
			e = libcExpf(-g)
		}
		out[i] = g / (1 + e) * up[i]
	}
}

// ggmlRMSRow is RMS_NORM then MUL for one row.
func ggmlRMSRow(out, x, w []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	mean := float32(sum / float64(len(x)))
	scale := 1 / float32(math.Sqrt(float64(mean+eps)))
	for i, v := range x {
		out[i] = v * scale * w[i]
	}
}

// ggmlRoPE is Forward with llama.cpp's float32 cache and rotation.
func (r *RoPE) ggmlRoPE(c *Context, x []float32, n, heads int) {
	check("RoPE input", len(x), n*heads*r.HeadDim)
	h := r.Dims / 2
	base, fs := float32(r.Base), float32(r.FreqScale)
	if fs == 0 {
		fs = 1
	}
	mscale0 := float32(r.AttnFactor)
	if mscale0 == 0 {
		mscale0 = 1
	}
	thetaScale := float32(math.Pow(float64(base), float64(float32(-2)/float32(r.Dims))))
	ext := float32(r.ExtFactor)
	var low, high float32
	if ext != 0 {
		l, hh := r.CorrDims()
		low, high = float32(l), float32(hh)
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
				ms := mscale0
				if ext != 0 {
					y := (float32(i) - low) / max(0.001, high-low)
					ramp := (1 - min(1, max(0, y))) * ext
					th = th*(1-ramp) + te*ramp
					ms *= 1 + 0.1*float32(math.Log(float64(1/fs)))
				}
				cs[2*i] = libcCosf(th) * ms
				cs[2*i+1] = libcSinf(th) * ms
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
// n >= 64 query rows (ggml_compute_forward_flash_attn_ext_tiled): for
// each tile of 64 keys with a visible key, s_j = the float32 FMA chain of
// q·k_j over the head dimension in order, times Scale; masked keys -Inf;
// M' = max(M, max_j s_j), and on a new maximum the output and the sum are
// multiplied by expf(M - M'); p_j = ggml_v_expf(s_j - M') in lanes of 16,
// the sum of each 16 (reduce16) added to S in float64; the output gets the
// FMA chain of p_j·v_j over the tile's keys in order. At the end sinks as
// below, and the output times 1/S.
//
// n < 64 (ggml_compute_forward_flash_attn_ext_f16_one_chunk): q rounded to
// f16; per visible key in order s = ggml_vec_dot_f16(k, q)·Scale; a new
// maximum multiplies the F16 accumulator by ms = expf(M - s) (each element
// rounded to f16), otherwise vs = expf(s - M); the accumulator becomes
// f16(fma(v, vs, acc)) and S = S·ms + vs. At the end sinks, and the
// accumulator, in float32, times 1/S.
//
// Sinks: with s the head's sink, if s > M the output is multiplied by
// ms = expf(M - s), and S = S·ms + vs (vs = expf(s - M) otherwise).
func (a *Attention) ggmlAttention(c *Context, out, q, k, v []float32, n int) {
	hd, qs, ks := a.HeadDim, a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	group := a.Heads / a.KVHeads
	scale := float32(a.Scale)
	tiled := n >= ggmlTileQ && hd%16 == 0
	c.Parallel(n*a.Heads, func(_, lo, hi int) {
		acc := make([]float32, hd)
		qh := make([]float32, hd)
		var p [ggmlTileKV]float32
		for it := lo; it < hi; it++ {
			i, h := it/a.Heads, it%a.Heads
			g := h / group
			qi := q[i*qs+h*hd : i*qs+(h+1)*hd]
			first := 0
			if a.Window > 0 {
				first = max(0, i-a.Window+1)
			}
			M := float32(math.Inf(-1))
			var S float32
			clear(acc)
			if tiled {
				for t0 := 0; t0 <= i; t0 += ggmlTileKV {
					if t0+ggmlTileKV <= first {
						continue
					}
					tmax := float32(math.Inf(-1))
					for jj := range ggmlTileKV {
						j := t0 + jj
						if j > i || j < first {
							p[jj] = float32(math.Inf(-1))
							continue
						}
						kj := k[j*ks+g*hd : j*ks+(g+1)*hd]
						var s float32
						for d, x := range qi {
							s = fma32(x, kj[d], s)
						}
						p[jj] = s * scale
						tmax = max(tmax, p[jj])
					}
					Mn := max(M, tmax)
					if Mn > M {
						ms := libcExpf(M - Mn)
						for d := range acc {
							acc[d] *= ms
						}
						S *= ms
					}
					M = Mn
					var sum float64
					for b := 0; b < ggmlTileKV; b += 16 {
						var lane [16]float32
						for l := range 16 {
							lane[l] = ggmlExpf(p[b+l] - Mn)
							p[b+l] = lane[l]
						}
						sum += float64(reduce16(&lane))
					}
					S = float32(float64(S) + sum)
					for jj := range ggmlTileKV {
						j := t0 + jj
						if j > i || j < first {
							continue // p = 0: the FMA leaves the output as it is
						}
						vj := v[j*ks+g*hd : j*ks+(g+1)*hd]
						pj := p[jj]
						for d := range acc {
							acc[d] = fma32(pj, vj[d], acc[d])
						}
					}
				}
			} else {
				for d, x := range qi {
					qh[d] = quant.F16ToF32(quant.F32ToF16(x))
				}
				for j := first; j <= i; j++ {
					kj := k[j*ks+g*hd : j*ks+(g+1)*hd]
					s := float32(dotF16(qh, kj)) * scale
					ms, vs := float32(1), float32(1)
					if s > M {
						Mold := M
						M = s
						ms = libcExpf(Mold - M)
						for d := range acc {
							acc[d] = roundF16(acc[d] * ms)
						}
					} else {
						vs = libcExpf(s - M)
					}
					vj := v[j*ks+g*hd : j*ks+(g+1)*hd]
					for d := range acc {
						acc[d] = roundF16(fma32(vj[d], vs, acc[d]))
					}
					S = fma32(S, ms, vs)
				}
			}
			if a.Sinks != nil {
				s := a.Sinks[h]
				ms, vs := float32(1), float32(1)
				if s > M {
					ms = libcExpf(M - s)
					for d := range acc {
						acc[d] *= ms
					}
				} else {
					vs = libcExpf(s - M)
				}
				S = S*ms + vs
			}
			var inv float32
			if S != 0 {
				inv = 1 / S
			}
			o := out[i*qs+h*hd : i*qs+(h+1)*hd]
			for d := range o {
				o[d] = acc[d] * inv
			}
		}
	})
}

// roundF16 rounds x to the nearest f16 value.
func roundF16(x float32) float32 { return quant.F16ToF32(quant.F32ToF16(x)) }

// dotF16 is ggml_vec_dot_f16 on AVX-512 for f16 values held as float32:
// four accumulators of 16 lanes over each 64 elements (FMA), folded
// (0+2, 1+3, then 0+1) and reduced (reduce16) into a float64, then the
// elements past the last multiple of 64 added in float64 in order.
func dotF16(x, y []float32) float64 {
	n := len(x)
	np := n &^ 63
	var acc [4][16]float32
	for i := 0; i < np; i += 64 {
		for j := range 4 {
			for l := range 16 {
				e := i + 16*j + l
				acc[j][l] = fma32(x[e], y[e], acc[j][l])
			}
		}
	}
	var sum float64
	if np > 0 {
		for l := range 16 {
			acc[0][l] += acc[2][l]
			acc[1][l] += acc[3][l]
		}
		for l := range 16 {
			acc[0][l] += acc[1][l]
		}
		sum = float64(reduce16(&acc[0]))
	}
	for e := np; e < n; e++ {
		sum += float64(x[e] * y[e])
	}
	return sum
}

// panelQ8_0 is panelInt8 for Q8_0 weights in llama.cpp's order
// (ggml_vec_dot_q8_0_q8_0 on AVX2 and AVX-512, which multiplies Q8_0
// weights with Q8_0 activations without repacking them): per output,
// eight float32 lanes, lane j adding fma(dw·dx, Σ of the products of
// elements 4j..4j+3 of a block) over the blocks in order, then the lanes
// summed as hsum_float_8 does.
func (l *Linear) panelQ8_0(r0, r1 int, a *qacts, out []float32) {
	k := l.In
	nb := k / 32
	rows := r1 - r0
	dw := make([]float32, rows*nb)
	wq := make([]int32, rows*k)
	for r := range rows {
		row := l.Data[(r0+r)*l.RowBytes : (r0+r+1)*l.RowBytes]
		for b := range nb {
			blk := row[34*b : 34*b+34]
			dw[r*nb+b] = quant.F16ToF32(uint16(blk[0]) | uint16(blk[1])<<8)
			w := wq[r*k+32*b : r*k+32*b+32]
			for e, v := range blk[2:34] {
				w[e] = int32(int8(v))
			}
		}
	}
	qx := make([]int32, k)
	for t := 0; t < a.n; t++ {
		rec := a.buf[t*a.rec : (t+1)*a.rec]
		for e, v := range rec[:k] {
			qx[e] = int32(int8(v))
		}
		d := unsafe.Slice((*float32)(unsafe.Pointer(&rec[a.dOff])), nb)
		o := out[t*l.Out+r0 : t*l.Out+r1]
		for r := range rows {
			w := wq[r*k : (r+1)*k]
			ds := dw[r*nb : (r+1)*nb]
			var lanes [8]float32
			for b := range nb {
				s := float64(ds[b] * d[b])
				x, y := qx[32*b:32*b+32], w[32*b:32*b+32]
				for j := range 8 {
					e := 4 * j
					p := x[e]*y[e] + x[e+1]*y[e+1] + x[e+2]*y[e+2] + x[e+3]*y[e+3]
					// fma32(s, p, lane), its fast case inline (see fmaLane)
					f := s*float64(p) + float64(lanes[j])
					if u := math.Float64bits(f); u&(1<<29-1) != 1<<28 && u>>52&0x7ff >= 1023-126 {
						lanes[j] = float32(f)
					} else {
						lanes[j] = fma32(float32(s), float32(p), lanes[j])
					}
				}
			}
			o[r] = hsum8(&lanes)
		}
	}
}

// hsum8 is hsum_float_8: lanes i and i+4, then 0+2 and 1+3, then the two.
func hsum8(v *[8]float32) float32 {
	t0, t1, t2, t3 := v[0]+v[4], v[1]+v[5], v[2]+v[6], v[3]+v[7]
	return (t0 + t2) + (t1 + t3)
}
