// Package driver binds the few CUDA driver API functions that ppl's CUDA
// backend uses, through purego, so that ppl-score stays a pure Go binary
// (CGO_ENABLED=0) that runs everywhere and finds the NVIDIA driver at run
// time, on the machines that have one.
//
// Why bind by hand: the backend needs memory, module loading and kernel
// launches, nothing more; a cgo binding would make every build need the CUDA
// headers and every binary need libcuda. The library opened is libcuda.so.1,
// the driver's own (never the toolkit's link-time stub libcuda.so, which
// only fails). It is opened lazily by Load, once; a machine without it gets
// an error wrapping ErrNoDriver, never a panic.
//
// Bound from libcuda.so.1:
//
//	cuGetErrorName cuGetErrorString cuInit cuDriverGetVersion
//	cuDeviceGetCount cuDeviceGet cuDeviceGetName cuDeviceGetAttribute
//	cuDeviceTotalMem_v2 cuDevicePrimaryCtxRetain cuCtxSetCurrent cuCtxSynchronize
//	cuDeviceCanAccessPeer cuCtxEnablePeerAccess
//	cuMemAlloc_v2 cuMemFree_v2 cuMemcpyHtoD_v2 cuMemcpyDtoH_v2
//	cuMemsetD32_v2 cuMemGetInfo_v2
//	cuModuleLoadDataEx cuModuleGetFunction cuLaunchKernel
//	cuEventCreate cuEventRecord cuEventSynchronize cuEventElapsedTime cuEventDestroy_v2
//
// and, only to name the driver release in result headers, from
// libnvidia-ml.so.1 when present: nvmlInit_v2 nvmlSystemGetDriverVersion
// nvmlShutdown.
//
// (The primary context is retained for the life of the process and modules
// are never unloaded, so neither release nor unload is bound.)
//
// Every CUresult other than CUDA_SUCCESS becomes an *Error naming the call.
// The driver's current context is per OS thread: callers make every call
// that needs a context from one goroutine locked to its thread (package
// cuda's engine does). Pointers to Go memory passed here must stay live and
// unmoved for the call (heap memory, kept alive by the caller); memory the
// driver keeps after a call returns (kernel parameters are copied at launch,
// so none does) would have to be pinned.
package driver

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// ErrNoDriver is wrapped by Load's error when libcuda.so.1 cannot be opened:
// no NVIDIA driver on this machine.
var ErrNoDriver = errors.New("no NVIDIA driver found")

// Handles, as the driver API names them.
type (
	Device    int32   // CUdevice
	Context   uintptr // CUcontext
	Module    uintptr // CUmodule
	Function  uintptr // CUfunction
	Stream    uintptr // CUstream; 0 is the legacy default stream
	Event     uintptr // CUevent
	DevicePtr uint64  // CUdeviceptr
)

// Attribute is a CUdevice_attribute.
type Attribute int32

// The device attributes used.
const (
	AttrMultiprocessorCount    Attribute = 16
	AttrComputeCapabilityMajor Attribute = 75
	AttrComputeCapabilityMinor Attribute = 76
)

// Error is a failed driver call.
type Error struct {
	Call string // the function, "cuMemAlloc_v2"
	Code int    // the CUresult
	Name string // "CUDA_ERROR_OUT_OF_MEMORY"
	Desc string // the driver's description
	Log  string // the JIT error log, for cuModuleLoadDataEx
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s (%d)", e.Call, e.Name, e.Code)
	if e.Desc != "" {
		s += ": " + e.Desc
	}
	if e.Log != "" {
		s += "\n" + e.Log
	}
	return s
}

// Result codes worth naming without the driver's help.
const (
	errOutOfMemory = 2
	errNoDevice    = 100

	errPeerAccessAlreadyEnabled = 704
)

// IsSticky reports whether err is a fault that leaves the context unusable
// (every later call fails the same way until the process ends): an illegal
// or misaligned address, an illegal instruction, a trap, a launch failure
// or timeout, an uncorrectable ECC error.
func IsSticky(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case 214, // CUDA_ERROR_ECC_UNCORRECTABLE
		700, // CUDA_ERROR_ILLEGAL_ADDRESS
		702, // CUDA_ERROR_LAUNCH_TIMEOUT
		714, // CUDA_ERROR_HARDWARE_STACK_ERROR
		715, // CUDA_ERROR_ILLEGAL_INSTRUCTION
		716, // CUDA_ERROR_MISALIGNED_ADDRESS
		717, // CUDA_ERROR_INVALID_ADDRESS_SPACE
		718, // CUDA_ERROR_INVALID_PC
		719: // CUDA_ERROR_LAUNCH_FAILED
		return true
	}
	return false
}

