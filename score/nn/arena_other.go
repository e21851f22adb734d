//go:build !unix

package nn

// chunkAlloc returns n Ts from the Go heap (systems without mmap).
func chunkAlloc[T any](n int) []T { return make([]T, n) }

// chunkFree drops a chunk for the collector.
func chunkFree[T any](s []T) {}
