package cuda

import (
	"strings"
	"testing"

	"ppl.dev/oracle"
	"ppl.dev/score/model"
)

// TestLazyWeights: loading copies none of the weights to the device; the
// first window copies each of them once, exactly the bytes allocated for
// them, and later windows none; the report says which happened. On the
// emulator, which counts the bytes copied, for a model kept quantized and
// one stored as halves.
func TestLazyWeights(t *testing.T) {
	dir := oracle.Require(t)
	e := simEngine()
	copied := e.dev.(*simDevice).copiedBytes
	for _, storage := range []string{WeightsQuantized, WeightsBF16} {
		t.Run(storage, func(t *testing.T) {
			p := Mixed
			p.Storage = storage
			before := copied()
			m, err := loadOn(e, oracle.Model(dir, "tiny-llama-spm-q8_0"), model.Options{KVDtype: "bf16"}, p)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			atLoad := copied() - before
			if ran, _, _ := m.b.uploaded(); ran {
				t.Fatal("weights copied at load")
			}
			if r := m.Report(); !strings.Contains(r, "weights never copied to the device") {
				t.Errorf("report before any window: %s", r)
			}
			toks := make([]int32, 40)
			for i := range toks {
				toks[i] = int32(1 + 37*i%500)
			}
			before = copied()
			if _, err := m.Score(toks, 1); err != nil {
				t.Fatal(err)
			}
			first := copied() - before
			before = copied()
			if _, err := m.Score(toks, 1); err != nil {
				t.Fatal(err)
			}
			second := copied() - before
			// The windows copy their tokens (and targets) each time; the
			// first one the weights too, and the RoPE tables it makes.
			var rope int64
			for _, r := range m.b.ropes {
				rope += r.cos.bytes + r.sin.bytes
			}
			if first-second != m.weightBytes+rope {
				t.Errorf("first window copied %d bytes, the second %d: weights %d and RoPE tables %d, want the difference equal to them", first, second, m.weightBytes, rope)
			}
			if atLoad >= m.weightBytes/50 {
				t.Errorf("load copied %d bytes of %d weight bytes", atLoad, m.weightBytes)
			}
			if r := m.Report(); !strings.Contains(r, "weights copied in") {
				t.Errorf("report after a window: %s", r)
			}
			t.Logf("%s: load copied %d bytes (the attention kernels' check), the first window %d, the second %d; %d bytes of weights, %d of RoPE tables", storage, atLoad, first, second, m.weightBytes, rope)
		})
	}
}
