package quant

import (
	"testing"

	"ppl.dev/gguf"
)

// Benchmarks over one 4096-weight row (a typical hidden size). MB/s counts
// the quantized bytes read; weights/ns is the same work per weight.

var benchTypes = []gguf.Type{gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ4_K, gguf.TypeIQ2_XXS, gguf.TypeIQ3_S, gguf.TypeMXFP4}

const benchN = 4096

func benchRow(b *testing.B, typ gguf.Type) []byte {
	q := make([]byte, benchN/typ.BlockSize()*typ.TypeSize())
	if err := Quantize(typ, testWeights(benchN), q); err != nil {
		b.Fatal(err)
	}
	return q
}

func BenchmarkDequantize(b *testing.B) {
	for _, typ := range benchTypes {
		b.Run(typ.String(), func(b *testing.B) {
			q := benchRow(b, typ)
			dst := make([]float32, benchN)
			b.SetBytes(int64(len(q)))
			for b.Loop() {
				DequantizeRow(typ, q, dst)
			}
			b.ReportMetric(float64(benchN)*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "weights/ns")
		})
	}
}

var sink float32

func BenchmarkDotRow(b *testing.B) {
	x := testWeights(benchN)
	for _, typ := range benchTypes {
		b.Run(typ.String(), func(b *testing.B) {
			q := benchRow(b, typ)
			b.SetBytes(int64(len(q)))
			for b.Loop() {
				sink += DotRow(typ, q, x)
			}
			b.ReportMetric(float64(benchN)*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "weights/ns")
		})
	}
}
