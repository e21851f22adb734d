package nn

import (
	"math"
	"math/big"
)

// glibc's sinf and cosf (ARM's optimized routines, as glibc ≥ 2.28 builds
// them for x86-64 machines with FMA: every multiply-add fused), which
// llama.cpp's RoPE calls. They are not correctly rounded (up to 0.56 ulp
// off), so float32(math.Cos(x)) differs from them on about one argument
// in a hundred; the int8 mode needs their exact bits (ggml.go).

// sincosfTab is glibc's __sincosf_table[0]; entry 1 is the same with the
// cosine coefficients negated.
var sincosfTab = struct {
	sign               [4]float64
	hpiInv, hpi        float64
	c0, c1, c2, c3, c4 float64
	s1, s2, s3         float64
}{
	sign:   [4]float64{1, -1, -1, 1},
	hpiInv: 0x1.45F306DC9C883p+23,
	hpi:    0x1.921FB54442D18p0,
	c0:     0x1p0, c1: -0x1.ffffffd0c621cp-2, c2: 0x1.55553e1068f19p-5, c3: -0x1.6c087e89a359dp-10, c4: 0x1.99343027bf8c3p-16,
	s1: -0x1.555545995a603p-3, s2: 0x1.1107605230bc4p-7, s3: -0x1.994eb3774cf24p-13,
}

// invPio4 is 2/π in bits, 8 new bits per entry (glibc's __inv_pio4).
var invPio4 = [24]uint32{
	0xa2, 0xa2f9, 0xa2f983, 0xa2f9836e,
	0xf9836e4e, 0x836e4e44, 0x6e4e4415, 0x4e441529,
	0x441529fc, 0x1529fc27, 0x29fc2757, 0xfc2757d1,
	0x2757d1f5, 0x57d1f534, 0xd1f534dd, 0xf534ddc0,
	0x34ddc0db, 0xddc0db62, 0xc0db6295, 0xdb629599,
	0x6295993c, 0x95993c43, 0x993c4390, 0x3c439041,
}

func abstop12(x float32) uint32 { return math.Float32bits(x) >> 20 & 0x7ff }

// sinfPoly is glibc's sinf_poly: the sine polynomial for even n, the
// cosine (negated when neg) for odd n.
func sinfPoly(x, x2 float64, neg bool, n int) float32 {
	t := &sincosfTab
	if n&1 == 0 {
		x3 := x * x2
		s1 := math.FMA(x2, t.s3, t.s2)
		x7 := x3 * x2
		s := math.FMA(x3, t.s1, x)
		return float32(math.FMA(x7, s1, s))
	}
	c0, c1, c2, c3, c4 := t.c0, t.c1, t.c2, t.c3, t.c4
	if neg {
		c0, c1, c2, c3, c4 = -c0, -c1, -c2, -c3, -c4
	}
	x4 := x2 * x2
	cc2 := math.FMA(x2, c4, c3)
	cc1 := math.FMA(x2, c1, c0)
	x6 := x4 * x2
	c := math.FMA(x4, c2, cc1)
	return float32(math.FMA(x6, cc2, c))
}

func reduceFast(x float64) (float64, int) {
	r := x * sincosfTab.hpiInv
	n := (int32(r) + 0x800000) >> 24
	return math.FMA(-float64(n), sincosfTab.hpi, x), int(n)
}

func reduceLarge(xi uint32) (float64, int) {
	arr := invPio4[(xi>>26)&15:]
	shift := (xi >> 23) & 7
	xi = (xi&0xffffff | 0x800000) << shift
	res0 := uint64(xi * arr[0])
	res1 := uint64(xi) * uint64(arr[4])
	res2 := uint64(xi) * uint64(arr[8])
	res0 = res2>>32 | res0<<32
	res0 += res1
	n := (res0 + 1<<61) >> 62
	res0 -= n << 62
	return float64(int64(res0)) * 0x1.921FB54442D18p-62, int(n)
}

// libcSinf is glibc's sinf.
func libcSinf(y float32) float32 { return libcSinCos(y, false) }

// libcCosf is glibc's cosf.
func libcCosf(y float32) float32 { return libcSinCos(y, true) }

