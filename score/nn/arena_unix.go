//go:build unix

package nn

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// chunkAlloc returns n Ts of anonymous memory from the operating system,
// outside the Go heap (the arena holds no pointers), zeroed; pages count
// toward the process's memory only once written.
func chunkAlloc[T any](n int) []T {
	var zero T
	size := n * int(unsafe.Sizeof(zero))
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		panic(fmt.Sprintf("nn: cannot map %d bytes for the arena: %v", size, err))
	}
	adviseHuge(b)
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

// chunkFree returns a chunk from chunkAlloc to the operating system.
func chunkFree[T any](s []T) {
	var zero T
	size := cap(s) * int(unsafe.Sizeof(zero))
	if err := unix.Munmap(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), size)); err != nil {
		panic(fmt.Sprintf("nn: unmapping an arena chunk: %v", err))
	}
}
