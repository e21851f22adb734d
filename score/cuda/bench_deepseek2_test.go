package cuda

import (
	"fmt"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/score/model"
)

// A DeepSeek-V2-Lite-shaped synthetic model for TestBenchmark: multi-head
// latent attention (keys of 576 over one latent head: attn_fl576 on the
// tensor cores) and a mixture of experts with shared ones. Hyperparameters
// from DeepSeek-V2-Lite's config.json as llama.cpp's converter writes them
// (the absorbed layout: attn_k_b and attn_v_b per head): 27 layers, 2048
// wide, 16 heads, no q compression, kv_lora 512, qk_nope 128, qk_rope 64,
// v_head 128; the first layer dense (FFN 10,944), then 64 routed experts
// of 1,408 with 6 per token (softmax gating, not renormalized, scale 1)
// and 2 shared; RoPE base 10,000 with YaRN (factor 40 over 4,096), RMS
// eps 1e-6, vocabulary 102,400, untied head. Matrices F16, vectors F32,
// filled on the device.
//
// Model FLOPs at 4096/2048 (mlaFLOPs, logged by
// TestBenchmarkDeepSeek2Sim): 18.4 TFLOP linear, 7.9 attention (absorbed:
// 1,088 multiply-adds a key and head), 0.9 head: about 0.05 s a window at
// half the H200's bf16 peak; attn_latent's attention alone, on the CUDA
// cores, would take 0.12 s at their float32 peak (67 TFLOP/s). Measured at
// 4096/2048 only (maxContext), in the archs bundle after qwen35-27b.

// mlaDims is the latent attention and experts of a deepseek2 benchShape:
// q_lora (0: attn_q), kv_lora, the heads' nope and rope parts, their
// value size, the leading dense layers and the shared experts.
type mlaDims struct{ qLora, kvLora, nope, rope, vHead, dense, shared int }

// mlaBench holds the dims of the deepseek2 benchShapes, by name.
var mlaBench = map[string]mlaDims{}

func init() {
	s := benchShape{"deepseek-v2-lite", model.HParams{Arch: "deepseek2", Embd: 2048, Layers: 27, FFN: 10944, Heads: 16, KVHeads: 1,
		HeadDim: 576, ValueDim: 512, Vocab: 102400, CtxTrain: 163840, Eps: 1e-6}, false,
		&model.MoEParams{Experts: 64, Used: 6, FFN: 1408}, 4096}
	benchShapes = append(benchShapes, s)
	mlaBench[s.name] = mlaDims{qLora: 0, kvLora: 512, nope: 128, rope: 64, vHead: 128, dense: 1, shared: 2}
	archFLOPs["deepseek2"] = mlaFLOPs
}

// mlaShape finds the shape of hp among the deepseek2 benchShapes (by width
// and depth).
func mlaShape(hp model.HParams) (benchShape, mlaDims) {
	for _, s := range benchShapes {
		if d, ok := mlaBench[s.name]; ok && s.hp.Embd == hp.Embd && s.hp.Layers == hp.Layers {
			return s, d
		}
	}
	panic(fmt.Sprintf("no deepseek2 bench shape of width %d and %d layers", hp.Embd, hp.Layers))
}

// mlaFLOPs: 2 per multiply-add of each layer's products (the absorbed
// layout's: q, the latent and its RoPE key, q's nope part into the
// latent, the latent into the values, the output; the dense FFN or the
// router, the used and the shared experts), of causal attention over the
// latent (kv_lora + rope for the scores, kv_lora for the values, each key
// and head) and of the head over the scored rows.
func mlaFLOPs(hp model.HParams, n, scored int) (linear, attn, head float64) {
	s, d := mlaShape(hp)
	E, H, N := float64(hp.Embd), float64(s.hp.Heads), float64(n)
	qk, lat := float64(d.nope+d.rope), float64(d.kvLora)
	q := E * H * qk
	if d.qLora > 0 {
		q = E*float64(d.qLora) + float64(d.qLora)*H*qk
	}
	attnProducts := q + E*(lat+float64(d.rope)) + H*float64(d.nope)*lat + H*lat*float64(d.vHead) + H*float64(d.vHead)*E
	m := s.moe
	for i := range hp.Layers {
		ffn := 3 * E * float64(s.hp.FFN)
		if i >= d.dense {
			F := float64(m.FFN)
			ffn = E*float64(m.Experts) + float64(m.Used)*3*E*F + 3*E*F*float64(d.shared)
		}
		linear += 2 * N * (attnProducts + ffn)
		attn += 2 * H * (2*lat + float64(d.rope)) * N * (N + 1) / 2
	}
	return linear, attn, 2 * float64(scored) * E * float64(hp.Vocab)
}

