// Vector decoders of the low-bit types for fast_lowbit_amd64.go: each
// gives the bits of the reference decoder of the same type (lowbit.go).
//
// Every kernel runs the same skeleton: for each group of 32 weights, a
// type's macro leaves their signed integers in Y1 (byte j weight j) and
// their scale in X8 (types with a scale per 16 weights: X8 for the first
// 16, X9 for the second), and an EMIT macro writes them out, converted and
// multiplied (EMIT*_AVX2, EMIT*_AVX512) or in DecodeInt8's form
// (EMIT*_I8). SI walks the blocks, DI the output, DX the scales (I8), CX
// counts blocks. Y1-Y9 are scratch, Y10-Y14 hold a type's constants, Y15
// the bias 0x80 of the integer form.
//
// Grid entries and ksigns masks are loaded one by one (VMOVQ, VPINSRQ,
// VPINSRD) rather than gathered: on this project's AMD EPYC (Zen 4) that
// decodes IQ2_XXS and IQ3_XXS about 1.7 times and IQ3_S 1.5 times as fast
// as VPGATHERDQ and VPGATHERDD did, and gathers are slower still on Intel
// CPUs with the GDS (Downfall) microcode mitigation. Indices computed in a
// vector (IQ2_S, IQ3_S, IQ1_M) come out through VMOVQ and VPEXTRQ. IQ3_S
// and IQ1_M keep their block's packed scales in the frame, at 0(SP).

#include "textflag.h"

// func deqT(src *byte, dst *float32, n int) and i8T(w, q *byte, s *float32, n int)
#define ARGS_DEQ \
	MOVQ src+0(FP), SI; \
	MOVQ dst+8(FP), DI; \
	MOVQ n+16(FP), CX

#define ARGS_I8 \
	MOVQ w+0(FP), SI; \
	MOVQ q+8(FP), DI; \
	MOVQ s+16(FP), DX; \
	MOVQ n+24(FP), CX; \
	VPBROADCASTB k80<>(SB), Y15

// Eight signed bytes of Xr to eight float32 times Ys, stored at off(DI).
#define CVT8_AVX2(xr, ys, off) \
	VPMOVSXBD xr, Y2; \
	VCVTDQ2PS Y2, Y2; \
	VMULPS ys, Y2, Y2; \
	VMOVUPS Y2, off(DI)

// Sixteen signed bytes of Xr to float32 times Ys at off(DI).
#define CVT16_AVX2(xr, ys, off) \
	CVT8_AVX2(xr, ys, off); \
	VPSHUFD $0x4e, xr, X3; \
	CVT8_AVX2(X3, ys, off+32)

#define EMIT32_AVX2 \
	VBROADCASTSS X8, Y8; \
	CVT16_AVX2(X1, Y8, 0); \
	VEXTRACTI128 $1, Y1, X1; \
	CVT16_AVX2(X1, Y8, 64); \
	ADDQ $128, DI

#define EMIT16_AVX2 \
	VBROADCASTSS X8, Y8; \
	VBROADCASTSS X9, Y9; \
	CVT16_AVX2(X1, Y8, 0); \
	VEXTRACTI128 $1, Y1, X1; \
	CVT16_AVX2(X1, Y9, 64); \
	ADDQ $128, DI

#define EMIT32_AVX512 \
	VBROADCASTSS X8, Z8; \
	VPMOVSXBD X1, Z2; \
	VEXTRACTI128 $1, Y1, X3; \
	VPMOVSXBD X3, Z3; \
	VCVTDQ2PS Z2, Z2; \
	VCVTDQ2PS Z3, Z3; \
	VMULPS Z8, Z2, Z2; \
	VMULPS Z8, Z3, Z3; \
	VMOVUPS Z2, (DI); \
	VMOVUPS Z3, 64(DI); \
	ADDQ $128, DI

#define EMIT16_AVX512 \
	VBROADCASTSS X8, Z8; \
	VBROADCASTSS X9, Z9; \
	VPMOVSXBD X1, Z2; \
	VEXTRACTI128 $1, Y1, X3; \
	VPMOVSXBD X3, Z3; \
	VCVTDQ2PS Z2, Z2; \
	VCVTDQ2PS Z3, Z3; \
	VMULPS Z8, Z2, Z2; \
	VMULPS Z9, Z3, Z3; \
	VMOVUPS Z2, (DI); \
	VMOVUPS Z3, 64(DI); \
	ADDQ $128, DI

#define EMIT32_I8 \
	VPXOR Y15, Y1, Y1; \
	VMOVDQU Y1, (DI); \
	VMOVSS X8, (DX); \
	ADDQ $32, DI; \
	ADDQ $4, DX

