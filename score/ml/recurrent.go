package ml

import "fmt"

// Recurrent is the extension a backend implements to run linear-attention
// and state-space recurrent layers (Gated DeltaNet: qwen35, qwen35moe,
// qwen3next; Mamba-2: mamba2, granitehybrid, nemotron_h, nemotron_h_moe;
// Mamba-1: mamba, jamba; LFM2's short convolutions: lfm2, lfm2moe). A
// Network that needs it checks for it at load (model.Checker), so a
// backend without it refuses such a model by name.
//
// Plain definitions, the references the implementations are tested
// against (x[t] is row t, a token; every tensor is (tokens, columns)):
//
//   - GatherCols: dst[t, j] = x[t, cols[j]].
//   - ConvSiLU: the causal depthwise convolution over time, then SiLU:
//     dst[t, c] = silu(Σ_{j<K} w[c·K + j] · x[t-K+1+j, c] + bias[c]), tap
//     0 multiplying the oldest input, where x[-K+1..-1] are the rows of
//     hist (K - 1 rows; zeros at the window's first token). w holds
//     channels × K values (GGUF ne {K, channels}); bias, nil for none,
//     one value per channel, added to the rounded sum in float32 as
//     llama.cpp adds it; dst is not x. On return hist holds the last K - 1
//     inputs, for the next rows of the window.
//   - Conv: ConvSiLU's convolution without bias or SiLU, each sum in
//     float32 in tap order (products and sums rounded apart, as ggml's
//     SSM_CONV): dst[t, c] = Σ_{j<K} w[c·K + j] · x[t-K+1+j, c]; hist as
//     ConvSiLU's.
//   - Mul: dst = a ⊙ b elementwise, each product rounded to float32; dst
//     may be a or b.
//   - Zero: x = 0.
//   - L2Norm: each row divided by max(‖row‖, eps) (eps a floor on the
//     norm; llama.cpp divides by sqrt(‖row‖² + eps), within eps/(2‖row‖²)
//     of it, and the CPU's int8 modes do too); dst may be x.
//   - DeltaGates, in place: beta = sigmoid(beta); alpha = a[h] ·
//     softplus(alpha + dtBias[c]) per column c, h = c div (columns/len(a))
//     (the log-decay g, a = -exp(A_log)): one column per value head, or
//     with DeltaRule.KeyGates one per key channel of each (Kimi's), dtBias
//     one value per column, a one per head.
//   - DeltaNet: the gated delta rule (DeltaRule's doc) from the state in
//     state, which it leaves holding the state after the last token.
//   - GatedRMSNorm: dst = x / sqrt(mean(x²) + eps) · w · silu(z) over rows of
//     len(w.V) values (x, z and dst viewed as (rows·heads, len(w.V))); dst
//     may be x.
//   - SSMScan: the Mamba selective scan (SSM's doc) from the state in
//     state, which it leaves holding the state after the last token.
//   - GatedGroupNorm: Mamba-2's output norm, the gate before the norm:
//     with u = x ⊙ silu(z) (rounded to float32), dst = u / sqrt(mean(u²) +
//     eps) · w over each run of group values of a row, w holding a row's
//     values (one weight per column, not per position in the group); w
//     nil: dst = u, no norm (Falcon-H1 without ssm_norm); dst may be x.
//
// The references (the CPU backend's plain forms) compute each result in
// float64 and round it to float32 once; backends may compute in float32
// within the bounds their tests state.
type Recurrent interface {
	GatherCols(dst, x Tensor, cols []int)
	ConvSiLU(dst, x, hist Tensor, w, bias *Vector)
	Conv(dst, x, hist Tensor, w *Vector)
	Mul(dst, a, b Tensor)
	Zero(x Tensor)
	L2Norm(dst, x Tensor, eps float64)
	DeltaGates(beta, alpha Tensor, a, dtBias *Vector)
	DeltaNet(dst, q, k, v, g, beta, state Tensor, d *DeltaRule)
	GatedRMSNorm(dst, x, z Tensor, w *Vector, eps float64)
	SSMScan(dst, x, dt, b, c, state Tensor, s *SSM)
	GatedGroupNorm(dst, x, z Tensor, w *Vector, group int, eps float64)
}

// DeltaRule is the shape of a gated delta rule scan. For value head h
// (KHeads·r value heads, r = VHeads/KHeads) with key head
// kh = h mod KHeads when Tiled (the Qwen3.5 converter's order), else
// h div r (Qwen3-Next's), and a Dim × Dim state S (zero at a window's
// first token; rows h·Dim + i, column j of the (VHeads·Dim, Dim) state
// tensor hold S[i][j]), each token t in order does
//
//	S ← exp(g[t,h]) · S
//	S ← S + k[t,kh] ⊗ beta[t,h] · (v[t,h] - Sᵀ k[t,kh])
//	dst[t,h] = Sᵀ q[t,kh] / sqrt(Dim)
//
// (the scale on the output, not on q, as ggml's GATED_DELTA_NET applies it)
// q, k (tokens, KHeads·Dim); v, dst (tokens, VHeads·Dim); g, beta (tokens,
// VHeads). With KeyGates (Kimi Delta Attention) g is (tokens, VHeads·Dim),
// a log-decay per key channel: S[i][·] ← exp(g[t,h,i]) · S[i][·] for
// each row i (ggml's GATED_DELTA_NET with a gate as wide as the head; the
// state of one head decays row by row). State names the dtype the state is rounded to between steps:
// "f32" (or ""), "f16" or "bf16" (a backend may carry the state across a
// chunk of tokens in wider arithmetic and round it once per chunk).
type DeltaRule struct {
	KHeads, VHeads, Dim int
	Tiled               bool
	KeyGates            bool
	State               string
}

