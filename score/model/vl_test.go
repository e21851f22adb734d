package model

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ppl.dev/eval/mkmodel"
	"ppl.dev/gguf"
	"ppl.dev/oracle"
)

// archFile writes a copy of genModel's model at path, of architecture from,
// as architecture to: general.architecture set to to, every "from." key
// renamed "to." in place, then the keys add appended in their order (so
// the bytes, and their sha256, are the same on every run). It returns the
// copy's path.
func archFile(t *testing.T, path, from, to string, add ...gguf.KV) string {
	t.Helper()
	src, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	w := gguf.NewWriter()
	for _, kv := range src.Metadata {
		switch rest, ok := strings.CutPrefix(kv.Key, from+"."); {
		case kv.Key == "general.architecture":
			w.Add(kv.Key, to)
		case ok:
			w.Add(to+"."+rest, kv.Value)
		default:
			w.Add(kv.Key, kv.Value)
		}
	}
	for _, kv := range add {
		w.Add(kv.Key, kv.Value)
	}
	for _, tn := range src.Tensors {
		if err := w.AddTensor(tn.Name, tn.Type, tn.Shape, src.Data(tn)); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), to+".gguf")
	if err := w.WriteFile(out); err != nil {
		t.Fatal(err)
	}
	return out
}

// kv is a metadata entry for archFile.
func kv(t *testing.T, key string, v any) gguf.KV {
	t.Helper()
	val, err := gguf.NewValue(v)
	if err != nil {
		t.Fatal(err)
	}
	return gguf.KV{Key: key, Value: val}
}

// vlHead128 gives a model Qwen-VL's head size of 128 (4 heads, 2 KV
// heads), so that Qwen3-VL's rope.dimension_sections apply unscaled.
func vlHead128(s *mkmodel.Shape) { s.HeadDim = 128 }

// vlMoE gives a qwen3moe model 4 experts of 64, 2 used, and heads of 128.
func vlMoE(s *mkmodel.Shape) { s.Experts, s.ExpertsUsed, s.ExpertFFN, s.HeadDim = 4, 2, 64, 128 }

// TestGeneratedVL holds the text decoders of Qwen's vision-language files
// to llama.cpp 0.7.0 as TestGeneratedLlama holds the architectures the
// oracle has no model of (the oracle's tools/oracle.cpp, F16 cache, n_ctx
// 128, the first windows of en-gpl3), on genModel's qwen2, qwen3 and
// qwen3moe files rewritten by archFile as qwen2vl, qwen3vl and qwen3vlmoe
// with rope.dimension_sections (and qwen3vl's 3 deepstack layers): each
// case pins the VL file's sha256 and llama.cpp's sums on it and on its
// plain twin, and the VL file scores bit for bit as its twin in our code
// exactly where llama.cpp gives the two the same sums. The cases:
// Qwen2.5-VL's [16, 24, 24, 0] scaled to heads of 32 (MRoPE: every pair
// turns, yet not the twin's figures: llama.cpp 0.7.0's qwen2vl norms with
// epsilon 0); MRoPE with an e section (pairs 14 and 15 unturned);
// Qwen3-VL's [24, 20, 20, 0] at its head size of 128 (IMRoPE leaves pairs
// 61 and 62 unturned: 0.17 to 0.23 per window off the twin), and
// scaled to [6, 5, 5, 0] at 32 (every pair turns: the twin's figures in
// both); one integer for the 4 sections, as llama.cpp reads it (pairs 12
// to 15 unturned); qwen3vlmoe at 128.
func TestGeneratedVL(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	tokens := golden.Header.Tokens
	for _, c := range []struct {
		name, base, arch string
		set              func(*mkmodel.Shape)
		sections, deep   any // rope.dimension_sections, n_deepstack_layers (nil: not written)
		sha256           string
		sums, twin       []float64 // llama.cpp's on the VL file and on the twin
	}{
		{"qwen2vl", "qwen2", "qwen2vl", nil, []int32{4, 6, 6, 0}, nil,
			"947be278398110ebc2e497ca1e3db5c1c5821d6c4a839ad635c7868232242074",
			[]float64{-1616.0639190, -807.6177144, -795.6874309, -768.0420581},
			[]float64{-1616.1015052, -807.4485092, -795.4727307, -767.9573772}},
		{"qwen2vl-e", "qwen2", "qwen2vl", nil, []int32{4, 6, 4, 2}, nil,
			"b2ab59e6864772c4e87a016df0310447173b0567ec5ba402eebdf34623e24476",
			[]float64{-1615.8651062, -807.5932163, -795.3830533, -768.0228450},
			[]float64{-1616.1015052, -807.4485092, -795.4727307, -767.9573772}},
		{"qwen3vl", "qwen3", "qwen3vl", vlHead128, []int32{24, 20, 20, 0}, uint32(3),
			"7365c892c2226caf02f673c0c620bbf8531b65e70672be0dff76d2597e0fc144",
			[]float64{-1616.9219260, -795.4741443, -803.7973899, -757.1545833},
			[]float64{-1616.6883513, -795.6526830, -803.6024293, -757.3196889}},
		{"qwen3vl-scaled", "qwen3", "qwen3vl", nil, []int32{6, 5, 5, 0}, uint32(3),
			"586b31205e72ca563ce00c6342de01d0b66a63efbd3db2dccd33b122c65ea017",
			[]float64{-1621.3659837, -802.3344793, -797.2110999, -771.0446711},
			[]float64{-1621.3659837, -802.3344793, -797.2110999, -771.0446711}},
		{"qwen3vl-scalar", "qwen3", "qwen3vl", nil, int32(4), nil,
			"3a6cc25269ca7762574406212e00f5a92fe13488f057b4dc03ff34777a6e2855",
			[]float64{-1622.3093759, -802.5312180, -796.6776805, -770.9653863},
			[]float64{-1621.3659837, -802.3344793, -797.2110999, -771.0446711}},
		{"qwen3vlmoe", "qwen3moe", "qwen3vlmoe", vlMoE, []int32{24, 20, 20, 0}, uint32(3),
			"1dc570ec32b1bcdf352d2457a8be8d44df4ba7d1fee612913c5341e7ee3a4d0f",
			[]float64{-1610.2903562, -768.4717347, -801.1916546, -771.8627144},
			[]float64{-1610.0305500, -768.6541733, -801.3145318, -771.9050920}},
	} {
		t.Run(c.name, func(t *testing.T) {
			twin := genModel(t, dir, c.base, c.set)
			var add []gguf.KV
			if c.sections != nil {
				add = append(add, kv(t, c.arch+".rope.dimension_sections", c.sections))
			}
			if c.deep != nil {
				add = append(add, kv(t, c.arch+".n_deepstack_layers", c.deep))
			}
			path := archFile(t, twin, c.base, c.arch, add...)
			checkSHA(t, path, c.sha256)
			vl, _ := generatedScores(t, path, tokens, c.sums)
			plain, _ := generatedScores(t, twin, tokens, c.twin)
			same := slices.EqualFunc(vl, plain, slices.Equal[[]float64])
			if want := slices.Equal(c.sums, c.twin); same != want {
				t.Errorf("the VL file scores as its twin: %v; in llama.cpp: %v", same, want)
			}
		})
	}
}

