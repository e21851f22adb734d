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
// Each entry is the payload followed by a trailer line carrying the
// payload's sha256. Reads verify it: a truncated or corrupt entry is
// reported as ErrCorrupt, removed, and recomputed by the caller; it is never
// trusted. Writes are atomic (temp file, then rename), so a killed process
// leaves either a whole entry or none.
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
)

// EnvDir overrides the default cache directory.
const EnvDir = "PPL_CACHE_DIR"

// ErrCorrupt marks an entry that failed verification.
var ErrCorrupt = errors.New("corrupt cache entry")

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
		return nil, fmt.Errorf("cache: %w", err)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
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

const trailerPrefix = `{"type":"cache-entry","sha256":"`

// touchAfter is how old an entry's modification time may grow before Get
// renews it: pruning by age (hours to months) keeps what is in use, and
// most hits cost no metadata write.
const touchAfter = time.Hour

// Get returns an entry's payload. A missing entry gives (nil, false, nil);
// a corrupt one is removed and reported with an error wrapping ErrCorrupt.
func (c *Cache) Get(group, key string) ([]byte, bool, error) {
	p := c.Path(group, key)
	raw, mtime, err := readFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("cache: %w", err)
	}
	payload, err := c.verify(raw)
	if err != nil {
		os.Remove(p)
		return nil, false, fmt.Errorf("%s: %w: %v", p, ErrCorrupt, err)
	}
	if now := time.Now(); now.Sub(mtime) > touchAfter {
		os.Chtimes(p, now, now)
	}
	return payload, true, nil
}

// readFile returns a file's contents and modification time.
func readFile(p string) ([]byte, time.Time, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, time.Time{}, err
	}
	b := make([]byte, st.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, time.Time{}, fmt.Errorf("read %s: %w", p, err)
	}
	return b, st.ModTime(), nil
}

func (c *Cache) verify(raw []byte) ([]byte, error) {
	data, err := c.dec.DecodeAll(raw, nil)
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndex(data, []byte(trailerPrefix))
	if i < 0 {
		return nil, errors.New("no trailer")
	}
	payload, trailer := data[:i], string(data[i:])
	want := strings.TrimSuffix(strings.TrimPrefix(trailer, trailerPrefix), "\"}\n")
	sum := sha256.Sum256(payload)
	if got := hex.EncodeToString(sum[:]); got != want {
		return nil, fmt.Errorf("payload sha256 %s, trailer says %.64s", got, want)
	}
	return payload, nil
}

// Put stores an entry atomically.
func (c *Cache) Put(group, key string, payload []byte) error {
	p := c.Path(group, key)
	if err := c.mkdir(filepath.Dir(p)); err != nil {
		return err
	}
	sum := sha256.Sum256(payload)
	data := append(append([]byte(nil), payload...), trailerPrefix+hex.EncodeToString(sum[:])+"\"}\n"...)
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
		return fmt.Errorf("cache: %w", err)
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
		return fmt.Errorf("cache: write %s: %w", p, err)
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
		return fmt.Errorf("cache: %w", err)
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