#define EMIT16_I8 \
	VPXOR Y15, Y1, Y1; \
	VMOVDQU Y1, (DI); \
	VMOVSS X8, (DX); \
	VMOVSS X9, 4(DX); \
	ADDQ $32, DI; \
	ADDQ $8, DX

// Y1 = Y1 negated where the byte mask Y7 is set: (g ^ m) - m.
#define APPLY_SIGNS \
	VPXOR Y7, Y1, Y1; \
	VPSUBB Y7, Y1, Y1

// Y7 = byte masks of the 32 sign bits at mem (weight 8l+j: bit j of byte
// l), with Y10 = kRep and Y11 = kBits.
#define SIGN_BITS(mem) \
	VPBROADCASTD mem, Y7; \
	VPSHUFB Y10, Y7, Y7; \
	VPAND Y11, Y7, Y7; \
	VPCMPEQB Y11, Y7, Y7

// Y7 = byte masks of the four 7-bit sign indices in the uint32 at mem
// (ksigns, parity included), from R12 = ksignMask; uses AX, BX, X6.
#define SIGN_KSIGNS(mem) \
	MOVL mem, AX; \
	MOVL AX, BX; \
	ANDL $127, BX; \
	VMOVQ (R12)(BX*8), X7; \
	MOVL AX, BX; \
	SHRL $7, BX; \
	ANDL $127, BX; \
	VPINSRQ $1, (R12)(BX*8), X7, X7; \
	MOVL AX, BX; \
	SHRL $14, BX; \
	ANDL $127, BX; \
	VMOVQ (R12)(BX*8), X6; \
	SHRL $21, AX; \
	ANDL $127, AX; \
	VPINSRQ $1, (R12)(AX*8), X6, X6; \
	VINSERTI128 $1, X6, Y7, Y7

// Y1 = the 8-byte grid entries of table tab (a register) at the four
// indices: bytes at 0..3(base) (GRID8_B, uses AX, BX, X5) or uint32 in X5
// (GRID8_X5, uses AX, BX, X6).
#define GRID8_B(base, tab) \
	MOVBQZX 0(base), AX; \
	VMOVQ (tab)(AX*8), X1; \
	MOVBQZX 1(base), BX; \
	VPINSRQ $1, (tab)(BX*8), X1, X1; \
	MOVBQZX 2(base), AX; \
	VMOVQ (tab)(AX*8), X5; \
	MOVBQZX 3(base), BX; \
	VPINSRQ $1, (tab)(BX*8), X5, X5; \
	VINSERTI128 $1, X5, Y1, Y1

// Y1 = the 4-byte grid entries of table tab at eight indices, bytes at
// 0..7(base) (GRID4_B, uses AX, BX, X5) or uint32 in Y5 (GRID4_Y5, uses
// AX, BX, X5, X6).
#define GRID4_B(base, tab) \
	MOVBQZX 0(base), AX; \
	VMOVD (tab)(AX*4), X1; \
	MOVBQZX 1(base), BX; \
	VPINSRD $1, (tab)(BX*4), X1, X1; \
	MOVBQZX 2(base), AX; \
	VPINSRD $2, (tab)(AX*4), X1, X1; \
	MOVBQZX 3(base), BX; \
	VPINSRD $3, (tab)(BX*4), X1, X1; \
	MOVBQZX 4(base), AX; \
	VMOVD (tab)(AX*4), X5; \
	MOVBQZX 5(base), BX; \
	VPINSRD $1, (tab)(BX*4), X5, X5; \
	MOVBQZX 6(base), AX; \
	VPINSRD $2, (tab)(AX*4), X5, X5; \
	MOVBQZX 7(base), BX; \
	VPINSRD $3, (tab)(BX*4), X5, X5; \
	VINSERTI128 $1, X5, Y1, Y1

#define GRID8_X5(tab) \
	VMOVQ X5, AX; \
	MOVL AX, BX; \
	SHRQ $32, AX; \
	VMOVQ (tab)(BX*8), X1; \
	VPINSRQ $1, (tab)(AX*8), X1, X1; \
	VPEXTRQ $1, X5, AX; \
	MOVL AX, BX; \
	SHRQ $32, AX; \
	VMOVQ (tab)(BX*8), X6; \
	VPINSRQ $1, (tab)(AX*8), X6, X6; \
	VINSERTI128 $1, X6, Y1, Y1

