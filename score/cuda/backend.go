// Package cuda scores with GGUF models on NVIDIA GPUs: the CUDA backend of
// ppl-score (--device cuda, cuda:N, or auto when a GPU is found).
//
// The model is package model's, unchanged: Load calls model.LoadOn with a
// Device that makes this package's ml.Backend (ml.go), so every
// architecture written against package ml's operations (llama, qwen2,
// qwen3, qwen3moe, ...) runs here without a line of GPU code of its own,
// and scoring (row blocks of logits, the reference model) is model's too.
// The backend implements each operation on the device:
//
//   - weights stay in the file's GGUF blocks on the GPU and each product
//     dequantizes the rows it multiplies on the device (qweights.go,
//     kernels/dequant.cu: ppl.dev/quant's values, rounded to bf16), or
//     with --gpu-weights bf16 the host makes that bf16 copy at load; matrix
//     products are cuBLAS half-precision GEMMs (cublasGemmEx) with float32
//     accumulation;
//   - the other operations are the kernels of ppl.dev/kernels (CUDA C, one
//     file per operation, compiled ahead to PTX for compute_80 and embedded),
//     each written against a named CPU reference and tested against it:
//     embedding gather, RMSNorm, RoPE (tables from nn.RoPE.Angle), SwiGLU
//     and the other MLP activations (GeGLU, gpt-oss's clamped SwiGLU, the
//     ungated ReLU²), bias and residual adds, scaling, sigmoid gates, soft-capping, KV
//     cache store in every --kv-dtype (byte-identical to package kvcache),
//     causal attention (a FlashAttention-2-style tensor-core kernel that
//     reads the cache in its format, O(tokens·heads·head size) memory,
//     sliding windows and sinks included), a mixture of experts'
//     routing (moe_route, ml.Router's arithmetic on the device), gather,
//     per-expert products and weighted sum, and the log-softmax over the
//     vocabulary reduced on the device to the target's log-probability,
//     the argmax and the KL divergence, a block of rows at a time, so full
//     logits never reach the host.
//
// Precision: every weight is rounded once, to fp16, from its exact
// dequantized value, and so is every product input (ffn_down's,
// silu(gate)·up, scaled by a power of two where it would overflow); the
// residual stream, scores, softmax and all sums are float32 (or float64
// where the reference uses it), and a mixture of experts' router is
// float32 throughout (its logits choose experts). Against the CPU scoring
// the same file the oracle's dense models are within 0.01 per token on the
// emulation (Precision, Mixed; docs/cuda.md); bf16 weights
// (--gpu-weights bf16) or all-bf16 inputs (PPL_CUDA_PRECISION=bf16) put
// them at 0.03-0.04. A mixture of experts is checked by its mean and
// perplexity only: a routing choice near a tie flips on those roundings
// now and then.
//
// A model's weights are a weight set (weights.go): engines on one device
// share its copy, and a model larger than one device has one copy spread
// over several, each engine reading the others' share (ppl-score
// --devices, LoadGroup).
//
// The engine is tested without a GPU on an emulation of the device in Go
// (sim_test.go: memory, every kernel as its CPU reference or a lane-level
// port, cuBLAS's GEMM, launch shapes, argument types checked against the
// PTX), and with one by tests/gpu/check.sh.
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

func (cudaBackend) OpenGroup(path string, opts model.Options, indices []int, spread bool) ([]backend.Model, error) {
	ms, err := LoadGroup(path, opts, indices, spread)
	if err != nil {
		return nil, err
	}
	out := make([]backend.Model, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out, nil
}

var (
	_ backend.Grouper  = cudaBackend{}
	_ backend.Uploader = (*Model)(nil)
)
