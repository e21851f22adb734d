package cache

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestKeyIsLengthPrefixed(t *testing.T) {
	if Key("ab", "c") == Key("a", "bc") {
		t.Fatal("keys collide across part boundaries")
	}
	if got := Key(); got != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("Key() = %s", got)
	}
}

func TestPutGetCorrupt(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k := Key("x")
	if _, ok, err := c.Get("tok", k); ok || err != nil {
		t.Fatalf("empty cache: ok %v err %v", ok, err)
	}
	payload := []byte("{\"type\":\"tokens\"}\n")
	if err := c.Put("tok", k, payload); err != nil {
		t.Fatal(err)
	}
	got, ok, err := c.Get("tok", k)
	if !ok || err != nil || string(got) != string(payload) {
		t.Fatalf("get: %q %v %v", got, ok, err)
	}
	// Flip a byte of the compressed file: detected, removed, reported.
	p := c.Path("tok", k)
	raw, _ := os.ReadFile(p)
	raw[len(raw)/2] ^= 0x55
	os.WriteFile(p, raw, 0o644)
	if _, ok, err := c.Get("tok", k); ok || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt entry: ok %v err %v", ok, err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatal("corrupt entry not removed")
	}
	// A valid zstd frame whose payload does not match its trailer.
	c.Put("tok", k, payload)
	data, _ := c.dec.DecodeAll(mustRead(t, p), nil)
	data[2] = 'X'
	os.WriteFile(p, c.enc.EncodeAll(data, nil), 0o644)
	if _, _, err := c.Get("tok", k); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("tampered payload: %v", err)
	}
}

func mustRead(t *testing.T, p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestStatsPrune(t *testing.T) {
	c, _ := Open(t.TempDir())
	for i, g := range []string{"score/aaa", "score/aaa", "score/bbb", "tokenize/t"} {
		if err := c.Put(g, Key(g, string(rune('a'+i))), []byte("x\n")); err != nil {
			t.Fatal(err)
		}
	}
	gs, err := c.Stats()
	if err != nil || len(gs) != 3 {
		t.Fatalf("stats %+v %v", gs, err)
	}
	counts := map[string]int{}
	for _, g := range gs {
		counts[g.Name] = g.Entries
	}
	if counts["score/aaa"] != 2 || counts["score/bbb"] != 1 || counts["tokenize/t"] != 1 {
		t.Fatalf("counts %v", counts)
	}
	n, err := c.Prune("score/aaa", time.Now().Add(time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("pruned %d %v", n, err)
	}
	if n, _ := c.Prune("", time.Now().Add(-time.Hour)); n != 0 {
		t.Fatalf("pruned fresh entries: %d", n)
	}
}

func TestFileSHA256(t *testing.T) {
	dir := t.TempDir()
	c, _ := Open(dir + "/c")
	p := dir + "/f"
	os.WriteFile(p, []byte("abc"), 0o644)
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	for i := 0; i < 2; i++ { // computed, then remembered
		got, err := c.FileSHA256(context.Background(), nil, p)
		if err != nil || got != want {
			t.Fatalf("run %d: %s %v", i, got, err)
		}
	}
	if gs, _ := c.Stats(); len(gs) != 1 || gs[0].Name != "sha256" || gs[0].Entries != 1 {
		t.Fatalf("stats %+v", gs)
	}
	var nilCache *Cache
	if got, _ := nilCache.FileSHA256(context.Background(), nil, p); got != want {
		t.Fatal(got)
	}
	// A split model: its shards' bytes one after another, sha256("abcdef"),
	// remembered under both files.
	q := dir + "/g"
	os.WriteFile(q, []byte("def"), 0o644)
	const both = "bef57ec7f53a6d40beb640a780a639c83bc29ac8a9816f1fc6c5c6dcd93c4721"
	for i := 0; i < 2; i++ {
		if got, err := c.FileSHA256(context.Background(), nil, p, q); err != nil || got != both {
			t.Fatalf("two files, run %d: %s %v", i, got, err)
		}
	}
	if gs, _ := c.Stats(); len(gs) != 1 || gs[0].Entries != 2 {
		t.Fatalf("stats %+v", gs)
	}
	os.WriteFile(q, []byte("deg"), 0o644) // the second file changed: hashed again
	if got, _ := c.FileSHA256(context.Background(), nil, p, q); got == both {
		t.Errorf("a changed shard gave the old sum")
	}
}

// windowPayload is a cached window of n targets as ppl-score writes it:
// log-probs with full float64 precision and argmax ids.
func windowPayload(n int) []byte {
	b := []byte(`{"logprobs":[`)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, -float64(i%97)*0.0731-1.0/float64(i+3), 'g', -1, 64)
	}
	b = append(b, `],"argmax":[`...)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(i*7919%32000), 10)
	}
	return append(b, "]}"...)
}

