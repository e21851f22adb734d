package aggregate

import (
	"bytes"
	"testing"

	"ppl.dev/aggregate/report"
	"ppl.dev/pipe"
	"ppl.dev/window/protocol"
)

// Aggregate never panics on any input, and every report it makes encodes
// to valid JSON.
func FuzzAggregate(f *testing.F) {
	f.Add(synthRun(f, pipe.Protocol{Mode: "sliding", Context: 4, Stride: 2}, true, 9, 1).pipeline(f, protocol.Shard{}))
	f.Add(synthRun(f, pipe.Protocol{Mode: "disjoint", Context: 3}, false, 7).pipeline(f, protocol.Shard{K: 1, N: 2}))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Aggregate([]Source{{Name: "in", R: bytes.NewReader(data)}}, Options{Resamples: 10, Seed: 1})
		if err != nil {
			return
		}
		if _, err := report.Encode(r); err != nil {
			t.Fatalf("report does not encode: %v", err)
		}
	})
}
