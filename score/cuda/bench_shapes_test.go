package cuda

import (
	"fmt"
	"slices"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/score/model"
)

// gpt-oss-20b- and Gemma-3-27B-shaped synthetic models for TestBenchmark
// (bench_test.go), made from a seed on the device like the others: their
// skeleton's matrices are F16 (the experts too: the real gpt-oss's MXFP4
// experts would only change the host-side load, which the synthetic path
// skips; the device holds bf16 copies either way), vectors F32. Biases are
// zeros (read from the file's hole), norms and gpt-oss's attention sinks
// ones (PrepareVector). Both take the tensor-core attention kernel, on
// their sliding-window layers too (which skips the key tiles below a
// window) and with gpt-oss's sinks.
//
// Hyperparameters from the models' config.json (Hugging Face) as
// llama.cpp's converter writes them:
//   - gpt-oss-20b: 24 layers, 2880 wide, 64 query heads and 8 KV heads of
//     64, 32 experts of width 2880 with 4 per token (router and experts
//     with biases), a 128-key sliding window on even layers, attention
//     sinks, RoPE base 150,000 with YaRN (factor 32 over 4,096), RMS eps
//     1e-5, vocabulary 201,088, untied head.
//   - gemma3-27b: 62 layers, 5376 wide, 32 heads and 16 KV heads of 128,
//     FFN 21,504 (GeGLU), a 1,024-key sliding window on 5 of every 6
//     layers (RoPE base 10,000) and global ones (1e6, linear factor 8),
//     RMS eps 1e-6, vocabulary 262,144, tied head; no final soft-cap
//     (final_logit_softcapping is null for Gemma 3, so the file has no key).
//
// Model FLOPs at 4096/2048 (slidingFLOPs, printed by
// TestBenchmarkShapesSim): gpt-oss-20b 24.8 TFLOP linear, 1.75 attention,
// 2.4 head; gemma3-27b 209.7 linear, 4.5 attention, 5.8 head. At half the
// H200's bf16 peak (about 500 TFLOP/s) that is 0.06 s and 0.44 s a window
// (when these were on the plain kernel, its attention on the CUDA cores
// added as much again or more). Both run in the default list at 4096/2048
// only (maxContext), for check.sh's budget; Gemma 3 at 32768/16384 is
// about 1.8 PFLOP a window.

// slidingDims is the attention pattern of a sliding-window benchShape:
// layer i attends to the last window keys when i%period < period-1, to
// all of them otherwise.
type slidingDims struct{ window, period int }

// slidingBench holds the patterns of the sliding-window benchShapes, by name.
var slidingBench = map[string]slidingDims{}

func init() {
	gptoss := benchShape{"gpt-oss-20b", model.HParams{Arch: "gpt-oss", Embd: 2880, Layers: 24, FFN: 2880, Heads: 64, KVHeads: 8,
		HeadDim: 64, ValueDim: 64, Vocab: 201088, CtxTrain: 131072, Eps: 1e-5}, false,
		&model.MoEParams{Experts: 32, Used: 4, FFN: 2880}, 4096}
	gemma3 := benchShape{"gemma3-27b", model.HParams{Arch: "gemma3", Embd: 5376, Layers: 62, FFN: 21504, Heads: 32, KVHeads: 16,
		HeadDim: 128, ValueDim: 128, Vocab: 262144, CtxTrain: 131072, Eps: 1e-6}, true, nil, 4096}
	benchShapes = append(benchShapes, gptoss, gemma3)
	slidingBench[gptoss.name] = slidingDims{window: 128, period: 2}
	slidingBench[gemma3.name] = slidingDims{window: 1024, period: 6}
	archFLOPs["gpt-oss"] = slidingFLOPs
	archFLOPs["gemma3"] = slidingFLOPs
}

// slidingDimsOf finds the pattern of hp among slidingBench's (by
// architecture, width and depth).
func slidingDimsOf(hp model.HParams) slidingDims {
	for _, s := range benchShapes {
		if d, ok := slidingBench[s.name]; ok && s.hp.Arch == hp.Arch && s.hp.Embd == hp.Embd && s.hp.Layers == hp.Layers {
			return d
		}
	}
	if hp.Arch == "gpt-oss" {
		return slidingDims{window: 128, period: 2}
	}
	return slidingDims{window: 1024, period: 6}
}

// slidingFLOPs is transformerFLOPs with causal attention over each layer's
// keys: min(i+1, window) for query i on the sliding layers.
func slidingFLOPs(hp model.HParams, n, scored int) (linear, attn, head float64) {
	linear, _, head = transformerFLOPs(hp, n, scored)
	d := slidingDimsOf(hp)
	N, W := float64(n), float64(d.window)
	full := N * (N + 1) / 2
	win := full
	if d.window < n {
		win = W*(W+1)/2 + (N-W)*W
	}
	per := 2 * 2 * float64(hp.HeadDim) * float64(hp.Heads)
	for i := range hp.Layers {
		if i%d.period < d.period-1 {
			attn += per * win
		} else {
			attn += per * full
		}
	}
	return linear, attn, head
}

