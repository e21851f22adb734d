package cuda

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"ppl.dev/kernels"
	"ppl.dev/score/cuda/cublas"
	"ppl.dev/score/cuda/driver"
)

// ptr is a device address.
type ptr = driver.DevicePtr

// dim3 is a grid or block shape.
type dim3 = [3]uint32

// device is what the engine needs of a GPU: memory, copies, kernel launches
// by name and cuBLAS's GEMM. gpuDevice is the real one; the tests also run
// the engine on an emulation of it in Go (sim_test.go), which checks the
// host-side code (argument lists, offsets, launch shapes, the forward pass's
// order) on machines without a GPU.
type device interface {
	alloc(bytes int64) (ptr, error)
	free(p ptr) error
	htod(dst ptr, src unsafe.Pointer, bytes int64) error
	dtoh(dst unsafe.Pointer, src ptr, bytes int64) error
	memsetD32(p ptr, v uint32, n int64) error
	launch(kernel string, grid, block dim3, args []any) error
	// gemm is cublasGemmEx with float32 accumulation, column-major.
	gemm(ta, tb cublas.Op, m, n, k int, alpha float32, a ptr, at cublas.DataType, lda int,
		b ptr, bt cublas.DataType, ldb int, beta float32, c ptr, ct cublas.DataType, ldc int) error
	// gemmBatched is cublasGemmBatchedEx: count gemms of one shape, the
	// addresses of their A, B and C in the device arrays as, bs and cs.
	gemmBatched(ta, tb cublas.Op, m, n, k int, alpha float32, as ptr, at cublas.DataType, lda int,
		bs ptr, bt cublas.DataType, ldb int, beta float32, cs ptr, ct cublas.DataType, ldc int, count int) error
	sync() error
	memInfo() (free, total uint64, err error)
	// peer lets this device's kernels read and write o's memory (peer
	// access), or says why they cannot.
	peer(o device) error
}

// Engine is one GPU: its primary context, owned by one goroutine locked to
// its OS thread (the driver's current context is per thread), which runs
// every CUDA call handed to Do. Models on the same device share it.
type Engine struct {
	Ordinal int
	Name    string // "NVIDIA H200"
	CC      [2]int // compute capability
	SMs     int
	Memory  uint64        // bytes
	Driver  string        // the CUDA version the driver supports, "13.0"
	Release string        // the driver's release, "580.159.03" ("" without NVML)
	CUBLAS  string        // cuBLAS version and library
	JIT     time.Duration // loading the kernels' PTX (the driver compiles it, or takes it from its cache)
	Copies  string        // how small copies reach the device: "staged", or why they are synchronous

	// SyncEach synchronizes after every launch so that an asynchronous
	// fault is reported with the kernel that caused it (slower; tests and
	// PPL_CUDA_SYNC=1 turn it on).
	SyncEach bool

	dev  device
	work chan func()

	mu             sync.Mutex
	used, peak     int64 // bytes allocated through the engine
	peakDeviceUsed uint64
}

// ErrNoDevice is wrapped by Open's errors when there is no usable GPU: no
// driver, no device, or no device with that ordinal.
var ErrNoDevice = errors.New("no usable NVIDIA GPU")

var (
	enginesMu sync.Mutex
	engines   = map[int]*Engine{}
	engineErr = map[int]error{}
)

// Open returns the engine of CUDA device ordinal, starting it on first use:
// the driver is loaded, the kernels' PTX compiled for the device, cuBLAS
// opened. An error wraps ErrNoDevice when the machine has no usable GPU.
// Engines live until the process ends.
func Open(ordinal int) (*Engine, error) {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	if e, ok := engines[ordinal]; ok {
		return e, nil
	}
	if err, ok := engineErr[ordinal]; ok {
		return nil, err
	}
	e, err := startEngine(ordinal)
	if err != nil {
		engineErr[ordinal] = err
		return nil, err
	}
	engines[ordinal] = e
	return e, nil
}

