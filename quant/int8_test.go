package quant

import (
	"math"
	"testing"

	"ppl.dev/gguf"
)

// TestDecodeInt8 checks, for every type with an integer decoding, that
// S·(q - Offset) + M gives the reference dequantization's value, on random
// bytes and on quantized weights, that q never exceeds Max and reaches it
// where Max is below 255, and that each vector decoder gives the
// reference decoder's bits.
func TestDecodeInt8(t *testing.T) {
	r := newRand(33)
	for ti, f := range int8Formats {
		if f.Group == 0 {
			continue
		}
		typ := gguf.Type(ti)
		lf := lookup(typ)
		top := 0 // the largest q seen
		for _, blocks := range []int{1, 3} {
			n := blocks * max(lf.bs, 256)
			for trial := range 20 {
				src := make([]byte, n/lf.bs*lf.ts)
				for i := range src {
					src[i] = byte(r.Uint32())
				}
				if trial%2 == 1 && CanQuantize(typ) {
					w := make([]float32, n)
					for i := range w {
						w[i] = float32(r.NormFloat64())
					}
					if err := Quantize(typ, w, src); err != nil {
						t.Fatal(err)
					}
				}
				deq := make([]float32, n)
				lf.deq(src, deq)
				q := make([]byte, n)
				s, m := make([]float32, n/f.Group), make([]float32, n/f.Group)
				int8Decoders[typ](src, q, s, m)
				for i, want := range deq {
					j := i / f.Group
					if int(q[i]) > f.Max {
						t.Fatalf("%v trial %d: q[%d] = %d, above Max %d", typ, trial, i, q[i], f.Max)
					}
					top = max(top, int(q[i]))
					got := s[j]*float32(int(q[i])-f.Offset) + m[j]
					if !f.HasMin && m[j] != 0 {
						t.Fatalf("%v: minimum %v on a type without one", typ, m[j])
					}
					if got != want && !(got != got && want != want) &&
						!(math.IsInf(float64(s[j]), 0) || math.IsInf(float64(m[j]), 0)) {
						t.Fatalf("%v trial %d: weight %d: S %v q %d M %v gives %v, dequantized %v", typ, trial, i, s[j], q[i], m[j], got, want)
					}
				}
				if fast := fastInt8[typ]; fast != nil {
					q2 := make([]byte, n)
					s2, m2 := make([]float32, n/f.Group), make([]float32, n/f.Group)
					fast(src, q2, s2, m2)
					for i := range q {
						if q[i] != q2[i] {
							t.Fatalf("%v fast: q[%d] = %d, reference %d", typ, i, q2[i], q[i])
						}
					}
					for j := range s {
						if math.Float32bits(s[j]) != math.Float32bits(s2[j]) && !(s[j] != s[j] && s2[j] != s2[j]) {
							t.Fatalf("%v fast: S[%d] = %v, reference %v", typ, j, s2[j], s[j])
						}
						if f.HasMin && math.Float32bits(m[j]) != math.Float32bits(m2[j]) && !(m[j] != m[j] && m2[j] != m2[j]) {
							t.Fatalf("%v fast: M[%d] = %v, reference %v", typ, j, m2[j], m[j])
						}
					}
				}
			}
		}
		if f.Max < 255 && top != f.Max {
			t.Errorf("%v: the largest q over the trials is %d, Max %d", typ, top, f.Max)
		}
	}
	if _, ok := Int8FormatOf(gguf.TypeF16); ok {
		t.Error("F16 has an integer decoding")
	}
}
