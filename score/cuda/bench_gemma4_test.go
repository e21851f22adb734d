package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/score/model"
)

// A Gemma-4-31B-like synthetic model for TestBenchmark: its global layers'
// heads of 512 (attn_fa512: two blocks of 256 output dims per head) beside
// sliding layers of heads of 256. Hyperparameters as we read Gemma 4 31B's
// config.json (and llama.cpp's converter): 60 layers, 5376 wide, 32 query
// heads; sliding layers (5 of every 6) 16 KV heads of 256 over a 1,024-key
// window, RoPE base 10,000 on all dims; global layers 4 KV heads of 512
// with V = K (no attn_v), RoPE base 1e6 on a quarter of the pairs
// (proportional RoPE: rope_freqs 1 there, 1e30 elsewhere); FFN 21,504
// (GeGLU), RMS eps 1e-6, vocabulary 262,144, tied head, final soft-cap 30;
// no per-layer inputs, no KV sharing. The skeleton's matrices are F16 and
// its norms F32, filled on the device; rope_freqs holds its real factors
// (the loader reads them on the host).
//
// Model FLOPs at 4096/2048 (gemma4FLOPs): 239.9 TFLOP linear, 11.5
// attention (5.5 of it in the 10 global layers), 5.8 head
// (TestBenchmarkGemma4Sim logs them): about 0.5 s a window at half the
// H200's bf16 peak. Measured at 4096/2048 only (maxContext).

// gemma4Dims is the layer pattern of a gemma4 benchShape, whose HParams
// hold the global layers' head size and the sliding layers' KV heads.
type gemma4Dims struct{ swaHead, globalKV, window, period int }

// gemma4Bench holds the patterns of the gemma4 benchShapes, by name.
var gemma4Bench = map[string]gemma4Dims{}

func init() {
	s := benchShape{"gemma4-31b", model.HParams{Arch: "gemma4", Embd: 5376, Layers: 60, FFN: 21504, Heads: 32, KVHeads: 16,
		HeadDim: 512, ValueDim: 512, Vocab: 262144, CtxTrain: 262144, Eps: 1e-6}, true, nil, 4096}
	benchShapes = append(benchShapes, s)
	gemma4Bench[s.name] = gemma4Dims{swaHead: 256, globalKV: 4, window: 1024, period: 6}
	archFLOPs["gemma4"] = gemma4FLOPs
}

// gemma4DimsOf finds the pattern of hp among gemma4Bench's (by width and
// depth).
func gemma4DimsOf(hp model.HParams) gemma4Dims {
	for _, s := range benchShapes {
		if d, ok := gemma4Bench[s.name]; ok && s.hp.Embd == hp.Embd && s.hp.Layers == hp.Layers {
			return d
		}
	}
	return gemma4Dims{swaHead: 256, globalKV: 4, window: 1024, period: 6}
}

// global reports whether layer i of a gemma4 benchShape is global.
func (d gemma4Dims) global(i int) bool { return i%d.period == d.period-1 }

// gemma4FLOPs: 2 per multiply-add of each layer's products (its own head
// size and KV heads; a global layer's V is its K), of causal attention
// (sliding layers over min(i+1, window) keys) and of the head over the
// scored rows.
func gemma4FLOPs(hp model.HParams, n, scored int) (linear, attn, head float64) {
	d := gemma4DimsOf(hp)
	E, F, N := float64(hp.Embd), float64(hp.FFN), float64(n)
	full := N * (N + 1) / 2
	win := full
	if W := float64(d.window); d.window < n {
		win = W*(W+1)/2 + (N-W)*W
	}
	for i := range hp.Layers {
		hd, kv, kvMats, pairs := float64(d.swaHead), float64(hp.KVHeads), 2.0, win
		if d.global(i) {
			hd, kv, kvMats, pairs = float64(hp.HeadDim), float64(d.globalKV), 1, full
		}
		qd := float64(hp.Heads) * hd
		linear += 2 * N * (2*E*qd + kvMats*E*kv*hd + 3*E*F)
		attn += 2 * 2 * qd * pairs
	}
	return linear, attn, 2 * float64(scored) * E * float64(hp.Vocab)
}

