package model

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ppl.dev/eval/mkmodel"
	"ppl.dev/gguf"
	"ppl.dev/oracle"
)

// genModel writes a small model of an architecture the oracle has no
// model of (ppl-mkmodel's generator: 128 wide, 2 layers, 4 heads and 2 KV
// heads of 32, FFN 256, Q8_0, seed 1) with the oracle's tiny-llama-spm
// vocabulary and Phi-3's added tokens (llama.cpp 0.7.0 refuses a phi3
// vocabulary without them), changed by set when not nil. It returns the
// file's path.
func genModel(t *testing.T, dir, arch string, set func(*mkmodel.Shape)) string {
	t.Helper()
	return genModelType(t, dir, arch, "Q8_0", set)
}

// genModelType is genModel with weights of the file type typ (a
// ppl-mkmodel --type: "Q4_K_M" follows llama.cpp's per-tensor rules).
func genModelType(t *testing.T, dir, arch, typ string, set func(*mkmodel.Shape)) string {
	t.Helper()
	src, err := gguf.Open(oracle.Model(dir, "tiny-llama-spm-q8_0"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	added := []string{"<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|placeholder2|>", "<|placeholder3|>",
		"<|placeholder4|>", "<|system|>", "<|end|>", "<|placeholder5|>", "<|placeholder6|>", "<|user|>"}
	toks, err1 := src.Strings("tokenizer.ggml.tokens")
	scores, err2 := src.Float32s("tokenizer.ggml.scores")
	types, err3 := src.Int32s("tokenizer.ggml.token_type")
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	toks = append(toks, added...)
	for range added {
		scores, types = append(scores, 0), append(types, 3) // control tokens
	}
	s := mkmodel.Shape{Arch: arch, Embd: 128, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 256,
		Context: 2048, Vocab: len(toks), RopeBase: 10000, Eps: 1e-5}
	if set != nil {
		set(&s)
	}
	tok := mkmodel.Tokenizer{NVocab: len(toks)}
	for _, kv := range src.Metadata {
		v := kv.Value
		switch kv.Key {
		case "tokenizer.ggml.tokens":
			v, err = gguf.NewValue(toks)
		case "tokenizer.ggml.scores":
			v, err = gguf.NewValue(scores)
		case "tokenizer.ggml.token_type":
			v, err = gguf.NewValue(types)
		default:
			if len(kv.Key) < 10 || kv.Key[:10] != "tokenizer." {
				continue
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		tok.KVs = append(tok.KVs, gguf.KV{Key: kv.Key, Value: v})
	}
	if s.Vocab < tok.NVocab { // the first tokens only (token ids then taken modulo the vocabulary: vocabTokens)
		if tok, err = tok.Truncate(s.Vocab); err != nil {
			t.Fatal(err)
		}
	}
	ft, err := mkmodel.LookupFileType(typ)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), arch+".gguf")
	if err := mkmodel.Write(path, &mkmodel.Config{Shape: s, Type: ft, Seed: 1, Tokenizer: tok, Residual: 1}); err != nil {
		t.Fatal(err)
	}
	return path
}

// longRoPE gives a phi3 model LongRoPE over 24 of each head's 32 dims with
// the original context orig.
func longRoPE(orig int) func(*mkmodel.Shape) {
	return func(s *mkmodel.Shape) { s.Context, s.OrigContext, s.RopeDims = 4096, orig, 24 }
}

// exaone4SWA is EXAONE 4.0's 32B layout, which alone has sliding-window
// layers in llama.cpp: 64 layers (here narrow), a window of 40 keys so
// that windows of 128 tokens feel it.
func exaone4SWA(s *mkmodel.Shape) {
	s.Layers, s.Embd, s.Heads, s.KVHeads, s.FFN, s.Window = 64, 64, 2, 1, 128, 40
}

// minimaxM2 gives a minimax-m2 model 8 experts of the FFN's width, 2 used
// (llama.cpp shapes its experts by feed_forward_length).
func minimaxM2(s *mkmodel.Shape) { s.Experts, s.ExpertsUsed, s.ExpertFFN = 8, 2, s.FFN }

// ernie45MoE gives an ernie4_5-moe model 3 layers, the first dense, 8
// experts (2 used) and a shared expert.
func ernie45MoE(s *mkmodel.Shape) {
	s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 3, 1, 8, 2, 64, 64
}

// dots1 gives a dots1 model 3 layers, the first dense, 8 experts (2 used)
// of 64 and a shared expert as wide, and as many KV heads as heads
// (llama.cpp's dots1 has no grouped-query attention).
func dots1(s *mkmodel.Shape) {
	s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN, s.KVHeads = 3, 1, 8, 2, 64, 64, s.Heads
}

// generatedScores scores the first len(sums) windows of 128 tokens (stride
// 64) of tokens in the int8 mode with an f16 cache, checks each window's
// sum of log-probs against sums (llama.cpp's) to 1e-6, and returns the
// log-probs and the model's Info.
func generatedScores(t *testing.T, path string, tokens []int32, sums []float64) ([][]float64, Info) {
	t.Helper()
	return generatedScoresTo(t, path, tokens, sums, 1e-6)
}

// generatedScoresTo is generatedScores with the sums checked to bound.
func generatedScoresTo(t *testing.T, path string, tokens []int32, sums []float64, bound float64) ([][]float64, Info) {
	t.Helper()
	m, err := Load(path, Options{KVDtype: "f16", Activations: ActInt8, Context: 128})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if u := m.Info().Unread; len(u) > 0 {
		t.Errorf("%s: tensors not read: %v", filepath.Base(path), u)
	}
	if v := int32(m.Vocab()); slices.Max(tokens) >= v { // a model of the tokenizer's first tokens (genModelType)
		tokens = vocabTokens(tokens, v)
	}
	return scoreSums(t, m, filepath.Base(path), tokens, slidingWindows(len(sums)), sums, bound), m.Info()
}

// slidingWindows returns k windows of 128 tokens, stride 64, as
// llama.cpp's figures were computed over: the first scoring from token 1,
// the others their last 64.
func slidingWindows(k int) []window {
	wins := make([]window, k)
	for w := range wins {
		wins[w] = window{64 * w, 64*w + 128, 64*w + 64}
	}
	wins[0].from = 1
	return wins
}

// checkSHA fails t unless the file at path has the sha256 want: the bytes
// llama.cpp's figures were computed on.
func checkSHA(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != want {
		t.Fatalf("%s: sha256 %x, not that of the file llama.cpp scored (%s)", filepath.Base(path), sum, want)
	}
}

// vocabTokens maps tokens into a vocabulary of v: token t becomes t mod v,
// as llama.cpp was given them for the models of a truncated vocabulary.
func vocabTokens(tokens []int32, v int32) []int32 {
	out := make([]int32, len(tokens))
	for i, t := range tokens {
		out[i] = t % v
	}
	return out
}

// window is a window of tokens [begin, end) scored from from.
type window struct{ begin, end, from int }

// scoreSums scores each window of tokens with m, checks its sum of
// log-probs against sums (llama.cpp's) to bound, logs the worst
// difference and returns the log-probs.
func scoreSums(t *testing.T, m *Model, name string, tokens []int32, wins []window, sums []float64, bound float64) [][]float64 {
	t.Helper()
	var lps [][]float64
	worst := 0.0
	for i, w := range wins {
		r, err := m.Score(tokens[w.begin:w.end], w.from-w.begin)
		if err != nil {
			t.Fatal(err)
		}
		got := 0.0
		for _, lp := range r.Logprobs {
			got += lp
		}
		worst = max(worst, math.Abs(got-sums[i]))
		if math.Abs(got-sums[i]) > bound {
			t.Errorf("%s: window [%d,%d) from %d: sum of log-probs %.7f, llama.cpp's %.7f", name, w.begin, w.end, w.from, got, sums[i])
		}
		lps = append(lps, r.Logprobs)
	}
	t.Logf("%s: worst |Δ sum of log-probs| per window %.2g", name, worst)
	return lps
}

// TestGeneratedLlama holds the architectures the oracle has no model of to
// llama.cpp: genModel's models scored in the
// int8 mode with an f16 cache over the first windows of 128 tokens
// (stride 64) of en-gpl3 (the oracle's tiny-llama-spm tokens: the added
// tokens do not occur in it), against the sums of log-probs per window
// that llama.cpp 0.7.0 gives on the same files (the oracle's
// tools/oracle.cpp over Debian's libllama, its default F16 cache, n_ctx
// 128). The sha256 pins the bytes those figures were computed on. The
// cases: phi3's fused attn_qkv and ffn_up; LongRoPE with original context
// 200, where llama.cpp's context of 128 padded to 256 takes the long
// factors; with 300, the short ones; glm4 (biased attn_qkv, post-norms,
// adjacent-pair RoPE over half the head: the NeoX layout would put it
// 0.94 per token off); llama with Mixtral's experts (4, 2 used); granite
// (Granite-3.3-8B's multipliers); smollm3 (4 layers, the last without
// RoPE: with it, 0.26 per token off); olmo2 (no pre-norms, whole-row q
// and k norms, post-norms), and OLMo 3 (4 layers, 3 sliding over 40 keys
// with plain RoPE, the fourth global with YaRN of factor 8); llama with
// YaRN (factor 8: ggml's angle mix, TestGGMLArithmetic); seed_oss (q/k/v biases, its FFN norm's name);
// exaone4, and its 64-layer layout (3 sliding-window layers of 4, the 4th
// global and without RoPE); minimax-m2 (whole-row q/k norms, sigmoid
// routing with a selection bias); ernie4_5-moe (a dense first layer,
// softmax routing with a selection bias, a shared expert); dots1 (qwen3's
// attention, a dense first layer, sigmoid routing with a selection bias,
// normed and scaled by 2.5, a shared expert); granitehybrid, Mamba-2
// layers and an attention layer, without positions and with states of 128,
// and with RoPE, experts and a shared expert and states of 16 (granite's
// multipliers); nemotron_h (Mamba-2, ReLU² MLP and attention blocks) and
// nemotron_h_moe (ungated ReLU² experts routed by sigmoid with a selection
// bias, a shared expert), and with Nemotron 3 Super's latent experts (of
// 64, in a model of 128); lfm2 (short convolutions, B ⊙ x convolved then
// times C, and attention with per-head q/k norms) and lfm2moe (sigmoid-routed
// experts with a selection bias past a dense first layer), and lfm2 with a
// sliding window of 40 keys in its attention layers. Per token the log-probs are llama.cpp's to
// 5.3e-8, the precision of its printed figures (the Mamba-2 hybrids' over
// 24 windows of each of nine such files, LFM2's of two: their scan, convolution and norms
// as ggml-cpu rounds them, nn.SSMScanGGML); falcon-h1, attention and a
// Mamba-2 mixer side by side in each of 4 layers, with and without the
// mixers' ssm_norm (24 windows of each, both builds: none off); cohere2,
// the attention and the MLP in parallel on LayerNormed rows, 6 of its 8
// layers sliding over 40 keys with RoPE, 2 global without positions, and
// command-r, its block with RoPE everywhere (24 windows of each of 3 texts,
// both builds: none off), and in 64 layers with Command R+'s per-head q/k
// LayerNorms (24 windows, both builds); the mixtures qwen2moe (its shared expert's
// sigmoid gate as llama.cpp's silu(g)/g: with the plain sigmoid one window
// of 24 is 0.004 off), olmoe, granitemoe with and without a shared expert,
// hunyuan-moe and bailingmoe2 (a dense first layer, 4 groups of experts,
// RoPE over half the head), afmoe (4 layers: pre- and post-norms, the
// attention's sigmoid gate, 3 sliding over 40 keys with RoPE, 1 global
// without; a dense first layer), exaone-moe (8 layers: 3 of 4 sliding
// over 40 keys with RoPE, the fourth global without; a dense first
// layer), cohere2moe (8 layers: the parallel block with RMS norms, layers
// 0 and 4 global, 0 dense and with RoPE, the others sliding over 40 keys;
// experts plus a shared expert halved), 8 experts with 2 used; the dense
// ernie4_5
// (llama), exaone (NeoX RoPE), hunyuan-dense (q/k normed after RoPE),
// arcee (an ungated ReLU² MLP) and apertus (an ungated MLP with xIELU,
// its parameters per layer; q/k norms whose biases go unused) (24 windows
// each, both builds: none off); starcoder2 (LayerNorms with biases, an
// ungated GELU MLP with biases: ggml's float16 GELU table), untied in 4
// layers and tied, and phi2 (starcoder2's block in parallel, x +
// (attention + MLP): summed as (x + attention) + MLP, 254 of 1599 targets
// differ by up to 0.048; RoPE over half the head, q scaled; an output
// bias) (24 windows each, both builds: none off; phi2 with attn_qkv fused
// gives the same sums in llama.cpp and here), and gptneox (starcoder2's
// block with q, k and v fused, RoPE over a quarter of the head, the
// parallel residual (x + FFN(ffn_norm(x))) + attention; without it, the
// serial block: TestGPTNeoXSerial), and falcon (attention and an ungated
// GELU MLP without biases in parallel on one LayerNorm, one KV head;
// Falcon-40B's second norm: TestFalcon40B) (24 windows, both builds: none
// off), and gpt2 (starcoder2's block with q, k and v fused, learned
// positions instead of RoPE, tied), and nemotron (Minitron: LayerNorms
// with biases, an ungated ReLU² MLP, RoPE over half the head) and chatglm
// (glm4 without its post-norms), and olmo (LayerNorms without weights,
// adjacent-pair RoPE; clamped q, k and v: TestOLMoClamp) (24 windows
// each, both builds: none off), and dbrx (LayerNorms without biases, q, k
// and v fused and clamped at 8 and, in TestOLMoClamp, at 0.5, where the
// clamp bites; 8 experts, 2 used), and bailingmoe (Ling 1: softmax-routed
// experts renormalized, a shared expert, adjacent-pair RoPE), and
// granite_swa (Granite 4.1: granite's multipliers, attention sinks, 3
// layers of 4 sliding over 40 keys with RoPE, the fourth global without;
// with RoPE everywhere and no window by integer flags: TestGraniteSWAFlags)
// and mellum (qwen3moe's block, 3 layers of 4 sliding over 40 keys with
// plain RoPE of their own base, rope.freq_base_swa; 8 experts, 2 used)
// and baichuan in 4 layers (no positions) and in the 7B's 32 (RoPE)
// (24 windows each, both builds: none off), and the ALiBi architectures
// (6 heads: 4 slopes of m0's powers, 2 of m1's): bloom (the embeddings'
// LayerNorm, starcoder2's block with q, k and v fused), untied and tied,
// mpt (LayerNorms without biases, an ungated GELU MLP; without ALiBi's
// key, clamped, with learned positions: TestALiBiVariants), refact
// (llama's block), jais (biased SwiGLU, scores by 1/head) and baichuan at
// the 13B's 40 layers (24 windows each, both builds: none off); jais2
// (nemotron's block with every bias, NeoX RoPE), maincoder (q/k norms per
// head after RoPE) and pangu-embedded (NeoX RoPE, biases; without q's:
// TestPanguBiases) (24 windows each, both builds, untied and tied: none
// off); mimo2 (narrow values padded, per-layer KV heads, sliding layers
// with sinks and their own base, a value scale, sigmoid-routed experts;
// variants: TestMiMo2Keys) (24 windows, both builds: none off); bitnet
// (sub norms, a scale per projection, ggml's SWIGLU of products apart;
// in Q8_0 and in TQ2_0, BitNet's ternary type) (24 windows, both builds:
// none off); openelm (heads [4 8 4 8] and MLPs [256 320 384 256] by
// layer, fused qkv, per-head q/k norms) and qwen (Qwen 1: fused biased
// qkv, NeoX RoPE, the MLP half of feed_forward_length) (24 windows each,
// both builds: none off); step35 (per-layer heads, q/k norms, a sigmoid
// gate per head, sliding layers with half again as many heads and RoPE of
// their own base over the whole head, the global ones over half, clamped
// SwiGLUs in the dense layer, the experts and the shared expert; variants:
// TestStep35Variants) (24 windows, both builds: none off); kimi-linear (3
// Kimi Delta Attention layers, their gates per key channel, then latent
// attention without RoPE; sigmoid-routed experts and a shared expert;
// TestKimiLinearKeys) (24 windows, both builds: none off); smallthinker (8
// layers: sliding ones with RoPE of their own base, layers 0 and 4 global
// without RoPE; experts routed from the layer's input, ReGLU; without the
// window: TestSmallThinkerKeys) (24 windows, both builds: none off);
// mamba (Mamba-1: a decay per state column; Falcon-Mamba's weightless
// norms of dt, B and C), mamba2 (Mamba-2's mixers alone) and jamba
// (Mamba-1 with the norms' weights, attention without positions in layer
// 2, softmax-routed experts in the odd layers; TestJambaKeys) (24 windows
// each, both builds: none off); plamo3 (fused qkv and gate/up, per-head
// q/k norms, post-norms; layers 0 and 2 sliding with their own base, and
// without a window; TestPlamo3Variants) (24 windows each, both builds:
// none off); plamo2 (PLaMo-2's Mamba in layers 0 and 2: z and x
// interleaved by head, normed B, C and dt; attention with a q/k norm
// weight row per head in 1 and 3; post-norms) (24 windows, both builds:
// none off); grok (Grok-2's layout: the experts beside a dense MLP, its
// multipliers and soft-caps, the attention computed as llama.cpp computes
// Grok's, without flash attention; Grok-1's: TestGrokKeys) (24 windows,
// both builds: none off); minicpm3 (latent attention in its plain form,
// values padded, the rotated parts at the heads' ends, llama.cpp's fixed
// multipliers; and with LongRoPE's long factors) (24 windows each, both
// builds: none off); plamo (PLaMo-13B: a parallel block without an FFN
// norm, NeoX RoPE) (24 windows, both builds: none off); arctic (a dense
// MLP as wide as the model, and experts beside the layer reading its
// input) (24 windows, both builds: none off); minimax-m3 (MSA's blocks per
// KV head past 4 of 16 keys, gpt-oss's SwiGLU in every MLP, and with every
// expert used; TestMiniMaxM3Variants) (24 windows each, both builds: none
// off); qwen4exp (hyper-connections, n-gram embeddings, QSA past 4 blocks
// of 4 keys; in Q8_0 and Q4_K_M; TestQwen4ExpVariants) (24 windows each,
// both builds: every token within 5.1e-8); glm5-next (Kimi Delta
// Attention and latent attention without RoPE inside 4 streams mixed by
// manifold-constrained hyper-connections, a k-pool indexer past 4 blocks of
// 4 keys, every SwiGLU clamped; TestGLM5NextVariants) (24 windows, both
// builds: every window's sum within 4.6e-7); llama in Q1_0 and Q2_0 and
// qwen3moe in Q1_0 (every matrix of the type: PrismML's Bonsai formats;
// 24 windows each, both builds: none off).
func TestGeneratedLlama(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	tokens := golden.Header.Tokens
	for _, c := range []struct {
		name    string
		arch    string
		typ     string // ppl-mkmodel's file type; "" for Q8_0
		set     func(*mkmodel.Shape)
		factors string
		sha256  string
		sums    []float64 // llama.cpp's, windows [0,128) from 1, [64,192) from 128, ...
	}{
		{"phi3", "phi3", "", nil, "", "f763930ac62fa4c96265199939b0bef532b258c66e3686a70eb59d62342ec7f1",
			[]float64{-1613.0497539, -806.8140917, -790.4604465, -749.2969640}},
		{"phi3-longrope-long", "phi3", "", longRoPE(200), "long", "43907c204c6447bf41bc89ecdbe021ade1329b6f55f6d46fe1c60b4f83b8c316",
			[]float64{-1592.4506238, -816.0697587}},
		{"phi3-longrope-short", "phi3", "", longRoPE(300), "short", "06571c0d07979f725a0e20b009a9f05bb2e305f48da84e19dae6041520391dbc",
			[]float64{-1596.7501170, -800.5208942}},
		{"glm4", "glm4", "", nil, "", "ef352ba6fb70002dd821125120355d8b5979692fda38f6bdfb34a335d4f600a6",
			[]float64{-1593.8240037, -802.8170295, -784.3202637, -765.2153713}},
		{"llama-moe", "llama", "", func(s *mkmodel.Shape) { s.Experts, s.ExpertsUsed, s.ExpertFFN = 4, 2, s.FFN }, "", "aa64536f54c6977cd14717ed00c42518a62b7877ac1d7fe43b842ae489fa1170",
			[]float64{-1614.7332503, -781.1640027, -799.8686711, -750.9039352}},
		{"granite", "granite", "", nil, "", "d4407f9fee9e0a42e09b0495fc6186d15f089fc9319547992cfdf2eb21485a21",
			[]float64{-1320.9851444, -664.4920246, -664.8032345, -661.9266161}},
		{"smollm3", "smollm3", "", func(s *mkmodel.Shape) { s.Layers = 4 }, "", "7a0a0b4c54da5ea908bc09a1f7726add0ac603b238f98d5009e1a3d0eaa93753",
			[]float64{-1637.8157283, -789.8684227, -791.0530267, -772.6302671}},
		{"olmo2", "olmo2", "", nil, "", "0ee2c78feb20ea0eae7972fdfd22781d0eaa3c30a2dd6cec4c4513bab869ac65",
			[]float64{-1585.6523620, -800.8191864, -780.0288633, -794.3312015}},
		{"olmo3", "olmo2", "", olmo3, "", "b81223e71f32118b38845ef5df808ac935e1b9a5f7ae9b3087fd8d5630585e5d",
			[]float64{-1588.5130359, -797.2951274, -787.0016248, -770.4353987}},
		{"llama-yarn", "llama", "", func(s *mkmodel.Shape) { s.YaRN = 8 }, "", "c8eba5a1f2b93e3e926fa59c79920c5fed69df9d261ed79a989a173155b483e1",
			[]float64{-1645.1368856, -802.2455283, -799.0141604, -777.8112731}},
		{"seed_oss", "seed_oss", "", nil, "", "1797c79af005588ab01f0717c1dbb2f9aa28381e9f73108c2ebae7bda081dc6b",
			[]float64{-1616.6979037, -808.3433645, -792.2225686, -764.9003702}},
		{"exaone4", "exaone4", "", nil, "", "f59d17e524bc28601aa878acbfa649cd457599dc40f30febd2f2919135401fa4",
			[]float64{-1594.1678054, -799.4227752, -774.9046986, -795.9612369}},
		{"exaone4-swa", "exaone4", "", exaone4SWA, "", "a3414c0d05af05a8a0118cfcc9c2f806f7b7b7e19b0d6afbb3bf411d69246034",
			[]float64{-1553.1447689, -767.1372408, -807.6626281, -748.7717701}},
		{"minimax-m2", "minimax-m2", "", minimaxM2, "", "e430b6840400de40c7672acfb2481efa2bfcce27b386c6c2bd943f1334ac166b",
			[]float64{-1614.3307480, -793.3232589, -807.5795735, -749.5829583}},
		{"ernie4_5-moe", "ernie4_5-moe", "", ernie45MoE, "", "bd84c20c70d3c699cb57c30a310ca54e9d629d23461d30b4474a8242fb0e8da8",
			[]float64{-1597.8855739, -792.8150315, -793.6422511, -784.2241778}},
		{"dots1", "dots1", "", dots1, "", "d3161a2092e9986ca0e48398266e9ca40df5971ec878aeae4ff704ece414a244",
			[]float64{-1596.2779101, -798.2577378, -801.0536592, -768.1562814}},
		{"granitehybrid", "granitehybrid", "", graniteHybrid(false), "", "7f3813492e7b3fd1907b9dd27512f60d0dd66efaf312d90ca8e08809410e7227",
			[]float64{-1331.3606611, -667.7893020, -668.4289747, -660.6184767}},
		{"granitehybrid-moe", "granitehybrid", "", graniteHybrid(true), "", "d2faa8cd2f4b497770d0107ef6ca45806d5147579f3d4126df56f193c506806b",
			[]float64{-1331.0002091, -667.7616140, -668.3976316, -660.7869631}},
		{"nemotron_h", "nemotron_h", "", nemotronH(false), "", "4019479b62795024109b1a63ab5a9eacd99cd820e4f3487147727d25da973521",
			[]float64{-1568.9721909, -792.4005936, -795.7419555, -783.3458083}},
		{"nemotron_h_moe", "nemotron_h_moe", "", nemotronH(true), "", "64e3cf58db0f21248025c1a1e115a422e37f49b8b5ba087fe614badfde9b1728",
			[]float64{-1516.7105138, -803.2643386, -763.3931178, -790.9631155}},
		{"nemotron_h_moe-latent", "nemotron_h_moe", "", func(s *mkmodel.Shape) { nemotronH(true)(s); s.MoELatent = 64 }, "",
			"afbdd44bab239c2e4af93167be35ea80b78200876e0fce6919de9da22974571d",
			[]float64{-1567.6391050, -811.7386340, -810.7378073, -805.7336691}},
		{"lfm2", "lfm2", "", lfm2(false), "", "742fc45b17e5b6839a0016acb235c7b9d753872a3d29bc7149374470509d850a",
			[]float64{-1631.7795734, -825.6056746, -818.3669679, -800.8487037}},
		{"lfm2moe", "lfm2moe", "", lfm2(true), "", "12dcbf40975325a985b6ad3eda775333af8c7de70ac304b928aa5ba681d3c5cb",
			[]float64{-1613.9717337, -829.1798259, -814.1795373, -793.3720625}},
		{"lfm2-swa", "lfm2", "", func(s *mkmodel.Shape) { lfm2(false)(s); s.Window = 40 }, "",
			"e1680d4ccd17eb48570974f4dfbad89796f0edfb6513536e2b6958967279c422",
			[]float64{-1631.3273653, -825.1723572, -820.6942212, -804.3782150}},
		{"qwen35-state128", "qwen35", "", qwen35Shape(false, 128), "", "5927ad784c09c545239a0866b6e313c80ccc9f9d678b5f12d37469bfd8a49597",
			[]float64{-1616.4655378, -803.4359363, -799.1756931, -769.6270775}},
		{"qwen35moe-q4_k_m", "qwen35moe", "Q4_K_M", qwen35Shape(true, 64), "", "01f0c2d0cfec755ec9d19cb42e1411da5e41e922340828e72b0d246dbcb7734d",
			[]float64{-1572.2894749, -801.8722987, -799.8348691, -763.2643541}},
		{"llama-q1_0", "llama", "Q1_0", nil, "", "1a37d50e3be9131004955a078bcc4f198b0e38fd5272ed2c5f56072ebb3f8116",
			[]float64{-1505.9462139, -746.9176514, -752.3210002, -733.0258263}},
		{"llama-q2_0", "llama", "Q2_0", nil, "", "5390effb9c53f974c9fe4b4732e02e143dc54f6a4666af358fdb405cfd0d7643",
			[]float64{-1713.3499891, -853.3098455, -832.5930657, -797.2269114}},
		{"qwen3moe-q1_0", "qwen3moe", "Q1_0", func(s *mkmodel.Shape) { s.Embd, s.Experts, s.ExpertsUsed, s.ExpertFFN = 256, 8, 2, 256 }, "",
			"84e88a33c27cffb5353f0b6d2ecdcf9f5ba7fdfbc758c3f6a6099ad2ecabc4bd",
			[]float64{-1490.0222299, -742.6285380, -763.8210798, -741.2574381}},
		{"qwen3moe-q4_k_m", "qwen3moe", "Q4_K_M", func(s *mkmodel.Shape) { s.Embd, s.Experts, s.ExpertsUsed, s.ExpertFFN = 256, 8, 2, 256 }, "",
			"4697c5ba83fd12d5b8d8aefe8a5a5e75811f01217c9755d44a58ed014af14fed",
			[]float64{-1581.0417953, -787.6289069, -770.8846478, -787.9841146}},
		{"gemma2", "gemma2", "", gemma2(4, 32), "", "49a4a970bc6610fae87988ca86891f5d4ffd650b893d58f20cfedf5bc6706056",
			[]float64{-1531.8795187, -787.9831103, -797.4847972, -788.5616289}},
		{"gemma2-27b", "gemma2", "", gemma2(46, 24), "", "4d9aa7dfd74f0c7710b140c327cde12ff23ce4924cebe5e18398bdc1122d65a3",
			[]float64{-1568.1183818, -801.1308900, -810.3237298, -778.9157750}},
		{"llama4", "llama4", "", llama4(8, 64, 0), "", "02a28698a5ece99378206e94ee928c3c247f7033f623bb09896c2a8741fa1ebb",
			[]float64{-1582.6373032, -775.8475587, -812.4657863, -790.6080414}},
		{"llama4-maverick", "llama4", "", llama4(128, 32, 2), "", "cc093f8e724ec3f1c17493e36fd677895a72e5ee3c00b28b7255bcb1da95dc9d",
			[]float64{-1630.5253040, -797.2598758, -802.0546253, -789.0588216}},
		{"falcon-h1", "falcon-h1", "", falconH1(false), "", "b94dcb11c0deb603503c85319fc7b5099635c2dff105be4fa18e92cf429f9394",
			[]float64{-1604.6202265, -802.8745485, -752.8605942, -762.6965636}},
		{"falcon-h1-no-ssm-norm", "falcon-h1", "", falconH1(true), "", "583c2b2132447c3c14331c645eb7b187ceeaaf6956c3a4fffc8df3e32d189f16",
			[]float64{-1628.1634988, -814.4263157, -770.2515298, -771.4392247}},
		{"cohere2", "cohere2", "", cohere2Shape(40), "", "58398560752a51bf43a5a0b24ae2b86156e3b54bfe9721fae9a807be2996823a",
			[]float64{-1325.3068153, -672.4041625, -670.7311468, -675.0640753}},
		{"command-r", "command-r", "", func(s *mkmodel.Shape) { s.Layers, s.Tied = 4, true }, "",
			"53c4b0988e472262f0a315ba9d8ec2885cff169818bc0a4f04a87e6dedcc84c0",
			[]float64{-1325.6099586, -672.3306772, -673.9362421, -678.6486050}},
		{"command-r-plus", "command-r", "", commandRPlus, "", "33caf76f17b97189b5233e0045b066147ced7d85e3b22b47360f1e63c1177fe4",
			[]float64{-1335.0434056, -665.1256147, -674.1038955, -675.7280258}},
		{"qwen2moe", "qwen2moe", "", qwen2MoE, "", "0d76168301bd5adcd8cd9c73a0030a1dad94145b1cae1b8bd3359e3809f59412",
			[]float64{-1613.8748436, -804.5758570, -789.8486877, -773.3980031}},
		{"olmoe", "olmoe", "", olmoe, "", "8ca7b26b4acf677968b29f18b46a85d8a87685c9554094392e250c6c04d168d2",
			[]float64{-1600.0666904, -791.0966611, -791.9823210, -744.9462579}},
		{"granitemoe", "granitemoe", "", graniteMoE(0), "", "78f653ff84f65856a64848a1d214e030a57ce214b57c47b89ded723affbac010",
			[]float64{-1320.9496559, -664.4940485, -664.7964710, -661.8936945}},
		{"granitemoe-shared", "granitemoe", "", graniteMoE(96), "", "570bb8c6f8b30dbda1b17ff0f4146b20ef12d867c7ce84a0bd58c0973ae4ff00",
			[]float64{-1320.9368789, -664.4892436, -664.8150253, -661.8932366}},
		{"hunyuan-moe", "hunyuan-moe", "", hunyuanMoE, "", "47cfffe2969fb22ce24da191b7fc1de7cd193daa428b532cae78c28135aac04f",
			[]float64{-1584.6700017, -790.6787059, -801.4975393, -772.3729679}},
		{"bailingmoe2", "bailingmoe2", "", bailingMoE2, "", "d2d54193490ccc719f2753af50e5846ed32ed7a94b9531cc10d6f90f82e8a64f",
			[]float64{-1578.3946764, -804.7209945, -815.4750978, -765.5876242}},
		{"afmoe", "afmoe", "", afmoe, "", "3c4caae18ca659eb99547b03875495dc8057e9630500802c59ac9ceb93553bb4",
			[]float64{-1613.3515159, -794.7221242, -796.9395883, -761.1521255}},
		{"apertus", "apertus", "", nil, "", "f4547e2832eacd050e03947b2027a52a85a1f2f527d8cf999c3853c41ede447d",
			[]float64{-1657.8000746, -818.4193276, -788.7322422, -764.6474647}},
		{"exaone-moe", "exaone-moe", "", exaoneMoE, "", "02767faf2cac395a408cf611cde460b76bd65b09aa6e5b9538641fcf1381d3ce",
			[]float64{-1569.1110936, -798.4518772, -795.6927025, -786.9732657}},
		{"cohere2moe", "cohere2moe", "", cohere2MoE, "", "e7036778ef5a7977a5f9a2203c42da728ee384acfce5639a66222684a1509274",
			[]float64{-1325.1870529, -670.9459112, -676.9078381, -669.9046189}},
		{"ernie4_5", "ernie4_5", "", nil, "", "0d74e28d928f449784f2731c41d9e3716daa6e1a47f027e71ebc4a5cace6aca0",
			[]float64{-1626.4546316, -790.1359273, -799.2311808, -758.7573398}},
		{"exaone", "exaone", "", nil, "", "e1c57cb1771b2285416c2e2bdc0cdc9891426045eaea16cf98e5af90438dc69c",
			[]float64{-1614.9779596, -807.5483990, -795.1790851, -772.6263511}},
		{"hunyuan-dense", "hunyuan-dense", "", nil, "", "b5c87c398fea81ec9f81524f6545db85dfffd6eb2c40cad766e0c2b5b8e9da06",
			[]float64{-1623.3951955, -802.4182854, -798.6074197, -769.8019124}},
		{"arcee", "arcee", "", nil, "", "e87e9472347fb44feb011b8e340656baac38c0dfb92321f1c38049282ee34353",
			[]float64{-1656.6476730, -815.5808802, -788.9097215, -762.7952080}},
		{"deci", "deci", "", deci, "", "980fcdb9b84fefcb111009f915f647b8542b4174bffb93ec0b5f350a888ec095",
			[]float64{-1604.2728121, -805.3918635, -795.1865811, -780.9030111}},
		{"deepseek", "deepseek", "", deepSeek, "", "89dac0a9b7e9cefbf56001913dff59986a838fea8a5dafe7e336a56ea5e2db1a",
			[]float64{-1628.9724100, -798.9481771, -800.9166185, -796.8997242}},
		{"internlm2", "internlm2", "", nil, "", "09efe34f07ba0cf067cdd331a0307210a25b2178fc9507b0f9a7ceec6aef07cf",
			[]float64{-1626.4546316, -790.1359273, -799.2311808, -758.7573398}},
		{"stablelm", "stablelm", "", nil, "", "6d455db743b5714ee564a56842da09252b525ed0d6cdb15a731c300985125fc3",
			[]float64{-1627.7180540, -796.4582921, -787.7158177, -771.7873598}},
		{"stablelm-12b", "stablelm", "", func(s *mkmodel.Shape) { s.QKLayerNorm = true }, "", "b488f7e18555d99b0b19a9333d76317dc20b4ceca7e1208f491506bc86914f7d",
			[]float64{-1644.7391921, -794.6063096, -798.5844761, -765.7673443}},
		{"orion", "orion", "", nil, "", "1bb5e9a080d918d753ba48b6596dbf2b753befa8cdf7693d50123e96b23500cf",
			[]float64{-1611.2120671, -814.6649741, -792.3570189, -780.0358529}},
		{"nanbeige", "nanbeige", "", nil, "", "9f09e9f0d4ba6dc0678e2082a2673b60bdb8e599e4f86c8d3768e01d553dd37c",
			[]float64{-1626.4546316, -790.1359273, -799.2311808, -758.7573398}},
		{"xverse", "xverse", "", nil, "", "b5bc2ec3bf54cd4301ed83d58524e19cd68ff064d718414b176ebdb8c20f2e55",
			[]float64{-1626.4546316, -790.1359273, -799.2311808, -758.7573398}},
		{"minicpm", "minicpm", "", miniCPM, "", "ad809de5aa5dd646dc04de20d2c6306aa3a51cdca3cd6ae6bf874195ddafe2c1",
			[]float64{-2216.0648833, -1194.8785872, -1162.6042957, -1167.6971536}},
		{"gemma", "gemma", "", gemma1, "", "903466e5a7ef0b6b53ace418cac6ffbf8c3eeec49568744131ee08c99df762c8",
			[]float64{-1599.9322892, -773.6576960, -807.1530256, -817.0603680}},
		{"phimoe", "phimoe", "", phiMoE(0), "", "81120be227bc7f50432cb3ecd09830aef8ccae4898462a41754f15672ae8c8f7",
			[]float64{-1607.6296706, -801.8080544, -806.5717879, -760.6504701}},
		{"phimoe-longrope", "phimoe", "", phiMoE(200), "long", "99f25c6e8f4e092ccb76c184c40d1e27915d465ea171591da746d942ab1a7597",
			[]float64{-1606.5960838, -786.6527852, -810.9296901, -759.1714051}},
		{"starcoder2", "starcoder2", "", func(s *mkmodel.Shape) { s.Layers = 4 }, "", "dfbf64c22911e4c9f7241a1dcce92a296c27fc16d965c78d3b85f96f0743c95b",
			[]float64{-1617.3382170, -807.4645491, -797.6728274, -774.4438020}},
		{"starcoder2-tied", "starcoder2", "", func(s *mkmodel.Shape) { s.Tied = true }, "", "8de42b58ca9eaa56415ed46f10de7119fa0e9f26555053edeff0a8caac83b47d",
			[]float64{-1612.6304731, -805.4352252, -831.5943601, -788.7935907}},
		{"phi2", "phi2", "", func(s *mkmodel.Shape) { s.Layers = 4 }, "", "db9ad3f23fbfc7d0bd19c5959592a3dbb5af955cd564e04b35f862d81b009a81",
			[]float64{-1632.2871372, -797.7478236, -806.0943777, -751.0082928}},
		{"gptneox", "gptneox", "", func(s *mkmodel.Shape) { s.Layers = 4 }, "", "11bb6500dfebb9a7f44a06944cd8e91dab9dc2d883a7167192d5f97f3340ff6d",
			[]float64{-1656.6396448, -805.3968527, -794.0994150, -748.6808058}},
		{"falcon", "falcon", "", func(s *mkmodel.Shape) { s.Layers, s.KVHeads = 4, 1 }, "", "7ab9930c0167a0ccab5e7b80467a035024f8d6312d59e515d538dfece66dade8",
			[]float64{-1660.1736315, -797.4650991, -805.9762549, -776.5083771}},
		{"gpt2", "gpt2", "", gpt2Shape, "", "f18af77640a3bd1257320a9d7b20508b262ae77cbfa03003427b8f02de205913",
			[]float64{-1535.3119408, -771.3597286, -770.3042039, -765.2281725}},
		{"nemotron", "nemotron", "", func(s *mkmodel.Shape) { s.Layers = 4 }, "", "aa5179e2691125fad9fbf985c5ecf09ecd1041ff09b37c16fb6b6b46e3ee5a8b",
			[]float64{-1637.2217481, -803.4038280, -792.0342528, -775.6310965}},
		{"chatglm", "chatglm", "", func(s *mkmodel.Shape) { s.Layers = 4 }, "", "a3fcb967f2d58269574dac5fbda71e568e9cffa412519da8bc3d89eae1fdd7af",
			[]float64{-1593.1015448, -812.3297644, -799.8807106, -742.2920122}},
		{"olmo", "olmo", "", func(s *mkmodel.Shape) { s.Layers = 4 }, "", "698bdfdcd0ca99ff784ed2259b1210cb672f5031099d37d077fd61a77c641983",
			[]float64{-1411.0638512, -696.6200319, -696.0012956, -684.0742474}},
		{"dbrx", "dbrx", "", dbrxShape, "", "ada744857a026acfd906144898e4f00efa38d88e5179ac287ca7e2a0430bc611",
			[]float64{-1616.5501195, -795.8677437, -816.2033008, -726.0669653}},
		{"bailingmoe", "bailingmoe", "", bailingMoE, "", "ee116b33cc7cc8fd8c16f5f64304758e9d2d8cfeb5a475c7ad912e566a03e673",
			[]float64{-1571.0494898, -769.7701439, -816.3576865, -775.7350809}},
		{"granite_swa", "granite_swa", "", graniteSWA, "", "5d54f3f25aeed1f69e1ae20dedbd509f82fd7c84393322e1214ed43beebdaedd",
			[]float64{-1320.9881821, -664.5017844, -664.7764557, -661.9186157}},
		{"mellum", "mellum", "", mellumShape, "", "aac5fbc94cf33def6d0c6ac04f50a638a951ddb2d93be7b44d9e0a8b8ea0c994",
			[]float64{-1620.9192292, -803.2006679, -810.2694350, -787.0790597}},
		{"baichuan", "baichuan", "", func(s *mkmodel.Shape) { s.Layers = 4 }, "", "52c930c9261441a6f276face025db0daf533b4dc7676b6ca8ce5d76dcc5d1b8d",
			[]float64{-1648.2798346, -797.8642750, -793.8484407, -780.2945576}},
		{"baichuan-7b", "baichuan", "", baichuan7B, "", "37faaa433cd71cb42b31018c9ff39654eb4ac8b8d4d2eec50fbaa2c0f26e09a0",
			[]float64{-1565.9577858, -800.5107088, -775.4759708, -759.4858337}},
		{"bloom", "bloom", "", alibiShape, "", "8d15695e3fe671dae7c9e402959e5f91f839e4f4cb9eae38f11190b02ccc5b20",
			[]float64{-1579.7499190, -803.3596784, -795.7120150, -795.2749795}},
		{"bloom-tied", "bloom", "", func(s *mkmodel.Shape) { alibiShape(s); s.Tied = true }, "", "e483748454e44c99f7ea90f34aad9b03711f80a9689788acbb8922375cbe99d2",
			[]float64{-1665.1065594, -905.0224486, -883.8238844, -895.9379116}},
		{"mpt", "mpt", "", alibiShape, "", "4f74392ca1fd7ec3dd798a0f9611adc8852a4f77f4d72a72ce0f7054bee68e5f",
			[]float64{-1571.5206121, -809.1471495, -797.1629524, -796.0975297}},
		{"jais", "jais", "", alibiShape, "", "c3a4d0b88a0bd3e5a3db78f71ea816acd0fc03f9bae87738dd26ae7e10462d5d",
			[]float64{-1591.3108866, -774.7166183, -778.1255991, -753.2214982}},
		{"refact", "refact", "", func(s *mkmodel.Shape) { alibiShape(s); s.KVHeads = 2 }, "", "12171af30a4afffef60e16439653096531d623fa7a87fc9f0ee6e2261941cafe",
			[]float64{-1558.3375375, -809.3573802, -802.3323941, -798.4611227}},
		{"baichuan-13b", "baichuan", "", baichuan13B, "", "6f87c6d254bb5032d6ecac1edb002edac7436fff003f5f503e03a7df3cc41f20",
			[]float64{-1571.2196597, -782.6601594, -784.5744508, -795.5641049}},
		{"jais2", "jais2", "", func(s *mkmodel.Shape) { s.Layers = 4 }, "", "e37f1fcf4ad0639ca4a3a2f9fb358e2c1a14145ffd584dd2c114d2e38933ff42",
			[]float64{-1619.1267496, -812.4410039, -796.8622866, -787.5387758}},
		{"maincoder", "maincoder", "", func(s *mkmodel.Shape) { s.Layers = 4 }, "", "70b0311887ec368ace86bbe0e5681ed0cf4a4476fa8ca32f569b1c1a4a75d29f",
			[]float64{-1642.8981456, -795.1099540, -795.2629844, -771.2234204}},
		{"pangu-embedded", "pangu-embedded", "", func(s *mkmodel.Shape) { s.Layers = 4 }, "", "c7a48ee66a8ab785bff3816f4295dccd5a88e763d1214e3871157e584229b220",
			[]float64{-1627.9381881, -811.8889264, -798.3202378, -769.1016480}},
		{"mimo2", "mimo2", "", mimo2Shape, "", "8006fd46e84207ba8b98157ab3c7f6094f2d0404863462a213e9600bf75494cc",
			[]float64{-1602.8364877, -787.2228912, -801.2911570, -763.9609880}},
		{"bitnet", "bitnet", "", func(s *mkmodel.Shape) { s.Layers, s.Tied = 4, true }, "", "7006bcd9f54aed157b5a9adc23e5d0679cd92f2c6e79007c511ee694a3f6afff",
			[]float64{-1567.0869208, -775.7305224, -777.2973374, -796.4826195}},
		{"bitnet-tq2_0", "bitnet", "TQ2_0", bitnetTQ, "", "6f8c53203da7ecf405a7b68f5494b9abfe521d3d78f8002e7a55767c502f6ee1",
			[]float64{-1617.6514293, -792.9929149, -813.6515063, -798.0033253}},
		// BF16 and TQ1_0 products in ggml's order (ggml_vec_dot_bf16 with
		// vdpbf16ps, ggml_vec_dot_tq1_0_q8_K's lanes).
		{"llama-bf16", "llama", "BF16", nil, "", "096dcb06532596d38b34e05146b015db2d7a00f506582c781f8bfee227d17c5d",
			[]float64{-1626.4892385, -790.6647969, -798.9110826, -758.7528695}},
		{"llama-tq1_0", "llama", "TQ1_0", func(s *mkmodel.Shape) { s.Embd, s.FFN, s.HeadDim = 256, 512, 64 }, "",
			"d95e53d3908a1d0ea695141e29fd38c50a831eea551d7216ec5ad09042f39f97",
			[]float64{-1576.7162276, -819.1489278, -816.1467247, -788.9914898}},
		{"openelm", "openelm", "", func(s *mkmodel.Shape) { s.Layers, s.Tied = 4, true }, "", "8abe5699facc40aa10038327f9e69ce0f3210e9042c24e4a80b6d506eb0a0f45",
			[]float64{-1539.0728889, -779.0824568, -796.0170319, -766.4045137}},
		{"qwen", "qwen", "", func(s *mkmodel.Shape) { s.Layers, s.KVHeads = 4, 4 }, "", "82f9199822a4602b94c8874be66e97a12de999eb093b3941a81d1b00dfaec4d1",
			[]float64{-1605.5973391, -804.8148143, -784.7415166, -758.9526950}},
		{"step35", "step35", "", step35Shape, "", "f5418e4c64fa3b0ccb873a8b7a0dc4b3db35307037dd9f59b6123b443ad06ca9",
			[]float64{-1584.1922093, -802.5858265, -807.4666545, -788.4150369}},
		{"kimi-linear", "kimi-linear", "", kimiShape, "", "0b3daf406fcfcfc245d68e6f184b275554804972ec8915e358018047147345ed",
			[]float64{-1637.0837594, -784.6017670, -781.0746519, -792.7773821}},
		{"smallthinker", "smallthinker", "", smallThinkerShape, "", "b5cad32a41e393cc74d12edd8994e6b8874bedb066641df3daed2833d5c82cbd",
			[]float64{-1622.0527711, -820.3672625, -809.2710288, -783.1368154}},
		{"mamba", "mamba", "", mambaShape, "", "173d22661b528e99c4483511457d81f84aeeb62aaf873f22ac37c1c2bba7f94f",
			[]float64{-1619.5483756, -790.0654026, -799.0612165, -751.9611523}},
		{"falcon-mamba", "mamba", "", func(s *mkmodel.Shape) { mambaShape(s); s.DtBCRMS = true }, "", "02f6ff71cdea27f54898096106af0801f3ed400c5d2ccbd0d6586472697eae3c",
			[]float64{-1618.1769342, -788.2334410, -797.7479605, -752.0304329}},
		{"mamba2", "mamba2", "", mamba2Shape, "", "2563cbcd9903e944beecac61b7bbd131534cca6df6abea5ac1f5e8e1d39b31cd",
			[]float64{-1593.5812565, -812.2377400, -789.6572100, -739.9923367}},
		{"jamba", "jamba", "", jambaShape, "", "34c0e6c709258d18bf171538285eb63c428a7eb09733c6309a25e1fb0b80e2f1",
			[]float64{-1623.6113328, -794.4661843, -804.5443884, -766.8857456}},
		{"plamo3", "plamo3", "", plamo3Shape, "", "ed95fdd0db6593606c542636aaee63c4c254b587b4e78d4ebaada46981d12093",
			[]float64{-1605.7084569, -807.4939487, -799.7961393, -737.3267244}},
		{"plamo3-global", "plamo3", "", func(s *mkmodel.Shape) { s.Layers = 4 }, "", "a265cb73bc0d8222c9bedc827aa02f9f60c2f88dc2ab9bd9c558fd8a90edaa37",
			[]float64{-1617.0369345, -813.8024052, -787.9764615, -740.3824372}},
		{"plamo2", "plamo2", "", plamo2Shape, "", "d6997daf576a75a23479baa419346c3378ab82e656f2337e67606f9c6c1a1583",
			[]float64{-1589.6846014, -795.1006563, -785.8424692, -766.3938297}},
		{"grok", "grok", "", grokShape, "", "a2946915897f5b2d66f52562e190637775b24814c580cb2b04e7f419a518eece",
			[]float64{-1426.1398965, -707.7240724, -709.8431387, -683.8368512}},
		{"minicpm3", "minicpm3", "", minicpm3Shape, "", "adce6552cd34bfb30bcd0e63a212d3b84581f4532ebfdef3db656ba06aa57dbe",
			[]float64{-2369.8275393, -1145.5393903, -1157.7447922, -1068.2514469}},
		{"minicpm3-longrope", "minicpm3", "", func(s *mkmodel.Shape) { minicpm3Shape(s); s.Context, s.OrigContext = 4096, 64 }, "long",
			"b0adc59706cb8fc466f00247649650395c7c4d8f38b770935faa427f1a9e8988",
			[]float64{-2369.8879194, -1146.2778829, -1157.4618608, -1068.9379842}},
		{"plamo", "plamo", "", func(s *mkmodel.Shape) { s.Layers = 4 }, "", "5dd76f3bafba364173ba23d0b8b1428deff382a57326e02b5b0d959e6908775b",
			[]float64{-1651.9090325, -805.4377647, -796.3009550, -770.5445170}},
		{"arctic", "arctic", "", func(s *mkmodel.Shape) { s.Layers, s.Experts, s.ExpertsUsed, s.ExpertFFN = 4, 8, 2, s.FFN }, "",
			"2dd5aa741ba1977d479b26aeb9af6e5b68772a00a803bfb82841ac6fcccd6c97",
			[]float64{-1609.8402455, -801.7587901, -793.5906758, -767.6934912}},
		{"rwkv7", "rwkv7", "", rwkv7Shape, "", "ba593f4c80b8422b311a7b4428f486f6978d3396b1fde9df1e46a63fc6792a77",
			[]float64{-1634.1798199, -780.6510722, -791.0746385, -776.9513693}},
		{"arwkv7", "arwkv7", "", rwkv7Shape, "", "759ff3c7666a6b3070a52a6ed6565ed183c817663d55372c7148de48c47d5b66",
			[]float64{-1617.4221093, -813.4280739, -810.2892785, -768.7516104}},
		{"rwkv6", "rwkv6", "", rwkv6Shape, "", "d505269cd9d6142239e34d53777a173a9c953708f052f2eab88c71aec93e203b",
			[]float64{-1577.4733315, -803.2090772, -804.5744036, -773.8399066}},
		{"rwkv6qwen2", "rwkv6qwen2", "", qrwkv6Shape, "", "314d2a00d8844f5ff0ea6a5b7dd9d63a8057ecca7fe00c1febbd06c7964ad9f3",
			[]float64{-1628.4244002, -796.6191663, -802.5912112, -753.9645160}},
		{"hy_v3", "hy_v3", "", hyV3Shape, "", "b576a19fbea412a7305a4010b056494a43a31019fbd561dabd8f2340157a41d5",
			[]float64{-1596.7072885, -815.1574120, -807.6341340, -792.4728859}},
		{"maple", "maple", "", mellumShape, "", "a4a8cc51020e9d147ef66cd5c9451595c462823c2ca2377053f1a27ed9782f10",
			[]float64{-1618.6918974, -801.7651827, -811.7062198, -788.1338690}},
		{"laguna", "laguna", "", lagunaShape, "", "1dc2df8c70904b47d51f10ef2a7317daf4597ef3d41991ad788e25e987459929",
			[]float64{-1546.9574529, -809.1281283, -799.6159936, -788.9235743}},
		{"laguna-yarn", "laguna", "", func(s *mkmodel.Shape) { lagunaShape(s); s.YaRN = 4 }, "", "ac01bd4264391e763d542676b4358960a9911150e203223d5e38232c753d6fe9",
			[]float64{-1550.3798887, -806.8635036, -805.0254184, -786.1914999}},
		{"laguna-m1", "laguna", "", func(s *mkmodel.Shape) { lagunaShape(s); s.Window, s.YaRN = 0, 4 }, "", "6921f6e952506cf0adc84dc5ebd4fdfaf4c9d6bea40ac9ff39806bf7132d9e7a",
			[]float64{-1608.0497810, -786.8684330, -799.6978835, -794.7307695}},
		{"maion-coder", "maion-coder", "", mellumShape, "", "4aa1543f982d200d658de5f32c5d2b9bf0c01e9360558bd73389ca98af265989",
			[]float64{-1595.0070011, -811.5738574, -780.9195677, -780.8895940}},
		{"spark2_5", "spark2_5", "", sparkShape, "", "b473370df953c75ccf419685526cdaad92dc56374c51c6e40cd1ddbb6fc863bf",
			[]float64{-1615.4529846, -791.6787341, -799.9325632, -771.0758108}},
		{"spark2_5-tied", "spark2_5", "", func(s *mkmodel.Shape) { sparkShape(s); s.Tied = true }, "", "ada2b04af7961710a66a92c60959fa82881579240acae8e6d4d1c2105e925d5b",
			[]float64{-1557.1020917, -804.7316391, -800.2547472, -796.5661741}},
		{"muse-glimmer", "muse-glimmer", "", sparkShape, "", "4a26ffa813c56ce60460da029093a943d57e610ef8787bdb656ae00bfbaafbed",
			[]float64{-1444.9018798, -721.6990486, -719.0418908, -700.7229243}},
		{"talkie", "talkie", "", func(s *mkmodel.Shape) { s.Layers = 4 }, "", "e200c2f7517fc497854d9de8faec427c34a8e60d887f410d4b3979a5f01b553f",
			[]float64{-1629.9564828, -801.1233764, -791.9998634, -761.5247225}},
		{"hunyuan_vl", "hunyuan_vl", "", func(s *mkmodel.Shape) { s.Layers = 4 }, "", "0f518d76b9ac6b423e5b07b642f177b5ee9915e28f9aa185c2f5b22ca4690463",
			[]float64{-1649.6569262, -802.0630421, -792.9671577, -777.7347343}},
		{"plm", "plm", "", plmShape, "", "f697df1abf6ec18e8c2dd4e082228712926e14697ae50aa1d9a808dabd55d85f",
			[]float64{-1573.5797660, -794.6235857, -780.8356149, -792.6385242}},
		{"hrm_text", "hrm_text", "", func(s *mkmodel.Shape) { s.Layers = 4 }, "", "364c3100c30430b33fca14c8f4f58b68a83a7f780a398f1c564318375221086b",
			[]float64{-1408.9107549, -694.8666818, -694.5571755, -680.1551507}},
		{"hrm_text-tied", "hrm_text", "", func(s *mkmodel.Shape) { s.Layers, s.Tied = 2, true }, "", "d8bb21d4e73a7f1201e3946688eb90a4d352dcb7de47b184d01ead8538687e18",
			[]float64{-1317.9095972, -664.8847560, -664.2471509, -666.0750262}},
		{"grovemoe", "grovemoe", "", groveShape(2), "", "f6a794d7acb768496a7f7303ed8e2ac6587b54d18bea7d18073dcc72a2c25054",
			[]float64{-1616.2918311, -811.6283684, -807.6962568, -776.8315401}},
		{"grovemoe-k4", "grovemoe", "", groveShape(4), "", "c72f7b4c8fa546715c0c2b2c42fcb1de4e06c0bc5187ed5ec478483d81dd4c65",
			[]float64{-1619.0086120, -807.7148675, -797.2843032, -772.4724310}},
		{"grovemoe-every", "grovemoe", "", func(s *mkmodel.Shape) { s.Layers, s.Experts, s.ExpertsUsed, s.ExpertFFN = 4, 8, 8, 64 }, "",
			"38ec2b47f93199e3a0d59b30326e73994ad1ca3b458b7b368b2c452a95b83142",
			[]float64{-1622.7956265, -800.7417898, -794.3655117, -781.1758209}},
		{"k2-horizon", "k2-horizon", "", k2Shape, "", "9fe6dfacc34359391fcbf0922f75bfbfbd80839616400a139181d327a76ac497",
			[]float64{-1596.5182132, -769.3841494, -783.5456955, -793.5546146}},
		{"graniteswitch", "graniteswitch", "", nil, "", "8c09278c7530b44109b7390598c31740d1348bff132f89ae9382ffaf7e33334d",
			[]float64{-1320.9917414, -664.5016682, -664.7744050, -661.9005439}},
		{"paddleocr", "paddleocr", "", nil, "", "fc1eb4e0da65efee83608a1c748b68cfbf07778fc975e9adf16dcd8664483ba4",
			[]float64{-1614.9779596, -807.5483990, -795.1790851, -772.6263511}},
		{"cogvlm", "cogvlm", "", cogvlmShape(false), "", "b9458f9d3aa3cc54780e593823e0aa4855a4528d8f39e8af296f1d6a62235334",
			[]float64{-1618.4613552, -795.1382285, -794.8335721, -751.5181921}},
		{"cogvlm-tied", "cogvlm", "", cogvlmShape(true), "", "856950c2959d72610167604b21e9fcaa005b21ea1f4ff568a7e3a1f8f92b3aa8",
			[]float64{-1584.9550500, -793.4082078, -797.3729386, -785.3583892}},
		{"deepseek2-ocr", "deepseek2-ocr", "", ocrShape(false), "", "7f25d87d9140e8aba81252366e968f94c67e2ecf19326c6e223fef25c3302542",
			[]float64{-1624.7860124, -783.1563343, -795.0621502, -784.9783493}},
		{"deepseek2-ocr-tied", "deepseek2-ocr", "", ocrShape(true), "", "efc25c088b48ef4b67d2b21a153b69731fa16535925941caeba99452c206593a",
			[]float64{-1532.4084196, -779.9115228, -797.5471793, -756.8495664}},
		{"minimax-01", "minimax-01", "", minimax01Shape(4, 2), "", "2af5fbdf81ae312a0faae2cd83e004d4d728deeafcb19f3168d36af0ec92512a",
			[]float64{-1600.9039442, -781.2225851, -794.9476406, -811.8884073}},
		{"minimax-01-tied", "minimax-01", "", func(s *mkmodel.Shape) { minimax01Shape(4, 2)(s); s.Tied = true }, "",
			"316ce5f463dd88593e2fede0edb849a16bada61eababb06b0434fc03820c0472",
			[]float64{-1537.5104330, -770.1426884, -785.8006554, -800.4122849}},
		{"minimax-01-6heads", "minimax-01", "", func(s *mkmodel.Shape) { minimax01Shape(4, 2)(s); s.Heads, s.KVHeads = 6, 2 }, "",
			"866e1be616d0ae84592fbbf69eb90f4bd07b62fbc01c9b7bc577ff89a1e96090",
			[]float64{-1593.1505608, -824.9988904, -771.9906986, -752.6335719}},
		{"bailingmoe3", "bailingmoe3", "", ling3Shape(false), "", "715de9cd60bf2c719cf3c72e1ef41323da0aec81ea2d9db11f9e0e38fa672497",
			[]float64{-1597.0599075, -807.8915434, -786.1186948, -791.4679307}},
		{"bailingmoe3-tied", "bailingmoe3", "", ling3Shape(true), "", "090f1bbf39ee4e477f7f49863e223d31115f9667f75872fb40267fd743cb0144",
			[]float64{-1594.4274541, -780.8672586, -826.9138092, -813.8798762}},
		{"dots3note", "dots3note", "", dots3Shape, "", "1a67d68dd2c6c24e24b470e3e8bce861bc8e1768e25ec19875bb9b672bc6b7fb",
			[]float64{-1620.3802614, -783.6745545, -802.4565016, -770.3366045}},
		{"dots3note-tied", "dots3note", "", func(s *mkmodel.Shape) { dots3Shape(s); s.Tied = true }, "",
			"adf11955eee2c55be2b910166fc14da645b1aa94a4d85b1322013a30f6d5f675",
			[]float64{-1541.3895254, -802.1555409, -809.6981466, -782.0052186}},
		{"dots3note-128", "dots3note", "", func(s *mkmodel.Shape) { dots3Shape(s); s.HeadDim = 64 }, "",
			"d6941e9e96ad2d0b1d0326aca37058a8adf37da17c0bb5dab133b7449ec3af17",
			[]float64{-1589.8336556, -788.4871090, -804.1295427, -799.8208280}},
		{"dots3note-every-expert", "dots3note", "", func(s *mkmodel.Shape) { dots3Shape(s); s.ExpertsUsed = 8 }, "",
			"46087a3193edb1ef2c3463190e5dae0061dd4e0048de2b54302db2a108f77a0c",
			[]float64{-1612.1745613, -778.6352739, -805.2337545, -779.2068170}},
		{"hy_v4", "hy_v4", "", hyV4Shape, "", "7fbc4070f18cbfd37c630d53ca6f2f5da0dcdcb0d4418fc4483e82c7e87933d6",
			[]float64{-1594.5004291, -777.1457030, -807.6417909, -777.2847826}},
		// F32: every product in float32 lanes, and rows whose attention
		// sink exceeds their highest score (llama.cpp's S·ms + vs one FMA).
		{"hy_v4-f32", "hy_v4", "F32", hyV4Shape, "", "a860f3ed0af0d2a13821f1bc70546bbdcba06cc1cd3fb9e4a177649b37dcc44f",
			[]float64{-1595.4435850, -777.7654411, -806.9885001, -776.7846783}},
		{"hy_v4-every-expert", "hy_v4", "", func(s *mkmodel.Shape) { hyV4Shape(s); s.ExpertsUsed = 8 }, "",
			"2999ee285fdc82cbe617e6b630d05164d9769f74e21e6726482600fb07db436f",
			[]float64{-1600.5113028, -782.6976424, -806.8153726, -772.5194443}},
		// Kimi K3: KDA with the safe gate and a full-rank output gate,
		// latent attention with an elementwise gate, SiTU, latent experts,
		// residual attention over checkpoints of layers 0 and 2.
		{"kimi-k3", "kimi-k3", "", kimiShape, "", "fd429e7d2c9fc10f955f43cae0a6d4f0452deea03b3e807b10fffc440e0b260d",
			[]float64{-1582.0483253, -805.0402665, -779.0272624, -733.8866280}},
		{"kimi-k3-every-expert", "kimi-k3", "", func(s *mkmodel.Shape) { kimiShape(s); s.ExpertsUsed = 8 }, "",
			"6254a7223ff2dc52465abbd23d0fd96fdd9af782d3c46ac487b556de1b980095",
			[]float64{-1575.8097074, -800.0685375, -771.3509771, -765.7829552}},
		// MiniMax-M3: per-head q/k norms, partial NeoX RoPE, gpt-oss's
		// clamped SwiGLU in every MLP, sigmoid-routed experts with a
		// selection bias and a shared expert; MSA from row 64 on.
		{"minimax-m3", "minimax-m3", "", m3Shape, "", "1bf6db8137a012318e3a134ccc88ef19ff3ba5af63333a1cb3b2e24b48d6be45",
			[]float64{-1602.2968180, -835.8414192, -794.0184149, -797.7330788}},
		{"minimax-m3-every-expert", "minimax-m3", "", func(s *mkmodel.Shape) { m3Shape(s); s.ExpertsUsed = 8 }, "",
			"7cde011a65d6ddbefc400fb77bbe0db9d8b64f0bf58c173204f1aadfdb236e46",
			[]float64{-1635.1270494, -819.1141860, -800.6124541, -774.7485689}},
		// Qwen3.8-Flash-Next: Gated DeltaNet with a sigmoid output gate,
		// gated attention with QSA from row 20 on, 4 streams mixed by
		// low-rank hyper-connections, n-gram embeddings in layer 1, and
		// experts with a gated shared expert; in Q8_0 and in Q4_K_M.
		{"qwen4exp", "qwen4exp", "", q4Shape, "", "47fd8654c1de1bae6861d253b0213299a35e2e6d65f214e747fc4f5b4736ed1b",
			[]float64{-1378.7957362, -692.1793340, -698.0499072, -671.6313849}},
		{"qwen4exp-q4_k_m", "qwen4exp", "Q4_K_M", q4Shape, "", "96bc2928b4e4871e331aa1ff6c6428d858dea98458e44f57d09b76f9fc340530",
			[]float64{-1381.2481575, -692.4725438, -698.3054498, -671.2264653}},
		// GLM-5.3-Flash: Kimi Delta Attention and latent attention without
		// RoPE inside 4 streams mixed by mHC (Sinkhorn), a k-pool indexer
		// choosing blocks of 4 keys from row 19 on, clamped SwiGLUs.
		{"glm5-next", "glm5-next", "", glm5Shape, "", "0658462115bbedd3a84d4371dec1d3654c81bcd8a16c22ae3b45e43d207bcf0a",
			[]float64{-1617.7059527, -798.0258231, -788.5986057, -790.1221268}},
		{"gemma3n", "gemma3n", "", gemma3nShape, "", "aa8149da25cd63f7af8a3376c9257ad4d634a78f7e8db12d12b31a282ef0f5c6",
			[]float64{-1265.5716098, -649.5556662, -637.6097197, -680.8129770}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := genModelType(t, dir, c.arch, cmp.Or(c.typ, "Q8_0"), c.set)
			checkSHA(t, path, c.sha256)
			if _, info := generatedScores(t, path, tokens, c.sums); info.Rope.Factors != c.factors {
				t.Errorf("LongRoPE factors %q, want %q", info.Rope.Factors, c.factors)
			}
		})
	}
}

// TestPhi3Layouts: the same weights with q, k and v as three tensors
// (attn_q, attn_k, attn_v, as some converters write them) score bit for
// bit as with the fused attn_qkv, in both modes: LinearRows's parts are
// the fused matrix's rows.
func TestPhi3Layouts(t *testing.T) {
	dir := oracle.Require(t)
	fused := genModel(t, dir, "phi3", nil)
	f, err := gguf.Open(fused)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, kv := range f.Metadata {
		w.Add(kv.Key, kv.Value)
	}
	for _, tn := range f.Tensors {
		data := f.Data(tn)
		base, ok := strings.CutSuffix(tn.Name, "attn_qkv.weight")
		if !ok {
			if err := w.AddTensor(tn.Name, tn.Type, tn.Shape, data); err != nil {
				t.Fatal(err)
			}
			continue
		}
		row := len(data) / int(tn.Shape[1])
		r := 0
		for _, p := range []struct {
			name string
			rows int
		}{{"attn_q", 128}, {"attn_k", 64}, {"attn_v", 64}} {
			if err := w.AddTensor(base+p.name+".weight", tn.Type, []uint64{tn.Shape[0], uint64(p.rows)}, data[r*row:(r+p.rows)*row]); err != nil {
				t.Fatal(err)
			}
			r += p.rows
		}
	}
	split := filepath.Join(t.TempDir(), "split.gguf")
	if err := w.WriteFile(split); err != nil {
		t.Fatal(err)
	}
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	for _, act := range []string{ActFP32, ActInt8} {
		var lps [2][]float64
		for i, p := range []string{fused, split} {
			m, err := Load(p, Options{Activations: act})
			if err != nil {
				t.Fatal(err)
			}
			r, err := m.Score(golden.Header.Tokens[:200], 1)
			m.Close()
			if err != nil {
				t.Fatal(err)
			}
			lps[i] = r.Logprobs
		}
		if !slices.Equal(lps[0], lps[1]) {
			t.Errorf("%s: attn_q/k/v and attn_qkv score differently", act)
		}
	}
}

// olmo3 is OLMo 3's layout in 4 layers: 3 sliding over 40 keys with plain
// RoPE, the fourth global with YaRN (factor 8 over an original context of
// 256, OLMo 3's attn_factor).
func olmo3(s *mkmodel.Shape) { s.Layers, s.Window, s.YaRN = 4, 40, 8 }

// TestGPTNeoXSerial: gptneox with use_parallel_residual false, the serial
// block (x + attention, then + FFN), on genModel's file, against
// llama.cpp's sums on the same bytes (24 windows in both builds: none off;
// here the first 4).
func TestGPTNeoXSerial(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	p := rewriteFile(t, genModel(t, dir, "gptneox", func(s *mkmodel.Shape) { s.Layers = 4 }), map[string]any{"gptneox.use_parallel_residual": false}, nil)
	checkSHA(t, p, "06b91d7680d28d81cc737ead2a9c9ace87a624fddc3b7f007cbed5dcbb9822fa")
	generatedScores(t, p, golden.Header.Tokens, []float64{-1637.5478362, -803.0796618, -802.8538823, -747.6881294})
}

// TestFalcon40B: Falcon-40B's layout, the attention on attn_norm_2's rows
// and the MLP on attn_norm's, on genModel's falcon file with the norms
// added, against llama.cpp's sums on the same bytes (24 windows in both
// builds: none off; here the first 4).
func TestFalcon40B(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(40, 2))
	add := map[string]f32Tensor{}
	for i := range 4 {
		w, b := make([]float32, 128), make([]float32, 128)
		for j := range w {
			w[j], b[j] = float32(1+0.1*r.NormFloat64()), float32(0.1*r.NormFloat64())
		}
		add[fmt.Sprintf("blk.%d.attn_norm_2.weight", i)] = f32Tensor{[]uint64{128}, w}
		add[fmt.Sprintf("blk.%d.attn_norm_2.bias", i)] = f32Tensor{[]uint64{128}, b}
	}
	p := rewriteFile(t, genModel(t, dir, "falcon", func(s *mkmodel.Shape) { s.Layers = 4 }), nil, add)
	checkSHA(t, p, "a516ae6d0caff27ee97087f81b6d2d77420b0c61489b1af214f40d56d4774673")
	generatedScores(t, p, golden.Header.Tokens, []float64{-1669.0530521, -799.4466181, -780.8763155, -748.8256245})
}

