package nn

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// Context carries what a forward pass needs besides the weights: the number
// of goroutines and the scratch arenas. A Context is used by one forward
// pass at a time.
type Context struct {
	Threads int     // goroutines for parallel kernels; < 1 means GOMAXPROCS
	KV      KVStore // the attention cache's storage; nil stores float32 exactly
	// Int8 selects the int8 mode for matrices of quantized weights:
	// activations quantized to 8 bits per block of 32 and integer dot
	// products, as llama.cpp computes (see int8.go). False keeps
	// activations in float32.
	Int8 bool

	f32 arena[float32]
	f64 arena[float64]
}

// NewContext returns a Context running kernels on threads goroutines
// (GOMAXPROCS when threads < 1).
func NewContext(threads int) *Context {
	if threads < 1 {
		threads = runtime.GOMAXPROCS(0)
	}
	return &Context{Threads: threads}
}

// Reset returns every slice handed out by Alloc and Alloc64 to the arenas.
// Slices from before the Reset must not be used afterwards.
func (c *Context) Reset() {
	c.f32.reset()
	c.f64.reset()
}

// Alloc returns n float32s from the arena. They are not zeroed: kernels
// write every element of their outputs.
func (c *Context) Alloc(n int) []float32 { return c.f32.alloc(n) }

// Alloc64 returns n float64s from the arena, not zeroed.
func (c *Context) Alloc64(n int) []float64 { return c.f64.alloc(n) }

// Mark returns the arenas' current positions, for Release.
func (c *Context) Mark() Mark { return Mark{c.f32.mark(), c.f64.mark()} }

// Release returns the slices allocated since m to the arenas: a layer
// releases its scratch so that the next layer reuses it, and the arenas
// stay the size of one layer's needs, not the whole network's.
func (c *Context) Release(m Mark) {
	c.f32.release(m.f32)
	c.f64.release(m.f64)
}

// Mark is a position in a Context's arenas.
type Mark struct{ f32, f64 arenaMark }

// KVStore is the attention cache as attention sees it: Store replaces one
// layer's keys (after RoPE) and values, each (tokens, heads, headDim), with
// what reading them back from the cache gives.
type KVStore interface {
	Store(layer int, k, v []float32, tokens, heads, headDim int)
}

// StoreKV passes a layer's keys and values through c.KV, if set.
func (c *Context) StoreKV(layer int, k, v []float32, tokens, heads, headDim int) {
	if c.KV != nil {
		c.KV.Store(layer, k, v, tokens, heads, headDim)
	}
}

// arena hands out slices stack-like from a list of chunks that it keeps
// across passes: a request that does not fit the rest of the current chunk
// goes to the next chunk big enough (chunks too small for it are skipped,
// and freed once no slice uses them), or to a new one. Memory never becomes
// garbage while a pass runs, so the heap stays the size of the largest
// pass's live data (no collector slack on top of it), which bounds the
// memory of long windows.
type arena[T any] struct {
	chunks [][]T
	cur    int // chunk in use
	off    int // elements handed out from chunks[cur]
}

type arenaMark struct{ cur, off int }

// minChunk is the smallest chunk, in elements.
const minChunk = 1 << 20

func (a *arena[T]) alloc(n int) []T {
	for a.cur < len(a.chunks) {
		ch := a.chunks[a.cur]
		if a.off+n <= len(ch) {
			s := ch[a.off : a.off+n : a.off+n]
			a.off += n
			return s
		}
		if a.off == 0 && a.cur == len(a.chunks)-1 {
			break // an empty last chunk too small: replace it
		}
		a.cur++
		a.off = 0
	}
	ch := make([]T, max(n, minChunk))
	if a.cur < len(a.chunks) {
		a.chunks[a.cur] = ch
	} else {
		a.chunks = append(a.chunks, ch)
	}
	a.off = n
	return ch[:n:n]
}

func (a *arena[T]) mark() arenaMark { return arenaMark{a.cur, a.off} }

func (a *arena[T]) release(m arenaMark) { a.cur, a.off = m.cur, m.off }

func (a *arena[T]) reset() { a.cur, a.off = 0, 0 }

// threads returns the goroutine count, at least 1.
func (c *Context) threads() int {
	if c == nil || c.Threads < 1 {
		return runtime.GOMAXPROCS(0)
	}
	return c.Threads
}

// Parallel calls fn(worker, lo, hi) on contiguous chunks that cover [0, n),
// one chunk per goroutine, at most Threads of them, and waits. worker is in
// [0, Workers(n)) and tells a chunk which per-worker scratch to use.
// Chunking is deterministic, and every kernel computes each output element
// on one goroutine in a fixed order, so results do not depend on Threads.
func (c *Context) Parallel(n int, fn func(worker, lo, hi int)) {
	w := c.Workers(n)
	if w <= 1 {
		if n > 0 {
			fn(0, 0, n)
		}
		return
	}
	var wg sync.WaitGroup
	for i := 0; i < w; i++ {
		lo, hi := i*n/w, (i+1)*n/w
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(i, lo, hi)
		}()
	}
	wg.Wait()
}

// Workers returns how many chunks Parallel(n, ...) makes.
func (c *Context) Workers(n int) int { return max(0, min(n, c.threads())) }

// check panics when a slice is shorter than a kernel needs: a programmer
// error between our own modules, reported with both sizes.
func check(what string, got, want int) {
	if got < want {
		panic(fmt.Sprintf("nn: %s has %d elements, need %d", what, got, want))
	}
}

// ParallelDynamic calls fn(worker, lo, hi) on chunks of grain items that
// cover [0, n), handing chunks to Workers(n/grain) goroutines as they
// finish: for loops whose items cost unequal time (causal attention rows).
// Each item is still computed by exactly one goroutine.
func (c *Context) ParallelDynamic(n, grain int, fn func(worker, lo, hi int)) {
	if grain < 1 {
		grain = 1
	}
	chunks := (n + grain - 1) / grain
	w := c.Workers(chunks)
	if w <= 1 {
		if n > 0 {
			fn(0, 0, n)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < w; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ch := int(next.Add(1) - 1)
				if ch >= chunks {
					return
				}
				fn(i, ch*grain, min((ch+1)*grain, n))
			}
		}()
	}
	wg.Wait()
}

// Add adds src to dst element by element: dst += src.
func Add(dst, src []float32) {
	check("Add src", len(src), len(dst))
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}
