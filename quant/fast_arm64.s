#include "textflag.h"

// NEON dequantizers (fast_arm64.go): each weight is the reference's
// product(s), one rounding each (FMUL, FSUB), from integers widened
// exactly (UXTL/SXTL, then UCVTF/SCVTF of values below 2^24).
//
// The instructions Go's assembler does not name, as their encodings:
// d, n (and m) are register numbers.
#define SXTL8H(d, n) WORD $(0x0f08a400 | ((n)<<5) | (d))   // SXTL Vd.8H, Vn.8B
#define SXTL28H(d, n) WORD $(0x4f08a400 | ((n)<<5) | (d))  // SXTL2 Vd.8H, Vn.16B
#define SXTL4S(d, n) WORD $(0x0f10a400 | ((n)<<5) | (d))   // SXTL Vd.4S, Vn.4H
#define SXTL24S(d, n) WORD $(0x4f10a400 | ((n)<<5) | (d))  // SXTL2 Vd.4S, Vn.8H
#define UXTL8H(d, n) WORD $(0x2f08a400 | ((n)<<5) | (d))   // UXTL Vd.8H, Vn.8B
#define UXTL28H(d, n) WORD $(0x6f08a400 | ((n)<<5) | (d))  // UXTL2 Vd.8H, Vn.16B
#define UXTL4S(d, n) WORD $(0x2f10a400 | ((n)<<5) | (d))   // UXTL Vd.4S, Vn.4H
#define UXTL24S(d, n) WORD $(0x6f10a400 | ((n)<<5) | (d))  // UXTL2 Vd.4S, Vn.8H
#define SCVTF4S(d, n) WORD $(0x4e21d800 | ((n)<<5) | (d))  // SCVTF Vd.4S, Vn.4S
#define UCVTF4S(d, n) WORD $(0x6e21d800 | ((n)<<5) | (d))  // UCVTF Vd.4S, Vn.4S
#define FCVTL4S(d, n) WORD $(0x0e217800 | ((n)<<5) | (d))  // FCVTL Vd.4S, Vn.4H
#define FCVTL24S(d, n) WORD $(0x4e217800 | ((n)<<5) | (d)) // FCVTL2 Vd.4S, Vn.8H
#define ZIP18H(d, n, m) WORD $(0x4e403800 | ((m)<<16) | ((n)<<5) | (d)) // ZIP1 Vd.8H, Vn.8H, Vm.8H
#define ZIP28H(d, n, m) WORD $(0x4e407800 | ((m)<<16) | ((n)<<5) | (d)) // ZIP2 Vd.8H, Vn.8H, Vm.8H
#define FMUL4S(d, n, m) WORD $(0x6e20dc00 | ((m)<<16) | ((n)<<5) | (d)) // FMUL Vd.4S, Vn.4S, Vm.4S
#define FSUB4S(d, n, m) WORD $(0x4ea0d400 | ((m)<<16) | ((n)<<5) | (d)) // FSUB Vd.4S, Vn.4S, Vm.4S

// WIDEN16S widens the 16 signed bytes of Vb into the 16 int32 lanes of
// Vd..Vd+3, through Vt and Vt+1, converted to float32.
#define WIDEN16S(b, t, d0, d1, d2, d3) \
	SXTL8H(t, b); SXTL28H(t+1, b); \
	SXTL4S(d0, t); SXTL24S(d1, t); SXTL4S(d2, t+1); SXTL24S(d3, t+1); \
	SCVTF4S(d0, d0); SCVTF4S(d1, d1); SCVTF4S(d2, d2); SCVTF4S(d3, d3)

// WIDEN16U is WIDEN16S for unsigned bytes.
#define WIDEN16U(b, t, d0, d1, d2, d3) \
	UXTL8H(t, b); UXTL28H(t+1, b); \
	UXTL4S(d0, t); UXTL24S(d1, t); UXTL4S(d2, t+1); UXTL24S(d3, t+1); \
	UCVTF4S(d0, d0); UCVTF4S(d1, d1); UCVTF4S(d2, d2); UCVTF4S(d3, d3)

// MUL4 multiplies V(d)..V(d+3) by Vs.
#define MUL4(d, s) FMUL4S(d, d, s); FMUL4S(d+1, d+1, s); FMUL4S(d+2, d+2, s); FMUL4S(d+3, d+3, s)

