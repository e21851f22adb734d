package cuda

import (
	"math"
	"testing"

	"ppl.dev/eval/mkmodel"
	"ppl.dev/score/model"
)

// TestEndToEndDots3Note: dots3-note on the GPU against the CPU, bf16
// cache, over windows of at most the lightning indexer's top_k (48 in
// ppl-mkmodel's file), where the full layers read every key: latent sizes
// of each layer kind, the sliding layers over 40 keys with their own RoPE
// base (attn_latent's window), the rope key's RMS norm, the sigmoid gate
// per head (gather_cols, sigmoid_f32), every expert used; and over windows
// of 96, past top_k, where the full layers read the keys the indexer
// chooses (sparse.go: ml.Sparse, attn_latent over the key set).
// Emulation, 287 targets: max 0.0081, mean 0.00190, PPL ratio 0.999796;
// sparse, 191 targets: max 0.0758, mean 0.00362, PPL ratio
// 0.999398 (key choices flip with the GPU's roundings).
func TestEndToEndDots3Note(t *testing.T) {
	dir, tok, _ := q8Vocab(t)
	path := genQ8(t, mkmodel.Shape{Arch: "dots3note", Embd: 128, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 256, Context: 4096,
		RopeBase: 10000, Eps: 1e-5, DenseLead: 1, Experts: 8, ExpertsUsed: 8, ExpertFFN: 64, SharedFFN: 64, Window: 40})
	toks := archTokens(dir, "tiny-llama-spm-q8_0", tok.NVocab, 512)
	onDevices(t, func(t *testing.T, e *Engine) {
		e2eWithinTopK(t, e, path, toks, 0.016, 0.004, 0.0004)
		e2eSparse(t, e, path, toks, 96, "", 0.1, 0.005, 0.001)
	})
}

// TestEndToEndHyV4: Hunyuan 4 on the GPU against the CPU, bf16 cache, over
// windows of at most its indexer's top_k (48 in ppl-mkmodel's file): the 4
// residual streams reduced and gated around each block (rmsnorm_f32
// without a weight, gather_cols, mul, sigmoid_f32), latent attention with
// sinks (attn_latent's) and an elementwise sigmoid gate, the routed
// experts' clamped SwiGLU, every expert used; and over windows of 96, past
// top_k, its indexer's unrotated keys choosing (ml.Sparse). Emulation, 287
// targets: max 0.0079, mean 0.00185, PPL ratio 0.999972; sparse, 191 targets: max 0.0820, mean 0.00306, PPL ratio 0.999408.
func TestEndToEndHyV4(t *testing.T) {
	dir, tok, _ := q8Vocab(t)
	path := genQ8(t, mkmodel.Shape{Arch: "hy_v4", Embd: 128, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 256, Context: 4096,
		RopeBase: 10000, Eps: 1e-5, DenseLead: 1, Experts: 8, ExpertsUsed: 8, ExpertFFN: 64, SharedFFN: 64})
	toks := archTokens(dir, "tiny-llama-spm-q8_0", tok.NVocab, 512)
	onDevices(t, func(t *testing.T, e *Engine) {
		e2eWithinTopK(t, e, path, toks, 0.016, 0.004, 0.0003)
		e2eSparse(t, e, path, toks, 96, "", 0.11, 0.004, 0.001)
	})
}

// TestEndToEndMiniMaxM3: MiniMax-M3 on the GPU against the CPU, bf16
// cache, over windows of at most its indexer's top_k blocks (4 of 16 keys
// in ppl-mkmodel's file), where MSA reads every key: per-head q/k norms,
// partial NeoX RoPE, gpt-oss's clamped SwiGLU in the dense MLP, the
// experts and the shared expert, every expert used; and over windows of
// 128, where each KV head reads the blocks its indexer head chooses
// (sparse.go: ml.BlockSparse, the flash kernel over a key set per KV
// head). Emulation, 287 targets: max 0.0090, mean 0.00202, PPL ratio
// 0.999925; sparse, 255 targets: max 0.0561, mean 0.00187, PPL ratio
// 1.000005.
func TestEndToEndMiniMaxM3(t *testing.T) {
	dir, tok, _ := q8Vocab(t)
	path := genQ8(t, mkmodel.Shape{Arch: "minimax-m3", Embd: 128, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 256, Context: 4096,
		RopeBase: 10000, Eps: 1e-5, DenseLead: 1, Experts: 8, ExpertsUsed: 8, ExpertFFN: 64, SharedFFN: 64})
	toks := archTokens(dir, "tiny-llama-spm-q8_0", tok.NVocab, 512)
	onDevices(t, func(t *testing.T, e *Engine) {
		e2eWithinTopK(t, e, path, toks, 0.016, 0.004, 0.0004)
		e2eSparse(t, e, path, toks, 128, "", 0.08, 0.003, 0.0002)
	})
}

