// Package cuda scores with GGUF models on NVIDIA GPUs: the CUDA backend of
// ppl-score (--device cuda, cuda:N, or auto when a GPU is found).
//
// The forward pass is the CPU reference's (package model), operation for
// operation, on the device:
//
//   - weights are dequantized once at load, on the host by ppl.dev/quant
//     (exact), rounded to bf16 and copied to the GPU; matrix products are
//     cuBLAS bf16 GEMMs with float32 accumulation, and the residual adds
//     happen in their epilogue;
//   - the other operations are the kernels of ppl.dev/kernels (CUDA C, one
//     file per operation, compiled ahead to PTX for compute_80 and embedded),
//     each written against a named CPU reference and tested against it:
//     embedding gather, RMSNorm, RoPE (tables from nn.RoPE.Angle), SwiGLU,
//     bias add, KV cache store in every --kv-dtype (byte-identical to package
//     kvcache), causal attention (a FlashAttention-2-style tensor-core kernel
//     that reads the cache in its format, O(tokens·heads·head size) memory),
//     and the log-softmax over the vocabulary reduced on the device to the
//     target's log-probability, the argmax and the KL divergence, a block of
//     rows at a time, so full logits never reach the host.
//
// Activations are float32 between kernels and bf16 at the inputs of
// products; with the same bf16 weights on the CPU (WriteBF16Copy makes such
// a file) the GPU's per-token log-probabilities stay within 0.02 of the
// CPU's (tests/gpu/check.sh measures it).
//
// CUDA is reached without cgo: package driver binds libcuda.so.1 and package
// cublas libcublas through purego. All CUDA calls of a device run on one
// goroutine locked to its OS thread, which owns the device's primary
// context (Engine). A machine without a driver gets an error wrapping
// ErrNoDevice from Open and Load, never a panic.
package cuda

import (
	"ppl.dev/score/backend"
	"ppl.dev/score/model"
)

func init() { backend.Register("cuda", cudaBackend{}) }

type cudaBackend struct{}

func (cudaBackend) Open(path string, opts model.Options, index int) (backend.Model, error) {
	m, err := Load(path, opts, index)
	if err != nil {
		return nil, err
	}
	return m, nil
}