// startEngine starts an engine of CUDA device ordinal: its goroutine, on
// the device's primary context (a second engine of one device, which only
// the tests start, shares the context and so its memory).
func startEngine(ordinal int) (*Engine, error) {
	e := &Engine{Ordinal: ordinal, work: make(chan func()), SyncEach: os.Getenv("PPL_CUDA_SYNC") == "1"}
	ready := make(chan error)
	go e.loop(func() error { return e.initGPU() }, ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return e, nil
}

// loop is the engine's goroutine: locked to its thread for good, it runs
// init and then every function handed to Do.
func (e *Engine) loop(init func() error, ready chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread carries the context
	if err := init(); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for f := range e.work {
		f()
	}
}

// Do runs f on the engine's thread and returns its error. A panic in f
// (a bug) comes back as an error, and the engine keeps running.
func (e *Engine) Do(f func() error) error {
	done := make(chan error, 1)
	e.work <- func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("cuda: internal error: %v", r)
			}
		}()
		done <- f()
	}
	return <-done
}

// Describe is a one-line description of the device.
func (e *Engine) Describe() string {
	copies := ""
	if e.Copies != "" {
		copies = "; copies to the device " + e.Copies
	}
	return fmt.Sprintf("cuda:%d %s (compute %d.%d, %d SMs, %.0f GiB; CUDA %s, driver %s, %s%s)",
		e.Ordinal, e.Name, e.CC[0], e.CC[1], e.SMs, float64(e.Memory)/(1<<30), e.Driver, orUnknown(e.Release), e.CUBLAS, copies)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// Memory accounting: bytes allocated through the engine, and the peak.
func (e *Engine) account(delta int64) {
	e.mu.Lock()
	e.used += delta
	e.peak = max(e.peak, e.used)
	e.mu.Unlock()
}

// PeakAllocated returns the most bytes the engine had allocated at once.
func (e *Engine) PeakAllocated() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.peak
}

// Allocated returns the bytes the engine has allocated now.
func (e *Engine) Allocated() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.used
}

// PeakDeviceUsed returns the most device memory in use (by anyone: the
// context, cuBLAS's workspaces and ppl) seen at the end of a window.
func (e *Engine) PeakDeviceUsed() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.peakDeviceUsed
}

// sampleMemory records device memory in use; call on the engine's thread.
func (e *Engine) sampleMemory() {
	free, total, err := e.dev.memInfo()
	if err != nil {
		return
	}
	e.mu.Lock()
	e.peakDeviceUsed = max(e.peakDeviceUsed, total-free)
	e.mu.Unlock()
}

// ResetPeak restarts the peak counters (between benchmark runs).
func (e *Engine) ResetPeak() {
	e.mu.Lock()
	e.peak, e.peakDeviceUsed = e.used, 0
	e.mu.Unlock()
}

// buf is a device allocation.
type buf struct {
	p     ptr
	bytes int64
}

// at returns the address off bytes into b.
func (b buf) at(off int64) ptr { return b.p + ptr(off) }

// allocBytes is what an allocation of n bytes takes, of device memory
// (Engine.alloc) or of scratch memory (arena.alloc): at least 1, rounded up
// to a multiple of 256, cuMemAlloc's alignment, which the scratch
// memory's pieces keep.
func allocBytes(n int64) int64 { return (max(n, 1) + 255) &^ 255 }

// alloc allocates bytes (allocBytes of them) of device memory; on the
// engine's thread.
func (e *Engine) alloc(bytes int64) (buf, error) {
	bytes = allocBytes(bytes)
	p, err := e.dev.alloc(bytes)
	if err != nil {
		return buf{}, fmt.Errorf("cuda: allocating %s on %s (%s allocated by ppl): %w", humanBytes(bytes), e.label(), humanBytes(e.Allocated()), err)
	}
	e.account(bytes)
	return buf{p, bytes}, nil
}

