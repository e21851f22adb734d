package quant

import (
	"os"
	"strings"

	"ppl.dev/gguf"
)

// Fast paths: vector versions of the dequantizers of the types models are
// mostly made of (F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K), chosen at run time by
// CPU feature (AVX-512 here; plain Go elsewhere). They compute each weight
// with the same exact products as the reference functions, so they give the
// same bits; the only difference is that an F16 signaling NaN comes out as
// a quiet NaN, as the F16C instruction makes it. Dequantize and
// DequantizeRow use them when they are on; the tests compare them with the
// reference on random and adversarial blocks.

// fastDeq holds the vector dequantizer of each type that has one on this
// CPU, taking whole blocks.
var fastDeq [len(formats)]func(src []byte, dst []float32)

// simdOn is whether Dequantize and DequantizeRow use fastDeq.
var simdOn bool

// SIMD reports whether the vector fast paths are in use.
func SIMD() bool { return simdOn }

// SetSIMD turns the vector fast paths on (where this CPU has them) or off,
// for tests and benchmarks of the plain Go paths, and returns the previous
// setting. It must not be called while other goroutines decode.
func SetSIMD(on bool) bool {
	prev := simdOn
	simdOn = on && hasSIMD
	return prev
}

// hasSIMD is whether this CPU has the fast paths (set by the architecture).
var hasSIMD bool

// EnvKernels is the environment variable that caps the kernels of packages
// quant and score/nn: "generic" or "avx2" turns the AVX-512 paths here off.
const EnvKernels = "PPL_CPU_KERNELS"

func init() {
	archInit()
	switch strings.ToLower(os.Getenv(EnvKernels)) {
	case "generic", "avx2":
		simdOn = false
	default:
		simdOn = hasSIMD
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
