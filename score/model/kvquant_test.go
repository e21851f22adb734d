package model

import (
	"path/filepath"
	"strings"
	"testing"

	"ppl.dev/eval/mkmodel"
	"ppl.dev/oracle"
)

// TestQuantCacheLlama: the int8 modes with a KV cache of llama.cpp's
// quantized types against llama.cpp 0.7.0's -ctk T -ctv T (tools/oracle.cpp,
// flash attention, n_ctx 128; windows of 128, stride 64, of en-gpl3; here
// the first 4), on tiny-llama-spm in F16 and Q8_0 (heads of 64), in the
// AVX-512 build's int8 mode and the AVX2 build's (loaded alone). Before
// the cache llama.cpp turns q, k and v by Hadamard matrices, which it
// flags so that ggml-cpu runs a fast Walsh-Hadamard transform instead of
// their product (nn.FWHT); LLAMA_ATTN_ROT_DISABLE=1 there, llamaKVRotation
// off here, turns it off. Its flash attention then reads the cache's
// blocks (nn.Attention.KeyBlocks: each score the type's ggml_vec_dot
// with the query quantized to Q8_0, or Q8_1 for Q4_1 and Q5_1, in its
// lanes). To the last printed digit: q8_0, q4_0, q4_1,
// q5_0, q5_1 and iq4_nl, both models, both builds, 24 windows each,
// every sum within 6.7e-7 and every token within 5.3e-8; so it is for
// tiny-gemma3 (heads of 32, which llama.cpp does not turn; sliding
// layers; q8_0 and q4_0), tiny-qwen3 (q8_0, every token within 5.3e-8
// over 24 windows) and tiny-gemma4 (every one of the six types, 24
// windows: its first layer's heads of 32 decide that llama.cpp turns no
// layer's, kvcache.LlamaHead0; its layers that read another's keys
// encode their decoded values again, keyBlocks).
// Before 2026-12-06 ppl multiplied by the Hadamard matrix (which rounds
// a few outputs an ulp apart: the q8_0 windows' sums here up to 0.014 and
// 0.22 from llama.cpp's) and attended over the other types in float32
// (24 windows, largest gaps per token 0.06 to 0.11).
func TestQuantCacheLlama(t *testing.T) {
	dir := oracle.Require(t)
	for _, c := range []struct {
		stem, kv, act string
		rotate        bool
		sums          []float64
	}{
		{"tiny-llama-spm-f16", "q8_0", ActInt8, false, []float64{-1585.6453919, -800.7758646, -809.5633183, -829.0343274}},
		{"tiny-llama-spm-q8_0", "q8_0", ActInt8, false, []float64{-1585.9136802, -800.6694615, -809.9201724, -828.8217236}},
		{"tiny-llama-spm-f16", "q8_0", ActInt8, true, []float64{-1585.6524875, -800.8036319, -809.3758926, -829.1426209}},
		{"tiny-gemma3", "q8_0", ActInt8, false, []float64{-1821.9171902, -929.0658735, -941.4072296, -941.1795896}},
		{"tiny-llama-spm-q8_0", "q8_0", ActInt8, true, []float64{-1585.9327738, -801.4364766, -809.7920176, -829.0299620}},
		{"tiny-llama-spm-f16", "q8_0", ActInt8AVX2, true, []float64{-1585.6505196, -800.8048374, -809.3791930, -829.1436942}},
		{"tiny-llama-spm-f16", "q4_0", ActInt8, true, []float64{-1583.4021021, -800.7573417, -809.3301344, -829.9928201}},
		{"tiny-llama-spm-f16", "q4_1", ActInt8AVX2, true, []float64{-1584.8074777, -799.9191309, -809.4797569, -828.3402701}},
		{"tiny-llama-spm-f16", "q5_0", ActInt8, true, []float64{-1585.7098453, -801.6703758, -809.6334766, -829.4312232}},
		{"tiny-llama-spm-f16", "q5_1", ActInt8AVX2, true, []float64{-1586.1802742, -800.6333288, -809.9717114, -829.1699526}},
		{"tiny-llama-spm-f16", "iq4_nl", ActInt8, true, []float64{-1586.9754191, -800.2741228, -809.3772404, -829.8177778}},
		{"tiny-llama-spm-q8_0", "iq4_nl", ActInt8AVX2, true, []float64{-1588.7591747, -800.4554771, -810.0721598, -829.8970435}},
		{"tiny-llama-spm-q8_0", "q5_1", ActInt8, true, []float64{-1586.2931024, -801.1263405, -810.4651947, -828.8672105}},
		{"tiny-gemma3", "q4_0", ActInt8, true, []float64{-1828.9867069, -923.3318725, -934.7726140, -936.9182202}},
		{"tiny-gemma4", "q8_0", ActInt8, true, []float64{-1580.0510124, -803.8378336, -768.5906604, -749.6208505}},
		{"tiny-gemma4", "q4_1", ActInt8, true, []float64{-1563.9912025, -798.2024547, -760.2956095, -750.5258791}},
	} {
		t.Run(c.stem+" "+c.kv+" "+c.act, func(t *testing.T) {
			defer func(r bool) { llamaKVRotation = r }(llamaKVRotation)
			llamaKVRotation = c.rotate
			goldens := "golden"
			if strings.HasPrefix(c.stem, "tiny-gemma") {
				goldens = "golden-archs"
			}
			golden, err := oracle.Read(filepath.Join(dir, goldens, c.stem+"__en-gpl3__sliding.ndjson"))
			if err != nil {
				t.Fatal(err)
			}
			modeScores(t, oracle.Model(dir, c.stem), c.kv, c.act, golden.Header.Tokens, slidingWindows(len(c.sums)), c.sums, 1e-6)
		})
	}
}

