package nn

import (
	"math/rand/v2"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/quant"
)

// BenchmarkLinear is an output head's shape: 64 positions through a Q8_0
// (32000, 256) matrix. It reports multiply-adds per second.
func BenchmarkLinear(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	in, out, n := 256, 32000, 64
	data := make([]byte, out*in/32*34)
	if err := quant.Quantize(gguf.TypeQ8_0, randVec(r, in*out), data); err != nil {
		b.Fatal(err)
	}
	l, err := NewLinear("w", gguf.TypeQ8_0, in, out, data)
	if err != nil {
		b.Fatal(err)
	}
	c := NewContext(0)
	x, y := randVec(r, n*in), make([]float32, n*out)
	b.ResetTimer()
	for b.Loop() {
		c.Reset()
		l.Forward(c, y, x, n)
	}
	b.ReportMetric(float64(in*out*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
}
