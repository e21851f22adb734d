package nn

import (
	"fmt"
	"math"
	"os"
	"strings"
	"unsafe"

	"ppl.dev/quant"
)

//go:generate sh -c "go run ./gen > kernels_amd64.s && go run ./gen -decl > kernels_decl_amd64.go && go run ./gen -arm64 > kernels_arm64.s && go run ./gen -arm64 -decl > kernels_decl_arm64.go"

// Level names a set of kernels, one per class of CPU. Every level computes
// the same operations in the same order as the plain Go kernels (Generic),
// so all levels give the same bits; the tests hold them to that. The amd64
// levels are ordered, each running on the CPUs of the ones above it; NEON
// is arm64's only level.
type Level int

const (
	Generic    Level = iota // plain Go, any CPU
	AVX2                    // AVX2 and FMA (Haswell, Zen 1-3)
	AVX512                  // AVX-512 F, BW, DQ, VL (Skylake-X)
	AVX512VNNI              // AVX-512 with VNNI integer dot products (Ice Lake, Zen 4 and 5), and VDPBF16PS where the CPU has AVX512-BF16 (Zen 4 and 5, Sapphire Rapids)
	NEON                    // arm64's Advanced SIMD (every arm64 CPU), and the int8 modes' integer products where it has the dot-product extension (FEAT_DotProd): see kernels_arm64.go
)

var levelNames = [...]string{"generic", "avx2", "avx512", "avx512vnni", "neon"}

