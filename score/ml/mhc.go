package ml

// MHC is the extension a backend implements to run manifold-constrained
// hyper-connections (mHC, DeepSeek-V4's: deepseek4 and glm5-next): the
// matrix by which each block mixes the residual streams, made doubly
// stochastic by Sinkhorn iterations from the block's mixes. A Network
// that needs it checks for it at load (model.Checker).
//
//   - SinkhornMix: for each row t of m (n, cols), dst's row t (n, S·S)
//     is the S streams' mixing matrix from m's columns [off, off + S·S),
//     scaled by scale and offset by base (S·S values), as nn.SinkhornMix
//     defines it: a softmax per read stream plus eps, then the columns
//     normalized, and iters - 1 times the rows and the columns again,
//     float32 in ggml's fused DSV4_HC_COMB's order, in every mode (it is
//     llama.cpp's arithmetic and the CPU's).
type MHC interface {
	SinkhornMix(dst, m Tensor, S, off int, scale float32, base *Vector, eps float32, iters int)
}
