package nn

import "math"

// softmaxFunc is one step of the online softmax over a block of keyBlock
// (64) keys for rows query rows (softmaxTileGeneric).
type softmaxFunc func(s *float32, rows int, lim *int32, scale float32, m *float32, l *float32, alpha *float32)

// softmaxTileGeneric advances the online softmax of rows query rows by one
// block of 64 keys. Row r of s (64 scores, 64 floats apart) has lim[r]
// valid keys (0..64; the rest are masked: causal attention, or keys past
// the window, whose scores may be anything). With
// v = s·scale over the valid keys, it sets
//
//	m' = max(m, max v)           the running maximum
//	alpha = e^(m - m')           how much the earlier terms shrink
//	p = e^(v - m')               written over s, 0 for masked keys
//	l' = l·alpha + Σp            (fused multiply-add)
//
// A row with no valid key gets p = 0 and alpha = 1 and keeps m and l. The
// 64-term sum adds (keys j + j+16) + (j+32 + j+48), then halves the 16
// partial sums three times, and a final pair: the order of the vector
// kernels.
func softmaxTileGeneric(sp *float32, rows int, limp *int32, scale float32, mp *float32, lp *float32, alphap *float32) {
	if rows == 0 {
		return
	}
	s := unsafeSlice(sp, rows*keyBlock)
	lim := unsafeSlice(limp, rows)
	m, l, alpha := unsafeSlice(mp, rows), unsafeSlice(lp, rows), unsafeSlice(alphap, rows)
	for r := range rows {
		row := s[r*keyBlock : (r+1)*keyBlock]
		valid := int(lim[r])
		if valid == 0 {
			clear(row)
			alpha[r] = 1
			continue
		}
		var v [keyBlock]float32
		bm := float32(math.Inf(-1))
		for j := range keyBlock {
			v[j] = row[j] * scale
			if j < valid {
				bm = max32(bm, v[j])
			}
		}
		mn := max32(bm, m[r]) + 0 // +0 for -0: which zero a max keeps depends on the order
		corr := exp32(m[r] - mn)
		m[r] = mn
		var t [16]float32
		exps(row[:valid], v[:valid], mn)
		clear(row[valid:])
		for j := range 16 {
			t[j] = (row[j] + row[j+16]) + (row[j+32] + row[j+48])
		}
		for j := range 8 {
			t[j] += t[j+8]
		}
		for j := range 4 {
			t[j] += t[j+4]
		}
		t[0] += t[2]
		t[1] += t[3]
		sum := t[0] + t[1]
		l[r] = fma32(l[r], corr, sum)
		alpha[r] = corr
	}
}

// max32 is the larger of a and b; NaNs propagate.
func max32(a, b float32) float32 {
	if a != a || b > a {
		return b
	}
	return a
}
