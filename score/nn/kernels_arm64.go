package nn

import "golang.org/x/sys/cpu"

// archInit adds the NEON level, on Advanced SIMD (which every arm64 CPU
// has): gemmGeneric's tiles, exp32 four lanes at a time and the Mamba-2
// scan's rows and KLD's sums, for the fp32 mode's products, attention,
// SwiGLU, log-softmax and selective scan and the KL divergence of every
// mode, addMinSums's chains, MaxArg's maximum, the int8 modes' float dot
// products (ggml's lanes, for F32, F16 and BF16 weights) and e^x (the
// AVX-512 build's ggml_v_expf, for their SwiGLU and routers' softmax)
// and activation quantizers (Q8_0's and Q8_K's blocks), and the panels'
// 16 × 16 transposes; on a CPU with the dot-product extension
// (FEAT_DotProd), the int8 modes' integer products of the lane-order,
// tiled, int8 and repacked K-quant panels too (gen/arm64int.go). Every
// other kernel is the plain Go one.
func archInit() {
	neon := generic
	neon.level = NEON
	neon.exps = exp32sNEON
	neon.ggmlExpf = ggmlExpfNEON
	neon.quantQ80, neon.quantQ8K = quantQ80NEON, quantQ8KNEON
	neon.ssmF32 = ssmF32NEON
	neon.kld = kldNEON
	neon.minSums = minSumsNEON
	neon.maxFinite = maxFiniteNEON
	neon.dotF32, neon.dotF32x8 = dotF32NEON, dotF32x8NEON
	neon.dotBF16Seq, neon.dotBF16x8 = dotBF16SeqNEON, dotBF16x8NEON
	neon.transpose16 = transpose16NEON
	neon.laneSums16 = laneSums16NEON // SMLAL: every arm64 CPU
	neon.deltaGGML, neon.deltaGGML8 = deltaGGMLNEON, deltaGGML8NEON
	neon.ssmGGML, neon.ssmGGML8 = ssmGGMLNEON, ssmGGML8NEON
	neon.gemm = [2][]gemmFunc{
		{gemmF32x16m1NEON, gemmF32x16m2NEON, gemmF32x16m3NEON, gemmF32x16m4NEON},
		{gemmF32x32m1NEON, gemmF32x32m2NEON},
	}
	neon.gemmAcc = [2][]gemmFunc{
		{gemmAccF32x16m1NEON, gemmAccF32x16m2NEON, gemmAccF32x16m3NEON, gemmAccF32x16m4NEON},
		{gemmAccF32x32m1NEON, gemmAccF32x32m2NEON},
	}
	if cpu.ARM64.HasASIMDDP {
		neon.flipBias = true
		neon.tiledAMX = [4][]tiledFunc{} // generic's take the codes unflipped: panelTiledOrder's fallback
		neon.lanes = [2]lanesFunc{lanesSlices(lanes32NEON), lanesSlices(lanes16NEON)}
		neon.tiled = [4][]tiledFunc{
			{tiledSlices(tiled32m1NEON)}, {tiledSlices(tiled32minm1NEON)},
			{tiledSlices(tiled16m1NEON)}, {tiledSlices(tiled16minm1NEON)},
		}
		neon.int8 = [4][]int8Func{
			{int8Slices(int8g32m1NEON)}, {int8Slices(int8g32minm1NEON)},
			{int8Slices(int8g16m1NEON)}, {int8Slices(int8g16minm1NEON)},
		}
		for i, k := range []kRepackedFunc{q4k2m1NEON, q4k8m1NEON, q2k8m1NEON, q2k16m1NEON} {
			k = kRepackedSlices(k)
			neon.kRepacked[i] = []kRepackedFunc{k, kRepackedRows(2, k)}
		}
	}
	levelKernels[NEON] = &neon
	maxLevel = NEON
}
