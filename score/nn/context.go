// Package nn holds the modules a decoder-only transformer is built from:
// Embedding, Linear, RMSNorm, RoPE, Attention and the SwiGLU MLP, each with
// one Forward over a whole window of tokens at once.
//
// Why whole windows: scoring a text means running every position of a window
// (a few hundred to a few thousand tokens) through the network from an empty
// state. Treating the window as a matrix (rows = tokens) turns every weight
// product into a matrix product, so each weight row is dequantized once per
// window instead of once per token, and the work splits across goroutines
// by output rows (Linear) or by head and query (Attention).
//
// This is the CPU reference: plain Go over float32 slices, with float64
// where it is cheap and buys exactness (norms, RoPE angles, softmax sums).
// Every kernel is a free function or a method whose doc comment gives the
// shapes, output first; faster kernels must agree with these.
//
// Buffers come from a Context's arena, which is reset per window and keeps
// its memory, so scoring many windows of one length allocates nothing after
// the first. Shape mismatches between our own modules are programmer errors
// and panic with both shapes; bad model data is caught when a model loads.
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
	Threads int // goroutines for parallel kernels; < 1 means GOMAXPROCS

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
// Slices from before the Reset must not be used afterwards. When the last
// pass needed more than an arena held, Reset grows it, so the next window
// of the same shape is served from one block.
func (c *Context) Reset() {
	c.f32.reset()
	c.f64.reset()
}

// Alloc returns n float32s from the arena. They are not zeroed: kernels
// write every element of their outputs.
func (c *Context) Alloc(n int) []float32 { return c.f32.alloc(n) }

// Alloc64 returns n float64s from the arena, not zeroed.
func (c *Context) Alloc64(n int) []float64 { return c.f64.alloc(n) }

// arena hands out slices of one block, reset per window.
type arena[T any] struct {
	buf  []T // slices handed out from buf[:off]
	off  int
	need int // elements requested since the last reset (the high-water mark)
}

func (a *arena[T]) alloc(n int) []T {
	a.need += n
	if a.off+n <= len(a.buf) {
		s := a.buf[a.off : a.off+n : a.off+n]
		a.off += n
		return s
	}
	return make([]T, n) // first pass of a larger shape; reset will grow the block
}

func (a *arena[T]) reset() {
	if a.need > len(a.buf) {
		a.buf = make([]T, a.need)
	}
	a.off, a.need = 0, 0
}

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