// writeSkeletonSliding writes a gpt-oss or gemma3 GGUF file of shape s
// (matrices F16, or typ(name) when typ is not nil; the router and vectors
// F32) whose tensor data are zeros left as a hole (writeSkeleton).
func writeSkeletonSliding(path string, s benchShape, d slidingDims, typ func(name string) gguf.Type) error {
	hp, arch := s.hp, s.hp.Arch
	w := gguf.NewWriter()
	w.Add("general.architecture", arch)
	w.Add("general.name", "synthetic "+s.name)
	kv := map[string]any{
		"embedding_length": uint32(hp.Embd), "block_count": uint32(hp.Layers), "feed_forward_length": uint32(hp.FFN),
		"attention.head_count": uint32(hp.Heads), "attention.head_count_kv": uint32(hp.KVHeads),
		"attention.key_length": uint32(hp.HeadDim), "attention.value_length": uint32(hp.HeadDim),
		"attention.layer_norm_rms_epsilon": float32(hp.Eps), "context_length": uint32(max(hp.CtxTrain, 1)),
		"attention.sliding_window": uint32(d.window),
	}
	switch arch {
	case "gpt-oss":
		if d.period != 2 {
			return fmt.Errorf("%s: gpt-oss slides on even layers (period 2), not %d", s.name, d.period)
		}
		kv["rope.freq_base"] = float32(150000)
		kv["rope.scaling.type"] = "yarn"
		kv["rope.scaling.factor"] = float32(32)
		kv["rope.scaling.original_context_length"] = uint32(4096)
		kv["rope.scaling.yarn_beta_fast"] = float32(32)
		kv["rope.scaling.yarn_beta_slow"] = float32(1)
		m := s.moe
		if m == nil {
			return fmt.Errorf("%s: gpt-oss needs its experts", s.name)
		}
		kv["expert_count"], kv["expert_used_count"], kv["expert_feed_forward_length"] = uint32(m.Experts), uint32(m.Used), uint32(m.FFN)
	case "gemma3":
		kv["rope.freq_base"] = float32(1e6)
		kv["rope.freq_base_swa"] = float32(10000)
		kv["rope.scaling.type"] = "linear"
		kv["rope.scaling.factor"] = float32(8)
		if d.period != 6 { // llama.cpp's default, absent from the real files
			kv["attention.sliding_window_pattern"] = uint32(d.period)
		}
	default:
		return fmt.Errorf("%s: no sliding-window skeleton for architecture %q", s.name, arch)
	}
	for k, v := range kv {
		w.Add(arch+"."+k, v)
	}
	sk := newSkeleton(w, typ)
	add := sk.add
	E, V, H := uint64(hp.Embd), uint64(hp.Vocab), uint64(hp.Heads)
	qd, kvd, hd := uint64(hp.Heads*hp.HeadDim), uint64(hp.KVHeads*hp.HeadDim), uint64(hp.HeadDim)
	add("token_embd.weight", gguf.TypeF16, E, V)
	add("output_norm.weight", gguf.TypeF32, E)
	if !s.tied {
		add("output.weight", gguf.TypeF16, E, V)
	}
	for i := range hp.Layers {
		b := fmt.Sprintf("blk.%d.", i)
		add(b+"attn_norm.weight", gguf.TypeF32, E)
		add(b+"attn_q.weight", gguf.TypeF16, E, qd)
		add(b+"attn_k.weight", gguf.TypeF16, E, kvd)
		add(b+"attn_v.weight", gguf.TypeF16, E, kvd)
		add(b+"attn_output.weight", gguf.TypeF16, qd, E)
		if arch == "gpt-oss" {
			N, F := uint64(s.moe.Experts), uint64(s.moe.FFN)
			add(b+"attn_q.bias", gguf.TypeF32, qd)
			add(b+"attn_k.bias", gguf.TypeF32, kvd)
			add(b+"attn_v.bias", gguf.TypeF32, kvd)
			add(b+"attn_output.bias", gguf.TypeF32, E)
			add(b+"attn_sinks.weight", gguf.TypeF32, H)
			add(b+"post_attention_norm.weight", gguf.TypeF32, E)
			add(b+"ffn_gate_inp.weight", gguf.TypeF32, E, N)
			add(b+"ffn_gate_inp.bias", gguf.TypeF32, N)
			add(b+"ffn_gate_exps.weight", gguf.TypeF16, E, F, N)
			add(b+"ffn_gate_exps.bias", gguf.TypeF32, F, N)
			add(b+"ffn_up_exps.weight", gguf.TypeF16, E, F, N)
			add(b+"ffn_up_exps.bias", gguf.TypeF32, F, N)
			add(b+"ffn_down_exps.weight", gguf.TypeF16, F, E, N)
			add(b+"ffn_down_exps.bias", gguf.TypeF32, E, N)
			continue
		}
		add(b+"attn_q_norm.weight", gguf.TypeF32, hd)
		add(b+"attn_k_norm.weight", gguf.TypeF32, hd)
		sk.gemmaFFN(b, E, uint64(hp.FFN))
	}
	return sk.write(path)
}