// writeSkeletonDeepSeek2 writes a deepseek2 GGUF file of shape s (matrices
// F16, or typ(name) when typ is not nil; vectors F32) whose tensor data
// are zeros left as a hole.
func writeSkeletonDeepSeek2(path string, s benchShape, d mlaDims, typ func(name string) gguf.Type) error {
	hp, arch, m := s.hp, "deepseek2", s.moe
	if m == nil || d.dense < 1 || d.dense >= hp.Layers {
		return fmt.Errorf("%s: deepseek2 bench shapes have experts after %d dense layers of %d", s.name, d.dense, hp.Layers)
	}
	w := gguf.NewWriter()
	w.Add("general.architecture", arch)
	w.Add("general.name", "synthetic "+s.name)
	for k, v := range map[string]any{
		"context_length": uint32(hp.CtxTrain), "embedding_length": uint32(hp.Embd), "block_count": uint32(hp.Layers),
		"feed_forward_length": uint32(hp.FFN), "attention.head_count": uint32(hp.Heads), "attention.head_count_kv": uint32(1),
		"attention.layer_norm_rms_epsilon": float32(hp.Eps), "rope.freq_base": float32(10000), "rope.dimension_count": uint32(d.rope),
		"leading_dense_block_count": uint32(d.dense), "vocab_size": uint32(hp.Vocab), "attention.q_lora_rank": uint32(d.qLora),
		"attention.kv_lora_rank": uint32(d.kvLora), "attention.key_length": uint32(d.kvLora + d.rope),
		"attention.value_length": uint32(d.kvLora), "attention.key_length_mla": uint32(d.nope + d.rope),
		"attention.value_length_mla": uint32(d.vHead), "expert_feed_forward_length": uint32(m.FFN),
		"expert_count": uint32(m.Experts), "expert_used_count": uint32(m.Used), "expert_shared_count": uint32(d.shared),
		"expert_weights_scale": float32(1), "expert_weights_norm": false, "expert_gating_func": uint32(1),
		"rope.scaling.type": "yarn", "rope.scaling.factor": float32(40), "rope.scaling.original_context_length": uint32(4096),
		"rope.scaling.yarn_log_multiplier": float32(0.0707),
	} {
		w.Add(arch+"."+k, v)
	}
	sk := newSkeleton(w, typ)
	add := sk.add
	E, V, H := uint64(hp.Embd), uint64(hp.Vocab), uint64(hp.Heads)
	qk, lat, nope, rope, vh := uint64(d.nope+d.rope), uint64(d.kvLora), uint64(d.nope), uint64(d.rope), uint64(d.vHead)
	add("token_embd.weight", gguf.TypeF16, E, V)
	add("output_norm.weight", gguf.TypeF32, E)
	add("output.weight", gguf.TypeF16, E, V)
	for i := range hp.Layers {
		b := fmt.Sprintf("blk.%d.", i)
		add(b+"attn_norm.weight", gguf.TypeF32, E)
		if d.qLora > 0 {
			ql := uint64(d.qLora)
			add(b+"attn_q_a.weight", gguf.TypeF16, E, ql)
			add(b+"attn_q_a_norm.weight", gguf.TypeF32, ql)
			add(b+"attn_q_b.weight", gguf.TypeF16, ql, H*qk)
		} else {
			add(b+"attn_q.weight", gguf.TypeF16, E, H*qk)
		}
		add(b+"attn_kv_a_mqa.weight", gguf.TypeF16, E, lat+rope)
		add(b+"attn_kv_a_norm.weight", gguf.TypeF32, lat)
		add(b+"attn_k_b.weight", gguf.TypeF16, nope, lat, H)
		add(b+"attn_v_b.weight", gguf.TypeF16, lat, vh, H)
		add(b+"attn_output.weight", gguf.TypeF16, H*vh, E)
		add(b+"ffn_norm.weight", gguf.TypeF32, E)
		if i < d.dense {
			F := uint64(hp.FFN)
			sk.ffn(b, E, F)
			continue
		}
		N, F, SF := uint64(m.Experts), uint64(m.FFN), uint64(m.FFN*d.shared)
		add(b+"ffn_gate_inp.weight", gguf.TypeF16, E, N)
		add(b+"ffn_gate_exps.weight", gguf.TypeF16, E, F, N)
		add(b+"ffn_up_exps.weight", gguf.TypeF16, E, F, N)
		add(b+"ffn_down_exps.weight", gguf.TypeF16, F, E, N)
		add(b+"ffn_gate_shexp.weight", gguf.TypeF16, E, SF)
		add(b+"ffn_up_shexp.weight", gguf.TypeF16, E, SF)
		add(b+"ffn_down_shexp.weight", gguf.TypeF16, SF, E)
	}
	return sk.write(path)
}

// A small deepseek2 synthetic model of DeepSeek's latent shape (keys of
// 576, values of 512: attn_fl576, asserted) loads, runs on the emulation
// and scores in the scale of the others; the FLOP counts of the
// benchmark's shape are logged.
func TestBenchmarkDeepSeek2Sim(t *testing.T) {
	e := simEngine()
	s := benchShape{"tiny-deepseek2-mla", model.HParams{Arch: "deepseek2", Embd: 64, Layers: 2, FFN: 128, Heads: 2, KVHeads: 1,
		HeadDim: 576, ValueDim: 512, Vocab: 1000, CtxTrain: 163840, Eps: 1e-6}, false, &model.MoEParams{Experts: 4, Used: 2, FFN: 32}, 0}
	m := simBenchModel(t, e, s, mlaBench, mlaDims{qLora: 0, kvLora: 512, nope: 16, rope: 64, vHead: 16, dense: 1, shared: 1})
	if m.HP.Arch != "deepseek2" || m.HP.Layers != 2 || m.HP.MoE == nil {
		t.Fatalf("loaded %+v", m.HP)
	}
	flashed := launched(e, "attn_fl576")
	checkSynthetic(t, e, m, 64)
	if launched(e, "attn_fl576") == flashed {
		t.Errorf("the latent attention did not take attn_fl576")
	}
	// 96 keys, 2 heads: (512 + 64) for the scores and 512 for the values.
	_, att, _ := windowFLOPs(m.HP, 96, 48)
	if want := 2 * 2 * 2 * float64(2*512+64) * 96 * 97 / 2; att != want {
		t.Errorf("attention FLOPs %v, want %v", att, want)
	}
	for _, b := range benchShapes {
		if b.name == "deepseek-v2-lite" {
			hp := b.hp
			hp.MoE = b.moe
			lin, att, head := windowFLOPs(hp, 4096, 2048)
			t.Logf("%s at 4096/2048: %.1f TFLOP linear, %.2f attention, %.1f head", b.name, lin/1e12, att/1e12, head/1e12)
		}
	}
}
