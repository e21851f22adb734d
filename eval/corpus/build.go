package corpus

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// Fetcher gets Debian packages into a cache directory and reads files out
// of them without installing anything: `apt-get download PKG=VERSION` (no
// root needed; it only reads the configured archive) and
// `dpkg-deb --fsys-tarfile`, whose tar stream we read with archive/tar.
type Fetcher struct {
	// Cache holds the downloaded .deb files, named PKG_VERSION_ARCH.deb.
	// A .deb already there is used without downloading (so a machine
	// without apt can be given the files).
	Cache string
	// Offline refuses to download.
	Offline bool
	// Log receives one line per download; may be nil.
	Log io.Writer
}

// debName is the cache file name of a package; ':' (an epoch) becomes
// "%3a" as apt-get names it.
func debName(b *Build) string {
	return fmt.Sprintf("%s_%s_%s.deb", b.Package, strings.ReplaceAll(b.Version, ":", "%3a"), b.Arch)
}

// Deb returns the path of the package's .deb in the cache, downloading it
// if needed, and checks its sha256 when the recipe pins one.
func (f *Fetcher) Deb(ctx context.Context, b *Build) (string, error) {
	dst := filepath.Join(f.Cache, debName(b))
	if _, err := os.Stat(dst); err != nil {
		if f.Offline {
			return "", fmt.Errorf("%s=%s: not in %s and downloads are off", b.Package, b.Version, f.Cache)
		}
		if err := f.download(ctx, b, dst); err != nil {
			return "", err
		}
	}
	if b.DebSHA256 != "" {
		sum, err := fileSHA256(dst)
		if err != nil {
			return "", err
		}
		if sum != b.DebSHA256 {
			return "", fmt.Errorf("%s has sha256 %s, the manifest pins %s (delete it to download again)", dst, sum, b.DebSHA256)
		}
	}
	return dst, nil
}

func (f *Fetcher) download(ctx context.Context, b *Build, dst string) error {
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("%s=%s: apt-get not found: build the corpus on a Debian machine, or put %s in %s",
			b.Package, b.Version, debName(b), f.Cache)
	}
	if err := os.MkdirAll(f.Cache, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(f.Cache, ".download")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if f.Log != nil {
		fmt.Fprintf(f.Log, "apt-get download %s=%s\n", b.Package, b.Version)
	}
	spec := b.Package + ":" + b.Arch + "=" + b.Version
	if b.Arch == "all" {
		spec = b.Package + "=" + b.Version
	}
	cmd := exec.CommandContext(ctx, "apt-get", "download", "-q", spec)
	cmd.Dir = tmp
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("apt-get download %s: %v: %s\n(run `apt-get update` once; if the archive no longer has this version, "+
			"fetch it from https://snapshot.debian.org/package/%s/ into %s as %s)",
			spec, err, strings.TrimSpace(out.String()), b.Package, f.Cache, debName(b))
	}
	got, err := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if err != nil || len(got) != 1 {
		return fmt.Errorf("apt-get download %s: want one .deb, found %v", spec, got)
	}
	return os.Rename(got[0], dst)
}

func fileSHA256(p string) (string, error) {
	fh, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Members reads the named files out of a .deb's data archive. A wanted
// member that is missing, or is not a regular file, is an error.
func Members(ctx context.Context, deb string, names []string) (map[string][]byte, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	cmd := exec.CommandContext(ctx, "dpkg-deb", "--fsys-tarfile", deb)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("dpkg-deb: %w (install dpkg)", err)
	}
	out := map[string][]byte{}
	tr := tar.NewReader(pipe)
	var terr error
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			terr = fmt.Errorf("%s: %w", deb, err)
			break
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if !want[name] {
			continue
		}
		if h.Typeflag != tar.TypeReg {
			terr = fmt.Errorf("%s: %s is not a regular file (a link? name its target)", deb, name)
			break
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			terr = fmt.Errorf("%s: %s: %w", deb, name, err)
			break
		}
		out[name] = b
	}
	io.Copy(io.Discard, pipe)
	if err := cmd.Wait(); err != nil && terr == nil {
		terr = fmt.Errorf("dpkg-deb --fsys-tarfile %s: %v: %s", deb, err, strings.TrimSpace(stderr.String()))
	}
	if terr != nil {
		return nil, terr
	}
	var missing []string
	for n := range want {
		if out[n] == nil {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("%s has no file %s", deb, strings.Join(missing, ", "))
	}
	return out, nil
}

// Filter applies the recipe's filters in order.
func (b *Build) Filter(data []byte) ([]byte, error) {
	for _, name := range b.Filters {
		f := filters[name]
		if f == nil {
			return nil, fmt.Errorf("unknown filter %q", name)
		}
		var err error
		if data, err = f(data); err != nil {
			return nil, fmt.Errorf("filter %s: %w", name, err)
		}
	}
	return data, nil
}

// gunzip decompresses a gzip member; decompression is deterministic, so
// the same .gz always gives the same text.
func gunzip(b []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	r.Multistream(true)
	return io.ReadAll(r)
}

// ansiRE matches the colour escapes (ESC [ ... m) that fortune files use
// around titles.
var ansiRE = regexp.MustCompile("\x1b\\[[0-9;]*m")

func stripANSI(b []byte) ([]byte, error) { return ansiRE.ReplaceAll(b, nil), nil }