func libcSinCos(y float32, cos bool) float32 {
	x := float64(y)
	odd := 0
	if cos {
		odd = 1
	}
	switch a := abstop12(y); {
	case a < abstop12(0x1.921FB6p-1):
		if a < abstop12(0x1p-12) {
			if cos {
				return 1
			}
			return y
		}
		return sinfPoly(x, x*x, false, odd)
	case a < abstop12(120):
		x, n := reduceFast(x)
		s := sincosfTab.sign[n&3]
		return sinfPoly(x*s, x*x, n&2 != 0, n^odd)
	case a < abstop12(float32(math.Inf(1))):
		xi := math.Float32bits(y)
		sign := int(xi >> 31)
		x, n := reduceLarge(xi)
		s := sincosfTab.sign[(n+sign)&3]
		return sinfPoly(x*s, x*x, (n+sign)&2 != 0, n^odd)
	}
	return float32(math.NaN())
}

// LibmData is the data of glibc's expf and logf that LibcExpf and LibcLogf
// use (exp2fTab, logfTab, logfPoly), for the device's ports: the CUDA
// backend generates kernels/libmdata.cuh from it.
func LibmData() (exp2f [32]uint64, logf [16][2]float64, logfP [3]float64) {
	return exp2fTab, logfTab, logfPoly
}

// exp2fTab is glibc's __exp2f_data.tab (N = 32): the bits of 2^(i/32)
// minus i << 47.
var exp2fTab = func() (t [32]uint64) {
	r := new(big.Float).SetPrec(256).SetInt64(2)
	for range 5 {
		r.Sqrt(r)
	}
	p := new(big.Float).SetPrec(256).SetInt64(1)
	for i := range 32 {
		f, _ := p.Float64()
		t[i] = math.Float64bits(f) - uint64(i)<<47
		p.Mul(p, r)
	}
	return t
}()

// ggmlSoftplus is ggml-cpu's softplus (SOFTPLUS, and SSM_SCAN's of dt): x
// for x > 20, else logf(1 + expf(x)) with glibc's logf and expf.
func ggmlSoftplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return LibcLogf(1 + LibcExpf(x))
}

// glibc's expf: z = x·N/ln 2 (N = 32) rounded by adding expfShift, the
// polynomial's coefficients, and the bounds past which it returns +Inf
// and 0.
const (
	expfInvLn2N = 0x1.71547652b82fep+0 * 32
	expfShift   = 0x1.8p+52
	expfC0      = 0x1.c6af84b912394p-5 / 32 / 32 / 32
	expfC1      = 0x1.ebfce50fac4f3p-3 / 32 / 32
	expfC2      = 0x1.62e42ff0c52d6p-1 / 32
	expfHigh    = 0x1.62e42ep6
	expfLow     = -0x1.9fe368p6
)

// LibcExpf is glibc's expf (ARM's optimized routines, FMA build): not
// correctly rounded (0.502 ulp), which float32(math.Exp(x)) is.
func LibcExpf(x float32) float32 {
	xd := float64(x)
	if abstop12(x) >= abstop12(88) {
		switch {
		case x == float32(math.Inf(-1)):
			return 0
		case abstop12(x) >= abstop12(float32(math.Inf(1))):
			return x + x
		case x > expfHigh:
			return float32(math.Inf(1))
		case x < expfLow:
			return 0
		}
	}
	// glibc's FMA build contracts z = x·N/ln 2 into both of its uses (GCC
	// fuses a product whose every use is a sum): k = fma(N/ln 2, x, shift)
	// and r = fma(N/ln 2, x, -k). Rounding z first, as the source reads,
	// differs from glibc 2.43 on 2 of the 2^32 inputs (32.564632 and
	// -63.09946); fused, on none.
	kd := math.FMA(expfInvLn2N, xd, expfShift)
	ki := math.Float64bits(kd)
	kd -= expfShift
	return exp2Tail(ki, math.FMA(expfInvLn2N, xd, -kd), [3]float64{expfC0, expfC1, expfC2})
}

// libcExpfK4 are the vector kernels' constants (libcExpfAVX512 and
// libcExpfAVX2 in gen), 4 copies each: expf's, 1, its bounds, the table's
// index mask and +Inf.
var libcExpfK4 = func() (k [10][4]float64) {
	fill4(k[:], expfInvLn2N, expfShift, expfC0, expfC1, expfC2, 1, expfLow, expfHigh, math.Float64frombits(31), math.Inf(1))
	return k
}()