func (l Level) String() string {
	if l >= 0 && int(l) < len(levelNames) {
		return levelNames[l]
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// ParseLevel reads a level's name.
func ParseLevel(s string) (Level, error) {
	for i, n := range levelNames {
		if strings.EqualFold(s, n) {
			return Level(i), nil
		}
	}
	return 0, fmt.Errorf("unknown kernel level %q (want %s)", s, strings.Join(levelNames[:], ", "))
}

// EnvLevel is the environment variable that caps the kernel level, for
// tests and benchmarks of the slower paths: PPL_CPU_KERNELS=generic forces
// plain Go on any CPU.
const EnvLevel = "PPL_CPU_KERNELS"

// maxLevel is the best level this CPU runs (set by the architecture's init).
var maxLevel = Generic

// kern is the kernel set in use.
var kern = &generic

// Levels returns the levels this CPU can run, slowest first.
func Levels() []Level {
	out := []Level{Generic}
	for l := Generic + 1; l <= maxLevel; l++ {
		if levelKernels[l] != nil {
			out = append(out, l)
		}
	}
	return out
}

// IntegerVectors says whether level l has vector kernels for the int8
// modes' integer products on this CPU (the amd64 levels; NEON where the
// CPU has the dot-product extension); elsewhere (generic, NEON without
// it) they run in plain Go, far slower than the fp32 mode's products.
func (l Level) IntegerVectors() bool {
	return l >= 0 && int(l) < len(levelKernels) && levelKernels[l] != nil && levelKernels[l].lanes[0] != nil
}

// CurrentLevel returns the level in use.
func CurrentLevel() Level { return kern.level }

// SetLevel selects the kernels of level l (or the best this CPU has below
// it) and returns the previous level. It is for tests and benchmarks and
// must not be called while a forward pass runs.
func SetLevel(l Level) Level {
	prev := kern.level
	l = min(l, maxLevel)
	for ; l > Generic && levelKernels[l] == nil; l-- {
	}
	if l == Generic {
		kern = &generic
	} else {
		kern = levelKernels[l]
	}
	// quant's vector decoders have levels of their own.
	switch l {
	case AVX512, AVX512VNNI:
		quant.SetLevel(quant.AVX512)
	case AVX2:
		quant.SetLevel(quant.AVX2)
	case NEON:
		quant.SetLevel(quant.NEON)
	default:
		quant.SetLevel(quant.Generic)
	}
	return prev
}

// levelKernels holds the architecture's kernel sets by level.
var levelKernels [NEON + 1]*kernels

// initLevel picks the best level, capped by $PPL_CPU_KERNELS.
func initLevel() {
	l := maxLevel
	if s := os.Getenv(EnvLevel); s != "" {
		if want, err := ParseLevel(s); err == nil {
			l = want
		} else {
			fmt.Fprintf(os.Stderr, "nn: $%s: %v; using %v\n", EnvLevel, err, maxLevel)
		}
	}
	SetLevel(l)
}

// kernels is one level's set. gemm[nr/16-1][m-1] computes an m-row tile of
// nr columns (see gemmGeneric).
type kernels struct {
	level   Level
	gemm    [2][]gemmFunc
	gemmAcc [2][]gemmFunc // as gemm, the chains starting from C (GemmAcc)
	softmax softmaxFunc
	// transpose16, if set, transposes tiles of 16 × 16 32-bit elements:
	// dst[c·dstStride + r] = src[r·srcStride + c], r < 16, c < 16·tiles.
	transpose16 func(dst *uint32, dstStride int, src *uint32, srcStride int, tiles int)
	// swiglu and expSum, if set, are swiglu32Generic and expSumGeneric for
	// n a multiple of 16.
	swiglu func(out, gate, up *float32, n int)
	expSum func(x *float32, n int, m float32) float64
	// exps, if set, is exps's loop for n a multiple of 16, for the levels
	// whose softmax, swiglu and expSum are the plain Go ones.
	exps func(dst, x *float32, n int, m float32)
	// sumSquares and scaleRow, if set, are the loops of rmsRow for n a
	// multiple of 16 and 8.
	sumSquares func(x *float32, n int) float64
	scaleRow   func(out, x, w *float32, n int, scale float64)
	// maxFinite, if set, is the largest of n floats (a multiple of 16) and
	// whether all are finite.
	maxFinite func(x *float32, n int) (float32, bool)
	// scaleMax, if set, is scaleMaxGeneric for n a multiple of 16.
	scaleMax func(dst, src *float32, n int, scale float32) float32
	// int8 holds the int8 tile kernels by group (32, 16) and minimum
	// (without, with): see int8Kernels.
	int8 [4][]int8Func
	// flipBias says the lanes, tiled and int8 kernels take their panels'
	// bytes with the bias flipped, q ^ 0x80 (packCodes), for instructions
	// that multiply signed bytes only (NEON's SDOT).
	flipBias bool
	// int8Wide says the int8 kernels take int16: the panel holds the
	// weights' signed integers (q - Offset) as int16 pairs, and the
	// activations are read as int16 (the record's q16), for CPUs without
	// VNNI (VPMADDWD multiplies two pairs where VPDPBUSD multiplies four
	// bytes).
	int8Wide bool
	// quantQ80 and quantQ8K, if set, are quantQ80Generic for nb blocks of
	// 32 and quantQ8KGeneric for nb blocks of 256, writing into a record.
	quantQ80 func(x *float32, nb int, rec *byte, dOff, xs16Off int)
	quantQ8K func(x *float32, nb int, rec *byte, dOff, xs16Off int)
	// roundF16, if set, rounds n floats (a multiple of 16) to f16 and back.
	roundF16 func(dst, x *float32, n int)
	// lanes, if set, are the lane-order loops (panelLanes) for groups of
	// 32 (Q8_0) and 16 (NVFP4): see lanesFunc.
	lanes [2]lanesFunc
	// ternary, if set, is panelTernary's kernel (lanesFunc's signature:
	// see ternaryVNNI in gen).
	ternary lanesFunc
	// q1 and q2, if set, are panelQ1_0's and panelLanes's Q2_0 kernels
	// (lanesFunc's signature: see q1LanesVNNI, q2LanesVNNI, q1LanesAVX2
	// and pairLanesAVX2 in gen); pairs is panelLanes's kernel for IQ4_NL
	// and MXFP4 not repacked, their even and odd blocks of 32 in two sets
	// of lanes (nb even: see pairLanesAVX2).
	q1, q2, pairs lanesFunc
	// laneSums16, if set, is laneSums over n blocks of 256.
	laneSums16 func(w *int16, x *int8, n int, s *[8]int32)
	// minSums, if set, is addMinSums's chain for the 32 rows of a panel:
	// c[r] = Σ m[b·32 + r]·s[b], one FMA per block b in order from 0.
	minSums func(m, s *float32, nb int, c *float32)
	// tiled holds the tiled kernels (ggml_tiled.go) by group (32, 16) and
	// minimum (without, with): see tiledKernels. Index m-1 computes m rows.
	tiled [4][]tiledFunc
	// tiledAMX holds tiled's kernels in llama.cpp's AMX kernels' order
	// (tiledGeneric with amx): the level's own, which take the codes as
	// flipBias says, or none (panelTiledOrder then takes generic's, on
	// the codes unflipped).
	tiledAMX [4][]tiledFunc
	// tiledNarrow, if set, is tiled's kernels for weights below 64
	// (Int8Format.Max), which multiply them without widening (AVX2).
	tiledNarrow [4][]tiledFunc
	// kRepacked holds the Q4_K and Q2_K kernels in the repacked GEMM's and
	// GEMV's orders (ggml_kquants.go: kRepackedVariants): index m-1
	// computes m rows.
	kRepacked [4][]kRepackedFunc
	// dotF32, if set, is dotLanes in the AVX-512 build's lanes for n a
	// multiple of 64, dotF32x8 in the AVX2 build's for n a multiple of 32.
	dotF32, dotF32x8 func(x, w *float32, n int) float32
	// dotLanes16, if set, is dotLanes16Generic for n a multiple of 16:
	// entry m-1 multiplies one row w with m rows of x (ldx apart).
	dotLanes16 [4]func(w, x *float32, ldx, n int, out *float32)
	// dotF16, if set, is dotF32's order (ggml_vec_dot_f16's in the
	// AVX-512 build) for n a multiple of 64: entry m-1 multiplies one row w
	// with m rows of x (ldx apart), into out[0:m] as float64.
	dotF16 [4]func(w, x *float32, ldx, n int, out *float64)
	// dotBF16, if set, is dotBF16Generic's AVX-512 build's part for n a
	// multiple of 64, on rows in bf16Pairs's order: entry m-1 multiplies
	// one row w with m rows of x, into out[0:m] (the two accumulators'
	// sum in float64); dotBF16x8 the AVX2 build's part for n a multiple of
	// 32, in order.
	dotBF16   [4]func(w, x *float32, ldx, n int, out *float64)
	dotBF16x8 func(w, x *float32, n int) float32
	// dotBF16Seq, if set, is dotBF16Generic's AVX-512 part for n a
	// multiple of 64 on rows in order (not bf16Pairs's), for levels without
	// dotBF16: the two accumulators' reduce16s summed in float64.
	dotBF16Seq func(w, x *float32, n int) float64
	// dotBF16Raw, if set, is dotBF16's sums by the instruction itself
	// (VDPBF16PS, AVX512-BF16) on the bf16 values in order.
	dotBF16Raw [4]func(w, x *uint16, ldx, n int, out *float64)
	// ggmlExpf, if set, is ggmlExpf of n floats (a multiple of 16);
	// ggmlExpf8, ggmlExpfAVX2 of n floats (a multiple of 8).
	ggmlExpf, ggmlExpf8 func(dst, x *float32, n int)
	// libcExpf, if set, is LibcExpfs's loop for n a multiple of 16 (k:
	// libcExpfK4, tab: exp2fTab).
	libcExpf func(dst, x *float32, n int, k *[10][4]float64, tab *uint64)
	// tanhCap, if set, is TanhCaps's loop for n a multiple of 8 (k:
	// tanhK4).
	tanhCap func(dst, x *float32, n int, m, c float64, k *[tanhKN][4]float64)
	// kld, if set, is KLD's loop over n values (a multiple of 8) into its
	// 8 lanes (k: kldK4).
	kld func(p, q *float32, n int, plse, qlse float64, k *[kldKN][4]float64, lanes *[8]float64)
	// ggmlSoftMax and ggmlSoftMax8, if set, are ggmlSoftMax's AVX-512
	// build for n a multiple of 16 and its AVX2 build for n a multiple of
	// 8.
	ggmlSoftMax, ggmlSoftMax8 func(y, x *float32, n int, m float32) float64
	// ssmGGML and ssmGGML8, if set, are ssmRowsGGMLGeneric in the AVX-512
	// build's lanes (np a multiple of 64) and in the AVX2 build's (32).
	ssmGGML, ssmGGML8 func(s *float32, n int, b, c, x *float32, rows, np int, dA, d float32, y *float32)
	// ssmF32, if set, is ssmRowsF32Generic for p a multiple of 16.
	ssmF32 func(s *float32, p int, b, c *float32, n int, xd *float32, dA float32, y *float32)
	// deltaGGML and deltaGGML8, if set, are deltaRowsGGMLGeneric in the
	// AVX-512 build's lanes (d a multiple of 64) and the AVX2 build's (32).
	deltaGGML, deltaGGML8 func(m *float32, d int, k, q, v *float32, e, b, scale float32, out *float32)
	// wkv7GGML and wkv7GGML8, if set, are one token of a head of WKV7GGML
	// in the AVX-512 build's lanes (np a multiple of 64) and the AVX2
	// build's (32); wkv6, of WKV6GGML for d a multiple of 16 (u nil: no
	// bonus), y zeroed first.
	wkv7GGML, wkv7GGML8 func(s *float32, d int, r, w, k, v, a, b *float32, np int, out *float32)
	wkv6                func(s *float32, d int, r, k, v, w, u, y *float32)
}

// lanesFunc computes panelLanes's outputs for one activation row (the
// record at x) and a panel of 32 weight rows (decodeInt8's codes packed by
// pack32Words, biased by -negoff; dw[j·32 + r] the scale of group j of row
// r) into c[0:32].
type lanesFunc func(x *byte, w *uint32, dw *float32, nb int, negoff int, c *float32, doff, xs4off int)

// gemmFunc computes C (m × nr) = A (m × k) · B (k × nr), or
// C = alpha ⊙ C + A·B (row i of C scaled by alpha[i]) when alpha is not
// nil, for the m and nr it was made for. A's rows are lda floats apart, B's
// ldb, C's ldc. Each element of A·B is one chain of fused multiply-adds
// over k in order, starting from zero.
type gemmFunc func(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32)

var generic = kernels{level: Generic}

func init() {
	initGeneric()
	archInit()
	initLevel()
}

func initGeneric() {
	generic.softmax = softmaxTileGeneric // here, not in generic's literal: it reads kern
	initGenericInt8()
	initGenericTiled()
	initGenericKRepacked()
	for z := range 2 {
		nr := 16 * (z + 1)
		for m := 1; m <= gemmTileRows; m++ {
			generic.gemm[z] = append(generic.gemm[z], func(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32) {
				gemmGeneric(m, nr, false, a, lda, b, ldb, k, c, ldc, alpha)
			})
			generic.gemmAcc[z] = append(generic.gemmAcc[z], func(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha *float32) {
				gemmGeneric(m, nr, true, a, lda, b, ldb, k, c, ldc, alpha)
			})
		}
	}
}

// fma32 returns a·b + c rounded once to float32, as a fused multiply-add
// instruction does. The product is exact in float64, so s = a·b + c in
// float64 is rounded once; rounding s again to float32 gives the single
// rounding of the exact sum unless s lies exactly halfway between two
// float32s (any float32 midpoint is a float64, so the exact sum and s lie
// on the same side of every other one). Only that case, and results
// outside float32's normal range (where the float32 rounding drops more
// than 29 bits), take fma32Slow.
func fma32(a, b, c float32) float32 {
	p := float64(float64(a) * float64(b)) // exact
	s := p + float64(c)
	bits := math.Float64bits(s)
	if e := bits >> 52 & 0x7ff; bits&(1<<29-1) != 1<<28 && e >= 1023-126 && e <= 1023+127 {
		return float32(s)
	}
	return fma32Slow(p, float64(c))
}

// fma32Slow rounds p + c (p = a·b exactly) to float32 once: the sum is
// rounded to odd in float64 (the nearest float64 with an odd last bit
// unless exact), which makes the final rounding to float32 a correct single
// rounding.
func fma32Slow(p, cc float64) float32 {
	s := p + cc
	if math.IsInf(s, 0) || s != s {
		return float32(s)
	}
	bb := s - p
	e := (p - (s - bb)) + (cc - bb) // s + e = p + c exactly
	if e != 0 {
		bits := math.Float64bits(s)
		if bits&1 == 0 {
			if (e > 0) == (s > 0) {
				bits++
			} else {
				bits--
			}
			s = math.Float64frombits(bits)
		}
	}
	return float32(s)
}

// unsafeSlice is unsafe.Slice for the kernels' pointer arguments.
func unsafeSlice[T any](p *T, n int) []T { return unsafe.Slice(p, n) }

// lanesSlices, tiledSlices, kRepackedSlices and int8Slices run a kernel
// of 8 weight rows (AVX2's, NEON's) on each 8-row slice of a 32-row panel:
// the panel's rows are 32 elements apart in every array it has (weights,
// scales, minima, d), so slice s starts 8s elements in, and so does its
// tile of c.
func lanesSlices(k lanesFunc) lanesFunc {
	return func(x *byte, w *uint32, dw *float32, nb int, negoff int, c *float32, doff, xs4off int) {
		for s := range 4 {
			k(x, slice8(w, s), slice8(dw, s), nb, negoff, slice8(c, s), doff, xs4off)
		}
	}
}

// lanesHalves runs a kernel of 16 weight rows on each half of a 32-row
// panel, as lanesSlices does with 8.
func lanesHalves(k lanesFunc) lanesFunc {
	return func(x *byte, w *uint32, dw *float32, nb int, negoff int, c *float32, doff, xs4off int) {
		for s := range 2 {
			k(x, slice8(w, 2*s), slice8(dw, 2*s), nb, negoff, slice8(c, 2*s), doff, xs4off)
		}
	}
}

func tiledSlices(k tiledFunc) tiledFunc {
	return func(x *byte, ldx int, w *uint32, ls, mins *int32, d0, dm *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff int) {
		for s := range 4 {
			k(x, ldx, slice8(w, s), slice8(ls, s), slice8(mins, s), slice8(d0, s), slice8(dm, s), nb, negoff, slice8(c, s), ldc, doff, xsoff)
		}
	}
}

func kRepackedSlices(k kRepackedFunc) kRepackedFunc {
	return func(x *byte, ldx int, w *uint32, ls *int32, mins *int32, dw *float32, dm *float32, nb int, c *float32, ldc int, doff, xsoff int) {
		for s := range 4 {
			k(x, ldx, slice8(w, s), slice8(ls, s), slice8(mins, s), slice8(dw, s), slice8(dm, s), nb, slice8(c, s), ldc, doff, xsoff)
		}
	}
}

func int8Slices(k int8Func) int8Func {
	return func(x *byte, ldx int, w *uint32, sp *float32, mp *float32, nb int, negoff int, c *float32, ldc int, doff, xsoff, dsoff int) {
		for s := range 4 {
			k(x, ldx, slice8(w, s), slice8(sp, s), slice8(mp, s), nb, negoff, slice8(c, s), ldc, doff, xsoff, dsoff)
		}
	}
}

// kRepackedRows runs a kernel of one activation row on each of m rows.
func kRepackedRows(m int, k kRepackedFunc) kRepackedFunc {
	return func(x *byte, ldx int, w *uint32, ls *int32, mins *int32, dw *float32, dm *float32, nb int, c *float32, ldc int, doff, xsoff int) {
		for t := range m {
			k((*byte)(unsafe.Add(unsafe.Pointer(x), t*ldx)), ldx, w, ls, mins, dw, dm, nb, (*float32)(unsafe.Add(unsafe.Pointer(c), 4*t*ldc)), ldc, doff, xsoff)
		}
	}
}

// slice8 is p advanced by 8s elements of 4 bytes (nil for nil).
func slice8[T uint32 | int32 | float32](p *T, s int) *T {
	if p == nil {
		return nil
	}
	return (*T)(unsafe.Add(unsafe.Pointer(p), 32*s))
}
