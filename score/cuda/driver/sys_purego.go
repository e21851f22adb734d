//go:build (linux || freebsd) && (amd64 || arm64)

package driver

import (
	"runtime"

	"github.com/ebitengine/purego"
)

func dlopen(name string) (uintptr, error) {
	return purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

func dlsym(h uintptr, name string) (uintptr, error) { return purego.Dlsym(h, name) }

// Dlopen opens a shared library by name or path (for the cuBLAS binding).
func Dlopen(name string) (uintptr, error) { return dlopen(name) }

// Dlsym returns the address of a symbol of a library from Dlopen.
func Dlsym(h uintptr, name string) (uintptr, error) { return dlsym(h, name) }

// SyscallN calls the C function at f with integer or pointer arguments and
// returns its integer result (for the cuBLAS binding).
func SyscallN(f uintptr, args ...uintptr) uintptr { return syscallN(f, args...) }

func syscallN(f uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(f, args...)
	return r
}

type pinner = runtime.Pinner

func keepAlive(xs ...any) {
	for _, x := range xs {
		runtime.KeepAlive(x)
	}
}
