package main

import "fmt"

// The int8 modes' integer kernels for arm64 CPUs with the dot-product
// extension (FEAT_DotProd: Apple M1 on, Graviton 2 on, Neoverse N1/V1/V2,
// Grace, Ampere Altra): SDOT by element multiplies four weight rows' 4-byte
// words with one 4-byte word of the activations and adds each product of
// four to a 32-bit lane, as VPDPBUSD does on x86 for the same panels
// (pack32Words: word (i/4)·32 + r holds elements i..i+3 of row r).
//
// SDOT takes signed bytes where VPDPBUSD takes the weights unsigned: a
// biased weight q in [0, 255] goes in as q ^ 0x80 = q - 128 (the panels
// come flipped: kernels.flipBias), and the group's sum of activations
// times 128 - off is added back, so every integer sum is the plain Go
// kernels' exact one. The float32 operations are theirs in their order
// (SCVTF, FMUL, FMLA, FMLS: one rounding each), so each kernel gives its
// plain Go twin's bits. Each kernel takes 8 weight rows of a 32-row panel
// (package nn's lanesSlices, tiledSlices, kRepackedSlices and int8Slices
// run it on the four); the accumulators of 8 rows' 8 lanes fill half the
// register file.

// The integer instructions Go's assembler does not name (neon's table).
const (
	scvtf = 0x4e21d800 // SCVTF Vd.4S, Vn.4S
	mla   = 0x4ea09400 // MLA Vd.4S, Vn.4S, Vm.4S
	mul   = 0x4ea09c00 // MUL Vd.4S, Vn.4S, Vm.4S
)

// sdot prints SDOT Vd.4S, Vn.16B, Vm.4B[idx] as a WORD: lane l of d adds
// the four products of bytes 4l..4l+3 of n with bytes 4·idx..4·idx+3 of m.
func sdot(d, n, m, idx int) {
	word := uint32(0x4f80e000) | uint32(m)<<16 | uint32(idx&1)<<21 | uint32(idx>>1)<<11 | uint32(n)<<5 | uint32(d)
	p("\tWORD $0x%08x // SDOT V%d.4S, V%d.16B, V%d.4B[%d]", word, d, n, m, idx)
}

// intBias is the register holding 128 + negoff in every 32-bit lane.
const intBias = 29

// intBiasSetup loads intBias (negoff from the argument at off).
func intBiasSetup(off int) {
	p("\tMOVD negoff+%d(FP), R15", off)
	p("\tADD $128, R15, R15")
	p("\tVDUP R15, V%d.S4", intBias)
}

// intChunk adds to the 8 rows' sums in t, t+1 the products of their next
// word of weights (loaded into w, w+1 from R3, post-incremented by R9, the
// panel's 128 bytes a word) with word idx of the activations in x.
func intChunk(t, w, x, idx int) {
	p("\tVLD1.P (R3)(R9), [V%d.B16, V%d.B16]", w, w+1)
	sdot(t, w, x, idx)
	sdot(t+1, w+1, x, idx)
}

