package pipe

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// IsZstd reports whether path names a zstd-compressed file.
func IsZstd(path string) bool { return strings.HasSuffix(path, ".zst") }

// Open opens a record file for reading, decompressing it when its name
// ends in .zst. "-" is standard input.
func Open(path string) (io.ReadCloser, error) {
	if path == "-" {
		return io.NopCloser(os.Stdin), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if !IsZstd(path) {
		return f, nil
	}
	d, err := zstd.NewReader(bufio.NewReaderSize(f, 1<<20), zstd.WithDecoderConcurrency(1))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &zstdReader{d: d, f: f}, nil
}

type zstdReader struct {
	d *zstd.Decoder
	f *os.File
}

func (z *zstdReader) Read(p []byte) (int, error) { return z.d.Read(p) }

func (z *zstdReader) Close() error {
	z.d.Close()
	return z.f.Close()
}

// AtomicFile is a file being written under a temporary name; Commit gives
// it its final name, Close without Commit removes it, so no reader ever
// sees a half-written file.
type AtomicFile struct {
	path string
	tmp  *os.File
	zw   *zstd.Encoder
	bw   *bufio.Writer
	done bool
}

// Create starts writing path atomically, compressing when its name ends
// in .zst.
func Create(path string) (*AtomicFile, error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, err
	}
	a := &AtomicFile{path: path, tmp: tmp}
	if IsZstd(path) {
		a.zw, err = zstd.NewWriter(tmp, zstd.WithEncoderConcurrency(1))
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			return nil, err
		}
		a.bw = bufio.NewWriterSize(a.zw, 1<<16)
	} else {
		a.bw = bufio.NewWriterSize(tmp, 1<<16)
	}
	return a, nil
}

func (a *AtomicFile) Write(p []byte) (int, error) { return a.bw.Write(p) }

// Commit flushes, syncs and renames the file to its final name.
func (a *AtomicFile) Commit() error {
	if a.done {
		return fmt.Errorf("%s: already closed", a.path)
	}
	err := a.bw.Flush()
	if a.zw != nil && err == nil {
		err = a.zw.Close()
	}
	if err == nil {
		err = a.tmp.Sync()
	}
	if cerr := a.tmp.Close(); err == nil {
		err = cerr
	}
	a.done = true
	if err == nil {
		err = os.Rename(a.tmp.Name(), a.path)
	}
	if err != nil {
		os.Remove(a.tmp.Name())
		return fmt.Errorf("write %s: %w", a.path, err)
	}
	return nil
}

// Close abandons the file unless it was committed.
func (a *AtomicFile) Close() error {
	if a.done {
		return nil
	}
	a.done = true
	if a.zw != nil {
		a.zw.Close()
	}
	a.tmp.Close()
	return os.Remove(a.tmp.Name())
}