// LibcExpfsVector reports whether LibcExpfs runs vector kernels on this
// CPU (AVX2, AVX-512): a caller that would skip some exponentials in a
// plain loop takes that loop otherwise.
func LibcExpfsVector() bool { return kern.libcExpf != nil }

// LibcExpfs sets dst[i] = LibcExpf(x[i]), the same bits, in lanes of 8
// float64 on AVX-512 and of 4 on AVX2 (dst may alias x).
func LibcExpfs(dst, x []float32) {
	check("LibcExpfs", len(dst), len(x))
	i := 0
	if f := kern.libcExpf; f != nil && len(x) >= 16 {
		i = len(x) &^ 15
		f(&dst[0], &x[0], i, &libcExpfK4, &exp2fTab[0])
	}
	for ; i < len(x); i++ {
		dst[i] = LibcExpf(x[i])
	}
}

// exp2Tail is the tail glibc's expf and powf share (N = 32): ki the bits
// of k + shift (k the integer nearest expf's x·N/ln 2, or the multiple of
// 1/N nearest powf's y·log2 x, rounded by adding the shift), 2^(k/N) from
// exp2fTab, times the polynomial c of the remainder r (fused as glibc's
// FMA build), rounded to float32.
func exp2Tail(ki uint64, r float64, c [3]float64) float32 {
	s := math.Float64frombits(exp2fTab[ki%32] + ki<<(52-5))
	zz := math.FMA(c[0], r, c[1])
	y := math.FMA(c[2], r, 1)
	y = math.FMA(zz, r*r, y)
	return float32(y * s)
}

// logfTab and logfPoly are glibc's __logf_data (ARM's optimized routines):
// per subinterval of [0x3f330000, 2·0x3f330000) 1/c and log(c), and the
// log1p polynomial's coefficients past the first.
var logfTab = [16][2]float64{
	{0x1.661ec79f8f3bep+0, -0x1.57bf7808caadep-2}, {0x1.571ed4aaf883dp+0, -0x1.2bef0a7c06ddbp-2},
	{0x1.49539f0f010bp+0, -0x1.01eae7f513a67p-2}, {0x1.3c995b0b80385p+0, -0x1.b31d8a68224e9p-3},
	{0x1.30d190c8864a5p+0, -0x1.6574f0ac07758p-3}, {0x1.25e227b0b8eap+0, -0x1.1aa2bc79c81p-3},
	{0x1.1bb4a4a1a343fp+0, -0x1.a4e76ce8c0e5ep-4}, {0x1.12358f08ae5bap+0, -0x1.1973c5a611cccp-4},
	{0x1.0953f419900a7p+0, -0x1.252f438e10c1ep-5}, {0x1p+0, 0x0p+0},
	{0x1.e608cfd9a47acp-1, 0x1.aa5aa5df25984p-5}, {0x1.ca4b31f026aap-1, 0x1.c5e53aa362eb4p-4},
	{0x1.b2036576afce6p-1, 0x1.526e57720db08p-3}, {0x1.9c2d163a1aa2dp-1, 0x1.bc2860d22477p-3},
	{0x1.886e6037841edp-1, 0x1.1058bc8a07ee1p-2}, {0x1.767dcf5534862p-1, 0x1.4043057b6ee09p-2},
}

var logfPoly = [3]float64{-0x1.00ea348b88334p-2, 0x1.5575b0be00b6ap-2, -0x1.ffffef20a4123p-2}

// LibcLogf is glibc's logf (ARM's optimized routines, FMA build): not
// correctly rounded (0.82 ulp), which float32(math.Log(x)) is; ggml's
// softplus calls it, and llama.cpp's float32 constants (deepseek2's score
// scale).
func LibcLogf(x float32) float32 {
	const ln2 = 0x1.62e42fefa39efp-1
	ix := math.Float32bits(x)
	if ix == 0x3f800000 {
		return 0
	}
	if ix-0x00800000 >= 0x7f800000-0x00800000 {
		switch {
		case ix<<1 == 0:
			return float32(math.Inf(-1))
		case ix == 0x7f800000:
			return x
		case ix&0x80000000 != 0 || ix<<1 >= 0xff000000:
			return float32(math.NaN())
		}
		ix = math.Float32bits(x*0x1p23) - 23<<23 // subnormal: normalize
	}
	tmp := ix - 0x3f330000
	i := tmp >> (23 - 4) % 16
	k := int32(tmp) >> 23
	z := float64(math.Float32frombits(ix - tmp&0xff800000))
	r := math.FMA(z, logfTab[i][0], -1)
	y0 := logfTab[i][1] + float64(float64(k)*ln2)
	r2 := r * r
	y := math.FMA(logfPoly[1], r, logfPoly[2])
	y = math.FMA(logfPoly[0], r2, y)
	y = math.FMA(y, r2, y0+r)
	return float32(y)
}