// lanesNEON prints lanes{g}NEON, lanesVNNI's loop (lanesFunc) for 8 rows:
// lane s of row r is register 2s + r/4, lane r%4; per block of 32 the
// scales dw·dx of its group(s) in V16-V19, the activations in V20-V21, and
// their sums of four times 128 + negoff in V22-V23, each lane's integer
// started from its sum's broadcast.
func lanesNEON(g int) {
	name := fmt.Sprintf("lanes%dNEON", g)
	p("")
	p("// func %s(x *byte, w *uint32, dw *float32, nb int, negoff int, c *float32, doff, xs4off int)", name)
	p("TEXT ·%s(SB), NOSPLIT, $0-64", name)
	p("\tMOVD x+0(FP), R0")
	p("\tMOVD doff+48(FP), R1")
	p("\tADD R0, R1, R1")
	p("\tMOVD xs4off+56(FP), R2")
	p("\tADD R0, R2, R2")
	p("\tMOVD w+8(FP), R3")
	p("\tMOVD dw+16(FP), R4")
	p("\tMOVD nb+24(FP), R5")
	p("\tMOVD $128, R9")
	intBiasSetup(32)
	zeroNEON(0, 16)
	p("\tCBZ R5, sum")
	p("block:")
	p("\tVLD1R.P 4(R1), [V30.S4]")
	p("\tVLD1 (R4), [V16.S4, V17.S4]")
	if g == 16 {
		p("\tADD $128, R4, R15")
		p("\tVLD1 (R15), [V18.S4, V19.S4]")
	}
	for i := range 32 / g * 2 {
		neon(fmul, 16+i, 16+i, 30)
	}
	p("\tADD $%d, R4, R4", 128*32/g)
	p("\tVLD1.P 32(R0), [V20.B16, V21.B16]")
	p("\tVLD1.P 32(R2), [V22.S4, V23.S4]")
	neon(mul, 22, 22, intBias)
	neon(mul, 23, 23, intBias)
	for st := range 8 {
		p("\tVDUP V%d.S[%d], V26.S4", 22+st/4, st%4)
		p("\tVMOV V26.B16, V27.B16")
		intChunk(26, 24, 20+st/4, st%4)
		neon(scvtf, 26, 26)
		neon(scvtf, 27, 27)
		d := 16
		if g == 16 && st >= 4 {
			d = 18
		}
		p("\tVFMLA V%d.S4, V26.S4, V%d.S4", d, 2*st)
		p("\tVFMLA V%d.S4, V27.S4, V%d.S4", d+1, 2*st+1)
	}
	p("\tSUBS $1, R5, R5")
	p("\tBNE block")
	p("sum:")
	// hsum8: (l0 + l4) + (l2 + l6), (l1 + l5) + (l3 + l7), then their sum.
	for h := range 2 {
		for i := range 4 {
			neon(fadd, 2*i+h, 2*i+h, 2*(4+i)+h)
		}
		neon(fadd, h, h, 4+h)
		neon(fadd, 2+h, 2+h, 6+h)
		neon(fadd, h, h, 2+h)
	}
	p("\tMOVD c+40(FP), R15")
	p("\tVST1 [V0.S4, V1.S4], (R15)")
	p("\tRET")
}

// tiledNEON prints tiled{g}[min]m1NEON, tiledGeneric's order (tiledFunc)
// for 8 rows and one activation row: per super-block the integer sums S in
// V2-V3 (and Σ m·B in V4-V5), per group its T in V6-V7 started from the
// group's Σqx times 128 + negoff, then S += ls·T; per super-block
// acc (V0-V1) = fma(float32(S)·d0 [- dmin·float32(Σ m·B), fused], dx, acc).
func tiledNEON(g int, hasMin bool) {
	name := fmt.Sprintf("tiled%dm1NEON", g)
	if hasMin {
		name = fmt.Sprintf("tiled%dminm1NEON", g)
	}
	p("")
	p("// func %s(x *byte, ldx int, w *uint32, ls *int32, mins *int32, d0 *float32, dm *float32, nb int, negoff int, c *float32, ldc int, doff int, xsoff int)", name)
	p("TEXT ·%s(SB), NOSPLIT, $0-104", name)
	intPointers(88, 96)
	p("\tMOVD d0+40(FP), R6")
	p("\tMOVD dm+48(FP), R7")
	p("\tMOVD nb+56(FP), R8")
	p("\tLSR $3, R8, R8")
	intBiasSetup(64)
	zeroNEON(0, 2)
	p("\tCBZ R8, store")
	p("super:")
	zeroNEON(2, 4)
	for range 256 / g {
		intGroup(g, true)
		intScaleSum(2, 12, 6, "R4")
		if hasMin {
			intScaleSum(4, 14, 16, "R5")
		}
	}
	p("\tVLD1R (R2), [V22.S4]")
	p("\tADD $32, R2, R2")
	p("\tVLD1.P (R6)(R9), [V18.S4, V19.S4]")
	for h := range 2 {
		neon(scvtf, 2+h, 2+h)
		neon(fmul, 2+h, 2+h, 18+h)
	}
	if hasMin {
		p("\tVLD1.P (R7)(R9), [V20.S4, V21.S4]")
		for h := range 2 {
			neon(scvtf, 4+h, 4+h)
			p("\tVFMLS V%d.S4, V%d.S4, V%d.S4", 20+h, 4+h, 2+h)
		}
	}
	p("\tVFMLA V22.S4, V2.S4, V0.S4")
	p("\tVFMLA V22.S4, V3.S4, V1.S4")
	p("\tSUBS $1, R8, R8")
	p("\tBNE super")
	p("store:")
	p("\tMOVD c+72(FP), R15")
	p("\tVST1 [V0.S4, V1.S4], (R15)")
	p("\tRET")
}