// grow makes b at least bytes long, its contents lost. A buffer it
// replaces is freed after a sync (kernels queued before may still read
// it; what names it in that error). On the engine's thread.
func (e *Engine) grow(b *buf, bytes int64, what string) error {
	if b.bytes >= bytes {
		return nil
	}
	if b.p != 0 {
		if err := e.sync("before growing the " + what); err != nil {
			return err
		}
		e.release(b)
	}
	var err error
	*b, err = e.alloc(bytes)
	return err
}

// release frees b and zeroes it; on the engine's thread.
func (e *Engine) release(b *buf) error {
	if b.p == 0 {
		return nil
	}
	err := e.dev.free(b.p)
	e.account(-b.bytes)
	*b = buf{}
	return err
}

func (e *Engine) label() string { return fmt.Sprintf("cuda:%d", e.Ordinal) }

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}

// upload copies src to device address dst.
func upload[T any](e *Engine, dst ptr, src []T) error {
	if len(src) == 0 {
		return nil
	}
	n := int64(len(src)) * int64(unsafe.Sizeof(src[0]))
	err := e.dev.htod(dst, unsafe.Pointer(&src[0]), n)
	runtime.KeepAlive(src)
	return err
}

// download copies len(dst) elements from device address src.
func download[T any](e *Engine, dst []T, src ptr) error {
	if len(dst) == 0 {
		return nil
	}
	n := int64(len(dst)) * int64(unsafe.Sizeof(dst[0]))
	err := e.dev.dtoh(unsafe.Pointer(&dst[0]), src, n)
	runtime.KeepAlive(dst)
	return err
}

// launch queues kernel over grid × block threads with args in the kernel's
// parameter order. Go int and int32 pass as a C int, int64 as a long long,
// float32 as float, float64 as double, ptr and buf as pointers.
func (e *Engine) launch(kernel string, grid, block dim3, args ...any) error {
	for i, g := range grid {
		if g == 0 || (i > 0 && g > 65535) {
			return fmt.Errorf("cuda: kernel %s: bad grid %v", kernel, grid)
		}
	}
	if err := e.dev.launch(kernel, grid, block, args); err != nil {
		return fmt.Errorf("cuda: kernel %s: %w", kernel, err)
	}
	if e.SyncEach {
		if err := e.dev.sync(); err != nil {
			return fmt.Errorf("cuda: kernel %s (grid %v block %v): %w", kernel, grid, block, err)
		}
	}
	return nil
}

// sync waits for the device and reports an asynchronous fault, naming what
// was running.
func (e *Engine) sync(what string) error {
	if err := e.dev.sync(); err != nil {
		return fmt.Errorf("cuda: %s: %w", what, err)
	}
	return nil
}

// gridFor returns a 1-D grid of 256-thread blocks for a grid-stride loop
// over n items.
func gridFor(n int64) dim3 {
	b := (n + 255) / 256
	b = max(1, min(b, 1<<16))
	return dim3{uint32(b), 1, 1}
}

var block256 = dim3{256, 1, 1}

// Row-major products, as ppl stores them: W is (out, in) with rows of in
// half-precision values, x is (rows, in) of the same type, y is (rows, out).

// gemm computes y = beta·y + x·Wᵀ for rows of x: x (rows, k) with row
// stride ldx and W (nOut, k), both of type in (bf16 or fp16), y (rows,
// nOut) of type yt with row stride ldy; float32 accumulation. In cuBLAS's
// column-major terms that is yᵀ = W·xᵀ, a "TN" product: C (nOut × rows) =
// op(A)=Aᵀ with A = Wᵀ stored (k × nOut, lda k), times B = xᵀ stored
// (k × rows, ldb ldx).
func (e *Engine) gemm(y ptr, yt cublas.DataType, ldy int, x ptr, ldx int, w ptr, in cublas.DataType, rows, k, nOut int, beta float32) error {
	return e.gemmRows(y, yt, ldy, x, ldx, w, k, in, rows, k, nOut, beta)
}