// gemmaFFN adds a Gemma layer's norm after attention and its GeGLU FFN
// with the norms around it (gemma3, gemma4).
func (sk *skeleton) gemmaFFN(b string, E, F uint64) {
	sk.add(b+"post_attention_norm.weight", gguf.TypeF32, E)
	sk.add(b+"ffn_norm.weight", gguf.TypeF32, E)
	sk.ffn(b, E, F)
	sk.add(b+"post_ffw_norm.weight", gguf.TypeF32, E)
}

// checkSynthetic runs benchRun on a small synthetic model (96 tokens, 48
// scored) and checks its result, then scores n tokens and checks that
// every log-prob is in the scale of real models' (the seeded weights keep
// the activations there).
func checkSynthetic(t *testing.T, e *Engine, m *Model, n int) benchResult {
	t.Helper()
	var r benchResult
	if err := benchRun(t, e, m, 96, 48, 2, &r); err != nil {
		t.Fatal(err)
	}
	if r.TokensPerSec <= 0 || r.ModelTFLOPs <= 0 || r.PeakAllocGiB <= 0 || !(r.AttnFLOPShare > 0) {
		t.Errorf("result %+v", r)
	}
	res, err := m.Score(make([]int32, n), 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, lp := range res.Logprobs {
		if !(lp < 0) || lp < -20 {
			t.Fatalf("target %d: log p %v: synthetic activations out of scale", i, lp)
		}
	}
	return r
}

// simBenchModel registers the small shape s with its family's dims d (in
// dims) for the test's duration and loads it on e as a synthetic model,
// closed at the test's end.
func simBenchModel[D any](t *testing.T, e *Engine, s benchShape, dims map[string]D, d D) *Model {
	t.Helper()
	dims[s.name] = d
	benchShapes = append(benchShapes, s)
	t.Cleanup(func() {
		benchShapes = slices.DeleteFunc(benchShapes, func(b benchShape) bool { return b.name == s.name })
		delete(dims, s.name)
	})
	m, err := syntheticModel(e, s, Mixed, "bf16", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// Small gpt-oss and gemma3 synthetic models load, run on the emulation and
// score in the scale of the others (the benchmark's path without a GPU),
// with windows shorter than the scored window so that both kinds of layer
// run; the FLOP counts of the benchmark's shapes are logged.
func TestBenchmarkShapesSim(t *testing.T) {
	e := simEngine()
	for _, c := range []struct {
		s benchShape
		d slidingDims
	}{
		{benchShape{"tiny-gpt-oss", model.HParams{Arch: "gpt-oss", Embd: 64, Layers: 2, FFN: 64, Heads: 4, KVHeads: 2, HeadDim: 16,
			ValueDim: 16, Vocab: 1000, CtxTrain: 131072, Eps: 1e-5}, false, &model.MoEParams{Experts: 8, Used: 2, FFN: 32}, 0},
			slidingDims{window: 16, period: 2}},
		{benchShape{"tiny-gemma3", model.HParams{Arch: "gemma3", Embd: 64, Layers: 3, FFN: 128, Heads: 2, KVHeads: 1, HeadDim: 32,
			ValueDim: 32, Vocab: 1000, CtxTrain: 131072, Eps: 1e-6}, true, nil, 0},
			slidingDims{window: 16, period: 3}},
	} {
		t.Run(c.s.hp.Arch, func(t *testing.T) {
			m := simBenchModel(t, e, c.s, slidingBench, c.d)
			if m.HP.Arch != c.s.hp.Arch || m.HP.Layers != c.s.hp.Layers || (c.s.moe != nil) != (m.HP.MoE != nil) {
				t.Fatalf("loaded %+v", m.HP)
			}
			checkSynthetic(t, e, m, 64)
			// the windowed count: 96 keys, window 16, one full layer
			_, att, _ := windowFLOPs(m.HP, 96, 48)
			per := 2 * 2 * float64(c.s.hp.HeadDim*c.s.hp.Heads)
			sliding := c.s.hp.Layers - c.s.hp.Layers/c.d.period
			want := per * (float64(sliding)*(16*17/2+80*16) + float64(c.s.hp.Layers-sliding)*96*97/2)
			if att != want {
				t.Errorf("attention FLOPs %v, want %v", att, want)
			}
		})
	}
	for _, name := range []string{"gpt-oss-20b", "gemma3-27b"} {
		for _, s := range benchShapes {
			if s.name == name {
				hp := s.hp
				hp.MoE = s.moe // as the loader records it
				lin, att, head := windowFLOPs(hp, 4096, 2048)
				t.Logf("%s at 4096/2048: %.1f TFLOP linear, %.2f attention, %.1f head", name, lin/1e12, att/1e12, head/1e12)
			}
		}
	}
}