// writeSkeletonGemma4 writes a gemma4 GGUF file of shape s (matrices F16,
// or typ(name) when typ is not nil; vectors F32) whose tensor data are
// zeros left as a hole, rope_freqs aside.
func writeSkeletonGemma4(path string, s benchShape, d gemma4Dims, typ func(name string) gguf.Type) error {
	hp, arch := s.hp, "gemma4"
	if hp.HeadDim%8 != 0 || d.period < 2 {
		return fmt.Errorf("%s: global head %d, period %d", s.name, hp.HeadDim, d.period)
	}
	w := gguf.NewWriter()
	w.Add("general.architecture", arch)
	w.Add("general.name", "synthetic "+s.name)
	pattern := make([]bool, hp.Layers)
	kvHeads := make([]int32, hp.Layers)
	for i := range pattern {
		pattern[i], kvHeads[i] = !d.global(i), int32(hp.KVHeads)
		if d.global(i) {
			kvHeads[i] = int32(d.globalKV)
		}
	}
	for k, v := range map[string]any{
		"embedding_length": uint32(hp.Embd), "block_count": uint32(hp.Layers), "feed_forward_length": uint32(hp.FFN),
		"context_length": uint32(max(hp.CtxTrain, 1)), "attention.head_count": uint32(hp.Heads), "attention.head_count_kv": kvHeads,
		"attention.key_length": uint32(hp.HeadDim), "attention.value_length": uint32(hp.HeadDim),
		"attention.key_length_swa": uint32(d.swaHead), "attention.value_length_swa": uint32(d.swaHead),
		"attention.layer_norm_rms_epsilon": float32(hp.Eps), "attention.sliding_window": uint32(d.window),
		"attention.sliding_window_pattern": pattern, "embedding_length_per_layer_input": uint32(0),
		"rope.freq_base": float32(1e6), "rope.freq_base_swa": float32(10000),
		"rope.dimension_count": uint32(hp.HeadDim), "rope.dimension_count_swa": uint32(d.swaHead),
		"final_logit_softcapping": float32(30),
	} {
		w.Add(arch+"."+k, v)
	}
	// Proportional RoPE: a quarter of the global head's pairs rotated.
	pairs := hp.HeadDim / 2
	freqs := make([]byte, 0, 4*pairs)
	for i := range pairs {
		f := float32(1)
		if i >= pairs/4 {
			f = 1e30
		}
		freqs = binary.LittleEndian.AppendUint32(freqs, math.Float32bits(f))
	}
	if err := w.AddTensor("rope_freqs.weight", gguf.TypeF32, []uint64{uint64(pairs)}, freqs); err != nil {
		return err
	}
	sk := newSkeleton(w, typ)
	add := sk.add
	E, V, F := uint64(hp.Embd), uint64(hp.Vocab), uint64(hp.FFN)
	add("token_embd.weight", gguf.TypeF16, E, V)
	add("output_norm.weight", gguf.TypeF32, E)
	for i := range hp.Layers {
		b := fmt.Sprintf("blk.%d.", i)
		hd, kv := uint64(d.swaHead), uint64(hp.KVHeads)
		if d.global(i) {
			hd, kv = uint64(hp.HeadDim), uint64(d.globalKV)
		}
		qd := uint64(hp.Heads) * hd
		add(b+"attn_norm.weight", gguf.TypeF32, E)
		add(b+"attn_q.weight", gguf.TypeF16, E, qd)
		add(b+"attn_q_norm.weight", gguf.TypeF32, hd)
		add(b+"attn_k.weight", gguf.TypeF16, E, kv*hd)
		add(b+"attn_k_norm.weight", gguf.TypeF32, hd)
		if !d.global(i) {
			add(b+"attn_v.weight", gguf.TypeF16, E, kv*hd)
		}
		add(b+"attn_output.weight", gguf.TypeF16, qd, E)
		sk.gemmaFFN(b, E, F)
	}
	return sk.write(path)
}

// A small gemma4 synthetic model of the same pattern (global heads of 512
// beside sliding ones of 64) loads, runs on the emulation and scores in
// the scale of the others, with windows longer than the sliding window;
// the FLOP count of the benchmark's shape is logged.
func TestBenchmarkGemma4Sim(t *testing.T) {
	e := simEngine()
	s := benchShape{"tiny-gemma4-wide", model.HParams{Arch: "gemma4", Embd: 64, Layers: 3, FFN: 128, Heads: 2, KVHeads: 2,
		HeadDim: 512, ValueDim: 512, Vocab: 1000, CtxTrain: 131072, Eps: 1e-6}, true, nil, 0}
	m := simBenchModel(t, e, s, gemma4Bench, gemma4Dims{swaHead: 64, globalKV: 1, window: 16, period: 3})
	if m.HP.Arch != "gemma4" || m.HP.HeadDim != 512 || m.HP.Layers != 3 {
		t.Fatalf("loaded %+v", m.HP)
	}
	checkSynthetic(t, e, m, 64)
	// 96 keys: 2 sliding layers (window 16) with heads of 64, one global
	// layer with heads of 512.
	_, att, _ := windowFLOPs(m.HP, 96, 48)
	want := 2*2*float64(2*64)*2*(16*17/2+80*16) + 2*2*float64(2*512)*96*97/2
	if att != want {
		t.Errorf("attention FLOPs %v, want %v", att, want)
	}
	for _, b := range benchShapes {
		if b.name == "gemma4-31b" {
			lin, att, head := windowFLOPs(b.hp, 4096, 2048)
			t.Logf("%s at 4096/2048: %.1f TFLOP linear, %.2f attention, %.1f head", b.name, lin/1e12, att/1e12, head/1e12)
		}
	}
}
