package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// forEachLevel runs f once per kernel level this CPU has, generic first,
// and restores the level in use.
func forEachLevel(t testing.TB, f func(t testing.TB, l Level)) {
	prev := CurrentLevel()
	defer SetLevel(prev)
	for _, l := range Levels() {
		SetLevel(l)
		f(t, l)
	}
}

func TestFMA32(t *testing.T) {
	// Cases where float32(a*b+c in float64) rounds twice and differs from
	// a single rounding, and ordinary ones, checked against big-float
	// arithmetic done by hand: a·b + c exactly, then rounded once.
	r := rand.New(rand.NewPCG(11, 12))
	for i := range 200000 {
		a, b, c := fmaCase(r, i)
		got := fma32(a, b, c)
		want := fmaExact(a, b, c)
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%v, %v, %v) = %v, want %v", a, b, c, got, want)
		}
	}
	if v := fma32(float32(math.Inf(1)), 0, 1); !math.IsNaN(float64(v)) {
		t.Errorf("inf·0+1 = %v, want NaN", v)
	}
	if v := fma32(3e38, 10, 0); !math.IsInf(float64(v), 1) {
		t.Errorf("overflow: %v", v)
	}
}

// fmaCase returns the i-th of a sequence of a, b, c that try a fused
// multiply-add: ordinary values, a·b and -c nearly cancelling, ties that a
// second rounding would break, and any finite bits (subnormal, huge and
// overflowing results).
func fmaCase(r *rand.Rand, i int) (a, b, c float32) {
	a, b, c = float32(r.NormFloat64()), float32(r.NormFloat64()), float32(r.NormFloat64())
	if i%3 == 0 { // make a·b and -c nearly cancel
		c = -a * b * (1 + float32(r.NormFloat64())*0x1p-20)
	}
	if i%7 == 0 { // ties after a product of short mantissas
		a = float32(1 + r.IntN(1<<12))
		b = float32(1+r.IntN(1<<12)) * 0x1p-10
		c = float32(r.IntN(1<<24)) * 0x1p-30
	}
	if i%11 == 0 {
		a, b, c = randBits(r), randBits(r), randBits(r)
	}
	return a, b, c
}

// TestGemmFMA holds every level's tiles to a single rounding on fmaCase's
// operands, one case per call (every element of an m × nr tile the same):
// GemmAcc's chain step C + a·b, and Gemm's last step alpha·C + s (k = 1
// and B's row of ones make the chain's s = c·1 + 0).
func TestGemmFMA(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for i := range 20000 {
		a, b, c := fmaCase(r, i)
		m, nr := 1+i%12, 16*(1+i/12%2)
		rows := func(v float32) []float32 { return slices.Repeat([]float32{v}, m) }
		tile := func(v float32) []float32 { return slices.Repeat([]float32{v}, m*nr) }
		step, last := fmaExact(a, b, c), fmaExact(a, b, fmaExact(c, 1, 0))
		forEachLevel(t, func(t testing.TB, l Level) {
			got := tile(c)
			GemmAcc(m, nr, rows(a), 1, tile(b)[:nr], nr, 1, got, nr)
			for e, v := range got {
				if math.Float32bits(v) != math.Float32bits(step) {
					t.Fatalf("GemmAcc m=%d nr=%d at %v: %v + %v·%v = %v at %d, want %v", m, nr, l, c, a, b, v, e, step)
				}
			}
			got = tile(a)
			Gemm(m, nr, rows(c), 1, tile(1)[:nr], nr, 1, got, nr, rows(b))
			for e, v := range got {
				if math.Float32bits(v) != math.Float32bits(last) {
					t.Fatalf("Gemm m=%d nr=%d at %v: %v·%v + %v = %v at %d, want %v", m, nr, l, b, a, c, v, e, last)
				}
			}
		})
	}
}

// randBits returns a finite float32 of uniformly random bits.
func randBits(r *rand.Rand) float32 {
	for {
		if f := math.Float32frombits(r.Uint32()); !math.IsInf(float64(f), 0) && f == f {
			return f
		}
	}
}

