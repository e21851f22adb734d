package corpus

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const heldout = "../corpora/ppl-heldout-v1/manifest.json"
const mixed = "../corpora/ppl-mixed-v1/manifest.json"

func TestHeldout(t *testing.T) {
	m, err := Load(heldout)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.VerifyAll(false); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(m.Domains(), ","); got != "en,zh,code" {
		t.Errorf("domains %s", got)
	}
	if n := len(selectStreams(t, m, true)); n != 3 {
		t.Errorf("quick selects %d streams, want 3", n)
	}
	if n := len(selectStreams(t, m, false)); n != 9 {
		t.Errorf("%d streams, want 9", n)
	}
	perDomain := map[string]int{}
	var enWords, zhBytes int64
	for _, s := range m.Streams {
		perDomain[s.Domain]++
		if s.Build != nil {
			t.Errorf("%s: committed stream has a build recipe", s.ID)
		}
		switch s.Domain {
		case "en":
			enWords += s.Words
		case "zh":
			zhBytes += s.Bytes
		}
	}
	for d, n := range perDomain {
		if n < 2 {
			t.Errorf("domain %s has %d streams, want 2 or more", d, n)
		}
	}
	if enWords < 3000 || zhBytes < 20000 {
		t.Errorf("English %d words, Chinese %d bytes: want several thousand words each", enWords, zhBytes)
	}
	// The manifest pins what the files hold: pinning again changes nothing.
	again := *m
	again.Streams = append([]Stream(nil), m.Streams...)
	if err := again.Pin(context.Background(), Fetcher{Offline: true}); err != nil {
		t.Fatal(err)
	}
	a, _ := m.Marshal()
	b, _ := again.Marshal()
	if !bytes.Equal(a, b) {
		t.Error("pinning the committed corpus changes its manifest")
	}
	raw, _ := os.ReadFile(heldout)
	if !bytes.Equal(raw, a) {
		t.Error("manifest.json is not in Marshal's canonical form")
	}
}

func TestMixedManifest(t *testing.T) {
	m, err := Load(mixed)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Streams) != 16 || len(selectStreams(t, m, true)) != 4 || len(m.Domains()) != 4 {
		t.Fatalf("%d streams, %d quick, %d domains; want 16, 4, 4", len(m.Streams), len(selectStreams(t, m, true)), len(m.Domains()))
	}
	for _, s := range m.Streams {
		b := s.Build
		if b == nil || b.DebSHA256 == "" {
			t.Fatalf("%s: no pinned build recipe", s.ID)
		}
		if s.Bytes != b.Length || s.Bytes < 20000 || s.Bytes > 65536 {
			t.Errorf("%s: %d bytes, recipe length %d", s.ID, s.Bytes, b.Length)
		}
		if s.Path != "streams/"+s.ID+".txt" {
			t.Errorf("%s: path %s", s.ID, s.Path)
		}
	}
	if m.Rebuild != "make corpus" {
		t.Errorf("rebuild %q", m.Rebuild)
	}
}

