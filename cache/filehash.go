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

// FileSHA256 returns the sha256 of a file, streamed, remembering it in the
// cache under the file's absolute path, size, modification time and inode,
// so a 16 GB model is hashed once, not on every run. A nil Cache hashes
// without remembering.
func (c *Cache) FileSHA256(path string) (string, error) {
	return c.FileSHA256Context(context.Background(), path)
}

// FileSHA256Context is FileSHA256 that stops, with ctx's error, when ctx
// is cancelled: hashing a 16 GB model takes a while, and Ctrl-C must not
// wait for it.
func (c *Cache) FileSHA256Context(ctx context.Context, path string) (string, error) {
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
	key := Key("file-sha256", abs, strconv.FormatInt(info.Size(), 10),
		strconv.FormatInt(info.ModTime().UnixNano(), 10), strconv.FormatUint(ino, 10))
	if c != nil {
		if b, ok, _ := c.Get("sha256", key); ok && len(b) == 65 {
			return strings.TrimSpace(string(b)), nil
		}
	}
	sum, err := hashFile(ctx, path)
	if err != nil {
		return "", err
	}
	if c != nil {
		if err := c.Put("sha256", key, []byte(sum+"\n")); err != nil {
			return "", err
		}
	}
	return sum, nil
}

func hashFile(ctx context.Context, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, f}); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
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