// fmaExact rounds a·b + c to float32 once, with exact rational arithmetic
// on scaled integers (the operands are finite float32s).
func fmaExact(a, b, c float32) float32 {
	// a·b + c = (ma·mb·2^(ea+eb) + mc·2^ec); everything fits in a big.Float
	// of 200 bits of precision exactly.
	return bigFMA(a, b, c)
}

// naiveMatMul is x (n, k) @ w (r, k)ᵀ in float64, and Σ|x·w| per output
// (the scale of float32 rounding error).
func naiveMatMul(x []float32, n, k int, w []float32, r int) (out, mag []float64) {
	out, mag = make([]float64, n*r), make([]float64, n*r)
	for t := range n {
		for j := range r {
			for i := range k {
				p := float64(x[t*k+i]) * float64(w[j*k+i])
				out[t*r+j] += p
				mag[t*r+j] += math.Abs(p)
			}
		}
	}
	return out, mag
}

// checkMatMul compares out (n, stride) columns [0, r) with the float64
// product. A float32 sum of k products is within k·2⁻²⁴·Σ|xᵢwᵢ| of exact.
func checkMatMul(t testing.TB, name string, out []float32, stride int, x []float32, n, k int, w []float32, r int) {
	t.Helper()
	want, mag := naiveMatMul(x, n, k, w, r)
	for ti := range n {
		for j := range r {
			got := float64(out[ti*stride+j])
			if d := math.Abs(got - want[ti*r+j]); d > float64(k+1)*0x1p-24*mag[ti*r+j] {
				t.Fatalf("%s n=%d k=%d: out[%d,%d] = %v, want %v (diff %g)", name, n, k, ti, j, got, want[ti*r+j], d)
			}
		}
	}
}

// gemmCase runs Gemm on random data at every level and checks that each
// level gives the generic kernel's bits, and that those are within float32
// rounding of the float64 product.
func gemmCase(t testing.TB, r *rand.Rand, m, nr, k, lda, ldb, ldc int, withAlpha bool) {
	a := randVec(r, (m-1)*lda+k)
	b := randVec(r, max(1, (k-1)*ldb+nr))
	c0 := randVec(r, (m-1)*ldc+nr)
	var alpha []float32
	if withAlpha {
		alpha = randVec(r, m)
	}
	var ref []float32
	forEachLevel(t, func(t testing.TB, l Level) {
		c := slices.Clone(c0)
		Gemm(m, nr, a, lda, b, ldb, k, c, ldc, alpha)
		if ref == nil {
			ref = c
			// Check the generic result against float64.
			w := make([]float32, nr*k) // B transposed: row j = column j
			for p := range k {
				for j := range nr {
					w[j*k+p] = b[p*ldb+j]
				}
			}
			x := make([]float32, m*k)
			for i := range m {
				copy(x[i*k:], a[i*lda:i*lda+k])
			}
			got := make([]float32, m*nr)
			for i := range m {
				for j := range nr {
					v := c[i*ldc+j]
					if alpha != nil {
						v -= alpha[i] * c0[i*ldc+j]
					}
					got[i*nr+j] = v
				}
			}
			if alpha == nil {
				checkMatMul(t, fmt.Sprintf("Gemm %v", l), got, nr, x, m, k, w, nr)
			}
			return
		}
		for i := range c {
			if math.Float32bits(c[i]) != math.Float32bits(ref[i]) {
				t.Fatalf("Gemm m=%d nr=%d k=%d alpha=%v at %v: c[%d] = %v, generic %v", m, nr, k, withAlpha, l, i, c[i], ref[i])
			}
		}
	})
}

func TestGemm(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, nr := range []int{16, 32} {
		for _, m := range []int{1, 2, 3, 5, 11, 12, 13, 25} {
			for _, k := range []int{0, 1, 7, 64, 257} {
				gemmCase(t, r, m, nr, k, k+3, nr+5, nr+1, false)
				gemmCase(t, r, m, nr, k, max(k, 1), nr, nr, true)
			}
		}
	}
}

