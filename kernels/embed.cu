// Embedding gather: the token embedding's rows for a window's tokens.
//
// CPU reference: nn.Linear.Lookup (score/nn/embedding.go), which
// dequantizes row tokens[t] of token_embd. Here the table was dequantized
// once at load (ppl.dev/quant, exact) and rounded to bf16, so this kernel
// dequantizes bf16 -> f32, exactly; with a bf16 copy of the model the CPU
// reference gives the same bits.
#include "common.cuh"

// embed_bf16: out (n, dim) f32 <- table (vocab, dim) bf16 rows tokens[0..n).
// grid.x = n, block = 256. Token ids were checked against the vocabulary.
extern "C" __global__ void embed_bf16(float* __restrict__ out, const u16* __restrict__ table,
                                      const int* __restrict__ tokens, int n, int dim) {
	int t = blockIdx.x;
	if (t >= n) return;
	const u16* row = table + (i64)tokens[t] * dim;
	float* o = out + (i64)t * dim;
	for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = bf16_to_f32(row[i]);
}
