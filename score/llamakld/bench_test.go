package llamakld

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkScore is one target of a 152,064-token vocabulary (Qwen's).
func BenchmarkScore(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	const n = 152064
	base, model := logits(r, n, 3), logits(r, n, 3)
	row := make(Row, RowLen(n))
	Quantize(row, base, 5)
	for b.Loop() {
		Score(model, row, 5)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mtokens/s")
}

// BenchmarkQuantize is one target's row of a 152,064-token vocabulary, as
// --write-kld-base writes it.
func BenchmarkQuantize(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	const n = 152064
	lg := logits(r, n, 3)
	row := make(Row, RowLen(n))
	for b.Loop() {
		Quantize(row, lg, 5)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mtokens/s")
}