// e2eWithinTopK holds the GPU to the CPU on path, bf16 cache, over 7
// windows of 48 tokens (ppl-mkmodel's DSA top_k, so the indexers choose
// every key) of toks: max |Δ log p| and mean within maxAbs and mean, the
// PPL ratio within ppl of 1.
func e2eWithinTopK(t *testing.T, e *Engine, path string, toks []int32, maxAbs, mean, ppl float64) {
	t.Helper()
	windows := []e2eWindow{{0, 48, 1}}
	for b := 40; b+48 <= 320; b += 40 {
		windows = append(windows, e2eWindow{b, b + 48, b + 8})
	}
	st := e2eCase(t, e, Mixed, path, model.Options{KVDtype: "bf16", Context: 48}, windows, toks, false)
	t.Logf("bf16 cache: %v", st)
	if m := st.sumAbs / float64(st.n); st.maxAbs > maxAbs || m > mean || math.Abs(st.pplRatio()-1) > ppl {
		t.Errorf("bf16 cache: %v; want max |Δ| <= %g, mean <= %g, |PPL ratio - 1| <= %g", st, maxAbs, mean, ppl)
	}
}

// e2eSparse holds the GPU to the CPU on path, bf16 cache, activations act
// ("" or model.ActInt8), over 3 windows of n tokens of toks, past the
// indexer's reach (the keys chosen on each backend from its own indexer
// scores): max |Δ log p| and mean within maxAbs and mean, the PPL ratio
// within ppl of 1.
func e2eSparse(t *testing.T, e *Engine, path string, toks []int32, n int, act string, maxAbs, mean, ppl float64) {
	t.Helper()
	windows := []e2eWindow{{0, n, 1}, {100, 100 + n, 100 + n/2}, {200, 200 + n, 200 + n/2}}
	st := e2eCase(t, e, Mixed, path, model.Options{KVDtype: "bf16", Context: n, Activations: act}, windows, toks, false)
	t.Logf("bf16 cache, activations %q, sparse windows of %d: %v", act, n, st)
	if m := st.sumAbs / float64(st.n); st.maxAbs > maxAbs || m > mean || math.Abs(st.pplRatio()-1) > ppl {
		t.Errorf("bf16 cache, activations %q, windows of %d: %v; want max |Δ| <= %g, mean <= %g, |PPL ratio - 1| <= %g", act, n, st, maxAbs, mean, ppl)
	}
}

// TestEndToEndQwen4Exp: Qwen3.8-Flash-Next (qwen4exp) on the GPU against
// the CPU, bf16 cache: 4 residual streams mixed at rank 16 around every
// block, Gated DeltaNet in layers 0 to 2 with the n-gram embeddings' gate
// in layer 1 (sparse.go: ml.PLE, ple_gate), gated attention in layer 3
// with QSA past 4 blocks of 4 keys (ml.PooledSparse: the pooled keys and
// the choice of blocks on the device, the flash kernel over the key set), experts
// and a shared expert, every expert used. Windows of 48 read sparsely from
// row 20. Emulation, 95 targets: max 0.0165, mean 0.00061, PPL ratio
// 0.999772; in the int8 mode (QSA's sums and the host's gate as the CPU
// int8 mode's) max 0.0153, mean 0.00348, PPL ratio 0.999461.
func TestEndToEndQwen4Exp(t *testing.T) {
	dir, tok, _ := q8Vocab(t)
	path := genQ8(t, mkmodel.Shape{Arch: "qwen4exp", Embd: 128, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 256, Context: 4096,
		RopeBase: 10000, Eps: 1e-5, SSMState: 32, SSMKHeads: 2, SSMVHeads: 4, SSMConv: 4, AttnInterval: 4, RopeDims: 16,
		Experts: 8, ExpertsUsed: 8, ExpertFFN: 64, SharedFFN: 64, PerLayer: 32})
	toks := archTokens(dir, "tiny-llama-spm-q8_0", tok.NVocab, 512)
	onDevices(t, func(t *testing.T, e *Engine) {
		e2eSparse(t, e, path, toks, 48, "", 0.025, 0.001, 0.0004)
		e2eSparse(t, e, path, toks, 48, model.ActInt8, 0.02, 0.005, 0.0008)
	})
}

