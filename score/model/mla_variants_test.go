package model

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/oracle"
)

// mlaVariant writes the oracle's tiny-deepseek2 as architecture arch
// (general.architecture and every deepseek2. key renamed), with the keys
// set (named without the architecture) and, for the sparse-attention
// architectures, a lightning indexer of 4 heads of 64 per layer (random
// F32 tensors, seed 1; top_k from set; none when set's "indexer" is
// false). The bytes are the same on every run.
func mlaVariant(t *testing.T, dir, arch string, set map[string]any) string {
	t.Helper()
	path := oracle.Model(dir, "tiny-deepseek2")
	src, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	all := map[string]any{"general.architecture": arch}
	for _, kv := range src.Metadata {
		if rest, ok := strings.CutPrefix(kv.Key, "deepseek2."); ok && arch != "deepseek2" {
			all[kv.Key], all[arch+"."+rest] = nil, kv.Value
		}
	}
	const heads, dim, qlora, embd = 4, 64, 32, 64
	dsa := arch == "deepseek32" || arch == "glm-dsa"
	if dsa {
		all[arch+".attention.indexer.head_count"] = uint32(heads)
		all[arch+".attention.indexer.key_length"] = uint32(dim)
	}
	for k, v := range set {
		if k != "indexer" {
			all[arch+"."+k] = v
		}
	}
	var add map[string]f32Tensor
	if dsa && set["indexer"] == nil {
		rng := rand.New(rand.NewPCG(1, 0))
		add = map[string]f32Tensor{}
		tensor := func(name string, scale, bias float32, shape ...uint64) {
			n := uint64(1)
			for _, d := range shape {
				n *= d
			}
			v := make([]float32, n)
			for i := range v {
				v[i] = bias + scale*float32(rng.NormFloat64())
			}
			add[name] = f32Tensor{shape, v}
		}
		for i := range 3 {
			p := "blk." + string(rune('0'+i)) + ".indexer."
			tensor(p+"attn_q_b.weight", 0.2, 0, qlora, heads*dim)
			tensor(p+"attn_k.weight", 0.2, 0, embd, dim)
			tensor(p+"k_norm.weight", 0.1, 1, dim)
			tensor(p+"k_norm.bias", 0.1, 0, dim)
			tensor(p+"proj.weight", 0.2, 0, embd, heads)
		}
	}
	out := rewriteFile(t, path, all, add)
	renamed := filepath.Join(filepath.Dir(out), arch+".gguf")
	if err := os.Rename(out, renamed); err != nil {
		t.Fatal(err)
	}
	return renamed
}

