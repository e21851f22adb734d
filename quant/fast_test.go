package quant

import (
	"math"
	"testing"

	"ppl.dev/gguf"
)

// TestFastDequantize compares each vector dequantizer with the reference
// on random bytes (every bit pattern of scales and quants, including
// half-precision infinities, NaNs and subnormals) and on quantized random
// weights, bit for bit; NaNs need only be NaNs.
func TestFastDequantize(t *testing.T) {
	if !hasSIMD {
		t.Skip("no vector dequantizers on this CPU")
	}
	r := newRand(21)
	for typ, fast := range fastDeq {
		if fast == nil {
			continue
		}
		typ := gguf.Type(typ)
		f := lookup(typ)
		for _, blocks := range []int{1, 2, 3, 17} {
			n := blocks * f.bs
			if f.bs == 1 {
				n = blocks*16 + 5 // F16/BF16: a tail past the vector blocks
			}
			for trial := range 50 {
				src := make([]byte, n/f.bs*f.ts)
				if trial%2 == 0 {
					for i := range src {
						src[i] = byte(r.Uint32())
					}
				} else if CanQuantize(typ) {
					w := make([]float32, n)
					for i := range w {
						w[i] = float32(r.NormFloat64()) * float32(math.Pow(2, float64(r.IntN(40)-20)))
					}
					if err := Quantize(typ, w, src); err != nil {
						t.Fatal(err)
					}
				}
				want, got := make([]float32, n), make([]float32, n)
				f.deq(src, want)
				fast(src, got)
				for i := range want {
					if math.Float32bits(want[i]) != math.Float32bits(got[i]) && !(want[i] != want[i] && got[i] != got[i]) {
						t.Fatalf("%v, %d weights, trial %d: weight %d = %v (%#x), reference %v (%#x)", typ, n, trial, i,
							got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
				}
			}
		}
	}
}

// TestSetSIMD checks that the switch reaches DequantizeRow.
func TestSetSIMD(t *testing.T) {
	prev := SetSIMD(false)
	defer SetSIMD(prev)
	if SIMD() {
		t.Fatal("SetSIMD(false) left the fast paths on")
	}
	src := make([]byte, 34)
	src[1] = 0x3c // d = 1
	src[2] = 5
	dst := make([]float32, 32)
	DequantizeRow(gguf.TypeQ8_0, src, dst)
	if dst[0] != 5 {
		t.Fatalf("got %v", dst[0])
	}
	SetSIMD(true)
	if SIMD() != hasSIMD {
		t.Fatal("SetSIMD(true) did not follow the CPU")
	}
}
