// Package corpus reads an evaluation corpus (eval/corpora/<name>/manifest.json)
// for ppl-tokenize: it checks the manifest, selects streams, and reads each
// stream only after checking its size and sha256 against the manifest.
//
// Why the check: a perplexity is only comparable with another one measured on
// the same bytes. The manifest pins every stream; a stream that is missing
// or differs (a partial download, an edited file, a different build) is
// refused with a message that names it and says how to rebuild it, instead
// of silently producing a number about other text.
//
// The schema is the one eval/corpus writes (see eval/README.md):
//
//	{"name", "version", "description", "rebuild",
//	 "streams": [{"id", "domain", "path", "sha256", "bytes", "words",
//	              "license", "source", "quick", "build"}]}
//
// with paths relative to the manifest. Any unknown field is an error, so a
// misspelled key does not go unnoticed.
//
// This package is the one reader of that schema. The build recipe is
// eval/corpus's business, so the types are generic in it: Manifest keeps
// recipes as raw JSON, uninterpreted, and eval/corpus reads the same files
// as ManifestOf[*corpus.Build], whose recipes are checked with the rest of
// the stream (see ManifestOf.Check).
package corpus

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// DefaultRebuild is the advice given for a bad stream when the manifest
// does not say how to rebuild its corpus.
const DefaultRebuild = "make corpus"

// Manifest is a corpus manifest whose build recipes are left as raw JSON.
type Manifest = ManifestOf[json.RawMessage]

// Stream is one text of a Manifest.
type Stream = StreamOf[json.RawMessage]

// ManifestOf is a corpus manifest with build recipes of type B.
type ManifestOf[B any] struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Description string `json:"description"`
	// Rebuild is the command that recreates missing or modified streams,
	// quoted in errors ("make corpus", "git checkout -- eval/corpora/...");
	// DefaultRebuild when empty.
	Rebuild string        `json:"rebuild,omitempty"`
	Streams []StreamOf[B] `json:"streams"`

	// Path is the manifest file and Dir its directory, against which
	// stream paths resolve. Set by Load.
	Path string `json:"-"`
	Dir  string `json:"-"`
	// FS, when set, holds the manifest and its streams (Path and Dir are
	// then slash-separated paths inside it, as LoadAs sets them); otherwise
	// they are files of the operating system.
	FS fs.FS `json:"-"`
}

// StreamOf is one text of a corpus, with a build recipe of type B.
type StreamOf[B any] struct {
	ID     string `json:"id"`
	Domain string `json:"domain"`
	Path   string `json:"path"` // relative to the manifest, slash-separated
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
	// Words counts whitespace-separated words (bytes.Fields). Text written
	// without spaces, such as Chinese, counts about one word per line.
	Words   int64  `json:"words"`
	License string `json:"license"`
	Source  string `json:"source"`
	Quick   bool   `json:"quick"`
	Build   B      `json:"build,omitempty"`
}

// Load reads and checks the manifest at path. It does not read the streams.
func Load(path string) (*Manifest, error) { return LoadAs[json.RawMessage](nil, path) }

// Parse decodes and checks a manifest.
func Parse(b []byte) (*Manifest, error) { return ParseAs[json.RawMessage](b) }

// LoadAs reads and checks the manifest at name in fsys, or with a nil fsys
// the operating system's file name, with recipes of type B. It does not
// read the streams.
func LoadAs[B any](fsys fs.FS, name string) (*ManifestOf[B], error) {
	var b []byte
	var err error
	if fsys != nil {
		b, err = fs.ReadFile(fsys, name)
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, fmt.Errorf("corpus manifest: %w", err)
	}
	m, err := ParseAs[B](b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	m.Path, m.FS = name, fsys
	if fsys != nil {
		m.Dir = path.Dir(name)
	} else {
		m.Dir = filepath.Dir(name)
	}
	return m, nil
}

// ParseAs decodes and checks a manifest with recipes of type B.
func ParseAs[B any](b []byte) (*ManifestOf[B], error) {
	var m ManifestOf[B]
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("manifest: data after the JSON object")
	}
	if err := m.Check(); err != nil {
		return nil, err
	}
	return &m, nil
}