// gpt2Shape is GPT-2's layout in 4 layers: tied, as many KV heads as
// heads.
func gpt2Shape(s *mkmodel.Shape) { s.Layers, s.Tied, s.KVHeads = 4, true, 4 }

// TestGPT2Positions: GPT-2 has a learned position for each of
// context_length tokens and no more: a context past it is refused at load,
// and a longer window at scoring, naming the limit.
func TestGPT2Positions(t *testing.T) {
	dir := oracle.Require(t)
	path := genModel(t, dir, "gpt2", gpt2Shape)
	_, err := Load(path, Options{Context: 4096})
	if want := "metadata gpt2.context_length = 2048: windows of 4096 tokens need learned positions past it"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("context 4096: got %v, want %q", err, want)
	}
	m, err := Load(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Score(make([]int32, 2048), 2047); err != nil {
		t.Errorf("2048 tokens: %v", err)
	}
	_, err = m.Score(make([]int32, 2049), 2048)
	if want := "a window of 2049 tokens, but gpt2 has learned positions for 2048"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("2049 tokens: got %v, want %q", err, want)
	}
}

// TestStarCoder: starcoder (StarCoder, SantaCoder), GPT-2's block in
// llama.cpp 0.7.0, here with one KV head: genModel's gpt2 file rewritten as
// starcoder, against llama.cpp's sums on the same bytes (24 windows in
// both builds: none off; here the first 4).
func TestStarCoder(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	p := archFile(t, genModel(t, dir, "gpt2", func(s *mkmodel.Shape) { s.Layers, s.KVHeads = 4, 1 }), "gpt2", "starcoder")
	checkSHA(t, p, "7683e7da7acb29a416f15d509b1ff8da067c36fb38e4f7ad407d6a3993c69b0f")
	generatedScores(t, p, golden.Header.Tokens, []float64{-1655.9604676, -802.8026469, -835.4099162, -776.4730250})
}