// SUB4 subtracts Vs from V(d)..V(d+3).
#define SUB4(d, s) FSUB4S(d, d, s); FSUB4S(d+1, d+1, s); FSUB4S(d+2, d+2, s); FSUB4S(d+3, d+3, s)

// func deqF16NEON(src *byte, dst *float32, n int)
// n groups of 16 halves; FCVTL converts each exactly (a signaling NaN
// comes out quiet, as with F16C).
TEXT ·deqF16NEON(SB), NOSPLIT, $0-24
	MOVD src+0(FP), R0
	MOVD dst+8(FP), R1
	MOVD n+16(FP), R2
	CBZ R2, done
loop:
	VLD1.P 32(R0), [V0.H8, V1.H8]
	FCVTL4S(2, 0)
	FCVTL24S(3, 0)
	FCVTL4S(4, 1)
	FCVTL24S(5, 1)
	VST1.P [V2.S4, V3.S4, V4.S4, V5.S4], 64(R1)
	SUBS $1, R2, R2
	BNE loop
done:
	RET

// func deqBF16NEON(src *byte, dst *float32, n int)
// n groups of 16 bf16 values: each the high half of its float32 (ZIP with
// zeros).
TEXT ·deqBF16NEON(SB), NOSPLIT, $0-24
	MOVD src+0(FP), R0
	MOVD dst+8(FP), R1
	MOVD n+16(FP), R2
	VEOR V6.B16, V6.B16, V6.B16
	CBZ R2, done
loop:
	VLD1.P 32(R0), [V0.H8, V1.H8]
	ZIP18H(2, 6, 0)
	ZIP28H(3, 6, 0)
	ZIP18H(4, 6, 1)
	ZIP28H(5, 6, 1)
	VST1.P [V2.S4, V3.S4, V4.S4, V5.S4], 64(R1)
	SUBS $1, R2, R2
	BNE loop
done:
	RET

// func deqQ8_0NEON(src *byte, dst *float32, n int)
// n blocks of 34 bytes: y = float32(q)·d.
TEXT ·deqQ8_0NEON(SB), NOSPLIT, $0-24
	MOVD src+0(FP), R0
	MOVD dst+8(FP), R1
	MOVD n+16(FP), R2
	CBZ R2, done
loop:
	VLD1R.P 2(R0), [V0.H8]
	FCVTL4S(1, 0)
	VLD1.P 32(R0), [V2.B16, V3.B16]
	WIDEN16S(2, 4, 8, 9, 10, 11)
	WIDEN16S(3, 4, 12, 13, 14, 15)
	MUL4(8, 1)
	MUL4(12, 1)
	VST1.P [V8.S4, V9.S4, V10.S4, V11.S4], 64(R1)
	VST1.P [V12.S4, V13.S4, V14.S4, V15.S4], 64(R1)
	SUBS $1, R2, R2
	BNE loop
done:
	RET

// Q4GROUP stores at R2 (post-incremented) one group's 32 weights from the
// nibbles in Va, Vb: float32(q)·Vd - Vm.
#define Q4GROUP(a, b, d, m) \
	WIDEN16U(a, 16, 8, 9, 10, 11); \
	WIDEN16U(b, 16, 12, 13, 14, 15); \
	MUL4(8, d); \
	MUL4(12, d); \
	SUB4(8, m); \
	SUB4(12, m); \
	VST1.P [V8.S4, V9.S4, V10.S4, V11.S4], 64(R2); \
	VST1.P [V12.S4, V13.S4, V14.S4, V15.S4], 64(R2)

// func q4kNEON(qs *byte, dm *[16]float32, dst *float32)
// One Q4_K super-block's 128 bytes of nibbles, dm holding each group j's
// d·sc and dmin·m at 2j, 2j+1: group 2c the low nibbles of bytes 32c on,
// group 2c+1 their high ones; y = float32(d·sc·q) - dmin·m.
TEXT ·q4kNEON(SB), NOSPLIT, $0-24
	MOVD qs+0(FP), R0
	MOVD dm+8(FP), R1
	MOVD dst+16(FP), R2
	VMOVI $15, V31.B16
	MOVD $4, R3