// intPointers loads the tiled and repacked kernels' common pointers: the
// record's codes in R0, its Σqx per group in R1 and its scales dx in R2
// (from the offsets' arguments at doff and xsoff), the panel in R3, the
// groups' ls and mins in R4 and R5, and the panel's stride 128 in R9.
func intPointers(doff, xsoff int) {
	p("\tMOVD x+0(FP), R0")
	p("\tMOVD xsoff+%d(FP), R1", xsoff)
	p("\tADD R0, R1, R1")
	p("\tMOVD doff+%d(FP), R2", doff)
	p("\tADD R0, R2, R2")
	p("\tMOVD w+16(FP), R3")
	p("\tMOVD ls+24(FP), R4")
	p("\tMOVD mins+32(FP), R5")
	p("\tMOVD $128, R9")
}

// intGroup computes a group's integers T for 8 rows in V6-V7: its g
// activation codes loaded from R0 (into V10-V11), its Σqx broadcast from R1
// (into V16), and T the sum of the products over the group's words; with
// biased (flipped weights), T started from Σqx times 128 + negoff, else
// (the unsigned weights below 128 of the repacked K-quants) from 0.
func intGroup(g int, biased bool) {
	if g == 32 {
		p("\tVLD1.P 32(R0), [V10.B16, V11.B16]")
	} else {
		p("\tVLD1.P 16(R0), [V10.B16]")
	}
	p("\tVLD1R.P 4(R1), [V16.S4]")
	if biased {
		neon(mul, 6, 16, intBias)
		p("\tVMOV V6.B16, V7.B16")
	} else {
		zeroNEON(6, 2)
	}
	for c := range g / 4 {
		intChunk(6, 8, 10+c/4, c%4)
	}
}

// intScaleSum adds to the 8 rows' integers in s, s+1 the products of the
// group's per-row integers (loaded from ptr into v, v+1, post-incremented
// by the panel's 128 bytes) with t, t+1, or with t's one broadcast when t
// is 16.
func intScaleSum(s, v, t int, ptr string) {
	p("\tVLD1.P (%s)(R9), [V%d.S4, V%d.S4]", ptr, v, v+1)
	t1 := t + 1
	if t == 16 {
		t1 = t
	}
	neon(mla, s, v, t)
	neon(mla, s+1, v+1, t1)
}

// kRepackedNEON prints q4k{pair}m1NEON or q2k{pair}m1NEON,
// kRepackedGeneric's order (kRepackedFunc) for 8 rows and one activation
// row: per super-block sd = dw·dx (V18-V19) and dmin·dx (V20-V21); per
// pair of groups the integer sums Σ ls·T (V2-V3) and Σ m·B (V4-V5), then
// acc (V0-V1) = fma(float32(Σ ls·T), sd, acc) and accm (V24-V25) the
// same of the minima; the output is acc - accm.
func kRepackedNEON(g, pair int) {
	name := fmt.Sprintf("q4k%dm1NEON", pair)
	if g == 16 {
		name = fmt.Sprintf("q2k%dm1NEON", pair)
	}
	p("")
	p("// func %s(x *byte, ldx int, w *uint32, ls *int32, mins *int32, dw *float32, dm *float32, nb int, c *float32, ldc int, doff int, xsoff int)", name)
	p("TEXT ·%s(SB), NOSPLIT, $0-96", name)
	intPointers(80, 88)
	p("\tMOVD dw+40(FP), R6")
	p("\tMOVD dm+48(FP), R7")
	p("\tMOVD nb+56(FP), R8")
	p("\tLSR $3, R8, R8")
	zeroNEON(0, 2)
	zeroNEON(24, 2)
	p("\tCBZ R8, store")
	p("super:")
	p("\tVLD1R (R2), [V22.S4]")
	p("\tADD $32, R2, R2")
	p("\tVLD1.P (R6)(R9), [V18.S4, V19.S4]")
	p("\tVLD1.P (R7)(R9), [V20.S4, V21.S4]")
	for i := range 4 {
		neon(fmul, 18+i, 18+i, 22)
	}
	for range 256 / g / pair {
		zeroNEON(2, 4)
		for range pair {
			intGroup(g, false)
			intScaleSum(2, 12, 6, "R4")
			intScaleSum(4, 14, 16, "R5")
		}
		for h := range 2 {
			neon(scvtf, 2+h, 2+h)
			neon(scvtf, 4+h, 4+h)
			p("\tVFMLA V%d.S4, V%d.S4, V%d.S4", 18+h, 2+h, h)
			p("\tVFMLA V%d.S4, V%d.S4, V%d.S4", 20+h, 4+h, 24+h)
		}
	}
	p("\tSUBS $1, R8, R8")
	p("\tBNE super")
	p("store:")
	neon(fsub, 0, 0, 24)
	neon(fsub, 1, 1, 25)
	p("\tMOVD c+64(FP), R15")
	p("\tVST1 [V0.S4, V1.S4], (R15)")
	p("\tRET")
}

