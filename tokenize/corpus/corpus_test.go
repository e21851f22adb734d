package corpus

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

const good = `{
  "name": "tiny-v1",
  "version": "1",
  "description": "two domains",
  "rebuild": "make corpus",
  "streams": [
    {"id": "en-1", "domain": "en", "path": "en/one.txt", "sha256": "SHA_ONE", "bytes": 12, "words": 2, "license": "CC0", "source": "test", "quick": true},
    {"id": "en-2", "domain": "en", "path": "en/two.txt", "sha256": "SHA_TWO", "bytes": 3, "words": 1, "license": "CC0", "source": "test", "quick": false,
     "build": {"package": "x", "anything": [1, 2]}},
    {"id": "zh-1", "domain": "zh", "path": "zh.txt", "sha256": "SHA_ZH", "bytes": 6, "words": 1, "license": "CC0", "source": "test", "quick": true}
  ]
}`

// writeCorpus lays out the good manifest and its streams in a directory.
func writeCorpus(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"en/one.txt": "hello, world", "en/two.txt": "two", "zh.txt": "世界"}
	m := good
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		key := map[string]string{"en/one.txt": "SHA_ONE", "en/two.txt": "SHA_TWO", "zh.txt": "SHA_ZH"}[name]
		m = strings.Replace(m, key, SHA256([]byte(text)), 1)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "manifest.json")
}

func TestLoadSelectRead(t *testing.T) {
	path := writeCorpus(t)
	m, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(ss []*Stream) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.ID)
		}
		return out
	}
	for _, c := range []struct {
		quick bool
		ids   []string
		want  []string
	}{
		{false, nil, []string{"en-1", "en-2", "zh-1"}},
		{true, nil, []string{"en-1", "zh-1"}},
		{false, []string{"zh-1", "en-2"}, []string{"en-2", "zh-1"}},
		{true, []string{"en-1", "en-2"}, []string{"en-1"}},
	} {
		got, err := m.Select(c.quick, c.ids)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ids(got), c.want) {
			t.Errorf("Select(%v, %v) = %v, want %v", c.quick, c.ids, ids(got), c.want)
		}
	}
	if _, err := m.Select(false, []string{"fr-1"}); err == nil || err.Error() != `corpus tiny-v1 has no stream "fr-1" (streams: en-1, en-2, zh-1)` {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := m.Select(true, []string{"en-2"}); err == nil || !strings.Contains(err.Error(), "no stream is both quick and among --streams en-2") {
		t.Errorf("empty selection: %v", err)
	}
	b, err := m.Read(&m.Streams[2])
	if err != nil || string(b) != "世界" {
		t.Fatalf("Read = %q, %v", b, err)
	}
	for i := range m.Streams {
		if err := m.Verify(&m.Streams[i]); err != nil {
			t.Error(err)
		}
	}
}

func TestBadStreams(t *testing.T) {
	path := writeCorpus(t)
	m, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(path)
	os.Remove(filepath.Join(dir, "zh.txt"))
	os.WriteFile(filepath.Join(dir, "en", "one.txt"), []byte("hello, World"), 0o644)
	os.WriteFile(filepath.Join(dir, "en", "two.txt"), []byte("two\n"), 0o644)
	for i, want := range []string{
		`corpus tiny-v1: stream "en-1" (` + filepath.Join(dir, "en", "one.txt") + `) has sha256 ` + SHA256([]byte("hello, World")) + `, the manifest says ` + SHA256([]byte("hello, world")) + "; rebuild the corpus with `make corpus`",
		`corpus tiny-v1: stream "en-2" (` + filepath.Join(dir, "en", "two.txt") + ") has more than the 3 bytes the manifest says; rebuild the corpus with `make corpus`",
		`corpus tiny-v1: stream "zh-1" (` + filepath.Join(dir, "zh.txt") + ") is missing; rebuild the corpus with `make corpus`",
	} {
		s := &m.Streams[i]
		for _, err := range []error{m.Verify(s), func() error { _, err := m.Read(s); return err }()} {
			var se *StreamError
			if !errors.As(err, &se) || err.Error() != want {
				t.Errorf("stream %s:\n got %v\nwant %s", s.ID, err, want)
			}
		}
	}
	m.Rebuild = ""
	if _, err := m.Read(&m.Streams[2]); err == nil || !strings.HasSuffix(err.Error(), "rebuild the corpus with `make corpus`") {
		t.Errorf("default rebuild advice: %v", err)
	}
}

