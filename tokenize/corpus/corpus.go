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
// with paths relative to the manifest. The build recipe is eval/corpus's
// business and is not interpreted here; any other unknown field is an error,
// so a misspelled key does not go unnoticed.
package corpus

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// DefaultRebuild is the advice given for a bad stream when the manifest
// does not say how to rebuild its corpus.
const DefaultRebuild = "make corpus"

// Manifest is a corpus manifest.
type Manifest struct {
	Name        string   `json:"name"`
	Version     string   `json:"version"`
	Description string   `json:"description"`
	Rebuild     string   `json:"rebuild,omitempty"`
	Streams     []Stream `json:"streams"`

	// Path is the manifest file and Dir its directory, against which
	// stream paths resolve. Set by Load.
	Path string `json:"-"`
	Dir  string `json:"-"`
}

// Stream is one text of a corpus.
type Stream struct {
	ID      string          `json:"id"`
	Domain  string          `json:"domain"`
	Path    string          `json:"path"`
	SHA256  string          `json:"sha256"`
	Bytes   int64           `json:"bytes"`
	Words   int64           `json:"words"`
	License string          `json:"license"`
	Source  string          `json:"source"`
	Quick   bool            `json:"quick"`
	Build   json.RawMessage `json:"build,omitempty"`
}

// Load reads and checks the manifest at path. It does not read the streams.
func Load(path string) (*Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("corpus manifest: %w", err)
	}
	m, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m.Path, m.Dir = path, filepath.Dir(path)
	return m, nil
}

// Parse decodes and checks a manifest.
func Parse(b []byte) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("manifest: data after the JSON object")
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
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

func isSHA256(s string) bool {
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

// checkPath accepts a clean, slash-separated path inside the corpus directory.
func checkPath(p string) error {
	if p == "" {
		return errors.New("empty")
	}
	if strings.Contains(p, "\\") || strings.ContainsRune(p, 0) || !filepath.IsLocal(filepath.FromSlash(p)) ||
		p != filepath.ToSlash(filepath.Clean(filepath.FromSlash(p))) {
		return errors.New("not a clean relative path inside the corpus directory")
	}
	return nil
}

func (m *Manifest) check() error {
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
		if err := checkPath(s.Path); err != nil {
			return fmt.Errorf("stream %s: path %q: %w", s.ID, s.Path, err)
		}
		if paths[s.Path] {
			return fmt.Errorf("stream %s: path %q used twice", s.ID, s.Path)
		}
		paths[s.Path] = true
		if !isSHA256(s.SHA256) {
			return fmt.Errorf("stream %s: sha256 %q is not 64 lowercase hex digits", s.ID, s.SHA256)
		}
		if s.Bytes < 0 || s.Words < 0 {
			return fmt.Errorf("stream %s: negative bytes or words", s.ID)
		}
		if s.License == "" || s.Source == "" {
			return fmt.Errorf("stream %s: license and source are required", s.ID)
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
func (m *Manifest) Select(quick bool, ids []string) ([]*Stream, error) {
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
	var out []*Stream
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

func (m *Manifest) stream(id string) *Stream {
	for i := range m.Streams {
		if m.Streams[i].ID == id {
			return &m.Streams[i]
		}
	}
	return nil
}

// File returns the path of stream s on disk.
func (m *Manifest) File(s *Stream) string {
	return filepath.Join(m.Dir, filepath.FromSlash(s.Path))
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

func (m *Manifest) streamErr(s *Stream, problem string) *StreamError {
	rb := m.Rebuild
	if rb == "" {
		rb = DefaultRebuild
	}
	return &StreamError{Corpus: m.Name, ID: s.ID, File: m.File(s), Problem: problem, Rebuild: rb}
}

// Verify checks that stream s is on disk with the manifest's size and
// sha256, without keeping it in memory.
func (m *Manifest) Verify(s *Stream) error {
	f, err := os.Open(m.File(s))
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
func (m *Manifest) Read(s *Stream) ([]byte, error) {
	b, err := os.ReadFile(m.File(s))
	if err != nil {
		return nil, m.openErr(s, err)
	}
	sum := sha256.Sum256(b)
	if err := m.compare(s, int64(len(b)), hex.EncodeToString(sum[:])); err != nil {
		return nil, err
	}
	return b, nil
}

func (m *Manifest) openErr(s *Stream, err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return m.streamErr(s, "is missing")
	}
	return fmt.Errorf("corpus %s: stream %q: %w", m.Name, s.ID, err)
}

func (m *Manifest) compare(s *Stream, n int64, sum string) error {
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
