// The recurrent layers' kernels (ssm.go, ggml_deltanet.go): the selective
// scan's ssmRowsGGMLGeneric's vector part in the AVX-512 build's lanes and
// in the AVX2 build's, ssmRowsF32Generic in vectors of 16 and 8 rows, and
// deltaRowsGGMLGeneric in both builds' lanes.

#include "textflag.h"

// ssmFold16 folds the accumulators Z0-Z3 into X0's lane 0 as ggmlReduce
// does on AVX-512: Z0+Z2, Z1+Z3, then the two; then reduce16 (the 256-bit
// halves, the 128-bit halves, lanes 0+2 and 1+3, then 0+1).
#define ssmFold16 \
	VADDPS Z2, Z0, Z0; \
	VADDPS Z3, Z1, Z1; \
	VADDPS Z1, Z0, Z0; \
	VEXTRACTF32X8 $1, Z0, Y1; \
	VADDPS Y1, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VMOVHLPS X0, X0, X1; \
	VADDPS X1, X0, X0; \
	VMOVSHDUP X0, X1; \
	VADDSS X1, X0, X0

// ssmStep16 is one vector of 16 lanes at byte offset off: t = b·xd, v =
// fma(s, dA, t), s = v, acc = fma(v, c, acc).
#define ssmStep16(off, t, v, acc) \
	VMULPS off(BX), Z5, t; \
	VMOVUPS off(AX), v; \
	VFMADD213PS t, Z4, v; \
	VMOVUPS v, off(AX); \
	VFMADD231PS off(R12), v, acc

// func ssmGGMLAVX512(s *float32, n int, b, c, x *float32, rows, np int, dA, d float32, y *float32)
TEXT ·ssmGGMLAVX512(SB), NOSPLIT, $0-72
	MOVQ s+0(FP), DI
	MOVQ n+8(FP), R8
	SHLQ $2, R8
	MOVQ b+16(FP), R9
	MOVQ c+24(FP), R10
	MOVQ x+32(FP), SI
	MOVQ rows+40(FP), CX
	MOVQ np+48(FP), R11
	SHRQ $6, R11
	VBROADCASTSS dA+56(FP), Z4
	VMOVSS d+60(FP), X6
	MOVQ y+64(FP), DX
	TESTQ CX, CX
	JZ done
	TESTQ R11, R11
	JZ done

row:
	VMULSS (SI), X6, X5
	VBROADCASTSS X5, Z5
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ DI, AX
	MOVQ R9, BX
	MOVQ R10, R12
	MOVQ R11, R13

step:
	ssmStep16(0, Z8, Z12, Z0)
	ssmStep16(64, Z9, Z13, Z1)
	ssmStep16(128, Z10, Z14, Z2)
	ssmStep16(192, Z11, Z7, Z3)
	ADDQ $256, AX
	ADDQ $256, BX
	ADDQ $256, R12
	DECQ R13
	JNZ step

	ssmFold16
	VMOVSS X0, (DX)
	ADDQ $4, SI
	ADDQ $4, DX
	ADDQ R8, DI
	DECQ CX
	JNZ row

done:
	VZEROUPPER
	RET

// ssmStep8 is ssmStep16 on 8 lanes.
#define ssmStep8(off, t, v, acc) \
	VMULPS off(BX), Y5, t; \
	VMOVUPS off(AX), v; \
	VFMADD213PS t, Y4, v; \
	VMOVUPS v, off(AX); \
	VFMADD231PS off(R12), v, acc

// func ssmGGMLAVX2(s *float32, n int, b, c, x *float32, rows, np int, dA, d float32, y *float32)
TEXT ·ssmGGMLAVX2(SB), NOSPLIT, $0-72
	MOVQ s+0(FP), DI
	MOVQ n+8(FP), R8
	SHLQ $2, R8
	MOVQ b+16(FP), R9
	MOVQ c+24(FP), R10
	MOVQ x+32(FP), SI
	MOVQ rows+40(FP), CX
	MOVQ np+48(FP), R11
	SHRQ $5, R11
	VBROADCASTSS dA+56(FP), Y4
	VMOVSS d+60(FP), X6
	MOVQ y+64(FP), DX
	TESTQ CX, CX
	JZ done
	TESTQ R11, R11
	JZ done

row:
	VMULSS (SI), X6, X5
	VBROADCASTSS X5, Y5
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ DI, AX
	MOVQ R9, BX
	MOVQ R10, R12
	MOVQ R11, R13