chunk:
	VLD1.P 32(R0), [V0.B16, V1.B16]
	VLD1R.P 4(R1), [V2.S4]
	VLD1R.P 4(R1), [V3.S4]
	VLD1R.P 4(R1), [V4.S4]
	VLD1R.P 4(R1), [V5.S4]
	VAND V31.B16, V0.B16, V6.B16
	VAND V31.B16, V1.B16, V7.B16
	VUSHR $4, V0.B16, V0.B16
	VUSHR $4, V1.B16, V1.B16
	Q4GROUP(6, 7, 2, 3)
	Q4GROUP(0, 1, 4, 5)
	SUBS $1, R3, R3
	BNE chunk
	RET

// Q6STORE multiplies the 16 signed 6-bit values of Vq (minus 32 already)
// by Vs and stores them at R2 + off.
#define Q6STORE(q, s, off) \
	WIDEN16S(q, 16, 8, 9, 10, 11); \
	MUL4(8, s); \
	ADD $off, R2, R4; \
	VST1 [V8.S4, V9.S4, V10.S4, V11.S4], (R4)

// Q6HIGH puts qh's (V4, V5) bits shift and shift+1 at bits 4 and 5 of
// V6, V7.
#define Q6HIGH(shift) \
	VUSHR $shift, V4.B16, V6.B16; \
	VUSHR $shift, V5.B16, V7.B16; \
	VAND V30.B16, V6.B16, V6.B16; \
	VAND V30.B16, V7.B16, V7.B16; \
	VSHL $4, V6.B16, V6.B16; \
	VSHL $4, V7.B16, V7.B16

// Q6OUT joins those high bits with the nibbles in V17, V18, takes 32 and
// stores the weights of l < 16 (V6, scale Vs0) at R2 + off0 and of l >= 16
// (V7, Vs1) at R2 + off1.
#define Q6OUT(s0, s1, off0, off1) \
	VORR V17.B16, V6.B16, V6.B16; \
	VORR V18.B16, V7.B16, V7.B16; \
	VSUB V29.B16, V6.B16, V6.B16; \
	VSUB V29.B16, V7.B16, V7.B16; \
	Q6STORE(6, s0, off0); \
	Q6STORE(7, s1, off1)

// func q6kNEON(b *byte, ds *[16]float32, dst *float32)
// One Q6_K super-block (210 bytes at b), ds holding d·sc of its 16
// groups: per half h, with ql its 64 bytes at 64h and qh its 32 at
// 128 + 32h, y[128h + 32k + l] = ds[8h + 2k + l/16]·q, q = (ql[l + 32(k&1)]
// nibble k/2 | qh[l] bits 2k, 2k+1 << 4) - 32.
TEXT ·q6kNEON(SB), NOSPLIT, $0-24
	MOVD b+0(FP), R0
	MOVD ds+8(FP), R1
	MOVD dst+16(FP), R2
	ADD $128, R0, R5
	VMOVI $15, V31.B16
	VMOVI $3, V30.B16
	VMOVI $32, V29.B16
	MOVD $2, R3
half:
	VLD1.P 32(R0), [V0.B16, V1.B16]  // ql[0:32]
	VLD1.P 32(R0), [V2.B16, V3.B16]  // ql[32:64]
	VLD1.P 32(R5), [V4.B16, V5.B16]  // qh
	VLD1 (R1), [V20.S4, V21.S4]      // ds[8h:8h+8]
	ADD $32, R1, R1
	VDUP V20.S[0], V22.S4
	VDUP V20.S[1], V23.S4
	VDUP V20.S[2], V24.S4
	VDUP V20.S[3], V25.S4
	VDUP V21.S[0], V26.S4
	VDUP V21.S[1], V27.S4
	VDUP V21.S[2], V28.S4
	VDUP V21.S[3], V19.S4
	// k = 0: low nibbles of ql[0:32], qh bits 0-1.
	VAND V30.B16, V4.B16, V6.B16
	VAND V30.B16, V5.B16, V7.B16
	VSHL $4, V6.B16, V6.B16
	VSHL $4, V7.B16, V7.B16
	VAND V31.B16, V0.B16, V17.B16
	VAND V31.B16, V1.B16, V18.B16
	Q6OUT(22, 23, 0, 64)
	// k = 1: low nibbles of ql[32:64], qh bits 2-3.
	Q6HIGH(2)
	VAND V31.B16, V2.B16, V17.B16
	VAND V31.B16, V3.B16, V18.B16
	Q6OUT(24, 25, 128, 192)
	// k = 2: high nibbles of ql[0:32], qh bits 4-5.
	Q6HIGH(4)
	VUSHR $4, V0.B16, V17.B16
	VUSHR $4, V1.B16, V18.B16
	Q6OUT(26, 27, 256, 320)
	// k = 3: high nibbles of ql[32:64], qh bits 6-7.
	VUSHR $6, V4.B16, V6.B16
	VUSHR $6, V5.B16, V7.B16
	VSHL $4, V6.B16, V6.B16
	VSHL $4, V7.B16, V7.B16
	VUSHR $4, V2.B16, V17.B16
	VUSHR $4, V3.B16, V18.B16
	Q6OUT(28, 19, 384, 448)
	ADD $512, R2, R2
	SUBS $1, R3, R3
	BNE half
	RET

