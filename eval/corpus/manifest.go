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
// The schema is documented in eval/README.md. Its reader is tokenize/corpus
// (what ppl-tokenize uses): loading, the field checks, stream selection and
// the size and sha256 check of a stream all come from there, so both tools
// accept the same manifests and refuse a stream with the same words. This
// package adds what only the maintainers' tool needs: typed build recipes,
// building, pinning and writing manifests.
package corpus

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"unicode/utf8"

	tcorpus "ppl.dev/tokenize/corpus"
)

// Manifest is a corpus manifest (manifest.json) with typed build recipes.
// Its fields (Name, Streams, Dir, FS, ...) and Check, Select, File and
// Verify come from tokenize/corpus.
type Manifest struct {
	tcorpus.ManifestOf[*Build]
}

// Stream is one text of a corpus.
type Stream = tcorpus.StreamOf[*Build]

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

// Load reads and checks a manifest. It does not read the streams.
func Load(path string) (*Manifest, error) { return wrap(tcorpus.LoadAs[*Build](nil, path)) }

// LoadFS reads and checks a manifest stored in fsys (an embedded corpus).
func LoadFS(fsys fs.FS, name string) (*Manifest, error) {
	return wrap(tcorpus.LoadAs[*Build](fsys, name))
}

// Parse decodes and checks a manifest. Unknown fields are errors, so a
// misspelled key is caught rather than silently ignored.
func Parse(b []byte) (*Manifest, error) { return wrap(tcorpus.ParseAs[*Build](b)) }

func wrap(m *tcorpus.ManifestOf[*Build], err error) (*Manifest, error) {
	if err != nil {
		return nil, err
	}
	return &Manifest{*m}, nil
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

// Check validates a recipe; tokenize/corpus calls it with the stream's
// other checks (nil: a committed stream, nothing to check).
func (b *Build) Check() error {
	if b == nil {
		return nil
	}
	if !pkgRE.MatchString(b.Package) {
		return fmt.Errorf("bad package name %q", b.Package)
	}
	if !versionRE.MatchString(b.Version) {
		return fmt.Errorf("bad version %q", b.Version)
	}
	if !archRE.MatchString(b.Arch) {
		return fmt.Errorf("bad arch %q", b.Arch)
	}
	if b.DebSHA256 != "" && !tcorpus.IsSHA256(b.DebSHA256) {
		return fmt.Errorf("deb_sha256 %q is not 64 lowercase hex digits", b.DebSHA256)
	}
	if err := tcorpus.CheckPath(b.Member); err != nil {
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

// Measure returns the sha256, size and word count of text, as
// tokenize/corpus computes them.
func Measure(text []byte) Stats {
	return Stats{SHA256: tcorpus.SHA256(text), Bytes: int64(len(text)), Words: tcorpus.Words(text)}
}

// Read reads stream s and checks it against the manifest, as
// tokenize/corpus does (a missing or modified stream gives an error that
// names it and says how to rebuild it), and checks that it is valid UTF-8,
// which training and the demo model rely on.
func (m *Manifest) Read(s *Stream) ([]byte, error) {
	b, err := m.ManifestOf.Read(s)
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("corpus %s: stream %s: %s is not valid UTF-8", m.Name, s.ID, m.File(s))
	}
	return b, nil
}

// Texts reads every stream (or each domain's quick stream), checked, in
// manifest order.
func (m *Manifest) Texts(quick bool) ([][]byte, error) {
	sel, err := m.Select(quick, nil)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, s := range sel {
		b, err := m.Read(s)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// VerifyAll reads every stream (or, with quick, every quick stream) and
// checks it as Read does; it returns all failures joined.
func (m *Manifest) VerifyAll(quick bool) error {
	sel, err := m.Select(quick, nil)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range sel {
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