// IsOutOfMemory reports whether err is the driver's CUDA_ERROR_OUT_OF_MEMORY.
func IsOutOfMemory(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == errOutOfMemory
}

// The bound functions' addresses.
var fn struct {
	cuGetErrorName, cuGetErrorString, cuInit, cuDriverGetVersion                         uintptr
	cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, cuDeviceGetAttribute                 uintptr
	cuDeviceTotalMem, cuDevicePrimaryCtxRetain, cuCtxSetCurrent, cuCtxSynchronize        uintptr
	cuDeviceCanAccessPeer, cuCtxEnablePeerAccess                                         uintptr
	cuMemAlloc, cuMemFree, cuMemcpyHtoD, cuMemcpyDtoH, cuMemsetD32, cuMemGetInfo         uintptr
	cuMemAllocHost, cuMemFreeHost, cuMemcpyHtoDAsync                                     uintptr
	cuModuleLoadDataEx, cuModuleGetFunction, cuLaunchKernel                              uintptr
	cuEventCreate, cuEventRecord, cuEventSynchronize, cuEventElapsedTime, cuEventDestroy uintptr
}

// symbols maps each name in libcuda.so.1 to where its address goes.
var symbols = []struct {
	name string
	addr *uintptr
}{
	{"cuGetErrorName", &fn.cuGetErrorName},
	{"cuGetErrorString", &fn.cuGetErrorString},
	{"cuInit", &fn.cuInit},
	{"cuDriverGetVersion", &fn.cuDriverGetVersion},
	{"cuDeviceGetCount", &fn.cuDeviceGetCount},
	{"cuDeviceGet", &fn.cuDeviceGet},
	{"cuDeviceGetName", &fn.cuDeviceGetName},
	{"cuDeviceGetAttribute", &fn.cuDeviceGetAttribute},
	{"cuDeviceTotalMem_v2", &fn.cuDeviceTotalMem},
	{"cuDevicePrimaryCtxRetain", &fn.cuDevicePrimaryCtxRetain},
	{"cuCtxSetCurrent", &fn.cuCtxSetCurrent},
	{"cuCtxSynchronize", &fn.cuCtxSynchronize},
	{"cuDeviceCanAccessPeer", &fn.cuDeviceCanAccessPeer},
	{"cuCtxEnablePeerAccess", &fn.cuCtxEnablePeerAccess},
	{"cuMemAlloc_v2", &fn.cuMemAlloc},
	{"cuMemFree_v2", &fn.cuMemFree},
	{"cuMemcpyHtoD_v2", &fn.cuMemcpyHtoD},
	{"cuMemcpyDtoH_v2", &fn.cuMemcpyDtoH},
	{"cuMemsetD32_v2", &fn.cuMemsetD32},
	{"cuMemGetInfo_v2", &fn.cuMemGetInfo},
	{"cuMemAllocHost_v2", &fn.cuMemAllocHost},
	{"cuMemFreeHost", &fn.cuMemFreeHost},
	{"cuMemcpyHtoDAsync_v2", &fn.cuMemcpyHtoDAsync},
	{"cuModuleLoadDataEx", &fn.cuModuleLoadDataEx},
	{"cuModuleGetFunction", &fn.cuModuleGetFunction},
	{"cuLaunchKernel", &fn.cuLaunchKernel},
	{"cuEventCreate", &fn.cuEventCreate},
	{"cuEventRecord", &fn.cuEventRecord},
	{"cuEventSynchronize", &fn.cuEventSynchronize},
	{"cuEventElapsedTime", &fn.cuEventElapsedTime},
	{"cuEventDestroy_v2", &fn.cuEventDestroy},
}

var (
	loadOnce sync.Once
	loadErr  error
)

// Load opens libcuda.so.1 and resolves the bound functions, once. Its error
// wraps ErrNoDriver when the library is absent.
func Load() error {
	loadOnce.Do(func() {
		h, err := dlopen("libcuda.so.1")
		if err != nil {
			loadErr = fmt.Errorf("%w (libcuda.so.1: %v)", ErrNoDriver, err)
			return
		}
		for _, s := range symbols {
			a, err := dlsym(h, s.name)
			if err != nil || a == 0 {
				loadErr = fmt.Errorf("libcuda.so.1 lacks %s: the NVIDIA driver is too old (%v)", s.name, err)
				return
			}
			*s.addr = a
		}
	})
	return loadErr
}

