// Package cache is the content-addressed store that lets a rerun of a ppl
// tool skip work it has done before: a tokenized stream, a scored window.
//
// A key is the sha256 of everything that decides an entry's content (input
// hashes, model hash, every flag that changes numbers, the tool version),
// so a stale entry is never found rather than found and wrong. Entries live
// under <dir>/<group>/<key[:2]>/<key>.ndjson.zst, where the group names
// what they belong to (for example "score/<model sha256>") so that they can
// be counted and pruned per model.
//
// Each entry is the payload followed by a trailer line carrying the entry's
// key and the payload's sha256. Reads verify both: a truncated or corrupt
// entry, one copied over another key's file, one larger than MaxEntryBytes
// (compressed or not) and anything but a regular file at an entry's path (a
// directory, a FIFO) are reported as ErrCorrupt, removed, and recomputed by
// the caller; never trusted. Callers check a payload as they check any
// input before replaying it, and Remove what fails. Writes are atomic (temp
// file, then rename), so a killed process leaves either a whole entry or
// none.
package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"ppl.dev/pipe"
)

// EnvDir overrides the default cache directory.
const EnvDir = "PPL_CACHE_DIR"

// ErrCorrupt marks an entry that failed verification.
var ErrCorrupt = errors.New("corrupt cache entry")

// MaxEntryBytes bounds an entry, compressed and decompressed, far above
// the largest legitimate one (a scored window takes about 100 bytes a
// target): a decompression bomb costs at most this much memory.
const MaxEntryBytes = 256 << 20

// noCacheHint ends errors about a cache that cannot be written.
const noCacheHint = "; fix the cache directory, or pass --no-cache (or another --cache-dir)"

// DefaultDir returns $PPL_CACHE_DIR, else the user cache directory's ppl/.
func DefaultDir() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: %w (set %s or --cache-dir)", err, EnvDir)
	}
	return filepath.Join(d, "ppl"), nil
}

// Key hashes the parts (each length-prefixed, so ("ab","c") != ("a","bc")).
func Key(parts ...string) string {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.LittleEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Cache is a cache directory, safe for concurrent use.
type Cache struct {
	dir    string
	enc    *zstd.Encoder
	dec    *zstd.Decoder
	dirsMu sync.Mutex
	dirs   map[string]bool // directories Put has made or found
}

// Open returns the cache rooted at dir, creating it if needed.
func Open(dir string) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cache: %w%s", err, noCacheHint)
	}
	return open(dir)
}

// OpenExisting returns the cache rooted at dir without creating it:
// os.ErrNotExist when it is absent.
func OpenExisting(dir string) (*Cache, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("cache: %s is not a directory", dir)
	}
	return open(dir)
}

func open(dir string) (*Cache, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxEntryBytes))
	if err != nil {
		return nil, err
	}
	return &Cache{dir: dir, enc: enc, dec: dec, dirs: map[string]bool{}}, nil
}

// Dir returns the cache's root directory.
func (c *Cache) Dir() string { return c.dir }

// Path returns the file of an entry.
func (c *Cache) Path(group, key string) string {
	return filepath.Join(c.dir, filepath.FromSlash(group), key[:2], key+".ndjson.zst")
}

const trailerPrefix = `{"type":"cache-entry","key":"`

func trailer(key string, payload []byte) string {
	sum := sha256.Sum256(payload)
	return trailerPrefix + key + `","sha256":"` + hex.EncodeToString(sum[:]) + "\"}\n"
}

// touchAfter is how old an entry's modification time may grow before Get
// renews it: pruning by age (hours to months) keeps what is in use, and
// most hits cost no metadata write.
const touchAfter = time.Hour

// Get returns an entry's payload. A missing entry gives (nil, false, nil);
// a corrupt one is removed and reported with an error wrapping ErrCorrupt.
func (c *Cache) Get(group, key string) ([]byte, bool, error) {
	p := c.Path(group, key)
	raw, mtime, err := readEntry(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err == nil {
		var payload []byte
		if payload, err = c.verify(raw, key); err == nil {
			if now := time.Now(); now.Sub(mtime) > touchAfter {
				os.Chtimes(p, now, now)
			}
			return payload, true, nil
		}
	}
	if !errors.Is(err, errUnreadable) {
		c.remove(p)
		return nil, false, fmt.Errorf("%s: %w: %v (removed)", p, ErrCorrupt, err)
	}
	return nil, false, fmt.Errorf("cache: %w", err)
}

// Remove deletes an entry that its payload's reader found bad.
func (c *Cache) Remove(group, key string) error {
	return c.remove(c.Path(group, key))
}

func (c *Cache) remove(p string) error {
	if st, err := os.Lstat(p); err == nil && st.IsDir() {
		return os.RemoveAll(p) // nothing but an entry belongs at an entry's path
	}
	err := os.Remove(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// errUnreadable is an entry that exists but could not be read (permissions,
// I/O): reported, not removed.
var errUnreadable = errors.New("unreadable")

// readEntry returns a file's contents and modification time, refusing
// anything but a regular file of at most MaxEntryBytes before opening it:
// opening a FIFO for reading would block.
func readEntry(p string) ([]byte, time.Time, error) {
	st, err := os.Lstat(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, time.Time{}, err
		}
		return nil, time.Time{}, fmt.Errorf("%w: %v", errUnreadable, err)
	}
	if !st.Mode().IsRegular() {
		return nil, time.Time{}, fmt.Errorf("not a regular file (%s)", pipe.FileKind(st.Mode()))
	}
	if st.Size() > MaxEntryBytes {
		return nil, time.Time{}, fmt.Errorf("%d bytes, over the limit of %d an entry", st.Size(), MaxEntryBytes)
	}
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, time.Time{}, err
		}
		return nil, time.Time{}, fmt.Errorf("%w: %v", errUnreadable, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxEntryBytes+1))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: read %s: %v", errUnreadable, p, err)
	}
	if len(b) > MaxEntryBytes {
		return nil, time.Time{}, fmt.Errorf("over the limit of %d bytes an entry", MaxEntryBytes)
	}
	return b, st.ModTime(), nil
}