// TestOLMoClamp: olmo and dbrx with attention.clamp_kqv 0.5, where the clamp bites
// (OLMo 1.7's is 8 on its own scale), on genModel's file, against
// llama.cpp's sums on the same bytes (24 windows in both builds: none off;
// here the first 4; unclamped, the sums are 0.26 to 2.4 away). A negative
// clamp is refused.
func TestOLMoClamp(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "olmo", func(s *mkmodel.Shape) { s.Layers = 4 })
	p := rewriteFile(t, src, map[string]any{"olmo.attention.clamp_kqv": float32(0.5)}, nil)
	checkSHA(t, p, "df8edefe72a5522ce886069bbe2ba7168dda1618e98b2d337cbd4be0d362a874")
	generatedScores(t, p, golden.Header.Tokens, []float64{-1411.6994887, -697.6722010, -698.3665003, -683.8113338})
	checkRefusals(t, src, []refusal{
		{"negative clamp", map[string]any{"olmo.attention.clamp_kqv": float32(-1)}, nil, "metadata olmo.attention.clamp_kqv = -1, want >= 0"},
		{"no epsilon", map[string]any{"olmo.attention.layer_norm_epsilon": nil}, nil, "missing metadata olmo.attention.layer_norm_epsilon"},
	})

	// dbrx, clamped at 0.5 (its files say 8).
	src = genModel(t, dir, "dbrx", dbrxShape)
	p = rewriteFile(t, src, map[string]any{"dbrx.attention.clamp_kqv": float32(0.5)}, nil)
	checkSHA(t, p, "710d2e09514c77b265ba33342ee2be194bf573b7b7aac58211ab10ed948ee135")
	generatedScores(t, p, golden.Header.Tokens, []float64{-1604.1693755, -788.6388742, -818.0006431, -734.2188495})
	checkRefusals(t, src, []refusal{
		{"no clamp", map[string]any{"dbrx.attention.clamp_kqv": nil}, nil, "missing metadata dbrx.attention.clamp_kqv"},
		{"tied", nil, []string{"output.weight"}, "missing tensor output.weight (llama.cpp's dbrx reads no tied output)"},
	})
}

// graniteSWA is Granite 4.1's layout in 4 layers: a window of 40 keys in 3
// of every 4, RoPE in those only.
func graniteSWA(s *mkmodel.Shape) { s.Layers, s.Window = 4, 40 }

// TestGraniteSWAFlags: granite_swa's per-layer flags as integers
// (attention.rope_pattern [1 1 1 1]: RoPE in every layer) and a window
// wider than the text, on genModel's file, against llama.cpp's sums on the
// same bytes (24 windows in both builds: none off; here the first 4; the
// bools' file is 0.004 to 0.007 away per window). A flag array of the
// wrong length and experts are refused.
func TestGraniteSWAFlags(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "granite_swa", graniteSWA)
	p := rewriteFile(t, src, map[string]any{"granite_swa.attention.rope_pattern": []int32{1, 1, 1, 1}, "granite_swa.attention.sliding_window": uint32(4096)}, nil)
	checkSHA(t, p, "a54869b9a56399e1998e1d711165e6dd3eb3dbbe443f58d2ac82c9aa0c421100")
	generatedScores(t, p, golden.Header.Tokens, []float64{-1320.9840175, -664.4958294, -664.7691739, -661.9236226})
	checkRefusals(t, src, []refusal{
		{"short rope pattern", map[string]any{"granite_swa.attention.rope_pattern": []int32{1, 1}}, nil,
			"metadata granite_swa.attention.rope_pattern: want an array of 4 flags (one per layer)"},
		{"no window", map[string]any{"granite_swa.attention.sliding_window": nil}, nil, "missing metadata granite_swa.attention.sliding_window"},
		{"experts", map[string]any{"granite_swa.expert_count": uint32(8)}, nil, "granite_swa with experts or a vision projector's deepstack is not supported"},
		{"no sinks", nil, []string{"blk.2.attn_sinks.weight"}, "missing tensor blk.2.attn_sinks.weight"},
	})
}

// baichuan13B is Baichuan 13B's depth, 40 layers, which alone has ALiBi
// in llama.cpp (narrow: 96 wide, 6 heads of 16).
func baichuan13B(s *mkmodel.Shape) {
	s.Layers, s.Embd, s.Heads, s.KVHeads, s.HeadDim, s.FFN = 40, 96, 6, 6, 16, 128
}

// alibiShape is the ALiBi architectures' test layout: 4 layers 192 wide,
// 6 heads (ALiBi's slopes for 4 heads from m0, 2 from m1), no GQA.
func alibiShape(s *mkmodel.Shape) { s.Layers, s.Embd, s.Heads, s.KVHeads = 4, 192, 6, 6 }