// gemmRows is gemm with W's rows ldw elements apart (ldw >= k): a product
// with every (ldw/k)-th row of a matrix of rows of k, as QSA's pooled keys
// are read.
func (e *Engine) gemmRows(y ptr, yt cublas.DataType, ldy int, x ptr, ldx int, w ptr, ldw int, in cublas.DataType, rows, k, nOut int, beta float32) error {
	if rows == 0 {
		return nil
	}
	err := e.dev.gemm(cublas.OpT, cublas.OpN, nOut, rows, k, 1, w, in, ldw, x, in, ldx, beta, y, yt, ldy)
	if err != nil {
		return fmt.Errorf("cuda: product (%d×%d)·(%d×%d)ᵀ: %w", rows, k, nOut, k, err)
	}
	if e.SyncEach {
		return e.sync(fmt.Sprintf("product (%d×%d)·(%d×%d)ᵀ", rows, k, nOut, k))
	}
	return nil
}

// gemmBatched is gemm for count products of one shape at once, y_i =
// x_i·W_iᵀ with W_i (nOut, k) dense and x_i (rows, k, row stride ldx) of
// type in, y_i (rows, nOut, row stride ldy) float32: the device array at
// arrays holds the addresses of the W_i, then of the x_i, then of the y_i
// (count each).
func (e *Engine) gemmBatched(arrays ptr, count int, in cublas.DataType, rows, k, nOut, ldx, ldy int) error {
	if rows == 0 || count == 0 {
		return nil
	}
	a := func(i int) ptr { return arrays + ptr(8*i*count) }
	err := e.dev.gemmBatched(cublas.OpT, cublas.OpN, nOut, rows, k, 1, a(0), in, k, a(1), in, ldx, 0, a(2), f32, ldy, count)
	if err != nil {
		return fmt.Errorf("cuda: %d products (%d×%d)·(%d×%d)ᵀ: %w", count, rows, k, nOut, k, err)
	}
	if e.SyncEach {
		return e.sync(fmt.Sprintf("%d products (%d×%d)·(%d×%d)ᵀ", count, rows, k, nOut, k))
	}
	return nil
}

// elapsed runs f between two events and returns the device time it took.
// On the sim it returns the host time.
func (e *Engine) elapsed(f func() error) (time.Duration, error) {
	g, ok := e.dev.(*gpuDevice)
	if !ok {
		t0 := time.Now()
		err := f()
		return time.Since(t0), err
	}
	return g.elapsed(f)
}

// kernelModules maps each PTX module to the kernels it holds.
var kernelModules = map[string][]string{
	"embed":       {"embed"},
	"rmsnorm":     {"rmsnorm_f32", "layernorm_f32"},
	"rope":        {"rope"},
	"swiglu":      {"swiglu_half", "glu_half"},
	"add":         {"add_bias", "cast_half"},
	"elementwise": {"add_f32", "scale_f32", "clamp_f32", "unscale_f32", "gate_mul", "softcap", "xielu_f32", "widen_half"},
	"experts":     {"gather_rows", "scale_rows", "scatter_scaled", "sum_choices", "moe_route"},
	"logsoftmax":  {"logsoftmax_target", "logsoftmax_kld"},
	"kvstore":     {"kv_store_plain", "kv_store_scaled", "kv_store_q4", "kv_amax", "kv_store_nvfp4", "kv_decode", "kv_store_ggml", "kv_rotate", "kv_store_rot"},
	"fwht":        {"fwht_f32"},
	"attention":   {"attn_simple", "attn_fa16", "attn_fa32", "attn_fa64", "attn_fa128", "attn_fa256", "attn_fa512", "attn_fx16", "attn_fx32", "attn_fx64", "attn_fx128", "attn_fx256", "attn_fx512", "attn_fl576", "attn_flx576"},
	"random":      {"fill_uniform_half", "fill_f32"},
}