step:
	ssmStep8(0, Y8, Y12, Y0)
	ssmStep8(32, Y9, Y13, Y1)
	ssmStep8(64, Y10, Y14, Y2)
	ssmStep8(96, Y11, Y7, Y3)
	ADDQ $128, AX
	ADDQ $128, BX
	ADDQ $128, R12
	DECQ R13
	JNZ step

	// ggmlReduce's AVX2 fold: Y0+Y2, Y1+Y3, then the two; the 128-bit
	// halves; two horizontal adds.
	VADDPS Y2, Y0, Y0
	VADDPS Y3, Y1, Y1
	VADDPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VMOVSS X0, (DX)
	ADDQ $4, SI
	ADDQ $4, DX
	ADDQ R8, DI
	DECQ CX
	JNZ row

done:
	VZEROUPPER
	RET

// ssmF32Step16 is state row k's vector of 16 rows at byte offset off
// (ssmRowsF32Generic): v = s·dA + b[k]·xd (Z20 holds b[k], Z21 c[k]),
// s = v, y += v·c[k], each rounded.
#define ssmF32Step16(off, xd, t, u, y) \
	VMULPS off(AX), Z4, t; \
	VMULPS xd, Z20, u; \
	VADDPS u, t, t; \
	VMOVUPS t, off(AX); \
	VMULPS Z21, t, t; \
	VADDPS t, y, y

// func ssmF32AVX512(s *float32, p int, b, c *float32, n int, xd *float32, dA float32, y *float32)
TEXT ·ssmF32AVX512(SB), NOSPLIT, $0-64
	MOVQ s+0(FP), DI
	MOVQ p+8(FP), CX
	MOVQ CX, R8
	SHLQ $2, R8
	MOVQ b+16(FP), R9
	MOVQ c+24(FP), R10
	MOVQ n+32(FP), R11
	MOVQ xd+40(FP), SI
	VBROADCASTSS dA+48(FP), Z4
	MOVQ y+56(FP), DX
	TESTQ R11, R11
	JZ zero

block64:
	CMPQ CX, $64
	JLT block16
	VMOVUPS 0(SI), Z16
	VMOVUPS 64(SI), Z17
	VMOVUPS 128(SI), Z18
	VMOVUPS 192(SI), Z19
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ DI, AX
	MOVQ R9, BX
	MOVQ R10, R12
	MOVQ R11, R13