#define CMTST16B(d, n, m) WORD $(0x4e208c00 | ((m)<<16) | ((n)<<5) | (d)) // CMTST Vd.16B, Vn.16B, Vm.16B

// NIBBLES leaves the low nibbles of the 16 bytes at R0 + off in V2 and
// the high ones in V3 (V31: 0x0f bytes).
#define NIBBLES(off) \
	ADD $off, R0, R4; \
	VLD1 (R4), [V1.B16]; \
	VAND V31.B16, V1.B16, V2.B16; \
	VUSHR $4, V1.B16, V3.B16

// Q5HIGH ORs bit 4 into the codes in V2 (bits 0-15 of the 32-bit qh at
// R0 + off) and V3 (bits 16-31): each qh byte spread over 8 code bytes
// (TBL by V28, V29), tested against V30's single bits, masked to 0x10
// (V27).
#define Q5HIGH(off) \
	ADD $off, R0, R4; \
	VLD1 (R4), [V4.S2]; \
	VTBL V28.B16, [V4.B16], V5.B16; \
	VTBL V29.B16, [V4.B16], V6.B16; \
	CMTST16B(5, 5, 30); \
	CMTST16B(6, 6, 30); \
	VAND V27.B16, V5.B16, V5.B16; \
	VAND V27.B16, V6.B16, V6.B16; \
	VORR V5.B16, V2.B16, V2.B16; \
	VORR V6.B16, V3.B16, V3.B16

// Q5SETUP sets Q5HIGH's and NIBBLES's constants.
#define Q5SETUP \
	VMOVI $15, V31.B16; \
	VMOVI $16, V27.B16; \
	MOVD $0x8040201008040201, R4; \
	VMOV R4, V30.D[0]; \
	VMOV R4, V30.D[1]; \
	MOVD $0x0101010101010101, R4; \
	VEOR V28.B16, V28.B16, V28.B16; \
	VMOV R4, V28.D[1]; \
	MOVD $0x0202020202020202, R4; \
	VMOV R4, V29.D[0]; \
	MOVD $0x0303030303030303, R4; \
	VMOV R4, V29.D[1]

// func codesQ8_0(w, q *byte, n int)  n blocks: q = v ^ 0x80
TEXT ·codesQ8_0(SB), NOSPLIT, $0-24
	MOVD w+0(FP), R0
	MOVD q+8(FP), R1
	MOVD n+16(FP), R3
	VMOVI $128, V31.B16
loop:
	ADD $2, R0, R4
	VLD1 (R4), [V2.B16, V3.B16]
	VEOR V31.B16, V2.B16, V2.B16
	VEOR V31.B16, V3.B16, V3.B16
	VST1.P [V2.B16, V3.B16], 32(R1)
	ADD $34, R0, R0
	SUBS $1, R3, R3
	BNE loop
	RET

// func codesQ5(w, q *byte, n, ts int)  qh at ts − 20, qs at ts − 16
TEXT ·codesQ5(SB), NOSPLIT, $0-32
	MOVD w+0(FP), R0
	MOVD q+8(FP), R1
	MOVD n+16(FP), R3
	MOVD ts+24(FP), R6
	Q5SETUP
	SUB $20, R6, R7
	ADD R7, R0, R0
loop:
	NIBBLES(4)
	Q5HIGH(0)
	VST1.P [V2.B16, V3.B16], 32(R1)
	ADD R6, R0, R0
	SUBS $1, R3, R3
	BNE loop
	RET

#define FADD4S(d, n, m) WORD $(0x4e20d400 | ((m)<<16) | ((n)<<5) | (d)) // FADD Vd.4S, Vn.4S, Vm.4S

