package nn

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
)

// GoMath is a digest of the bits that Go's math library returns on this
// machine, for the header and the cache key ("math").
//
// ppl's own arithmetic gives the same bits wherever it is built (no
// implicit fused multiply-add: tests/fma_test.go), and the int8 modes call
// ports of glibc's float32 routines (libm.go). But the float64 parts of
// every mode call math.Exp, math.Log and their kin, whose last bits depend
// on the machine: the compiler fuses their polynomials on arm64, and on
// amd64 math.Exp takes another path on a CPU with FMA than on one without.
// A window's log-probs can differ in their last digits between two such
// machines; the digest names which library computed them, so that a cached
// window replays only where it would come out the same.
var GoMath = sync.OnceValue(func() string { return mathDigest(goMathFuncs) })

// goMathFuncs are the math functions ppl's float64 arithmetic calls, each
// with the range the probe draws its arguments from: [lo, hi], or with exp
// the arguments 2^e·(1+f), e an integer in [lo, hi) (a positive range over
// many decades).
var goMathFuncs = []probe{
	{"Exp", math.Exp, -80, 80, false},
	{"Log", math.Log, -100, 100, true},
	{"Log1p", math.Log1p, -0.999, 100, false},
	{"Expm1", math.Expm1, -20, 20, false},
	{"Exp2", math.Exp2, -100, 100, false},
	{"Log2", math.Log2, -100, 100, true},
	{"Tanh", math.Tanh, -20, 20, false},
	{"Sin", math.Sin, -1e4, 1e4, false},
	{"Cos", math.Cos, -1e4, 1e4, false},
	{"Pow", func(x float64) float64 { return math.Pow(x, 1/x) }, 1e-3, 1e4, false},
}

type probe struct {
	name   string
	f      func(float64) float64
	lo, hi float64
	exp    bool
}

// probeArgs is the number of arguments drawn per function: a library that
// rounds differently in one case of a thousand shows in the digest.
const probeArgs = 1 << 14

// mathDigest hashes each function's results at probeArgs fixed arguments
// spread over its range, twelve hex digits of the sha256. The arguments are
// made with exact or correctly rounded operations only, the same on every
// machine.
func mathDigest(funcs []probe) string {
	h := sha256.New()
	var b [8]byte
	x := uint64(0x9e3779b97f4a7c15)
	for _, p := range funcs {
		h.Write([]byte(p.name))
		for range probeArgs {
			x ^= x << 13 // xorshift64
			x ^= x >> 7
			x ^= x << 17
			u := float64(float64(x>>11) * 0x1p-53)
			a := p.lo + float64(u*(p.hi-p.lo))
			if p.exp {
				a = math.Float64frombits(uint64(1023+math.Floor(a))<<52 | x&(1<<52-1))
			}
			binary.LittleEndian.PutUint64(b[:], math.Float64bits(p.f(a)))
			h.Write(b[:])
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil)[:6])
}
