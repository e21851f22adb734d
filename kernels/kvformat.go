package kernels

import (
	"fmt"
	"strings"
)

// KV cache format ids: how the kernels (kvstore.cu, attention.cu) and the
// CUDA backend name a cache tensor's format. This table is the one source
// of the ids: kvids.cuh is generated from it (go generate, or make kernels;
// TestKVHeader fails when the committed header differs), and package
// ppl.dev/score/cuda maps package kvcache's codecs onto it by name.
const (
	KVF32 = iota
	KVF16
	KVBF16
	KVInt8
	KVFP8
	KVQ4
	KVNVFP4
	KVQ8_0
	KVQ4_1
	KVQ5_0
	KVQ5_1
	KVIQ4NL
	KVQ2
	KVRInt8 // int8 of Hadamard-rotated heads
	KVRQ4   // Q4_0 of Hadamard-rotated heads
	KVRQ2   // q2 of Hadamard-rotated heads
)

// KVFormats names each id as package kvcache names its codec (Codec.Name).
var KVFormats = [...]string{
	KVF32:   "f32",
	KVF16:   "f16",
	KVBF16:  "bf16",
	KVInt8:  "int8",
	KVFP8:   "fp8",
	KVQ4:    "q4",
	KVNVFP4: "nvfp4",
	KVQ8_0:  "q8_0",
	KVQ4_1:  "q4_1",
	KVQ5_0:  "q5_0",
	KVQ5_1:  "q5_1",
	KVIQ4NL: "iq4_nl",
	KVQ2:    "q2",
	KVRInt8: "rint8",
	KVRQ4:   "rq4",
	KVRQ2:   "rq2",
}

// KVRotated reports whether id stores Hadamard-rotated heads (its values
// decode in the rotated basis; attention rotates the queries to match).
func KVRotated(id int) bool { return id == KVRInt8 || id == KVRQ4 || id == KVRQ2 }

//go:generate go test -run ^TestKVHeader$ -update .

// kvHeader is the text of kvids.cuh.
func kvHeader() string {
	var b strings.Builder
	b.WriteString("// Generated from kvformat.go (KVFormats) by go generate: do not edit.\n")
	b.WriteString("// KV cache format ids, shared by the kernels and the CUDA backend.\n")
	b.WriteString("#pragma once\n\n")
	for id, name := range KVFormats {
		fmt.Fprintf(&b, "#define KV_%s %d\n", strings.ToUpper(name), id)
	}
	return b.String()
}