// HALF4S broadcasts the f16 at R0 + off into the four float32 lanes of Vd.
#define HALF4S(off, d) \
	ADD $off, R0, R4; \
	VLD1R (R4), [V(d).H8]; \
	FCVTL4S(d, d)

// func deqQ5_0NEON(src *byte, dst *float32, n int)  n blocks: y = (q-16)·d
TEXT ·deqQ5_0NEON(SB), NOSPLIT, $0-24
	MOVD src+0(FP), R0
	MOVD dst+8(FP), R1
	MOVD n+16(FP), R3
	Q5SETUP
loop:
	HALF4S(0, 0)
	NIBBLES(6)
	Q5HIGH(2)
	VSUB V27.B16, V2.B16, V2.B16
	VSUB V27.B16, V3.B16, V3.B16
	WIDEN16S(2, 16, 8, 9, 10, 11)
	WIDEN16S(3, 16, 12, 13, 14, 15)
	MUL4(8, 0)
	MUL4(12, 0)
	VST1.P [V8.S4, V9.S4, V10.S4, V11.S4], 64(R1)
	VST1.P [V12.S4, V13.S4, V14.S4, V15.S4], 64(R1)
	ADD $22, R0, R0
	SUBS $1, R3, R3
	BNE loop
	RET

// func deqQ5_1NEON(src *byte, dst *float32, n int)  n blocks: y = q·d + m
TEXT ·deqQ5_1NEON(SB), NOSPLIT, $0-24
	MOVD src+0(FP), R0
	MOVD dst+8(FP), R1
	MOVD n+16(FP), R3
	Q5SETUP
loop:
	HALF4S(0, 0)
	HALF4S(2, 7)
	NIBBLES(8)
	Q5HIGH(4)
	WIDEN16U(2, 16, 8, 9, 10, 11)
	WIDEN16U(3, 16, 12, 13, 14, 15)
	MUL4(8, 0)
	MUL4(12, 0)
	FADD4S(8, 8, 7); FADD4S(9, 9, 7); FADD4S(10, 10, 7); FADD4S(11, 11, 7)
	FADD4S(12, 12, 7); FADD4S(13, 13, 7); FADD4S(14, 14, 7); FADD4S(15, 15, 7)
	VST1.P [V8.S4, V9.S4, V10.S4, V11.S4], 64(R1)
	VST1.P [V12.S4, V13.S4, V14.S4, V15.S4], 64(R1)
	ADD $24, R0, R0
	SUBS $1, R3, R3
	BNE loop
	RET

// func codesQ4_K(w, q *byte, n int)
// Per 32 bytes of a super-block's 128 bytes of nibbles (at 16): their low
// nibbles, then their high ones.
TEXT ·codesQ4_K(SB), NOSPLIT, $0-24
	MOVD w+0(FP), R0
	MOVD q+8(FP), R1
	MOVD n+16(FP), R2
	VMOVI $15, V31.B16
block:
	ADD $16, R0, R5
	MOVD $4, R3
chunk:
	VLD1.P 32(R5), [V0.B16, V1.B16]
	VAND V31.B16, V0.B16, V2.B16
	VAND V31.B16, V1.B16, V3.B16
	VUSHR $4, V0.B16, V4.B16
	VUSHR $4, V1.B16, V5.B16
	VST1.P [V2.B16, V3.B16, V4.B16, V5.B16], 64(R1)
	SUBS $1, R3, R3
	BNE chunk
	ADD $144, R0, R0
	SUBS $1, R2, R2
	BNE block
	RET

// Q6CODES joins Q6HIGH's high bits with the nibbles in V17, V18 (as
// Q6OUT, without its -32) and stores the 32 codes at R2 + off.
#define Q6CODES(off) \
	VORR V17.B16, V6.B16, V6.B16; \
	VORR V18.B16, V7.B16, V7.B16; \
	ADD $off, R2, R4; \
	VST1 [V6.B16, V7.B16], (R4)

// func codesQ6_K(w, q *byte, n int)
// A Q6_K super-block's 256 codes (0..63, i8Q6_K's order): per half h,
// q[128h + 32k + l] from ql's nibble and qh's bits 2k, 2k+1, as q6kNEON.
TEXT ·codesQ6_K(SB), NOSPLIT, $0-24
	MOVD w+0(FP), R7
	MOVD q+8(FP), R2
	MOVD n+16(FP), R6
	VMOVI $15, V31.B16
	VMOVI $3, V30.B16