#define GRID4_Y5(tab) \
	VMOVQ X5, AX; \
	MOVL AX, BX; \
	SHRQ $32, AX; \
	VMOVD (tab)(BX*4), X1; \
	VPINSRD $1, (tab)(AX*4), X1, X1; \
	VPEXTRQ $1, X5, AX; \
	MOVL AX, BX; \
	SHRQ $32, AX; \
	VPINSRD $2, (tab)(BX*4), X1, X1; \
	VPINSRD $3, (tab)(AX*4), X1, X1; \
	VEXTRACTI128 $1, Y5, X5; \
	VMOVQ X5, AX; \
	MOVL AX, BX; \
	SHRQ $32, AX; \
	VMOVD (tab)(BX*4), X6; \
	VPINSRD $1, (tab)(AX*4), X6, X6; \
	VPEXTRQ $1, X5, AX; \
	MOVL AX, BX; \
	SHRQ $32, AX; \
	VPINSRD $2, (tab)(BX*4), X6, X6; \
	VPINSRD $3, (tab)(AX*4), X6, X6; \
	VINSERTI128 $1, X6, Y1, Y1

// X4 = the f16 at mem.
#define LOAD_D(mem) \
	MOVWLZX mem, AX; \
	VMOVD AX, X4; \
	VCVTPH2PS X4, X4

// HALF_SCALE sets Xx to the scale d·(0.5+ls)·c of the i-quants with
// halfPlus (R13), d in X4 and c in X14, ls in register r: the reference's
// products in its order.
#define HALF_SCALE(r, x) \
	VMOVSS (R13)(r*4), x; \
	VMULSS X4, x, x; \
	VMULSS X14, x, x

// NIBBLE_SCALES sets X8 and X9 to HALF_SCALE of the low and high nibble of
// the byte at mem, the scales of 16 weights each (IQ2_XS, IQ2_S); uses AX,
// BX.
#define NIBBLE_SCALES(mem) \
	MOVBLZX mem, AX; \
	MOVL AX, BX; \
	ANDL $15, AX; \
	SHRL $4, BX; \
	HALF_SCALE(AX, X8); \
	HALF_SCALE(BX, X9)

// IQ2_XXS (66 bytes): d; 8 groups of 8 bytes (4 grid indices, uint32 of
// signs and scale). s = d·(0.5+ls)·0.25.
#define IQ2_XXS(EMIT) \
	LEAQ ·iq2xxsGrid(SB), R11; \
	LEAQ ·ksignMask(SB), R12; \
	LEAQ ·halfPlus(SB), R13; \
	VMOVSS kQuarter<>(SB), X14; \
blk: \
	LOAD_D((SI)); \
	LEAQ 2(SI), R9; \
	MOVQ $8, R10; \
grp: \
	GRID8_B(R9, R11); \
	SIGN_KSIGNS(4(R9)); \
	APPLY_SIGNS; \
	MOVL 4(R9), AX; \
	SHRL $28, AX; \
	HALF_SCALE(AX, X8); \
	EMIT; \
	ADDQ $8, R9; \
	DECQ R10; \
	JNZ grp; \
	ADDQ $66, SI; \
	DECQ CX; \
	JNZ blk; \
	VZEROUPPER

// IQ3_XXS (98 bytes): d; qs[64] (8 grid indices per group); 8 uint32 of
// signs and scale at 66. s = d·(0.5+ls)·0.5.
#define IQ3_XXS(EMIT) \
	LEAQ ·iq3xxsGrid(SB), R11; \
	LEAQ ·ksignMask(SB), R12; \
	LEAQ ·halfPlus(SB), R13; \
	VMOVSS kHalf<>(SB), X14; \
blk: \
	LOAD_D((SI)); \
	LEAQ 2(SI), R9; \
	LEAQ 66(SI), R8; \
	MOVQ $8, R10; \
grp: \
	GRID4_B(R9, R11); \
	SIGN_KSIGNS((R8)); \
	APPLY_SIGNS; \
	MOVL (R8), AX; \
	SHRL $28, AX; \
	HALF_SCALE(AX, X8); \
	EMIT; \
	ADDQ $8, R9; \
	ADDQ $4, R8; \
	DECQ R10; \
	JNZ grp; \
	ADDQ $98, SI; \
	DECQ CX; \
	JNZ blk; \
	VZEROUPPER

// IQ3_S (110 bytes): d; qs[64] at 2; qh[8] at 66 (bit k: the ninth bit of
// index k); signs[32] at 74; scale nibbles at 106. s = d·(1+2·ls).
#define IQ3_S(EMIT) \
	LEAQ ·iq3sGrid(SB), R11; \
	LEAQ ·oddTab(SB), R13; \
	VMOVDQU kRep<>(SB), Y10; \
	VMOVDQU kBits<>(SB), Y11; \
	VMOVDQU kShiftIQ3S<>(SB), Y12; \
	VPBROADCASTD k256<>(SB), Y13; \