// TestALiBiVariants: mpt and jais without attention.max_alibi_bias (no
// ALiBi and no positions, as llama.cpp 0.7.0 reads such files), mpt with
// attention.clamp_kqv 0.5 (it bites) and with learned positions beside
// ALiBi, on genModel's files, against llama.cpp's sums on the same bytes
// (24 windows in both builds: none off; here the first 4); a jais file
// without output.weight (llama.cpp refuses to load it) and mpt's q/k
// LayerNorms and AWQ scales are refused.
func TestALiBiVariants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	mpt, jais := genModel(t, dir, "mpt", alibiShape), genModel(t, dir, "jais", alibiShape)
	pos := make([]float32, 192*2048)
	for i := range pos {
		pos[i] = float32((i*7919)%1000-500) / 2000
	}
	for _, c := range []struct {
		name   string
		src    string
		set    map[string]any
		add    map[string]f32Tensor
		sha256 string
		sums   []float64
	}{
		{"mpt without max_alibi_bias", mpt, map[string]any{"mpt.attention.max_alibi_bias": nil}, nil,
			"63bb26e51c0f0f81b8c872057f141abf0594ee00d634b7d35d727fadb83cb85b", []float64{-1569.4222193, -800.8857909, -809.5391223, -787.0422538}},
		{"jais without max_alibi_bias", jais, map[string]any{"jais.attention.max_alibi_bias": nil}, nil,
			"2ac3c335b6c70d0479176018d8ab118833251b9cc94329cb95e848209d4df24e", []float64{-1586.6807816, -775.0748051, -795.0122668, -764.4271637}},
		{"mpt clamped", mpt, map[string]any{"mpt.attention.clamp_kqv": float32(0.5)}, nil,
			"a230ffe795bb521dbce7c65c46867c06edf3c4afa3675177886eaf0c086d9d95", []float64{-1590.9633227, -789.8958054, -795.4884538, -782.9029819}},
		{"mpt with positions", mpt, nil, map[string]f32Tensor{"position_embd.weight": {[]uint64{192, 2048}, pos}},
			"a2a1994e68d2a4ea16e5546ce04d5752e09e76ba8b86bf5a49ae4c6901aac97e", []float64{-1572.8313198, -808.0952173, -793.9292771, -795.4264155}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := rewriteFile(t, c.src, c.set, c.add)
			checkSHA(t, p, c.sha256)
			generatedScores(t, p, golden.Header.Tokens, c.sums)
		})
	}
	checkRefusals(t, jais, []refusal{
		{"jais tied", nil, []string{"output.weight"}, "missing tensor output.weight (llama.cpp's jais reads no tied output)"},
		{"negative bias", map[string]any{"jais.attention.max_alibi_bias": float32(-1)}, nil, "metadata jais.attention.max_alibi_bias = -1, want 0 to 1e4"},
	})
	checkRefusals(t, mpt, []refusal{
		{"no qkv", nil, []string{"blk.1.attn_qkv.weight"}, "missing tensor blk.1.attn_q.weight"},
	})
	for _, tn := range []string{"blk.0.attn_q_norm.weight", "blk.0.ffn_act.scales"} {
		name, _, _ := strings.Cut(tn, ".weight")
		name, _, _ = strings.Cut(name, ".scales")
		part := strings.TrimPrefix(name, "blk.0.")
		_, err := Load(rewriteFile(t, mpt, nil, map[string]f32Tensor{tn: {[]uint64{256}, make([]float32, 256)}}), Options{})
		if want := "tensor " + name + ": MPT with " + part + " is not supported"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", tn, err, want)
		}
	}
}

// bitnetTQ is a bitnet shape whose matrices TQ2_0 can hold (rows of 256):
// 256 wide, heads of 64, FFN 512.
func bitnetTQ(s *mkmodel.Shape) {
	s.Layers, s.Tied, s.Embd, s.FFN, s.Heads, s.KVHeads, s.HeadDim = 4, true, 256, 512, 4, 2, 64
}

// TestTiedRefused: bitnet and openelm files with an output matrix are
// refused, as llama.cpp 0.7.0 refuses them (both read the token
// embedding as their output: "wrong number of tensors"); and a qwen file
// with grouped KV heads, which llama.cpp's views would misread.
func TestTiedRefused(t *testing.T) {
	dir := oracle.Require(t)
	// qwen's fused rows are width-sized thirds in llama.cpp: grouped KV
	// heads are refused.
	qwen := genModel(t, dir, "qwen", func(s *mkmodel.Shape) { s.Layers, s.KVHeads = 2, 4 })
	checkRefusals(t, qwen, []refusal{{"grouped KV heads", map[string]any{"qwen.attention.head_count_kv": uint32(2)}, nil,
		"qwen: 4 heads and 2 KV heads of 32 for a width of 128: llama.cpp's qwen reads q, k and v as width-sized thirds of attn_qkv"}})
	for _, arch := range []string{"bitnet", "openelm"} {
		p := genModel(t, dir, arch, func(s *mkmodel.Shape) { s.Layers, s.Tied = 2, true })
		p = rewriteFile(t, p, nil, map[string]f32Tensor{"output.weight": {[]uint64{128, 32011}, make([]float32, 128*32011)}})
		if _, err := Load(p, Options{}); err == nil || !strings.Contains(err.Error(), "tensor output.weight: llama.cpp's "+arch+" reads the token embedding") {
			t.Errorf("%s: got %v", arch, err)
		}
	}
}

// mimo2Shape is MiMo-V2-Flash's layout in 4 layers: keys of 48, values of
// 32, RoPE over 16; 3 sliding layers of 4 over 40 keys with sinks and
// twice the KV heads; a dense first layer, then 8 experts, 2 used.
func mimo2Shape(s *mkmodel.Shape) {
	s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.HeadDim, s.Window = 4, 1, 8, 2, 64, 48, 40
}

// TestMiMo2Keys: mimo2 without attention.value_scale and
// rope.freq_base_swa, and with expert_weights_scale 2.5, softmax gating
// and expert_weights_norm false, which llama.cpp 0.7.0's mimo2 does not
// read (the same sums as without them), on genModel's files, against
// llama.cpp's sums on the same bytes (24 windows in both builds: none off;
// here the first 4); a pattern that is not an array, and a file without
// the window, refused, as llama.cpp refuses them.
func TestMiMo2Keys(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "mimo2", mimo2Shape)
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "no value scale or SWA base", sha256: "0a04a693be9cfd3f6ab7aad82be42d1c6125213845211523e99e8603662541cc",
			set:  map[string]any{"mimo2.attention.value_scale": nil, "mimo2.rope.freq_base_swa": nil},
			sums: []float64{-1596.2222109, -780.5253286, -801.5339793, -767.7455942}},
		{name: "keys llama.cpp does not read",
			set:  map[string]any{"mimo2.expert_weights_scale": float32(2.5), "mimo2.expert_gating_func": uint32(1), "mimo2.expert_weights_norm": false},
			sums: []float64{-1602.8364877, -787.2228912, -801.2911570, -763.9609880}},
	})
	checkRefusals(t, src, []refusal{
		{"a period", map[string]any{"mimo2.attention.sliding_window_pattern": uint32(2)}, nil,
			"metadata mimo2.attention.sliding_window_pattern: want an array of 4 flags (one per layer)"},
		{"no window", map[string]any{"mimo2.attention.sliding_window": nil}, nil, "missing metadata mimo2.attention.sliding_window"},
		{"tied", nil, []string{"output.weight"}, "missing tensor output.weight"},
	})
}

// step35Shape is Step-3.5-Flash's layout in 4 layers: a global layer of
// 4 heads, then 3 sliding over 40 keys with 6; a dense first layer, then
// 8 experts, 2 used, and a shared expert; SwiGLUs clamped at 0.25 (the
// experts) and 0.375 (the others) but in the last layer.
func step35Shape(s *mkmodel.Shape) {
	s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN, s.Window = 4, 1, 8, 2, 64, 64, 40
}

// TestStep35Variants: step35 with rope_freqs (16 factors: the global
// layers read the first 8, the sliding ones none), with
// rope.dimension_count_swa 16 (the sliding layers rotate half their
// heads), with one experts' limit for every layer and no shared one, and
// without blk.1's q/k norms and blk.2's gate, against llama.cpp's sums on
// the same bytes (24 windows in both builds: none off; here the first 4);
// and the files llama.cpp refuses refused: a pattern that is not an array,
// no expert_shared_feed_forward_length, no output matrix, no window.
func TestStep35Variants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "step35", step35Shape)
	factors := make([]float32, 16)
	for i := range factors {
		factors[i] = 1 + float32(i)*0.37
	}
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "rope_freqs", sha256: "241e17d6370c5b87eb20280e8a04c0b9f079d3bc9b5c84c120278030961bd3fd",
			add:  map[string]f32Tensor{"rope_freqs.weight": {[]uint64{16}, factors}},
			sums: []float64{-1588.5347054, -790.5503387, -811.7630192, -788.7122725}},
		// 127 log-probs each within 5.4e-8 of llama.cpp's printed ones
		// add up to 1.1e-6 in the first window.
		{name: "sliding dims", sha256: "6de1754b047d959ea6e206ef01c54b4b5e3e001ef7e5f5dad0e38cc248fe635b",
			set:  map[string]any{"step35.rope.dimension_count_swa": uint32(16)},
			sums: []float64{-1584.5679778, -793.6326732, -810.4641694, -790.3072931}, bound: 1.5e-6},
		{name: "one limit", sha256: "fad96ed21050d6ca62077b0ceb700cc2fc41c759174c3c99de5abc2072b86b1a",
			set:  map[string]any{"step35.swiglu_clamp_exp": float32(0.5), "step35.swiglu_clamp_shexp": nil},
			sums: []float64{-1608.7940032, -798.1909475, -799.6238766, -791.1701791}},
		{name: "optional tensors", sha256: "41b176686fb62627758d230ce87bc5c48f0b146deaa6acb15bb7c6a85d29eac3",
			drop: []string{"blk.1.attn_q_norm.weight", "blk.1.attn_k_norm.weight", "blk.2.attn_gate.weight"},
			sums: []float64{-1581.6612527, -798.1350223, -815.7846938, -786.7918714}},
	})
	checkRefusals(t, src, []refusal{
		{"a period", map[string]any{"step35.attention.sliding_window_pattern": uint32(1)}, nil,
			"metadata step35.attention.sliding_window_pattern: want an array of 4 flags (one per layer)"},
		{"no shared width", map[string]any{"step35.expert_shared_feed_forward_length": nil}, nil,
			"missing metadata step35.expert_shared_feed_forward_length"},
		{"no window", map[string]any{"step35.attention.sliding_window": nil}, nil, "missing metadata step35.attention.sliding_window"},
		{"tied", nil, []string{"output.weight"}, "missing tensor output.weight"},
		{"a lone q norm", nil, []string{"blk.1.attn_k_norm.weight"}, "layer 1: attn_q_norm and attn_k_norm must come together"},
	})
}

// kimiShape is Kimi-Linear's layout in 4 layers: 3 KDA layers of 4 heads
// of 32 with convolutions of 4 taps, then latent attention; a dense first
// layer, then 8 experts, 2 used, and a shared expert.
func kimiShape(s *mkmodel.Shape) {
	s.Layers, s.SSMConv, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 4, 4, 1, 8, 2, 64, 64
}

// TestKimiLinearKeys: kimi-linear with expert_weights_norm false, which
// llama.cpp 0.7.0 does not read (it renormalizes Kimi's weights: the same
// sums as with it), against llama.cpp's sums; and the files it refuses
// refused: no expert_gating_func, no kda.head_dim, no ssm.conv_kernel, a
// KDA layer without its convolution.
func TestKimiLinearKeys(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "kimi-linear", kimiShape)
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{{name: "no norm", set: map[string]any{"kimi-linear.expert_weights_norm": false},
		sums: []float64{-1637.0837594, -784.6017670, -781.0746519, -792.7773821}}})
	checkRefusals(t, src, []refusal{
		{"no gating", map[string]any{"kimi-linear.expert_gating_func": nil}, nil, "missing metadata kimi-linear.expert_gating_func"},
		{"no head size", map[string]any{"kimi-linear.kda.head_dim": nil}, nil, "missing metadata kimi-linear.kda.head_dim"},
		{"no taps", map[string]any{"kimi-linear.ssm.conv_kernel": nil}, nil, "missing metadata kimi-linear.ssm.conv_kernel"},
		{"no convolution", nil, []string{"blk.1.ssm_conv1d_k.weight"}, "missing tensor blk.1.ssm_conv1d_k.weight"},
	})
}

// TestKimiK3Variants: kimi-k3 without residual attention
// (attn_res.block_size 0, its scores dropped), banking every layer and
// every third, without the KDA gate's lower bound (kimi-linear's gate),
// without ffn_routed_norm, without the attention's gate, without a layer's
// shared expert, with softmax routing not renormalized and with SiTU's up
// branch uncapped (λ 0), and with F32 weights, against llama.cpp's sums on
// the same bytes (24 windows in both builds: none off; here the first 4);
// files llama.cpp
// refuses, crashes or aborts on refused by name.
func TestKimiK3Variants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "kimi-k3", kimiShape)
	scores := []string{"output_res_score.weight"}
	for _, l := range []string{"0", "1", "2", "3"} {
		scores = append(scores, "blk."+l+".attn_res_score.weight", "blk."+l+".ffn_res_score.weight")
	}
	var routedNorms []string
	for _, l := range []string{"1", "2", "3"} {
		routedNorms = append(routedNorms, "blk."+l+".ffn_routed_norm.weight")
	}
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "no residual attention", sha256: "9fa18fe7265c33b2d8a06c7211813860e96819ebcd88c6114feb8c34d26cfc29",
			set: map[string]any{"kimi-k3.attn_res.block_size": uint32(0)}, drop: scores,
			sums: []float64{-1603.6514750, -795.2054338, -789.5030051, -759.2133761}},
		{name: "block 1", sha256: "13e43d7034b7b01619c13cbbd7ee07ca754f32cf97f79147a27f087d8dc3d9c5",
			set:  map[string]any{"kimi-k3.attn_res.block_size": uint32(1)},
			sums: []float64{-1581.9071558, -791.1318167, -776.8406424, -754.0417726}},
		{name: "block 3", sha256: "b94f649728adbed987fb71f28d5e08d109b44cbcbddbc698e6d9ada4263f9448",
			set:  map[string]any{"kimi-k3.attn_res.block_size": uint32(3)},
			sums: []float64{-1602.6642869, -786.3128632, -774.6501379, -753.5334809}},
		{name: "no lower bound", sha256: "0ae96bd6bc5d06eb7f9aaea58e715a14d13639a13554cba2a20cefef3cf81604",
			set:  map[string]any{"kimi-k3.kda.gate_lower_bound": nil},
			sums: []float64{-1606.0268555, -805.2775297, -756.5655967, -759.6844051}},
		{name: "no routed norm", sha256: "3fdf6f319c8a8b4bb71ff9058f80c9618ebf22d5e235cbb10e5df3b8a6653a40", drop: routedNorms,
			sums: []float64{-1583.2228477, -800.4576383, -774.6056158, -742.0887627}},
		{name: "no attention gate", sha256: "dcbf2d51054c81ca8b43f7a1c334994f85a26bb3179d779b2cc8f1a2f073f7c5",
			drop: []string{"blk.3.attn_gate.weight"},
			sums: []float64{-1586.4385303, -803.6348844, -775.8892719, -733.1136729}},
		{name: "no shared expert in layer 2", sha256: "78e902fa068f889ce292bd589e81e1f52d4758be131ff3790d7d57516198a65c",
			drop: []string{"blk.2.ffn_gate_shexp.weight", "blk.2.ffn_up_shexp.weight", "blk.2.ffn_down_shexp.weight"},
			sums: []float64{-1587.0292304, -809.9950927, -777.5114284, -742.4032675}},
		{name: "softmax, not renormalized", sha256: "c159ad716dbeb94e7fd70659ceccf01685e23f5134d2984d668969052aeba12b",
			set:  map[string]any{"kimi-k3.expert_gating_func": uint32(1), "kimi-k3.expert_weights_norm": false},
			sums: []float64{-1583.6730115, -799.0336076, -780.3182091, -745.7772500}},
		{name: "up uncapped", sha256: "951c0d9d8523462b1af8087d086917b12a76c43f0f9c44326036432d527be6f7",
			set:  map[string]any{"kimi-k3.activation.situ_linear_beta": float32(0)},
			sums: []float64{-1575.3568513, -791.1089453, -779.6554479, -728.9020851}},
	})
	// F32 weights, every expert used: each product in float32 lanes. The
	// sums of llama.cpp's printed log-probs (9 digits) are within 2e-6 of
	// the exact sums over a window of 127 targets.
	f32 := genModelType(t, dir, "kimi-k3", "F32", func(s *mkmodel.Shape) { kimiShape(s); s.ExpertsUsed = 8 })
	checkSHA(t, f32, "bddcdabac833567358821a328118e159162f015bd56d97daf5606b4ed6a409f1")
	generatedScoresTo(t, f32, golden.Header.Tokens, []float64{-1577.2461500, -800.4269747, -772.7490071, -768.7322149}, 2e-6)
	kvb := make([]float32, 32*256)
	checkRefusals(t, src, []refusal{
		{"no SiTU beta", map[string]any{"kimi-k3.activation.situ_beta": nil}, nil, "missing metadata kimi-k3.activation.situ_beta"},
		{"SiTU beta 0", map[string]any{"kimi-k3.activation.situ_beta": float32(0)}, nil, "metadata kimi-k3.activation.situ_beta = 0, want above 0"},
		{"no block size", map[string]any{"kimi-k3.attn_res.block_size": nil}, nil, "missing metadata kimi-k3.attn_res.block_size"},
		{"bound 0", map[string]any{"kimi-k3.kda.gate_lower_bound": float32(0)}, nil, "metadata kimi-k3.kda.gate_lower_bound = 0, want below 0"},
		{"no shared count", map[string]any{"kimi-k3.expert_shared_count": nil}, nil, "missing metadata kimi-k3.expert_shared_count"},
		{"no gating", map[string]any{"kimi-k3.expert_gating_func": nil}, nil, "missing metadata kimi-k3.expert_gating_func"},
		{"no score", nil, []string{"blk.2.ffn_res_score.weight"}, "missing tensor blk.2.ffn_res_score.weight"},
		{"no selection bias", nil, []string{"blk.1.exp_probs_b.bias"}, "missing tensor blk.1.exp_probs_b.bias"},
		{"no full-rank gate", nil, []string{"blk.0.ssm_g.weight"}, "missing tensor blk.0.ssm_g.weight"},
		{"tied", nil, []string{"output.weight"}, "missing tensor output.weight"},
	})
	withKVB := rewriteFile(t, src, nil, map[string]f32Tensor{"blk.3.attn_kv_b.weight": {[]uint64{32, 256}, kvb}})
	if _, err := Load(withKVB, Options{}); err == nil || !strings.Contains(err.Error(), "kimi-k3: tensor blk.3.attn_kv_b: llama.cpp 0.7.0 runs kimi-k3's latent attention from attn_k_b and attn_v_b only") {
		t.Errorf("attn_kv_b: %v", err)
	}
}

// smallThinkerShape is SmallThinker's layout in 8 layers: 3 of 4 sliding,
// the others (0 and 4) global without RoPE; 8 experts, 2 used.
func smallThinkerShape(s *mkmodel.Shape) {
	s.Layers, s.Experts, s.ExpertsUsed, s.ExpertFFN = 8, 8, 2, 64
}

// TestSmallThinkerKeys: smallthinker in 4 layers without
// attention.sliding_window (every layer global with RoPE), against
// llama.cpp's sums on the same bytes (24 windows in both builds: none off;
// here the first 4), and in 4 layers with it (llama.cpp's step of 4
// without RoPE never taken at that depth) and with expert_weights_scale
// 2.5 and expert_weights_norm false, which llama.cpp's smallthinker does
// not read (the same sums); a file without expert_gating_func refused,
// where llama.cpp aborts.
func TestSmallThinkerKeys(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	four := func(s *mkmodel.Shape) { smallThinkerShape(s); s.Layers = 4 }
	src := genModel(t, dir, "smallthinker", four)
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "no window", sha256: "89a2ed3dac3d2b78cadecd9345e6c16b8c4da9218137f5a526a6cba7cf3a9eb9",
			set:  map[string]any{"smallthinker.attention.sliding_window": nil},
			sums: []float64{-1600.0336746, -805.2038554, -785.3939918, -792.1222132}},
		{name: "4 layers", sums: []float64{-1609.2674987, -808.7587346, -786.8804703, -790.3928195}},
		{name: "keys llama.cpp does not read",
			set:  map[string]any{"smallthinker.expert_weights_scale": float32(2.5), "smallthinker.expert_weights_norm": false},
			sums: []float64{-1609.2674987, -808.7587346, -786.8804703, -790.3928195}},
	})
	checkRefusals(t, src, []refusal{
		{"no gating", map[string]any{"smallthinker.expert_gating_func": nil}, nil, "missing metadata smallthinker.expert_gating_func"},
	})
}

// mambaShape is Mamba-1's mixer with a state of 16 and 4 taps (d_inner
// twice the width, dt_rank 8); mamba2Shape Mamba-2's of 8 heads of 32 in
// one group, as wide; jambaShape Jamba's layout in 4 layers: Mamba-1 in
// 0, 1 and 3, attention in 2, 8 experts of the FFN's width (2 used) in 1
// and 3.
func mambaShape(s *mkmodel.Shape) { s.SSMState, s.SSMConv = 16, 4 }
func mamba2Shape(s *mkmodel.Shape) {
	s.SSMState, s.SSMKHeads, s.SSMVHeads, s.SSMHeadDim, s.SSMConv = 16, 1, 8, 32, 4
}
func jambaShape(s *mkmodel.Shape) {
	s.Layers, s.SSMState, s.SSMConv, s.AttnInterval, s.Experts, s.ExpertsUsed, s.ExpertFFN = 4, 16, 4, 4, 8, 2, s.FFN
}

// TestJambaKeys: jamba with expert_weights_norm true and
// expert_weights_scale 2.5, which llama.cpp's jamba does not read (its
// sums on the rewritten bytes: the same); files without what llama.cpp
// requires refused with the key or tensor named: Mamba-1's sizes, the
// norms of jamba's dt, B and C, and mamba2's grouped norm.
func TestJambaKeys(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "jamba", jambaShape)
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "keys llama.cpp does not read", sha256: "b7fbd553efd964d84eb8c9df695629c9e7f9b601ba9394cf63cbf103fbc01e64",
			set:  map[string]any{"jamba.expert_weights_norm": true, "jamba.expert_weights_scale": float32(2.5)},
			sums: []float64{-1623.6113328, -794.4661843, -804.5443884, -766.8857456}},
	})
	checkRefusals(t, src, []refusal{
		{"no rank", map[string]any{"jamba.ssm.time_step_rank": nil}, nil, "missing metadata jamba.ssm.time_step_rank"},
		{"no B norm", nil, []string{"blk.1.ssm_b_norm.weight"}, "missing tensor blk.1.ssm_b_norm.weight"},
		{"no KV heads", map[string]any{"jamba.attention.head_count_kv": nil}, nil, "missing metadata jamba.attention.head_count_kv"},
	})
	checkRefusals(t, genModel(t, dir, "mamba", mambaShape), []refusal{
		{"no state", map[string]any{"mamba.ssm.state_size": nil}, nil, "missing metadata mamba.ssm.state_size"},
		{"heads", map[string]any{"mamba.attention.head_count": uint32(4)}, nil, "mamba has no attention, but the file gives 4 heads"},
		{"FFN", map[string]any{"mamba.feed_forward_length": uint32(64)}, nil, "mamba has no FFN, but the file gives an FFN of 64"},
		{"no decays", nil, []string{"blk.0.ssm_a"}, "missing tensor blk.0.ssm_a"},
	})
	checkRefusals(t, genModel(t, dir, "mamba2", mamba2Shape), []refusal{
		{"no groups", map[string]any{"mamba2.ssm.group_count": nil}, nil, "missing metadata mamba2.ssm.group_count"},
		{"no norm", nil, []string{"blk.1.ssm_norm.weight"}, "missing tensor blk.1.ssm_norm.weight"},
	})
}

// minicpm3Shape is MiniCPM3's layout in 4 layers: key heads of 48 (32
// unrotated, 16 rotated), values of 32, a KV head per head.
func minicpm3Shape(s *mkmodel.Shape) { s.Layers, s.KVHeads = 4, 4 }

// grokShape is Grok-2's layout in 4 layers: 8 experts of 128 (2 used)
// beside a dense MLP of the FFN's width.
func grokShape(s *mkmodel.Shape) {
	s.Layers, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 4, 8, 2, 128, s.FFN
}

// TestGrokKeys: Grok-1's layout (no dense MLP) without its multipliers'
// and soft-caps' keys, which llama.cpp then takes as Grok-1's values (and
// no final soft-cap), against llama.cpp's sums on the same bytes (24
// windows in both builds: none off; here the first 4); a file without
// experts refused, as llama.cpp refuses it; minicpm3 files without what
// its latent attention needs, or with values wider than its keys, refused.
func TestGrokKeys(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "grok", func(s *mkmodel.Shape) { grokShape(s); s.SharedFFN = 0 })
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "Grok-1's defaults", sha256: "07c3a7681cc1d74bea64ef5d90a6ba7c6fac110519738913c25305d46aecabf2",
			set: map[string]any{"grok.final_logit_softcapping": nil, "grok.embedding_scale": nil, "grok.attention.output_scale": nil,
				"grok.attn_logit_softcapping": nil, "grok.logit_scale": nil},
			sums: []float64{-1425.8512033, -707.6988910, -709.9058910, -683.9575078}},
	})
	checkRefusals(t, src, []refusal{
		{"no experts", map[string]any{"grok.expert_count": nil}, nil, "missing metadata grok.expert_count"},
	})
	checkRefusals(t, genModel(t, dir, "minicpm3", minicpm3Shape), []refusal{
		{"no latent rank", map[string]any{"minicpm3.attention.kv_lora_rank": nil}, nil, "missing metadata minicpm3.attention.kv_lora_rank"},
		{"values wider than keys", map[string]any{"minicpm3.attention.value_length": uint32(64)}, nil, "values of 64"},
		{"no q norm", nil, []string{"blk.2.attn_q_a_norm.weight"}, "missing tensor blk.2.attn_q_a_norm.weight"},
	})
}

