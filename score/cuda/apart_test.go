package cuda

import (
	"slices"
	"strings"
	"testing"

	"ppl.dev/oracle"
	"ppl.dev/score/backend"
	"ppl.dev/score/model"
)

// TestReferenceApart: a reference on another GPU (two emulated devices:
// the model on one, the reference on the other) gives the same results to
// the bit as the reference on the model's GPU: log-probs, argmax, the
// reference's log-probs, KL divergence and top-1 agreement, for the Q4_K_M
// oracle model against its F16 file, from the start and from a later
// target. The reference's forward pass runs on the other device (it
// copies its weights there), and a reference that is not on a GPU is
// refused.
func TestReferenceApart(t *testing.T) {
	dir := oracle.Require(t)
	ea, eb := simEngine(), newSimEngine()
	eb.Ordinal = -2 // named apart from ea in messages
	load := func(e *Engine, stem string) *Model {
		m, err := loadOn(e, oracle.Model(dir, stem), model.Options{KVDtype: "bf16"}, Mixed)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	m, same, apart := load(ea, "tiny-llama-spm-q4_k_m"), load(ea, "tiny-llama-spm-f16"), load(eb, "tiny-llama-spm-f16")
	toks := e2eTokens(dir, "tiny-llama-spm-q4_k_m", m.Vocab(), 160)
	dev := eb.dev.(*simDevice)
	for _, from := range []int{1, 100} {
		want, err := m.ScoreWith(toks, from, same)
		if err != nil {
			t.Fatal(err)
		}
		before := launches(dev)
		got, err := m.ScoreWith(toks, from, apart)
		if err != nil {
			t.Fatal(err)
		}
		if ran := launches(dev) - before; ran < 10 {
			t.Fatalf("from %d: %d kernels ran on the reference's device", from, ran)
		}
		if !slices.Equal(got.Logprobs, want.Logprobs) || !slices.Equal(got.Argmax, want.Argmax) || !slices.Equal(got.RefLogprobs, want.RefLogprobs) ||
			!slices.Equal(got.KLD, want.KLD) || !slices.Equal(got.Top1Agree, want.Top1Agree) {
			t.Fatalf("from %d: the reference on another device changes the results", from)
		}
		var sum float64
		agree := 0
		for i, k := range got.KLD {
			sum += k
			if got.Top1Agree[i] {
				agree++
			}
		}
		if sum == 0 {
			t.Fatalf("from %d: KL divergence 0 between two files", from)
		}
		t.Logf("from %d: %d targets identical on one device and on two: mean KLD %.6f, top-1 agreement %d", from, len(got.KLD), sum/float64(len(got.KLD)), agree)
	}

	cb, _ := backend.Get("cpu")
	cpu, err := cb.Open(oracle.Model(dir, "tiny-llama-spm-f16"), model.Options{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	if _, err := m.ScoreWith(toks, 1, cpu); err == nil || !strings.Contains(err.Error(), "cuda: reference model on cpu, model on cuda:-1: a reference must be on a GPU too") {
		t.Errorf("a reference on the CPU: %v", err)
	}
}

// launches counts the kernels launched on an emulated device.
func launches(d *simDevice) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.launches {
		n += c
	}
	return n
}