block:
	MOVD R7, R0
	ADD $128, R7, R5
	MOVD $2, R3
half:
	VLD1.P 32(R0), [V0.B16, V1.B16]
	VLD1.P 32(R0), [V2.B16, V3.B16]
	VLD1.P 32(R5), [V4.B16, V5.B16]
	VAND V30.B16, V4.B16, V6.B16
	VAND V30.B16, V5.B16, V7.B16
	VSHL $4, V6.B16, V6.B16
	VSHL $4, V7.B16, V7.B16
	VAND V31.B16, V0.B16, V17.B16
	VAND V31.B16, V1.B16, V18.B16
	Q6CODES(0)
	Q6HIGH(2)
	VAND V31.B16, V2.B16, V17.B16
	VAND V31.B16, V3.B16, V18.B16
	Q6CODES(32)
	Q6HIGH(4)
	VUSHR $4, V0.B16, V17.B16
	VUSHR $4, V1.B16, V18.B16
	Q6CODES(64)
	VUSHR $6, V4.B16, V6.B16
	VUSHR $6, V5.B16, V7.B16
	VSHL $4, V6.B16, V6.B16
	VSHL $4, V7.B16, V7.B16
	VUSHR $4, V2.B16, V17.B16
	VUSHR $4, V3.B16, V18.B16
	Q6CODES(96)
	ADD $128, R2, R2
	SUBS $1, R3, R3
	BNE half
	ADD $210, R7, R7
	SUBS $1, R6, R6
	BNE block
	RET

// The code kernels, halfScales and affine of fast_codes.go.

#define FMLA4S(d, n, m) WORD $(0x4e20cc00 | ((m)<<16) | ((n)<<5) | (d)) // FMLA Vd.4S, Vn.4S, Vm.4S

// func codesNibbles(w, q *byte, tab *[16]byte, n, ts, units int)
TEXT ·codesNibbles(SB), NOSPLIT, $0-48
	MOVD w+0(FP), R0
	MOVD q+8(FP), R1
	MOVD tab+16(FP), R2
	MOVD n+24(FP), R3
	MOVD ts+32(FP), R4
	MOVD units+40(FP), R5
	VLD1 (R2), [V30.B16]
	VMOVI $15, V31.B16
	SUB R5<<4, R4, R6 // the runs' offset: ts − 16·units
block:
	ADD R6, R0, R7
	MOVD R5, R8
unit:
	VLD1.P 16(R7), [V0.B16]
	VAND V31.B16, V0.B16, V1.B16
	VUSHR $4, V0.B16, V2.B16
	VTBL V1.B16, [V30.B16], V1.B16
	VTBL V2.B16, [V30.B16], V2.B16
	VST1.P [V1.B16, V2.B16], 32(R1)
	SUBS $1, R8, R8
	BNE unit
	ADD R4, R0, R0
	SUBS $1, R3, R3
	BNE block
	RET

// FIELD2(sh, off) stores the 2-bit fields at bit sh (2 to 6) of the 32
// bytes of V0, V1 at R1 + off (V31: 3 in each byte).
#define FIELD2(sh, off) \
	VUSHR $sh, V0.B16, V2.B16; VUSHR $sh, V1.B16, V3.B16; \
	VAND V31.B16, V2.B16, V2.B16; VAND V31.B16, V3.B16, V3.B16; \
	ADD $off, R1, R4; VST1 [V2.B16, V3.B16], (R4)

// FIELD2LOW(off) is FIELD2 at bit 0.
#define FIELD2LOW(off) \
	VAND V31.B16, V0.B16, V2.B16; VAND V31.B16, V1.B16, V3.B16; \
	ADD $off, R1, R4; VST1 [V2.B16, V3.B16], (R4)

// func codes2Bit(w, q *byte, n, ts, off int)
TEXT ·codes2Bit(SB), NOSPLIT, $0-40
	MOVD w+0(FP), R0
	MOVD q+8(FP), R1
	MOVD n+16(FP), R3
	MOVD ts+24(FP), R6
	MOVD off+32(FP), R7
	ADD R7, R0, R0
	VMOVI $3, V31.B16
