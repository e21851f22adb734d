package nn

// archInit adds the NEON level, on Advanced SIMD (which every arm64 CPU
// has): gemmGeneric's tiles, exp32 four lanes at a time and the Mamba-2
// scan's rows and KLD's sums, for the fp32 mode's products, attention,
// SwiGLU, log-softmax and selective scan and the KL divergence of every
// mode; every other kernel is the plain Go one.
func archInit() {
	neon := generic
	neon.level = NEON
	neon.exps = exp32sNEON
	neon.ssmF32 = ssmF32NEON
	neon.kld = kldNEON
	neon.gemm = [2][]gemmFunc{
		{gemmF32x16m1NEON, gemmF32x16m2NEON, gemmF32x16m3NEON, gemmF32x16m4NEON},
		{gemmF32x32m1NEON, gemmF32x32m2NEON},
	}
	neon.gemmAcc = [2][]gemmFunc{
		{gemmAccF32x16m1NEON, gemmAccF32x16m2NEON, gemmAccF32x16m3NEON, gemmAccF32x16m4NEON},
		{gemmAccF32x32m1NEON, gemmAccF32x32m2NEON},
	}
	levelKernels[NEON] = &neon
	maxLevel = NEON
}