blk: \
	LOAD_D((SI)); \
	MOVL 106(SI), AX; \
	MOVL AX, 0(SP); \
	LEAQ 2(SI), R9; \
	LEAQ 66(SI), R8; \
	LEAQ 74(SI), R12; \
	MOVQ $8, R10; \
grp: \
	VPMOVZXBD (R9), Y5; \
	MOVBLZX (R8), AX; \
	VMOVD AX, X6; \
	VPBROADCASTD X6, Y6; \
	VPSLLVD Y12, Y6, Y6; \
	VPAND Y13, Y6, Y6; \
	VPOR Y6, Y5, Y5; \
	GRID4_Y5(R11); \
	SIGN_BITS((R12)); \
	APPLY_SIGNS; \
	MOVL 0(SP), AX; \
	MOVL AX, BX; \
	ANDL $15, AX; \
	SHRL $4, BX; \
	MOVL BX, 0(SP); \
	VMOVSS (R13)(AX*4), X8; \
	VMULSS X4, X8, X8; \
	EMIT; \
	ADDQ $8, R9; \
	INCQ R8; \
	ADDQ $4, R12; \
	DECQ R10; \
	JNZ grp; \
	ADDQ $110, SI; \
	DECQ CX; \
	JNZ blk; \
	VZEROUPPER

// IQ2_S (82 bytes): d; qs[32] at 2 (4 indices' low bits per group);
// signs[32] at 34; qh[8] at 66 (bits 2l, 2l+1: index l's bits 8-9);
// scales[8] at 74, a nibble per 16 weights. s = d·(0.5+ls)·0.25.
#define IQ2_S(EMIT) \
	LEAQ ·iq2sGrid(SB), R11; \
	LEAQ ·halfPlus(SB), R13; \
	VMOVDQU kRep<>(SB), Y10; \
	VMOVDQU kBits<>(SB), Y11; \
	VMOVDQU kShiftIQ2S<>(SB), X12; \
	VPBROADCASTD k300<>(SB), X13; \
	VMOVSS kQuarter<>(SB), X14; \
blk: \
	LOAD_D((SI)); \
	LEAQ 2(SI), R9; \
	LEAQ 66(SI), R8; \
	MOVQ $8, R10; \
grp: \
	VPMOVZXBD (R9), X5; \
	MOVBLZX (R8), AX; \
	VMOVD AX, X6; \
	VPBROADCASTD X6, X6; \
	VPSLLVD X12, X6, X6; \
	VPAND X13, X6, X6; \
	VPOR X6, X5, X5; \
	GRID8_X5(R11); \
	SIGN_BITS(32(R9)); \
	APPLY_SIGNS; \
	NIBBLE_SCALES(8(R8)); \
	EMIT; \
	ADDQ $4, R9; \
	INCQ R8; \
	DECQ R10; \
	JNZ grp; \
	ADDQ $82, SI; \
	DECQ CX; \
	JNZ blk; \
	VZEROUPPER

// IQ2_XS (74 bytes): d; 32 uint16 at 2, one per 8 weights: bits 0-8 the
// grid index, 9-15 the ksigns index; scales[8] at 66, a nibble per 16
// weights. s = d·(0.5+ls)·0.25. GRID_XS(i, lane) loads index i's grid
// entry into Xg and its sign masks into Xm at their lane (VMOVQ for lane
// 0, VPINSRQ for 1); uses AX, BX.
#define GRID_XS(i, xg, xm, LOAD) \
	MOVWLZX (2*i)(R9), AX; \
	MOVL AX, BX; \
	ANDL $511, AX; \
	SHRL $9, BX; \
	LOAD((R11)(AX*8), xg); \
	LOAD((R12)(BX*8), xm)

#define LANE0(mem, x) VMOVQ mem, x
#define LANE1(mem, x) VPINSRQ $1, mem, x, x

#define IQ2_XS(EMIT) \
	LEAQ ·iq2xsGrid(SB), R11; \
	LEAQ ·ksignMask(SB), R12; \
	LEAQ ·halfPlus(SB), R13; \
	VMOVSS kQuarter<>(SB), X14; \
blk: \
	LOAD_D((SI)); \
	LEAQ 2(SI), R9; \
	LEAQ 66(SI), R8; \
	MOVQ $8, R10; \