// plamo2Shape is PLaMo 2's layout in 4 layers: Mamba in 0 and 2 (4
// heads of 32, states of 16), attention in 1 and 3.
func plamo2Shape(s *mkmodel.Shape) {
	s.Layers, s.SSMState, s.SSMVHeads, s.SSMHeadDim, s.SSMConv, s.AttnInterval = 4, 16, 4, 32, 4, 2
}

// plamo3Shape is PLaMo 3's layout in 4 layers: layers 0 and 2 sliding
// over 40 keys with RoPE of half the base (a pattern of 2), 1 and 3 global.
func plamo3Shape(s *mkmodel.Shape) { s.Layers, s.Window = 4, 40 }

// TestPlamo3Variants: plamo3 without attention.sliding_window_pattern
// (llama.cpp's period of 8: all 4 layers slide) against llama.cpp's sums
// on the same bytes (24 windows in both builds: none off; here the first
// 4), and with its post-norms named with ".weight", as converters write
// norms (llama.cpp 0.7.0 binds them without: the same weights, the base
// file's sums); a file without a post-norm refused; plamo2 files with
// B and C in groups, or without a norm llama.cpp requires, refused.
func TestPlamo3Variants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "plamo3", plamo3Shape)
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	suffixed, bare := map[string]f32Tensor{}, []string{}
	for _, tn := range f.Tensors {
		if strings.HasSuffix(tn.Name, ".post_attention_norm") || strings.HasSuffix(tn.Name, ".post_ffw_norm") {
			suffixed[tn.Name+".weight"] = f32Tensor{tn.Shape, f32Floats(f.Data(tn))}
			bare = append(bare, tn.Name)
		}
	}
	f.Close()
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "no pattern", sha256: "90fab65ef9ab0b2cff77c37edf8ff7267a184f1c03598bcaef7d96b6a66f5b7a",
			set:  map[string]any{"plamo3.attention.sliding_window_pattern": nil},
			sums: []float64{-1613.1345614, -806.3392720, -817.3961871, -738.8281376}},
		{name: "post-norms with .weight", add: suffixed, drop: bare,
			sums: []float64{-1605.7084569, -807.4939487, -799.7961393, -737.3267244}},
	})
	checkRefusals(t, src, []refusal{
		{"no post-norm", nil, []string{"blk.2.post_ffw_norm"}, "missing tensor blk.2.post_ffw_norm"},
	})
	checkRefusals(t, genModel(t, dir, "plamo2", plamo2Shape), []refusal{
		{"groups", map[string]any{"plamo2.ssm.group_count": uint32(1)}, nil, "plamo2.ssm.group_count = 1: PLaMo-2's is 0"},
		{"no dt norm", nil, []string{"blk.0.ssm_dt_norm"}, "missing tensor blk.0.ssm_dt_norm"},
		{"no q norm", nil, []string{"blk.1.attn_q_norm.weight"}, "missing tensor blk.1.attn_q_norm.weight"},
	})
}

// fileVariant is a generated file rewritten (rewriteFile's set, add and
// drop) and llama.cpp's sums on its first windows, checked to bound (1e-6
// when 0), the rewritten file's sha256 pinned when given.
type fileVariant struct {
	name, sha256 string
	set          map[string]any
	add          map[string]f32Tensor
	drop         []string
	sums         []float64
	bound        float64
}

// checkVariants scores each variant of src against its sums.
func checkVariants(t *testing.T, src string, tokens []int32, vs []fileVariant) {
	t.Helper()
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			p := rewriteFile(t, src, v.set, v.add, v.drop...)
			if v.sha256 != "" {
				checkSHA(t, p, v.sha256)
			}
			generatedScoresTo(t, p, tokens, v.sums, cmp.Or(v.bound, 1e-6))
		})
	}
}

// TestPanguBiases: pangu-embedded's q, k and v biases are optional in
// llama.cpp 0.7.0 and attn_output's required: a file without blk.1's q
// bias against llama.cpp's sums on the same bytes (24 windows in both
// builds: none off; here the first 4), and one without its output bias
// refused, as llama.cpp refuses it; maincoder's q norm and jais2's MLP
// biases are required, as in llama.cpp.
func TestPanguBiases(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	four := func(s *mkmodel.Shape) { s.Layers = 4 }
	src := genModel(t, dir, "pangu-embedded", four)
	p := rewriteFile(t, src, nil, nil, "blk.1.attn_q.bias")
	checkSHA(t, p, "d07a0379c3ddd041b17ee7e202b82eda8abef57d822c56455f2b24550b0f5556")
	generatedScores(t, p, golden.Header.Tokens, []float64{-1629.0119168, -812.0129769, -798.6145682, -768.6315984})
	checkRefusals(t, src, []refusal{{"no output bias", nil, []string{"blk.1.attn_output.bias"}, "missing tensor blk.1.attn_output.bias"}})
	checkRefusals(t, genModel(t, dir, "maincoder", four), []refusal{{"no q norm", nil, []string{"blk.1.attn_q_norm.weight"}, "missing tensor blk.1.attn_q_norm.weight"}})
	checkRefusals(t, genModel(t, dir, "jais2", four), []refusal{{"no up bias", nil, []string{"blk.1.ffn_up.bias"}, "missing tensor blk.1.ffn_up.bias"}})
}

// baichuan7B is Baichuan 2 7B's depth, 32 layers, which alone has RoPE in
// llama.cpp (narrow: 64 wide, 2 heads).
func baichuan7B(s *mkmodel.Shape) { s.Layers, s.Embd, s.Heads, s.KVHeads, s.FFN = 32, 64, 2, 2, 128 }

// mellumShape is Mellum's layout in 4 layers: a window of 40 keys in 3 of
// every 4, 8 experts of 64, 2 used.
func mellumShape(s *mkmodel.Shape) {
	s.Layers, s.Window, s.Experts, s.ExpertsUsed, s.ExpertFFN = 4, 40, 8, 2, 64
}

// bailingMoE gives a bailingmoe model 3 layers, 8 experts of 64 (2 used)
// and a shared expert as wide.
func bailingMoE(s *mkmodel.Shape) {
	s.Layers, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 3, 8, 2, 64, 64
}

// dbrxShape is DBRX's layout in 4 layers: 8 experts as wide as the FFN, 2
// used.
func dbrxShape(s *mkmodel.Shape) { s.Layers, s.Experts, s.ExpertsUsed, s.ExpertFFN = 4, 8, 2, s.FFN }

// TestCodeShell: codeshell, starcoder2's block in llama.cpp 0.7.0:
// genModel's starcoder2 file rewritten as codeshell gives starcoder2's
// sums, llama.cpp's on the same bytes (24 windows in both builds: none
// off, with q, k and v apart and fused; here the first 4). A tied file is
// refused.
func TestCodeShell(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	p := archFile(t, genModel(t, dir, "starcoder2", func(s *mkmodel.Shape) { s.Layers = 4 }), "starcoder2", "codeshell")
	checkSHA(t, p, "02f2b821fb73693c6691e7146b98eb4f6f67a16a7f4222fa1b636fb37811c783")
	generatedScores(t, p, golden.Header.Tokens, []float64{-1617.3382170, -807.4645491, -797.6728274, -774.4438020})
	checkRefusals(t, p, []refusal{
		{"tied", nil, []string{"output.weight"}, "missing tensor output.weight (llama.cpp's codeshell reads no tied output)"},
	})
}

// TestOLMo3Pattern: OLMo 3's sliding layers by attention.sliding_window_pattern
// as a period, 2 (layers 0 and 2 sliding), rather than the converter's
// flags, and with the flags [false, true, true, true], on genModel's file,
// against llama.cpp's sums on the same bytes (24 windows in both builds:
// none off; here the first 4). A flag array of the wrong length is refused.
func TestOLMo3Pattern(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "olmo2", olmo3)
	for _, c := range []struct {
		pattern any
		sha256  string
		sums    []float64
	}{
		{uint32(2), "517372238fc188cc6a761df1422035710a9136d0217f42eb7cd5ad7b7f3daf75",
			[]float64{-1589.9949773, -805.8500482, -779.3284105, -771.6833987}},
		{[]bool{false, true, true, true}, "569f7a5199dbf1b3291a00bff831dff299a32d8baece77ea316e7c6d536ef537",
			[]float64{-1601.0213197, -795.4077451, -789.0674243, -789.4775254}},
	} {
		p := rewriteFile(t, src, map[string]any{"olmo2.attention.sliding_window_pattern": c.pattern}, nil)
		checkSHA(t, p, c.sha256)
		generatedScores(t, p, golden.Header.Tokens, c.sums)
	}
	p := rewriteFile(t, src, map[string]any{"olmo2.attention.sliding_window_pattern": []bool{true, true, false}}, nil)
	_, err = Load(p, Options{})
	if want := "metadata olmo2.attention.sliding_window_pattern: want an array of 4 flags (one per layer)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %q", err, want)
	}
}

// graniteHybrid gives a granitehybrid model 4 layers, the 4th attention
// and the others Mamba-2 (8 heads of 32 in 2 groups, kernel 4): without
// positions (as Granite-4.0-H's files) and with states of 128, Granite
// 4.0's (ggml's scan in whole vector steps); or with RoPE, experts (8, 2
// used) and a shared expert, and states of 16 (its scan's element loop).
func graniteHybrid(moe bool) func(*mkmodel.Shape) {
	return func(s *mkmodel.Shape) {
		s.Layers, s.SSMKHeads, s.SSMVHeads, s.SSMHeadDim, s.SSMConv, s.AttnInterval = 4, 2, 8, 32, 4, 4
		s.SSMState, s.NoPE = 128, true
		if moe {
			s.SSMState, s.NoPE = 16, false
			s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 8, 2, s.FFN, 64
		}
	}
}

// gemma2 gives a gemma2 model (tied, as llama.cpp's gemma2 reads no output
// matrix) layers of heads of hd and a sliding window of 40 keys in its
// even layers; 46 layers is llama.cpp's 27B, whose queries are scaled by
// n_embd/n_head (32 here), not the head size (its FFN is 128 to keep the
// file small).
func gemma2(layers, hd int) func(*mkmodel.Shape) {
	return func(s *mkmodel.Shape) {
		s.Layers, s.HeadDim, s.Window, s.Tied = layers, hd, 40, true
		if layers == 46 {
			s.FFN = 128
		}
	}
}

// TestGemma2Refused: gemma2 files whose soft-caps or window do not fit are
// refused at load, naming the key.
func TestGemma2Refused(t *testing.T) {
	dir := oracle.Require(t)
	checkRefusals(t, genModel(t, dir, "gemma2", gemma2(4, 32)), []refusal{
		{"negative attention cap", map[string]any{"gemma2.attn_logit_softcapping": float32(-1)}, nil, "gemma2.attn_logit_softcapping = -1, want >= 0"},
		{"negative final cap", map[string]any{"gemma2.final_logit_softcapping": float32(-30)}, nil, "gemma2.final_logit_softcapping = -30, want >= 0"},
		{"no window", map[string]any{"gemma2.attention.sliding_window": nil}, nil, "gemma2.attention.sliding_window"},
	})
}

// llama4 gives a llama4 model 4 layers (the fourth without RoPE), experts
// of ff (one used per token; 128 of them is Maverick's count, for which
// llama.cpp norms no q and k) and a shared expert as wide, every step-th
// layer (0: every layer).
func llama4(experts, ff, step int) func(*mkmodel.Shape) {
	return func(s *mkmodel.Shape) {
		s.Layers, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN, s.MoEStep = 4, experts, 1, ff, ff, step
	}
}

// TestLlama4Refused: a file without chunks (attention.sliding_window 0,
// on which llama.cpp 0.7.0 aborts), a bad MoE step and a missing shared
// expert are refused at load.
func TestLlama4Refused(t *testing.T) {
	dir := oracle.Require(t)
	path := genModel(t, dir, "llama4", llama4(8, 64, 0))
	checkRefusals(t, path, []refusal{
		{"no chunks", map[string]any{"llama4.attention.sliding_window": uint32(0)}, nil, "llama4.attention.sliding_window = 0: Llama 4 without chunked attention is not supported"},
		{"step 0", map[string]any{"llama4.interleave_moe_layer_step": uint32(0)}, nil, "llama4.interleave_moe_layer_step = 0, want > 0"},
		{"no shared expert", nil, []string{"blk.1.ffn_up_shexp.weight", "blk.1.ffn_gate_shexp.weight", "blk.1.ffn_down_shexp.weight"}, "missing tensor blk.1.ffn_up_shexp.weight"},
	})
}

// TestLlama4Chunked: a window of 9000 tokens of code-go-strings, past
// Llama 4's chunk of 8192, on TestGeneratedLlama's llama4 file (its layers
// with RoPE attending only within their chunk from position 8192 on, its
// NoPE layer scaling the queries from position 8191 on), in the int8 mode
// with an f16 cache: llama.cpp 0.7.0's sum of log-probs (the oracle's
// tools/oracle.cpp, n_ctx 9000) to 1e-5 over 8999 targets (each within
// 1e-6 of llama.cpp's, measured). Dense attention without the temperature gives -110462.51, 72
// nats off.
func TestLlama4Chunked(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__code-go-strings__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	path := genModel(t, dir, "llama4", llama4(8, 64, 0))
	checkSHA(t, path, "02a28698a5ece99378206e94ee928c3c247f7033f623bb09896c2a8741fa1ebb")
	m, err := Load(path, Options{KVDtype: "f16", Activations: ActInt8, Context: 9000})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	scoreSums(t, m, "llama4, 9000 tokens", golden.Header.Tokens, []window{{0, 9000, 1}}, []float64{-110534.5082384}, 1e-5)
}

// qwen35Shape gives a qwen35 model (moe: qwen35moe, 256 wide, 8 experts of 256,
// 2 used, and a shared expert as wide) 4 layers, the last gated attention
// (a quarter of its heads' dims rotated), the others Gated DeltaNet with
// 2 key and 4 value heads of state, the head size.
func qwen35Shape(moe bool, state int) func(*mkmodel.Shape) {
	return func(s *mkmodel.Shape) {
		s.Layers, s.SSMState, s.SSMKHeads, s.SSMVHeads, s.SSMConv, s.AttnInterval, s.RopeDims = 4, state, 2, 4, 4, 4, 8
		if moe {
			s.Embd, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 256, 8, 2, 256, 256
		}
	}
}

// TestGraniteHybridRefused: granitehybrid files whose Mamba-2 metadata or
// tensors do not fit are refused at load with a one-line error naming the
// key or tensor, not run.
func TestGraniteHybridRefused(t *testing.T) {
	dir := oracle.Require(t)
	path := genModel(t, dir, "granitehybrid", graniteHybrid(true))
	checkRefusals(t, path, []refusal{
		{"no state size", map[string]any{"granitehybrid.ssm.state_size": nil}, nil, "granitehybrid.ssm.state_size"},
		{"inner not heads", map[string]any{"granitehybrid.ssm.inner_size": uint32(250)}, nil, "ssm.inner_size = 250 is not a multiple of ssm.time_step_rank = 8"},
		{"heads not groups", map[string]any{"granitehybrid.ssm.group_count": uint32(3), "granitehybrid.ssm.inner_size": uint32(255)}, nil, "not a multiple of ssm.time_step_rank"},
		{"KV heads disagree", map[string]any{"granitehybrid.block_count": uint32(4), "granitehybrid.attention.head_count_kv": []uint32{0, 1, 0, 2}}, nil, "layer 1 has 1 KV heads"},
		{"no conv bias", nil, []string{"blk.1.ssm_conv1d.bias"}, "missing tensor blk.1.ssm_conv1d.bias"},
		{"no shared expert", nil, []string{"blk.0.ffn_up_shexp.weight", "blk.0.ffn_gate_shexp.weight", "blk.0.ffn_down_shexp.weight"}, "blk.0.ffn_"},
		{"rope switch not a bool", map[string]any{"granitehybrid.rope.scaling.finetuned": uint32(1)}, nil, "rope.scaling.finetuned"},
	})
}

// nemotronH gives a nemotron_h or nemotron_h_moe model Nemotron-H's kinds of
// block, Mamba-2, ReLU² MLP, Mamba-2, attention, MLP (8 heads of 32 in 2
// groups, states of 64), the MLPs experts (8, 2 used, of 64) and a shared
// expert in nemotron_h_moe.
func nemotronH(moe bool) func(*mkmodel.Shape) {
	return func(s *mkmodel.Shape) {
		s.Layers, s.Layout = 5, "MFMAF"
		s.SSMKHeads, s.SSMVHeads, s.SSMHeadDim, s.SSMConv, s.SSMState = 2, 8, 32, 4, 64
		if moe {
			s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 8, 2, 64, 64
		}
	}
}

// TestNemotronHRefused: nemotron_h_moe files without what llama.cpp 0.7.0
// needs are refused at load with a one-line error naming the key or
// tensor: the experts' scale (llama.cpp would scale them by 0), the
// selection bias, the shared expert, a Mamba-2 layer's decays.
func TestNemotronHRefused(t *testing.T) {
	dir := oracle.Require(t)
	path := genModel(t, dir, "nemotron_h_moe", nemotronH(true))
	checkRefusals(t, path, []refusal{
		{"no experts' scale", map[string]any{"nemotron_h_moe.expert_weights_scale": nil}, nil, "missing metadata nemotron_h_moe.expert_weights_scale"},
		{"no selection bias", nil, []string{"blk.1.exp_probs_b.bias"}, "blk.1.exp_probs_b.bias"},
		{"no shared expert", nil, []string{"blk.4.ffn_up_shexp.weight", "blk.4.ffn_down_shexp.weight"}, "blk.4.ffn_up_shexp.weight"},
		{"no decays", nil, []string{"blk.2.ssm_a"}, "missing tensor blk.2.ssm_a"},
		{"FFN widths not per layer", map[string]any{"nemotron_h_moe.feed_forward_length": []uint32{0, 256}}, nil, "nemotron_h_moe.feed_forward_length"},
	})
}

// TestFalconH1Refused: a falcon-h1 file with a layer without attention, or
// without a tensor llama.cpp requires (its FFN norm as llama.cpp names it,
// dt's bias), gives a one-line error naming it.
func TestFalconH1Refused(t *testing.T) {
	dir := oracle.Require(t)
	path := genModel(t, dir, "falcon-h1", falconH1(false))
	checkRefusals(t, path, []refusal{
		{"a layer without attention", map[string]any{"falcon-h1.attention.head_count_kv": []uint32{2, 0, 2, 2}}, nil, "layer 1 has none"},
		{"no FFN norm", nil, []string{"blk.2.ffn_norm"}, "missing tensor blk.2.ffn_norm"},
		{"no dt bias", nil, []string{"blk.3.ssm_dt.bias"}, "missing tensor blk.3.ssm_dt.bias"},
	})
}

// TestCohere2Refused: a cohere2 file without attention.layer_norm_epsilon
// or attention.sliding_window (llama.cpp requires both), or with an
// output.weight (llama.cpp refuses it), and a command-r file with Command
// R+'s q/k norms (not implemented), give a one-line error naming it.
func TestCohere2Refused(t *testing.T) {
	dir := oracle.Require(t)
	path := genModel(t, dir, "cohere2", cohere2Shape(40))
	out := map[string]f32Tensor{"output.weight": {[]uint64{128, 32011}, make([]float32, 128*32011)}}
	checkRefusals(t, path, []refusal{
		{"no LayerNorm epsilon", map[string]any{"cohere2.attention.layer_norm_epsilon": nil}, nil, "missing metadata cohere2.attention.layer_norm_epsilon"},
		{"no window", map[string]any{"cohere2.attention.sliding_window": nil}, nil, "missing metadata cohere2.attention.sliding_window"},
	})
	t.Run("an output matrix", func(t *testing.T) {
		_, err := Load(rewriteFile(t, path, nil, out), Options{})
		if want := "cohere2: the file has output.weight"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	})
	t.Run("Command R+'s q norms in 4 layers", func(t *testing.T) {
		cr := genModel(t, dir, "command-r", func(s *mkmodel.Shape) { s.Layers, s.Tied = 4, true })
		qn := map[string]f32Tensor{"blk.0.attn_q_norm.weight": {[]uint64{32, 4}, make([]float32, 128)}}
		_, err := Load(rewriteFile(t, cr, nil, qn), Options{})
		if want := "command-r: the file has blk.0.attn_q_norm.weight (Command R+'s q/k norms), which llama.cpp 0.7.0 reads only in files of 64 layers or more"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	})
	checkRefusals(t, genModel(t, dir, "command-r", commandRPlus), []refusal{
		{"64 layers without a k norm", nil, []string{"blk.5.attn_k_norm.weight"}, "missing tensor blk.5.attn_k_norm.weight"},
	})
}

// commandRPlus gives a command-r model Command R+'s per-head q/k
// LayerNorms and the 64 layers llama.cpp reads them in (narrow: 64 wide,
// 2 heads and 1 KV head of 32, FFN 128), tied.
func commandRPlus(s *mkmodel.Shape) {
	s.Layers, s.Embd, s.Heads, s.KVHeads, s.FFN, s.Tied, s.QKLayerNorm = 64, 64, 2, 1, 128, true, true
}

// TestMamba2Blocks: a Mamba-2 layer, and LFM2's short convolution, compute
// a window's rows in blocks (deltaRows of them), carrying the
// convolution's history and the state from one block to the next; blocks
// of 1, 7 and 37 rows score a window of 100 bit for bit as one block does,
// in both modes, on a granitehybrid, a nemotron_h and an lfm2 model (the
// scan is per token, its roundings do not depend on the blocks).
func TestMamba2Blocks(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	toks := golden.Header.Tokens[:100]
	for _, c := range []struct {
		arch string
		set  func(*mkmodel.Shape)
	}{{"granitehybrid", graniteHybrid(false)}, {"nemotron_h", nemotronH(false)}, {"lfm2", lfm2(false)}} {
		path := genModel(t, dir, c.arch, c.set)
		for _, act := range []string{ActFP32, ActInt8} {
			m, err := Load(path, Options{Activations: act})
			if err != nil {
				t.Fatal(err)
			}
			var rowsOf []*int
			var layers []decoderLayer
			switch net := m.net.(type) {
			case ssmDecoder:
				layers = net.layers
			case shortConvDecoder:
				layers = net.layers
			}
			for _, ly := range layers {
				switch mx := ly.mixer.(type) {
				case *mamba2:
					rowsOf = append(rowsOf, &mx.rows)
				case *shortConv:
					rowsOf = append(rowsOf, &mx.rows)
				}
			}
			whole, err := m.Score(toks, 1)
			if err != nil {
				t.Fatal(err)
			}
			for _, rows := range []int{1, 7, 37} {
				for _, r := range rowsOf {
					*r = rows
				}
				r, err := m.Score(toks, 1)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(r.Logprobs, whole.Logprobs) {
					t.Errorf("%s %s: blocks of %d rows score otherwise than one block", c.arch, act, rows)
				}
			}
			m.Close()
		}
	}
}

// lfm2 gives an lfm2 or lfm2moe model 4 layers, the 2nd and 4th attention
// and the others short convolutions of 3 taps (LFM2's), lfm2moe's FFNs
// past the first layer 8 experts of 64, 2 used.
func lfm2(moe bool) func(*mkmodel.Shape) {
	return func(s *mkmodel.Shape) {
		s.Layers, s.SSMConv, s.AttnInterval = 4, 3, 2
		if moe {
			s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN = 1, 8, 2, 64
		}
	}
}

// TestLFM2Refused: lfm2moe files without what llama.cpp 0.7.0 needs are
// refused at load with a one-line error naming the key or tensor.
func TestLFM2Refused(t *testing.T) {
	dir := oracle.Require(t)
	path := genModel(t, dir, "lfm2moe", lfm2(true))
	checkRefusals(t, path, []refusal{
		{"no taps", map[string]any{"lfm2moe.shortconv.l_cache": nil}, nil, "missing metadata lfm2moe.shortconv.l_cache"},
		{"one tap", map[string]any{"lfm2moe.shortconv.l_cache": uint32(1)}, nil, "lfm2moe.shortconv.l_cache = 1, want at least 2"},
		{"no convolution", nil, []string{"blk.2.shortconv.conv.weight"}, "missing tensor blk.2.shortconv.conv.weight"},
		{"no selection bias", nil, []string{"blk.1.exp_probs_b.bias"}, "blk.1.exp_probs_b.bias"},
		{"no final norm", nil, []string{"token_embd_norm.weight"}, "missing tensor token_embd_norm.weight"},
		{"KV heads disagree", map[string]any{"lfm2moe.attention.head_count_kv": []uint32{0, 2, 0, 1}}, nil, "layer 3 has 1 KV heads"},
	})
}

// refusal is a file rewritten by set and drop (rewriteFile) that Load
// must refuse with an error containing want.
type refusal struct {
	name string
	set  map[string]any
	drop []string
	want string
}

// checkRefusals loads path rewritten by each case and wants a one-line
// error that contains the case's want.
func checkRefusals(t *testing.T, path string, cases []refusal) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(rewriteFile(t, path, c.set, nil, c.drop...), Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("got %v, want a line with %q", err, c.want)
			}
		})
	}
}

// falconH1 gives a falcon-h1 model 4 layers, Mamba-2 mixers of 8 heads of
// 32 in 2 groups with states of 16 beside the attention; noNorm leaves out
// the mixers' ssm_norm.
func falconH1(noNorm bool) func(*mkmodel.Shape) {
	return func(s *mkmodel.Shape) {
		s.Layers, s.SSMKHeads, s.SSMVHeads, s.SSMHeadDim, s.SSMConv, s.SSMState = 4, 2, 8, 32, 4, 16
		s.SSMNoNorm = noNorm
	}
}

// deci gives a deci model of 5 layers: attention, "linear attention",
// no attention, attention without an MLP (which llama.cpp skips whole),
// attention.
func deci(s *mkmodel.Shape) { s.Layers, s.Layout = 5, "ALFNA" }

