package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// FileSHA256 returns the sha256 of the files' bytes one after another:
// of one file, its sha256; of a model split into shards (gguf.File.Shards,
// first shard first), what `cat` of the shards piped to sha256sum prints.
// It is streamed, and remembered in the cache under each file's absolute
// path, size, modification time and inode, so a 16 GB model is hashed
// once, not on every run; a nil Cache hashes without remembering. It stops
// with ctx's error when ctx is cancelled: hashing a large model takes a
// while, and Ctrl-C must not wait for it. hashing, when not nil, is told
// the bytes to read before a sum not remembered is computed, for the log.
func (c *Cache) FileSHA256(ctx context.Context, hashing func(bytes int64), paths ...string) (string, error) {
	if len(paths) == 0 {
		return "", fmt.Errorf("cache: no file to hash")
	}
	parts := []string{"file-sha256"}
	var total int64
	for _, path := range paths {
		info, err := os.Stat(path)
		if err != nil {
			return "", err
		}
		if !info.Mode().IsRegular() {
			return "", fmt.Errorf("%s: not a regular file", path)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return "", err
		}
		var ino uint64
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			ino = st.Ino
		}
		total += info.Size()
		parts = append(parts, abs, strconv.FormatInt(info.Size(), 10),
			strconv.FormatInt(info.ModTime().UnixNano(), 10), strconv.FormatUint(ino, 10))
	}
	key := Key(parts...)
	if c != nil {
		if b, ok, _ := c.Get("sha256", key); ok && len(b) == 65 {
			return strings.TrimSpace(string(b)), nil
		}
	}
	if hashing != nil {
		hashing(total)
	}
	h := sha256.New()
	for _, path := range paths {
		if err := hashFile(ctx, h, path); err != nil {
			return "", err
		}
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if c != nil {
		if err := c.Put("sha256", key, []byte(sum+"\n")); err != nil {
			return "", err
		}
	}
	return sum, nil
}

// hashFile adds the bytes of the file at path to h.
func hashFile(ctx context.Context, h io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.Copy(h, ctxReader{ctx, f}); err != nil {
		return fmt.Errorf("hash %s: %w", path, err)
	}
	return nil
}

// ctxReader is a reader that fails with ctx's error once ctx is cancelled,
// checked before each read (io.Copy reads 32 KiB at a time).
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// LogHashing returns a hashing function for FileSHA256 that says, with
// logf, that the model called name is being hashed and how much there is.
func LogHashing(logf func(format string, args ...any), name string) func(bytes int64) {
	return func(n int64) {
		logf("%s: computing its sha256 (%.2f GB)", name, float64(n)/1e9)
	}
}