grp: \
	GRID_XS(0, X1, X7, LANE0); \
	GRID_XS(1, X1, X7, LANE1); \
	GRID_XS(2, X5, X6, LANE0); \
	GRID_XS(3, X5, X6, LANE1); \
	VINSERTI128 $1, X5, Y1, Y1; \
	VINSERTI128 $1, X6, Y7, Y7; \
	APPLY_SIGNS; \
	NIBBLE_SCALES((R8)); \
	EMIT; \
	ADDQ $8, R9; \
	INCQ R8; \
	DECQ R10; \
	JNZ grp; \
	ADDQ $74, SI; \
	DECQ CX; \
	JNZ blk; \
	VZEROUPPER

// IQ1_S (50 bytes): d; qs[32] at 2; 8 uint16 qh at 34, one per 32
// weights: bits 3l..3l+2 index l's bits 8-10, 12-14 the scale ls, 15 the
// sign of the shift. v = 8·grid ± 1, s = d·(2·ls+1)·0.125.
#define IQ1_S(EMIT) \
	LEAQ ·iq1sGrid8(SB), R11; \
	LEAQ ·oddTab(SB), R13; \
	VMOVDQU kShiftIQ1S<>(SB), X12; \
	VPBROADCASTD k700<>(SB), X13; \
blk: \
	LOAD_D((SI)); \
	LEAQ 2(SI), R9; \
	LEAQ 34(SI), R12; \
	MOVQ $8, R10; \
grp: \
	VPMOVZXBD (R9), X5; \
	MOVWLZX (R12), AX; \
	VMOVD AX, X6; \
	VPBROADCASTD X6, X6; \
	VPSLLD $8, X6, X6; \
	VPSRLVD X12, X6, X6; \
	VPAND X13, X6, X6; \
	VPOR X6, X5, X5; \
	GRID8_X5(R11); \
	MOVWLZX (R12), AX; \
	MOVL AX, BX; \
	SHRL $15, AX; \
	NEGL AX; \
	ORL $1, AX; \
	VMOVD AX, X7; \
	VPBROADCASTB X7, Y7; \
	VPADDB Y7, Y1, Y1; \
	SHRL $12, BX; \
	ANDL $7, BX; \
	VMOVSS (R13)(BX*4), X8; \
	VMULSS X4, X8, X8; \
	VMULSS kEighth<>(SB), X8, X8; \
	EMIT; \
	ADDQ $4, R9; \
	ADDQ $2, R12; \
	DECQ R10; \
	JNZ grp; \
	ADDQ $50, SI; \
	DECQ CX; \
	JNZ blk; \
	VZEROUPPER

// IQ1_M (56 bytes): qs[32]; qh[16] at 32, a nibble per 8 weights (index
// bits 8-10, sign of the shift); 4 uint16 at 48: 3-bit scales in bits
// 0-11, d in the top nibbles. v = 8·grid ± 1, s = d·(2·ls+1)·0.125.
#define IQ1_M(EMIT) \
	LEAQ ·iq1sGrid8(SB), R11; \
	LEAQ ·oddTab(SB), R13; \
	VMOVDQU kRep1M<>(SB), Y10; \
	VMOVDQU kBits1M<>(SB), Y11; \
	VMOVDQU kShiftIQ1M<>(SB), X12; \
	VPBROADCASTD k700<>(SB), X13; \
	VPBROADCASTB k01<>(SB), Y14; \
blk: \
	MOVWLZX 48(SI), AX; \
	SHRL $12, AX; \
	MOVWLZX 50(SI), R8; \
	SHRL $8, R8; \
	ANDL $0xf0, R8; \
	ORL R8, AX; \
	MOVWLZX 52(SI), R8; \
	SHRL $4, R8; \
	ANDL $0xf00, R8; \
	ORL R8, AX; \
	MOVWLZX 54(SI), R8; \
	ANDL $0xf000, R8; \
	ORL R8, AX; \
	VMOVD AX, X4; \
	VCVTPH2PS X4, X4; \
	MOVWLZX 54(SI), BX; \
	ANDL $0xfff, BX; \
	SHLQ $12, BX; \
	MOVWLZX 52(SI), R8; \
	ANDL $0xfff, R8; \
	ORQ R8, BX; \
	SHLQ $12, BX; \
	MOVWLZX 50(SI), R8; \
	ANDL $0xfff, R8; \
	ORQ R8, BX; \
	SHLQ $12, BX; \
	MOVWLZX 48(SI), R8; \
	ANDL $0xfff, R8; \
	ORQ R8, BX; \
	MOVQ BX, 0(SP); \
	MOVQ SI, R9; \
	LEAQ 32(SI), R12; \
	MOVQ $8, R10; \
