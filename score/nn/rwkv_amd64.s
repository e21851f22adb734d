// RWKV's recurrences (rwkv.go): one token of one head of WKV7GGML in the
// AVX-512 build's lanes and in the AVX2 build's, and of WKV6GGML (with
// RWKV-6's bonus, and without: gated linear attention) in vectors of 16.
// The instructions are ggml-cpu's own (fused multiply-adds, the folds of
// GGML_F32_VEC_REDUCE), so the results are its bits.

#include "textflag.h"

// wkv7Fold16 folds the accumulators Z0-Z3 into X0's lane 0 as ggmlReduce
// does on AVX-512 (ssm_amd64.s's ssmFold16).
#define wkv7Fold16 \
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

// wkv7Fold8 folds Y0-Y3 as ggmlReduce does on AVX2: Y0+Y2, Y1+Y3, then the
// two; the 128-bit halves; two horizontal adds.
#define wkv7Fold8 \
	VADDPS Y2, Y0, Y0; \
	VADDPS Y3, Y1, Y1; \
	VADDPS Y1, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VHADDPS X0, X0, X0; \
	VHADDPS X0, X0, X0

// wkv7SA16 accumulates a·s over one vector of 16 lanes at byte offset off
// into acc.
#define wkv7SA16(off, t, acc) \
	VMOVUPS off(AX)(BX*1), t; \
	VFMADD231PS off(R12)(BX*1), t, acc

// wkv7Upd16 updates one vector of 16 state elements at byte offset off:
// t = v·k, t = fma(s, w, t), t = fma(sa, b, t), s = t, acc = fma(t, r, acc).
#define wkv7Upd16(off, t, u, acc) \
	VMULPS off(R11)(BX*1), Z5, t; \
	VMOVUPS off(AX)(BX*1), u; \
	VFMADD231PS off(R10)(BX*1), u, t; \
	VFMADD231PS off(R13)(BX*1), Z6, t; \
	VMOVUPS t, off(AX)(BX*1); \
	VFMADD231PS off(R9)(BX*1), t, acc

// func wkv7AVX512(s *float32, d int, r, w, k, v, a, b *float32, np int, out *float32)
// One token of a head: state rows i < d (s[i·d:], their first np columns,
// a multiple of 64), v[i] and out[i] each.
TEXT ·wkv7AVX512(SB), NOSPLIT, $0-80
	MOVQ s+0(FP), AX
	MOVQ d+8(FP), CX
	MOVQ CX, R8
	SHLQ $2, R8
	MOVQ r+16(FP), R9
	MOVQ w+24(FP), R10
	MOVQ k+32(FP), R11
	MOVQ v+40(FP), SI
	MOVQ a+48(FP), R12
	MOVQ b+56(FP), R13
	MOVQ np+64(FP), R14
	SHLQ $2, R14
	MOVQ out+72(FP), DX
	TESTQ CX, CX
	JZ done7
	TESTQ R14, R14
	JZ done7

row7:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	XORQ BX, BX

sa7:
	wkv7SA16(0, Z8, Z0)
	wkv7SA16(64, Z9, Z1)
	wkv7SA16(128, Z10, Z2)
	wkv7SA16(192, Z11, Z3)
	ADDQ $256, BX
	CMPQ BX, R14
	JLT sa7

	wkv7Fold16
	VBROADCASTSS X0, Z6
	VBROADCASTSS (SI), Z5
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	XORQ BX, BX

upd7:
	wkv7Upd16(0, Z8, Z12, Z0)
	wkv7Upd16(64, Z9, Z13, Z1)
	wkv7Upd16(128, Z10, Z14, Z2)
	wkv7Upd16(192, Z11, Z15, Z3)
	ADDQ $256, BX
	CMPQ BX, R14
	JLT upd7

	wkv7Fold16
	VMOVSS X0, (DX)
	ADDQ $4, SI
	ADDQ $4, DX
	ADDQ R8, AX
	DECQ CX
	JNZ row7

done7:
	VZEROUPPER
	RET

// wkv7SA8 and wkv7Upd8 are wkv7SA16 and wkv7Upd16 on 8 lanes.
#define wkv7SA8(off, t, acc) \
	VMOVUPS off(AX)(BX*1), t; \
	VFMADD231PS off(R12)(BX*1), t, acc

#define wkv7Upd8(off, t, u, acc) \
	VMULPS off(R11)(BX*1), Y5, t; \
	VMOVUPS off(AX)(BX*1), u; \
	VFMADD231PS off(R10)(BX*1), u, t; \
	VFMADD231PS off(R13)(BX*1), Y6, t; \
	VMOVUPS t, off(AX)(BX*1); \
	VFMADD231PS off(R9)(BX*1), t, acc

