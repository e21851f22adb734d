package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// splitModel writes testWriter's model and its shards of two tensors each
// (three shards for its five tensors) into a new directory, and returns
// the model and the shards' paths.
func splitModel(t *testing.T) (*File, []string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "whole.gguf")
	if err := testWriter(t).WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	paths, err := WriteShards(f, filepath.Join(dir, "m"), 2)
	if err != nil {
		t.Fatal(err)
	}
	return f, paths
}

func TestSplitRoundTrip(t *testing.T) {
	whole, paths := splitModel(t)
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	if want := []string{"m-00001-of-00003.gguf", "m-00002-of-00003.gguf", "m-00003-of-00003.gguf"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("shards %v, want %v", names, want)
	}
	f, err := Open(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Shards, paths) || f.Path != paths[0] {
		t.Errorf("Path %s, Shards %v, want %v", f.Path, f.Shards, paths)
	}
	// The first shard's metadata is the model's, then the split keys.
	want := append(append([]KV(nil), whole.Metadata...),
		KV{KeySplitNo, mustValue(uint16(0))}, KV{KeySplitTensors, mustValue(int32(5))}, KV{KeySplitCount, mustValue(uint16(3))})
	if len(f.Metadata) != len(want) {
		t.Fatalf("%d keys in the first shard, want %d", len(f.Metadata), len(want))
	}
	for i, kv := range f.Metadata {
		if kv.Key != "t.nan" && !reflect.DeepEqual(kv, want[i]) { // NaN != NaN
			t.Errorf("metadata %d of the first shard: %v, want %v", i, kv, want[i])
		}
	}
	if len(f.Tensors) != len(whole.Tensors) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(whole.Tensors))
	}
	for i, tn := range f.Tensors {
		wt := whole.Tensors[i]
		if tn.Name != wt.Name || tn.Type != wt.Type || !reflect.DeepEqual(tn.Shape, wt.Shape) || tn.Size != wt.Size || tn.shard != i/2 {
			t.Errorf("tensor %d: %+v, want %+v in shard %d", i, tn, wt, i/2)
		}
		if got, ok := f.Tensor(wt.Name); !ok || got != tn {
			t.Errorf("Tensor(%q) = %v, %v", wt.Name, got, ok)
		}
		if d := f.Data(tn); !bytes.Equal(d, whole.Data(wt)) || cap(d) != len(d) {
			t.Errorf("tensor %s: data differs", tn.Name)
		}
	}
	// The other shards hold the split keys only, as gguf-split writes them.
	b, err := os.ReadFile(paths[2])
	if err != nil {
		t.Fatal(err)
	}
	s, err := parse(paths[2], b)
	if err != nil {
		t.Fatal(err)
	}
	if want := []KV{{KeySplitNo, mustValue(uint16(2))}, {KeySplitTensors, mustValue(int32(5))}, {KeySplitCount, mustValue(uint16(3))}}; !reflect.DeepEqual(s.Metadata, want) {
		t.Errorf("third shard's metadata %v, want %v", s.Metadata, want)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if d := f.Data(f.Tensors[4]); d != nil {
		t.Errorf("Data after Close = %d bytes", len(d))
	}

	// One shard (split.count 1) is one file, as for llama.cpp.
	one, err := WriteShards(whole, filepath.Join(t.TempDir(), "one"), 5)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Open(one[0])
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if len(one) != 1 || !strings.HasSuffix(one[0], "one-00001-of-00001.gguf") || len(g.Shards) != 1 || len(g.Tensors) != 5 {
		t.Errorf("one shard: %v, Shards %v, %d tensors", one, g.Shards, len(g.Tensors))
	}
}

