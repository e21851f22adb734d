// Generated from kvformat.go (KVFormats) by go generate: do not edit.
// KV cache format ids, shared by the kernels and the CUDA backend.
#pragma once

#define KV_F32 0
#define KV_F16 1
#define KV_BF16 2
#define KV_INT8 3
#define KV_FP8 4
#define KV_Q4 5
#define KV_NVFP4 6
