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
	// LlamaCPP, with Int8, computes every float32 operation as ggml-cpu
	// does, in its order, to reproduce llama.cpp's CPU arithmetic to the
	// bit (ggml.go): RMSNorm, RoPE and SwiGLU, the products in ggml's
	// orders, and (nn.Attention.GGMLF16) attention over an f16 cache.
	LlamaCPP bool
	// GGMLAVX2, with LlamaCPP, computes as llama.cpp's CPU build for AVX2
	// machines does (Debian's libggml-cpu-haswell) rather than its build
	// for AVX-512 machines (libggml-cpu-zen4, the default): the two sum in
	// lanes of 8 and 16 and have different e^x and matrix kernels.
	GGMLAVX2 bool
	// GGMLAMX, with LlamaCPP (and not GGMLAVX2), computes as llama.cpp's
	// CPU build for CPUs with AMX-INT8 does (Debian's
	// libggml-cpu-sapphirerapids): its AVX-512 build but for the matrices
	// its AMX buffer takes (AMXTaken), which it multiplies in its AMX
	// kernels' order (ggml_amx.go).
	GGMLAMX bool

	mem *arenas // created on first use; its chunks go back to the system on Free
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
	if c.mem != nil {
		c.mem.f32.reset()
		c.mem.f64.reset()
	}
}

// Alloc returns n float32s from the arena. They are not zeroed: kernels
// write every element of their outputs. They are valid until the Reset,
// Release or Free that returns them: the memory is the arena's, not the
// collector's.
func (c *Context) Alloc(n int) []float32 { return c.arenas().f32.alloc(n) }

// Alloc64 returns n float64s from the arena, not zeroed.
func (c *Context) Alloc64(n int) []float64 { return c.arenas().f64.alloc(n) }

// Mark returns the arenas' current positions, for Release.
func (c *Context) Mark() Mark {
	a := c.arenas()
	return Mark{a.f32.mark(), a.f64.mark()}
}

// Release returns the slices allocated since m to the arenas: a layer
// releases its scratch so that the next layer reuses it, and the arenas
// stay the size of one layer's needs, not the whole network's.
func (c *Context) Release(m Mark) {
	a := c.arenas()
	a.f32.release(m.f32)
	a.f64.release(m.f64)
}

// ArenaBytes returns the bytes the arenas hold: the memory of the largest
// pass so far, for memory checks.
func (c *Context) ArenaBytes() int {
	if c.mem == nil {
		return 0
	}
	n := 0
	for _, ch := range c.mem.f32.chunks {
		n += 4 * len(ch)
	}
	for _, ch := range c.mem.f64.chunks {
		n += 8 * len(ch)
	}
	return n
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

// arenas are a Context's two arenas.
type arenas struct {
	f32 arena[float32]
	f64 arena[float64]
}

// arenas returns c's arenas, making them on first use.
func (c *Context) arenas() *arenas {
	if c.mem == nil {
		c.mem = &arenas{}
	}
	return c.mem
}

// Free gives the arenas' memory back to the operating system; every slice
// from Alloc and Alloc64 becomes invalid. The Context stays usable: its
// next pass maps new chunks. Freeing is explicit, never left to the
// collector, because a slice does not keep its Context reachable: a
// cleanup could unmap memory a kernel is still reading. A Context that is
// never freed keeps its chunks until the process exits.
func (c *Context) Free() {
	if c.mem == nil {
		return
	}
	for _, ch := range c.mem.f32.chunks {
		chunkFree(ch)
	}
	for _, ch := range c.mem.f64.chunks {
		chunkFree(ch)
	}
	c.mem = nil
}

// arena hands out slices stack-like from a list of chunks that it keeps
// across passes. A request that does not fit the rest of the current chunk
// goes to the next chunk; the chunks after the current one hold no live
// slice (the stack discipline), so when the next chunk is too small for the
// request, it and all after it are freed and replaced by one chunk that
// holds the request and at least as much as they did. Chunks come from the operating
// system, outside the Go heap (chunkAlloc), and go back to it when
// replaced: memory is never garbage waiting for a collection, so the
// process holds the largest pass's live data and a little rounding, which
// bounds the memory of long windows.
type arena[T any] struct {
	chunks [][]T
	cur    int // chunk in use
	off    int // elements handed out from chunks[cur]
}

type arenaMark struct{ cur, off int }

// minChunk is the smallest chunk, in elements.
const minChunk = 1 << 20

func (a *arena[T]) alloc(n int) []T {
	if a.cur < len(a.chunks) && a.off+n > len(a.chunks[a.cur]) && a.off > 0 {
		a.cur++ // the rest of this chunk is too small: on to the next
		a.off = 0
	}
	if a.cur < len(a.chunks) && n > len(a.chunks[a.cur]) {
		// The chunks from here on are unused (past the stack's top) and
		// this one is too small: merge them all into one that fits, so
		// that the arena grows only to the most the stack ever holds.
		size := 0
		for _, ch := range a.chunks[a.cur:] {
			size += len(ch)
			chunkFree(ch)
		}
		a.chunks = append(a.chunks[:a.cur], chunkAlloc[T](max(n, size, minChunk)))
	}
	if a.cur == len(a.chunks) {
		a.chunks = append(a.chunks, chunkAlloc[T](max(n, minChunk)))
	}
	ch := a.chunks[a.cur]
	s := ch[a.off : a.off+n : a.off+n]
	a.off += n
	return s
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