func (c *Cache) verify(raw []byte, key string) ([]byte, error) {
	data, err := c.dec.DecodeAll(raw, nil)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxEntryBytes {
		return nil, fmt.Errorf("decompresses to %d bytes, over the limit of %d an entry", len(data), MaxEntryBytes)
	}
	i := bytes.LastIndex(data, []byte(trailerPrefix))
	if i < 0 {
		if bytes.Contains(data, []byte(`{"type":"cache-entry","sha256":"`)) {
			return nil, errors.New("an entry of the older format, not bound to its key")
		}
		return nil, errors.New("no trailer")
	}
	payload, got := data[:i], string(data[i:])
	if want := trailer(key, payload); got != want {
		if k, _, _ := strings.Cut(strings.TrimPrefix(got, trailerPrefix), `"`); k != key {
			return nil, fmt.Errorf("entry of key %.64s found under key %s", k, key)
		}
		return nil, fmt.Errorf("trailer %q, want %q", strings.TrimSpace(got), strings.TrimSpace(want))
	}
	return payload, nil
}

// Put stores an entry atomically.
func (c *Cache) Put(group, key string, payload []byte) error {
	p := c.Path(group, key)
	if err := c.mkdir(filepath.Dir(p)); err != nil {
		return err
	}
	if len(payload) > MaxEntryBytes-1024 {
		return fmt.Errorf("cache: entry of %d bytes exceeds the limit of %d", len(payload), MaxEntryBytes)
	}
	data := append(append([]byte(nil), payload...), trailer(key, payload)...)
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp*")
	if errors.Is(err, os.ErrNotExist) { // removed since: make it again
		c.dirsMu.Lock()
		clear(c.dirs)
		c.dirsMu.Unlock()
		if err = c.mkdir(filepath.Dir(p)); err == nil {
			tmp, err = os.CreateTemp(filepath.Dir(p), ".tmp*")
		}
	}
	if err != nil {
		return fmt.Errorf("cache: %w%s", err, noCacheHint)
	}
	_, err = tmp.Write(c.enc.EncodeAll(data, nil))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cache: write %s: %w%s", p, err, noCacheHint)
	}
	return nil
}

// mkdir makes d unless Put made or found it before: most writes then cost
// no directory lookups.
func (c *Cache) mkdir(d string) error {
	c.dirsMu.Lock()
	defer c.dirsMu.Unlock()
	if c.dirs[d] {
		return nil
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		return fmt.Errorf("cache: %w%s", err, noCacheHint)
	}
	c.dirs[d] = true
	return nil
}

// Group is one directory of entries with its totals.
type Group struct {
	Name    string
	Entries int
	Bytes   int64
	Newest  time.Time
}

// Stats returns the groups (directories holding entries) under the cache.
func (c *Cache) Stats() ([]Group, error) {
	byName := map[string]*Group{}
	var order []string
	err := filepath.WalkDir(c.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".ndjson.zst") {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(c.dir, filepath.Dir(filepath.Dir(p)))
		name := filepath.ToSlash(rel)
		g, ok := byName[name]
		if !ok {
			g = &Group{Name: name}
			byName[name] = g
			order = append(order, name)
		}
		g.Entries++
		g.Bytes += info.Size()
		if info.ModTime().After(g.Newest) {
			g.Newest = info.ModTime()
		}
		return nil
	})
	out := make([]Group, len(order))
	for i, n := range order {
		out[i] = *byName[n]
	}
	return out, err
}

// Prune removes entries not used since before, within groups whose name
// starts with prefix ("" for all), and returns how many it removed.
func (c *Cache) Prune(prefix string, before time.Time) (int, error) {
	n := 0
	err := filepath.WalkDir(c.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".ndjson.zst") {
			return err
		}
		rel, _ := filepath.Rel(c.dir, p)
		if !strings.HasPrefix(filepath.ToSlash(rel), prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.ModTime().Before(before) {
			if err := os.Remove(p); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}