// gpuDevice is a CUDA device through the driver API and cuBLAS.
type gpuDevice struct {
	dev  driver.Device
	ctx  driver.Context
	fns  map[string]driver.Function
	blas cublas.Handle
	scal *cublas.Scalars
	args *argBlock
	pin  runtime.Pinner
	// broken is the first fault that left the context unusable (a kernel's
	// illegal address): every later call fails naming it, rather than with
	// the driver's repeat of the code from an unrelated call.
	broken error
	last   string // the kernel launched last, for naming a fault
	// stage is page-locked memory that small copies to the device go
	// through, queued rather than waited for (a synchronous copy from Go's
	// memory first waits for every queued kernel, and the device idles
	// while the host queues the next ones); stage[:staged] holds copies
	// that may not have run yet, free again after a synchronization. nil
	// when the driver gave none: copies are then synchronous.
	stage  []byte
	staged int
}

// stageBytes is the staging buffer's size; copies of more than stageMax
// bytes (weights) are synchronous.
const (
	stageBytes = 32 << 20
	stageMax   = 4 << 20
)

// stagedCopies sends copies through the staging buffer when there is one;
// the GPU benchmark's baseline turns it off.
var stagedCopies = true

// ErrContextUnusable is wrapped by every error after a fault that left the
// device's context unusable for the rest of the process.
var ErrContextUnusable = errors.New("CUDA context is unusable after an earlier error")

// check records a sticky fault from the call named what; on the engine's thread.
func (g *gpuDevice) check(what string, err error) error {
	if err != nil && g.broken == nil && driver.IsSticky(err) {
		g.broken = fmt.Errorf("%s: %w", what, err)
	}
	return err
}

// usable fails once the context is unusable.
func (g *gpuDevice) usable() error {
	if g.broken != nil {
		return fmt.Errorf("%w: %v", ErrContextUnusable, g.broken)
	}
	return nil
}

// argBlock holds kernel parameters: ptrs[i] points at vals[i]. It is
// pinned, so the addresses handed to cuLaunchKernel stay valid.
type argBlock struct {
	vals [32]uint64
	ptrs [32]uintptr
}

