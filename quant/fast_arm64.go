package quant

import "ppl.dev/gguf"

// archInit adds the NEON level (Advanced SIMD, which every arm64 CPU has):
// every type of codeTypes through codes (fast_codes.go: their integer
// decoders, the int8 modes', and their dequantizers), then the fused
// dequantizers of F16, BF16, Q8_0, Q4_K and Q6_K, the types the fp32 mode
// decodes most of a dense model from, and of Q5_0 and Q5_1 (a mixture's
// experts where a K-quant does not fit their width) in their place. Q4_K's
// and Q6_K's scales are the reference's scalar products (d·sc, dmin·m),
// their weights the vector kernels' (fast_arm64.s).
func archInit() {
	maxLevel = NEON
	codeKernels(NEON)
	deq := &levelDeq[NEON]
	deq[gguf.TypeF16] = halves(deqF16NEON, deqF16)
	deq[gguf.TypeBF16] = halves(deqBF16NEON, deqBF16)
	deq[gguf.TypeQ8_0] = blocks(32, 34, deqQ8_0NEON)
	deq[gguf.TypeQ4_K] = deqQ4_KNEON
	deq[gguf.TypeQ6_K] = deqQ6_KNEON
	deq[gguf.TypeQ5_0] = blocks(32, 22, deqQ5_0NEON)
	deq[gguf.TypeQ5_1] = blocks(32, 24, deqQ5_1NEON)
	for t, lb := range map[gguf.Type]*lowbit{
		gguf.TypeIQ2_XXS: lbIQ2_XXS, gguf.TypeIQ2_XS: lbIQ2_XS, gguf.TypeIQ2_S: lbIQ2_S,
		gguf.TypeIQ3_XXS: lbIQ3_XXS, gguf.TypeIQ3_S: lbIQ3_S, gguf.TypeIQ1_S: lbIQ1_S,
		gguf.TypeIQ1_M: lbIQ1_M, gguf.TypeTQ1_0: lbTQ1_0, gguf.TypeNVFP4: lbNVFP4,
		gguf.TypeQ1_0: lbQ1_0, gguf.TypeQ2_0: lbQ2_0,
	} {
		deq[t] = lowbitDeq(lb)
	}
}

// lowbitDeq is the NEON dequantizer of a low-bit type without a code
// kernel: its reference decoder (lowbit.go) to codes and scales, then
// affine's S·(q − Offset), the reference's one product.
func lowbitDeq(lb *lowbit) func([]byte, []float32) {
	return func(src []byte, dst []float32) {
		var q [256]byte
		var s [16]float32
		for len(dst) >= lb.bs {
			lb.dec(src[:lb.ts], q[:lb.bs], s[:lb.bs/lb.group])
			affine(&q[0], &s[0], nil, &dst[0], lb.bs/lb.group, lb.group, lb.off)
			src, dst = src[lb.ts:], dst[lb.bs:]
		}
	}
}

// deqQ4_KNEON is deqQ4_K: per super-block the scales d·sc and minima
// dmin·m of its 8 groups, then q4kNEON's 256 weights.
func deqQ4_KNEON(src []byte, dst []float32) {
	var dm [16]float32
	for len(dst) >= 256 {
		b := src[:144]
		d, dmin := f16(b), f16(b[2:])
		for j := range 8 {
			sc, m := scaleMinK4(j, b[4:16])
			dm[2*j], dm[2*j+1] = d*float32(sc), float32(dmin*float32(m))
		}
		q4kNEON(&b[16], &dm, &dst[0])
		src, dst = src[144:], dst[256:]
	}
}

// deqQ6_KNEON is deqQ6_K: per super-block the scales d·sc of its 16
// groups, then q6kNEON's 256 weights.
func deqQ6_KNEON(src []byte, dst []float32) {
	var ds [16]float32
	for len(dst) >= 256 {
		b := src[:210]
		d := f16(b[208:])
		for i, s := range b[192:208] {
			ds[i] = d * float32(int8(s))
		}
		q6kNEON(&b[0], &ds, &dst[0])
		src, dst = src[210:], dst[256:]
	}
}

// The kernels of fast_arm64.s; n is a count of blocks (of 16 values for F16
// and BF16).

//go:noescape
func deqF16NEON(src *byte, dst *float32, n int)

//go:noescape
func deqBF16NEON(src *byte, dst *float32, n int)

//go:noescape
func deqQ8_0NEON(src *byte, dst *float32, n int)

//go:noescape
func q4kNEON(qs *byte, dm *[16]float32, dst *float32)

//go:noescape
func q6kNEON(b *byte, ds *[16]float32, dst *float32)

//go:noescape
func deqQ5_0NEON(src *byte, dst *float32, n int)

//go:noescape
func deqQ5_1NEON(src *byte, dst *float32, n int)
