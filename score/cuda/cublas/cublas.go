// Package cublas binds the cuBLAS functions ppl's CUDA backend uses for its
// matrix products, through purego (package driver's loader), so the binary
// needs no CUDA toolkit to build and finds cuBLAS at run time.
//
// Why cuBLAS: scoring is prefill, and nearly all of its arithmetic is
// weight × activation products over whole windows, where cuBLAS's bf16
// tensor-core kernels are at or near the hardware's peak on every GPU
// generation. cublasGemmEx is enough (bf16 in, float32 or bf16 out, float32
// accumulation), and cublasGemmBatchedEx for the many products of one
// shape a mixture of experts makes (one launch for the experts that got
// as many rows); cuBLASLt's descriptors would add failure modes and
// nothing this workload needs yet.
//
// Bound from libcublas.so.13 or, failing that, libcublas.so.12 (or, last,
// libcublas.so.11, which works but has no Hopper-tuned kernels):
//
//	cublasCreate_v2 cublasGetVersion_v2 cublasGemmEx cublasGemmBatchedEx
//
// (A handle lives as long as its engine, the whole process: none is destroyed.)
//
// The library is looked for by soname (LD_LIBRARY_PATH, the loader cache),
// then in $PPL_CUBLAS_DIR, $CUDA_HOME/lib64, /usr/local/cuda*/lib64 and the
// nvidia-cublas Python wheels' directories. Every cublasStatus_t other than
// success becomes an *Error naming the call. cuBLAS uses the calling
// thread's current context (the device's primary context, which package
// cuda makes current), and the legacy default stream.
package cublas

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"ppl.dev/score/cuda/driver"
)

// Handle is a cublasHandle_t.
type Handle uintptr

// DataType is a cudaDataType.
type DataType int32

// The data types used.
const (
	R32F  DataType = 0  // CUDA_R_32F
	R16F  DataType = 2  // CUDA_R_16F
	R16BF DataType = 14 // CUDA_R_16BF
)

// Op is a cublasOperation_t.
type Op int32

// Transposition of a GEMM operand.
const (
	OpN Op = 0
	OpT Op = 1
)

const (
	compute32F  = 68 // CUBLAS_COMPUTE_32F
	gemmDefault = -1 // CUBLAS_GEMM_DEFAULT
)

// Error is a failed cuBLAS call.
type Error struct {
	Call   string
	Status int
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (%d)", e.Call, statusName(e.Status), e.Status)
}

func statusName(s int) string {
	switch s {
	case 1:
		return "CUBLAS_STATUS_NOT_INITIALIZED"
	case 3:
		return "CUBLAS_STATUS_ALLOC_FAILED"
	case 7:
		return "CUBLAS_STATUS_INVALID_VALUE"
	case 8:
		return "CUBLAS_STATUS_ARCH_MISMATCH"
	case 11:
		return "CUBLAS_STATUS_MAPPING_ERROR"
	case 13:
		return "CUBLAS_STATUS_EXECUTION_FAILED"
	case 14:
		return "CUBLAS_STATUS_INTERNAL_ERROR"
	case 15:
		return "CUBLAS_STATUS_NOT_SUPPORTED"
	case 16:
		return "CUBLAS_STATUS_LICENSE_ERROR"
	}
	return "cublasStatus"
}

var fn struct {
	create, version, gemmEx, gemmBatchedEx uintptr
}

var (
	loadOnce sync.Once
	loadErr  error
	libPath  string
)

// Load opens cuBLAS, once.
func Load() error {
	loadOnce.Do(func() { loadErr = load() })
	return loadErr
}

// Library returns the path or soname cuBLAS was opened as.
func Library() string { return libPath }

func load() error {
	var tried []string
	h, err := open(&tried)
	if err != nil {
		return fmt.Errorf("cuBLAS not found (tried %s): install the CUDA toolkit's libcublas 13 or 12 (or the nvidia-cublas wheel) or set PPL_CUBLAS_DIR", summarize(tried))
	}
	for _, s := range []struct {
		name string
		addr *uintptr
	}{
		{"cublasCreate_v2", &fn.create},
		{"cublasGetVersion_v2", &fn.version},
		{"cublasGemmEx", &fn.gemmEx},
		{"cublasGemmBatchedEx", &fn.gemmBatchedEx},
	} {
		a, err := driver.Dlsym(h, s.name)
		if err != nil || a == 0 {
			return fmt.Errorf("%s lacks %s (%v)", libPath, s.name, err)
		}
		*s.addr = a
	}
	return nil
}

func summarize(tried []string) string {
	if len(tried) > 4 {
		return fmt.Sprintf("%s, %s and %d more", tried[0], tried[1], len(tried)-2)
	}
	return fmt.Sprint(tried)
}

// versions are the cuBLAS sonames tried, best first.
var versions = []string{"13", "12", "11"}