// minSumsNEON prints minSumsNEON, addMinSums's chain for the 32 rows of a
// panel (kernels.minSums): c[r] = Σ m[b·32 + r]·s[b], one FMLA per block
// in order from 0. It needs no dot products.
func minSumsNEON() {
	p("")
	p("// func minSumsNEON(m *float32, s *float32, nb int, c *float32)")
	p("TEXT ·minSumsNEON(SB), NOSPLIT, $0-32")
	p("\tMOVD m+0(FP), R0")
	p("\tMOVD s+8(FP), R1")
	p("\tMOVD nb+16(FP), R2")
	zeroNEON(0, 8)
	p("\tCBZ R2, store")
	p("loop:")
	p("\tVLD1.P 64(R0), [V8.S4, V9.S4, V10.S4, V11.S4]")
	p("\tVLD1.P 64(R0), [V12.S4, V13.S4, V14.S4, V15.S4]")
	p("\tVLD1R.P 4(R1), [V16.S4]")
	for i := range 8 {
		p("\tVFMLA V16.S4, V%d.S4, V%d.S4", 8+i, i)
	}
	p("\tSUBS $1, R2, R2")
	p("\tBNE loop")
	p("store:")
	p("\tMOVD c+24(FP), R15")
	p("\tVST1 [V0.S4, V1.S4, V2.S4, V3.S4], (R15)")
	p("\tADD $64, R15, R15")
	p("\tVST1 [V4.S4, V5.S4, V6.S4, V7.S4], (R15)")
	p("\tRET")
}

// int8NEON prints int8g{g}[min]m1NEON, int8Generic's order (int8Func) for
// 8 rows and one activation row: per group T (V6-V7) from its Σqx times
// 128 + negoff, then f (V0-V1) = fma(float32(T), s·dx, f) and, with
// minima, f = fma(m, ds, f).
func int8NEON(g int, hasMin bool) {
	name := fmt.Sprintf("int8g%dm1NEON", g)
	if hasMin {
		name = fmt.Sprintf("int8g%dminm1NEON", g)
	}
	p("")
	p("// func %s(x *byte, ldx int, w *uint32, s *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff int, xsoff int, dsoff int)", name)
	p("TEXT ·%s(SB), NOSPLIT, $0-96", name)
	p("\tMOVD x+0(FP), R0")
	p("\tMOVD xsoff+80(FP), R1")
	p("\tADD R0, R1, R1")
	p("\tMOVD doff+72(FP), R2")
	p("\tADD R0, R2, R2")
	p("\tMOVD dsoff+88(FP), R6")
	p("\tADD R0, R6, R6")
	p("\tMOVD w+16(FP), R3")
	p("\tMOVD s+24(FP), R4")
	p("\tMOVD mp+32(FP), R5")
	p("\tMOVD nb+40(FP), R8")
	p("\tMOVD $128, R9")
	intBiasSetup(48)
	zeroNEON(0, 2)
	p("\tCBZ R8, store")
	p("block:")
	p("\tVLD1R.P 4(R2), [V22.S4]")
	for range 32 / g {
		intGroup(g, true)
		p("\tVLD1.P (R4)(R9), [V12.S4, V13.S4]")
		for h := range 2 {
			neon(scvtf, 6+h, 6+h)
			neon(fmul, 12+h, 12+h, 22)
			p("\tVFMLA V%d.S4, V%d.S4, V%d.S4", 12+h, 6+h, h)
		}
		if hasMin {
			p("\tVLD1.P (R5)(R9), [V14.S4, V15.S4]")
			p("\tVLD1R.P 4(R6), [V17.S4]")
			p("\tVFMLA V17.S4, V14.S4, V0.S4")
			p("\tVFMLA V17.S4, V15.S4, V1.S4")
		}
	}
	p("\tSUBS $1, R8, R8")
	p("\tBNE block")
	p("store:")
	p("\tMOVD c+56(FP), R15")
	p("\tVST1 [V0.S4, V1.S4], (R15)")
	p("\tRET")
}