// initGPU starts the driver, the context, the kernels and cuBLAS; on the
// engine's thread.
func (e *Engine) initGPU() error {
	wrap := func(err error) error { return fmt.Errorf("%w: %v", ErrNoDevice, err) }
	if err := driver.Load(); err != nil {
		return wrap(err)
	}
	if err := driver.Init(); err != nil {
		return wrap(err)
	}
	n, err := driver.DeviceCount()
	if err != nil {
		return wrap(err)
	}
	if e.Ordinal < 0 || e.Ordinal >= n {
		return fmt.Errorf("%w: device cuda:%d asked for, the driver sees %d CUDA device(s)", ErrNoDevice, e.Ordinal, n)
	}
	g := &gpuDevice{fns: map[string]driver.Function{}, scal: &cublas.Scalars{}, args: &argBlock{}}
	if g.dev, err = driver.DeviceGet(e.Ordinal); err != nil {
		return err
	}
	if e.Name, err = g.dev.Name(); err != nil {
		return err
	}
	for _, a := range []struct {
		attr driver.Attribute
		dst  *int
	}{{driver.AttrComputeCapabilityMajor, &e.CC[0]}, {driver.AttrComputeCapabilityMinor, &e.CC[1]}, {driver.AttrMultiprocessorCount, &e.SMs}} {
		if *a.dst, err = g.dev.Attribute(a.attr); err != nil {
			return err
		}
	}
	if e.CC[0] < 8 {
		return fmt.Errorf("%w: %s has compute capability %d.%d; the CUDA backend needs 8.0 (Ampere) or newer", ErrNoDevice, e.Name, e.CC[0], e.CC[1])
	}
	if e.Memory, err = g.dev.TotalMem(); err != nil {
		return err
	}
	if v, err := driver.DriverVersion(); err == nil {
		e.Driver = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}
	e.Release = driver.DriverRelease()
	if g.ctx, err = g.dev.PrimaryCtxRetain(); err != nil {
		return err
	}
	if err := g.ctx.SetCurrent(); err != nil {
		return err
	}
	t0 := time.Now()
	for _, mod := range kernels.Modules() {
		names, ok := kernelModules[mod]
		if !ok {
			return fmt.Errorf("cuda: PTX module %s has no kernel list (kernelModules)", mod)
		}
		src, err := kernels.PTX(mod)
		if err != nil {
			return err
		}
		m, err := driver.ModuleLoadData(src)
		if err != nil {
			return fmt.Errorf("cuda: loading kernels %s.ptx on %s: %w", mod, e.Name, err)
		}
		for _, name := range names {
			f, err := m.Function(name)
			if err != nil {
				return fmt.Errorf("cuda: %s.ptx: %w", mod, err)
			}
			g.fns[name] = f
		}
	}
	for _, names := range kernelModules {
		for _, n := range names {
			if _, ok := g.fns[n]; !ok {
				return fmt.Errorf("cuda: kernel %s not found in the embedded PTX", n)
			}
		}
	}
	e.JIT = time.Since(t0)
	if err := cublas.Load(); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	if g.blas, err = cublas.Create(); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	if v, err := g.blas.Version(); err == nil {
		e.CUBLAS = fmt.Sprintf("cuBLAS %d.%d.%d (%s)", v/10000, v%10000/100, v%100, cublas.Library())
	}
	// The kernel parameter block and GEMM scalars stay pinned for the
	// engine's life (the whole process); on a failure below they are
	// unpinned, since a Pinner dropped with pinned objects is a fatal error.
	g.pin.Pin(g.args)
	g.pin.Pin(g.scal)
	for i := range g.args.ptrs {
		g.args.ptrs[i] = uintptr(unsafe.Pointer(&g.args.vals[i]))
	}
	e.Copies = "staged"
	if g.stage, err = driver.MemAllocHost(stageBytes); err != nil { // the process's: never freed
		e.Copies = fmt.Sprintf("synchronous (no staging memory: %v)", err)
	}
	e.dev = g
	// A first allocation, copies and kernel, checked now rather than in the
	// middle of a window.
	if err := e.smokeTest(); err != nil {
		e.dev = nil
		g.pin.Unpin()
		return fmt.Errorf("cuda: first use of %s failed: %w", e.Name, err)
	}
	return nil
}

// smokeTest runs one small kernel and reads its result back.
func (e *Engine) smokeTest() error {
	b, err := e.alloc(4 * 1000)
	if err != nil {
		return err
	}
	defer e.release(&b)
	if err := e.fillF32(b.p, 1000, 2.5); err != nil {
		return err
	}
	got := make([]float32, 1000)
	if err := download(e, got, b.p); err != nil {
		return err
	}
	for i, v := range got {
		if v != 2.5 {
			return fmt.Errorf("fill_f32 wrote %v at %d, want 2.5", v, i)
		}
	}
	return e.checkStaging(b.p, got)
}