// isID reports whether s is a name fit for records and file names:
// [a-z0-9][a-z0-9._-]*, as eval/corpus requires.
func isID(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// IsSHA256 reports whether s is a sha256 as manifests write it: 64
// lowercase hex digits.
func IsSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// CheckPath accepts a clean, slash-separated path inside the corpus
// directory (and, for recipes, inside a package).
func CheckPath(p string) error {
	if p == "" {
		return errors.New("empty")
	}
	if p == "." {
		return errors.New("the corpus directory itself, not a file in it")
	}
	if strings.Contains(p, "\\") || strings.ContainsRune(p, 0) || !filepath.IsLocal(filepath.FromSlash(p)) ||
		p != filepath.ToSlash(filepath.Clean(filepath.FromSlash(p))) {
		return errors.New("not a clean relative path inside the corpus directory")
	}
	return nil
}

// Check validates the manifest's fields: names, unique ids, clean relative
// paths, hex digests, one quick stream per domain, and each stream's recipe
// when B has a method Check() error (called with B's zero value for a
// stream without one).
func (m *ManifestOf[B]) Check() error {
	if err := m.check(); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	return nil
}

func (m *ManifestOf[B]) check() error {
	if !isID(m.Name) {
		return fmt.Errorf("bad corpus name %q (want [a-z0-9][a-z0-9._-]*)", m.Name)
	}
	if m.Version == "" {
		return errors.New("no version")
	}
	if len(m.Streams) == 0 {
		return errors.New("no streams")
	}
	ids, paths := map[string]bool{}, map[string]bool{}
	quick := map[string]int{}
	var domains []string
	for i := range m.Streams {
		s := &m.Streams[i]
		if !isID(s.ID) {
			return fmt.Errorf("stream %d: bad id %q (want [a-z0-9][a-z0-9._-]*)", i+1, s.ID)
		}
		if ids[s.ID] {
			return fmt.Errorf("stream %s: duplicate id", s.ID)
		}
		ids[s.ID] = true
		if !isID(s.Domain) {
			return fmt.Errorf("stream %s: bad domain %q", s.ID, s.Domain)
		}
		if _, ok := quick[s.Domain]; !ok {
			domains = append(domains, s.Domain)
			quick[s.Domain] = 0
		}
		if s.Quick {
			quick[s.Domain]++
		}
		if err := CheckPath(s.Path); err != nil {
			return fmt.Errorf("stream %s: path %q: %w", s.ID, s.Path, err)
		}
		if paths[s.Path] {
			return fmt.Errorf("stream %s: path %q used twice", s.ID, s.Path)
		}
		paths[s.Path] = true
		if !IsSHA256(s.SHA256) {
			return fmt.Errorf("stream %s: sha256 %q is not 64 lowercase hex digits", s.ID, s.SHA256)
		}
		if s.Bytes < 0 || s.Words < 0 {
			return fmt.Errorf("stream %s: negative bytes or words", s.ID)
		}
		if s.License == "" || s.Source == "" {
			return fmt.Errorf("stream %s: license and source are required", s.ID)
		}
		if c, ok := any(s.Build).(interface{ Check() error }); ok {
			if err := c.Check(); err != nil {
				return fmt.Errorf("stream %s: build: %w", s.ID, err)
			}
		}
	}
	for _, d := range domains {
		if quick[d] != 1 {
			return fmt.Errorf("domain %s has %d quick streams, want exactly 1", d, quick[d])
		}
	}
	return nil
}

// Select returns the streams of a run in manifest order: with quick, the
// quick stream of each domain; with ids, those streams (an unknown id is an
// error that lists the known ones); both together, the quick streams among ids.
func (m *ManifestOf[B]) Select(quick bool, ids []string) ([]*StreamOf[B], error) {
	want := map[string]bool{}
	for _, id := range ids {
		if m.stream(id) == nil {
			var known []string
			for _, s := range m.Streams {
				known = append(known, s.ID)
			}
			return nil, fmt.Errorf("corpus %s has no stream %q (streams: %s)", m.Name, id, strings.Join(known, ", "))
		}
		want[id] = true
	}
	var out []*StreamOf[B]
	for i := range m.Streams {
		s := &m.Streams[i]
		if (len(ids) == 0 || want[s.ID]) && (!quick || s.Quick) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("corpus %s: no stream is both quick and among --streams %s", m.Name, strings.Join(ids, ","))
	}
	return out, nil
}

func (m *ManifestOf[B]) stream(id string) *StreamOf[B] {
	for i := range m.Streams {
		if m.Streams[i].ID == id {
			return &m.Streams[i]
		}
	}
	return nil
}

// File returns the path of stream s: on disk, or in FS when it is set.
func (m *ManifestOf[B]) File(s *StreamOf[B]) string {
	if m.FS != nil {
		return path.Join(m.Dir, s.Path)
	}
	return filepath.Join(m.Dir, filepath.FromSlash(s.Path))
}

// open opens the file of stream s for reading at most one byte more than
// the manifest's size (so a longer file is still detected, but /dev/zero
// behind a link does not read forever). On disk, the path is resolved
// first: a stream that links outside the corpus directory, or that is not
// a regular file (a FIFO would block the open), is refused.
func (m *ManifestOf[B]) open(s *StreamOf[B]) (io.ReadCloser, error) {
	if m.FS != nil {
		f, err := m.FS.Open(m.File(s))
		if err != nil {
			return nil, err
		}
		return limited(f, s.Bytes), nil
	}
	p := m.File(s)
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.EvalSymlinks(m.Dir)
	if err != nil {
		return nil, err
	}
	realAbs, err1 := filepath.Abs(real)
	dirAbs, err2 := filepath.Abs(dir)
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	if rel, err := filepath.Rel(dirAbs, realAbs); err != nil || !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("%s resolves to %s, outside the corpus directory %s", p, real, m.Dir)
	}
	st, err := os.Stat(real)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	f, err := os.Open(real)
	if err != nil {
		return nil, err
	}
	return limited(f, s.Bytes), nil
}

