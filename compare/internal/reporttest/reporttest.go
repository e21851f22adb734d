// Package reporttest builds real reports for ppl-compare's tests: it
// writes a synthetic scored pipeline with deterministic log-probabilities
// and runs it through ppl.dev/aggregate, so that the tests compare what
// ppl-aggregate actually writes.
package reporttest

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"ppl.dev/aggregate"
	"ppl.dev/aggregate/report"
	"ppl.dev/aggregate/stats"
	"ppl.dev/pipe"
	"ppl.dev/window/protocol"
)

// Stream is one stream of a synthetic run.
type Stream struct {
	ID, Domain, SHA256 string
	Tokens             int
}

// Spec describes a synthetic run. The log-probabilities depend on Seed
// only; Shift is added to every NLL and Jitter adds uniform noise in
// [-Jitter, Jitter] from a generator of its own, so a spec with the same
// Seed and a small Jitter is the same model up to noise.
type Spec struct {
	Model, SHA256, Tokenizer, Corpus string
	Protocol                         pipe.Protocol
	Streams                          []Stream
	Seed                             uint64
	Shift, Jitter                    float64
	KLD                              bool
}

// Default returns a spec of two domains (en: two streams, zh: one) under
// a sliding protocol of context 16, stride 8.
func Default() Spec {
	return Spec{
		Model: "m.gguf", SHA256: strings.Repeat("1", 64), Tokenizer: "tok", Corpus: "mini",
		Protocol: pipe.Protocol{Mode: "sliding", Context: 16, Stride: 8},
		Streams: []Stream{
			{ID: "en-1", Domain: "en", SHA256: strings.Repeat("a", 64), Tokens: 120},
			{ID: "en-2", Domain: "en", SHA256: strings.Repeat("b", 64), Tokens: 90},
			{ID: "zh-1", Domain: "zh", SHA256: strings.Repeat("c", 64), Tokens: 100},
		},
		Seed: 1,
	}
}

// Pipeline returns the spec's scored pipeline.
func Pipeline(t testing.TB, s Spec) []byte {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	r, jr := stats.NewRand(s.Seed), stats.NewRand(s.Seed^0x5eed)
	u := func(r *stats.Rand) float64 { return float64(float64(r.Uint64()>>11) / (1 << 53)) } // rounded: never fused into a sum
	var buf bytes.Buffer
	model := &pipe.Model{Name: s.Model, SHA256: s.SHA256}
	tw := pipe.NewWriter(&buf, pipe.StageTokenize)
	must(tw.Header(pipe.Header{Tool: "ppl-tokenize", Version: "test", Model: model,
		Tokenizer: &pipe.Tokenizer{Model: "llama", ID: s.Tokenizer, NVocab: 100}, Corpus: &pipe.Corpus{Name: s.Corpus}}))
	ww := pipe.NewWriter(&buf, pipe.StageWindow)
	p := s.Protocol
	must(ww.Header(pipe.Header{Tool: "ppl-window", Version: "test", Protocol: &p}))
	sw := pipe.NewWriter(&buf, pipe.StageScore)
	sc := &pipe.Score{Device: "cpu", KVDtype: "f16"}
	if s.KLD {
		sc.Reference = &pipe.Model{Name: "ref.gguf", SHA256: strings.Repeat("f", 64)}
	}
	must(sw.Header(pipe.Header{Tool: "ppl-score", Version: "test", Model: model, Score: sc}))
	for _, st := range s.Streams {
		must(tw.Stream(&pipe.Stream{ID: st.ID, Domain: st.Domain, SHA256: st.SHA256, Bytes: int64(4 * st.Tokens), NTokens: st.Tokens}))
		ids := make([]int32, st.Tokens)
		for i := range ids {
			ids[i] = int32(i % 100)
		}
		must(tw.Tokens(&pipe.Tokens{Stream: st.ID, IDs: ids}))
		spans, err := protocol.Windows(st.Tokens, s.Protocol)
		must(err)
		for i, sp := range spans {
			must(ww.Window(&pipe.Window{Stream: st.ID, Index: i, Begin: sp.Begin, End: sp.End, ScoreFrom: sp.ScoreFrom, BOS: sp.BOS}))
			w := &pipe.Scores{Stream: st.ID, Index: i, Begin: sp.Begin, End: sp.End, ScoreFrom: sp.ScoreFrom, BOS: sp.BOS}
			for k := sp.ScoreFrom; k < sp.End; k++ {
				nll := 1 + float64(4*u(r)) + s.Shift + float64(s.Jitter*(2*u(jr)-1))
				w.Logprobs = append(w.Logprobs, -math.Max(nll, 0))
				if s.KLD {
					w.KLD = append(w.KLD, 0.05*u(r)*u(r))
					w.RefLogprobs = append(w.RefLogprobs, -(1 + float64(4*u(r))))
					w.Top1Agree = append(w.Top1Agree, u(r) < 0.8)
				}
			}
			must(sw.Scores(w))
		}
	}
	for _, w := range []*pipe.Writer{tw, ww, sw} {
		must(w.End())
	}
	// Each writer buffers: flush in stage order so records follow their
	// headers, then the trailers.
	must(tw.Flush())
	must(ww.Flush())
	must(sw.Flush())
	return buf.Bytes()
}

// Build returns the report ppl-aggregate writes for the spec.
func Build(t testing.TB, s Spec) *report.Report {
	t.Helper()
	r, err := aggregate.Aggregate([]aggregate.Source{{Name: "in", R: bytes.NewReader(Pipeline(t, s))}},
		aggregate.Options{Resamples: 200, Seed: 1, Created: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
