// laneSums's kernels (ggml.go): per block of 256 int16 weights w and int8
// activations x, lane m of the block's [8]int32 is the sum of w[e]·x[e]
// over the e with (e mod 32)/4 = m. VPMADDWD leaves the products of
// elements 2j and 2j+1 in one int32; those of the block's eight chunks of
// 32 are added lane by lane, then each two adjacent pairs: exact integer
// sums in any order.

#include "textflag.h"

// CHUNK512 adds the pairs of chunk c (at byte offsets 32c of x, 64c of w)
// to acc.
#define CHUNK512(xo, wo, acc) \
	VPMOVSXBW xo(DI), Z2; \
	VPMADDWD wo(SI), Z2, Z2; \
	VPADDD Z2, acc, acc

// func laneSums16AVX512(w *int16, x *int8, n int, s *[8]int32)
TEXT ·laneSums16AVX512(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ s+24(FP), DX

loop:
	// Lane j of Z0 (even chunks) and Z1 (odd chunks): pair 2j, 2j+1.
	VPMOVSXBW (DI), Z2
	VPMADDWD (SI), Z2, Z0
	VPMOVSXBW 32(DI), Z2
	VPMADDWD 64(SI), Z2, Z1
	CHUNK512(64, 128, Z0)
	CHUNK512(96, 192, Z1)
	CHUNK512(128, 256, Z0)
	CHUNK512(160, 320, Z1)
	CHUNK512(192, 384, Z0)
	CHUNK512(224, 448, Z1)
	VPADDD Z1, Z0, Z0

	// Lane m: pairs 2m and 2m+1, the low dword of qword m after the add.
	VPSRLQ  $32, Z0, Z1
	VPADDD  Z1, Z0, Z0
	VPMOVQD Z0, Y0
	VMOVDQU Y0, (DX)
	ADDQ    $512, SI
	ADDQ    $256, DI
	ADDQ    $32, DX
	DECQ    CX
	JNZ     loop
	VZEROUPPER
	RET

// CHUNK256 adds the pairs of chunk c's first 16 (at byte offsets 32c of x,
// 64c of w) to Y0 and of its last 16 to Y1.
#define CHUNK256(xo, wo) \
	VPMOVSXBW xo(DI), Y2; \
	VPMADDWD wo(SI), Y2, Y2; \
	VPADDD Y2, Y0, Y0; \
	VPMOVSXBW 16+xo(DI), Y3; \
	VPMADDWD 32+wo(SI), Y3, Y3; \
	VPADDD Y3, Y1, Y1

// func laneSums16AVX2(w *int16, x *int8, n int, s *[8]int32)
TEXT ·laneSums16AVX2(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ s+24(FP), DX

loop:
	// Lanes 0-3 of Y0 the pairs of each chunk's first 16 (the block's
	// lanes 0-3), of Y1 its last 16 (lanes 4-7).
	VPMOVSXBW (DI), Y2
	VPMADDWD (SI), Y2, Y0
	VPMOVSXBW 16(DI), Y3
	VPMADDWD 32(SI), Y3, Y1
	CHUNK256(32, 64)
	CHUNK256(64, 128)
	CHUNK256(96, 192)
	CHUNK256(128, 256)
	CHUNK256(160, 320)
	CHUNK256(192, 384)
	CHUNK256(224, 448)

	// [m0 m1 m4 m5 | m2 m3 m6 m7], then its qwords 0, 2, 1, 3.
	VPHADDD Y1, Y0, Y0
	VPERMQ  $0xD8, Y0, Y0
	VMOVDQU Y0, (DX)
	ADDQ    $512, SI
	ADDQ    $256, DI
	ADDQ    $32, DX
	DECQ    CX
	JNZ     loop
	VZEROUPPER
	RET
