package cuda

import (
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"ppl.dev/oracle"
	"ppl.dev/score/model"
)

// TestSharedWeights: models loaded as a group (LoadGroup's loadGroup) give
// a model of their own's scores bit for bit:
//   - spread over two devices, the weights' bytes split between them
//     (within the largest tensor) and each engine reading the other's
//     share; the second model copies nothing (the emulator counts it);
//   - two engines on one device, one copy;
//   - the weights are freed with the last model, whichever closes first.
//
// On the emulator (two devices in one address space, a kernel reading a
// peer's memory only after peer access, copies only to a device's own) for
// a dense i-quant model kept in its blocks and a mixture of experts copied
// from the host as halves, and also:
//   - a model that does not fit one device (the emulated memory limited to
//     60% of its weights at load) is spread without being asked, saying
//     why;
//   - without peer access, spreading is an error naming the devices;
//   - a copy that fails is every sharing model's error, naming the tensor.
//
// On a GPU, the mixture kept in its blocks and a dense model as halves,
// spread over two engines of device 0 (one context: the driver's
// allocations, copies and kernels of a spread set, peer access aside).
func TestSharedWeights(t *testing.T) {
	dir := oracle.Require(t)
	t.Run("sim", func(t *testing.T) {
		engines := func(n int, limit int64) []*Engine {
			es := make([]*Engine, n)
			for i := range es {
				es[i] = newSimEngine()
				es[i].Ordinal = 10 + i
				es[i].dev.(*simDevice).limit = limit
			}
			return es
		}
		for _, tc := range []sharedCase{
			{"tiny-llama-spm-iq2_xxs", WeightsQuantized}, // the file's blocks, and the i-quant grids
			{"tiny-qwen3moe", WeightsBF16},               // the host's copies, and the float32 routers
		} {
			t.Run(tc.stem, func(t *testing.T) {
				c := newShared(t, dir, tc, newSimEngine())
				c.spread(t, engines(2, 0))
				c.oneDevice(t, engines(1, 0)[0])

				t.Run("a copy fails", func(t *testing.T) {
					es := engines(2, 0)
					ms := c.load(t, es, true)
					defer closeAll(ms)
					es[1].dev.(*simDevice).failCopies = errors.New("emulated copy failure")
					_, err := ms[0].Score(c.toks, 1)
					if err == nil || !strings.Contains(err.Error(), "cuda: copying tensor ") || !strings.HasSuffix(err.Error(), " to the device: emulated copy failure") {
						t.Fatalf("first model: %v, want the failed copy naming its tensor", err)
					}
					if _, err2 := ms[1].Score(c.toks, 1); err2 == nil || !strings.Contains(err2.Error(), err.Error()) {
						t.Fatalf("second model: %v, want the first's error %q", err2, err)
					}
				})

				// A device that holds 60% of the weights (or the largest
				// tensor) while loading; unbounded afterwards, for the
				// windows' scratch.
				limit := max(c.weights*6/10, c.largest*11/10)
				t.Run("does not fit", func(t *testing.T) {
					es := engines(2, limit)
					ms := c.load(t, es, false)
					defer closeAll(ms)
					for _, e := range es {
						e.dev.(*simDevice).limit = 0
					}
					if p := ms[0].placement(); !strings.Contains(p, " (the model does not fit cuda:10: out of memory at load), read by every engine") {
						t.Errorf("placement %q", p)
					}
					c.same(t, ms)
					if a, b := es[0].Allocated(), es[1].Allocated(); a == 0 || b == 0 {
						t.Errorf("after the windows, %d and %d bytes allocated on the two devices", a, b)
					}
				})

				t.Run("no peer access", func(t *testing.T) {
					es := engines(2, limit)
					es[1].dev.(*simDevice).noPeers = true
					_, err := loadGroup(es, c.path, c.opts, c.p, false)
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
	})
	t.Run("gpu", func(t *testing.T) {
		e := gpuEngine(t)
		second.Do(func() {
			if secondEng, secondErr = startEngine(0); secondEng != nil {
				secondEng.SyncEach = true
			}
		})
		if secondErr != nil {
			t.Fatalf("a second engine of device 0: %v", secondErr)
		}
		for _, tc := range []sharedCase{{"tiny-qwen3moe", WeightsQuantized}, {"tiny-llama-spm-q8_0", WeightsBF16}} {
			t.Run(tc.stem, func(t *testing.T) {
				if _, err := os.Stat(oracle.Model(dir, tc.stem)); err != nil {
					t.Skipf("skipping: %v", err) // a GPU bundle without it
				}
				c := newShared(t, dir, tc, e)
				c.spread(t, []*Engine{e, secondEng})
				c.oneDevice(t, e)
			})
		}
	})
}

// The second engine of device 0 that TestSharedWeights/gpu spreads over.
var (
	second    sync.Once
	secondEng *Engine
	secondErr error
)

type sharedCase struct{ stem, storage string }

// shared is a TestSharedWeights case: a model loaded alone, its scores of a
// window and its weights' sizes.
type shared struct {
	path, stem       string
	opts             model.Options
	p                Precision
	toks             []int32
	want             *model.Result
	weights, largest int64
}

func newShared(t *testing.T, dir string, tc sharedCase, e *Engine) *shared {
	c := &shared{path: oracle.Model(dir, tc.stem), stem: tc.stem, opts: model.Options{KVDtype: "bf16"}, p: Mixed}
	c.p.Storage = tc.storage
	alone, err := loadOn(e, c.path, c.opts, c.p)
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	c.toks = e2eTokens(dir, tc.stem, alone.Vocab(), 96)
	if c.want, err = alone.Score(c.toks, 1); err != nil {
		t.Fatal(err)
	}
	c.weights = alone.weightBytes
	for _, a := range alone.b.set.allocs {
		c.largest = max(c.largest, a.bytes)
	}
	return c
}

func (c *shared) load(t *testing.T, es []*Engine, spread bool) []*Model {
	t.Helper()
	ms, err := loadGroup(es, c.path, c.opts, c.p, spread)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func closeAll(ms []*Model) {
	for _, m := range slices.Backward(ms) {
		m.Close()
	}
}

// same checks that each model scores the window as the model alone did.
func (c *shared) same(t *testing.T, ms []*Model) {
	t.Helper()
	for i, m := range ms {
		got, err := m.Score(c.toks, 1)
		if err != nil {
			t.Fatalf("model %d: %v", i, err)
		}
		if !slices.Equal(got.Logprobs, c.want.Logprobs) || !slices.Equal(got.Argmax, c.want.Argmax) {
			t.Fatalf("model %d of the group scores differently from a model of its own", i)
		}
	}
}

// spread loads the model spread over es, two engines, and checks it.
func (c *shared) spread(t *testing.T, es []*Engine) {
	t.Run("spread", func(t *testing.T) {
		a0, b0 := es[0].Allocated(), es[1].Allocated()
		ms := c.load(t, es, true)
		a, b := es[0].Allocated()-a0, es[1].Allocated()-b0
		if a+b != c.weights || a-b > c.largest || b-a > c.largest {
			t.Errorf("weights on the two devices %d and %d bytes, want %d in all, apart by at most the largest tensor's %d", a, b, c.weights, c.largest)
		}
		suffix := "(asked for), read by every engine"
		if c.p.Storage == WeightsBF16 {
			suffix += "; with --gpu-weights bf16 each product reads its weights from the device that holds them, several times a window"
		}
		if p := ms[1].placement(); !strings.HasPrefix(p, "one copy spread over "+es[0].label()+" (") || !strings.HasSuffix(p, suffix) {
			t.Errorf("placement %q", p)
		}
		c.same(t, ms[:1])
		// The second model's first window copies what its second does
		// and its RoPE tables, no weights (on the emulator, which counts).
		if dev, ok := es[1].dev.(*simDevice); ok {
			var window [2]int64
			for i := range window {
				before := dev.copied
				c.same(t, ms[1:])
				window[i] = dev.copied - before
			}
			var rope int64
			for _, r := range ms[1].b.ropes {
				rope += r.cos.bytes + r.sin.bytes
			}
			if window[0]-window[1] != rope {
				t.Errorf("the second model's windows copied %d and %d bytes, want them apart by its RoPE tables' %d", window[0], window[1], rope)
			}
		}
		ms[0].Close() // the first closes first: the second still scores
		c.same(t, ms[1:])
		ms[1].Close()
		if a, b := es[0].Allocated()-a0, es[1].Allocated()-b0; a != 0 || b != 0 {
			t.Errorf("after both closed, %d and %d bytes more allocated than before", a, b)
		}
	})
}

// oneDevice loads the model for two engines on e and checks it.
func (c *shared) oneDevice(t *testing.T, e *Engine) {
	t.Run("one device", func(t *testing.T) {
		before := e.Allocated()
		ms := c.load(t, []*Engine{e, e}, false)
		if got := e.Allocated() - before; got != c.weights {
			t.Errorf("two engines on one device allocated %d bytes at load, want the weights' %d once", got, c.weights)
		}
		if p, want := ms[0].placement(), "one copy on "+e.label()+", shared by its 2 engines"; p != want {
			t.Errorf("placement %q, want %q", p, want)
		}
		c.same(t, ms)
		closeAll(ms)
		if got := e.Allocated() - before; got != 0 {
			t.Errorf("after both closed, %d bytes more allocated than before", got)
		}
	})
}
