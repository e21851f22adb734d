package quant

import (
	"golang.org/x/sys/cpu"

	"ppl.dev/gguf"
)

// int8Blocks makes a fastInt8 entry of a low-bit type's integer decoder,
// n whole blocks to q and one scale per group.
func int8Blocks(lb *lowbit, k func(w, q *byte, s *float32, n int)) func(w, q []byte, s, _ []float32) {
	return func(w, q []byte, s, _ []float32) {
		n := len(q) / lb.bs
		if n == 0 {
			return
		}
		_, _ = w[n*lb.ts-1], s[n*lb.bs/lb.group-1]
		k(&w[0], &q[0], &s[0], n)
	}
}

// archInit adds the AVX2 level (the types through codes, F16, BF16, the
// low-bit kernels) and the AVX512 level (the same, with the fused AVX-512
// kernels in their place where they are faster: Q4_K's and Q6_K's integer
// decoding goes through codes there too, 13.1 and 14.6 weights/ns against
// 12.2 and 7.1 for the AVX-512 decoders it replaced, one 4096-weight row).
func archInit() {
	if !(cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C) {
		return
	}
	maxLevel = AVX2
	codeKernels(AVX2)
	lowbitKernels(AVX2)
	levelDeq[AVX2][gguf.TypeF16] = halves(deqF16AVX2, deqF16)
	levelDeq[AVX2][gguf.TypeBF16] = halves(deqBF16AVX2, deqBF16)
	if !(cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512DQ && cpu.X86.HasBMI2) {
		return
	}
	maxLevel = AVX512
	codeKernels(AVX512)
	lowbitKernels(AVX512)
	deq, i8 := &levelDeq[AVX512], &levelInt8[AVX512]
	deq[gguf.TypeF16] = halves(deqF16AVX512, deqF16)
	deq[gguf.TypeBF16] = halves(deqBF16AVX512, deqBF16)
	deq[gguf.TypeQ8_0] = blocks(32, 34, deqQ8_0AVX512)
	deq[gguf.TypeQ4_0] = blocks(32, 18, deqQ4_0AVX512)
	deq[gguf.TypeQ5_0] = blocks(32, 22, deqQ5_0AVX512)
	deq[gguf.TypeQ5_1] = blocks(32, 24, deqQ5_1AVX512)
	deq[gguf.TypeQ4_K] = blocks(256, 144, deqQ4_KAVX512)
	deq[gguf.TypeQ6_K] = blocks(256, 210, deqQ6_KAVX512)

	i8[gguf.TypeQ8_0] = legacyInt8(34, i8Q8_0AVX512)
	i8[gguf.TypeQ4_0] = legacyInt8(18, i8Q4_0AVX512)
	i8[gguf.TypeQ5_0] = legacyInt8(22, i8Q5_0AVX512)
	i8[gguf.TypeQ5_1] = legacyInt8Min(24, i8Q5_1AVX512)
}

//go:noescape
func i8Q8_0AVX512(w *byte, q *byte, s *float32, n int)

//go:noescape
func i8Q4_0AVX512(w *byte, q *byte, s *float32, n int)

//go:noescape
func i8Q5_0AVX512(w *byte, q *byte, s *float32, n int)

//go:noescape
func i8Q5_1AVX512(w *byte, q *byte, s *float32, m *float32, n int)

// The kernels of fast_amd64.s; n is a count of blocks (of 16 values for F16
// and BF16).

//go:noescape
func deqF16AVX2(src *byte, dst *float32, n int)

//go:noescape
func deqBF16AVX2(src *byte, dst *float32, n int)

//go:noescape
func deqF16AVX512(src *byte, dst *float32, n int)

//go:noescape
func deqBF16AVX512(src *byte, dst *float32, n int)

//go:noescape
func deqQ8_0AVX512(src *byte, dst *float32, n int)

//go:noescape
func deqQ4_0AVX512(src *byte, dst *float32, n int)

//go:noescape
func deqQ5_0AVX512(src *byte, dst *float32, n int)

//go:noescape
func deqQ5_1AVX512(src *byte, dst *float32, n int)

//go:noescape
func deqQ4_KAVX512(src *byte, dst *float32, n int)

//go:noescape
func deqQ6_KAVX512(src *byte, dst *float32, n int)