// TestQuantCacheHeads: llama.cpp's quantized caches where the key and
// value heads differ, against llama.cpp 0.7.0 (as TestQuantCacheLlama) on
// genModel's files: MiniCPM3 with key heads of 96 and values of 64, whose
// values llama.cpp turns and keys not (kvcache.LlamaHead0: ppl's values,
// padded with zeros to 96, turned over their 64, nn.FWHTHeads; before
// 2026-12-06 ppl turned neither: windows 0.19 apart with q8_0, 0.5 with
// q4_0, 1.0 with iq4_nl); MiMo-V2 with keys of 192, turned by 64, and
// values of 128 padded to 192; dots3note with a latent of 320, which
// llama.cpp's log says it turns by 64 (n_rot_k = 64) but whose graph has
// no turn, as DeepSeek-V2's has none (latent attention is not turned).
// 24 windows each, both builds where named, within 9.5e-7; here every
// sum within 9.6e-7 of llama.cpp's printed sums.
func TestQuantCacheHeads(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	type file struct {
		arch, sha string
		set       func(*mkmodel.Shape)
	}
	minicpm3 := file{"minicpm3", "4b2987c336c4e7595585cfc34e7e7d8e5702f915f8c0d7e2aacebfcb5edd565a", func(s *mkmodel.Shape) { s.HeadDim, s.KVHeads = 64, s.Heads }}
	mimo2 := file{"mimo2", "7f9cb8434642182b53fdedf08d3e04093bbefea57b6889bc7ea64a204f25ff8a", func(s *mkmodel.Shape) { mimo2Shape(s); s.HeadDim = 192 }}
	dots3 := file{"dots3note", "313ef24980737f0e1256cd90ad9c5e7bbe4e8792f0fb6db2af02fbe0158eaaff", func(s *mkmodel.Shape) { dots3Shape(s); s.HeadDim = 128 }}
	paths := map[string]string{}
	for _, f := range []file{minicpm3, mimo2, dots3} {
		paths[f.arch] = genModel(t, dir, f.arch, f.set)
		checkSHA(t, paths[f.arch], f.sha)
	}
	for _, c := range []struct {
		f       file
		kv, act string
		sums    []float64
	}{
		{minicpm3, "q8_0", ActInt8, []float64{-2371.1372912, -1148.5199294, -1158.3735284, -1070.1642741}},
		{minicpm3, "q4_0", ActInt8AVX2, []float64{-2370.6489258, -1148.1147368, -1158.2129841, -1069.9874237}},
		{minicpm3, "q5_1", ActInt8AVX2, []float64{-2371.1890410, -1148.3041152, -1158.2518286, -1069.9316327}},
		{minicpm3, "iq4_nl", ActInt8, []float64{-2370.5934822, -1148.1534501, -1158.1181654, -1070.1997278}},
		{mimo2, "q4_0", ActInt8, []float64{-1639.3932909, -810.3868717, -812.5958872, -761.4747430}},
		{mimo2, "q5_1", ActInt8, []float64{-1637.1449143, -812.0788972, -812.8540115, -765.7315797}},
		{dots3, "q8_0", ActInt8AVX2, []float64{-1569.7211500, -787.3848747, -793.7097654, -763.7413411}},
		{dots3, "q4_0", ActInt8, []float64{-1593.0948961, -787.4784516, -789.2524874, -765.6105719}},
	} {
		name := c.f.arch + " " + c.kv + " " + c.act
		t.Run(name, func(t *testing.T) {
			modeScores(t, paths[c.f.arch], c.kv, c.act, golden.Header.Tokens, slidingWindows(len(c.sums)), c.sums, 1e-6)
		})
	}
}