// deepSeek gives a deepseek model of 3 layers, the first dense, then 8
// experts of 64 (2 used) and 2 shared experts.
func deepSeek(s *mkmodel.Shape) {
	s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 3, 1, 8, 2, 64, 128
}

// miniCPM gives a minicpm model of 4 layers, tied as MiniCPM 2B.
func miniCPM(s *mkmodel.Shape) { s.Layers, s.Tied = 4, true }

// TestMiniCPMDefaults: a minicpm file without embedding_scale,
// residual_scale and logit_scale (the older converters') gets llama.cpp's
// defaults, 12, 1.4/sqrt(block_count) and 256/n_embd, to the last digit
// llama.cpp prints; one with LongRoPE factors is refused, as llama.cpp
// refuses it.
func TestMiniCPMDefaults(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	path := genModel(t, dir, "minicpm", miniCPM)
	bare := rewriteFile(t, path, map[string]any{"minicpm.embedding_scale": nil, "minicpm.residual_scale": nil, "minicpm.logit_scale": nil}, nil)
	generatedScores(t, bare, golden.Header.Tokens, []float64{-1358.8445979, -704.0466920, -692.0501502, -697.5789962})
	long := rewriteFile(t, path, nil, map[string]f32Tensor{"rope_factors_long.weight": {[]uint64{16}, make([]float32, 16)}})
	if _, err := Load(long, Options{}); err == nil || !strings.Contains(err.Error(), "tensor rope_factors_long.weight: LongRoPE factors in a minicpm file") {
		t.Errorf("got %v", err)
	}
}

// gemma1 gives a gemma (Gemma 1) model: tied, as llama.cpp reads it, 4
// layers, heads of 48 (the query scale is the head's, not the width's).
func gemma1(s *mkmodel.Shape) { s.Layers, s.Tied, s.HeadDim = 4, true, 48 }

// phiMoE gives a phimoe model 8 experts of feed_forward_length, 2 used,
// and with orig > 0 LongRoPE of that original context in a context of 4096.
func phiMoE(orig int) func(*mkmodel.Shape) {
	return func(s *mkmodel.Shape) {
		s.Experts, s.ExpertsUsed, s.ExpertFFN = 8, 2, s.FFN
		if orig > 0 {
			s.Context, s.OrigContext = 4096, orig
		}
	}
}

// TestOrionRefused: orion, stablelm, starcoder2, phi2 and gptneox without their
// LayerNorms' epsilon or a norm's bias (stablelm and phi2: or the output
// matrix; starcoder2 and phi2: or a bias of attn_output, ffn_up, ffn_down,
// phi2's output) are refused by name, as llama.cpp refuses them.
func TestOrionRefused(t *testing.T) {
	dir := oracle.Require(t)
	checkRefusals(t, genModel(t, dir, "orion", nil), []refusal{
		{"no epsilon", map[string]any{"orion.attention.layer_norm_epsilon": nil}, nil, "missing metadata orion.attention.layer_norm_epsilon"},
		{"zero epsilon", map[string]any{"orion.attention.layer_norm_epsilon": float32(0)}, nil, "orion.attention.layer_norm_epsilon = 0, want > 0"},
		{"no norm bias", nil, []string{"blk.1.ffn_norm.bias"}, "missing tensor blk.1.ffn_norm.bias"},
	})
	checkRefusals(t, genModel(t, dir, "stablelm", nil), []refusal{
		{"no epsilon", map[string]any{"stablelm.attention.layer_norm_epsilon": nil}, nil, "missing metadata stablelm.attention.layer_norm_epsilon"},
		{"tied", nil, []string{"output.weight"}, "missing tensor output.weight (llama.cpp's stablelm reads no tied output)"},
		{"no attention norm bias", nil, []string{"blk.0.attn_norm.bias"}, "missing tensor blk.0.attn_norm.bias"},
	})
	checkRefusals(t, genModel(t, dir, "starcoder2", nil), []refusal{
		{"no epsilon", map[string]any{"starcoder2.attention.layer_norm_epsilon": nil}, nil, "missing metadata starcoder2.attention.layer_norm_epsilon"},
		{"no output norm bias", nil, []string{"output_norm.bias"}, "missing tensor output_norm.bias"},
		{"no attention output bias", nil, []string{"blk.1.attn_output.bias"}, "missing tensor blk.1.attn_output.bias"},
		{"no up bias", nil, []string{"blk.0.ffn_up.bias"}, "missing tensor blk.0.ffn_up.bias"},
		{"no down bias", nil, []string{"blk.1.ffn_down.bias"}, "missing tensor blk.1.ffn_down.bias"},
	})
	checkRefusals(t, genModel(t, dir, "phi2", nil), []refusal{
		{"tied", nil, []string{"output.weight"}, "missing tensor output.weight (llama.cpp's phi2 reads no tied output)"},
		{"no output bias", nil, []string{"output.bias"}, "missing tensor output.bias"},
		{"no attention norm bias", nil, []string{"blk.1.attn_norm.bias"}, "missing tensor blk.1.attn_norm.bias"},
		{"no up bias", nil, []string{"blk.0.ffn_up.bias"}, "missing tensor blk.0.ffn_up.bias"},
	})
	checkRefusals(t, genModel(t, dir, "gptneox", nil), []refusal{
		{"no parallel residual key", map[string]any{"gptneox.use_parallel_residual": nil}, nil, "missing metadata gptneox.use_parallel_residual"},
		{"tied", nil, []string{"output.weight"}, "missing tensor output.weight (llama.cpp's gptneox reads no tied output)"},
		{"no qkv bias", nil, []string{"blk.1.attn_qkv.bias"}, "missing tensor blk.1.attn_qkv.bias"},
		{"no FFN norm bias", nil, []string{"blk.0.ffn_norm.bias"}, "missing tensor blk.0.ffn_norm.bias"},
	})
}

// TestPhiMoERefused: phimoe without a norm's bias, which llama.cpp
// requires, is refused naming the tensor.
func TestPhiMoERefused(t *testing.T) {
	dir := oracle.Require(t)
	checkRefusals(t, genModel(t, dir, "phimoe", phiMoE(0)), []refusal{
		{"attention norm", nil, []string{"blk.1.attn_norm.bias"}, "missing tensor blk.1.attn_norm.bias"},
		{"FFN norm", nil, []string{"blk.0.ffn_norm.bias"}, "missing tensor blk.0.ffn_norm.bias"},
		{"output norm", nil, []string{"output_norm.bias"}, "missing tensor output_norm.bias"},
	})
}

// qwen2moe gives a qwen2moe model 8 experts of 64 (2 used) and a shared
// expert of 96.
func qwen2MoE(s *mkmodel.Shape) { s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 8, 2, 64, 96 }

// olmoe gives an olmoe model as many KV heads as heads (its k norm spans
// the width) and 8 experts of the FFN's width, 2 used.
func olmoe(s *mkmodel.Shape) { s.KVHeads, s.Experts, s.ExpertsUsed, s.ExpertFFN = s.Heads, 8, 2, s.FFN }

// graniteMoE gives a granitemoe model 8 experts of the FFN's width, 2
// used, and a shared expert of width shared (0: none).
func graniteMoE(shared int) func(*mkmodel.Shape) {
	return func(s *mkmodel.Shape) { s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 8, 2, s.FFN, shared }
}

// hunyuanMoE gives a hunyuan-moe model 8 experts of the FFN's width, 2
// used, and a shared expert of 96.
func hunyuanMoE(s *mkmodel.Shape) {
	s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 8, 2, s.FFN, 96
}

// afmoe gives an afmoe model 4 layers (3 sliding over 40 keys, the fourth
// global), the first dense, 8 experts of 64 (2 used) and a shared one.
func afmoe(s *mkmodel.Shape) {
	s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN, s.Window = 4, 1, 8, 2, 64, 64, 40
}

// exaoneMoE gives an exaone-moe model 8 layers (3 of 4 sliding over 40
// keys), the first dense, 8 experts of 64 (2 used) and a shared one.
func exaoneMoE(s *mkmodel.Shape) {
	s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN, s.Window = 8, 1, 8, 2, 64, 64, 40
}

// cohere2MoE gives a cohere2moe model (tied) 8 layers (every fourth from
// the first global), the first dense, 8 experts of 64 (2 used) and a
// shared one, a window of 40.
func cohere2MoE(s *mkmodel.Shape) {
	s.Layers, s.Window, s.Tied, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 8, 40, true, 1, 8, 2, 64, 64
}

// TestCohere2MoELayerNorm: a cohere2moe file without
// attention.layer_norm_rms_epsilon takes LayerNorms of
// attention.layer_norm_epsilon, as llama.cpp does (24 windows in both
// builds: none off; here the first 4).
func TestCohere2MoELayerNorm(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	p := rewriteFile(t, genModel(t, dir, "cohere2moe", cohere2MoE), map[string]any{"cohere2moe.attention.layer_norm_rms_epsilon": nil}, nil)
	checkSHA(t, p, "fe138912fbca675bf6dea337138cad283a1587ef9c6c6b38b6c4f69e41ae2dea")
	generatedScores(t, p, golden.Header.Tokens, []float64{-1323.2213548, -670.4394092, -675.6195656, -669.7992201})
}

// TestEXAONEMoEPattern: exaone-moe's attention.sliding_window_pattern of
// 2 (every other layer global, without RoPE) on genModel's file, against
// llama.cpp's sums on the same bytes (24 windows in both builds: none
// off; here the first 4).
func TestEXAONEMoEPattern(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	p := rewriteFile(t, genModel(t, dir, "exaone-moe", exaoneMoE), map[string]any{"exaone-moe.attention.sliding_window_pattern": uint32(2)}, nil)
	checkSHA(t, p, "cde1a5023e890b6d2084d82bab32b646c0f9210c2a857d9f0a1b48878345eec4")
	generatedScores(t, p, golden.Header.Tokens, []float64{-1545.1084998, -800.8602288, -786.3552303, -783.2835920})
}

// bailingMoE2 gives a bailingmoe2 model 3 layers, the first dense, 8
// experts of 64 in 4 groups (2 groups and 2 experts used), a shared
// expert of 64 and RoPE over half the head.
func bailingMoE2(s *mkmodel.Shape) {
	s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN, s.RopeDims = 3, 1, 8, 2, 64, 64, 16
	s.ExpertGroups, s.ExpertGroupsUsed = 4, 2
}

// TestMoEsRefused: what llama.cpp requires of qwen2moe, hunyuan-moe, afmoe,
// cohere2moe, exaone-moe, apertus and bailingmoe2 and a file lacks is
// refused by name.
func TestMoEsRefused(t *testing.T) {
	dir := oracle.Require(t)
	checkRefusals(t, genModel(t, dir, "qwen2moe", qwen2MoE), []refusal{
		{"no shared gate", nil, []string{"blk.1.ffn_gate_inp_shexp.weight"}, "missing tensor blk.1.ffn_gate_inp_shexp.weight (the shared expert's gate)"},
		{"no used count", map[string]any{"qwen2moe.expert_used_count": nil}, nil, "missing metadata qwen2moe.expert_used_count"},
	})
	checkRefusals(t, genModel(t, dir, "deepseek", deepSeek), []refusal{
		{"no shared count", map[string]any{"deepseek.expert_shared_count": nil}, nil, "missing metadata deepseek.expert_shared_count (deepseek's shared experts)"},
		{"no shared expert", nil, []string{"blk.2.ffn_up_shexp.weight"}, "blk.2.ffn_up_shexp.weight"},
	})
	checkRefusals(t, genModel(t, dir, "hunyuan-moe", hunyuanMoE), []refusal{
		{"no shared expert", nil, []string{"blk.0.ffn_gate_shexp.weight", "blk.0.ffn_up_shexp.weight", "blk.0.ffn_down_shexp.weight"},
			"missing tensor blk.0.ffn_up_shexp.weight (the shared expert)"},
	})
	checkRefusals(t, genModel(t, dir, "afmoe", afmoe), []refusal{
		{"no window", map[string]any{"afmoe.attention.sliding_window": nil}, nil, "afmoe without sliding windows is not supported (llama.cpp 0.7.0 crashes on it)"},
		{"no shared count", map[string]any{"afmoe.expert_shared_count": nil}, nil, "missing metadata afmoe.expert_shared_count"},
		{"no selection bias", nil, []string{"blk.2.exp_probs_b.bias"}, "missing tensor blk.2.exp_probs_b.bias"},
		{"no gate", nil, []string{"blk.1.attn_gate.weight"}, "missing tensor blk.1.attn_gate.weight"},
	})
	checkRefusals(t, genModel(t, dir, "cohere2moe", cohere2MoE), []refusal{
		{"no epsilon", map[string]any{"cohere2moe.attention.layer_norm_rms_epsilon": nil, "cohere2moe.attention.layer_norm_epsilon": nil}, nil,
			"missing metadata cohere2moe.attention.layer_norm_rms_epsilon or attention.layer_norm_epsilon"},
		{"no window", map[string]any{"cohere2moe.attention.sliding_window": nil}, nil, "missing metadata cohere2moe.attention.sliding_window"},
		{"no logit scale", map[string]any{"cohere2moe.logit_scale": nil}, nil, "missing metadata cohere2moe.logit_scale"},
		{"no dense count", map[string]any{"cohere2moe.leading_dense_block_count": nil}, nil, "missing metadata cohere2moe.leading_dense_block_count"},
	})
	checkRefusals(t, genModel(t, dir, "exaone-moe", exaoneMoE), []refusal{
		{"no window", map[string]any{"exaone-moe.attention.sliding_window": nil}, nil, "missing metadata exaone-moe.attention.sliding_window"},
		{"no gating function", map[string]any{"exaone-moe.expert_gating_func": nil}, nil, "missing metadata exaone-moe.expert_gating_func"},
		{"no shared expert", map[string]any{"exaone-moe.expert_shared_count": nil}, []string{"blk.3.ffn_gate_shexp.weight", "blk.3.ffn_up_shexp.weight", "blk.3.ffn_down_shexp.weight"},
			"missing tensor blk.3.ffn_up_shexp.weight (the shared expert)"},
	})
	checkRefusals(t, genModel(t, dir, "apertus", nil), []refusal{
		{"no xIELU beta", map[string]any{"xielu.beta": nil}, nil, "missing metadata xielu.beta"},
		{"xIELU eps for 3 layers", map[string]any{"xielu.eps": []float32{-1e-6, -1e-6, -1e-6}}, nil, "metadata xielu.eps has 3 values for 2 layers"},
		{"NaN alpha", map[string]any{"xielu.alpha_n": float32(math.NaN())}, nil, "metadata xielu.alpha_n: value 0 is NaN"},
	})
	checkRefusals(t, genModel(t, dir, "bailingmoe2", bailingMoE2), []refusal{
		{"no gating function", map[string]any{"bailingmoe2.expert_gating_func": nil}, nil, "missing metadata bailingmoe2.expert_gating_func"},
		{"no shared count", map[string]any{"bailingmoe2.expert_shared_count": nil}, nil, "missing metadata bailingmoe2.expert_shared_count"},
		{"no shared expert", nil, []string{"blk.2.ffn_gate_shexp.weight", "blk.2.ffn_up_shexp.weight", "blk.2.ffn_down_shexp.weight"},
			"missing tensor blk.2.ffn_gate_shexp.weight"},
	})
}

// cohere2Shape gives a cohere2 model (tied, as llama.cpp reads it) 8
// layers, three of four sliding over window keys.
func cohere2Shape(window int) func(*mkmodel.Shape) {
	return func(s *mkmodel.Shape) { s.Layers, s.Window, s.Tied = 8, window, true }
}

// TestGLMMRoPE: GLM's vision-language text decoders carry
// rope.dimension_sections, and llama.cpp then rotates NeoX pairs by the
// sections (MRoPE) for glm4 (GLM-4.1V), whose own layout is adjacent
// pairs: genModel's glm4 file with sections [2, 3, 3, 0] over its 8 rotary
// pairs is 16 nats off the plain file in window 0. glm4moe (GLM-4.5V,
// 4.6V) is NeoX already: [2, 3, 3, 0] changes nothing, an e section ([2,
// 2, 2, 2]) leaves its pairs unturned. Sums of log-probs of windows [0,
// 128) from 1 and [64, 192) from 128 in the int8 mode with an f16 cache,
// against llama.cpp's on the same bytes (sha256).
func TestGLMMRoPE(t *testing.T) {
	dir := oracle.Require(t)
	en, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	glm, err := oracle.Read(filepath.Join(dir, "golden-archs", "tiny-glm4moe__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	g4 := genModel(t, dir, "glm4", nil)
	moe := oracle.Model(dir, "tiny-glm4moe")
	sections := func(arch string, s []int32) map[string]any {
		return map[string]any{arch + ".rope.dimension_sections": s}
	}
	for _, c := range []struct {
		name   string
		path   string
		tokens []int32
		sha256 string
		sums   []float64
	}{
		{"glm4 [2 3 3 0]", rewriteFile(t, g4, sections("glm4", []int32{2, 3, 3, 0}), nil), en.Header.Tokens,
			"39dbe1f91c559ed3a3aa196c8833cc83ff77caff7f1e1b2552f92d4bcfa4b194", []float64{-1577.7014720, -806.3249496}},
		{"glm4 [2 2 2 2]", rewriteFile(t, g4, sections("glm4", []int32{2, 2, 2, 2}), nil), en.Header.Tokens,
			"952d40f4f5c45c308e0b229bbbcbd320a4e5f74b05745ff31c573861f0fce8eb", []float64{-1577.2993525, -806.4998461}},
		{"glm4moe [2 3 3 0]", rewriteFile(t, moe, sections("glm4moe", []int32{2, 3, 3, 0}), nil), glm.Header.Tokens,
			"d98fcc95f87740003008ff0f8063d996853171e9dc907abbd96f43f877e12eee", []float64{-1497.9326368, -767.6560626}},
		{"glm4moe [2 2 2 2]", rewriteFile(t, moe, sections("glm4moe", []int32{2, 2, 2, 2}), nil), glm.Header.Tokens,
			"1b5473ae353cfa367dd80db5f91e401dadb11344ababad996e163d87a0b3a276", []float64{-1497.9488624, -767.6482029}},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkSHA(t, c.path, c.sha256)
			m, err := Load(c.path, Options{KVDtype: "f16", Activations: ActInt8, Context: 128})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			scoreSums(t, m, c.name, c.tokens, []window{{0, 128, 1}, {64, 192, 128}}, c.sums, 1e-6)
		})
	}
}

// TestRWKV7Variants: arwkv7 without the LayerNorm per head (llama.cpp
// skips it when the file has none) against llama.cpp's sums on the same
// bytes (24 windows in both builds: none off; here the first 4); files
// llama.cpp refuses, refused by name: a missing size, a token shift count
// other than the architecture's, a head size that does not divide the
// width, heads in a file without attention, rwkv7 without its gate, and a
// LayerNorm per head without its bias.
func TestRWKV7Variants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	arwkv := genModel(t, dir, "arwkv7", rwkv7Shape)
	checkVariants(t, arwkv, golden.Header.Tokens, []fileVariant{
		{name: "no norm per head", sha256: "b766eeffb896787556b916e8bb3829a328a2cca2edbb4a4639f2157246f9cb7a",
			drop: []string{"blk.0.time_mix_ln.weight", "blk.0.time_mix_ln.bias", "blk.1.time_mix_ln.weight", "blk.1.time_mix_ln.bias"},
			sums: []float64{-1612.5967442, -780.7072000, -798.7581686, -777.2432930}},
	})
	checkRefusals(t, arwkv, []refusal{
		{"two shifts", map[string]any{"arwkv7.token_shift_count": uint32(2)}, nil, "arwkv7.token_shift_count = 2, want 1"},
		{"norm without bias", nil, []string{"blk.1.time_mix_ln.bias"}, "missing tensor blk.1.time_mix_ln.bias"},
	})
	checkRefusals(t, genModel(t, dir, "rwkv7", rwkv7Shape), []refusal{
		{"no head size", map[string]any{"rwkv7.wkv.head_size": nil}, nil, "missing metadata rwkv7.wkv.head_size"},
		{"no decay rank", map[string]any{"rwkv7.attention.decay_lora_rank": nil}, nil, "missing metadata rwkv7.attention.decay_lora_rank"},
		{"one shift", map[string]any{"rwkv7.token_shift_count": uint32(1)}, nil, "rwkv7.token_shift_count = 1, want 2"},
		{"head size", map[string]any{"rwkv7.wkv.head_size": uint32(48)}, nil, "wkv.head_size = 48 does not divide embedding_length 128"},
		{"heads", map[string]any{"rwkv7.attention.head_count": uint32(2)}, nil, "rwkv7 has no attention, but the file gives 2 heads"},
		{"no FFN", map[string]any{"rwkv7.feed_forward_length": nil}, nil, "missing metadata rwkv7.feed_forward_length"},
		{"no gate", nil, []string{"blk.1.time_mix_g2.weight"}, "missing tensor blk.1.time_mix_g2.weight"},
		{"no LayerNorm epsilon", map[string]any{"rwkv7.attention.layer_norm_epsilon": nil}, nil, "missing metadata rwkv7.attention.layer_norm_epsilon"},
	})
}

// rwkv7Shape gives rwkv7 and arwkv7 RWKV-7's heads of 64 (2 in the
// width of 128).
func rwkv7Shape(s *mkmodel.Shape) { s.HeadDim, s.Heads, s.KVHeads = 64, 2, 2 }

// rwkv6Shape gives rwkv6 RWKV's heads of 64 and 6 layers, the sixth's
// output halved (rescale_every_n_layers 6).
func rwkv6Shape(s *mkmodel.Shape) { s.HeadDim, s.Heads, s.KVHeads, s.Layers = 64, 2, 2, 6 }

// qrwkv6Shape gives rwkv6qwen2 two heads of 64 sharing one head of keys
// and values.
func qrwkv6Shape(s *mkmodel.Shape) { s.HeadDim, s.Heads, s.KVHeads = 64, 2, 1 }

// TestRWKV6Variants: rwkv6 with the older files' five blend tensors
// (time_mix_lerp_w, k, v, r, g) in place of time_mix_lerp_fused against
// llama.cpp's sums on the same bytes (the fused file's: the same
// arithmetic); files llama.cpp refuses, or cannot run, refused by name: a
// missing size, a token shift count other than the architecture's, KV heads
// that do not divide the heads, a QRWKV6 file with time_mix_first, a
// missing blend, and f16 states.
func TestRWKV6Variants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "rwkv6", rwkv6Shape)
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	blends, fused := map[string]f32Tensor{}, []string{}
	for _, tn := range f.Tensors {
		var i int
		if _, err := fmt.Sscanf(tn.Name, "blk.%d.time_mix_lerp_fused.weight", &i); err != nil {
			continue
		}
		v, e := f32Floats(f.Data(tn)), int(tn.Shape[0])
		for j, b := range []string{"w", "k", "v", "r", "g"} {
			blends[fmt.Sprintf("blk.%d.time_mix_lerp_%s.weight", i, b)] = f32Tensor{[]uint64{uint64(e), 1, 1}, v[j*e : (j+1)*e]}
		}
		fused = append(fused, tn.Name)
	}
	f.Close()
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "blends apart", sha256: "544dba1bc4987bf5fea511ab3a31b62bcd4c53709fc4d6423af54ac6b9dcff3e", add: blends, drop: fused,
			sums: []float64{-1577.4733315, -803.2090772, -804.5744036, -773.8399066}},
	})
	checkRefusals(t, src, []refusal{
		{"no extra dim", map[string]any{"rwkv6.time_mix_extra_dim": nil}, nil, "missing metadata rwkv6.time_mix_extra_dim"},
		{"one shift", map[string]any{"rwkv6.token_shift_count": uint32(1)}, nil, "rwkv6.token_shift_count = 1, want 2"},
		{"no blends", nil, []string{"blk.3.time_mix_lerp_fused.weight"}, "missing tensor blk.3.time_mix_lerp_w.weight"},
		{"no bonus", nil, []string{"blk.0.time_mix_first.weight"}, "missing tensor blk.0.time_mix_first.weight"},
	})
	qwen := genModel(t, dir, "rwkv6qwen2", qrwkv6Shape)
	checkRefusals(t, qwen, []refusal{
		{"KV heads", map[string]any{"rwkv6qwen2.attention.head_count_kv": uint32(3)}, nil, "rwkv6qwen2.attention.head_count_kv = 3 does not divide the 2 heads"},
		{"two shifts", map[string]any{"rwkv6qwen2.token_shift_count": uint32(2)}, nil, "rwkv6qwen2.token_shift_count = 2, want 1"},
	})
	bonus := rewriteFile(t, qwen, nil, map[string]f32Tensor{"blk.0.time_mix_first.weight": {[]uint64{64, 2}, make([]float32, 128)}})
	if _, err := Load(bonus, Options{}); err == nil || !strings.Contains(err.Error(), "tensor blk.0.time_mix_first.weight: a rwkv6qwen2 file with RWKV-6's bonus llama.cpp 0.7.0 cannot run (it would need time_mix_ln)") {
		t.Errorf("QRWKV6 with time_mix_first: %v", err)
	}
	if _, err := Load(qwen, Options{SSMStateDtype: "f16"}); err == nil || !strings.Contains(err.Error(), "rwkv6qwen2 keeps its recurrent state in float32, as llama.cpp does: a state dtype of f16 is not supported") {
		t.Errorf("f16 state: %v", err)
	}
}

// hyV3Shape gives hy_v3 a dense first layer (told by its tensors) and 8
// experts, 2 used, with a shared expert, in 4 layers.
func hyV3Shape(s *mkmodel.Shape) {
	s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 4, 1, 8, 2, 64, 64
}

