// Package nn holds the modules a decoder-only transformer is built from:
// Linear (which also serves the token embedding, read by row), RMSNorm,
// RoPE, Attention and the SwiGLU MLP, each with one Forward over a whole
// window of tokens at once.
//
// Why whole windows: scoring a text means running every position of a window
// (a few hundred to a few thousand tokens) through the network from an empty
// state. Treating the window as a matrix (rows = tokens) turns every weight
// product into a matrix product, so each weight row is dequantized once per
// window instead of once per token, and the work splits across goroutines
// by output rows (Linear) or by head and query (Attention).
//
// This is the CPU reference: plain Go over float32 slices, with float64
// where it is cheap and buys exactness (norms, RoPE angles, softmax sums).
// Every kernel is a free function or a method whose doc comment gives the
// shapes, output first; faster kernels must agree with these (the AVX2
// matrix kernel of matmul_amd64.s is tested and fuzzed against a float64
// product, within float32 rounding).
//
// Buffers come from a Context's arena, which is reset per window and keeps
// its memory, so scoring many windows of one length allocates nothing after
// the first. Shape mismatches between our own modules are programmer errors
// and panic with both shapes; bad model data is caught when a model loads.
package nn