loop:
	MOVD R0, R5
	VLD1.P 32(R5), [V0.B16, V1.B16]
	FIELD2LOW(0)
	FIELD2(2, 32)
	FIELD2(4, 64)
	FIELD2(6, 96)
	VLD1 (R5), [V0.B16, V1.B16]
	FIELD2LOW(128)
	FIELD2(2, 160)
	FIELD2(4, 192)
	FIELD2(6, 224)
	ADD R6, R0, R0
	ADD $256, R1, R1
	SUBS $1, R3, R3
	BNE loop
	RET

// HIGH3(off) ORs bit 2 of V4, V5 (hm moved by the caller; V30: 4 in each
// byte) into V2, V3 and stores them at R1 + off.
#define HIGH3(off) \
	VAND V30.B16, V4.B16, V4.B16; VAND V30.B16, V5.B16, V5.B16; \
	VORR V4.B16, V2.B16, V2.B16; VORR V5.B16, V3.B16, V3.B16; \
	ADD $off, R1, R4; VST1 [V2.B16, V3.B16], (R4)

// LOW3(sh) sets V2, V3 to the 2-bit fields at bit sh (2 to 6) of V0, V1.
#define LOW3(sh) \
	VUSHR $sh, V0.B16, V2.B16; VUSHR $sh, V1.B16, V3.B16; \
	VAND V31.B16, V2.B16, V2.B16; VAND V31.B16, V3.B16, V3.B16

// HM3R(r) sets V4, V5 to hm (V16, V17) shifted right by r (1 to 5).
#define HM3R(r) VUSHR $r, V16.B16, V4.B16; VUSHR $r, V17.B16, V5.B16

// func codesQ3_K(w, q *byte, n int)  hm (V16, V17) at 0, qs at 32
TEXT ·codesQ3_K(SB), NOSPLIT, $0-24
	MOVD w+0(FP), R0
	MOVD q+8(FP), R1
	MOVD n+16(FP), R3
	VMOVI $3, V31.B16
	VMOVI $4, V30.B16
loop:
	MOVD R0, R5
	VLD1.P 32(R5), [V16.B16, V17.B16]
	VLD1.P 32(R5), [V0.B16, V1.B16]
	VAND V31.B16, V0.B16, V2.B16
	VAND V31.B16, V1.B16, V3.B16
	VSHL $2, V16.B16, V4.B16
	VSHL $2, V17.B16, V5.B16
	HIGH3(0)
	LOW3(2)
	VSHL $1, V16.B16, V4.B16
	VSHL $1, V17.B16, V5.B16
	HIGH3(32)
	LOW3(4)
	VORR V16.B16, V16.B16, V4.B16
	VORR V17.B16, V17.B16, V5.B16
	HIGH3(64)
	LOW3(6)
	HM3R(1)
	HIGH3(96)
	VLD1 (R5), [V0.B16, V1.B16]
	VAND V31.B16, V0.B16, V2.B16
	VAND V31.B16, V1.B16, V3.B16
	HM3R(2)
	HIGH3(128)
	LOW3(2)
	HM3R(3)
	HIGH3(160)
	LOW3(4)
	HM3R(4)
	HIGH3(192)
	LOW3(6)
	HM3R(5)
	HIGH3(224)
	ADD $110, R0, R0
	ADD $256, R1, R1
	SUBS $1, R3, R3
	BNE loop
	RET

// FIELD5(off) ORs bit 4 of V4, V5 (qh moved by the caller; V30: 16 in
// each byte) into V2, V3 and stores them at R1 + off.
#define FIELD5(off) \
	VAND V30.B16, V4.B16, V4.B16; VAND V30.B16, V5.B16, V5.B16; \
	VORR V4.B16, V2.B16, V2.B16; VORR V5.B16, V3.B16, V3.B16; \
	ADD $off, R1, R4; VST1 [V2.B16, V3.B16], (R4)

// LOW5 and HIGH5 set V2, V3 to the low and high nibbles of V0, V1.
#define LOW5 VAND V31.B16, V0.B16, V2.B16; VAND V31.B16, V1.B16, V3.B16
#define HIGH5 VUSHR $4, V0.B16, V2.B16; VUSHR $4, V1.B16, V3.B16

// QH5L(s) and QH5R(s) set V4, V5 to qh (V16, V17) shifted left or right.
#define QH5L(s) VSHL $s, V16.B16, V4.B16; VSHL $s, V17.B16, V5.B16
#define QH5R(s) VUSHR $s, V16.B16, V4.B16; VUSHR $s, V17.B16, V5.B16

