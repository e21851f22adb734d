package model

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/oracle"
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// rewriteModel writes a copy of the oracle model stem with metadata keys
// set (a nil value drops the key) and tensors dropped, and returns its
// path.
func rewriteModel(t *testing.T, dir, stem string, set map[string]any, drop ...string) string {
	return rewriteModelAdd(t, dir, stem, set, nil, drop...)
}

// f32Tensor is an F32 tensor to add to a rewritten model.
type f32Tensor struct {
	shape []uint64
	v     []float32
}

// rewriteModelAdd is rewriteModel that also adds tensors.
func rewriteModelAdd(t *testing.T, dir, stem string, set map[string]any, add map[string]f32Tensor, drop ...string) string {
	t.Helper()
	return rewriteFile(t, oracle.Model(dir, stem), set, add, drop...)
}

// rewriteFile is rewriteModelAdd of the model at path.
func rewriteFile(t *testing.T, path string, set map[string]any, add map[string]f32Tensor, drop ...string) string {
	t.Helper()
	src, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	w := gguf.NewWriter()
	for _, kv := range src.Metadata {
		if v, ok := set[kv.Key]; ok {
			if v != nil {
				w.Add(kv.Key, v)
			}
			continue
		}
		w.Add(kv.Key, kv.Value)
	}
	for _, k := range slices.Sorted(maps.Keys(set)) { // sorted: the same bytes on every run
		if _, ok := src.Lookup(k); !ok && set[k] != nil {
			w.Add(k, set[k])
		}
	}
	dropped := map[string]bool{}
	for _, d := range drop {
		dropped[d] = true
	}
	for _, tn := range src.Tensors {
		if !dropped[tn.Name] {
			if err := w.AddTensor(tn.Name, tn.Type, tn.Shape, src.Data(tn)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(add)) {
		if err := w.AddTensor(name, gguf.TypeF32, add[name].shape, f32Bytes(add[name].v)); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := w.WriteFile(out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestArchLoadErrors checks that glm4moe, deepseek2 and gpt-oss files with
// a bad key or a missing tensor are refused with an error naming it.
func TestArchLoadErrors(t *testing.T) {
	dir := oracle.Require(t)
	for _, tc := range []struct {
		name, stem string
		set        map[string]any
		drop       []string
		want       string
	}{
		{"glm4moe nextn", "tiny-glm4moe", map[string]any{"glm4moe.nextn_predict_layers": uint32(4)}, nil,
			"metadata glm4moe.nextn_predict_layers = 4 leaves no layer of 4"},
		{"glm4moe bias", "tiny-glm4moe", nil, []string{"blk.2.attn_v.bias"}, "missing tensor blk.2.attn_v.bias"},
		{"glm4moe shared expert", "tiny-glm4moe", nil, []string{"blk.1.ffn_down_shexp.weight"}, "missing tensor blk.1.ffn_down_shexp.weight"},
		{"deepseek2 shared expert", "tiny-deepseek2", nil, []string{"blk.2.ffn_gate_shexp.weight", "blk.2.ffn_up_shexp.weight", "blk.2.ffn_down_shexp.weight"},
			"missing tensor blk.2.ffn_gate_shexp.weight"},
		{"deepseek2 kv lora", "tiny-deepseek2", map[string]any{"deepseek2.attention.kv_lora_rank": nil}, nil,
			"missing metadata deepseek2.attention.kv_lora_rank"},
		{"deepseek2 rope dims", "tiny-deepseek2", map[string]any{"deepseek2.rope.dimension_count": uint32(24)}, nil,
			"metadata deepseek2.rope.dimension_count = 24: want even and below attention.key_length_mla = 24"},
		{"deepseek2 k_b", "tiny-deepseek2", nil, []string{"blk.1.attn_k_b.weight"}, "missing tensor blk.1.attn_k_b.weight"},
		{"deepseek2 groups", "tiny-deepseek2", map[string]any{"deepseek2.expert_group_count": uint32(3)}, nil,
			"moe: 16 experts in 3 groups, 2 groups used"},
		{"gpt-oss window", "tiny-gpt-oss", map[string]any{"gpt-oss.attention.sliding_window": nil}, nil,
			"missing metadata gpt-oss.attention.sliding_window"},
		{"gpt-oss sinks", "tiny-gpt-oss", nil, []string{"blk.3.attn_sinks.weight"}, "missing tensor blk.3.attn_sinks.weight"},
		{"gpt-oss expert bias", "tiny-gpt-oss", nil, []string{"blk.0.ffn_up_exps.bias"},
			"missing tensor blk.0.ffn_up_exps.bias"},
		{"gpt-oss output", "tiny-gpt-oss", nil, []string{"output.weight"}, "missing tensor output.weight"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(rewriteModel(t, dir, tc.stem, tc.set, tc.drop...), Options{})
			if err == nil {
				m.Close()
				t.Fatalf("loaded; want error %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

// plainBackend is a backend with only ml.Backend's operations.
type plainBackend struct{ ml.Backend }

// TestDeepSeek2NeedsLatent checks that a backend without the latent
// attention operations refuses deepseek2 at load, naming them.
func TestDeepSeek2NeedsLatent(t *testing.T) {
	dir := oracle.Require(t)
	dev := func(Info, Options) (ml.Backend, error) { return plainBackend{newCPU(nn.NewContext(1))}, nil }
	m, err := LoadOn(oracle.Model(dir, "tiny-deepseek2"), Options{}, dev)
	if err == nil {
		m.Close()
		t.Fatal("loaded on a backend without ml.Latent")
	}
	if want := "lacks the latent attention operations (ml.Latent: Columns, HeadLinear, LatentAttention)"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q, want it to contain %q", err, want)
	}
}