func TestParseErrors(t *testing.T) {
	good := func() map[string]any {
		return map[string]any{"name": "c", "version": "1", "description": "d", "streams": []any{
			map[string]any{"id": "a", "domain": "en", "path": "a.txt", "sha256": strings.Repeat("0", 64), "bytes": 1, "words": 1,
				"license": "l", "source": "s", "quick": true},
		}}
	}
	stream := func(m map[string]any) map[string]any { return m["streams"].([]any)[0].(map[string]any) }
	for _, c := range []struct {
		edit func(m map[string]any)
		want string
	}{
		{func(m map[string]any) {}, ""},
		{func(m map[string]any) { m["nmae"] = "x" }, `unknown field "nmae"`},
		{func(m map[string]any) { m["name"] = "Bad Name" }, "bad corpus name"},
		{func(m map[string]any) { m["version"] = "" }, "no version"},
		{func(m map[string]any) { m["streams"] = []any{} }, "no streams"},
		{func(m map[string]any) { stream(m)["path"] = "../x.txt" }, "not a clean relative path"},
		{func(m map[string]any) { stream(m)["path"] = "/etc/passwd" }, "not a clean relative path"},
		{func(m map[string]any) { stream(m)["sha256"] = "ABC" }, "not 64 lowercase hex"},
		{func(m map[string]any) { stream(m)["quick"] = false }, "domain en has 0 quick streams"},
		{func(m map[string]any) { stream(m)["license"] = "" }, "license and source are required"},
		{func(m map[string]any) { stream(m)["id"] = "A" }, `bad id "A"`},
		{func(m map[string]any) {
			stream(m)["build"] = map[string]any{"package": "pk", "version": "1", "arch": "all", "member": "x", "offset": 0, "length": 1, "filters": []string{"rot13"}}
		}, `unknown filter "rot13"`},
		{func(m map[string]any) {
			stream(m)["build"] = map[string]any{"package": "pk", "version": "1", "arch": "all", "member": "x", "offset": 0, "length": 0}
		}, "bad byte range"},
		{func(m map[string]any) {
			m["streams"] = append(m["streams"].([]any), stream(good()))
		}, "duplicate id"},
	} {
		m := good()
		c.edit(m)
		b, _ := json.Marshal(m)
		_, err := Parse(b)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("good manifest refused: %v", err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("want error %q, got %v", c.want, err)
		}
	}
	if _, err := Parse([]byte(`{"name":"c"} {}`)); err == nil {
		t.Error("trailing data accepted")
	}
}

// selectStreams is m.Select(quick, nil) for a manifest that must have a
// selection.
func selectStreams(t *testing.T, m *Manifest, quick bool) []*Stream {
	t.Helper()
	sel, err := m.Select(quick, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// copyCorpus copies a committed corpus into a temporary directory.
func copyCorpus(t *testing.T, manifest string) string {
	t.Helper()
	src := filepath.Dir(manifest)
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dst, "manifest.json")
}

func TestTampered(t *testing.T) {
	p := copyCorpus(t, heldout)
	m, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	s := &m.Streams[1]
	f := m.File(s)
	b, _ := os.ReadFile(f)
	b[100] ^= 1
	os.WriteFile(f, b, 0o644)
	_, err = m.Read(s)
	if err == nil || !strings.Contains(err.Error(), `stream "en-windows"`) || !strings.Contains(err.Error(), "the manifest says") ||
		!strings.Contains(err.Error(), "rebuild the corpus with `git checkout") {
		t.Errorf("tampered stream: %v", err)
	}
	os.Remove(f)
	_, err = m.Read(s)
	if err == nil || !strings.Contains(err.Error(), "en-windows") || !strings.Contains(err.Error(), "is missing") {
		t.Errorf("missing stream: %v", err)
	}
	if err := m.VerifyAll(true); err != nil {
		t.Errorf("quick streams are intact: %v", err)
	}
	if err := m.VerifyAll(false); err == nil {
		t.Error("Verify passed with a missing stream")
	}
}

func TestSnapLines(t *testing.T) {
	data := []byte("one\ntwo\nthree\nfour")
	for _, c := range []struct {
		off, n   int64
		woff, wn int64
	}{
		{0, 4, 0, 4},    // "one\n"
		{0, 6, 0, 4},    // cut back to the newline
		{1, 8, 4, 4},    // start moves to "two"
		{4, 100, 4, 14}, // to the end of data
		{5, 3, 8, 0},    // no whole line
		{14, 4, 14, 4},  // "four" at the end
	} {
		o, n := snapLines(data, c.off, c.n)
		if o != c.woff || n != c.wn {
			t.Errorf("snapLines(%d, %d) = %d, %d; want %d, %d", c.off, c.n, o, n, c.woff, c.wn)
		}
	}
}

func TestFilters(t *testing.T) {
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write([]byte("\x1b[32m《静夜思》\x1b[m\n床前明月光\n"))
	w.Close()
	b := &Build{Filters: []string{"gunzip", "strip-ansi"}, Offset: 0, Length: 100}
	got, err := b.Filter(gz.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "《静夜思》\n床前明月光\n" {
		t.Errorf("filtered %q", got)
	}
	if _, err := b.Text(gz.Bytes()); err == nil || !strings.Contains(err.Error(), "past the end") {
		t.Errorf("range past the end: %v", err)
	}
	if _, err := gunzip([]byte("not gzip")); err == nil {
		t.Error("gunzip accepted garbage")
	}
}

// fakeDeb builds a small .deb with dpkg-deb and returns its path.
func fakeDeb(t *testing.T, dir string) string {
	t.Helper()
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb not installed")
	}
	root := filepath.Join(dir, "pkg")
	os.MkdirAll(filepath.Join(root, "DEBIAN"), 0o755)
	os.MkdirAll(filepath.Join(root, "usr/share/doc/fake"), 0o755)
	os.WriteFile(filepath.Join(root, "DEBIAN/control"), []byte("Package: fake-doc\nVersion: 1:2.0-1\nArchitecture: all\nMaintainer: ppl <ppl@example.org>\nDescription: test\n"), 0o644)
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	for i := 0; i < 200; i++ {
		w.Write([]byte("line of reference prose, number " + strings.Repeat("x", i%7) + "\n"))
	}
	w.Close()
	os.WriteFile(filepath.Join(root, "usr/share/doc/fake/ref.txt.gz"), gz.Bytes(), 0o644)
	os.WriteFile(filepath.Join(root, "usr/share/doc/fake/poems"), []byte("\x1b[32m《题》\x1b[m\n白日依山尽\n黄河入海流\n"), 0o644)
	os.Symlink("poems", filepath.Join(root, "usr/share/doc/fake/poems.u8"))
	deb := filepath.Join(dir, "fake.deb")
	cmd := exec.Command("dpkg-deb", "--root-owner-group", "--build", root, deb)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --build: %v: %s", err, out)
	}
	return deb
}