// Text returns the recipe's text from the member's content: filtered, then
// cut to [Offset, Offset+Length).
func (b *Build) Text(member []byte) ([]byte, error) {
	data, err := b.Filter(member)
	if err != nil {
		return nil, err
	}
	if b.Offset+b.Length > int64(len(data)) {
		return nil, fmt.Errorf("byte range [%d, %d) is past the end of %s (%d bytes after filters)",
			b.Offset, b.Offset+b.Length, b.Member, len(data))
	}
	return data[b.Offset : b.Offset+b.Length], nil
}

// BuildOptions control Build.
type BuildOptions struct {
	Fetcher
	// Force rewrites streams that already match the manifest.
	Force bool
}

// Build recreates every stream that has a recipe and is missing or differs
// from the manifest, checks each against its pinned sha256, and writes it
// atomically. Running it again changes nothing: the recipes pin the exact
// bytes.
func (m *Manifest) Build(ctx context.Context, opt BuildOptions) error {
	type job struct {
		b   *Build
		ids []*Stream
	}
	var order []string
	jobs := map[string]*job{}
	for i := range m.Streams {
		s := &m.Streams[i]
		if s.Build == nil {
			continue
		}
		if !opt.Force {
			if _, err := m.Read(s); err == nil {
				continue
			}
		}
		key := debName(s.Build)
		if jobs[key] == nil {
			jobs[key] = &job{b: s.Build}
			order = append(order, key)
		}
		jobs[key].ids = append(jobs[key].ids, s)
	}
	for _, key := range order {
		j := jobs[key]
		deb, err := opt.Deb(ctx, j.b)
		if err != nil {
			return fmt.Errorf("corpus %s: %w", m.Name, err)
		}
		var names []string
		for _, s := range j.ids {
			names = append(names, s.Build.Member)
		}
		members, err := Members(ctx, deb, names)
		if err != nil {
			return fmt.Errorf("corpus %s: %w", m.Name, err)
		}
		for _, s := range j.ids {
			text, err := s.Build.Text(members[s.Build.Member])
			if err != nil {
				return fmt.Errorf("corpus %s: stream %s: %w", m.Name, s.ID, err)
			}
			if st := Measure(text); st.SHA256 != s.SHA256 {
				return fmt.Errorf("corpus %s: stream %s: rebuilt text has sha256 %s, the manifest pins %s",
					m.Name, s.ID, st.SHA256, s.SHA256)
			}
			if err := writeAtomic(m.File(s), text); err != nil {
				return fmt.Errorf("corpus %s: stream %s: %w", m.Name, s.ID, err)
			}
		}
	}
	return nil
}

// Pin fills in what the manifest pins about each stream from the text
// itself: for a stream with a recipe, it fetches the package, snaps the
// byte range to whole lines (the start moves forward to a line start, the
// end back to just after a newline), records the .deb's sha256 and writes
// the stream; for a committed stream it hashes the file. Then it sets
// sha256, bytes and words. Pin is how a maintainer creates or updates a
// manifest; Build and Read then hold everyone to it.
func (m *Manifest) Pin(ctx context.Context, f Fetcher) error {
	for i := range m.Streams {
		s := &m.Streams[i]
		var text []byte
		if s.Build == nil {
			b, err := os.ReadFile(m.File(s))
			if err != nil {
				return fmt.Errorf("corpus %s: stream %s: %w", m.Name, s.ID, err)
			}
			text = b
		} else {
			b := s.Build
			b.DebSHA256 = ""
			deb, err := f.Deb(ctx, b)
			if err != nil {
				return fmt.Errorf("corpus %s: stream %s: %w", m.Name, s.ID, err)
			}
			if b.DebSHA256, err = fileSHA256(deb); err != nil {
				return err
			}
			members, err := Members(ctx, deb, []string{b.Member})
			if err != nil {
				return fmt.Errorf("corpus %s: stream %s: %w", m.Name, s.ID, err)
			}
			data, err := b.Filter(members[b.Member])
			if err != nil {
				return fmt.Errorf("corpus %s: stream %s: %w", m.Name, s.ID, err)
			}
			b.Offset, b.Length = snapLines(data, b.Offset, b.Length)
			if b.Length <= 0 {
				return fmt.Errorf("corpus %s: stream %s: no whole line in the byte range", m.Name, s.ID)
			}
			text = data[b.Offset : b.Offset+b.Length]
			if err := writeAtomic(m.File(s), text); err != nil {
				return err
			}
		}
		if !utf8.Valid(text) {
			return fmt.Errorf("corpus %s: stream %s: not valid UTF-8", m.Name, s.ID)
		}
		st := Measure(text)
		s.SHA256, s.Bytes, s.Words = st.SHA256, st.Bytes, st.Words
	}
	return m.Check()
}

// snapLines shrinks [off, off+n) of data to whole lines: the start moves
// forward to the first line start at or after off, the end back to just
// after the last newline at or before off+n (or to the end of data).
func snapLines(data []byte, off, n int64) (int64, int64) {
	size := int64(len(data))
	off = min(max(off, 0), size)
	end := min(off+n, size)
	if off > 0 && data[off-1] != '\n' {
		i := bytes.IndexByte(data[off:end], '\n')
		if i < 0 {
			return off, 0
		}
		off += int64(i) + 1
	}
	if end < size {
		i := bytes.LastIndexByte(data[off:end], '\n')
		if i < 0 {
			return off, 0
		}
		end = off + int64(i) + 1
	}
	return off, end - off
}