// GateCols is g's columns: one per value head, or with KeyGates one per
// key channel of each.
func (d *DeltaRule) GateCols() int {
	if d.KeyGates {
		return d.VHeads * d.Dim
	}
	return d.VHeads
}

// Shapes checks the operands of Recurrent.DeltaNet against d for n tokens
// (q's rows): it returns the first that has another shape, for the backend
// to report.
func (d *DeltaRule) Shapes(dst, q, k, v, g, beta, state Tensor) error {
	n := q.Rows()
	for _, c := range []struct {
		what       string
		t          Tensor
		rows, cols int
	}{
		{"delta q", q, n, d.KHeads * d.Dim}, {"delta k", k, n, d.KHeads * d.Dim},
		{"delta v", v, n, d.VHeads * d.Dim}, {"delta g", g, n, d.GateCols()},
		{"delta beta", beta, n, d.VHeads}, {"delta output", dst, n, d.VHeads * d.Dim},
		{"delta state", state, d.VHeads * d.Dim, d.Dim},
	} {
		if c.t.Rows() != c.rows || c.t.Cols() != c.cols {
			return fmt.Errorf("%s is %d×%d, want %d×%d", c.what, c.t.Rows(), c.t.Cols(), c.rows, c.cols)
		}
	}
	return nil
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

// SSM is the shape and weights of a Mamba selective scan, as llama.cpp's
// ggml_ssm_scan computes it. Head h of Heads reads group g = h div
// (Heads/Groups) of B and C and keeps a HeadDim × State state S (zero at a
// window's first token; rows h·HeadDim + i, column s of the
// (Heads·HeadDim, State) state tensor hold S[i][s]). Each token t in order
// does
//
//	d = softplus(dt[t,h] + DtBias[h])     (softplus(a) = a for a > 20)
//	S[i][s] ← exp(d · A[h]) · S[i][s] + d · x[t,h,i] · B[t,g][s]
//	dst[t,h,i] = Σ_s S[i][s] · C[t,g][s] + D[h] · x[t,h,i]
//
// x, dst (tokens, Heads·HeadDim); dt (tokens, Heads); B, C (tokens,
// Groups·State). A (the decay, -exp(A_log) as converters store it), D (the
// skip) and DtBias hold one value per head: Mamba-2's scan. With
// StateDecays (Mamba-1's: a head per channel, HeadDim 1, one group) A holds
// State values per head, a decay per column: exp(d · A[h][s]) (A[h·State +
// s]). State names the dtype the state is rounded to after each token:
// "f32" (or ""), "f16" or "bf16".
type SSM struct {
	Heads, HeadDim, Groups, State int
	A, D, DtBias                  *Vector
	StateDecays                   bool
	StateDtype                    string
}

// Validate reports heads that do not group, missing weights or weights of
// the wrong length (A: State values a head with StateDecays), and unknown
// state dtypes.
func (s *SSM) Validate() error {
	if s.Heads <= 0 || s.HeadDim <= 0 || s.Groups <= 0 || s.State <= 0 || s.Heads%s.Groups != 0 {
		return fmt.Errorf("selective scan: %d heads of %d in %d groups, state %d (heads must be a multiple of groups)", s.Heads, s.HeadDim, s.Groups, s.State)
	}
	for i, v := range []*Vector{s.A, s.D, s.DtBias} {
		if v == nil {
			return fmt.Errorf("selective scan: no %s", [...]string{"decays A", "skip D", "dt bias"}[i])
		}
		want := s.Heads
		if i == 0 && s.StateDecays {
			want *= s.State
		}
		if len(v.V) != want {
			return fmt.Errorf("%s has %d values for %d heads, want %d", v.Name, len(v.V), s.Heads, want)
		}
	}
	switch s.StateDtype {
	case "", "f32", "f16", "bf16":
		return nil
	}
	return fmt.Errorf("recurrent state dtype %q: want one of %v", s.StateDtype, StateDtypes)
}

// Shapes checks the operands of Recurrent.SSMScan against s for n tokens
// (x's rows): it returns the first that has another shape, for the backend
// to report.
func (s *SSM) Shapes(dst, x, dt, b, c, state Tensor) error {
	n := x.Rows()
	for _, o := range []struct {
		what       string
		t          Tensor
		rows, cols int
	}{
		{"scan x", x, n, s.Heads * s.HeadDim}, {"scan dt", dt, n, s.Heads},
		{"scan B", b, n, s.Groups * s.State}, {"scan C", c, n, s.Groups * s.State},
		{"scan output", dst, n, s.Heads * s.HeadDim}, {"scan state", state, s.Heads * s.HeadDim, s.State},
	} {
		if o.t.Rows() != o.rows || o.t.Cols() != o.cols {
			return fmt.Errorf("%s is %d×%d, want %d×%d", o.what, o.t.Rows(), o.t.Cols(), o.rows, o.cols)
		}
	}
	return nil
}

// Group returns the group of B and C head h reads.
func (s *SSM) Group(h int) int { return h / (s.Heads / s.Groups) }