// TestBuild pins and builds a corpus from a package in the cache (no
// download), twice, and checks that a tampered stream is refused by Read
// and restored by Build.
func TestBuild(t *testing.T) {
	dir := t.TempDir()
	deb := fakeDeb(t, dir)
	cache := filepath.Join(dir, "cache")
	os.MkdirAll(cache, 0o755)
	b := func(member string, filters []string, off, n int64) *Build {
		return &Build{Package: "fake-doc", Version: "1:2.0-1", Arch: "all", Member: member, Filters: filters, Offset: off, Length: n}
	}
	if err := os.Rename(deb, filepath.Join(cache, debName(b("x", nil, 0, 1)))); err != nil {
		t.Fatal(err)
	}
	zero := strings.Repeat("0", 64)
	m := &Manifest{}
	m.Name, m.Version, m.Rebuild, m.Dir = "fake", "1", "make corpus", filepath.Join(dir, "corpus")
	m.Streams = []Stream{
		{ID: "ref", Domain: "en", Path: "s/ref.txt", SHA256: zero, License: "l", Source: "s", Quick: true,
			Build: b("usr/share/doc/fake/ref.txt.gz", []string{"gunzip"}, 1000, 3000)},
		{ID: "poems", Domain: "zh", Path: "s/poems.txt", SHA256: zero, License: "public-domain", Source: "s", Quick: true,
			Build: b("usr/share/doc/fake/poems", []string{"strip-ansi"}, 0, 1000)},
	}
	f := Fetcher{Cache: cache, Offline: true}
	ctx := context.Background()
	if err := m.Pin(ctx, f); err != nil {
		t.Fatal(err)
	}
	ref, poems := &m.Streams[0], &m.Streams[1]
	if ref.Build.Offset < 1000 || ref.Build.Length > 3000 || ref.Build.DebSHA256 == "" || ref.Bytes != ref.Build.Length {
		t.Errorf("pinned recipe %+v, %d bytes", ref.Build, ref.Bytes)
	}
	if poems.Bytes != int64(len("《题》\n白日依山尽\n黄河入海流\n")) || poems.Words != 3 {
		t.Errorf("poems: %d bytes %d words", poems.Bytes, poems.Words)
	}
	first := map[string]string{}
	for _, s := range m.Streams {
		first[s.ID] = s.SHA256
	}
	os.RemoveAll(filepath.Join(m.Dir, "s"))
	if err := m.Build(ctx, BuildOptions{Fetcher: f}); err != nil {
		t.Fatal(err)
	}
	if err := m.VerifyAll(false); err != nil {
		t.Fatal(err)
	}
	// Tamper: Read refuses, naming the stream and the rebuild command;
	// Build restores the pinned bytes.
	os.WriteFile(m.File(ref), []byte("edited"), 0o644)
	if _, err := m.Read(ref); err == nil || !strings.Contains(err.Error(), `stream "ref"`) || !strings.Contains(err.Error(), "make corpus") {
		t.Errorf("tampered: %v", err)
	}
	if err := m.Build(ctx, BuildOptions{Fetcher: f}); err != nil {
		t.Fatal(err)
	}
	for _, s := range m.Streams {
		b, err := m.Read(&s)
		if err != nil {
			t.Fatal(err)
		}
		if Measure(b).SHA256 != first[s.ID] {
			t.Errorf("%s changed between builds", s.ID)
		}
	}
	// A recipe whose pinned sha256 no longer matches is an error.
	m.Streams[0].SHA256 = zero
	if err := m.Build(ctx, BuildOptions{Fetcher: f, Force: true}); err == nil || !strings.Contains(err.Error(), "rebuilt text has sha256") {
		t.Errorf("wrong pin: %v", err)
	}
	// A symlink member is refused; a missing package offline is an error.
	m.Streams[0].Build.Member = "usr/share/doc/fake/poems.u8"
	if err := m.Build(ctx, BuildOptions{Fetcher: f, Force: true}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("symlink member: %v", err)
	}
	m.Streams[0].Build.Version = "9"
	if err := m.Build(ctx, BuildOptions{Fetcher: f, Force: true}); err == nil || !strings.Contains(err.Error(), "downloads are off") {
		t.Errorf("missing package: %v", err)
	}
}