// BenchmarkPut is the cost of writing one window of 256 targets (compress,
// hash, temp file, rename): what a cold run adds per window.
func BenchmarkPut(b *testing.B) {
	c, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	payload := windowPayload(256)
	i := 0
	for b.Loop() {
		if err := c.Put("score/m", Key(strconv.Itoa(i)), payload); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkGet is the cost of replaying one cached window of 256 targets
// (read, decompress, verify); BenchmarkGetMiss of looking one up in vain.
func BenchmarkGet(b *testing.B) {
	c, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	k := Key("w")
	if err := c.Put("score/m", k, windowPayload(256)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, ok, err := c.Get("score/m", k); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkGetMiss(b *testing.B) {
	c, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	k := Key("absent")
	for b.Loop() {
		if _, ok, err := c.Get("score/m", k); ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// TestPutAfterRemoval: a cache directory removed while a tool runs (by
// hand, or by ppl-cache prune) is made again by the next write.
func TestPutAfterRemoval(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Put("score/m", Key("a"), []byte("1\n")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := c.Put("score/m", Key("a"), []byte("2\n")); err != nil {
		t.Fatal(err)
	}
	got, ok, err := c.Get("score/m", Key("a"))
	if !ok || err != nil || string(got) != "2\n" {
		t.Fatalf("after removal: %q %v %v", got, ok, err)
	}
}

// An entry is bound to its key: the file of one key copied over another's
// is reported, removed and not replayed.
func TestEntryBoundToKey(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, b := Key("a"), Key("b")
	must(t, c.Put("g", a, []byte("A\n")))
	must(t, c.Put("g", b, []byte("B\n")))
	must(t, os.WriteFile(c.Path("g", b), mustRead(t, c.Path("g", a)), 0o644))
	_, ok, err := c.Get("g", b)
	if ok || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "entry of key "+a+" found under key "+b) {
		t.Fatalf("swapped entry: ok %v, %v", ok, err)
	}
	if _, err := os.Stat(c.Path("g", b)); !os.IsNotExist(err) {
		t.Fatal("swapped entry not removed")
	}
	if got, ok, err := c.Get("g", a); !ok || err != nil || string(got) != "A\n" {
		t.Fatalf("original: %q %v %v", got, ok, err)
	}
}

// Anything but a regular file at an entry's path (a directory, a FIFO)
// is reported and removed, never opened; the entry can then be written.
func TestEntryNotRegular(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k := Key("k")
	p := c.Path("g", k)
	must(t, os.MkdirAll(p+"/sub", 0o755))
	_, ok, err := c.Get("g", k)
	if ok || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "not a regular file (a directory)") {
		t.Fatalf("directory: ok %v, %v", ok, err)
	}
	must(t, c.Put("g", k, []byte("x\n")))
	if got, ok, _ := c.Get("g", k); !ok || string(got) != "x\n" {
		t.Fatalf("after the directory: %q %v", got, ok)
	}
	os.Remove(p)
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skip(err)
	}
	done := make(chan error, 1)
	go func() { _, _, err := c.Get("g", k); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "a FIFO") {
			t.Fatalf("FIFO: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Get blocked on a FIFO")
	}
}

// A small entry that decompresses beyond MaxEntryBytes is refused without
// allocating it all.
func TestEntryDecompressionBomb(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k := Key("bomb")
	must(t, c.Put("g", k, []byte("x\n")))
	bomb := c.enc.EncodeAll(make([]byte, MaxEntryBytes+1<<20), nil)
	must(t, os.WriteFile(c.Path("g", k), bomb, 0o644))
	if _, ok, err := c.Get("g", k); ok || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bomb of %d bytes: ok %v, %v", len(bomb), ok, err)
	}
}

// OpenExisting does not create a missing cache; a write that fails
// suggests --no-cache.
func TestOpenExistingAndHint(t *testing.T) {
	dir := t.TempDir() + "/absent"
	if _, err := OpenExisting(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("absent: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatal("OpenExisting created the directory")
	}
	// A cache that cannot be written (a file where a directory should be:
	// fails even for root, unlike permissions).
	root := t.TempDir()
	c, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(root+"/g", nil, 0o644))
	if err := c.Put("g", Key("x"), []byte("x\n")); err == nil || !strings.Contains(err.Error(), "--no-cache") {
		t.Fatalf("unwritable cache: %v", err)
	}
	if _, err := Open(root + "/g/sub"); err == nil || !strings.Contains(err.Error(), "--no-cache") {
		t.Fatalf("uncreatable cache: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