grp: \
	VPMOVZXBD (R9), X5; \
	MOVWLZX (R12), AX; \
	VMOVD AX, X6; \
	VPBROADCASTD X6, Y7; \
	VPBROADCASTD X6, X6; \
	VPSLLD $8, X6, X6; \
	VPSRLVD X12, X6, X6; \
	VPAND X13, X6, X6; \
	VPOR X6, X5, X5; \
	GRID8_X5(R11); \
	VPSHUFB Y10, Y7, Y7; \
	VPAND Y11, Y7, Y7; \
	VPCMPEQB Y11, Y7, Y7; \
	VPOR Y14, Y7, Y7; \
	VPADDB Y7, Y1, Y1; \
	MOVQ 0(SP), BX; \
	MOVL BX, AX; \
	ANDL $7, AX; \
	VMOVSS (R13)(AX*4), X8; \
	VMULSS X4, X8, X8; \
	VMULSS kEighth<>(SB), X8, X8; \
	MOVL BX, AX; \
	SHRL $3, AX; \
	ANDL $7, AX; \
	VMOVSS (R13)(AX*4), X9; \
	VMULSS X4, X9, X9; \
	VMULSS kEighth<>(SB), X9, X9; \
	SHRQ $6, BX; \
	MOVQ BX, 0(SP); \
	EMIT; \
	ADDQ $4, R9; \
	ADDQ $2, R12; \
	DECQ R10; \
	JNZ grp; \
	ADDQ $56, SI; \
	DECQ CX; \
	JNZ blk; \
	VZEROUPPER

// MXFP4 (17 bytes, 32 weights): E8M0 e; qs[16] (weight j the low nibble of
// qs[j], j+16 the high). v = kvalues_mxfp4[nibble], s = 2^(e-128).
#define MXFP4(EMIT) \
	LEAQ ·e8m0Tab(SB), R13; \
	VMOVDQU ·fp4Values(SB), X12; \
	VPBROADCASTB k0f<>(SB), X13; \
blk: \
	VMOVDQU 1(SI), X5; \
	VPSRLW $4, X5, X6; \
	VPAND X13, X5, X5; \
	VPAND X13, X6, X6; \
	VPSHUFB X5, X12, X5; \
	VPSHUFB X6, X12, X6; \
	VINSERTI128 $1, X6, Y5, Y1; \
	MOVBLZX (SI), AX; \
	VMOVSS (R13)(AX*4), X8; \
	EMIT; \
	ADDQ $17, SI; \
	DECQ CX; \
	JNZ blk; \
	VZEROUPPER

// Half h of an NVFP4 block: sub-blocks 2h and 2h+1 from the 16 bytes at
// 4+16h (low nibbles of 8 bytes, then their high nibbles), scales the
// UE4M3 bytes 2h, 2h+1.
#define NVFP4_HALF(h) \
	VMOVDQU (4+16*h)(SI), X5; \
	VPSRLW $4, X5, X6; \
	VPAND X13, X5, X5; \
	VPAND X13, X6, X6; \
	VPUNPCKLQDQ X6, X5, X7; \
	VPUNPCKHQDQ X6, X5, X5; \
	VPSHUFB X7, X12, X7; \
	VPSHUFB X5, X12, X5; \
	VINSERTI128 $1, X5, Y7, Y1; \
	MOVBLZX (2*h)(SI), AX; \
	VMOVSS (R13)(AX*4), X8; \
	MOVBLZX (2*h+1)(SI), AX; \
	VMOVSS (R13)(AX*4), X9

// NVFP4 (36 bytes, 64 weights): four UE4M3 scales; qs[32] at 4.
// v = kvalues_mxfp4[nibble], s = ue4m3(d)/2.
#define NVFP4(EMIT) \
	LEAQ ·ue4m3Tab(SB), R13; \
	VMOVDQU ·fp4Values(SB), X12; \
	VPBROADCASTB k0f<>(SB), X13; \
blk: \
	NVFP4_HALF(0); \
	EMIT; \
	NVFP4_HALF(1); \
	EMIT; \
	ADDQ $36, SI; \
	DECQ CX; \
	JNZ blk; \
	VZEROUPPER

TEXT ·deqIQ2_XSAVX2(SB), NOSPLIT, $0-24
	ARGS_DEQ
	IQ2_XS(EMIT16_AVX2)
	RET

TEXT ·deqIQ2_XSAVX512(SB), NOSPLIT, $0-24
	ARGS_DEQ
	IQ2_XS(EMIT16_AVX512)
	RET

