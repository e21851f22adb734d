package gguf

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"ppl.dev/oracle"
)

// TestOracleModels opens every model of the oracle and checks what the
// oracle's README says about it.
func TestOracleModels(t *testing.T) {
	dir := oracle.Require(t)
	type want struct {
		arch      string
		tokens    int
		embdType  Type
		embdShape []uint64
		outType   Type // Type(^0): no output.weight (tied)
	}
	const tied = Type(^uint32(0))
	wants := map[string]want{
		"tiny-llama-spm-f16":    {"llama", 32000, TypeF16, []uint64{256, 32000}, TypeF16},
		"tiny-llama-spm-q8_0":   {"llama", 32000, TypeQ8_0, []uint64{256, 32000}, TypeQ8_0},
		"tiny-llama-spm-q4_k_m": {"llama", 32000, TypeQ4_K, []uint64{256, 32000}, TypeQ6_K},
		"tiny-qwen3-q8_0":       {"qwen3", 151669, TypeQ8_0, []uint64{64, 151669}, tied},
		"tiny-llama3-q8_0":      {"llama", 128256, TypeQ8_0, []uint64{64, 128256}, tied},
	}
	models := oracle.Models(dir)
	for m := range wants {
		if !slices.Contains(models, m) {
			t.Errorf("oracle lacks model %s (has %v)", m, models)
		}
	}
	// The oracle grows: every model must open; those the README details
	// are checked field by field.
	for _, m := range models {
		t.Run(m, func(t *testing.T) {
			path := filepath.Join(dir, "models", m+".gguf")
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Version != 3 || f.Alignment != 32 {
				t.Errorf("version %d alignment %d, want 3 and 32", f.Version, f.Alignment)
			}
			w, ok := wants[m]
			if !ok {
				return
			}
			if arch, err := f.String("general.architecture"); err != nil || arch != w.arch {
				t.Errorf("general.architecture = %q, %v; want %q", arch, err, w.arch)
			}
			toks, err := f.Strings("tokenizer.ggml.tokens")
			if err != nil || len(toks) != w.tokens {
				t.Errorf("tokenizer.ggml.tokens: %d tokens, %v; want %d", len(toks), err, w.tokens)
			}
			if types, err := f.Int32s("tokenizer.ggml.token_type"); err != nil || len(types) != w.tokens {
				t.Errorf("tokenizer.ggml.token_type: %d, %v; want %d", len(types), err, w.tokens)
			}
			emb, ok := f.Tensor("token_embd.weight")
			if !ok {
				t.Fatal("no token_embd.weight")
			}
			if emb.Type != w.embdType || !reflect.DeepEqual(emb.Shape, w.embdShape) {
				t.Errorf("token_embd.weight: %v %v, want %v %v", emb.Type, emb.Shape, w.embdType, w.embdShape)
			}
			out, ok := f.Tensor("output.weight")
			switch {
			case w.outType == tied && ok:
				t.Errorf("output.weight present in a tied model")
			case w.outType != tied && (!ok || out.Type != w.outType):
				t.Errorf("output.weight: %v, want %v", out, w.outType)
			}
			if blocks, err := f.Uint(w.arch + ".block_count"); err != nil || blocks != 2 {
				t.Errorf("%s.block_count = %d, %v; want 2", w.arch, blocks, err)
			}
			// Every tensor's data lies in the file, in order, without overlap,
			// and the data section ends at the end of the file.
			var end uint64
			for _, tn := range f.Tensors {
				if tn.Offset < end {
					t.Errorf("tensor %s at %d overlaps the previous one (ending at %d)", tn.Name, tn.Offset, end)
				}
				end = tn.Offset + tn.Size
				if d := f.Data(tn); uint64(len(d)) != tn.Size {
					t.Errorf("tensor %s: Data has %d bytes, want %d", tn.Name, len(d), tn.Size)
				}
			}
			if got := f.DataOffset + pad(end, f.Alignment); got != f.FileSize {
				t.Errorf("data section ends at %d, file size %d", got, f.FileSize)
			}
		})
	}
}

