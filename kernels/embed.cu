// Embedding gather: the token embedding's rows for a window's tokens.
//
// CPU reference: nn.Linear.Lookup (score/nn/embedding.go), which
// dequantizes row tokens[t] of token_embd. Here the table was dequantized
// once at load (ppl.dev/quant, exact), rounded to bf16 and stored as bf16
// or fp16 (which holds every bf16 value of magnitude 2^-14 to 65504
// exactly), so this kernel widens half -> f32 exactly; with a bf16 copy of
// the model the CPU reference gives the same bits.
#include "common.cuh"

// embed: out (n, dim) f32 <- rows tokens[0..n) of table (vocab, dim), bf16
// or (f16 != 0) fp16. grid.x = n, block = 256. Token ids were checked
// against the vocabulary.
extern "C" __global__ void embed(float* __restrict__ out, const u16* __restrict__ table,
                                 const int* __restrict__ tokens, int n, int dim, int f16) {
	int t = blockIdx.x;
	if (t >= n) return;
	const u16* row = table + (i64)tokens[t] * dim;
	float* o = out + (i64)t * dim;
	for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = f16 ? f16_to_f32(row[i]) : bf16_to_f32(row[i]);
}