TEXT ·i8IQ2_XSAVX2(SB), NOSPLIT, $0-32
	ARGS_I8
	IQ2_XS(EMIT16_I8)
	RET

TEXT ·deqIQ1_SAVX2(SB), NOSPLIT, $0-24
	ARGS_DEQ
	IQ1_S(EMIT32_AVX2)
	RET

TEXT ·deqIQ1_SAVX512(SB), NOSPLIT, $0-24
	ARGS_DEQ
	IQ1_S(EMIT32_AVX512)
	RET

TEXT ·i8IQ1_SAVX2(SB), NOSPLIT, $0-32
	ARGS_I8
	IQ1_S(EMIT32_I8)
	RET

TEXT ·deqIQ2_XXSAVX2(SB), NOSPLIT, $0-24
	ARGS_DEQ
	IQ2_XXS(EMIT32_AVX2)
	RET

TEXT ·deqIQ2_XXSAVX512(SB), NOSPLIT, $0-24
	ARGS_DEQ
	IQ2_XXS(EMIT32_AVX512)
	RET

TEXT ·i8IQ2_XXSAVX2(SB), NOSPLIT, $0-32
	ARGS_I8
	IQ2_XXS(EMIT32_I8)
	RET

TEXT ·deqIQ3_XXSAVX2(SB), NOSPLIT, $0-24
	ARGS_DEQ
	IQ3_XXS(EMIT32_AVX2)
	RET

TEXT ·deqIQ3_XXSAVX512(SB), NOSPLIT, $0-24
	ARGS_DEQ
	IQ3_XXS(EMIT32_AVX512)
	RET

TEXT ·i8IQ3_XXSAVX2(SB), NOSPLIT, $0-32
	ARGS_I8
	IQ3_XXS(EMIT32_I8)
	RET

TEXT ·deqIQ3_SAVX2(SB), NOSPLIT, $8-24
	ARGS_DEQ
	IQ3_S(EMIT32_AVX2)
	RET

TEXT ·deqIQ3_SAVX512(SB), NOSPLIT, $8-24
	ARGS_DEQ
	IQ3_S(EMIT32_AVX512)
	RET

TEXT ·i8IQ3_SAVX2(SB), NOSPLIT, $8-32
	ARGS_I8
	IQ3_S(EMIT32_I8)
	RET

TEXT ·deqIQ2_SAVX2(SB), NOSPLIT, $8-24
	ARGS_DEQ
	IQ2_S(EMIT16_AVX2)
	RET

TEXT ·deqIQ2_SAVX512(SB), NOSPLIT, $8-24
	ARGS_DEQ
	IQ2_S(EMIT16_AVX512)
	RET

TEXT ·i8IQ2_SAVX2(SB), NOSPLIT, $8-32
	ARGS_I8
	IQ2_S(EMIT16_I8)
	RET

TEXT ·deqIQ1_MAVX2(SB), NOSPLIT, $8-24
	ARGS_DEQ
	IQ1_M(EMIT16_AVX2)
	RET

TEXT ·deqIQ1_MAVX512(SB), NOSPLIT, $8-24
	ARGS_DEQ
	IQ1_M(EMIT16_AVX512)
	RET

TEXT ·i8IQ1_MAVX2(SB), NOSPLIT, $8-32
	ARGS_I8
	IQ1_M(EMIT16_I8)
	RET

TEXT ·deqMXFP4AVX2(SB), NOSPLIT, $0-24
	ARGS_DEQ
	MXFP4(EMIT32_AVX2)
	RET

TEXT ·deqMXFP4AVX512(SB), NOSPLIT, $0-24
	ARGS_DEQ
	MXFP4(EMIT32_AVX512)
	RET

TEXT ·i8MXFP4AVX2(SB), NOSPLIT, $0-32
	ARGS_I8
	MXFP4(EMIT32_I8)
	RET

TEXT ·deqNVFP4AVX2(SB), NOSPLIT, $0-24
	ARGS_DEQ
	NVFP4(EMIT16_AVX2)
	RET

TEXT ·deqNVFP4AVX512(SB), NOSPLIT, $0-24
	ARGS_DEQ
	NVFP4(EMIT16_AVX512)
	RET

TEXT ·i8NVFP4AVX2(SB), NOSPLIT, $0-32
	ARGS_I8
	NVFP4(EMIT16_I8)
	RET