// A stream that links outside the corpus directory, or to something that
// is not a regular file, is refused; a link to /dev/zero does not read
// forever.
func TestStreamLinks(t *testing.T) {
	path := writeCorpus(t)
	m, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(path)
	outside := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(outside, []byte("hello, world"), 0o644)
	one := filepath.Join(dir, "en", "one.txt")
	os.Remove(one)
	must(t, os.Symlink(outside, one))
	if _, err := m.Read(&m.Streams[0]); err == nil || !strings.Contains(err.Error(), "outside the corpus directory") {
		t.Errorf("link outside: %v", err)
	}
	os.Remove(one)
	must(t, os.Symlink("two.txt", one)) // inside: read, then judged by its sha256
	if _, err := m.Read(&m.Streams[0]); err == nil || !strings.Contains(err.Error(), "has 3 bytes, the manifest says 12") {
		t.Errorf("link inside: %v", err)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		os.Remove(one)
		must(t, os.Symlink("/dev/zero", one))
		if err := m.Verify(&m.Streams[0]); err == nil || !strings.Contains(err.Error(), "outside the corpus directory") {
			t.Errorf("/dev/zero: %v", err)
		}
	}
	os.Remove(one)
	must(t, syscall.Mkfifo(one, 0o644))
	if err := m.Verify(&m.Streams[0]); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("FIFO: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestParseErrors(t *testing.T) {
	sha := strings.Repeat("a", 64)
	stream := func(kv string) string {
		return `{"name":"c","version":"1","streams":[{"id":"s","domain":"d","path":"p.txt","sha256":"` + sha +
			`","bytes":1,"words":1,"license":"l","source":"s","quick":true` + kv + `}]}`
	}
	for _, c := range []struct{ in, want string }{
		{``, "manifest: EOF"},
		{`[]`, "manifest: json: cannot unmarshal array"},
		{`{"name":"c","version":"1","streams":[]} {}`, "manifest: data after the JSON object"},
		{`{"name":"C","version":"1"}`, `manifest: bad corpus name "C"`},
		{`{"name":"c"}`, "manifest: no version"},
		{`{"name":"c","version":"1","streams":[]}`, "manifest: no streams"},
		{`{"name":"c","version":"1","stream":[]}`, `manifest: json: unknown field "stream"`},
		{stream(`,"id":"../x"`), `manifest: stream 1: bad id "../x"`},
		{stream(`,"path":"../x.txt"`), `manifest: stream s: path "../x.txt": not a clean relative path`},
		{stream(`,"path":"/etc/passwd"`), `not a clean relative path`},
		{stream(`,"path":"a//b"`), `not a clean relative path`},
		{stream(`,"path":"."`), `the corpus directory itself`},
		{stream(`,"path":"a\\b"`), `not a clean relative path`},
		{stream(`,"sha256":"ABC"`), `manifest: stream s: sha256 "ABC" is not 64 lowercase hex digits`},
		{stream(`,"bytes":-1`), "manifest: stream s: negative bytes or words"},
		{stream(`,"license":""`), "manifest: stream s: license and source are required"},
		{stream(`,"quick":false`), "manifest: domain d has 0 quick streams, want exactly 1"},
		{stream(`,"colour":1`), `manifest: json: unknown field "colour"`},
	} {
		_, err := Parse([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%s):\n got %v\nwant %s", c.in, err, c.want)
		}
	}
}

func TestRealManifests(t *testing.T) {
	ms, _ := filepath.Glob("../../eval/corpora/*/manifest.json")
	if len(ms) == 0 {
		t.Skip("no eval/corpora manifests next to this module")
	}
	for _, p := range ms {
		if _, err := Load(p); err != nil {
			t.Error(err)
		}
	}
}

func FuzzManifest(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(`{"name":"c","version":"1","streams":[{"id":"s","domain":"d","path":"p.txt","sha256":"` + strings.Repeat("0", 64) + `","bytes":1,"words":1,"license":"l","source":"s","quick":true}]}`))
	f.Add([]byte(`{"name":"c","streams":[{"path":"../../x"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			return
		}
		// Whatever parses satisfies the invariants the tool relies on.
		seen := map[string]bool{}
		for i := range m.Streams {
			s := &m.Streams[i]
			if !isID(s.ID) || seen[s.ID] || CheckPath(s.Path) != nil || !IsSHA256(s.SHA256) || s.Bytes < 0 {
				t.Fatalf("accepted bad stream %+v", s)
			}
			seen[s.ID] = true
			m.Dir = "/corpus"
			if p := m.File(s); !strings.HasPrefix(p, "/corpus/") {
				t.Fatalf("stream path %q escapes the corpus directory", p)
			}
		}
		if _, err := m.Select(true, nil); err != nil {
			t.Fatalf("no quick selection: %v", err)
		}
	})
}