// TestGemmAcc checks GemmAcc at every level against its definition: each
// element of C continues one fma32 chain over k from its value in C.
func TestGemmAcc(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, nr := range []int{16, 32} {
		for _, m := range []int{1, 2, 4, 5, 12, 13, 25} {
			for _, k := range []int{0, 1, 7, 64} {
				lda, ldb, ldc := k+3, nr+5, nr+1
				a := randVec(r, (m-1)*lda+k)
				b := randVec(r, max(1, (k-1)*ldb+nr))
				c0 := randVec(r, (m-1)*ldc+nr)
				want := slices.Clone(c0)
				for i := range m {
					for j := range nr {
						for p := range k {
							want[i*ldc+j] = fma32(a[i*lda+p], b[p*ldb+j], want[i*ldc+j])
						}
					}
				}
				forEachLevel(t, func(t testing.TB, l Level) {
					c := slices.Clone(c0)
					GemmAcc(m, nr, a, lda, b, ldb, k, c, ldc)
					for i := range c {
						if math.Float32bits(c[i]) != math.Float32bits(want[i]) {
							t.Fatalf("GemmAcc m=%d nr=%d k=%d at %v: c[%d] = %v, want %v", m, nr, k, l, i, c[i], want[i])
						}
					}
				})
			}
		}
	}
}

// FuzzGemm checks every level against the generic kernel on arbitrary
// shapes and values.
func FuzzGemm(f *testing.F) {
	f.Add(uint8(1), uint8(1), uint64(1), false, false)
	f.Add(uint8(12), uint8(64), uint64(2), true, true)
	f.Add(uint8(7), uint8(33), uint64(3), false, true)
	f.Fuzz(func(t *testing.T, m8, k8 uint8, seed uint64, wide, withAlpha bool) {
		m, k := int(m8%30)+1, int(k8)
		nr := 16
		if wide {
			nr = 32
		}
		r := rand.New(rand.NewPCG(seed, 7))
		gemmCase(t, r, m, nr, k, k+int(seed%3), nr+int(seed%5), nr, withAlpha)
	})
}

func TestPack32(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, k := range []int{1, 15, 16, 17, 48, 100} {
		for _, rows := range []int{1, 15, 16, 17, 31, 32} {
			src := randVec(r, rows*k)
			forEachLevel(t, func(t testing.TB, l Level) {
				dst := randVec(r, 32*k)
				pack32(dst, src, k, rows)
				for p := range k {
					for j := range 32 {
						want := float32(0)
						if j < rows {
							want = src[j*k+p]
						}
						if dst[p*32+j] != want {
							t.Fatalf("k=%d rows=%d level %v: dst[%d][%d] = %v, want %v", k, rows, l, p, j, dst[p*32+j], want)
						}
					}
				}
			})
		}
	}
}

// TestPack32Words holds pack32Words (kernels.transpose16's tiles where the
// level has them, plain Go past them) to its definition at every level:
// dst[p·32 + r] = src[r·k + p] for panels of 16 and 32 rows (the tiles)
// and of other counts, k with and without a partial tile.
func TestPack32Words(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, k := range []int{1, 15, 16, 17, 48, 100} {
		for _, rows := range []int{1, 7, 16, 20, 31, 32} {
			src := make([]uint32, rows*k)
			for i := range src {
				src[i] = r.Uint32()
			}
			forEachLevel(t, func(t testing.TB, l Level) {
				dst := make([]uint32, 32*k)
				pack32Words(dst, src, k, rows)
				for p := range k {
					for row := range rows {
						if got, want := dst[p*32+row], src[row*k+p]; got != want {
							t.Fatalf("level %v, k=%d rows=%d: dst[%d·32 + %d] = %#x, want %#x", l, k, rows, p, row, got, want)
						}
					}
				}
			})
		}
	}
}