type limitedFile struct {
	io.Reader
	io.Closer
}

func limited(f io.ReadCloser, n int64) io.ReadCloser {
	return limitedFile{io.LimitReader(f, n+1), f}
}

// StreamError is a stream that is missing or does not match the manifest.
type StreamError struct {
	Corpus, ID, File string
	Problem          string // "missing", "has 12 bytes, the manifest says 13", ...
	Rebuild          string
}

func (e *StreamError) Error() string {
	return fmt.Sprintf("corpus %s: stream %q (%s) %s; rebuild the corpus with `%s`", e.Corpus, e.ID, e.File, e.Problem, e.Rebuild)
}

func (m *ManifestOf[B]) streamErr(s *StreamOf[B], problem string) *StreamError {
	rb := m.Rebuild
	if rb == "" {
		rb = DefaultRebuild
	}
	return &StreamError{Corpus: m.Name, ID: s.ID, File: m.File(s), Problem: problem, Rebuild: rb}
}

// Verify checks that stream s is on disk with the manifest's size and
// sha256, without keeping it in memory.
func (m *ManifestOf[B]) Verify(s *StreamOf[B]) error {
	f, err := m.open(s)
	if err != nil {
		return m.openErr(s, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("corpus %s: stream %q: %w", m.Name, s.ID, err)
	}
	return m.compare(s, n, hex.EncodeToString(h.Sum(nil)))
}

// Read returns the bytes of stream s after checking them against the
// manifest.
func (m *ManifestOf[B]) Read(s *StreamOf[B]) ([]byte, error) {
	f, err := m.open(s)
	if err != nil {
		return nil, m.openErr(s, err)
	}
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("corpus %s: stream %q: %w", m.Name, s.ID, err)
	}
	sum := sha256.Sum256(b)
	if err := m.compare(s, int64(len(b)), hex.EncodeToString(sum[:])); err != nil {
		return nil, err
	}
	return b, nil
}

func (m *ManifestOf[B]) openErr(s *StreamOf[B], err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return m.streamErr(s, "is missing")
	}
	return fmt.Errorf("corpus %s: stream %q: %w", m.Name, s.ID, err)
}

func (m *ManifestOf[B]) compare(s *StreamOf[B], n int64, sum string) error {
	if n > s.Bytes { // reads stop one byte past the manifest's size
		return m.streamErr(s, fmt.Sprintf("has more than the %d bytes the manifest says", s.Bytes))
	}
	if n != s.Bytes {
		return m.streamErr(s, fmt.Sprintf("has %d bytes, the manifest says %d", n, s.Bytes))
	}
	if sum != s.SHA256 {
		return m.streamErr(s, fmt.Sprintf("has sha256 %s, the manifest says %s", sum, s.SHA256))
	}
	return nil
}

// Words counts whitespace-separated words as the manifests do (bytes.Fields).
func Words(text []byte) int64 { return int64(len(bytes.Fields(text))) }

// SHA256 returns the lowercase hex sha256 of text.
func SHA256(text []byte) string {
	sum := sha256.Sum256(text)
	return hex.EncodeToString(sum[:])
}
