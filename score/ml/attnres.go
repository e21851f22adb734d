package ml

// AttnRes is the extension a backend implements to run Kimi K3's
// cross-layer residual attention (kimi-k3): the model banks the input of
// every attn_res.block_size-th layer as a checkpoint, and each block reads,
// instead of the running residual alone, a softmax-weighted sum of the
// checkpoints and the running residual, weighted by a learned score of
// each row. A Network that needs it checks for it at load (model.Checker).
//
//   - ResMix: for each token row t, with s_c = Σ_e rmsnorm(ckpt_c[t])_e ·
//     w_e (an RMS norm of epsilon eps without weight) and s_cur likewise
//     for cur[t], p = softmax(s_0, …, s_cur): dst[t] = Σ_c p_c·ckpt_c[t] +
//     p_cur·cur[t]. cur is (n, cols); the C checkpoints are stacked in
//     ckpts (C·n, cols), checkpoint c in rows [c·n, (c+1)·n) (C ≥ 1); dst
//     may be cur. The reference is nn.ResMix (float64, rounded once); the
//     CPU's int8 modes round as llama.cpp's graph does (nn.GGMLResMix).
type AttnRes interface {
	ResMix(dst, ckpts, cur Tensor, w *Vector, eps float64)
}