// writeShard writes a GGUF file of the given metadata and a 4-byte F32
// tensor per name.
func writeShard(t *testing.T, path string, kvs []KV, tensors ...string) {
	t.Helper()
	w := NewWriter()
	for _, kv := range kvs {
		w.Add(kv.Key, kv.Value)
	}
	for _, name := range tensors {
		if err := w.AddTensor(name, TypeF32, []uint64{1}, []byte{1, 2, 3, 4}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
}

// TestSplitErrors opens the first of three shards (or another file), each
// case spoiling one thing, and checks the one-line error.
func TestSplitErrors(t *testing.T) {
	split := func(no, count uint16, n int32) []KV {
		return []KV{{KeySplitNo, mustValue(no)}, {KeySplitCount, mustValue(count)}, {KeySplitTensors, mustValue(n)}}
	}
	first := append([]KV{{"general.architecture", mustValue("llama")}}, split(0, 3, 3)...)
	for _, c := range []struct {
		name  string
		open  string // the file opened, m-00001-of-00003.gguf when empty
		spoil func(t *testing.T, dir string)
		want  string
	}{
		{"not the first", "m-00002-of-00003.gguf", nil,
			"m-00002-of-00003.gguf: shard 2 of 3 of a split model: give the first, m-00001-of-00003.gguf"},
		{"missing shard", "", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "m-00003-of-00003.gguf")) },
			"m-00003-of-00003.gguf: no such file or directory (shard 3 of 3 of m-00001-of-00003.gguf)"},
		{"first misnamed", "renamed.gguf", func(t *testing.T, dir string) {
			os.Rename(filepath.Join(dir, "m-00001-of-00003.gguf"), filepath.Join(dir, "renamed.gguf"))
		}, "renamed.gguf: the first of 3 shards, but not named NAME-00001-of-00003.gguf"},
		{"wrong index", "", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, "m-00002-of-00003.gguf"), split(2, 3, 3), "b")
		}, `m-00002-of-00003.gguf: metadata "split.no" is 2: shard 3 of another split, not shard 2 of m-00001-of-00003.gguf`},
		{"index missing", "", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, "m-00002-of-00003.gguf"), nil, "b")
		}, `m-00002-of-00003.gguf: metadata "split.no" missing: not a shard of m-00001-of-00003.gguf`},
		{"other count", "", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, "m-00002-of-00003.gguf"), split(1, 4, 3), "b")
		}, `m-00002-of-00003.gguf: metadata "split.count" is 4: a shard of another split, not of m-00001-of-00003.gguf's 3`},
		{"duplicate tensor", "", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, "m-00003-of-00003.gguf"), split(2, 3, 3), "a")
		}, `m-00003-of-00003.gguf: tensor "a" is also in an earlier shard`},
		{"tensor count", "", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, "m-00003-of-00003.gguf"), split(2, 3, 3), "c", "d")
		}, `m-00001-of-00003.gguf: metadata "split.tensors.count" is 3, but the 3 shards hold 4 tensors`},
		{"tensor count missing", "", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, "m-00001-of-00003.gguf"), first[:3], "a")
		}, `m-00001-of-00003.gguf: metadata "split.tensors.count" missing in a model of 3 shards`},
		{"negative count", "", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, "m-00001-of-00003.gguf"), []KV{{KeySplitCount, mustValue(int32(-2))}}, "a")
		}, `m-00001-of-00003.gguf: metadata "split.count": -2 is negative`},
		{"count beyond uint16", "", func(t *testing.T, dir string) {
			writeShard(t, filepath.Join(dir, "m-00001-of-00003.gguf"), []KV{{KeySplitCount, mustValue(uint32(70000))}}, "a")
		}, `m-00001-of-00003.gguf: metadata "split.count" is 70000, more than a uint16 holds`},
		{"truncated shard", "", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "m-00002-of-00003.gguf")
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()-30)
		}, `m-00002-of-00003.gguf: tensor "b": data [`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeShard(t, filepath.Join(dir, "m-00001-of-00003.gguf"), first, "a")
			writeShard(t, filepath.Join(dir, "m-00002-of-00003.gguf"), split(1, 3, 3), "b")
			writeShard(t, filepath.Join(dir, "m-00003-of-00003.gguf"), split(2, 3, 3), "c")
			if c.spoil != nil {
				c.spoil(t, dir)
			}
			f, err := Open(filepath.Join(dir, cmpOr(c.open, "m-00001-of-00003.gguf")))
			if err == nil {
				f.Close()
				t.Fatalf("opened; want an error with %q", c.want)
			}
			if msg := err.Error(); !strings.Contains(msg, c.want) || !strings.HasPrefix(msg, "gguf: ") || strings.Contains(msg, "\n") {
				t.Errorf("error:\n%s\nwant one line with\n%s", msg, c.want)
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