// call invokes a bound function and turns its CUresult into an error.
func call(f uintptr, name string, args ...uintptr) error {
	if f == 0 {
		return fmt.Errorf("%s: driver not loaded (call driver.Load first)", name)
	}
	r := int32(uint32(syscallN(f, args...)))
	if r == 0 {
		return nil
	}
	return newError(name, int(r))
}

func newError(name string, code int) *Error {
	e := &Error{Call: name, Code: code, Name: fmt.Sprintf("CUresult %d", code)}
	p := Out[uintptr]()
	if fn.cuGetErrorName != 0 && syscallN(fn.cuGetErrorName, uintptr(code), ptr(p)) == 0 {
		e.Name = cString(*p)
	}
	*p = 0
	if fn.cuGetErrorString != 0 && syscallN(fn.cuGetErrorString, uintptr(code), ptr(p)) == 0 {
		e.Desc = cString(*p)
	}
	return e
}

// cString copies the NUL-terminated C string at p.
func cString(p uintptr) string {
	if p == 0 {
		return ""
	}
	ptr := *(*unsafe.Pointer)(unsafe.Pointer(&p))
	n := 0
	for *(*byte)(unsafe.Add(ptr, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(ptr), n))
}

func cBytes(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

func ptr[T any](p *T) uintptr { return uintptr(unsafe.Pointer(p)) }

// Memory the driver writes or reads during a call must not be on a
// goroutine's stack: the stack can move (grow) between taking an address as
// a uintptr and the C call, and the driver would then write to the old
// stack (an out-parameter left at zero, a freed stack corrupted). Out and
// HeapBytes allocate on the heap, which never moves.
var (
	alwaysFalse bool
	heapSink    any
)

// Out returns a new zero T on the heap, for an out-parameter of a C call.
func Out[T any]() *T {
	p := new(T)
	if alwaysFalse {
		heapSink = p // escape analysis: p lives on the heap
	}
	return p
}

// HeapBytes returns n zero bytes on the heap.
func HeapBytes(n int) []byte {
	b := make([]byte, n)
	if alwaysFalse {
		heapSink = b
	}
	return b
}

// heapSlice returns a copy of v on the heap.
func heapSlice[T any](v ...T) []T {
	out := make([]T, len(v))
	copy(out, v)
	if alwaysFalse {
		heapSink = out
	}
	return out
}

// Init initializes the driver (cuInit(0)).
func Init() error { return call(fn.cuInit, "cuInit", 0) }

// DriverVersion returns the CUDA version the driver supports, as
// 1000·major + 10·minor (13000 for 13.0).
func DriverVersion() (int, error) {
	v := Out[int32]()
	err := call(fn.cuDriverGetVersion, "cuDriverGetVersion", ptr(v))
	return int(*v), err
}

// DeviceCount returns the number of CUDA devices.
func DeviceCount() (int, error) {
	n := Out[int32]()
	err := call(fn.cuDeviceGetCount, "cuDeviceGetCount", ptr(n))
	return int(*n), err
}

// DeviceGet returns the device of the given ordinal.
func DeviceGet(ordinal int) (Device, error) {
	d := Out[int32]()
	err := call(fn.cuDeviceGet, "cuDeviceGet", ptr(d), uintptr(ordinal))
	return Device(*d), err
}

// Name returns the device's name ("NVIDIA H200").
func (d Device) Name() (string, error) {
	b := HeapBytes(256)
	err := call(fn.cuDeviceGetName, "cuDeviceGetName", ptr(&b[0]), uintptr(len(b)), uintptr(d))
	return cBytes(b), err
}

// Attribute returns one of the device's attributes.
func (d Device) Attribute(a Attribute) (int, error) {
	v := Out[int32]()
	err := call(fn.cuDeviceGetAttribute, "cuDeviceGetAttribute", ptr(v), uintptr(a), uintptr(d))
	return int(*v), err
}

// TotalMem returns the device's memory in bytes.
func (d Device) TotalMem() (uint64, error) {
	v := Out[uint64]()
	err := call(fn.cuDeviceTotalMem, "cuDeviceTotalMem_v2", ptr(v), uintptr(d))
	return *v, err
}

// PrimaryCtxRetain retains the device's primary context, the one the CUDA
// runtime (and so cuBLAS) uses on this device.
func (d Device) PrimaryCtxRetain() (Context, error) {
	c := Out[uintptr]()
	err := call(fn.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", ptr(c), uintptr(d))
	return Context(*c), err
}

// SetCurrent makes c the calling thread's current context.
func (c Context) SetCurrent() error { return call(fn.cuCtxSetCurrent, "cuCtxSetCurrent", uintptr(c)) }

// CanAccessPeer reports whether contexts on d can read and write memory
// of peer's (over NVLink or PCIe) once peer access is enabled.
func (d Device) CanAccessPeer(peer Device) (bool, error) {
	v := Out[int32]()
	err := call(fn.cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer", ptr(v), uintptr(d), uintptr(peer))
	return *v != 0, err
}

// EnablePeerAccess lets the current context's kernels read and write the
// memory of peer, a context on another device; enabling it again is not an
// error.
func (peer Context) EnablePeerAccess() error {
	err := call(fn.cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess", uintptr(peer), 0)
	var e *Error
	if errors.As(err, &e) && e.Code == errPeerAccessAlreadyEnabled {
		return nil
	}
	return err
}

// CtxSynchronize waits for all work of the current context; it returns the
// first error of an asynchronous launch (an illegal address in a kernel).
func CtxSynchronize() error { return call(fn.cuCtxSynchronize, "cuCtxSynchronize") }

// MemAlloc allocates device memory (aligned to at least 256 bytes).
func MemAlloc(bytes uint64) (DevicePtr, error) {
	p := Out[uint64]()
	err := call(fn.cuMemAlloc, "cuMemAlloc_v2", ptr(p), uintptr(bytes))
	if err == nil && *p == 0 {
		return 0, fmt.Errorf("cuMemAlloc_v2: returned success and a null pointer for %d bytes", bytes)
	}
	return DevicePtr(*p), err
}

// MemFree frees device memory from MemAlloc.
func MemFree(p DevicePtr) error { return call(fn.cuMemFree, "cuMemFree_v2", uintptr(p)) }

// MemcpyHtoD copies bytes from host memory src to the device. It returns
// after src has been read.
func MemcpyHtoD(dst DevicePtr, src unsafe.Pointer, bytes uint64) error {
	return call(fn.cuMemcpyHtoD, "cuMemcpyHtoD_v2", uintptr(dst), uintptr(src), uintptr(bytes))
}

// MemAllocHost allocates bytes of page-locked host memory, which copies to
// the device read by DMA without staging it; the memory is the driver's,
// outside Go's heap, until MemFreeHost.
func MemAllocHost(bytes uint64) ([]byte, error) {
	p := Out[unsafe.Pointer]() // a pointer outside Go's heap, which the collector ignores
	err := call(fn.cuMemAllocHost, "cuMemAllocHost_v2", ptr(p), uintptr(bytes))
	if err == nil && *p == nil {
		return nil, fmt.Errorf("cuMemAllocHost_v2: returned success and a null pointer for %d bytes", bytes)
	}
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(*p), bytes), nil
}

// MemFreeHost frees memory from MemAllocHost.
func MemFreeHost(b []byte) error {
	return call(fn.cuMemFreeHost, "cuMemFreeHost", uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// MemcpyHtoDAsync queues a copy of bytes from page-locked host memory src
// (MemAllocHost's) to the device on the default stream and returns: src
// must stay unchanged until the work queued before a later
// synchronization is done.
func MemcpyHtoDAsync(dst DevicePtr, src unsafe.Pointer, bytes uint64) error {
	return call(fn.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", uintptr(dst), uintptr(src), uintptr(bytes), 0)
}

// MemcpyDtoH copies bytes from the device to host memory dst, after the
// work queued before it on the default stream.
func MemcpyDtoH(dst unsafe.Pointer, src DevicePtr, bytes uint64) error {
	return call(fn.cuMemcpyDtoH, "cuMemcpyDtoH_v2", uintptr(dst), uintptr(src), uintptr(bytes))
}

// MemsetD32 sets n 32-bit words at p to v, in order with the default stream.
func MemsetD32(p DevicePtr, v uint32, n uint64) error {
	return call(fn.cuMemsetD32, "cuMemsetD32_v2", uintptr(p), uintptr(v), uintptr(n))
}

// MemGetInfo returns the free and total memory of the current context's device.
func MemGetInfo() (free, total uint64, err error) {
	f, t := Out[uint64](), Out[uint64]()
	err = call(fn.cuMemGetInfo, "cuMemGetInfo_v2", ptr(f), ptr(t))
	return *f, *t, err
}

// JIT options of cuModuleLoadDataEx (CUjit_option).
const (
	jitInfoLogBuffer       = 3
	jitInfoLogBufferBytes  = 4
	jitErrorLogBuffer      = 5
	jitErrorLogBufferBytes = 6
)

// ModuleLoadData loads a module from PTX text (NUL-terminated), which the
// driver compiles for the device. A compile error comes back with the
// compiler's log.
func ModuleLoadData(image []byte) (Module, error) {
	if len(image) == 0 || image[len(image)-1] != 0 {
		return 0, errors.New("cuModuleLoadDataEx: image must be NUL-terminated")
	}
	logBuf := HeapBytes(16 << 10)
	opts := heapSlice[int32](jitErrorLogBuffer, jitErrorLogBufferBytes)
	vals := heapSlice(ptr(&logBuf[0]), uintptr(len(logBuf)))
	var pin pinner
	pin.Pin(&logBuf[0])
	defer pin.Unpin()
	m := Out[uintptr]()
	err := call(fn.cuModuleLoadDataEx, "cuModuleLoadDataEx", ptr(m), ptr(&image[0]),
		uintptr(len(opts)), ptr(&opts[0]), ptr(&vals[0]))
	keepAlive(image, opts, vals, logBuf)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Log = cBytes(logBuf)
		}
		return 0, err
	}
	return Module(*m), nil
}

// Function returns the kernel called name (an extern "C" name).
func (m Module) Function(name string) (Function, error) {
	b := HeapBytes(len(name) + 1)
	copy(b, name)
	f := Out[uintptr]()
	err := call(fn.cuModuleGetFunction, "cuModuleGetFunction", ptr(f), uintptr(m), ptr(&b[0]))
	keepAlive(b)
	if err != nil {
		return 0, fmt.Errorf("kernel %s: %w", name, err)
	}
	return Function(*f), nil
}

// LaunchKernel queues f on stream over grid blocks of block threads with
// sharedBytes of dynamic shared memory. params is the address of an array
// of pointers, one per kernel parameter, each to the parameter's value; the
// driver copies the values before LaunchKernel returns.
func LaunchKernel(f Function, grid, block [3]uint32, sharedBytes uint32, stream Stream, params uintptr) error {
	return call(fn.cuLaunchKernel, "cuLaunchKernel", uintptr(f),
		uintptr(grid[0]), uintptr(grid[1]), uintptr(grid[2]),
		uintptr(block[0]), uintptr(block[1]), uintptr(block[2]),
		uintptr(sharedBytes), uintptr(stream), params, 0)
}

// EventCreate creates an event that records time.
func EventCreate() (Event, error) {
	e := Out[uintptr]()
	err := call(fn.cuEventCreate, "cuEventCreate", ptr(e), 0)
	return Event(*e), err
}

// Record records e on stream s.
func (e Event) Record(s Stream) error {
	return call(fn.cuEventRecord, "cuEventRecord", uintptr(e), uintptr(s))
}

// Synchronize waits for e.
func (e Event) Synchronize() error {
	return call(fn.cuEventSynchronize, "cuEventSynchronize", uintptr(e))
}

// Destroy destroys e.
func (e Event) Destroy() error { return call(fn.cuEventDestroy, "cuEventDestroy_v2", uintptr(e)) }

// Elapsed returns the milliseconds between two recorded events.
func Elapsed(start, end Event) (float32, error) {
	ms := Out[float32]()
	err := call(fn.cuEventElapsedTime, "cuEventElapsedTime", ptr(ms), uintptr(start), uintptr(end))
	return *ms, err
}

// DriverRelease returns the driver's release ("580.159.03") from NVML, or
// "" when NVML is not there. For headers only.
func DriverRelease() string {
	h, err := dlopen("libnvidia-ml.so.1")
	if err != nil {
		return ""
	}
	initF, _ := dlsym(h, "nvmlInit_v2")
	verF, _ := dlsym(h, "nvmlSystemGetDriverVersion")
	shutF, _ := dlsym(h, "nvmlShutdown")
	if initF == 0 || verF == 0 || shutF == 0 || syscallN(initF) != 0 {
		return ""
	}
	defer syscallN(shutF)
	b := HeapBytes(96)
	if syscallN(verF, ptr(&b[0]), uintptr(len(b))) != 0 {
		return ""
	}
	return cBytes(b)
}