// TestMLAVariants holds deepseek2's relatives and options to llama.cpp
// 0.7.0 on mlaVariant's files (the oracle's tools/oracle.cpp, its default
// F16 cache and flash attention, n_ctx 256; the first 4 windows of
// golden-archs' en-gpl3 of tiny-deepseek2): the sums of log-probs of the
// int8 mode with an f16 cache within 1.5e-6 per window of llama.cpp's, as
// TestArchsF16Cache holds deepseek2 itself. The cases:
//   - deepseek2 with Mistral Large 3's attention temperature (β 0.5 every
//     64 positions: llama.cpp's figures leave deepseek2's from position 64
//     on, by up to 9.7 per window);
//   - deepseek2 without rope.scaling.yarn_log_multiplier (llama.cpp then
//     keeps YaRN's magnitude in cos and sin and scales the scores by it:
//     glm-dsa's figures, since glm-dsa never reads the key);
//   - deepseek2 with one NextN block of its 3 (llama.cpp runs 2 layers);
//   - expert_gating_func 0 (none): deepseek2's softmax, glm-dsa's sigmoid;
//   - mistral4, with the temperature: deepseek2's figures;
//   - deepseek32 with top_k 2048: deepseek2's figures, the indexer
//     selecting every key of a window of 256;
//   - glm-dsa (YaRN's magnitude kept, as without a log multiplier);
//   - top_k 64, so that rows from 64 on attend to the 64 keys their
//     indexer chooses: deepseek32, glm-dsa, and glm-dsa whose layer 1
//     reuses layer 0's keys (attention.indexer.types [1, 0, 1]). Over 12
//     windows of each oracle text (4 of mixed-unicode) these are
//     llama.cpp's to 5.4e-8 per token, in both of its CPU builds; they
//     depend on the keys' f16 rounding after the Hadamard rotation, on
//     ggml's TOP_K among the many tied scores of 0, and on glm-dsa's key
//     norm having no epsilon.
func TestMLAVariants(t *testing.T) {
	dir := oracle.Require(t)
	f, err := oracle.Read(filepath.Join(dir, "golden-archs", "tiny-deepseek2__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	wins := make([]window, 4)
	for i := range wins {
		w := f.Windows[i]
		wins[i] = window{w.Begin, w.End, w.ScoreFrom}
	}
	temp := map[string]any{"attention.temperature_scale": float32(0.5), "attention.temperature_length": uint32(64)}
	dsa := map[string]any{"attention.indexer.top_k": uint32(2048)}
	for _, c := range []struct {
		name, arch string
		set        map[string]any
		sha256     string
		sums       []float64
	}{
		{"temperature", "deepseek2", temp, "cf7fffe590352c4650afc7737a09bbf9226c32adaf661c4a9c841b6f5bd79317",
			[]float64{-3136.8791111, -1572.6422244, -1621.4737565, -1585.0639940}},
		{"nextn", "deepseek2", map[string]any{"nextn_predict_layers": uint32(1)}, "76010ba468d5185c5fc48f2d65ab2b324da680666f1c1d84b71f988a4fd53143",
			[]float64{-3158.9253349, -1575.0839518, -1637.7677177, -1571.5689634}},
		{"no log multiplier", "deepseek2", map[string]any{"rope.scaling.yarn_log_multiplier": nil},
			"ca0e3201da4da827cd603aaef8163e60d26627ca14708cec41b765364be2ba55",
			[]float64{-3142.5126475, -1562.0596286, -1639.3850109, -1573.0723539}},
		{"gating none", "deepseek2", map[string]any{"expert_gating_func": uint32(0)}, "44ba13b2d31c0c54fdd4768726dbeef91fc5d2a1d3b66cdfb3a60a9e1ae453ba",
			[]float64{-3118.3391605, -1570.6210746, -1623.4227263, -1586.8426784}},
		{"mistral4", "mistral4", temp, "8ad018b2560a9e873c246c81469d1fd768f29822d33fa2ead74a86906b3ec999",
			[]float64{-3136.8791111, -1572.6422244, -1621.4737565, -1585.0639940}},
		{"deepseek32", "deepseek32", dsa, "17d42c7fa456cfbc582b8ef2d7fac993f4c2aab9a09264406c491385a231420b",
			[]float64{-3133.1720651, -1569.8469738, -1631.1524528, -1583.3428023}},
		{"glm-dsa", "glm-dsa", dsa, "f88aebab075d3d03081705f7181f46a3e826ced016bb40044fc36cb8b4282eb1",
			[]float64{-3142.5126475, -1562.0596286, -1639.3850109, -1573.0723539}},
		{"deepseek32 sparse", "deepseek32", map[string]any{"attention.indexer.top_k": uint32(64)},
			"1b1cf733a15d0fb6983ed0278b6782523720925c7867444b98083d5b0b99d0c5",
			[]float64{-3126.1798658, -1579.5998722, -1623.7349984, -1568.1520844}},
		{"glm-dsa sparse", "glm-dsa", map[string]any{"attention.indexer.top_k": uint32(64)},
			"7d426471089dc932b9b5d9793150fc1bb1083b0dc409573a64b45009f9f935dd",
			[]float64{-3127.7140051, -1558.0264463, -1611.3189008, -1561.4937830}},
		{"glm-dsa shared indexer", "glm-dsa", map[string]any{"attention.indexer.top_k": uint32(64), "attention.indexer.types": []int32{1, 0, 1}},
			"83e7c594e0fa3f4b1500e5137d2dcaf2a00e9bb92572392677a5b725d4754487",
			[]float64{-3138.0426357, -1574.4759902, -1626.6931314, -1554.1012693}},
		{"glm-dsa gating none", "glm-dsa", map[string]any{"attention.indexer.top_k": uint32(2048), "expert_gating_func": uint32(0)}, "d20bcbccbf610da2b3ced6f8ebde7d1866a47abf39c741ec75c919fc33c4c1e3",
			[]float64{-3142.5126475, -1562.0596286, -1639.3850109, -1573.0723539}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := mlaVariant(t, dir, c.arch, c.set)
			checkSHA(t, path, c.sha256)
			m, err := Load(path, Options{KVDtype: "f16", Activations: ActInt8})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			scoreSums(t, m, c.name, f.Header.Tokens, wins, c.sums, 1.5e-6)
		})
	}
	// glm-dsa's key norm has no epsilon: with deepseek32's 1e-6, one key
	// of one row of the first window of code-go-strings changes.
	t.Run("glm-dsa sparse, code", func(t *testing.T) {
		code, err := oracle.Read(filepath.Join(dir, "golden-archs", "tiny-deepseek2__code-go-strings__sliding.ndjson"))
		if err != nil {
			t.Fatal(err)
		}
		m, err := Load(mlaVariant(t, dir, "glm-dsa", map[string]any{"attention.indexer.top_k": uint32(64)}), Options{KVDtype: "f16", Activations: ActInt8})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		scoreSums(t, m, "glm-dsa sparse, code", code.Header.Tokens, []window{{0, 256, 1}, {128, 384, 256}}, []float64{-3154.9569034, -1524.1366231}, 1.5e-6)
	})
}

// TestMLARefused: files llama.cpp refuses or aborts on, and a window past
// the lightning indexer's top_k in a file without the indexer, give a
// one-line error naming the key or the limit.
func TestMLARefused(t *testing.T) {
	dir := oracle.Require(t)
	for _, c := range []struct {
		name, arch string
		set        map[string]any
		want       string
	}{
		{"temperature without its step", "deepseek2", map[string]any{"attention.temperature_scale": float32(0.5)},
			"needs deepseek2.attention.temperature_length"},
		{"temperature step 0", "mistral4", map[string]any{"attention.temperature_scale": float32(0.5), "attention.temperature_length": uint32(0)},
			"needs mistral4.attention.temperature_length > 0"},
		{"every layer NextN", "deepseek2", map[string]any{"nextn_predict_layers": uint32(3)},
			"deepseek2.nextn_predict_layers = 3 leaves no layer of 3"},
		{"no top_k", "deepseek32", nil, "missing metadata deepseek32.attention.indexer.top_k"},
		{"top_k 0", "glm-dsa", map[string]any{"attention.indexer.top_k": uint32(0)}, "glm-dsa.attention.indexer.top_k = 0, want > 0"},
		{"keys of 48", "deepseek32", map[string]any{"attention.indexer.top_k": uint32(64), "attention.indexer.key_length": uint32(48)},
			"deepseek32.attention.indexer.key_length = 48: the indexer's Hadamard rotation needs a power of 2 of at least 64"},
		{"keys of 32", "glm-dsa", map[string]any{"attention.indexer.top_k": uint32(64), "attention.indexer.key_length": uint32(32)},
			"glm-dsa.attention.indexer.key_length = 32: the indexer's Hadamard rotation needs a power of 2 of at least 64"},
		{"shared first layer", "glm-dsa", map[string]any{"attention.indexer.top_k": uint32(64), "attention.indexer.types": []int32{0, 1, 1}},
			"glm-dsa.attention.indexer.types: layer 0 must run its indexer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(mlaVariant(t, dir, c.arch, c.set), Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("got %v, want a line with %q", err, c.want)
			}
		})
	}
	t.Run("window past top_k without an indexer", func(t *testing.T) {
		m, err := Load(mlaVariant(t, dir, "glm-dsa", map[string]any{"attention.indexer.top_k": uint32(64), "indexer": false}), Options{KVDtype: "f16", Activations: ActInt8})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		tokens := make([]int32, 65)
		if _, err := m.Score(tokens[:64], 1); err != nil {
			t.Errorf("a window of 64: %v", err)
		}
		want := "glm-dsa: a window of 65 tokens, past the lightning indexer's top_k 64, needs the indexer, which the file lacks"
		if _, err := m.Score(tokens, 1); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a window of 65: %v, want %q", err, want)
		}
		// Loaded for a context of 65, refused at load.
		_, err = Load(mlaVariant(t, dir, "glm-dsa", map[string]any{"attention.indexer.top_k": uint32(64), "indexer": false}), Options{Context: 65})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a context of 65: %v, want %q", err, want)
		}
	})
}