// TestHYV3Variants: hy_v3 without the selection bias (llama.cpp leaves it
// out when the file has none) against llama.cpp's sums on the same bytes
// (24 windows in both builds: none off; here the first 4); a file naming it
// exp_probs_b.bias, which llama.cpp 0.7.0's hy_v3 does not bind (and so
// refuses the file), refused by name, as is one without the experts' width.
func TestHYV3Variants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "hy_v3", hyV3Shape)
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "no selection bias", sha256: "6c5039832714cdafb113f3118d39ccdce26abe2289f5f656165aaf7bea6526ee",
			drop: []string{"blk.1.exp_probs_b", "blk.2.exp_probs_b", "blk.3.exp_probs_b"},
			sums: []float64{-1596.6903099, -812.9969539, -801.5873114, -807.5308981}},
	})
	checkRefusals(t, src, []refusal{
		{"no experts' width", map[string]any{"hy_v3.expert_feed_forward_length": nil}, nil, "missing metadata hy_v3.expert_feed_forward_length"},
	})
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	tn, _ := f.Tensor("blk.2.exp_probs_b")
	bias := f32Floats(f.Data(tn))
	f.Close()
	renamed := rewriteFile(t, src, nil, map[string]f32Tensor{"blk.2.exp_probs_b.bias": {[]uint64{8}, bias}}, "blk.2.exp_probs_b")
	if _, err := Load(renamed, Options{}); err == nil || !strings.Contains(err.Error(), "tensor blk.2.exp_probs_b.bias: hy_v3's selection bias is blk.2.exp_probs_b, as llama.cpp 0.7.0 reads it") {
		t.Errorf("exp_probs_b.bias: %v", err)
	}
}

// TestMapleVariants: Maple with a clamp of 0 in its second layer, which
// llama.cpp leaves a plain SwiGLU (a limit up to 1e-6, as Step-3.5's), and
// 0.5 in its third, against llama.cpp's sums on the same bytes (24 windows
// in both builds: none off; here the first 4); files without the keys
// llama.cpp 0.7.0 requires refused by name.
func TestMapleVariants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "maple", mellumShape)
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "clamps 7, 0, 0.5, 7", sha256: "42c67c4df8d0aa544b0b7ac2aefa5b90332326d72a80a9b41cfef526f009125a",
			set:  map[string]any{"maple.swiglu_clamp_exp": []float32{7, 0, 0.5, 7}},
			sums: []float64{-1620.1972284, -802.3272917, -816.6465919, -795.7340024}},
	})
	checkRefusals(t, src, []refusal{
		{"no clamps", map[string]any{"maple.swiglu_clamp_exp": nil}, nil, "missing metadata maple.swiglu_clamp_exp"},
		{"no pattern", map[string]any{"maple.attention.sliding_window_pattern": nil}, nil, "missing metadata maple.attention.sliding_window_pattern"},
		{"no window", map[string]any{"maple.attention.sliding_window": nil}, nil, "missing metadata maple.attention.sliding_window"},
	})
}

// lagunaShape is Laguna XS.2's layout in 4 layers: a global first layer
// (dense) and 3 sliding over 40 keys with half again as many heads, 8
// experts of 64, 2 used, and a shared expert as wide.
func lagunaShape(s *mkmodel.Shape) {
	s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN, s.Window = 4, 1, 8, 2, 64, 64, 40
}

// TestLagunaVariants: Laguna with a sliding-window period of 2 (dense
// first: layers 1 and 3 slide) and without the sliding layers' RoPE keys
// (the global layers' base and dimensions), against llama.cpp's sums on
// the same bytes (24 windows in both builds: none off; here the first 4);
// files llama.cpp 0.7.0 refuses, or reads in no way ppl follows (an array
// of sliding flags), refused by name.
func TestLagunaVariants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "laguna", lagunaShape)
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "period 2", sha256: "a4127c96fa42a10d9877b34a9fdb76e4e963d4579d135d9c348c781085e2ae1c",
			set:  map[string]any{"laguna.attention.sliding_window_pattern": uint32(2)},
			sums: []float64{-1543.4098608, -803.1420446, -797.8576394, -781.3719768}},
		{name: "no sliding RoPE keys", sha256: "6d48b8fcc01c9e662e50759d165415a8af902130c26ad838190e347a934aae87",
			set:  map[string]any{"laguna.rope.dimension_count_swa": nil, "laguna.rope.freq_base_swa": nil},
			sums: []float64{-1559.7842698, -821.9819938, -800.9744807, -805.4265318}},
	})
	checkRefusals(t, src, []refusal{
		{"flags", map[string]any{"laguna.attention.sliding_window_pattern": []bool{true, false, true, false}}, nil, "metadata laguna.attention.sliding_window_pattern: an array; laguna's is a period"},
		{"no dense count", map[string]any{"laguna.leading_dense_block_count": nil}, nil, "missing metadata laguna.leading_dense_block_count"},
		{"no selection bias", nil, []string{"blk.2.exp_probs_b.bias"}, "missing tensor blk.2.exp_probs_b.bias (the selection bias, which llama.cpp 0.7.0 requires)"},
		{"no shared expert", nil, []string{"blk.1.ffn_up_shexp.weight", "blk.1.ffn_gate_shexp.weight", "blk.1.ffn_down_shexp.weight"}, "missing tensor blk.1.ffn_up_shexp.weight (the shared expert)"},
		{"no gate", nil, []string{"blk.3.attn_gate.weight"}, "missing tensor blk.3.attn_gate.weight"},
	})
}

// TestMaionVariants: Maion-Coder with the keys llama.cpp 0.7.0 does not
// read for it (a sliding base, sigmoid gating, a weights scale) scores as
// without them, to llama.cpp's sums on those bytes (24 windows in both
// builds: none off; here the first 4); files without what it requires
// refused by name.
func TestMaionVariants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "maion-coder", mellumShape)
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "keys it ignores", sha256: "a9f47c48caf55087389123c9f7948f633e5dce0f5ce70bb2d5a5d4923bfaa9c7",
			set:  map[string]any{"maion-coder.rope.freq_base_swa": float32(5000), "maion-coder.expert_weights_scale": float32(2.5), "maion-coder.expert_gating_func": uint32(2)},
			sums: []float64{-1595.0070011, -811.5738574, -780.9195677, -780.8895940}},
	})
	checkRefusals(t, src, []refusal{
		{"a period", map[string]any{"maion-coder.attention.sliding_window_pattern": uint32(4)}, nil, "metadata maion-coder.attention.sliding_window_pattern: want an array of 4 flags (one per layer)"},
		{"no step", map[string]any{"maion-coder.interleave_moe_layer_step": nil}, nil, "missing metadata maion-coder.interleave_moe_layer_step"},
		{"no latent width", map[string]any{"maion-coder.moe_latent_size": nil}, nil, "missing metadata maion-coder.moe_latent_size"},
		{"latent width 0", map[string]any{"maion-coder.moe_latent_size": uint32(0)}, nil, "metadata maion-coder.moe_latent_size = 0: maion-coder's experts need a latent width above 0"},
		{"no post-norm", nil, []string{"blk.2.post_ffw_norm.weight"}, "missing tensor blk.2.post_ffw_norm.weight"},
	})
}

// sparkShape is Spark-X2.5's layout in 4 layers: a global first layer and
// 3 sliding over 40 keys with half again as many heads.
func sparkShape(s *mkmodel.Shape) { s.Layers, s.Window = 4, 40 }

// TestSparkVariants: Spark-X2.5 with YaRN (which llama.cpp applies in the
// sliding layers too) and without the sliding layers' RoPE keys, against
// llama.cpp's sums on the same bytes (24 windows in both builds: none off;
// here the first 4); files without what llama.cpp 0.7.0 requires refused
// by name.
func TestSparkVariants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "spark2_5", sparkShape)
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "yarn", sha256: "46d3b58aab2b3280cb400ea2c29b34dcff5182c188101998ad1b6c51815dab2b",
			set: map[string]any{
				"spark2_5.rope.scaling.type":                    "yarn",
				"spark2_5.rope.scaling.factor":                  float32(4),
				"spark2_5.rope.scaling.original_context_length": uint32(512),
			},
			sums: []float64{-1618.3873147, -790.8078069, -799.8357786, -772.7390780}},
		{name: "no sliding RoPE keys", sha256: "02f86ad505c49296d01a6dc4aa5eacaee7a3dd6bec4d298ef3c26764e84dd8b1",
			set:  map[string]any{"spark2_5.rope.dimension_count_swa": nil, "spark2_5.rope.freq_base_swa": nil},
			sums: []float64{-1612.9840276, -787.1742637, -794.1479086, -773.9800657}},
	})
	checkRefusals(t, src, []refusal{
		{"a period", map[string]any{"spark2_5.attention.sliding_window_pattern": uint32(4)}, nil, "metadata spark2_5.attention.sliding_window_pattern: want an array of 4 flags (one per layer)"},
		{"no window", map[string]any{"spark2_5.attention.sliding_window": nil}, nil, "missing metadata spark2_5.attention.sliding_window"},
		{"no gate", nil, []string{"blk.1.attn_gate.weight"}, "missing tensor blk.1.attn_gate.weight"},
	})
}

// TestMuseGlimmerVariants: Muse Glimmer without final_logit_softcapping
// (llama.cpp's 30), with a sliding period of 2 and with YaRN (which no
// layer of llama.cpp's graph applies: the same sums as without), against
// llama.cpp's sums on the same bytes (24 windows in both builds: none off;
// here the first 4); files without what it requires refused by name.
func TestMuseGlimmerVariants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "muse-glimmer", sparkShape)
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "no soft-cap key", sha256: "56d165cd25c179e2a3564625b96497556d1199dc102cb7649b4085d0d8965dc9",
			set:  map[string]any{"muse-glimmer.final_logit_softcapping": nil},
			sums: []float64{-1482.4960317, -738.6702806, -738.9137253, -718.4098973}},
		{name: "period 2", sha256: "c97547132af46bf26a239c7707460b96dab2a3b1cefebe6c2f8ea321275b73c1",
			set:  map[string]any{"muse-glimmer.attention.sliding_window_pattern": uint32(2)},
			sums: []float64{-1441.2022708, -725.9407137, -705.5637265, -702.2641284}},
		{name: "yarn", sha256: "d8bbde55eff77719581a0c3d18aeb4954b7d4ecb53c2e7429833502e1a06e72d",
			set: map[string]any{
				"muse-glimmer.rope.scaling.type":                    "yarn",
				"muse-glimmer.rope.scaling.factor":                  float32(4),
				"muse-glimmer.rope.scaling.original_context_length": uint32(512),
			},
			sums: []float64{-1444.9018798, -721.6990486, -719.0418908, -700.7229243}},
	})
	checkRefusals(t, src, []refusal{
		{"no logit scale", map[string]any{"muse-glimmer.logit_scale": nil}, nil, "missing metadata muse-glimmer.logit_scale"},
		{"logit scale 0", map[string]any{"muse-glimmer.logit_scale": float32(0)}, nil, "metadata muse-glimmer.logit_scale is 0: every logit would be 0"},
		{"no window", map[string]any{"muse-glimmer.attention.sliding_window": nil}, nil, "missing metadata muse-glimmer.attention.sliding_window"},
		{"no gate", nil, []string{"blk.0.attn_gate.weight"}, "missing tensor blk.0.attn_gate.weight"},
	})
}

// TestTalkieKeys: Talkie files llama.cpp 0.7.0 refuses or cannot run
// refused by name.
func TestTalkieKeys(t *testing.T) {
	dir := oracle.Require(t)
	src := genModel(t, dir, "talkie", func(s *mkmodel.Shape) { s.Layers = 4 })
	checkRefusals(t, src, []refusal{
		{"no logit scale", map[string]any{"talkie.logit_scale": nil}, nil, "missing metadata talkie.logit_scale"},
		{"logit scale 0", map[string]any{"talkie.logit_scale": float32(0)}, nil, "metadata talkie.logit_scale is 0: every logit would be 0"},
		{"partial RoPE", map[string]any{"talkie.rope.dimension_count": uint32(16)}, nil, "metadata talkie.rope.dimension_count = 16: talkie rotates whole heads of 32 (llama.cpp 0.7.0 asserts it)"},
		{"no skip gain", nil, []string{"blk.2.layer_output_scale.weight"}, "missing tensor blk.2.layer_output_scale.weight"},
		{"no q gains", nil, []string{"blk.0.attn_q_norm.weight"}, "missing tensor blk.0.attn_q_norm.weight"},
	})
}

// TestHunyuanAlpha: the RoPE base llama.cpp 0.7.0 rescales by
// rope.scaling.alpha for hunyuan_vl and hunyuan-dense: hunyuan_vl without
// its sections (NeoX RoPE), hunyuan-dense with alpha 1000 and sections
// (which its graph leaves unused), against llama.cpp's sums on the same
// bytes (24 windows in both builds: none off; here the first 4); partial
// RoPE refused for hunyuan_vl, as llama.cpp requires whole heads.
func TestHunyuanAlpha(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	four := func(s *mkmodel.Shape) { s.Layers = 4 }
	vl := genModel(t, dir, "hunyuan_vl", four)
	checkVariants(t, vl, golden.Header.Tokens, []fileVariant{
		{name: "no sections", sha256: "5d0ed786d64b2436a298ce415c8b5c311d887b670e8c8f3e6e932cc077693bc4",
			set:  map[string]any{"hunyuan_vl.rope.dimension_sections": nil},
			sums: []float64{-1649.8189222, -802.0498193, -792.5938753, -777.8639666}},
	})
	checkRefusals(t, vl, []refusal{
		{"partial RoPE", map[string]any{"hunyuan_vl.rope.dimension_count": uint32(16)}, nil, "metadata hunyuan_vl.rope.dimension_count = 16: hunyuan_vl rotates whole heads of 32"},
	})
	checkVariants(t, genModel(t, dir, "hunyuan-dense", four), golden.Header.Tokens, []fileVariant{
		{name: "hunyuan-dense alpha 1000", sha256: "ebe53edc644b96dd0e5e482d14eb169b6ce64708d281d090774d1837760a60b0",
			set:  map[string]any{"hunyuan-dense.rope.scaling.alpha": float32(1000), "hunyuan-dense.rope.dimension_sections": []int32{4, 4, 4, 4}},
			sums: []float64{-1651.9361494, -798.3723534, -789.7788298, -784.3710931}},
	})
}

// paddleBiases are q, k, v and attn_output biases for genModel's 2
// layers, which llama.cpp 0.7.0's paddleocr binds where present.
func paddleBiases() map[string]f32Tensor {
	r := rand.New(rand.NewPCG(41, 2))
	add := map[string]f32Tensor{}
	for i := range 2 {
		for _, b := range []struct {
			name string
			n    uint64
		}{{"attn_q", 128}, {"attn_k", 64}, {"attn_v", 64}, {"attn_output", 128}} {
			v := make([]float32, b.n)
			for j := range v {
				v[j] = float32(0.5 * r.NormFloat64())
			}
			add[fmt.Sprintf("blk.%d.%s.bias", i, b.name)] = f32Tensor{[]uint64{b.n}, v}
		}
	}
	return add
}

// TestPaddleOCRVariants: PaddleOCR-VL's text decoder with q, k, v and
// output biases, and with sections leaving a fifth of the pairs unturned
// by text, against llama.cpp's sums on the same bytes (24 windows in both
// builds: none off; here the first 4); a file without sections, on which
// llama.cpp 0.7.0 asserts, refused by name.
func TestPaddleOCRVariants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "paddleocr", nil)
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "biases", sha256: "3190d792048553842096e2448a22af122361232698a43ec98a4148a75b93bab6", add: paddleBiases(),
			sums: []float64{-1589.6205928, -820.6769959, -775.0016134, -772.0110213}},
		{name: "unturned pairs", sha256: "a22305aafd17e100e285d17b6251c52f95025cd60dfae62fed05a551326ec6de",
			set:  map[string]any{"paddleocr.rope.dimension_sections": []int32{2, 3, 3, 2}},
			sums: []float64{-1614.8990341, -806.2062927, -794.5689101, -772.6714203}},
	})
	checkRefusals(t, src, []refusal{
		{"no sections", map[string]any{"paddleocr.rope.dimension_sections": nil}, nil, "missing metadata paddleocr.rope.dimension_sections"},
	})
}

// cogvlmShape is CogVLM's layout: a KV head per head (llama.cpp reads q,
// k and v as width-sized thirds of attn_qkv), the output tied when tied.
func cogvlmShape(tied bool) func(*mkmodel.Shape) {
	return func(s *mkmodel.Shape) { s.KVHeads, s.Tied = s.Heads, tied }
}

// TestCogVLMVariants: llama.cpp 0.7.0 rotates CogVLM by ggml_rope's fixed
// base 10000 without scaling: a file saying base 500000 and linear scaling
// by 4 gives its sums on the same bytes (those of the file without them,
// 24 windows in both builds: none off; here the first 4); refused by name:
// the options that would change the RoPE, grouped KV heads, partial RoPE,
// a missing visual expert's tensor and an attention bias (files llama.cpp
// refuses or asserts on).
func TestCogVLMVariants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "cogvlm", cogvlmShape(false))
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "base and scaling ignored", sha256: "3c99ac8414b7325404cd13f5629b4e3202db3d91c740a93a9e2a6c72e04f738a",
			set:  map[string]any{"cogvlm.rope.freq_base": float32(500000), "cogvlm.rope.scaling.type": "linear", "cogvlm.rope.scaling.factor": float32(4)},
			sums: []float64{-1618.4613552, -795.1382285, -794.8335721, -751.5181921}},
	})
	checkRefusals(t, src, []refusal{
		{"grouped KV heads", map[string]any{"cogvlm.attention.head_count_kv": uint32(2)}, nil, "cogvlm: 4 heads and 2 KV heads of 32 for a width of 128: llama.cpp's cogvlm reads q, k and v as width-sized thirds of attn_qkv"},
		{"partial RoPE", map[string]any{"cogvlm.rope.dimension_count": uint32(16)}, nil, "metadata cogvlm.rope.dimension_count = 16: cogvlm rotates whole heads of 32"},
		{"no visual expert", nil, []string{"blk.1.vis_down.weight"}, "missing tensor blk.1.vis_down.weight (the visual expert, which llama.cpp 0.7.0 requires)"},
		{"q, k and v apart", nil, []string{"blk.0.attn_qkv.weight"}, "missing tensor blk.0.attn_qkv.weight"},
	})
	withBias := rewriteFile(t, src, nil, map[string]f32Tensor{"blk.0.attn_qkv.bias": {[]uint64{384}, make([]float32, 384)}})
	if _, err := Load(withBias, Options{}); err == nil || !strings.Contains(err.Error(), "tensor blk.0.attn_qkv.bias: llama.cpp's cogvlm has no attention biases") {
		t.Errorf("attn_qkv.bias: %v", err)
	}
	if _, err := Load(src, Options{RopeFreqBase: 1e6}); err == nil || !strings.Contains(err.Error(), "--rope-* options for cogvlm") {
		t.Errorf("--rope-freq-base: %v", err)
	}
}

// ocrShape is DeepSeek-OCR's layout in 3 layers: a dense first layer,
// then 8 experts of 64 (2 used) and 2 shared experts, a KV head per head,
// the output tied when tied.
func ocrShape(tied bool) func(*mkmodel.Shape) {
	return func(s *mkmodel.Shape) {
		deepSeek(s)
		s.KVHeads, s.Tied = s.Heads, tied
	}
}

// ocrRouting makes a deepseek2-ocr file's routing sigmoid, renormalized
// and scaled by 2.5 (DeepSeek-OCR's own is softmax, neither).
var ocrRouting = map[string]any{"deepseek2-ocr.expert_gating_func": uint32(2), "deepseek2-ocr.expert_weights_norm": true,
	"deepseek2-ocr.expert_weights_scale": float32(2.5)}

// ocrSelBias is a selection bias for ocrShape's two mixtures.
func ocrSelBias() map[string]f32Tensor {
	r := rand.New(rand.NewPCG(42, 2))
	add := map[string]f32Tensor{}
	for i := 1; i < 3; i++ {
		v := make([]float32, 8)
		for j := range v {
			v[j] = float32(0.1 * r.NormFloat64())
		}
		add[fmt.Sprintf("blk.%d.exp_probs_b.bias", i)] = f32Tensor{[]uint64{8}, v}
	}
	return add
}

// TestDeepSeekOCRVariants: DeepSeek-OCR's mixtures routed by sigmoid
// with a selection bias, renormalized and scaled by 2.5, and a file with
// attention.sliding_window 40, which llama.cpp 0.7.0 ignores, against
// llama.cpp's sums on the same bytes (24 windows in both builds: none off;
// here the first 4); refused by name: a RoPE base other than 10000, on
// which llama.cpp asserts, grouped KV heads, no shared experts' count, an attention bias (files llama.cpp refuses or would
// misread).
func TestDeepSeekOCRVariants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "deepseek2-ocr", ocrShape(false))
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "sigmoid routing", sha256: "d4d01b4724e75d24463ec20e78f27b968b0a28b1246e0cf22c97f6832d9a5849", set: ocrRouting, add: ocrSelBias(),
			sums: []float64{-1642.3806199, -794.8176796, -807.9994812, -794.6656580}},
		{name: "sliding window ignored", sha256: "471d2bee30656bf4ef1d4a8cc870c9edbb15049cbc91537df79d073c894c47e1",
			set:  map[string]any{"deepseek2-ocr.attention.sliding_window": uint32(40)},
			sums: []float64{-1624.7860124, -783.1563343, -795.0621502, -784.9783493}},
	})
	checkRefusals(t, src, []refusal{
		{"base 500000", map[string]any{"deepseek2-ocr.rope.freq_base": float32(500000)}, nil, "deepseek2-ocr: RoPE of base 500000, factors false: llama.cpp rotates DeepSeek-OCR by base 10000"},
		{"grouped KV heads", map[string]any{"deepseek2-ocr.attention.head_count_kv": uint32(2)}, nil, "deepseek2-ocr: 4 heads and 2 KV heads of 32 for a width of 128: llama.cpp's deepseek2-ocr shapes q, k and v as heads filling the width"},
		{"no shared experts' count", map[string]any{"deepseek2-ocr.expert_shared_count": nil}, nil, "missing metadata deepseek2-ocr.expert_shared_count"},
	})
	withBias := rewriteFile(t, src, nil, map[string]f32Tensor{"blk.0.attn_q.bias": {[]uint64{128}, make([]float32, 128)}})
	if _, err := Load(withBias, Options{}); err == nil || !strings.Contains(err.Error(), "tensor blk.0.attn_q.bias: llama.cpp's deepseek2-ocr has no attention biases") {
		t.Errorf("attn_q.bias: %v", err)
	}
}

// minimax01Shape is MiniMax-01's layout in layers layers, every
// interval-th softmax attention with RoPE over half of each head, the
// others lightning attention; 8 experts of the FFN's width, 2 used.
func minimax01Shape(layers, interval int) func(*mkmodel.Shape) {
	return func(s *mkmodel.Shape) {
		s.Layers, s.AttnInterval, s.RopeDims, s.Experts, s.ExpertsUsed, s.ExpertFFN = layers, interval, 16, 8, 2, s.FFN
	}
}

// TestMiniMax01Variants: attention.recurrent_layers chooses the lightning
// layers over full_attention_interval, as in llama.cpp (a file of layers
// 0-2 lightning saying interval 2 and the array, against llama.cpp's sums
// on the same bytes: those of the file without the array, 24 windows in
// both builds: none off; here the first 4); refused by name: no
// residual_scale, an interval of 0, an array of another length, a
// selection bias or a missing gate of the experts (files llama.cpp
// refuses), and a recurrent state dtype, which would change nothing.
func TestMiniMax01Variants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "minimax-01", minimax01Shape(4, 4))
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "recurrent_layers", sha256: "411b6f0042ae7f7c2322b1cdac0b89315dbca505d6179cca729d6f1eb4549c06",
			set:  map[string]any{"minimax-01.full_attention_interval": uint32(2), "minimax-01.attention.recurrent_layers": []bool{true, true, true, false}},
			sums: []float64{-1565.8809148, -774.5678919, -766.6303531, -795.8964085}},
	})
	checkRefusals(t, src, []refusal{
		{"no residual scale", map[string]any{"minimax-01.residual_scale": nil}, nil, "missing metadata minimax-01.residual_scale"},
		{"interval 0", map[string]any{"minimax-01.full_attention_interval": uint32(0)}, nil, "metadata minimax-01.full_attention_interval = 0, want >= 1"},
		{"short array", map[string]any{"minimax-01.attention.recurrent_layers": []bool{true, false}}, nil, "minimax-01.attention.recurrent_layers: want an array of 4 bools"},
		{"no expert gate", nil, []string{"blk.2.ffn_gate_exps.weight"}, "missing tensor blk.2.ffn_gate_exps.weight"},
	})
	withBias := rewriteFile(t, src, nil, map[string]f32Tensor{"blk.1.exp_probs_b.bias": {[]uint64{8}, make([]float32, 8)}})
	if _, err := Load(withBias, Options{}); err == nil || !strings.Contains(err.Error(), "tensor blk.1.exp_probs_b.bias: llama.cpp's minimax-01 routes without a selection bias") {
		t.Errorf("exp_probs_b.bias: %v", err)
	}
	if _, err := Load(src, Options{SSMStateDtype: "f16"}); err == nil || !strings.Contains(err.Error(), "a state dtype of f16 would change nothing") {
		t.Errorf("--ssm-state-dtype f16: %v", err)
	}
}

// ling3Shape is Ling 3's layout in 4 layers: 3 KDA layers (the first
// dense), then latent attention with RoPE; 8 experts of 64, 2 used, and a
// shared one; the output tied when tied.
func ling3Shape(tied bool) func(*mkmodel.Shape) {
	return func(s *mkmodel.Shape) {
		s.Layers, s.SSMConv, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 4, 4, 1, 8, 2, 64, 64
		s.Tied = tied
	}
}