// func wkv7AVX2(s *float32, d int, r, w, k, v, a, b *float32, np int, out *float32)
// wkv7AVX512 in the AVX2 build's lanes: np a multiple of 32.
TEXT ·wkv7AVX2(SB), NOSPLIT, $0-80
	MOVQ s+0(FP), AX
	MOVQ d+8(FP), CX
	MOVQ CX, R8
	SHLQ $2, R8
	MOVQ r+16(FP), R9
	MOVQ w+24(FP), R10
	MOVQ k+32(FP), R11
	MOVQ v+40(FP), SI
	MOVQ a+48(FP), R12
	MOVQ b+56(FP), R13
	MOVQ np+64(FP), R14
	SHLQ $2, R14
	MOVQ out+72(FP), DX
	TESTQ CX, CX
	JZ done8
	TESTQ R14, R14
	JZ done8

row8:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ BX, BX

sa8:
	wkv7SA8(0, Y8, Y0)
	wkv7SA8(32, Y9, Y1)
	wkv7SA8(64, Y10, Y2)
	wkv7SA8(96, Y11, Y3)
	ADDQ $128, BX
	CMPQ BX, R14
	JLT sa8

	wkv7Fold8
	VBROADCASTSS X0, Y6
	VBROADCASTSS (SI), Y5
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ BX, BX

upd8:
	wkv7Upd8(0, Y8, Y12, Y0)
	wkv7Upd8(32, Y9, Y13, Y1)
	wkv7Upd8(64, Y10, Y14, Y2)
	wkv7Upd8(96, Y11, Y15, Y3)
	ADDQ $128, BX
	CMPQ BX, R14
	JLT upd8

	wkv7Fold8
	VMOVSS X0, (DX)
	ADDQ $4, SI
	ADDQ $4, DX
	ADDQ R8, AX
	DECQ CX
	JNZ row8

done8:
	VZEROUPPER
	RET

// func wkv6AVX512(s *float32, d int, r, k, v, w, u, y *float32)
// One token of a head of WKV6GGML, d a multiple of 16, y zeroed by the
// caller: for each key channel i (state row i), over the columns j in
// vectors of 16, kv = v·k_i; with u (not nil) y = fma(fma(kv, u_i, s),
// r_i, y) and s = fma(s, w_i, kv); without, s = fma(s, w_i, kv) and y =
// fma(s, r_i, y).
TEXT ·wkv6AVX512(SB), NOSPLIT, $0-64
	MOVQ s+0(FP), AX
	MOVQ d+8(FP), CX
	MOVQ CX, R14
	SHLQ $2, R14
	MOVQ r+16(FP), R9
	MOVQ k+24(FP), R11
	MOVQ v+32(FP), SI
	MOVQ w+40(FP), R10
	MOVQ u+48(FP), R12
	MOVQ y+56(FP), DX
	TESTQ CX, CX
	JZ done6

row6:
	VBROADCASTSS (R11), Z1
	VBROADCASTSS (R9), Z2
	VBROADCASTSS (R10), Z3
	XORQ BX, BX
	TESTQ R12, R12
	JZ gla6
	VBROADCASTSS (R12), Z4

bonus6:
	VMULPS (SI)(BX*1), Z1, Z5
	VMOVUPS (AX)(BX*1), Z6
	VMOVAPS Z6, Z7
	VFMADD231PS Z4, Z5, Z7
	VMOVUPS (DX)(BX*1), Z8
	VFMADD231PS Z2, Z7, Z8
	VMOVUPS Z8, (DX)(BX*1)
	VFMADD213PS Z5, Z3, Z6
	VMOVUPS Z6, (AX)(BX*1)
	ADDQ $64, BX
	CMPQ BX, R14
	JLT bonus6
	ADDQ $4, R12
	JMP next6

gla6:
	VMULPS (SI)(BX*1), Z1, Z5
	VMOVUPS (AX)(BX*1), Z6
	VFMADD213PS Z5, Z3, Z6
	VMOVUPS Z6, (AX)(BX*1)
	VMOVUPS (DX)(BX*1), Z8
	VFMADD231PS Z2, Z6, Z8
	VMOVUPS Z8, (DX)(BX*1)
	ADDQ $64, BX
	CMPQ BX, R14
	JLT gla6

next6:
	ADDQ $4, R9
	ADDQ $4, R10
	ADDQ $4, R11
	ADDQ R14, AX
	DECQ CX
	JNZ row6

done6:
	VZEROUPPER
	RET
