// Package corpus reads, verifies, pins and rebuilds the evaluation corpora
// under eval/corpora.
//
// A corpus is a manifest.json next to its text streams. The manifest names
// every stream, its domain and its provenance, and pins its content by
// sha256, so a number measured on "ppl-heldout-v1" means the same text on
// every machine. Two kinds of corpora share the format:
//
//   - committed corpora (ppl-heldout-v1): the streams are files in the
//     repository; the manifest only pins them;
//   - built corpora (ppl-mixed-v1): we do not commit third-party text, so
//     each stream carries a Build recipe (a Debian package at an exact
//     version, a file inside it, filters, a byte range) and Build recreates
//     it byte for byte from the Debian archive.
//
// The schema is documented in eval/README.md; tokenize/corpus reads the same
// files (it ignores the build recipes).
package corpus

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"unicode/utf8"
)

// Manifest is a corpus manifest (manifest.json).
type Manifest struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Description string `json:"description"`
	// Rebuild is the command that recreates missing or modified streams,
	// quoted in errors ("make corpus", "git checkout -- eval/corpora/...").
	Rebuild string   `json:"rebuild,omitempty"`
	Streams []Stream `json:"streams"`

	// Dir is the directory of the manifest file; stream paths are
	// relative to it. Not serialized.
	Dir string `json:"-"`
	// FS, when set, holds the streams (Dir is then a slash-separated path
	// inside it); otherwise they are read from the operating system.
	FS fs.FS `json:"-"`
}

// Stream is one text of a corpus.
type Stream struct {
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
	Build   *Build `json:"build,omitempty"`
}

// Build says how to recreate a stream from the Debian archive:
//
//	apt-get download Package=Version         (checked against DebSHA256)
//	dpkg-deb --fsys-tarfile *.deb            (member Member of the data tar)
//	Filters applied in order                 ("gunzip", "strip-ansi")
//	bytes [Offset, Offset+Length) of the result
type Build struct {
	Package   string   `json:"package"`
	Version   string   `json:"version"`
	Arch      string   `json:"arch"` // of the .deb; "all" for documentation
	DebSHA256 string   `json:"deb_sha256"`
	Member    string   `json:"member"` // path in the data tar, without "./"
	Filters   []string `json:"filters,omitempty"`
	Offset    int64    `json:"offset"`
	Length    int64    `json:"length"`
}

var (
	idRE     = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Load reads and checks a manifest. It does not read the streams.
func Load(path string) (*Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m.Dir = filepath.Dir(path)
	return m, nil
}

// LoadFS reads and checks a manifest stored in fsys (an embedded corpus).
func LoadFS(fsys fs.FS, name string) (*Manifest, error) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	m, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	m.Dir, m.FS = path.Dir(name), fsys
	return m, nil
}