// open tries the sonames, then the usual directories.
func open(tried *[]string) (uintptr, error) {
	for _, v := range versions {
		name := "libcublas.so." + v
		*tried = append(*tried, name)
		if h, err := driver.Dlopen(name); err == nil {
			libPath = name
			return h, nil
		}
	}
	var dirs []string
	if d := os.Getenv("PPL_CUBLAS_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if d := os.Getenv(env); d != "" {
			dirs = append(dirs, filepath.Join(d, "lib64"), filepath.Join(d, "targets", "x86_64-linux", "lib"))
		}
	}
	for _, pat := range []string{
		"/usr/local/cuda/lib64", "/usr/local/cuda/targets/*/lib", "/usr/local/cuda-*/lib64", "/usr/local/cuda-*/targets/*/lib",
		"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
		"/usr/local/lib/python3*/dist-packages/nvidia/cublas/lib", "/usr/lib/python3/dist-packages/nvidia/cublas/lib",
		"/usr/local/lib/python3*/site-packages/nvidia/cublas/lib",
		"/opt/*/.venv/lib/python3*/site-packages/nvidia/cublas/lib", "/opt/*/.venv/lib/python3*/site-packages/nvidia/cu13/lib",
		"/opt/*/lib/python3*/site-packages/nvidia/cublas/lib", "/opt/*/lib/python3*/site-packages/nvidia/cu13/lib",
	} {
		m, _ := filepath.Glob(pat)
		dirs = append(dirs, m...)
	}
	for _, d := range dirs {
		for _, v := range versions {
			p := filepath.Join(d, "libcublas.so."+v)
			if _, err := os.Stat(p); err != nil {
				continue
			}
			*tried = append(*tried, p)
			// libcublas needs libcublasLt by soname; loading it first from
			// the same directory lets the dynamic loader find it.
			if lt := filepath.Join(d, "libcublasLt.so."+v); fileExists(lt) {
				driver.Dlopen(lt)
			}
			if h, err := driver.Dlopen(p); err == nil {
				libPath = p
				return h, nil
			}
		}
	}
	return 0, errors.New("not found")
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func call(f uintptr, name string, args ...uintptr) error {
	if f == 0 {
		return fmt.Errorf("%s: cuBLAS not loaded", name)
	}
	if s := int32(uint32(driver.SyscallN(f, args...))); s != 0 {
		return &Error{Call: name, Status: int(s)}
	}
	return nil
}

// Create makes a cuBLAS handle on the current context.
func Create() (Handle, error) {
	h := driver.Out[uintptr]() // on the heap: see driver.Out
	err := call(fn.create, "cublasCreate_v2", uintptr(unsafe.Pointer(h)))
	return Handle(*h), err
}

// Version returns cuBLAS's version (major·10000 + minor·100 + patch).
func (h Handle) Version() (int, error) {
	v := driver.Out[int32]()
	err := call(fn.version, "cublasGetVersion_v2", uintptr(h), uintptr(unsafe.Pointer(v)))
	return int(*v), err
}

// Scalars holds the alpha and beta a GEMM reads from host memory during the
// call; it must not move while GemmEx runs (keep it on the heap).
type Scalars struct{ Alpha, Beta float32 }

// GemmEx computes C = alpha·op(A)·op(B) + beta·C in column-major terms
// (m×n C, k the inner size) with float32 accumulation: cublasGemmEx with
// CUBLAS_COMPUTE_32F and the default algorithm.
func (h Handle) GemmEx(ta, tb Op, m, n, k int, s *Scalars,
	a driver.DevicePtr, at DataType, lda int,
	b driver.DevicePtr, bt DataType, ldb int,
	c driver.DevicePtr, ct DataType, ldc int) error {
	algo := int32(gemmDefault)
	err := call(fn.gemmEx, "cublasGemmEx", uintptr(h), uintptr(ta), uintptr(tb),
		uintptr(m), uintptr(n), uintptr(k), uintptr(unsafe.Pointer(&s.Alpha)),
		uintptr(a), uintptr(at), uintptr(lda),
		uintptr(b), uintptr(bt), uintptr(ldb),
		uintptr(unsafe.Pointer(&s.Beta)),
		uintptr(c), uintptr(ct), uintptr(ldc),
		compute32F, uintptr(uint32(algo)))
	return err
}

// GemmBatchedEx is GemmEx for count products of one shape and types: the
// device arrays as, bs and cs hold each product's A, B and C addresses
// (count each). cublasGemmBatchedEx, CUBLAS_COMPUTE_32F, the default
// algorithm.
func (h Handle) GemmBatchedEx(ta, tb Op, m, n, k int, s *Scalars,
	as driver.DevicePtr, at DataType, lda int,
	bs driver.DevicePtr, bt DataType, ldb int,
	cs driver.DevicePtr, ct DataType, ldc int, count int) error {
	algo := int32(gemmDefault)
	return call(fn.gemmBatchedEx, "cublasGemmBatchedEx", uintptr(h), uintptr(ta), uintptr(tb),
		uintptr(m), uintptr(n), uintptr(k), uintptr(unsafe.Pointer(&s.Alpha)),
		uintptr(as), uintptr(at), uintptr(lda),
		uintptr(bs), uintptr(bt), uintptr(ldb),
		uintptr(unsafe.Pointer(&s.Beta)),
		uintptr(cs), uintptr(ct), uintptr(ldc),
		uintptr(count), compute32F, uintptr(uint32(algo)))
}