// laneSums16NEON prints laneSums16NEON, laneSums's kernel: per block of
// 256, eight accumulators of four int32 lanes (V16-V23), accumulator m
// adding the products of elements 4m..4m+3 of each chunk of 32 (SMLAL of
// the weights' int16 with the activations sign-extended by SXTL), then
// each accumulator's four lanes summed by two rounds of ADDP: exact
// integer sums in any order.
func laneSums16NEON() {
	p("")
	p("// func laneSums16NEON(w *int16, x *int8, n int, s *[8]int32)")
	p("TEXT ·laneSums16NEON(SB), NOSPLIT, $0-32")
	p("\tMOVD w+0(FP), R0")
	p("\tMOVD x+8(FP), R1")
	p("\tMOVD n+16(FP), R2")
	p("\tMOVD s+24(FP), R3")
	p("block:")
	zeroNEON(16, 8)
	p("\tMOVD $8, R4")
	p("chunk:")
	p("\tVLD1.P 32(R1), [V0.B16, V1.B16]")
	p("\tVLD1.P 64(R0), [V6.H8, V7.H8, V8.H8, V9.H8]")
	for i := range 4 {
		sxtl(2+i, i/2, i%2 == 1)
	}
	for m := range 8 {
		smlal(16+m, 6+m/2, 2+m/2, m%2 == 1)
	}
	p("\tSUBS $1, R4, R4")
	p("\tBNE chunk")
	for h := range 2 {
		addp(24, 16+4*h, 17+4*h)
		addp(25, 18+4*h, 19+4*h)
		addp(26+h, 24, 25)
	}
	p("\tVST1.P [V26.S4, V27.S4], 32(R3)")
	p("\tSUBS $1, R2, R2")
	p("\tBNE block")
	p("\tRET")
}

// sxtl prints SXTL Vd.8H, Vn.8B (or with high, SXTL2 from Vn.16B's upper
// half): eight int8 lanes sign-extended to int16 (SSHLL #0).
func sxtl(d, n int, high bool) {
	word, name, from := uint32(0x0f08a400), "SXTL", "8B"
	if high {
		word, name, from = 0x4f08a400, "SXTL2", "16B"
	}
	p("\tWORD $0x%08x // %s V%d.8H, V%d.%s", word|uint32(n)<<5|uint32(d), name, d, n, from)
}

// smlal prints SMLAL Vd.4S, Vn.4H, Vm.4H (or with high, SMLAL2 of the
// upper four int16 lanes): d's int32 lanes add the products lane by lane.
func smlal(d, n, m int, high bool) {
	word, name, from := uint32(0x0e608000), "SMLAL", "4H"
	if high {
		word, name, from = 0x4e608000, "SMLAL2", "8H"
	}
	p("\tWORD $0x%08x // %s V%d.4S, V%d.%s, V%d.%s", word|uint32(m)<<16|uint32(n)<<5|uint32(d), name, d, n, from, m, from)
}

// addp prints ADDP Vd.4S, Vn.4S, Vm.4S: the sums of adjacent int32 lanes,
// n's then m's.
func addp(d, n, m int) {
	p("\tWORD $0x%08x // ADDP V%d.4S, V%d.4S, V%d.4S", 0x4ea0bc00|uint32(m)<<16|uint32(n)<<5|uint32(d), d, n, m)
}