// func codesQ5_K(w, q *byte, n int)  qh (V16, V17) at 16, qs at 48
TEXT ·codesQ5_K(SB), NOSPLIT, $0-24
	MOVD w+0(FP), R0
	MOVD q+8(FP), R1
	MOVD n+16(FP), R3
	VMOVI $15, V31.B16
	VMOVI $16, V30.B16
loop:
	ADD $16, R0, R5
	VLD1.P 32(R5), [V16.B16, V17.B16]
	VLD1.P 32(R5), [V0.B16, V1.B16]
	LOW5
	QH5L(4)
	FIELD5(0)
	HIGH5
	QH5L(3)
	FIELD5(32)
	VLD1.P 32(R5), [V0.B16, V1.B16]
	LOW5
	QH5L(2)
	FIELD5(64)
	HIGH5
	QH5L(1)
	FIELD5(96)
	VLD1.P 32(R5), [V0.B16, V1.B16]
	LOW5
	VORR V16.B16, V16.B16, V4.B16
	VORR V17.B16, V17.B16, V5.B16
	FIELD5(128)
	HIGH5
	QH5R(1)
	FIELD5(160)
	VLD1 (R5), [V0.B16, V1.B16]
	LOW5
	QH5R(2)
	FIELD5(192)
	HIGH5
	QH5R(3)
	FIELD5(224)
	ADD $176, R0, R0
	ADD $256, R1, R1
	SUBS $1, R3, R3
	BNE loop
	RET

// func halfScales(w *byte, s *float32, n, ts int)
TEXT ·halfScales(SB), NOSPLIT, $0-32
	MOVD w+0(FP), R0
	MOVD s+8(FP), R1
	MOVD n+16(FP), R3
	MOVD ts+24(FP), R4
loop:
	VLD1R (R0), [V0.H8]
	FCVTL4S(0, 0)
	FMOVS F0, (R1)
	ADD R4, R0, R0
	ADD $4, R1, R1
	SUBS $1, R3, R3
	BNE loop
	RET

// CODES16 sets V2..V5 to the 16 codes at R0 (advanced) minus the offset
// (V31), as float32.
#define CODES16 \
	VLD1.P 16(R0), [V0.B16]; \
	UXTL8H(6, 0); UXTL28H(7, 0); \
	UXTL4S(2, 6); UXTL24S(3, 6); UXTL4S(4, 7); UXTL24S(5, 7); \
	VSUB V31.S4, V2.S4, V2.S4; VSUB V31.S4, V3.S4, V3.S4; \
	VSUB V31.S4, V4.S4, V4.S4; VSUB V31.S4, V5.S4, V5.S4; \
	SCVTF4S(2, 2); SCVTF4S(3, 3); SCVTF4S(4, 4); SCVTF4S(5, 5)

// func affine(q *byte, s, m *float32, y *float32, groups, glen, off int)
TEXT ·affine(SB), NOSPLIT, $0-56
	MOVD q+0(FP), R0
	MOVD s+8(FP), R1
	MOVD m+16(FP), R2
	MOVD y+24(FP), R3
	MOVD groups+32(FP), R4
	MOVD glen+40(FP), R5
	LSR $4, R5, R5
	MOVD off+48(FP), R6
	VDUP R6, V31.S4
	CBZ R2, nomin
withmin:
	VLD1R.P 4(R1), [V16.S4]
	VLD1R.P 4(R2), [V17.S4]
	MOVD R5, R7
minstep:
	CODES16
	VORR V17.B16, V17.B16, V8.B16
	VORR V17.B16, V17.B16, V9.B16
	VORR V17.B16, V17.B16, V10.B16
	VORR V17.B16, V17.B16, V11.B16
	FMLA4S(8, 2, 16)
	FMLA4S(9, 3, 16)
	FMLA4S(10, 4, 16)
	FMLA4S(11, 5, 16)
	VST1.P [V8.S4, V9.S4, V10.S4, V11.S4], 64(R3)
	SUBS $1, R7, R7
	BNE minstep
	SUBS $1, R4, R4
	BNE withmin
	RET
nomin:
	VLD1R.P 4(R1), [V16.S4]
	MOVD R5, R7
step:
	CODES16
	MUL4(2, 16)
	VST1.P [V2.S4, V3.S4, V4.S4, V5.S4], 64(R3)
	SUBS $1, R7, R7
	BNE step
	SUBS $1, R4, R4
	BNE nomin
	RET
