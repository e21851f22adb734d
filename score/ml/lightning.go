package ml

import "fmt"

// Lightning is the extension a backend implements to run MiniMax-01's
// lightning attention layers (minimax-01): a linear attention without
// softmax whose scores decay with the distance between query and key. The
// rest of such a layer is Backend's (Linear, RMSNorm), RWKV's (SiLU,
// Sigmoid) and Recurrent's (Mul) operations. A Network that needs it
// checks for it at load (model.Checker).
//
// Plain definition, the reference the implementations are tested against:
//
//   - Lightning: for a window from no state, each head h of size d (heads
//     = dst's columns / d) gives dst[j, h] = Σ_{i≤j} exp(−s_h·c·(j−i)) ·
//     (q_j·k_i) · v_i, where row t of qkv holds, head after head, q_t (d
//     values), k_t (d), v_t (d); s_h = slopes[h], c = scale. Computed in
//     float64 and rounded once (nn.LightningRef); the CPU computes it as
//     llama.cpp's graph does, two float32 matrix products (nn.Lightning).
type Lightning interface {
	Lightning(dst, qkv Tensor, slopes []float32, scale float32)
}

// LightningShapes checks the operands of Lightning: qkv as many rows as
// dst and three times its columns, which the heads of slopes divide.
func LightningShapes(dst, qkv Tensor, slopes []float32) error {
	switch {
	case len(slopes) == 0 || dst.Cols()%len(slopes) != 0:
		return fmt.Errorf("lightning: %d heads for %d columns", len(slopes), dst.Cols())
	case qkv.Rows() != dst.Rows() || qkv.Cols() != 3*dst.Cols():
		return fmt.Errorf("lightning: qkv (%d, %d) for an output of (%d, %d)", qkv.Rows(), qkv.Cols(), dst.Rows(), dst.Cols())
	}
	return nil
}
