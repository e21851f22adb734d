package cuda

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Weights reach the device when the first window is computed, not when
// the model loads. Prepare allocates each tensor's device memory at load
// (so a model that does not fit fails then, naming the tensor) and checks
// its size against its shape, but leaves the copy (reading the file's
// pages, and for matrices stored as halves their dequantization on the
// host) to gpuBackend.upload, which Model.Score and ScoreWith run first
// (and the first operation of any other caller).
// A rerun whose windows all replay from the score cache therefore reads
// none of the file's weights and copies nothing: for a 40 GB file that is
// minutes. The numbers do not change: the copies are the same, in the same
// order, only later.

// lazyWeights holds the deferred copies of a weight set (weights.go).
type lazyWeights struct {
	mu      sync.Mutex
	pending []lazyCopy
	done    bool
	ready   atomic.Bool // done without error: the operations' fast check
	err     error
	took    time.Duration
}

type lazyCopy struct {
	name string  // the tensor's, for errors
	home *Engine // the device it copies to
	copy func() error
}

// later defers f, the copy of tensor name's data to the device of home, or
// runs it now when the weights were copied already (a tensor prepared
// after the first window). A backend that shares another's weights
// (weights.go) copies nothing: the first backend's copies fill them.
func (b *gpuBackend) later(name string, home *Engine, f func() error) error {
	if b.follows {
		return nil
	}
	l := &b.set.lazy
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.pending = append(l.pending, lazyCopy{name, home, f})
		return nil
	}
	if err := f(); err != nil {
		return fmt.Errorf("cuda: copying tensor %s to the device: %w", name, err)
	}
	return nil
}

// upload runs the deferred copies once, each device's in the order Prepare
// made them and the devices of a spread set (weights.go) at once, and
// waits for them; later calls, and the other backends sharing the
// weights, return the first call's error (the first device's, when
// several fail).
func (b *gpuBackend) upload() error {
	l := &b.set.lazy
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return l.err
	}
	t0 := time.Now()
	homes := b.set.homes
	errs := make([]error, len(homes))
	var wg sync.WaitGroup
	for i, h := range homes {
		wg.Go(func() {
			for _, c := range l.pending {
				if c.home != h {
					continue
				}
				if err := c.copy(); err != nil {
					errs[i] = fmt.Errorf("cuda: copying tensor %s to the device: %w", c.name, err)
					return
				}
			}
			errs[i] = h.Do(func() error { return h.sync("copying the weights") })
		})
	}
	wg.Wait()
	for _, err := range errs {
		if l.err == nil {
			l.err = err
		}
	}
	l.pending, l.done, l.took = nil, true, time.Since(t0)
	l.ready.Store(l.err == nil)
	return l.err
}

// uploaded reports whether the copy of the weights ran, its error and how
// long it took.
func (b *gpuBackend) uploaded() (bool, error, time.Duration) {
	l := &b.set.lazy
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done, l.err, l.took
}