// TestOracleF16 pins the F16 model's header against values from its
// generator (tools/make_models.py) and llama.cpp's layout.
func TestOracleF16(t *testing.T) {
	dir := oracle.Require(t)
	f, err := Open(filepath.Join(dir, "models", "tiny-llama-spm-f16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	emb, _ := f.Tensor("token_embd.weight")
	if emb == nil || emb.Type != TypeF16 || !reflect.DeepEqual(emb.Shape, []uint64{256, 32000}) ||
		emb.Size != 256*32000*2 || emb.Rows() != 32000 || emb.Elements() != 256*32000 {
		t.Fatalf("token_embd.weight = %+v", emb)
	}
	norm, _ := f.Tensor("blk.0.attn_norm.weight")
	if norm == nil || norm.Type != TypeF32 || !reflect.DeepEqual(norm.Shape, []uint64{256}) || norm.Size != 1024 {
		t.Fatalf("blk.0.attn_norm.weight = %+v", norm)
	}
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	if len(toks) != 32000 || toks[0] != "<unk>" || toks[1] != "<s>" || toks[2] != "</s>" {
		t.Fatalf("tokens start %q", toks[:3])
	}
	if scores, err := f.Float32s("tokenizer.ggml.scores"); err != nil || len(scores) != 32000 {
		t.Fatalf("scores: %d, %v", len(scores), err)
	}
	if model, err := f.String("tokenizer.ggml.model"); err != nil || model != "llama" {
		t.Fatalf("tokenizer.ggml.model = %q, %v", model, err)
	}
	if eps, err := f.Float("llama.attention.layer_norm_rms_epsilon"); err != nil || eps <= 0 || eps > 1e-4 {
		t.Fatalf("rms epsilon = %v, %v", eps, err)
	}
	if bos, err := f.Int("tokenizer.ggml.bos_token_id"); err != nil || bos != 1 {
		t.Fatalf("bos = %d, %v", bos, err)
	}
	if add, err := f.Bool("tokenizer.ggml.add_bos_token"); err != nil || !add {
		t.Fatalf("add_bos_token = %v, %v", add, err)
	}
	if _, err := f.String("llama.block_count"); err == nil || !strings.Contains(err.Error(), `metadata "llama.block_count": is uint32, want string`) {
		t.Fatalf("String(block_count) error = %v", err)
	}
}

// TestOracleZoo checks the quant zoo: one 512x256 tensor per type, named
// after it, whose size follows from the type's block size.
func TestOracleZoo(t *testing.T) {
	dir := oracle.Require(t)
	f, err := Open(filepath.Join(dir, "zoo", "quant-zoo.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	for _, tn := range f.Tensors {
		names = append(names, tn.Name)
		if tn.Name != tn.Type.String() {
			t.Errorf("tensor %s has type %v", tn.Name, tn.Type)
		}
		if !reflect.DeepEqual(tn.Shape, []uint64{512, 256}) {
			t.Errorf("tensor %s shape %v", tn.Name, tn.Shape)
		}
		want := uint64(512/tn.Type.BlockSize()*tn.Type.TypeSize()) * 256
		if tn.Size != want || uint64(len(f.Data(tn))) != want {
			t.Errorf("tensor %s size %d, want %d", tn.Name, tn.Size, want)
		}
	}
	wantNames := "F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS"
	got := strings.Join(names, " ")
	for _, n := range strings.Fields(wantNames) {
		if _, ok := f.Tensor(n); !ok {
			t.Errorf("zoo lacks %s (has %s)", n, got)
		}
	}
	if len(names) != len(strings.Fields(wantNames)) {
		t.Errorf("zoo tensors %s, want %s", got, wantNames)
	}
}

// TestOracleSHA256 checks the oracle's models against models/SHA256SUMS.
func TestOracleSHA256(t *testing.T) {
	dir := oracle.Require(t)
	sums, err := os.Open(filepath.Join(dir, "models", "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer sums.Close()
	n := 0
	sc := bufio.NewScanner(sums)
	for sc.Scan() {
		want, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("bad SHA256SUMS line %q", sc.Text())
		}
		b, err := os.ReadFile(filepath.Join(dir, "models", name))
		if sum := sha256.Sum256(b); err != nil || hex.EncodeToString(sum[:]) != want {
			t.Errorf("sha256 of %s = %x, %v; want %s", name, sum, err, want)
		}
		n++
	}
	if n < 5 { // the oracle grows: at least the five it began with
		t.Errorf("%d sums, want at least 5", n)
	}
}

// TestOracleSplit splits tiny-qwen3-q8_0 into shards of 6 tensors and
// checks them against those llama.cpp 0.7.0's llama-gguf-split
// --split-max-tensors 6 writes (their sha256s), then opens them as the
// whole file.
func TestOracleSplit(t *testing.T) {
	dir := oracle.Require(t)
	whole, err := Open(filepath.Join(dir, "models", "tiny-qwen3-q8_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	paths, err := WriteShards(whole, filepath.Join(t.TempDir(), "ll"), 6)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{ // sha256sum ll-0000?-of-00004.gguf
		"aaebb753c7373b42fe2ea6f435bed51853c89d9a597eb8b97714cf9a293330a0",
		"5f4af0535ca7e200800335ff425e733d13dbf652eee426a84b3e0ad04e6035a6",
		"ac6d6adf31ff14303ed6527155963a067c1131cee189f0ffcd91b318329753cc",
		"1062f544755f8f6096f4da8d73b35c60ae933d02ec95c0716c1f36dea0aab86b",
	}
	if len(paths) != len(want) {
		t.Fatalf("%d shards, want %d", len(paths), len(want))
	}
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if sum := sha256.Sum256(b); err != nil || hex.EncodeToString(sum[:]) != want[i] {
			t.Errorf("sha256 of %s = %x, %v; want llama-gguf-split's %s", filepath.Base(p), sum, err, want[i])
		}
	}
	f, err := Open(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(f.Tensors) != len(whole.Tensors) || len(f.Shards) != 4 {
		t.Fatalf("%d tensors in %d shards, want %d in 4", len(f.Tensors), len(f.Shards), len(whole.Tensors))
	}
	for i, tn := range f.Tensors {
		if w := whole.Tensors[i]; tn.Name != w.Name || !bytes.Equal(f.Data(tn), whole.Data(w)) {
			t.Errorf("tensor %d %s: differs from the whole file's %s", i, tn.Name, w.Name)
		}
	}
}

// BenchmarkOpen opens the model with the largest vocabulary (Qwen3's 151,669
// tokens and their merges): the header parse dominates.
func BenchmarkOpen(b *testing.B) {
	dir := oracle.Require(b)
	path := filepath.Join(dir, "models", "tiny-qwen3-q8_0.gguf")
	for b.Loop() {
		f, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
