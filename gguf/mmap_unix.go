//go:build linux || darwin || freebsd || netbsd || openbsd

package gguf

import (
	"fmt"
	"math"
	"os"
	"syscall"
)

// mapFile maps size bytes of fd read-only and shared: pages come from the
// page cache on first touch, and no copy is made.
func mapFile(fd *os.File, size int64) ([]byte, func() error, error) {
	if size == 0 {
		return nil, func() error { return nil }, nil // mmap rejects length 0
	}
	if size < 0 || uint64(size) > math.MaxInt {
		return nil, nil, fmt.Errorf("file size %d too large to map", size)
	}
	b, err := syscall.Mmap(int(fd.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap: %w", err)
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}
