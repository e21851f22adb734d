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
#define KV_Q8_0 7
#define KV_Q4_1 8
#define KV_Q5_0 9
#define KV_Q5_1 10
#define KV_IQ4_NL 11
#define KV_Q2 12
#define KV_RINT8 13
#define KV_RQ4 14
#define KV_RQ2 15