// TestEndToEndGLM5Next: GLM-5.3-Flash (glm5-next) on the GPU against the
// CPU, bf16 cache: Kimi Delta Attention in layers 0 to 2, latent attention
// without RoPE in layer 3 whose k-pool indexer chooses past 4 blocks of 4
// keys (ml.PooledSparse: the gated pools and the choice of blocks on the
// device, the latent kernel over the key set), all inside 4 streams mixed by
// mHC (the Sinkhorn matrix sinkhorn_mix's, the rest the backend's
// operations), experts and a shared expert, every expert used, every
// SwiGLU clamped. Windows of 48 read sparsely from row 19. Emulation, 95
// targets: max 0.0106, mean 0.00187, PPL ratio 0.999785; in the int8 mode
// (the pools and the indexer's sums as the CPU int8 mode's; the clamps at 0.5
// and the routing amplify bf16's roundings, 2 argmaxes of 95 apart) max
// 0.0685, mean 0.00798, PPL ratio 1.000330.
func TestEndToEndGLM5Next(t *testing.T) {
	dir, tok, _ := q8Vocab(t)
	path := genQ8(t, mkmodel.Shape{Arch: "glm5-next", Embd: 128, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 256, Context: 4096,
		RopeBase: 10000, Eps: 1e-5, SSMConv: 4, DenseLead: 1, Experts: 8, ExpertsUsed: 8, ExpertFFN: 64, SharedFFN: 64})
	toks := archTokens(dir, "tiny-llama-spm-q8_0", tok.NVocab, 512)
	onDevices(t, func(t *testing.T, e *Engine) {
		e2eSparse(t, e, path, toks, 48, "", 0.015, 0.0025, 0.0003)
		e2eSparse(t, e, path, toks, 48, model.ActInt8, 0.09, 0.011, 0.0005)
	})
}

// TestEndToEndDeepSeek4: DeepSeek-V4 (deepseek4) on the GPU against the
// CPU, bf16 cache: a first layer of raw keys in a window of 16 (its
// experts by token id), then keys compressed by 4 (a lightning indexer
// choosing 8 blocks from row 35), 128 and 4 (ml.Compressed: the pools,
// the indexer's choice and the attention's layout on the device, the
// flash kernel over the key set), the heads turned back, grouped output, 4
// streams mixed by mHC, experts routed by sqrt(softplus) and a shared
// expert, every expert used, every SwiGLU clamped. Emulation: windows of
// 48, 95 targets: max 0.0093, mean 0.00236, PPL ratio 1.000572; of 160,
// which read a block of 128 from row 127 and choose 8 of up to 40 blocks
// of 4, 319 targets: max 0.394, mean 0.0150, PPL ratio 0.999985 (bf16's
// roundings flip the indexer's choices, 6 argmaxes apart; with every block
// read, max 0.0090, mean 0.00214); in the int8 mode, windows of 48: max
// 0.0530, mean 0.00905, PPL ratio 1.001301.
func TestEndToEndDeepSeek4(t *testing.T) {
	dir, tok, _ := q8Vocab(t)
	path := genQ8(t, mkmodel.Shape{Arch: "deepseek4", Embd: 128, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 256, Context: 4096,
		RopeBase: 10000, Eps: 1e-5, Window: 16, Experts: 8, ExpertsUsed: 8, ExpertFFN: 64, SharedFFN: 64})
	toks := archTokens(dir, "tiny-llama-spm-q8_0", tok.NVocab, 512)
	onDevices(t, func(t *testing.T, e *Engine) {
		e2eSparse(t, e, path, toks, 48, "", 0.012, 0.003, 0.0007)
		e2eSparse(t, e, path, toks, 160, "", 0.45, 0.018, 0.0003)
		e2eSparse(t, e, path, toks, 48, model.ActInt8, 0.065, 0.011, 0.0016)
	})
}