// Parse decodes and checks a manifest. Unknown fields are errors, so a
// misspelled key is caught rather than silently ignored.
func Parse(b []byte) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if dec.More() {
		return nil, errors.New("manifest: data after the JSON object")
	}
	if err := m.Check(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Check validates the manifest's fields: names, unique ids, relative paths
// inside the corpus directory, hex digests, build recipes, and one quick
// stream per domain.
func (m *Manifest) Check() error {
	if !idRE.MatchString(m.Name) {
		return fmt.Errorf("manifest: bad corpus name %q", m.Name)
	}
	if m.Version == "" {
		return errors.New("manifest: no version")
	}
	if len(m.Streams) == 0 {
		return errors.New("manifest: no streams")
	}
	ids := map[string]bool{}
	paths := map[string]bool{}
	quick := map[string]int{}
	var domains []string
	for i := range m.Streams {
		s := &m.Streams[i]
		if !idRE.MatchString(s.ID) {
			return fmt.Errorf("manifest: stream %d: bad id %q", i, s.ID)
		}
		if ids[s.ID] {
			return fmt.Errorf("manifest: stream %s: duplicate id", s.ID)
		}
		ids[s.ID] = true
		if !idRE.MatchString(s.Domain) {
			return fmt.Errorf("manifest: stream %s: bad domain %q", s.ID, s.Domain)
		}
		if _, ok := quick[s.Domain]; !ok {
			quick[s.Domain] = 0
			domains = append(domains, s.Domain)
		}
		if s.Quick {
			quick[s.Domain]++
		}
		if err := checkPath(s.Path); err != nil {
			return fmt.Errorf("manifest: stream %s: path %q: %w", s.ID, s.Path, err)
		}
		if paths[s.Path] {
			return fmt.Errorf("manifest: stream %s: path %q used twice", s.ID, s.Path)
		}
		paths[s.Path] = true
		if !sha256RE.MatchString(s.SHA256) {
			return fmt.Errorf("manifest: stream %s: sha256 %q is not 64 lowercase hex digits", s.ID, s.SHA256)
		}
		if s.Bytes < 0 || s.Words < 0 {
			return fmt.Errorf("manifest: stream %s: negative size", s.ID)
		}
		if s.License == "" || s.Source == "" {
			return fmt.Errorf("manifest: stream %s: license and source are required", s.ID)
		}
		if s.Build != nil {
			if err := s.Build.check(); err != nil {
				return fmt.Errorf("manifest: stream %s: build: %w", s.ID, err)
			}
		}
	}
	for _, d := range domains {
		if quick[d] != 1 {
			return fmt.Errorf("manifest: domain %s has %d quick streams, want exactly 1", d, quick[d])
		}
	}
	return nil
}

func checkPath(p string) error {
	if p == "" {
		return errors.New("empty")
	}
	if filepath.IsAbs(p) || p != filepath.ToSlash(filepath.Clean(p)) || p == "." ||
		len(p) >= 2 && p[:2] == ".." {
		return errors.New("not a clean relative path inside the corpus directory")
	}
	return nil
}

var (
	pkgRE     = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	versionRE = regexp.MustCompile(`^([0-9]+:)?[0-9A-Za-z.+~-]+$`)
	archRE    = regexp.MustCompile(`^[a-z0-9-]+$`)
)

// filters maps a filter name to its function.
var filters = map[string]func([]byte) ([]byte, error){
	"gunzip":     gunzip,
	"strip-ansi": stripANSI,
}

func (b *Build) check() error {
	if !pkgRE.MatchString(b.Package) {
		return fmt.Errorf("bad package name %q", b.Package)
	}
	if !versionRE.MatchString(b.Version) {
		return fmt.Errorf("bad version %q", b.Version)
	}
	if !archRE.MatchString(b.Arch) {
		return fmt.Errorf("bad arch %q", b.Arch)
	}
	if b.DebSHA256 != "" && !sha256RE.MatchString(b.DebSHA256) {
		return fmt.Errorf("deb_sha256 %q is not 64 lowercase hex digits", b.DebSHA256)
	}
	if err := checkPath(b.Member); err != nil {
		return fmt.Errorf("member %q: %w", b.Member, err)
	}
	for _, f := range b.Filters {
		if filters[f] == nil {
			return fmt.Errorf("unknown filter %q", f)
		}
	}
	if b.Offset < 0 || b.Length <= 0 {
		return fmt.Errorf("bad byte range offset %d length %d", b.Offset, b.Length)
	}
	return nil
}

// File returns the path of stream s: on disk, or in FS when it is set.
func (m *Manifest) File(s *Stream) string {
	if m.FS != nil {
		return path.Join(m.Dir, s.Path)
	}
	return filepath.Join(m.Dir, filepath.FromSlash(s.Path))
}

// Select returns the streams of a run: with quick, the one quick stream of
// each domain; otherwise all, in manifest order.
func (m *Manifest) Select(quick bool) []*Stream {
	var out []*Stream
	for i := range m.Streams {
		if !quick || m.Streams[i].Quick {
			out = append(out, &m.Streams[i])
		}
	}
	return out
}

// Domains returns the domains in order of first appearance.
func (m *Manifest) Domains() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range m.Streams {
		if !seen[s.Domain] {
			seen[s.Domain] = true
			out = append(out, s.Domain)
		}
	}
	return out
}

// Marshal encodes the manifest as indented JSON with a final newline.
func (m *Manifest) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Save writes the manifest to path atomically.
func (m *Manifest) Save(path string) error {
	b, err := m.Marshal()
	if err != nil {
		return err
	}
	return writeAtomic(path, b)
}

// Stats are what the manifest pins about a text.
type Stats struct {
	SHA256 string
	Bytes  int64
	Words  int64
}

// Measure returns the sha256, size and word count of text.
func Measure(text []byte) Stats {
	sum := sha256.Sum256(text)
	return Stats{SHA256: hex.EncodeToString(sum[:]), Bytes: int64(len(text)), Words: int64(len(bytes.Fields(text)))}
}

// Read reads stream s and checks it against the manifest. A missing or
// modified stream gives an error that names it and says how to rebuild it.
func (m *Manifest) Read(s *Stream) ([]byte, error) {
	file := m.File(s)
	var b []byte
	var err error
	if m.FS != nil {
		b, err = fs.ReadFile(m.FS, file)
	} else {
		b, err = os.ReadFile(file)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("corpus %s: stream %s: %s is missing%s", m.Name, s.ID, file, m.hint())
	}
	if err != nil {
		return nil, fmt.Errorf("corpus %s: stream %s: %w", m.Name, s.ID, err)
	}
	if st := Measure(b); st.SHA256 != s.SHA256 {
		return nil, fmt.Errorf("corpus %s: stream %s: %s has sha256 %s, the manifest pins %s (modified or stale)%s",
			m.Name, s.ID, file, st.SHA256, s.SHA256, m.hint())
	}
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("corpus %s: stream %s: %s is not valid UTF-8", m.Name, s.ID, file)
	}
	return b, nil
}

func (m *Manifest) hint() string {
	if m.Rebuild == "" {
		return ""
	}
	return "; rebuild it with: " + m.Rebuild
}

// Texts reads every stream (or each domain's quick stream), checked, in
// manifest order.
func (m *Manifest) Texts(quick bool) ([][]byte, error) {
	var out [][]byte
	for _, s := range m.Select(quick) {
		b, err := m.Read(s)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// Verify reads every stream (or, with quick, every quick stream) and
// checks it against the manifest; it returns all failures joined.
func (m *Manifest) Verify(quick bool) error {
	var errs []error
	for _, s := range m.Select(quick) {
		if _, err := m.Read(s); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// writeAtomic writes b to path through a temporary file in the same
// directory, so readers never see a partial file.
func writeAtomic(path string, b []byte) (err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(b); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
