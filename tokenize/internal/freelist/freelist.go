// Package freelist keeps reusable objects (tokenizer sessions with their
// buffers and word caches) across calls. Unlike sync.Pool it is not emptied
// by the garbage collector: a session's cache is only worth having if it
// survives from one text to the next, and a 1 MB text triggers GCs.
package freelist

import "runtime"

// List holds up to GOMAXPROCS idle objects.
type List[T any] struct {
	ch  chan T
	new func() T
}

// New returns a list that makes objects with mk when none is idle.
func New[T any](mk func() T) *List[T] {
	return &List[T]{ch: make(chan T, runtime.GOMAXPROCS(0)), new: mk}
}

// Get returns an idle object or a new one.
func (l *List[T]) Get() T {
	select {
	case x := <-l.ch:
		return x
	default:
		return l.new()
	}
}

// Put makes x available again; it is dropped when the list is full.
func (l *List[T]) Put(x T) {
	select {
	case l.ch <- x:
	default:
	}
}
