package quant

import (
	"math/rand/v2"
	"testing"

	"ppl.dev/gguf"
)

// Benchmarks over one 4096-weight row (a typical hidden size), at every
// kernel level this CPU runs (BenchmarkDequantize/IQ2_XXS/avx512): the
// generic run is the plain Go reference, measured in the same run, so the
// levels' ratios are the kernels' speedups (bench/quant-kernels.sh prints
// them). MB/s counts the quantized bytes read; weights/ns is the same work
// per weight, and cpu-weights/ns the same per ns of the thread's CPU time
// (on Linux), which a busy machine disturbs less.

var benchTypes = []gguf.Type{
	gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeQ5_0, gguf.TypeQ5_1, gguf.TypeQ4_1,
	gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K,
	gguf.TypeIQ4_NL, gguf.TypeIQ4_XS,
	gguf.TypeIQ2_XXS, gguf.TypeIQ2_XS, gguf.TypeIQ2_S, gguf.TypeIQ3_XXS, gguf.TypeIQ3_S, gguf.TypeIQ1_S, gguf.TypeIQ1_M, gguf.TypeMXFP4, gguf.TypeNVFP4, gguf.TypeTQ2_0,
}

const benchN = 4096

func benchRow(b *testing.B, typ gguf.Type) []byte {
	q := make([]byte, benchN/typ.BlockSize()*typ.TypeSize())
	if !CanQuantize(typ) { // IQ4_NL, IQ4_XS: random blocks, each scale 1
		r := rand.New(rand.NewPCG(1, 2))
		for i := range q {
			q[i] = byte(r.Uint32())
		}
		for i := 0; i < len(q); i += typ.TypeSize() {
			q[i], q[i+1] = 0x00, 0x3c
		}
		return q
	}
	if err := Quantize(typ, testWeights(benchN), q); err != nil {
		b.Fatal(err)
	}
	return q
}

// benchLevels runs f at each level this CPU has, as sub-benchmarks named
// by the level, with the quantized row's bytes as the benchmark's bytes.
func benchLevels(b *testing.B, q []byte, f func()) {
	for _, l := range Levels() {
		b.Run(l.String(), func(b *testing.B) {
			prev := SetLevel(l)
			defer SetLevel(prev)
			b.SetBytes(int64(len(q)))
			cpu0, unlock := threadCPU()
			defer unlock()
			for b.Loop() {
				f()
			}
			if cpu := threadNow() - cpu0; cpu0 > 0 && cpu > 0 {
				b.ReportMetric(float64(benchN)*float64(b.N)/float64(cpu), "cpu-weights/ns")
			}
			b.ReportMetric(float64(benchN)*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "weights/ns")
		})
	}
}

func BenchmarkDequantize(b *testing.B) {
	for _, typ := range benchTypes {
		b.Run(typ.String(), func(b *testing.B) {
			q := benchRow(b, typ)
			dst := make([]float32, benchN)
			benchLevels(b, q, func() { DequantizeRow(typ, q, dst) })
		})
	}
}

func BenchmarkDecodeInt8(b *testing.B) {
	for _, typ := range benchTypes {
		f, ok := Int8FormatOf(typ)
		if !ok {
			continue
		}
		b.Run(typ.String(), func(b *testing.B) {
			w := benchRow(b, typ)
			q := make([]byte, benchN)
			s, m := make([]float32, benchN/f.Group), make([]float32, benchN/f.Group)
			benchLevels(b, w, func() { DecodeInt8(typ, w, q, s, m) })
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
