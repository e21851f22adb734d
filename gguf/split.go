package gguf

import (
	"fmt"
	"path/filepath"
	"strings"
)

// The metadata keys of a split model, as llama.cpp's gguf-split and
// gguf-py write them: every shard has split.no (uint16, 0 for the first);
// the first holds split.count (uint16) and split.tensors.count (int32, the
// tensors of all shards) besides the model's metadata. A file merged back
// by gguf-split keeps them with split.count 0: one file.
const (
	KeySplitNo      = "split.no"
	KeySplitCount   = "split.count"
	KeySplitTensors = "split.tensors.count"
)

// ShardName is the name of shard i (from 0) of n of a model whose shards
// are named from prefix, as llama.cpp names them:
// ShardName("m", 0, 3) is "m-00001-of-00003.gguf".
func ShardName(prefix string, i, n int) string {
	return prefix + shardSuffix(i, n)
}

func shardSuffix(i, n int) string { return fmt.Sprintf("-%05d-of-%05d.gguf", i+1, n) }

// openShards opens the other shards of a split model whose first shard is
// f, with llama.cpp's rules: f must be the first shard and named as one,
// the others are found by name, each must say which it is, no tensor may
// appear twice, and the shards must hold split.tensors.count tensors.
func (f *File) openShards() error {
	n, split, err := f.splitKey(KeySplitCount)
	if err != nil || !split || n <= 1 {
		return err
	}
	if n > 1<<16-1 {
		return fmt.Errorf("gguf: %s: metadata %q is %d, more than a uint16 holds", f.Path, KeySplitCount, n)
	}
	no, ok, err := f.splitKey(KeySplitNo)
	if err == nil && !ok {
		err = fmt.Errorf("gguf: %s: metadata %q missing in a model of %d shards", f.Path, KeySplitNo, n)
	}
	if err != nil {
		return err
	}
	if no != 0 {
		first := ""
		if prefix, ok := strings.CutSuffix(f.Path, shardSuffix(int(no), int(n))); ok {
			first = ", " + filepath.Base(ShardName(prefix, 0, int(n)))
		}
		return fmt.Errorf("gguf: %s: shard %d of %d of a split model: give the first%s", f.Path, no+1, n, first)
	}
	prefix, ok := strings.CutSuffix(f.Path, shardSuffix(0, int(n)))
	if !ok || filepath.Base(prefix) == "" {
		return fmt.Errorf("gguf: %s: the first of %d shards, but not named NAME%s, the name the others' are made from", f.Path, n, shardSuffix(0, int(n)))
	}
	want, ok, err := f.splitKey(KeySplitTensors)
	if err == nil && !ok {
		err = fmt.Errorf("gguf: %s: metadata %q missing in a model of %d shards", f.Path, KeySplitTensors, n)
	}
	if err != nil {
		return err
	}
	for i := 1; i < int(n); i++ {
		s, err := openFile(ShardName(prefix, i, int(n)))
		if err != nil {
			return fmt.Errorf("%w (shard %d of %d of %s)", err, i+1, n, filepath.Base(f.Path))
		}
		f.rest = append(f.rest, s) // Close releases it
		if err := f.addShard(s, i, int(n)); err != nil {
			return err
		}
	}
	if uint64(len(f.Tensors)) != want {
		return fmt.Errorf("gguf: %s: metadata %q is %d, but the %d shards hold %d tensors", f.Path, KeySplitTensors, want, n, len(f.Tensors))
	}
	return nil
}

// addShard checks that s is shard i of n and adds its tensors to f's.
func (f *File) addShard(s *File, i, n int) error {
	no, ok, err := s.splitKey(KeySplitNo)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("gguf: %s: metadata %q missing: not a shard of %s", s.Path, KeySplitNo, filepath.Base(f.Path))
	case no != uint64(i):
		return fmt.Errorf("gguf: %s: metadata %q is %d: shard %d of another split, not shard %d of %s", s.Path, KeySplitNo, no, no+1, i+1, filepath.Base(f.Path))
	}
	if c, ok, err := s.splitKey(KeySplitCount); err != nil {
		return err
	} else if ok && c != uint64(n) {
		return fmt.Errorf("gguf: %s: metadata %q is %d: a shard of another split, not of %s's %d", s.Path, KeySplitCount, c, filepath.Base(f.Path), n)
	}
	for _, t := range s.Tensors {
		if _, dup := f.tensors[t.Name]; dup {
			return fmt.Errorf("gguf: %s: tensor %q is also in an earlier shard", s.Path, t.Name)
		}
		t.shard = i
		f.tensors[t.Name] = t
		f.Tensors = append(f.Tensors, t)
	}
	f.Shards = append(f.Shards, s.Path)
	return nil
}

// splitKey returns the value of one of the split keys, any integer type
// that is not negative.
func (f *File) splitKey(key string) (uint64, bool, error) {
	if _, ok := f.Lookup(key); !ok {
		return 0, false, nil
	}
	v, err := f.Uint(key)
	return v, err == nil, err
}

// WriteShards writes the model f as shards of up to maxTensors tensors
// each, named from prefix (ShardName), as llama.cpp's gguf-split
// --split-max-tensors writes them, byte for byte: the first shard has f's
// metadata and the split keys, the others only split.no,
// split.tensors.count and split.count. It returns the shards' paths.
func WriteShards(f *File, prefix string, maxTensors int) ([]string, error) {
	if maxTensors < 1 || len(f.Tensors) == 0 {
		return nil, fmt.Errorf("gguf: split %s: %d tensors in shards of %d", f.Path, len(f.Tensors), maxTensors)
	}
	n := (len(f.Tensors) + maxTensors - 1) / maxTensors
	if n > 1<<16-1 {
		return nil, fmt.Errorf("gguf: split %s: %d shards, more than split.count can say", f.Path, n)
	}
	var paths []string
	for i := range n {
		w := NewWriter()
		if i == 0 {
			for _, kv := range f.Metadata {
				w.Add(kv.Key, kv.Value)
			}
		}
		w.Add(KeySplitNo, uint16(i))
		w.Add(KeySplitTensors, int32(len(f.Tensors)))
		w.Add(KeySplitCount, uint16(n)) // last, as gguf-split leaves it
		for _, t := range f.Tensors[i*maxTensors : min(len(f.Tensors), (i+1)*maxTensors)] {
			if err := w.AddTensor(t.Name, t.Type, t.Shape, f.Data(t)); err != nil {
				return nil, err
			}
		}
		p := ShardName(prefix, i, n)
		if err := w.WriteFile(p); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}