// TestLing3Variants: bailingmoe3 with its SwiGLUs clamped (the experts'
// at 0.05, the shared expert's and the dense MLP's at 0.08), and with
// softmax routing not renormalized, against llama.cpp's sums on the same
// bytes (24 windows in both builds: none off; here the first 4); refused
// by name: the unsafe gate and a bound of 0 (llama.cpp asserts), no bound,
// no selection bias (llama.cpp refuses the file).
func TestLing3Variants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "bailingmoe3", ling3Shape(false))
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "clamped", sha256: "9b71c40dae69e1ed650ed7a3e0bb780a17b88b890e4eba84c4bf34116f158424",
			set:  map[string]any{"bailingmoe3.swiglu_clamp_exp": float32(0.05), "bailingmoe3.swiglu_clamp_shexp": float32(0.08)},
			sums: []float64{-1607.2429813, -813.7402937, -780.5280554, -773.2490232}},
		{name: "softmax, not renormalized", sha256: "972ab43cb52541037714069b15cee650f4cd27290e34517dbb5f19300afac979",
			set:  map[string]any{"bailingmoe3.expert_weights_norm": false, "bailingmoe3.expert_gating_func": uint32(1)},
			sums: []float64{-1617.2412508, -806.3491321, -796.7986628, -784.4323144}},
	})
	checkRefusals(t, src, []refusal{
		{"unsafe gate", map[string]any{"bailingmoe3.kda.safe_gate": false}, nil, "metadata bailingmoe3.kda.safe_gate = false: llama.cpp 0.7.0 runs only the safe gate"},
		{"bound 0", map[string]any{"bailingmoe3.kda.gate_lower_bound": float32(0)}, nil, "metadata bailingmoe3.kda.gate_lower_bound = 0, want below 0"},
		{"no bound", map[string]any{"bailingmoe3.kda.gate_lower_bound": nil}, nil, "missing metadata bailingmoe3.kda.gate_lower_bound"},
		{"no selection bias", nil, []string{"blk.2.exp_probs_b.bias"}, "missing tensor blk.2.exp_probs_b.bias (bailingmoe3's selection bias, which llama.cpp requires)"},
	})
}

// dots3Shape is dots3-note's layout in 4 layers: full (DSA, dense FFN),
// sliding, full, sliding; 8 experts, 2 used, and a shared one.
func dots3Shape(s *mkmodel.Shape) {
	s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN, s.Window = 4, 1, 8, 2, 64, 64, 40
}

// TestDots3NoteVariants: dots3note with softmax routing not renormalized,
// without expert_weights_scale and _norm, with top_k 2048 (every key read:
// the full layers' attention dense), and with the sliding layers flagged
// by integers, against llama.cpp's sums on the same bytes (24 windows in
// both builds: none off; here the first 4); files llama.cpp refuses,
// asserts on or runs without tensors refused by name.
func TestDots3NoteVariants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "dots3note", dots3Shape)
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "softmax, not renormalized", sha256: "b566d16176dddc918c289c243c62411cc61443d4e258ae7c5dae969e5b83de25",
			set:  map[string]any{"dots3note.expert_gating_func": uint32(1), "dots3note.expert_weights_norm": false},
			sums: []float64{-1602.2533085, -790.7095439, -803.2146268, -768.9773199}},
		{name: "no scale or norm", sha256: "f91bf3131bef7b643e43e779bae1f21bed72f6818a0ed99c83560bdc8a25008b",
			set:  map[string]any{"dots3note.expert_weights_scale": nil, "dots3note.expert_weights_norm": nil},
			sums: []float64{-1616.4844697, -786.1291878, -805.3578736, -764.7923598}},
		{name: "top_k 2048", sha256: "a3e4dabb7b836311f24f935660f6137706e1d70d82266055f47534243728c9e9",
			set:  map[string]any{"dots3note.attention.indexer.top_k": uint32(2048)},
			sums: []float64{-1615.6253365, -777.5690848, -803.0472941, -759.6563112}},
		{name: "integer flags", sha256: "d2917f58bc4182c545b0b946c33f14d1c9e6c04326e709ceb0756470d06b9b1a",
			set:  map[string]any{"dots3note.attention.sliding_window_pattern": []int32{0, 1, 0, 1}},
			sums: []float64{-1620.3802614, -783.6745545, -802.4565016, -770.3366045}},
	})
	checkRefusals(t, src, []refusal{
		{"no pattern", map[string]any{"dots3note.attention.sliding_window_pattern": nil}, nil, "missing metadata dots3note.attention.sliding_window_pattern"},
		{"a period", map[string]any{"dots3note.attention.sliding_window_pattern": uint32(2)}, nil,
			"metadata dots3note.attention.sliding_window_pattern: want an array of a flag per layer (llama.cpp reads no period for dots3note)"},
		{"no window", map[string]any{"dots3note.attention.sliding_window": nil}, nil, "missing metadata dots3note.attention.sliding_window"},
		{"no sliding base", map[string]any{"dots3note.rope.freq_base_swa": nil}, nil, "missing metadata dots3note.rope.freq_base_swa"},
		{"no sliding latent", map[string]any{"dots3note.attention.kv_lora_rank_swa": nil}, nil, "missing metadata dots3note.attention.kv_lora_rank_swa"},
		{"no indexer types", map[string]any{"dots3note.attention.indexer.types": nil}, nil, "missing metadata dots3note.attention.indexer.types"},
		{"a full layer without indexer", map[string]any{"dots3note.attention.indexer.types": []int32{1, 0, 0, 0}}, nil,
			"metadata dots3note.attention.indexer.types: full layer 2 has no indexer, which llama.cpp would run without its tensors"},
		{"a sliding layer's indexer missing", map[string]any{"dots3note.attention.indexer.types": []int32{1, 1, 1, 0}}, nil, "blk.1.indexer.attn_q_b.weight"},
		{"indexer heads of 32", map[string]any{"dots3note.attention.indexer.key_length": uint32(32)}, nil,
			"metadata dots3note.attention.indexer.key_length = 32: the indexer's Hadamard rotation needs a power of 2 of at least 64"},
		{"no q compression", map[string]any{"dots3note.attention.q_lora_rank": nil}, nil, "missing metadata dots3note.attention.q_lora_rank"},
		{"no gating", map[string]any{"dots3note.expert_gating_func": nil}, nil, "missing metadata dots3note.expert_gating_func"},
		{"no shared experts", map[string]any{"dots3note.expert_shared_count": nil}, nil, "missing metadata dots3note.expert_shared_count"},
		{"no rope key norm", nil, []string{"blk.1.attn_k_norm.weight"}, "blk.1.attn_k_norm.weight"},
		{"no gate", nil, []string{"blk.2.attn_gate.weight"}, "blk.2.attn_gate.weight"},
		{"no selection bias", nil, []string{"blk.1.exp_probs_b.bias"}, "missing tensor blk.1.exp_probs_b.bias (dots3note's selection bias, which llama.cpp requires)"},
	})
}

// hyV4Shape is Hunyuan 4's layout in 4 layers: the even ones with their
// lightning indexer, the odd ones reusing its keys; a dense first layer,
// then 8 experts, 2 used, and a shared one.
func hyV4Shape(s *mkmodel.Shape) {
	s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 4, 1, 8, 2, 64, 64
}

// TestHyV4Variants: hy_v4 without DSA (no indexer: every layer dense),
// with softmax routing not renormalized, and without the selection bias,
// against llama.cpp's sums on the same bytes (24 windows in both builds:
// none off; here the first 4); files llama.cpp refuses or aborts on
// refused by name.
func TestHyV4Variants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "hy_v4", hyV4Shape)
	var indexer []string
	for _, l := range []string{"0", "2"} {
		for _, n := range []string{"k_norm.weight", "k_norm.bias", "proj.weight", "attn_k.weight", "attn_q_b.weight"} {
			indexer = append(indexer, "blk."+l+".indexer."+n)
		}
	}
	noDSA := map[string]any{"hy_v4.attention.indexer.top_k": nil, "hy_v4.attention.indexer.types": nil,
		"hy_v4.attention.indexer.head_count": nil, "hy_v4.attention.indexer.key_length": nil}
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "no DSA", sha256: "1853c98512ccdc86f52ac8abd38cfbde5de7a9f2efb23a9ab8fdc83b1bc0de0d", set: noDSA, drop: indexer,
			sums: []float64{-1602.5692254, -779.8202453, -806.7336225, -777.7410607}},
		{name: "softmax, not renormalized", sha256: "be5752b29ee61b146d42f746a240ced15b695dc1fcd28903b6f163e49b9723e4",
			set:  map[string]any{"hy_v4.expert_gating_func": uint32(1), "hy_v4.expert_weights_norm": false},
			sums: []float64{-1597.9923838, -780.8933384, -803.5539186, -775.9305213}},
		{name: "no selection bias", sha256: "403a6b92af3a8cd7821253193b550d6c09196a14e3be134d5223c0ff394eead8",
			drop: []string{"blk.1.exp_probs_b.bias", "blk.2.exp_probs_b.bias", "blk.3.exp_probs_b.bias"},
			sums: []float64{-1595.8022757, -784.3923211, -809.0888457, -775.6540195}},
	})
	checkRefusals(t, src, []refusal{
		{"no indexer types", map[string]any{"hy_v4.attention.indexer.types": nil}, nil, "missing metadata hy_v4.attention.indexer.types"},
		{"layer 0 sharing", map[string]any{"hy_v4.attention.indexer.types": []int32{0, 1, 0, 1}}, nil, "hy_v4.attention.indexer.types: layer 0 must run its indexer"},
		{"indexer heads of the rope part", map[string]any{"hy_v4.attention.indexer.key_length": uint32(16)}, nil, "attention.indexer.key_length 16: the indexer needs"},
		{"no gating", map[string]any{"hy_v4.expert_gating_func": nil}, nil, "missing metadata hy_v4.expert_gating_func"},
		{"gating 0", map[string]any{"hy_v4.expert_gating_func": uint32(0)}, nil, "metadata hy_v4.expert_gating_func = 0: llama.cpp has no default for hy_v4 and aborts"},
		{"no streams", map[string]any{"hy_v4.hyper_connection.count": nil}, nil, "missing metadata hy_v4.hyper_connection.count"},
		{"no magnitude", map[string]any{"hy_v4.hyper_connection.magnitude": nil}, nil, "missing metadata hy_v4.hyper_connection.magnitude"},
		{"no stream weights", nil, []string{"blk.2.hc_ffn_fn.weight"}, "blk.2.hc_ffn_fn.weight"},
		{"no head weights", nil, []string{"output_hc_base.weight"}, "output_hc_base.weight"},
		{"no sinks", nil, []string{"blk.1.attn_sinks.weight"}, "blk.1.attn_sinks.weight"},
		{"tied", nil, []string{"output.weight"}, "missing tensor output.weight"},
	})
}

// plmShape is PLM's layout in 4 layers: a KV head per head, the output
// tied to the embeddings.
func plmShape(s *mkmodel.Shape) { s.Layers, s.KVHeads, s.Tied = 4, 4, true }

// TestPLMKeys: PLM files llama.cpp 0.7.0 refuses or aborts on, refused by
// name: an output matrix, fewer KV heads than heads, no latent rank.
func TestPLMKeys(t *testing.T) {
	dir := oracle.Require(t)
	src := genModel(t, dir, "plm", plmShape)
	checkRefusals(t, src, []refusal{
		{"no latent rank", map[string]any{"plm.attention.kv_lora_rank": nil}, nil, "missing metadata plm.attention.kv_lora_rank"},
		{"grouped KV heads", map[string]any{"plm.attention.head_count_kv": uint32(2)}, nil, "2 KV heads for 4 heads"},
	})
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	tn, _ := f.Tensor("token_embd.weight")
	shape := slices.Clone(tn.Shape)
	f.Close()
	out := make([]float32, shape[0]*shape[1])
	withOutput := rewriteFile(t, src, nil, map[string]f32Tensor{"output.weight": {shape, out}})
	if _, err := Load(withOutput, Options{}); err == nil || !strings.Contains(err.Error(), "tensor output.weight: plm's output is the token embedding (llama.cpp 0.7.0 refuses a file with an output matrix)") {
		t.Errorf("output.weight: %v", err)
	}
}

// TestHRMKeys: HRM-Text files llama.cpp 0.7.0 refuses, refused by name:
// a block_count other than the passes' layers, missing cycles, a missing
// L stream start.
func TestHRMKeys(t *testing.T) {
	dir := oracle.Require(t)
	src := genModel(t, dir, "hrm_text", func(s *mkmodel.Shape) { s.Layers = 4 })
	checkRefusals(t, src, []refusal{
		{"block count", map[string]any{"hrm_text.block_count": uint32(4)}, nil, "metadata hrm_text.block_count = 4: want layers_per_stack · h_cycles · (l_cycles + 1) = 2 · 2 · 2"},
		{"no l cycles", map[string]any{"hrm_text.hrm.l_cycles": nil}, nil, "missing metadata hrm_text.hrm.l_cycles"},
		{"no z_l_init", nil, []string{"hrm.z_l_init"}, "missing tensor hrm.z_l_init"},
	})
}

// groveShape is GroveMoE's layout in 2 layers: 8 experts, k of them used
// per token, in chunks of 2 (ppl-mkmodel's: of 1 when k is above 4).
func groveShape(k int) func(*mkmodel.Shape) {
	return func(s *mkmodel.Shape) { s.Experts, s.ExpertsUsed, s.ExpertFFN = 8, k, 64 }
}

// TestGroveVariants: GroveMoE with the keys llama.cpp 0.7.0 does not read
// for it (a weights scale, sigmoid gating, weights not renormalized) and
// an explicit chunk width scores as without them, as llama.cpp's sums on
// the same bytes (24 windows in both builds: none off; here the first 4);
// files llama.cpp refuses or aborts on refused by name.
func TestGroveVariants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "grovemoe", groveShape(2))
	checkVariants(t, src, golden.Header.Tokens, []fileVariant{
		{name: "keys it ignores", sha256: "6be60b9baad5ddf032bf53a115e002946e3b78ebeb0a414cedf5c0f6dddade44",
			set:  map[string]any{"grovemoe.expert_weights_scale": float32(2.5), "grovemoe.expert_gating_func": uint32(2), "grovemoe.expert_weights_norm": false, "grovemoe.expert_chunk_feed_forward_length": uint32(32)},
			sums: []float64{-1616.2918311, -811.6283684, -807.6962568, -776.8315401}},
	})
	checkRefusals(t, src, []refusal{
		{"no group size", map[string]any{"grovemoe.experts_per_group": nil}, nil, "missing metadata grovemoe.experts_per_group"},
		{"no group scale", map[string]any{"grovemoe.expert_group_scale": nil}, nil, "missing metadata grovemoe.expert_group_scale"},
		{"groups of 3", map[string]any{"grovemoe.experts_per_group": uint32(3)}, nil, "metadata grovemoe.experts_per_group = 3 does not divide the 8 experts"},
		{"more used than chunks", map[string]any{"grovemoe.experts_per_group": uint32(8)}, nil, "metadata grovemoe.expert_used_count = 2: more than the 1 chunk experts (llama.cpp 0.7.0 aborts on it)"},
		{"expert groups", map[string]any{"grovemoe.expert_group_count": uint32(2), "grovemoe.expert_group_used_count": uint32(1)}, nil, "metadata grovemoe.expert_group_count = 2: llama.cpp 0.7.0 cannot run grovemoe's chunk experts with expert groups"},
		{"chunk width", map[string]any{"grovemoe.expert_chunk_feed_forward_length": uint32(48)}, nil, "tensor blk.0.ffn_gate_chexps.weight has shape [128 32 4], want [128 48 4]"},
		{"partial RoPE", map[string]any{"grovemoe.rope.dimension_count": uint32(16)}, nil, "metadata grovemoe.rope.dimension_count = 16: grovemoe rotates whole heads of 32 (llama.cpp 0.7.0 asserts it)"},
		{"no chunk experts", nil, []string{"blk.1.ffn_down_chexps.weight"}, "missing tensor blk.1.ffn_down_chexps.weight"},
	})
}

// k2Shape is K2-Horizon's layout in 3 layers: a dense first layer, then
// mixtures of 8 experts (2 used) and a shared one, with MoVA's values (2
// of 4 value experts), norms in 2 groups, per-head q/k norms, the
// base-2 softplus gate.
func k2Shape(s *mkmodel.Shape) {
	s.Layers, s.DenseLead, s.Experts, s.ExpertsUsed, s.ExpertFFN, s.SharedFFN = 3, 1, 8, 2, 64, 64
}

// normals is n values base + jit·N(0, 1) from a PCG of seed: weights for
// tensors a test adds to a file.
func normals(n int, base, jit float64, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(base + jit*r.NormFloat64())
	}
	return v
}

// TestK2HorizonVariants: K2-Horizon without its optional parts (q/k norms,
// the gate, the norms' groups; one of q's and k's norms; MoVA, the values
// from attn_v), with softmax routing not renormalized, with its per-head
// norms as [head, heads], with every expert and value expert used, and a
// dense model without experts, against llama.cpp's sums on the same bytes
// (24 windows in both builds: none off; here the first 4); files llama.cpp
// 0.7.0 asserts or aborts on refused by name.
func TestK2HorizonVariants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	tokens := golden.Header.Tokens
	src := genModel(t, dir, "k2-horizon", k2Shape)
	var plain, split []string
	noMoVA, heads2D := map[string]f32Tensor{}, map[string]f32Tensor{}
	for i := range 3 {
		for _, n := range []string{"attn_q_norm", "attn_k_norm", "attn_gate"} {
			plain = append(plain, fmt.Sprintf("blk.%d.%s.weight", i, n))
		}
		split = append(split, fmt.Sprintf("blk.%d.attn_q_norm.weight", i), fmt.Sprintf("blk.%d.attn_k_norm.weight", i))
		heads2D[fmt.Sprintf("blk.%d.attn_q_norm.weight", i)] = f32Tensor{[]uint64{32, 4}, normals(128, 1, 0.2, uint64(10+i))}
		heads2D[fmt.Sprintf("blk.%d.attn_k_norm.weight", i)] = f32Tensor{[]uint64{32, 2}, normals(64, 1, 0.2, uint64(20+i))}
	}
	var moVA []string
	for i := 1; i < 3; i++ {
		for _, n := range []string{"attn_v_gate.weight", "attn_v_gate.bias", "attn_v_exps.weight"} {
			moVA = append(moVA, fmt.Sprintf("blk.%d.%s", i, n))
		}
		noMoVA[fmt.Sprintf("blk.%d.attn_v.weight", i)] = f32Tensor{[]uint64{128, 64}, normals(128*64, 0, 0.09, uint64(i))}
	}
	checkVariants(t, src, tokens, []fileVariant{
		{name: "no q/k norms, gate or groups", sha256: "675328a8508f751c57009414d013e55b8c211d075e92696b51a5ee9f11607800",
			set: map[string]any{"k2-horizon.attention.group_norm_groups": nil}, drop: plain,
			sums: []float64{-1577.0934064, -775.8750757, -779.1165481, -773.5285407}},
		{name: "q or k norms alone", sha256: "a5548658e561168875d303ff208ec3d65a088628ef2f20f13027cd749eab19a5",
			drop: []string{"blk.0.attn_k_norm.weight", "blk.1.attn_k_norm.weight", "blk.2.attn_q_norm.weight"},
			sums: []float64{-1596.7866914, -774.5597468, -779.7403065, -788.9431980}},
		{name: "softmax", sha256: "7fef4f910855eeb07e7152d1d95e461c54afc243e4ed18707797bb6973ae0e95",
			set:  map[string]any{"k2-horizon.expert_gating_func": uint32(1), "k2-horizon.expert_weights_norm": false, "k2-horizon.expert_weights_scale": nil},
			sums: []float64{-1603.7644507, -779.4015324, -780.5753352, -779.8457250}},
		{name: "no MoVA", sha256: "2497f1701d33861ef1ee9addbadb255d7b029dba2bccd4a3533a5c8464729541",
			set: map[string]any{"k2-horizon.attention.value_expert_count": nil, "k2-horizon.attention.value_expert_used_count": nil}, add: noMoVA, drop: moVA,
			sums: []float64{-1604.3382778, -792.2077107, -802.9062215, -776.4651422}},
		{name: "per-head norms as [head, heads]", sha256: "77c49d9f637c3bfe84f9aac863cc06dd28d55b1276b0edeee6a1e08eb01d0342",
			add: heads2D, drop: split,
			sums: []float64{-1595.8124233, -775.0291650, -780.5150304, -788.2489391}},
	})
	every := genModel(t, dir, "k2-horizon", func(s *mkmodel.Shape) { k2Shape(s); s.ExpertsUsed = 8 })
	checkVariants(t, every, tokens, []fileVariant{
		{name: "every expert used", sha256: "765d92cb3b4b62333a472222ee5b68e54058e5b3561ee54d237dfb9032df92f6", // every value expert too
			sums: []float64{-1610.2261947, -773.5443077, -776.9082449, -777.9817542}},
	})
	dense := map[string]any{}
	for _, k := range []string{"expert_count", "expert_used_count", "expert_feed_forward_length", "leading_dense_block_count", "expert_shared_count", "expert_shared_feed_forward_length", "expert_weights_norm", "expert_weights_scale"} {
		dense["k2-horizon."+k] = nil
	}
	checkVariants(t, genModel(t, dir, "k2-horizon", func(s *mkmodel.Shape) { k2Shape(s); s.DenseLead = 3 }), tokens, []fileVariant{
		{name: "dense", sha256: "80d6899909e2e82ce6353994c12f90c4a13528b8002d2062d65f5270964a5fff", set: dense,
			sums: []float64{-1630.7432557, -809.6574679, -788.0521597, -772.2995418}},
	})
	checkRefusals(t, src, []refusal{
		{"groups", map[string]any{"k2-horizon.attention.group_norm_groups": uint32(3)}, nil, "metadata k2-horizon.attention.group_norm_groups = 3 does not divide the width 128"},
		{"no value expert used", map[string]any{"k2-horizon.attention.value_expert_used_count": nil}, nil, "metadata k2-horizon.attention.value_expert_used_count = 0 of 4 value experts"},
		{"more value experts used than there are", map[string]any{"k2-horizon.attention.value_expert_used_count": uint32(5)}, nil, "metadata k2-horizon.attention.value_expert_used_count = 5 of 4 value experts"},
		{"value router softmax of the selected", map[string]any{"k2-horizon.expert_gating_func": uint32(3)}, nil, "metadata k2-horizon.expert_gating_func = 3: K2-Horizon's value router takes softmax or sigmoid (llama.cpp 0.7.0 aborts)"},
		{"no value experts", nil, []string{"blk.2.attn_v_exps.weight"}, "missing tensor blk.2.attn_v_exps.weight"},
		{"no dense values", nil, []string{"blk.0.attn_v.weight"}, "missing tensor blk.0.attn_v.weight"},
		{"no expert width", map[string]any{"k2-horizon.expert_feed_forward_length": nil}, nil, "missing metadata k2-horizon.expert_feed_forward_length"},
	})
}

// switchTokens is tokens with Granite Switch's two adapter tokens (the
// vocabulary's last two, ppl-mkmodel's) at every 37th and 53rd position.
func switchTokens(tokens []int32, vocab int32) []int32 {
	out := slices.Clone(tokens)
	for i := range out {
		if i%37 == 5 {
			out[i] = vocab - 2
		}
		if i%53 == 7 {
			out[i] = vocab - 1
		}
	}
	return out
}

// TestGraniteSwitchVariants: Granite Switch on text with its adapter
// tokens (switchTokens: each window sees one adapter, the other or both,
// whose slots the router averages and rounds), with the default gain and
// with a gain of 0.7 that lets the other tokens' keys weigh, without RoPE,
// against llama.cpp's sums on the same bytes and tokens (24 windows in
// both builds: none off; here the first 4); files llama.cpp 0.7.0 refuses
// refused by name.
func TestGraniteSwitchVariants(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	src := genModel(t, dir, "graniteswitch", nil)
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	voc, _ := f.Strings("tokenizer.ggml.tokens")
	f.Close()
	tokens := switchTokens(golden.Header.Tokens, int32(len(voc)))
	checkVariants(t, src, tokens, []fileVariant{
		{name: "adapter tokens", sha256: "8c09278c7530b44109b7390598c31740d1348bff132f89ae9382ffaf7e33334d",
			sums: []float64{-1320.2683494, -664.6620352, -664.4723530, -661.2185160}},
		{name: "a gain of 0.7, no RoPE", sha256: "0befb363a54b819804f06b0186ab9fca18e38afce70eac62b1bc7d4dbc6a58b5",
			set:  map[string]any{"graniteswitch.adapters.router_gain": float32(0.7), "graniteswitch.rope.scaling.finetuned": false},
			sums: []float64{-1320.2837247, -664.6745164, -664.4481359, -661.2378245}},
	})
	checkRefusals(t, src, []refusal{
		{"no adapter count", map[string]any{"graniteswitch.adapters.count": nil}, nil, "missing metadata graniteswitch.adapters.count"},
		{"no logit scale", map[string]any{"graniteswitch.logit_scale": nil}, nil, "missing metadata graniteswitch.logit_scale"},
		{"adapters and token ids", map[string]any{"graniteswitch.adapters.token_ids_substitute": []int32{1}}, nil,
			"metadata graniteswitch.adapters.token_ids_activate and token_ids_substitute: 2 and 1 token ids for 2 adapters"},
		{"substitute out of range", map[string]any{"graniteswitch.adapters.token_ids_substitute": []int32{1, 1 << 20}}, nil,
			"metadata graniteswitch.adapters.token_ids_substitute: token id 1048576 out of range"},
		{"too many adapters", map[string]any{"graniteswitch.adapters.count": uint32(5000)}, nil, "metadata graniteswitch.adapters: 5000 adapters of rank 8 (llama.cpp 0.7.0 takes at most 4096 of each)"},
		{"partial RoPE", map[string]any{"graniteswitch.rope.dimension_count": uint32(16)}, nil, "metadata graniteswitch.rope.dimension_count = 16: graniteswitch rotates whole heads of 32"},
		{"no adapter B", nil, []string{"blk.1.ffn_down.lora_b"}, "missing tensor blk.1.ffn_down.lora_b"},
	})
}
