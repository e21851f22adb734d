package freelist

import (
	"runtime"
	"testing"
)

func TestList(t *testing.T) {
	made := 0
	l := New(func() *int { made++; return new(int) })
	a := l.Get()
	*a = 7
	l.Put(a)
	runtime.GC() // unlike sync.Pool, the list survives collections
	if b := l.Get(); b != a || *b != 7 || made != 1 {
		t.Fatalf("got %p (%d), want the idle object %p; made %d", b, *b, a, made)
	}
	for i := 0; i < runtime.GOMAXPROCS(0)+3; i++ {
		l.Put(new(int)) // beyond capacity: dropped, no blocking
	}
	if len(l.ch) != cap(l.ch) {
		t.Fatalf("holds %d of %d", len(l.ch), cap(l.ch))
	}
}
