package cuda

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"ppl.dev/oracle"
	"ppl.dev/score/model"
)

// TestSharedWeights: models loaded as a group (LoadGroup's loadGroup) on
// emulated devices give a model of their own's scores bit for bit, for a
// dense i-quant model kept in its blocks and a mixture of experts copied
// from the host as halves:
//   - spread over two devices with peer access, the weights' bytes split
//     between them (within the largest tensor) and each engine reading
//     the other's share; the second model copies nothing;
//   - two engines on one device, one copy;
//   - a model that does not fit one device (the emulated memory limited to
//     60% of its weights at load) is spread without being asked, saying
//     why;
//   - without peer access, spreading is an error naming the devices;
//   - a copy that fails is every sharing model's error, naming the tensor;
//   - the weights are freed with the last model, whichever closes first.
func TestSharedWeights(t *testing.T) {
	dir := oracle.Require(t)
	opts := model.Options{KVDtype: "bf16"}
	for _, tc := range []struct{ stem, storage string }{
		{"tiny-llama-spm-iq2_xxs", WeightsQuantized}, // the file's blocks, and the i-quant grids
		{"tiny-qwen3moe", WeightsBF16},               // the host's copies, and the float32 routers
	} {
		stem, p := tc.stem, Mixed
		p.Storage = tc.storage
		t.Run(stem, func(t *testing.T) {
			path := oracle.Model(dir, stem)
			alone, err := loadOn(newSimEngine(), path, opts, p)
			if err != nil {
				t.Fatal(err)
			}
			defer alone.Close()
			toks := e2eTokens(dir, stem, alone.Vocab(), 96)
			want, err := alone.Score(toks, 1)
			if err != nil {
				t.Fatal(err)
			}
			weights := alone.weightBytes
			var largest int64
			for _, a := range alone.b.set.allocs {
				largest = max(largest, a.bytes)
			}
			same := func(t *testing.T, ms []*Model) {
				t.Helper()
				for i, m := range ms {
					got, err := m.Score(toks, 1)
					if err != nil {
						t.Fatalf("model %d: %v", i, err)
					}
					if !slices.Equal(got.Logprobs, want.Logprobs) || !slices.Equal(got.Argmax, want.Argmax) {
						t.Fatalf("model %d of the group scores differently from a model of its own", i)
					}
				}
			}
			engines := func(n int, limit int64) []*Engine {
				es := make([]*Engine, n)
				for i := range es {
					es[i] = newSimEngine()
					es[i].Ordinal = 10 + i
					es[i].dev.(*simDevice).limit = limit
				}
				return es
			}

			t.Run("spread", func(t *testing.T) {
				es := engines(2, 0)
				ms, err := loadGroup(es, path, opts, p, true)
				if err != nil {
					t.Fatal(err)
				}
				a, b := es[0].Allocated(), es[1].Allocated()
				if a+b != weights || a-b > largest || b-a > largest {
					t.Errorf("weights on the two devices %d and %d bytes, want %d in all, apart by at most the largest tensor's %d", a, b, weights, largest)
				}
				suffix := "(asked for), read by every engine"
				if tc.storage == WeightsBF16 {
					suffix += "; with --gpu-weights bf16 each product reads its weights from the device that holds them, several times a window"
				}
				if p := ms[1].placement(); !strings.HasPrefix(p, "one copy spread over cuda:10 (") || !strings.HasSuffix(p, suffix) {
					t.Errorf("placement %q", p)
				}
				same(t, ms[:1])
				// The second model's first window copies what its second
				// does and its RoPE tables, no weights.
				dev := es[1].dev.(*simDevice)
				var window [2]int64
				for i := range window {
					before := dev.copied
					same(t, ms[1:])
					window[i] = dev.copied - before
				}
				var rope int64
				for _, r := range ms[1].b.ropes {
					rope += r.cos.bytes + r.sin.bytes
				}
				if window[0]-window[1] != rope {
					t.Errorf("the second model's windows copied %d and %d bytes, want them apart by its RoPE tables' %d", window[0], window[1], rope)
				}
				ms[0].Close() // the first closes first: the second still scores
				same(t, ms[1:])
				ms[1].Close()
				if a, b := es[0].Allocated(), es[1].Allocated(); a != 0 || b != 0 {
					t.Errorf("after both closed, %d and %d bytes still allocated", a, b)
				}
			})

			t.Run("a copy fails", func(t *testing.T) {
				es := engines(2, 0)
				ms, err := loadGroup(es, path, opts, p, true)
				if err != nil {
					t.Fatal(err)
				}
				defer func() {
					for _, m := range slices.Backward(ms) {
						m.Close()
					}
				}()
				es[1].dev.(*simDevice).failCopies = errors.New("emulated copy failure")
				_, err = ms[0].Score(toks, 1)
				if err == nil || !strings.Contains(err.Error(), "cuda: copying tensor ") || !strings.HasSuffix(err.Error(), " to the device: emulated copy failure") {
					t.Fatalf("first model: %v, want the failed copy naming its tensor", err)
				}
				if _, err2 := ms[1].Score(toks, 1); err2 == nil || !strings.Contains(err2.Error(), err.Error()) {
					t.Fatalf("second model: %v, want the first's error %q", err2, err)
				}
			})

			t.Run("one device", func(t *testing.T) {
				e := engines(1, 0)[0]
				ms, err := loadGroup([]*Engine{e, e}, path, opts, p, false)
				if err != nil {
					t.Fatal(err)
				}
				if got := e.Allocated(); got != weights {
					t.Errorf("two engines on one device allocated %d bytes at load, want the weights' %d once", got, weights)
				}
				if p := ms[0].placement(); p != "one copy on cuda:10, shared by its 2 engines" {
					t.Errorf("placement %q", p)
				}
				same(t, ms)
				for _, m := range slices.Backward(ms) {
					m.Close()
				}
				if got := e.Allocated(); got != 0 {
					t.Errorf("after both closed, %d bytes still allocated", got)
				}
			})

			// A device that holds 60% of the weights (or the largest tensor)
			// while loading; unbounded afterwards, for the windows' scratch.
			limit := max(weights*6/10, largest*11/10)
			t.Run("does not fit", func(t *testing.T) {
				es := engines(2, limit)
				ms, err := loadGroup(es, path, opts, p, false)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range es {
					e.dev.(*simDevice).limit = 0
				}
				defer func() {
					for _, m := range ms {
						m.Close()
					}
				}()
				if p := ms[0].placement(); !strings.Contains(p, " (the model does not fit cuda:10: out of memory at load), read by every engine") {
					t.Errorf("placement %q", p)
				}
				same(t, ms)
				if a, b := es[0].Allocated(), es[1].Allocated(); a == 0 || b == 0 {
					t.Errorf("after the windows, %d and %d bytes allocated on the two devices", a, b)
				}
			})

			t.Run("no peer access", func(t *testing.T) {
				es := engines(2, limit)
				es[1].dev.(*simDevice).noPeers = true
				_, err := loadGroup(es, path, opts, p, false)
				const msg = "cuda: cuda:10 cannot read cuda:11's memory, so the weights cannot be spread over them: the emulated driver reports no peer access between the two"
				if err == nil || err.Error() != msg {
					t.Fatalf("error %v, want %q", err, msg)
				}
				if a, b := es[0].Allocated(), es[1].Allocated(); a != 0 || b != 0 {
					t.Errorf("after the failed loads, %d and %d bytes still allocated", a, b)
				}
			})
		})
	}
}