// TestVLRefused: a VL file whose rope.dimension_sections llama.cpp 0.7.0
// refuses at load (missing, not 4 values, not integers) or aborts on
// (summing beyond the head, none of the first 3 above 0), or that has a
// count below 0, or whose RoPE does not cover the head (llama.cpp asserts
// n_rot = head size), or with a n_deepstack_layers that is no integer, is
// refused with a one-line error naming the key.
func TestVLRefused(t *testing.T) {
	dir := oracle.Require(t)
	qwen2vl := archFile(t, genModel(t, dir, "qwen2", nil), "qwen2", "qwen2vl", kv(t, "qwen2vl.rope.dimension_sections", []int32{4, 6, 6, 0}))
	qwen3vl := archFile(t, genModel(t, dir, "qwen3", nil), "qwen3", "qwen3vl", kv(t, "qwen3vl.rope.dimension_sections", []int32{6, 5, 5, 0}))
	qwen3vlmoe := archFile(t, genModel(t, dir, "qwen3moe", vlMoE), "qwen3moe", "qwen3vlmoe", kv(t, "qwen3vlmoe.rope.dimension_sections", []int32{24, 20, 20, 0}))
	const secs = ".rope.dimension_sections"
	for _, c := range []struct {
		name, path, key string
		v               any
		want            string
	}{
		{"qwen2vl missing", qwen2vl, "qwen2vl" + secs, nil, "missing metadata qwen2vl.rope.dimension_sections"},
		{"qwen3vl missing", qwen3vl, "qwen3vl" + secs, nil, "missing metadata qwen3vl.rope.dimension_sections"},
		{"qwen3vlmoe missing", qwen3vlmoe, "qwen3vlmoe" + secs, nil, "missing metadata qwen3vlmoe.rope.dimension_sections"},
		{"3 sections", qwen3vl, "qwen3vl" + secs, []int32{6, 5, 5}, "metadata qwen3vl.rope.dimension_sections has 3 values, want 4"},
		{"float sections", qwen3vl, "qwen3vl" + secs, []float32{6, 5, 5, 0},
			`metadata "qwen3vl.rope.dimension_sections": is array of float32, want array of int32`},
		{"beyond the head", qwen2vl, "qwen2vl" + secs, []int32{16, 10, 10, 0},
			"metadata qwen2vl.rope.dimension_sections = [16 10 10 0]: want counts of rotary pairs, none below 0, one of the first 3 above 0, summing to at most the head size 32"},
		{"no t, h, w", qwen3vlmoe, "qwen3vlmoe" + secs, []int32{0, 0, 0, 4}, "metadata qwen3vlmoe.rope.dimension_sections = [0 0 0 4]: want"},
		{"negative", qwen3vl, "qwen3vl" + secs, []int32{8, 8, 8, -8}, "metadata qwen3vl.rope.dimension_sections = [8 8 8 -8]: want"},
		{"partial rope", qwen2vl, "qwen2vl.rope.dimension_count", uint32(16), "metadata qwen2vl.rope.dimension_count = 16, want the head size 32"},
		{"deepstack", qwen3vl, "qwen3vl.n_deepstack_layers", "3", `metadata "qwen3vl.n_deepstack_layers": is string`},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := Load(rewriteFile(t, c.path, map[string]any{c.key: c.v}, nil), Options{})
			if err == nil {
				m.Close()
				t.Fatalf("loaded; want error %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q, want one line containing %q", err, c.want)
			}
		})
	}
}