k64:
	VBROADCASTSS (BX), Z20
	VBROADCASTSS (R12), Z21
	ssmF32Step16(0, Z16, Z8, Z12, Z0)
	ssmF32Step16(64, Z17, Z9, Z13, Z1)
	ssmF32Step16(128, Z18, Z10, Z14, Z2)
	ssmF32Step16(192, Z19, Z11, Z7, Z3)
	ADDQ R8, AX
	ADDQ $4, BX
	ADDQ $4, R12
	DECQ R13
	JNZ k64

	VMOVUPS Z0, 0(DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, 128(DX)
	VMOVUPS Z3, 192(DX)
	ADDQ $256, DI
	ADDQ $256, SI
	ADDQ $256, DX
	SUBQ $64, CX
	JMP block64

block16:
	CMPQ CX, $16
	JLT done
	VMOVUPS 0(SI), Z16
	VPXORD Z0, Z0, Z0
	MOVQ DI, AX
	MOVQ R9, BX
	MOVQ R10, R12
	MOVQ R11, R13

k16:
	VBROADCASTSS (BX), Z20
	VBROADCASTSS (R12), Z21
	ssmF32Step16(0, Z16, Z8, Z12, Z0)
	ADDQ R8, AX
	ADDQ $4, BX
	ADDQ $4, R12
	DECQ R13
	JNZ k16

	VMOVUPS Z0, 0(DX)
	ADDQ $64, DI
	ADDQ $64, SI
	ADDQ $64, DX
	SUBQ $16, CX
	JMP block16

zero:
	VPXORD Z0, Z0, Z0

zero16:
	CMPQ CX, $16
	JLT done
	VMOVUPS Z0, 0(DX)
	ADDQ $64, DX
	SUBQ $16, CX
	JMP zero16

done:
	VZEROUPPER
	RET

// ssmF32Step8 is ssmF32Step16 on 8 rows (Y6 holds b[k], Y5 c[k]).
#define ssmF32Step8(off, xd, t, u, y) \
	VMULPS off(AX), Y4, t; \
	VMULPS xd, Y6, u; \
	VADDPS u, t, t; \
	VMOVUPS t, off(AX); \
	VMULPS Y5, t, t; \
	VADDPS t, y, y

// func ssmF32AVX2(s *float32, p int, b, c *float32, n int, xd *float32, dA float32, y *float32)
TEXT ·ssmF32AVX2(SB), NOSPLIT, $0-64
	MOVQ s+0(FP), DI
	MOVQ p+8(FP), CX
	MOVQ CX, R8
	SHLQ $2, R8
	MOVQ b+16(FP), R9
	MOVQ c+24(FP), R10
	MOVQ n+32(FP), R11
	MOVQ xd+40(FP), SI
	VBROADCASTSS dA+48(FP), Y4
	MOVQ y+56(FP), DX
	TESTQ R11, R11
	JZ zero

block32:
	CMPQ CX, $32
	JLT block16
	VMOVUPS 0(SI), Y8
	VMOVUPS 32(SI), Y9
	VMOVUPS 64(SI), Y10
	VMOVUPS 96(SI), Y11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ DI, AX
	MOVQ R9, BX
	MOVQ R10, R12
	MOVQ R11, R13

k32:
	VBROADCASTSS (BX), Y6
	VBROADCASTSS (R12), Y5
	ssmF32Step8(0, Y8, Y12, Y13, Y0)
	ssmF32Step8(32, Y9, Y14, Y7, Y1)
	ssmF32Step8(64, Y10, Y12, Y13, Y2)
	ssmF32Step8(96, Y11, Y14, Y7, Y3)
	ADDQ R8, AX
	ADDQ $4, BX
	ADDQ $4, R12
	DECQ R13
	JNZ k32

	VMOVUPS Y0, 0(DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	ADDQ $128, DI
	ADDQ $128, SI
	ADDQ $128, DX
	SUBQ $32, CX
	JMP block32

block16:
	CMPQ CX, $16
	JLT done
	VMOVUPS 0(SI), Y8
	VMOVUPS 32(SI), Y9
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	MOVQ DI, AX
	MOVQ R9, BX
	MOVQ R10, R12
	MOVQ R11, R13

k16:
	VBROADCASTSS (BX), Y6
	VBROADCASTSS (R12), Y5
	ssmF32Step8(0, Y8, Y12, Y13, Y0)
	ssmF32Step8(32, Y9, Y14, Y7, Y1)
	ADDQ R8, AX
	ADDQ $4, BX
	ADDQ $4, R12
	DECQ R13
	JNZ k16

	VMOVUPS Y0, 0(DX)
	VMOVUPS Y1, 32(DX)
	ADDQ $64, DI
	ADDQ $64, SI
	ADDQ $64, DX
	SUBQ $16, CX
	JMP block16

zero:
	VXORPS Y0, Y0, Y0

zero16:
	CMPQ CX, $16
	JLT done
	VMOVUPS Y0, 0(DX)
	VMOVUPS Y0, 32(DX)
	ADDQ $64, DX
	SUBQ $16, CX
	JMP zero16

done:
	VZEROUPPER
	RET

// deltaStep16 scales a vector of 16 state elements at byte offset off by
// e (Z4), stores it and FMA-accumulates it times k.
#define deltaStep16(off, r, acc) \
	VMULPS off(AX), Z4, r; \
	VMOVUPS r, off(AX); \
	VFMADD231PS off(BX), r, acc

// deltaMad16 adds k·δ (Z5) to a vector of 16 state elements at byte
// offset off, stores it and FMA-accumulates it times q.
#define deltaMad16(off, r, acc) \
	VMOVUPS off(AX), r; \
	VFMADD231PS off(BX), Z5, r; \
	VMOVUPS r, off(AX); \
	VFMADD231PS off(R12), r, acc

// func deltaGGMLAVX512(m *float32, d int, k, q, v *float32, e, b, scale float32, out *float32)
TEXT ·deltaGGMLAVX512(SB), NOSPLIT, $0-64
	MOVQ m+0(FP), DI
	MOVQ d+8(FP), CX
	MOVQ CX, R8
	SHLQ $2, R8
	MOVQ CX, R11
	SHRQ $6, R11
	MOVQ k+16(FP), R9
	MOVQ q+24(FP), R10
	MOVQ v+32(FP), SI
	VBROADCASTSS e+40(FP), Z4
	VMOVSS b+44(FP), X6
	VMOVSS scale+48(FP), X7
	MOVQ out+56(FP), DX
	TESTQ R11, R11
	JZ done

row:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ DI, AX
	MOVQ R9, BX
	MOVQ R11, R13

decay:
	deltaStep16(0, Z8, Z0)
	deltaStep16(64, Z9, Z1)
	deltaStep16(128, Z10, Z2)
	deltaStep16(192, Z11, Z3)
	ADDQ $256, AX
	ADDQ $256, BX
	DECQ R13
	JNZ decay

	ssmFold16
	VMOVSS (SI), X1
	VSUBSS X0, X1, X1
	VMULSS X6, X1, X1
	VBROADCASTSS X1, Z5
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ DI, AX
	MOVQ R9, BX
	MOVQ R10, R12
	MOVQ R11, R13

mad:
	deltaMad16(0, Z8, Z0)
	deltaMad16(64, Z9, Z1)
	deltaMad16(128, Z10, Z2)
	deltaMad16(192, Z11, Z3)
	ADDQ $256, AX
	ADDQ $256, BX
	ADDQ $256, R12
	DECQ R13
	JNZ mad

	ssmFold16
	VMULSS X7, X0, X0
	VMOVSS X0, (DX)
	ADDQ $4, SI
	ADDQ $4, DX
	ADDQ R8, DI
	DECQ CX
	JNZ row

done:
	VZEROUPPER
	RET

// deltaStep8 and deltaMad8 are deltaStep16 and deltaMad16 on 8 lanes.
#define deltaStep8(off, r, acc) \
	VMULPS off(AX), Y4, r; \
	VMOVUPS r, off(AX); \
	VFMADD231PS off(BX), r, acc

#define deltaMad8(off, r, acc) \
	VMOVUPS off(AX), r; \
	VFMADD231PS off(BX), Y5, r; \
	VMOVUPS r, off(AX); \
	VFMADD231PS off(R12), r, acc

// deltaFold8 is ggmlReduce's AVX2 fold of Y0-Y3 into X0's lane 0: Y0+Y2,
// Y1+Y3, then the two; the 128-bit halves; two horizontal adds.
#define deltaFold8 \
	VADDPS Y2, Y0, Y0; \
	VADDPS Y3, Y1, Y1; \
	VADDPS Y1, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VHADDPS X0, X0, X0; \
	VHADDPS X0, X0, X0

// func deltaGGMLAVX2(m *float32, d int, k, q, v *float32, e, b, scale float32, out *float32)
TEXT ·deltaGGMLAVX2(SB), NOSPLIT, $0-64
	MOVQ m+0(FP), DI
	MOVQ d+8(FP), CX
	MOVQ CX, R8
	SHLQ $2, R8
	MOVQ CX, R11
	SHRQ $5, R11
	MOVQ k+16(FP), R9
	MOVQ q+24(FP), R10
	MOVQ v+32(FP), SI
	VBROADCASTSS e+40(FP), Y4
	VMOVSS b+44(FP), X6
	VMOVSS scale+48(FP), X7
	MOVQ out+56(FP), DX
	TESTQ R11, R11
	JZ done

row:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ DI, AX
	MOVQ R9, BX
	MOVQ R11, R13

decay:
	deltaStep8(0, Y8, Y0)
	deltaStep8(32, Y9, Y1)
	deltaStep8(64, Y10, Y2)
	deltaStep8(96, Y11, Y3)
	ADDQ $128, AX
	ADDQ $128, BX
	DECQ R13
	JNZ decay

	deltaFold8
	VMOVSS (SI), X1
	VSUBSS X0, X1, X1
	VMULSS X6, X1, X1
	VBROADCASTSS X1, Y5
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ DI, AX
	MOVQ R9, BX
	MOVQ R10, R12
	MOVQ R11, R13

mad:
	deltaMad8(0, Y8, Y0)
	deltaMad8(32, Y9, Y1)
	deltaMad8(64, Y10, Y2)
	deltaMad8(96, Y11, Y3)
	ADDQ $128, AX
	ADDQ $128, BX
	ADDQ $128, R12
	DECQ R13
	JNZ mad

	deltaFold8
	VMULSS X7, X0, X0
	VMOVSS X0, (DX)
	ADDQ $4, SI
	ADDQ $4, DX
	ADDQ R8, DI
	DECQ CX
	JNZ row

done:
	VZEROUPPER
	RET
