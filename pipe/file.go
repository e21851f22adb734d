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
	// Windows up to 128 MiB, the zstd command's own default limit: a frame
	// header cannot make the decoder allocate more. Lines are bounded by
	// the Reader (MaxLineBytes), so a bomb's output is too.
	d, err := zstd.NewReader(bufio.NewReaderSize(f, 1<<20), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(1<<27))
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

// CheckRegular refuses a path that is not a regular file (a directory, a
// FIFO, a device such as /dev/zero) before anything opens it: opening a
// FIFO for reading blocks, and reading a device may never end. Links are
// followed. A path that cannot be stat'ed passes: opening it reports why.
// Inputs that may be pipes (record streams) are not checked.
func CheckRegular(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return nil
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file (%s)", path, FileKind(st.Mode()))
	}
	return nil
}

// FileKind names what a non-regular file is, for messages: "a directory",
// "a FIFO", "a symbolic link" (seen through Lstat), "a character device"...
func FileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "mode " + m.Type().String()
}

// CheckNotInput refuses an output path that names the same file as one of
// the inputs (by device and inode, so links and other spellings count):
// writing it would replace the input. An output that does not exist yet,
// and inputs that do not exist or are "-", are fine.
func CheckNotInput(output string, inputs ...string) error {
	if output == "" || output == "-" {
		return nil
	}
	out, err := os.Stat(output)
	if err != nil {
		return nil
	}
	for _, in := range inputs {
		if in == "" || in == "-" {
			continue
		}
		if st, err := os.Stat(in); err == nil && os.SameFile(out, st) {
			if in == output {
				return fmt.Errorf("output %s is also an input: it would be overwritten", output)
			}
			return fmt.Errorf("output %s is the input %s: it would be overwritten", output, in)
		}
	}
	return nil
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

// TempPrefix starts the names of the temporary files Create writes; a
// directory holding only such leftovers of a killed write counts as empty
// (IsTemp).
const TempPrefix = ".ppl-tmp-"

// IsTemp reports whether a file name is one of Create's temporary files.
func IsTemp(name string) bool { return strings.HasPrefix(name, TempPrefix) }

// Create starts writing path atomically, compressing when its name ends
// in .zst.
func Create(path string) (*AtomicFile, error) {
	dir := filepath.Dir(path)
	// A short temporary name: the output's own may be up to 255 bytes.
	tmp, err := os.CreateTemp(dir, TempPrefix+"*")
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