// Constants.
DATA k80<>+0(SB)/1, $0x80
GLOBL k80<>(SB), RODATA|NOPTR, $1
DATA k01<>+0(SB)/1, $0x01
GLOBL k01<>(SB), RODATA|NOPTR, $1
DATA k0f<>+0(SB)/1, $0x0f
GLOBL k0f<>(SB), RODATA|NOPTR, $1
DATA k256<>+0(SB)/4, $256
GLOBL k256<>(SB), RODATA|NOPTR, $4
DATA k300<>+0(SB)/4, $0x300
GLOBL k300<>(SB), RODATA|NOPTR, $4
DATA k700<>+0(SB)/4, $0x700
GLOBL k700<>(SB), RODATA|NOPTR, $4
DATA kQuarter<>+0(SB)/4, $0x3e800000
GLOBL kQuarter<>(SB), RODATA|NOPTR, $4
DATA kHalf<>+0(SB)/4, $0x3f000000
GLOBL kHalf<>(SB), RODATA|NOPTR, $4
DATA kEighth<>+0(SB)/4, $0x3e000000
GLOBL kEighth<>(SB), RODATA|NOPTR, $4

// kShiftIQ2S: qh bits 2l, 2l+1 to bits 8-9 of index l.
DATA kShiftIQ2S<>+0(SB)/4, $8
DATA kShiftIQ2S<>+4(SB)/4, $6
DATA kShiftIQ2S<>+8(SB)/4, $4
DATA kShiftIQ2S<>+12(SB)/4, $2
GLOBL kShiftIQ2S<>(SB), RODATA|NOPTR, $16

// kShiftIQ1M: nibble l of the 16-bit qh (shifted up by 8) to bits 8-10.
DATA kShiftIQ1S<>+0(SB)/4, $0
DATA kShiftIQ1S<>+4(SB)/4, $3
DATA kShiftIQ1S<>+8(SB)/4, $6
DATA kShiftIQ1S<>+12(SB)/4, $9
GLOBL kShiftIQ1S<>(SB), RODATA|NOPTR, $16

DATA kShiftIQ1M<>+0(SB)/4, $0
DATA kShiftIQ1M<>+4(SB)/4, $4
DATA kShiftIQ1M<>+8(SB)/4, $8
DATA kShiftIQ1M<>+12(SB)/4, $12
GLOBL kShiftIQ1M<>(SB), RODATA|NOPTR, $16

// kShiftIQ3S: qh bit k to bit 8 of index k.
DATA kShiftIQ3S<>+0(SB)/4, $8
DATA kShiftIQ3S<>+4(SB)/4, $7
DATA kShiftIQ3S<>+8(SB)/4, $6
DATA kShiftIQ3S<>+12(SB)/4, $5
DATA kShiftIQ3S<>+16(SB)/4, $4
DATA kShiftIQ3S<>+20(SB)/4, $3
DATA kShiftIQ3S<>+24(SB)/4, $2
DATA kShiftIQ3S<>+28(SB)/4, $1
GLOBL kShiftIQ3S<>(SB), RODATA|NOPTR, $32

// kRep: byte l of a broadcast uint32 to bytes 8l..8l+7.
DATA kRep<>+0(SB)/8, $0x0000000000000000
DATA kRep<>+8(SB)/8, $0x0101010101010101
DATA kRep<>+16(SB)/8, $0x0202020202020202
DATA kRep<>+24(SB)/8, $0x0303030303030303
GLOBL kRep<>(SB), RODATA|NOPTR, $32

// kBits: bit j in byte j of each eight.
DATA kBits<>+0(SB)/8, $0x8040201008040201
DATA kBits<>+8(SB)/8, $0x8040201008040201
DATA kBits<>+16(SB)/8, $0x8040201008040201
DATA kBits<>+24(SB)/8, $0x8040201008040201
GLOBL kBits<>(SB), RODATA|NOPTR, $32

// kRep1M, kBits1M: the shift signs of IQ1_M, bits 3 and 7 of the two qh
// bytes of a group, to its four eights.
DATA kRep1M<>+0(SB)/8, $0x0000000000000000
DATA kRep1M<>+8(SB)/8, $0x0000000000000000
DATA kRep1M<>+16(SB)/8, $0x0101010101010101
DATA kRep1M<>+24(SB)/8, $0x0101010101010101
GLOBL kRep1M<>(SB), RODATA|NOPTR, $32
DATA kBits1M<>+0(SB)/8, $0x0808080808080808
DATA kBits1M<>+8(SB)/8, $0x8080808080808080
DATA kBits1M<>+16(SB)/8, $0x0808080808080808
DATA kBits1M<>+24(SB)/8, $0x8080808080808080
GLOBL kBits1M<>(SB), RODATA|NOPTR, $32
