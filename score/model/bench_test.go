package model

import (
	"testing"

	"ppl.dev/oracle"
)

// BenchmarkScoreWindow scores one 256-token sliding window (128 targets) of
// each oracle model with the default KV cache.
func BenchmarkScoreWindow(b *testing.B) {
	dir := oracle.Require(b)
	for _, stem := range []string{"tiny-llama-spm-q8_0", "tiny-qwen3-q8_0"} {
		b.Run(stem, func(b *testing.B) {
			m, err := Load(oracle.Model(dir, stem), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			toks := make([]int32, 256)
			for i := range toks {
				toks[i] = int32(i * 37 % m.Vocab())
			}
			for b.Loop() {
				if _, err := m.Score(toks, 128); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(128*b.N)/b.Elapsed().Seconds(), "targets/s")
		})
	}
}
