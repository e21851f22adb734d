//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package gguf

import (
	"io"
	"os"
)

// mapFile reads the whole file where this package does not use mmap.
func mapFile(fd *os.File, size int64) ([]byte, func() error, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(fd, b); err != nil {
		return nil, nil, err
	}
	return b, func() error { return nil }, nil
}
