package ml

import "fmt"

// Recurrent is the extension a backend implements to run linear-attention
// recurrent layers (Gated DeltaNet: qwen35, qwen35moe, qwen3next). A
// Network that needs it checks for it at load (model.Checker), so a
// backend without it refuses such a model by name.
//
// Plain definitions, the references the implementations are tested
// against (x[t] is row t, a token; every tensor is (tokens, columns)):
//
//   - GatherCols: dst[t, j] = x[t, cols[j]].
//   - ConvSiLU: the causal depthwise convolution over time, then SiLU:
//     dst[t, c] = silu(Σ_{j<K} w[c·K + j] · x[t-K+1+j, c]), x[t] = 0 for
//     t < 0 (K - 1 zeros before the window's first token; tap 0 multiplies
//     the oldest input). w holds channels × K values (GGUF ne {K, channels}).
//   - L2Norm: each row divided by max(‖row‖, eps) (eps a floor on the norm).
//   - DeltaGates, in place: beta = sigmoid(beta); alpha = a[h] ·
//     softplus(alpha + dtBias[h]) per column h (the log-decay g, a = -exp(A_log)).
//   - DeltaNet: the gated delta rule (DeltaRule's doc).
//   - GatedRMSNorm: dst = x / sqrt(mean(x²) + eps) · w · silu(z) over rows of
//     len(w.V) values (x, z and dst viewed as (rows·heads, len(w.V))).
//
// Each result is computed in float64 and rounded to float32 once.
type Recurrent interface {
	GatherCols(dst, x Tensor, cols []int)
	ConvSiLU(dst, x Tensor, w *Vector, kernel int)
	L2Norm(dst, x Tensor, eps float64)
	DeltaGates(beta, alpha Tensor, a, dtBias *Vector)
	DeltaNet(dst, q, k, v, g, beta Tensor, d *DeltaRule)
	GatedRMSNorm(dst, x, z Tensor, w *Vector, eps float64)
}

// DeltaRule is the shape of a gated delta rule scan. For value head h
// (KHeads·r value heads, r = VHeads/KHeads) with key head
// kh = h mod KHeads when Tiled (the Qwen3.5 converter's order), else
// h div r (Qwen3-Next's), and a Dim × Dim state S starting at zero, each
// token t in order does
//
//	S ← exp(g[t,h]) · S
//	S ← S + k[t,kh] ⊗ beta[t,h] · (v[t,h] - Sᵀ k[t,kh])
//	dst[t,h] = Sᵀ q[t,kh]
//
// q, k (tokens, KHeads·Dim); v, dst (tokens, VHeads·Dim); g, beta (tokens,
// VHeads). State names the dtype the state is rounded to between steps:
// "f32" (or ""), "f16" or "bf16" (a backend may carry the state across a
// chunk of tokens in wider arithmetic and round it once per chunk).
type DeltaRule struct {
	KHeads, VHeads, Dim int
	Tiled               bool
	State               string
}

// StateDtypes are the recurrent state dtypes DeltaRule.State accepts.
var StateDtypes = []string{"f32", "f16", "bf16"}

// Validate reports head counts that do not group and unknown state dtypes.
func (d *DeltaRule) Validate() error {
	if d.KHeads <= 0 || d.VHeads <= 0 || d.Dim <= 0 || d.VHeads%d.KHeads != 0 {
		return fmt.Errorf("delta rule: %d key heads, %d value heads of size %d (value heads must be a multiple of key heads)", d.KHeads, d.VHeads, d.Dim)
	}
	switch d.State {
	case "", "f32", "f16", "bf16":
		return nil
	}
	return fmt.Errorf("recurrent state dtype %q: want one of %v", d.State, StateDtypes)
}

// KHead returns the key head value head h reads.
func (d *DeltaRule) KHead(h int) int {
	if d.Tiled {
		return h % d.KHeads
	}
	return h / (d.VHeads / d.KHeads)
}
