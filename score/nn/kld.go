package nn

import "math"

// KLD sums Kullback-Leibler divergence over a vocabulary for every scored
// token of a run with a reference model: Σ p_i (log p_i - log q_i), an
// exponential per logit. With Go's math.Exp that cost about as much as a
// small model's forward pass per token (1.2 ms for 152k logits); KLD
// computes it in float64 by one formula in 8 lanes, the same operations in
// the plain loop and the AVX-512 and AVX2 kernels, so every level gives
// the same bits:
//
//	lp = p_i - plse,  d = lp - (q_i - qlse)
//	x = max(lp, -708);  k = round-to-even(x·log2 e);  r = x - k·ln2 (two FMAs)
//	e = Σ_{n<=13} r^n/n!  by Horner's FMAs, times 2^k    (e^lp, 1e-16 relative)
//	lane[i mod 8] = fma(e, d, lane[i mod 8])
//
// then the lanes summed as ((0+4) + (1+5)) + ((2+6) + (3+7)), and the last
// len mod 8 terms one by one after it. Terms below e^-708 are e^-708 times
// d (at most 1e-307 against a sum of order 1e-3).

// kldK4 holds the kernels' constants, each 4 times (AVX2's memory
// operands): the floor -708, log2 e, ln 2 high and low, the coefficients
// 1/13! .. 1/2!, 1, tanhMagic and tanhMagicBias's bits.
var kldK4 = func() (k [kldKN][4]float64) {
	v := []float64{kldFloor, tanhLog2e, tanhLn2Hi, tanhLn2Lo}
	v = append(v, tanhCoef[:]...)
	fill4(k[:], append(v, 1, tanhMagic, math.Float64frombits(tanhMagicBias))...)
	return k
}()

const (
	kldKN    = 19   // constants in kldK4
	kldFloor = -708 // e^x stays a normal float64 above it
)

// exp64x8 sets x[j] = e^x[j] by KLD's formula, for the 8 values at once
// (independent chains the CPU overlaps, where one Horner chain at a time
// would wait on each FMA).
func exp64x8(x *[8]float64) {
	var k, r, e [8]float64
	for j := range 8 {
		k[j], r[j] = expReduce(max(x[j], kldFloor))
		e[j] = tanhCoef[0]
	}
	for _, c := range tanhCoef[1:] {
		for j := range 8 {
			e[j] = math.FMA(e[j], r[j], c)
		}
	}
	for j := range 8 {
		q := math.FMA(math.FMA(e[j], r[j], 1), r[j], 1)
		x[j] = q * pow2(k[j])
	}
}

// kldTerms sets e to e^lp and d to lp - lq for the logits p and q (at
// most 8), lp = p - plse and lq = q - qlse.
func kldTerms(e, d *[8]float64, p, q []float32, plse, qlse float64) {
	for j := range p {
		lp := float64(p[j]) - plse
		e[j], d[j] = lp, lp-(float64(q[j])-qlse)
	}
	exp64x8(e)
}

// KLD returns KL(p || q) for p = softmax(pz) and q = softmax(qz) given
// their log-sum-exps, by the formula above (len(qz) >= len(pz)).
func KLD(pz []float32, plse float64, qz []float32, qlse float64) float64 {
	qz = qz[:len(pz)]
	n := len(pz) &^ 7
	var lanes [8]float64
	var e, d [8]float64
	if f := kern.kld; f != nil && n > 0 {
		f(&pz[0], &qz[0], n, plse, qlse, &kldK4, &lanes)
	} else {
		for i := 0; i < n; i += 8 {
			kldTerms(&e, &d, pz[i:i+8], qz[i:i+8], plse, qlse)
			for j := range 8 {
				lanes[j] = math.FMA(e[j], d[j], lanes[j])
			}
		}
	}
	s := ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]))
	kldTerms(&e, &d, pz[n:], qz[n:], plse, qlse)
	for j := range len(pz) - n {
		s = math.FMA(e[j], d[j], s)
	}
	return s
}
