package cuda

import (
	"math"
	"strings"
	"testing"

	"ppl.dev/eval/mkmodel"
	"ppl.dev/score/model"
)

// TestEndToEndDots3Note: dots3-note on the GPU against the CPU, bf16
// cache, over windows of at most the lightning indexer's top_k (48 in
// ppl-mkmodel's file), where the full layers read every key: latent sizes
// of each layer kind, the sliding layers over 40 keys with their own RoPE
// base (attn_latent's window), the rope key's RMS norm, the sigmoid gate
// per head (gather_cols, sigmoid_f32), every expert used. A context past
// top_k needs the sparse attention (ml.Sparse) the GPU lacks: refused at
// load, in one line naming it (ppl-score --device auto then scores on the
// CPU). Emulation, 287 targets: max 0.0081, mean 0.00190,
// PPL ratio 0.999796.
func TestEndToEndDots3Note(t *testing.T) {
	dir, tok, _ := q8Vocab(t)
	path := genQ8(t, mkmodel.Shape{Arch: "dots3note", Embd: 128, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 256, Context: 4096,
		RopeBase: 10000, Eps: 1e-5, DenseLead: 1, Experts: 8, ExpertsUsed: 8, ExpertFFN: 64, SharedFFN: 64, Window: 40})
	toks := archTokens(dir, "tiny-llama-spm-q8_0", tok.NVocab, 512)
	onDevices(t, func(t *testing.T, e *Engine) {
		e2eWithinTopK(t, e, path, toks, 0.016, 0.004, 0.0004)
		refusedAt(t, e, path, 64, "dots3note: a window of 64 tokens, past the lightning indexer's top_k 48, needs its sparse attention, which the")
	})
}

// TestEndToEndHyV4: Hunyuan 4 on the GPU against the CPU, bf16 cache, over
// windows of at most its indexer's top_k (48 in ppl-mkmodel's file): the 4
// residual streams reduced and gated around each block (rmsnorm_f32
// without a weight, gather_cols, mul, sigmoid_f32), latent attention with
// sinks (attn_latent's) and an elementwise sigmoid gate, the routed
// experts' clamped SwiGLU, every expert used. Emulation, 287 targets: max
// 0.0079, mean 0.00185, PPL ratio 0.999972.
func TestEndToEndHyV4(t *testing.T) {
	dir, tok, _ := q8Vocab(t)
	path := genQ8(t, mkmodel.Shape{Arch: "hy_v4", Embd: 128, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 256, Context: 4096,
		RopeBase: 10000, Eps: 1e-5, DenseLead: 1, Experts: 8, ExpertsUsed: 8, ExpertFFN: 64, SharedFFN: 64})
	toks := archTokens(dir, "tiny-llama-spm-q8_0", tok.NVocab, 512)
	onDevices(t, func(t *testing.T, e *Engine) { e2eWithinTopK(t, e, path, toks, 0.016, 0.004, 0.0003) })
}

// TestEndToEndMiniMaxM3: MiniMax-M3 on the GPU against the CPU, bf16
// cache, over windows of at most its indexer's top_k blocks (4 of 16 keys
// in ppl-mkmodel's file), where MSA reads every key: per-head q/k norms,
// partial NeoX RoPE, gpt-oss's clamped SwiGLU in the dense MLP, the
// experts and the shared expert, every expert used. A context past 64
// tokens needs the block-sparse attention (ml.BlockSparse) the GPU lacks:
// refused at load, in one line naming it. Emulation, 287 targets: max
// 0.0090, mean 0.00202, PPL ratio 0.999925.
func TestEndToEndMiniMaxM3(t *testing.T) {
	dir, tok, _ := q8Vocab(t)
	path := genQ8(t, mkmodel.Shape{Arch: "minimax-m3", Embd: 128, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 256, Context: 4096,
		RopeBase: 10000, Eps: 1e-5, DenseLead: 1, Experts: 8, ExpertsUsed: 8, ExpertFFN: 64, SharedFFN: 64})
	toks := archTokens(dir, "tiny-llama-spm-q8_0", tok.NVocab, 512)
	onDevices(t, func(t *testing.T, e *Engine) {
		e2eWithinTopK(t, e, path, toks, 0.016, 0.004, 0.0004)
		refusedAt(t, e, path, 128, "minimax-m3: windows of 128 tokens, past the MSA indexer's 64, need its sparse attention, which the")
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

// refusedAt wants path refused on e at a context of n tokens (bf16 cache),
// in one line that contains want.
func refusedAt(t *testing.T, e *Engine, path string, n int, want string) {
	t.Helper()
	g, err := loadOn(e, path, model.Options{KVDtype: "bf16", Context: n}, Mixed)
	if err == nil {
		g.Close()
	}
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("a context of %d: %v, want a line with %q", n, err, want)
	}
}
