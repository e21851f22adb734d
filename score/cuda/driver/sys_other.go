//go:build !((linux || freebsd) && (amd64 || arm64))

package driver

import (
	"errors"
	"runtime"
)

var errUnsupported = errors.New("the CUDA backend is built for Linux on amd64 and arm64 only")

func dlopen(string) (uintptr, error)         { return 0, errUnsupported }
func dlsym(uintptr, string) (uintptr, error) { return 0, errUnsupported }
func syscallN(uintptr, ...uintptr) uintptr   { return 1 }

// Dlopen fails on this platform.
func Dlopen(name string) (uintptr, error) { return dlopen(name) }

// Dlsym fails on this platform.
func Dlsym(h uintptr, name string) (uintptr, error) { return dlsym(h, name) }

// SyscallN fails on this platform.
func SyscallN(f uintptr, args ...uintptr) uintptr { return syscallN(f, args...) }

type pinner = runtime.Pinner

func keepAlive(xs ...any) {
	for _, x := range xs {
		runtime.KeepAlive(x)
	}
}
