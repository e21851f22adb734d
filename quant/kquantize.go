package quant

import "math"

// llama.cpp's reference K-quant quantizers (quantize_row_q{2..6}_K_ref and
// their helpers make_qx_quants, make_q3_quants, make_qkx2_quants), followed
// statement by statement in float32. Each float32(a*b) that feeds an addition
// stops the Go compiler from fusing the two into one FMA (the Go spec allows
// fusion; an explicit conversion forbids it), so results do not depend on
// the architecture; ggml's x86-64 build does not fuse either.

// groupMaxEps is ggml's GROUP_MAX_EPS: groups with a smaller largest
// magnitude are treated as all zero.
const groupMaxEps = 1e-15

// nearestInt is ggml's nearest_int: round to nearest, ties to even, by
// adding 1.5*2^23 and reading the low mantissa bits. Valid for
// |f| <= 2^22; out of range (or NaN) it returns some int in
// [-2^22, 2^22), which callers clamp.
func nearestInt(f float32) int32 {
	v := f + 12582912
	return int32(math.Float32bits(v)&0x7fffff) - 0x400000
}

func clampI(v, lo, hi int32) int32 { return max(lo, min(hi, v)) }

func sqrtf(v float32) float32 {
	// Correctly rounded: a float64 square root rounded to float32 is the
	// float32 square root (53 >= 2*24+2).
	return float32(math.Sqrt(float64(v)))
}

// makeQXQuants is make_qx_quants with rmse_type 1 and no importance
// weights (weights x^2): it picks L[i] in [0, 2*nmax) and returns the scale
// such that x[i] ~ scale*(L[i]-nmax), trying 19 candidate scales.
func makeQXQuants(nmax int32, x []float32, L []int8) float32 {
	amax, vmax := absMax(x)
	if amax < groupMaxEps {
		clear(L)
		return 0
	}
	iscale := float32(-nmax) / vmax
	var sumlx, suml2 float32
	for i, v := range x {
		l := clampI(nearestInt(float32(iscale*v)), -nmax, nmax-1)
		L[i] = int8(l + nmax)
		w, fl := float32(v*v), float32(l)
		sumlx += float32(float32(w*v) * fl)
		suml2 += float32(float32(w*fl) * fl)
	}
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := scale * sumlx
	for is := int32(-9); is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(float32(nmax) + float32(0.1*float32(is))) / vmax
		sumlx, suml2 = 0, 0
		for _, v := range x {
			l := clampI(nearestInt(float32(iscale*v)), -nmax, nmax-1)
			w, fl := float32(v*v), float32(l)
			sumlx += float32(float32(w*v) * fl)
			suml2 += float32(float32(w*fl) * fl)
		}
		if suml2 > 0 && float32(sumlx*sumlx) > float32(best*suml2) {
			for i, v := range x {
				L[i] = int8(nmax + clampI(nearestInt(float32(iscale*v)), -nmax, nmax-1))
			}
			scale = sumlx / suml2
			best = scale * sumlx
		}
	}
	return scale
}

// makeQ3Quants is make_q3_quants with do_rmse: a start from the largest
// magnitude, then up to five passes moving single quants while the weighted
// (x^2) fit improves. L[i] ends in [0, 2*nmax).
func makeQ3Quants(nmax int32, x []float32, L []int8) float32 {
	amax, vmax := absMax(x)
	if amax < groupMaxEps {
		clear(L)
		return 0
	}
	iscale := float32(-nmax) / vmax
	var sumlx, suml2 float32
	for i, v := range x {
		l := clampI(nearestInt(float32(iscale*v)), -nmax, nmax-1)
		L[i] = int8(l)
		w, fl := float32(v*v), float32(l)
		sumlx += float32(float32(w*v) * fl)
		suml2 += float32(float32(w*fl) * fl)
	}
	for range 5 {
		changed := 0
		for i, v := range x {
			w, li := float32(v*v), float32(L[i])
			slx := sumlx - float32(float32(w*v)*li)
			if slx > 0 {
				sl2 := suml2 - float32(float32(w*li)*li)
				nl := clampI(nearestInt(float32(v*sl2)/slx), -nmax, nmax-1)
				if nl != int32(L[i]) {
					fn := float32(nl)
					slx += float32(float32(w*v) * fn)
					sl2 += float32(float32(w*fn) * fn)
					if sl2 > 0 && float32(float32(slx*slx)*suml2) > float32(float32(sumlx*sumlx)*sl2) {
						L[i] = int8(nl)
						sumlx, suml2 = slx, sl2
						changed++
					}
				}
			}
		}
		if changed == 0 {
			break
		}
	}
	for i := range L {
		L[i] += int8(nmax)
	}
	if suml2 > 0 {
		return sumlx / suml2
	}
	return 0
}

