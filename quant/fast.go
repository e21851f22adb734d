package quant

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"ppl.dev/gguf"
)

// Fast paths: vector versions of the dequantizers and integer decoders,
// chosen at run time by CPU feature. Every level has the types that decode
// through codes (fast_codes.go: the legacy types, the K-quants, IQ4_NL,
// IQ4_XS, TQ2_0 and MXFP4); level AVX2 adds F16 and BF16 and the low-bit
// kernels of IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, MXFP4
// and NVFP4 (fast_lowbit_amd64.go); level AVX512 adds fused dequantizers
// of F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, Q4_K and Q6_K and integer decoders
// of Q8_0, Q4_0, Q5_0 and Q5_1; level NEON (arm64) fused dequantizers of
// F16, BF16, Q8_0, Q5_0, Q5_1, Q4_K and Q6_K. They compute each weight
// with the same exact products as the reference functions, so they give
// the same bits; the only difference is that an F16 signaling NaN comes
// out as a quiet NaN, as the F16C and FCVTL instructions make it.
// Dequantize, DequantizeRow and DecodeInt8 use them when they are on; the
// tests compare every level with the reference on random and adversarial
// blocks.

// Level names a set of fast paths, one per class of CPU, named as
// package score/nn's kernel levels.
type Level int

const (
	Generic Level = iota // plain Go, any CPU
	AVX2                 // AVX2, FMA and F16C (Haswell, Zen 1-3)
	AVX512               // AVX-512 F, BW, DQ and VL (Skylake-X, Zen 4)
	NEON                 // arm64's Advanced SIMD (every arm64 CPU)
)

var levelNames = [...]string{"generic", "avx2", "avx512", "neon"}

func (l Level) String() string {
	if l >= 0 && int(l) < len(levelNames) {
		return levelNames[l]
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// levelDeq and levelInt8 hold each level's vector dequantizers and integer
// decoders (by type, taking whole blocks); the Generic rows stay empty.
var (
	levelDeq  [NEON + 1][len(formats)]func(src []byte, dst []float32)
	levelInt8 [NEON + 1][len(formats)]func(w, q []byte, s, m []float32)
	// levelCodes: DecodeCodes's kernels, the codes alone.
	levelCodes [NEON + 1][len(formats)]func(w, q []byte)
)

// fastDeq, fastInt8 (int8.go) and fastCodes are the rows of the level in
// use.
var (
	fastDeq   [len(formats)]func(src []byte, dst []float32)
	fastCodes [len(formats)]func(w, q []byte)
)

// maxLevel is the best level this CPU runs (set by the architecture), and
// level the one in use; simdOn is level > Generic.
var (
	maxLevel = Generic
	level    = Generic
	simdOn   bool
)

// Levels returns the levels this CPU runs that have kernels, slowest
// first.
func Levels() []Level {
	out := []Level{Generic}
	for l := Generic + 1; l <= maxLevel; l++ {
		if slices.ContainsFunc(levelDeq[l][:], func(f func([]byte, []float32)) bool { return f != nil }) {
			out = append(out, l)
		}
	}
	return out
}

// CurrentLevel returns the level in use.
func CurrentLevel() Level { return level }

// SetLevel selects the fast paths of level l, or of the best level this
// CPU has below it, and returns the previous level. A type without a
// kernel at the level chosen takes the plain Go path. It is for start-up,
// tests and benchmarks and must not be called while other goroutines
// decode.
func SetLevel(l Level) Level {
	prev := level
	level = max(Generic, min(l, maxLevel))
	fastDeq, fastInt8, fastCodes = levelDeq[level], levelInt8[level], levelCodes[level]
	simdOn = level > Generic
	return prev
}

// EnvKernels is the environment variable that caps the kernels of packages
// quant and score/nn: "generic" turns the fast paths here off, "avx2"
// keeps the AVX2 ones; "avx512" and "avx512vnni" (score/nn's best level)
// allow all.
const EnvKernels = "PPL_CPU_KERNELS"

func init() {
	archInit()
	l := maxLevel
	switch strings.ToLower(os.Getenv(EnvKernels)) {
	case "generic":
		l = Generic
	case "avx2":
		l = AVX2
	}
	SetLevel(l)
}

// blocks makes a fastDeq entry of a kernel over n whole blocks of bs
// weights (ts bytes).
func blocks(bs, ts int, k func(src *byte, dst *float32, n int)) func([]byte, []float32) {
	return func(src []byte, dst []float32) {
		n := len(dst) / bs
		if n == 0 {
			return
		}
		_ = src[n*ts-1]
		k(&src[0], &dst[0], n)
	}
}

// legacyInt8 makes a fastInt8 entry of an integer decoder of blocks of 32
// weights (ts bytes) with one scale each; legacyInt8Min, with a minimum
// each too.
func legacyInt8(ts int, k func(w, q *byte, s *float32, n int)) func(w, q []byte, s, _ []float32) {
	return func(w, q []byte, s, _ []float32) {
		if n := len(q) / 32; n > 0 {
			_, _ = w[ts*n-1], s[n-1]
			k(&w[0], &q[0], &s[0], n)
		}
	}
}

func legacyInt8Min(ts int, k func(w, q *byte, s, m *float32, n int)) func(w, q []byte, s, m []float32) {
	return func(w, q []byte, s, m []float32) {
		if n := len(q) / 32; n > 0 {
			_, _, _ = w[ts*n-1], s[n-1], m[n-1]
			k(&w[0], &q[0], &s[0], &m[0], n)
		}
	}
}

// halves makes a fastDeq entry of a kernel over n groups of 16 16-bit
// values (F16, BF16), the rest by tail (the plain Go one).
func halves(k func(src *byte, dst *float32, n int), tail func([]byte, []float32)) func([]byte, []float32) {
	return func(src []byte, dst []float32) {
		n := len(dst) / 16
		if n > 0 {
			_ = src[32*n-1]
			k(&src[0], &dst[0], n)
		}
		tail(src[32*n:], dst[16*n:])
	}
}

// deqFunc returns the dequantizer of t to use: the fast path when on.
func (f *format) deqFunc(t gguf.Type) func([]byte, []float32) {
	if simdOn {
		if d := fastDeq[t]; d != nil {
			return d
		}
	}
	return f.deq
}