// TestMixedBuild rebuilds ppl-mixed-v1 twice from the Debian packages when
// they are in the cache (make corpus puts them there) and checks that both
// builds give the pinned bytes. Without the packages it is skipped: the
// test must not download 40 MB.
func TestMixedBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	cache := os.Getenv("PPL_CACHE_DIR")
	if cache == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			t.Skip(err)
		}
		cache = filepath.Join(d, "ppl")
	}
	cache = filepath.Join(cache, "debs")
	p := filepath.Join(t.TempDir(), "manifest.json")
	raw, err := os.ReadFile(mixed)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(p, raw, 0o644)
	m, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range m.Streams {
		if _, err := os.Stat(filepath.Join(cache, debName(s.Build))); err != nil {
			t.Skipf("%s not in %s (run make corpus first)", debName(s.Build), cache)
		}
	}
	f := Fetcher{Cache: cache, Offline: true}
	for i := 0; i < 2; i++ {
		os.RemoveAll(filepath.Join(m.Dir, "streams"))
		if err := m.Build(context.Background(), BuildOptions{Fetcher: f}); err != nil {
			t.Fatalf("build %d: %v", i+1, err)
		}
		if err := m.VerifyAll(false); err != nil {
			t.Fatalf("build %d: %v", i+1, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, p := range []string{heldout, mixed} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"name":"c","version":"1","streams":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			return
		}
		// A manifest that parses survives a round trip unchanged.
		out, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		m2, err := Parse(out)
		if err != nil {
			t.Fatalf("re-parse: %v", err)
		}
		out2, _ := m2.Marshal()
		if !bytes.Equal(out, out2) {
			t.Fatal("round trip changed the manifest")
		}
	})
}