// powfLog2Tab and powfLog2Poly are glibc's __powf_log2_data (ARM's
// optimized routines): per subinterval 1/c and log2(c), and the log1p/ln2
// polynomial.
var powfLog2Tab = [16][2]float64{
	{0x1.661ec79f8f3bep+0, -0x1.efec65b963019p-2}, {0x1.571ed4aaf883dp+0, -0x1.b0b6832d4fca4p-2},
	{0x1.49539f0f010bp+0, -0x1.7418b0a1fb77bp-2}, {0x1.3c995b0b80385p+0, -0x1.39de91a6dcf7bp-2},
	{0x1.30d190c8864a5p+0, -0x1.01d9bf3f2b631p-2}, {0x1.25e227b0b8eap+0, -0x1.97c1d1b3b7afp-3},
	{0x1.1bb4a4a1a343fp+0, -0x1.2f9e393af3c9fp-3}, {0x1.12358f08ae5bap+0, -0x1.960cbbf788d5cp-4},
	{0x1.0953f419900a7p+0, -0x1.a6f9db6475fcep-5}, {0x1p+0, 0x0p+0},
	{0x1.e608cfd9a47acp-1, 0x1.338ca9f24f53dp-4}, {0x1.ca4b31f026aap-1, 0x1.476a9543891bap-3},
	{0x1.b2036576afce6p-1, 0x1.e840b4ac4e4d2p-3}, {0x1.9c2d163a1aa2dp-1, 0x1.40645f0c6651cp-2},
	{0x1.886e6037841edp-1, 0x1.88e9c2c1b9ff8p-2}, {0x1.767dcf5534862p-1, 0x1.ce0a44eb17bccp-2},
}

var powfLog2Poly = [5]float64{0x1.27616c9496e0bp-2, -0x1.71969a075c67ap-2, 0x1.ec70a6ca7baddp-2, -0x1.7154748bef6c8p-1, 0x1.71547652ab82bp0}

// libcPowf is glibc's powf (ARM's optimized routines, FMA build) for a
// positive normal x and a finite y, the arguments llama.cpp gives it (RoPE's
// θ scale, ALiBi's slopes): log2(x) by table and polynomial, times y, then
// 2^(y·log2 x) as LibcExpf's tail. Not correctly rounded (0.82 ulp), and
// float32(math.Pow(x, y)) differs from it on some arguments.
func libcPowf(x, y float32) float32 {
	const off = 0x3f330000
	ix := math.Float32bits(x)
	if y == 0 || ix == 0x3f800000 {
		return 1
	}
	tmp := ix - off
	i := tmp >> (23 - 4) % 16
	top := tmp & 0xff800000
	k := int32(top) >> 23
	z := float64(math.Float32frombits(ix - top))
	a := &powfLog2Poly
	r := math.FMA(z, powfLog2Tab[i][0], -1)
	y0 := powfLog2Tab[i][1] + float64(k)
	r2 := r * r
	p0 := math.FMA(a[0], r, a[1])
	p := math.FMA(a[2], r, a[3])
	r4 := r2 * r2
	q := math.FMA(a[4], r, y0)
	q = math.FMA(p, r2, q)
	ylogx := float64(float64(y) * math.FMA(p0, r4, q)) // rounded, as in glibc (its other uses keep it so)
	switch {
	case ylogx > 0x1.fffffffd1d571p+6:
		return float32(math.Inf(1))
	case ylogx <= -150:
		return 0
	}
	const shift = 0x1.8p+52 / 32 // steps of 1/N
	kd := ylogx + shift
	ki := math.Float64bits(kd)
	kd -= shift
	return exp2Tail(ki, ylogx-kd, [3]float64{0x1.c6af84b912394p-5, 0x1.ebfce50fac4f3p-3, 0x1.62e42ff0c52d6p-1})
}