// makeQKX2Quants is make_qkx2_quants: fit x[i] ~ scale*L[i] - theMin with
// L[i] in [0, nmax] and theMin >= 0, minimizing the weighted squared (or,
// with useMAD, absolute) error over nstep+1 candidate scales.
func makeQKX2Quants(nmax int32, x, weights []float32, L, Laux []uint8,
	rmin, rdelta float32, nstep int, useMAD bool) (scale, theMin float32) {
	n := len(x)
	weights, L, Laux = weights[:n], L[:n], Laux[:n]
	lo, hi := x[0], x[0]
	sumW := weights[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < n; i++ {
		if x[i] < lo {
			lo = x[i]
		}
		if x[i] > hi {
			hi = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		clear(L)
		return 0, -lo
	}
	iscale := float32(nmax) / (hi - lo)
	scale = 1 / iscale
	var bestErr float32
	for i, v := range x {
		l := clampI(nearestInt(float32(iscale*(v-lo))), 0, nmax)
		L[i] = uint8(l)
		diff := float32(scale*float32(l)) + lo - v
		if useMAD {
			diff = absf(diff)
		} else {
			diff = diff * diff
		}
		bestErr += float32(weights[i] * diff)
	}
	if nstep < 1 {
		return scale, -lo
	}
	for is := 0; is <= nstep; is++ {
		iscale = (rmin + float32(rdelta*float32(is)) + float32(nmax)) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i, v := range x {
			l := clampI(nearestInt(float32(iscale*(v-lo))), 0, nmax)
			Laux[i] = uint8(l)
			w, fl := weights[i], float32(l)
			sumL += float32(w * fl)
			sumL2 += float32(float32(w*fl) * fl)
			sumXL += float32(float32(w*fl) * v)
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var curErr float32
			for i, v := range x {
				diff := float32(thisScale*float32(Laux[i])) + thisMin - v
				if useMAD {
					diff = absf(diff)
				} else {
					diff = diff * diff
				}
				curErr += float32(weights[i] * diff)
			}
			if curErr < bestErr {
				copy(L, Laux)
				bestErr = curErr
				scale, lo = thisScale, thisMin
			}
		}
	}
	return scale, -lo
}

// packQ2 packs 256 2-bit values as Q2_K and Q3_K store them: byte 32h+l
// holds L[128h+l], L[128h+l+32], L[128h+l+64], L[128h+l+96] in bits 0-1,
// 2-3, 4-5, 6-7.
func packQ2(L []uint8, qs []byte) {
	L, qs = L[:256], qs[:64]
	for h := range 2 {
		j := 128 * h
		for l := range 32 {
			qs[32*h+l] = L[j+l] | L[j+l+32]<<2 | L[j+l+64]<<4 | L[j+l+96]<<6
		}
	}
}

func quantQ2_K(src []float32, dst []byte) {
	var (
		L            [256]uint8
		Laux         [16]uint8
		weights      [16]float32
		scales, mins [16]float32
	)
	const q4scale = 15
	for len(src) >= 256 {
		x, b := src[:256], dst[:84]
		var maxScale, maxMin float32
		for j := range 16 {
			xs := x[16*j:][:16]
			for l, v := range xs {
				weights[l] = absf(v)
			}
			scales[j], mins[j] = makeQKX2Quants(3, xs, weights[:], L[16*j:], Laux[:], -0.5, 0.1, 15, true)
			if scales[j] > maxScale {
				maxScale = scales[j]
			}
			if mins[j] > maxMin {
				maxMin = mins[j]
			}
		}
		sc := b[0:16]
		if maxScale > 0 {
			iscale := q4scale / maxScale
			for j := range 16 {
				sc[j] = uint8(nearestInt(float32(iscale * scales[j])))
			}
			putF16(b[80:], maxScale/q4scale)
		} else {
			clear(sc)
			putF16(b[80:], 0)
		}
		if maxMin > 0 {
			iscale := q4scale / maxMin
			for j := range 16 {
				sc[j] |= uint8(nearestInt(float32(iscale*mins[j])) << 4)
			}
			putF16(b[82:], maxMin/q4scale)
		} else {
			putF16(b[82:], 0)
		}
		d, dmin := f16(b[80:]), f16(b[82:])
		for j := range 16 {
			dl := d * float32(sc[j]&15)
			if dl == 0 {
				continue
			}
			ml := float32(dmin * float32(sc[j]>>4)) // exact anyway: 11+4 bits
			for i := 16 * j; i < 16*j+16; i++ {
				L[i] = uint8(clampI(nearestInt((x[i]+ml)/dl), 0, 3))
			}
		}
		packQ2(L[:], b[16:80])
		src, dst = src[256:], dst[84:]
	}
}

func quantQ3_K(src []float32, dst []byte) {
	var (
		L      [256]int8
		U      [256]uint8
		scales [16]float32
	)
	for len(src) >= 256 {
		x, b := src[:256], dst[:110]
		var maxScale, amax float32
		for j := range 16 {
			scales[j] = makeQ3Quants(4, x[16*j:][:16], L[16*j:][:16])
			if s := absf(scales[j]); s > amax {
				amax, maxScale = s, scales[j]
			}
		}
		sc := b[96:108]
		clear(sc)
		if maxScale != 0 {
			iscale := -32 / maxScale
			for j := range 16 {
				l := int8(nearestInt(float32(iscale * scales[j]))) // int8_t l = nearest_int(...)
				l = int8(clampI(int32(l), -32, 31) + 32)
				if j < 8 {
					sc[j] = uint8(l & 0xF)
				} else {
					sc[j-8] |= uint8(l&0xF) << 4
				}
				l >>= 4
				sc[j%4+8] |= uint8(l) << (2 * (j / 4))
			}
			putF16(b[108:], 1/iscale)
		} else {
			putF16(b[108:], 0)
		}
		d := f16(b[108:])
		for j := range 16 {
			var low uint8
			if j < 8 {
				low = sc[j] & 0xF
			} else {
				low = sc[j-8] >> 4
			}
			s := int32(low|(sc[8+j%4]>>(2*(j/4))&3)<<4) - 32
			dl := d * float32(s)
			if dl == 0 {
				continue
			}
			for i := 16 * j; i < 16*j+16; i++ {
				L[i] = int8(clampI(nearestInt(x[i]/dl), -4, 3) + 4)
			}
		}
		hm := b[0:32]
		clear(hm)
		for j := range 256 {
			// The high bit of quant j goes to bit j/32 of hmask[j%32].
			if L[j] > 3 {
				hm[j%32] |= 1 << (j / 32)
				L[j] -= 4
			}
			U[j] = uint8(L[j])
		}
		packQ2(U[:], b[32:96])
		src, dst = src[256:], dst[110:]
	}
}

// quantK4Scales does the part of the Q4_K and Q5_K reference quantizers
// they share: per 32-weight sub-block fits with make_qkx2_quants, the 6-bit
// scales and minima packed into hdr[4:16] with f16 d and dmin in hdr[0:4],
// and the final quants L[i] in [0, nmax] against the stored scales.
func quantK4Scales(x []float32, L []uint8, hdr []byte, nmax int32, rmin float32, nstep int) {
	var (
		Laux         [32]uint8
		weights      [32]float32
		scales, mins [8]float32
	)
	var maxScale, maxMin float32
	for j := range 8 {
		xs := x[32*j:][:32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := sqrtf(sumX2 / 32)
		for l, v := range xs {
			weights[l] = avX + absf(v)
		}
		scales[j], mins[j] = makeQKX2Quants(nmax, xs, weights[:], L[32*j:], Laux[:], rmin, 0.1, nstep, false)
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxMin {
			maxMin = mins[j]
		}
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	sc := hdr[4:16]
	for j := range 8 {
		ls := min(63, uint8(nearestInt(float32(invScale*scales[j]))))
		lm := min(63, uint8(nearestInt(float32(invMin*mins[j]))))
		if j < 4 {
			sc[j] = ls
			sc[j+4] = lm
		} else {
			sc[j+4] = ls&0xF | (lm&0xF)<<4
			sc[j-4] |= (ls >> 4) << 6
			sc[j] |= (lm >> 4) << 6
		}
	}
	putF16(hdr[0:], maxScale/63)
	putF16(hdr[2:], maxMin/63)
	d, dmin := f16(hdr), f16(hdr[2:])
	for j := range 8 {
		s, m := scaleMinK4(j, sc)
		dl := d * float32(s)
		if dl == 0 {
			continue
		}
		ml := float32(dmin * float32(m)) // exact anyway: 11+6 bits
		for i := 32 * j; i < 32*j+32; i++ {
			L[i] = uint8(clampI(nearestInt((x[i]+ml)/dl), 0, nmax))
		}
	}
}

func quantQ4_K(src []float32, dst []byte) {
	var L [256]uint8
	for len(src) >= 256 {
		x, b := src[:256], dst[:144]
		quantK4Scales(x, L[:], b[0:16], 15, -1, 20)
		qs := b[16:144]
		for c := range 4 {
			for l := range 32 {
				qs[32*c+l] = L[64*c+l] | L[64*c+l+32]<<4
			}
		}
		src, dst = src[256:], dst[144:]
	}
}

func quantQ5_K(src []float32, dst []byte) {
	var L [256]uint8
	for len(src) >= 256 {
		x, b := src[:256], dst[:176]
		quantK4Scales(x, L[:], b[0:16], 31, -0.5, 15)
		qh, qs := b[16:48], b[48:176]
		clear(qh)
		for c := range 4 {
			m1, m2 := uint8(1)<<(2*c), uint8(2)<<(2*c)
			for l := range 32 {
				l1, l2 := L[64*c+l], L[64*c+l+32]
				if l1 > 15 {
					l1 -= 16
					qh[l] |= m1
				}
				if l2 > 15 {
					l2 -= 16
					qh[l] |= m2
				}
				qs[32*c+l] = l1 | l2<<4
			}
		}
		src, dst = src[256:], dst[176:]
	}
}

func quantQ6_K(src []float32, dst []byte) {
	var (
		L      [256]int8
		scales [16]float32
	)
	for len(src) >= 256 {
		x, b := src[:256], dst[:210]
		src, dst = src[256:], dst[210:]
		var maxScale, maxAbs float32
		for ib := range 16 {
			s := makeQXQuants(32, x[16*ib:][:16], L[16*ib:][:16])
			scales[ib] = s
			if a := absf(s); a > maxAbs {
				maxAbs, maxScale = a, s
			}
		}
		if maxAbs < groupMaxEps {
			clear(b) // f16 zero is all zero bits
			continue
		}
		iscale := -128 / maxScale
		putF16(b[208:], 1/iscale)
		sc := b[192:208]
		for ib := range 16 {
			sc[ib] = uint8(int8(min(127, nearestInt(float32(iscale*scales[ib])))))
		}
		d := f16(b[208:])
		for j := range 16 {
			dl := d * float32(int8(sc[j]))
			if dl == 0 {
				continue
			}
			for i := 16 * j; i < 16*j+16; i++ {
				L[i] = int8(clampI(nearestInt(x[i]/dl), -32, 31) + 32)
			}
		}
		ql, qh := b[0:128], b[128:192]
		for h := range 2 {
			j := 128 * h
			for l := range 32 {
				q1, q2 := uint8(L[j+l]), uint8(L[j+l+32])
				q3, q4 := uint8(L[j+l+64]), uint8(L[j+l+96])
				ql[64*h+l] = q1&0xF | (q3&0xF)<<4
				ql[64*h+l+32] = q2&0xF | (q4&0xF)<<4
				qh[32*h+l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
			}
		}
	}
}
