package ml

// PLE is the extension a backend implements to run Qwen3.8's n-gram hash
// embeddings (qwen4exp): the gate by which each residual stream takes the
// embeddings' value, from the agreement of their key with the stream. A
// Network that needs it checks for it at load (model.Checker).
//
//   - PLEGate: for each row t and each of the S = dst's columns groups of
//     E = key's columns / S values of key and query (n, S·E), with d =
//     Σ_e key[t, s·E+e]·query[t, s·E+e] · scale: dst[t, s] =
//     sigmoid(sign(d)·sqrt(max(|d|, 1e-6))). The reference (nn.PLEGate)
//     computes in float64 and rounds once; the CPU's int8 modes round as
//     llama.cpp's graph does (nn.GGMLPLEGate).
type PLE interface {
	PLEGate(dst, key, query Tensor, scale float64)
}