// checkStaging queues a staged copy behind a kernel and reads back what
// landed at p (len(got) floats): the kernel's values but where the copy
// wrote. Where it does not, or the copy fails without spoiling the
// context, copies stay synchronous (e.Copies says why).
func (e *Engine) checkStaging(p ptr, got []float32) error {
	g, ok := e.dev.(*gpuDevice)
	if !ok || g.stage == nil {
		return nil
	}
	half := make([]float32, len(got)/2)
	for i := range half {
		half[i] = float32(i)
	}
	err := e.fillF32(p, int64(len(got)), 2.5)
	if err == nil {
		err = upload(e, p, half)
	}
	if err == nil {
		err = download(e, got, p)
	}
	if err != nil {
		if g.broken != nil {
			return err
		}
		g.stage = nil
		e.Copies = fmt.Sprintf("synchronous (a staged copy failed: %v)", err)
		return nil
	}
	for i, v := range got {
		if i < len(half) && v != half[i] || i >= len(half) && v != 2.5 {
			g.stage = nil
			e.Copies = fmt.Sprintf("synchronous (a staged copy behind a kernel read back %v at %d)", v, i)
			break
		}
	}
	return nil
}

func (g *gpuDevice) alloc(bytes int64) (ptr, error) {
	if err := g.usable(); err != nil {
		return 0, err
	}
	p, err := driver.MemAlloc(uint64(bytes))
	return p, g.check("allocating", err)
}

func (g *gpuDevice) free(p ptr) error {
	if g.broken != nil {
		return nil // the context's memory is lost with it; freeing would only repeat the fault
	}
	return g.check("freeing", driver.MemFree(p))
}

func (g *gpuDevice) htod(dst ptr, src unsafe.Pointer, n int64) error {
	if n == 0 {
		return nil
	}
	if err := g.usable(); err != nil {
		return err
	}
	if dst == 0 || src == nil || n < 0 {
		return fmt.Errorf("cuda: copy of %d bytes from %p to device address %#x: bad arguments", n, src, uint64(dst))
	}
	if g.stage == nil || n > stageMax || !stagedCopies {
		return g.check("copying to the device", driver.MemcpyHtoD(dst, src, uint64(n)))
	}
	at := (g.staged + 255) &^ 255
	if at+int(n) > len(g.stage) {
		if err := g.sync(); err != nil { // the staged copies have run
			return err
		}
		at = 0
	}
	copy(g.stage[at:at+int(n)], unsafe.Slice((*byte)(src), n))
	g.staged = at + int(n)
	return g.check("copying to the device", driver.MemcpyHtoDAsync(dst, unsafe.Pointer(&g.stage[at]), uint64(n)))
}

func (g *gpuDevice) dtoh(dst unsafe.Pointer, src ptr, n int64) error {
	if n == 0 {
		return nil
	}
	if err := g.usable(); err != nil {
		return err
	}
	if src == 0 || dst == nil || n < 0 {
		return fmt.Errorf("cuda: copy of %d bytes from device address %#x to %p: bad arguments", n, uint64(src), dst)
	}
	// A copy from the device waits for the default stream's queued work, the
	// staged copies included.
	if err := g.check("copying from the device", driver.MemcpyDtoH(dst, src, uint64(n))); err != nil {
		return err
	}
	g.staged = 0
	return nil
}

func (g *gpuDevice) memsetD32(p ptr, v uint32, n int64) error {
	if n == 0 {
		return nil
	}
	if err := g.usable(); err != nil {
		return err
	}
	return g.check("memset", driver.MemsetD32(p, v, uint64(n)))
}

func (g *gpuDevice) sync() error {
	if err := g.usable(); err != nil {
		return err
	}
	what := "the work queued before a synchronization"
	if g.last != "" {
		what = "kernel " + g.last + " (or work queued before it)"
	}
	if err := g.check(what, driver.CtxSynchronize()); err != nil {
		return err
	}
	g.staged = 0
	return nil
}

func (g *gpuDevice) peer(o device) error {
	p, ok := o.(*gpuDevice)
	switch {
	case !ok:
		return fmt.Errorf("not a GPU (%T)", o)
	case p.dev == g.dev: // one primary context: its memory is the other's
		return nil
	}
	can, err := g.dev.CanAccessPeer(p.dev)
	if err != nil {
		return err
	}
	if !can {
		return errors.New("the driver reports no peer access between the two (cuDeviceCanAccessPeer)")
	}
	return g.check("cuCtxEnablePeerAccess", p.ctx.EnablePeerAccess())
}

