// Command ppl-mkmodel generates GGUF test models: deterministic, of any
// supported architecture, shape and weight type, with metadata as
// llama.cpp writes it, so llama.cpp can load them too.
//
// Random models, for tests and benchmarks:
//
//	ppl-mkmodel --params 8B --type F16 -o bench-8b-f16.gguf
//
// --params picks the Llama-shaped preset nearest the size (100M: 768 wide,
// 12 layers, tied, 32,000 tokens; 1B: the shape of Llama-3.2-1B; 8B: that
// of Llama-3-8B, 128,256 tokens), and --arch, --embd, --layers, --heads,
// --kv-heads, --head-dim, --ffn, --context, --rope-base, --eps, --tied and
// --untied override its fields (without --params: llama, 128 wide, 2
// layers, 4 heads, 2 KV heads, head 32, FFN 256). --arch phi3 writes
// Phi-3's fused attn_qkv and ffn_up, with LongRoPE's factors when
// --orig-context is set (rotating --rope-dims of each head, default all);
// llama.cpp 0.7.0 loads a phi3 file only when its vocabulary has Phi-3's
// added tokens (<|endoftext|> to <|user|>; <|end|> alone is not enough).
// Weights are Gaussian with
// the scales of the shared oracle's models, generated and quantized a chunk
// of rows at a time while the file is written, so an 8B F16 model (16 GB)
// never sits in memory.
//
// The tokenizer: --vocab-from FILE.gguf copies an existing model's
// (every tokenizer.* key); otherwise a byte-level BPE vocabulary of
// --vocab-size tokens is trained on --bpe-train CORPUS (a manifest.json or
// a text file; by default the bundled ppl-heldout-v1), padded with
// reserved control tokens when the corpus runs out of merges.
//
// The demo model, whose perplexity means something:
//
//	ppl-mkmodel --bigram eval/corpora/ppl-heldout-v1/manifest.json \
//	    --vocab-size 2048 --type Q8_0 -o eval/models/ppl-demo-bigram-q8_0.gguf
//
// trains the vocabulary on that corpus, counts its token bigrams, factors
// their smoothed log-probabilities (truncated SVD of rank --rank, then
// --refine steps of likelihood refinement) into the embedding and output
// matrices, and makes the transformer blocks near-identity (--residual
// 0.001), so the model predicts each token from the one before it.
//
// --type is the weight type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
// Q2_K, Q3_K_S, Q3_K_M, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, and the
// low-bit IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, TQ1_0,
// TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0), with llama.cpp's per-tensor rules for the mixtures
// unless --pure (the low-bit types are always pure); norms are F32. --seed fixes the random weights; the output file depends only on
// the flags.
package main

import (
	"os"

	"ppl.dev/eval/mkmodel/cli"
)

func main() { os.Exit(cli.Main()) }
