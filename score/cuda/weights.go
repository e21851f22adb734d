package cuda

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// A model's weights are a weight set: the device memory Prepare allocates
// for its matrices and vectors, the deferred copies into it (lazy.go), and
// the devices it lies on. Several backends can use one set:
//
//   - engines on the same device (--devices 0,0) share their device's copy:
//     two copies in one memory would hold the same bytes;
//   - a model larger than one device (or any, with --spread-weights) is
//     spread over all the listed devices, each allocation on the device
//     holding the fewest weight bytes so far, and every engine's kernels
//     read the others' shares over NVLink (peer access; docs/cuda.md,
//     "Several GPUs").
//
// The first backend of a set allocates and copies; a backend that joins it
// later (follows) runs Prepare as the first did, tensor after tensor, and
// takes the first's allocation at each step instead of making its own, so
// every matrix and vector points at the same memory, and it copies
// nothing. A kernel reads the same bytes wherever they lie, so the scores
// are those of a model of its own, bit for bit (TestSharedWeights).
// Activations, KV caches and scratch stay on each engine's device.

// weightSet is one copy of a model's weights.
type weightSet struct {
	homes []*Engine // the devices it lies on

	mu     sync.Mutex
	allocs []homeBuf // in the order Prepare made them
	bytes  []int64   // on each home
	users  int       // backends using the set: the last to close frees it
	lazy   lazyWeights
}

// homeBuf is a weight allocation and the engine whose device holds it.
type homeBuf struct {
	buf
	home *Engine
}

func newWeightSet(homes ...*Engine) *weightSet {
	return &weightSet{homes: homes, bytes: make([]int64, len(homes))}
}

// join adds a backend to the set; it reports whether another joined first
// (whose allocations the backend then takes).
func (s *weightSet) join() (follows bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users++
	return s.users > 1
}

// alloc allocates bytes of weight memory on the home with the fewest
// weight bytes (the first such), on that engine's thread.
func (s *weightSet) alloc(bytes int64) (homeBuf, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.Index(s.bytes, slices.Min(s.bytes))
	h := s.homes[i]
	var w buf
	err := h.Do(func() error {
		var err error
		w, err = h.alloc(bytes)
		return err
	})
	if err != nil {
		return homeBuf{}, err
	}
	s.allocs = append(s.allocs, homeBuf{w, h})
	s.bytes[i] += w.bytes
	return homeBuf{w, h}, nil
}

// take returns the set's allocation number i for a backend that follows
// the first: the same size, or the two loads went different ways (an
// internal error, not a wrong number).
func (s *weightSet) take(i int, bytes int64) (homeBuf, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= len(s.allocs) || s.allocs[i].bytes != allocBytes(bytes) {
		return homeBuf{}, fmt.Errorf("cuda: shared weights: allocation %d of %d bytes does not match the first engine's load", i, bytes)
	}
	return s.allocs[i], nil
}

// sharers is how many backends use the set now.
func (s *weightSet) sharers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.users
}

// total is the set's weight bytes.
func (s *weightSet) total() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, b := range s.bytes {
		n += b
	}
	return n
}

// spread describes where the weights lie when that is more than one
// device ("" otherwise): "spread over cuda:0 (40.1 GiB), cuda:1 (39.8 GiB)".
func (s *weightSet) spread() string {
	if len(s.homes) < 2 {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	parts := make([]string, len(s.homes))
	for i, h := range s.homes {
		parts[i] = fmt.Sprintf("%s (%s)", h.label(), humanBytes(s.bytes[i]))
	}
	return "spread over " + strings.Join(parts, ", ")
}

// leave removes a backend from the set; the last one frees the weights.
// When the first backend leaves before the copies ran, they can no longer
// run (they read its file's mapping): the others' next window fails,
// saying so.
func (s *weightSet) leave(first bool) error {
	s.mu.Lock()
	s.users--
	last := s.users == 0
	s.mu.Unlock()
	l := &s.lazy
	l.mu.Lock()
	if first && !l.done {
		l.pending, l.done = nil, true
		l.err = errors.New("cuda: the weights were never copied: the model that loaded them was closed first")
	}
	l.mu.Unlock()
	if !last {
		return nil
	}
	var errs []error
	for i := range s.allocs {
		a := &s.allocs[i]
		errs = append(errs, a.home.Do(func() error { return a.home.release(&a.buf) }))
	}
	s.allocs = nil
	return errors.Join(errs...)
}

// allocW allocates bytes of weight memory (a tensor's) and returns it with
// the engine of the device that holds it, which copies into it; a backend
// that follows the set's first takes the first's allocation instead.
func (b *gpuBackend) allocW(bytes int64) (ptr, *Engine, error) {
	if b.follows {
		w, err := b.set.take(b.taken, bytes)
		b.taken++
		return w.p, w.home, err
	}
	w, err := b.set.alloc(bytes)
	return w.p, w.home, err
}

// enablePeers lets each engine's kernels read the memory of every other
// one, or says which pair cannot.
func enablePeers(es []*Engine) error {
	for _, a := range es {
		for _, o := range es {
			if a == o {
				continue
			}
			if err := a.Do(func() error { return a.dev.peer(o.dev) }); err != nil {
				return fmt.Errorf("cuda: %s cannot read %s's memory, so the weights cannot be spread over them: %w", a.label(), o.label(), err)
			}
		}
	}
	return nil
}
