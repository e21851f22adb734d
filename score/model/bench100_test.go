package model

import (
	"os"
	"testing"
)

// BenchmarkScore512 scores one 512-token window (targets from 257, the
// llama.cpp protocol) of the model at $PPL_BENCH_MODEL.
func BenchmarkScore512(b *testing.B) {
	path := os.Getenv("PPL_BENCH_MODEL")
	if path == "" {
		b.Skip("set PPL_BENCH_MODEL")
	}
	m, err := Load(path, Options{Activations: os.Getenv("PPL_BENCH_ACT")})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	toks := make([]int32, 512)
	for i := range toks {
		toks[i] = int32((i*7919 + 13) % m.Vocab())
	}
	for b.Loop() {
		if _, err := m.Score(toks, 257); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(512*b.N)/b.Elapsed().Seconds(), "tokens/s")
}