func (g *gpuDevice) memInfo() (uint64, uint64, error) {
	if err := g.usable(); err != nil {
		return 0, 0, err
	}
	f, t, err := driver.MemGetInfo()
	return f, t, g.check("cuMemGetInfo", err)
}

func (g *gpuDevice) launch(kernel string, grid, block dim3, args []any) error {
	f, ok := g.fns[kernel]
	if !ok {
		return errors.New("no such kernel")
	}
	if len(args) > len(g.args.vals) {
		return fmt.Errorf("%d arguments, at most %d", len(args), len(g.args.vals))
	}
	for i, a := range args {
		v, err := argBits(a)
		if err != nil {
			return fmt.Errorf("argument %d: %w", i, err)
		}
		g.args.vals[i] = v
	}
	if err := g.usable(); err != nil {
		return err
	}
	g.last = kernel
	return g.check("launching "+kernel, driver.LaunchKernel(f, grid, block, 0, 0, uintptr(unsafe.Pointer(&g.args.ptrs[0]))))
}

// argBits is a kernel argument's bytes, little-endian in a 64-bit slot
// (the driver reads as many bytes as the parameter has).
func argBits(a any) (uint64, error) {
	switch v := a.(type) {
	case ptr:
		return uint64(v), nil
	case buf:
		return uint64(v.p), nil
	case int:
		if v < math.MinInt32 || v > math.MaxInt32 {
			return 0, fmt.Errorf("int %d does not fit a C int", v)
		}
		return uint64(uint32(int32(v))), nil
	case int32:
		return uint64(uint32(v)), nil
	case int64:
		return uint64(v), nil
	case uint64:
		return v, nil
	case float32:
		return uint64(math.Float32bits(v)), nil
	case float64:
		return math.Float64bits(v), nil
	}
	return 0, fmt.Errorf("unsupported type %T", a)
}

func (g *gpuDevice) gemm(ta, tb cublas.Op, m, n, k int, alpha float32, a ptr, at cublas.DataType, lda int,
	b ptr, bt cublas.DataType, ldb int, beta float32, c ptr, ct cublas.DataType, ldc int) error {
	if err := g.usable(); err != nil {
		return err
	}
	g.scal.Alpha, g.scal.Beta = alpha, beta
	g.last = "cublasGemmEx"
	return g.blas.GemmEx(ta, tb, m, n, k, g.scal, a, at, lda, b, bt, ldb, c, ct, ldc)
}

func (g *gpuDevice) gemmBatched(ta, tb cublas.Op, m, n, k int, alpha float32, as ptr, at cublas.DataType, lda int,
	bs ptr, bt cublas.DataType, ldb int, beta float32, cs ptr, ct cublas.DataType, ldc int, count int) error {
	if err := g.usable(); err != nil {
		return err
	}
	g.scal.Alpha, g.scal.Beta = alpha, beta
	g.last = "cublasGemmBatchedEx"
	return g.blas.GemmBatchedEx(ta, tb, m, n, k, g.scal, as, at, lda, bs, bt, ldb, cs, ct, ldc, count)
}

func (g *gpuDevice) elapsed(f func() error) (time.Duration, error) {
	start, err := driver.EventCreate()
	if err != nil {
		return 0, err
	}
	defer start.Destroy()
	end, err := driver.EventCreate()
	if err != nil {
		return 0, err
	}
	defer end.Destroy()
	if err := start.Record(0); err != nil {
		return 0, err
	}
	if err := f(); err != nil {
		return 0, err
	}
	if err := end.Record(0); err != nil {
		return 0, err
	}
	if err := end.Synchronize(); err != nil {
		return 0, err
	}
	ms, err := driver.Elapsed(start, end)
	return time.Duration(float64(ms) * float64(time.Millisecond)), err
}
