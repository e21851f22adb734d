// Package kvcache defines how keys and values are stored in the attention
// cache, and simulates each storage format on the CPU: a window's keys
// (after RoPE) and values are encoded to the format's bytes and decoded back
// before attention reads them, exactly as a GPU kernel that writes the cache
// in that format and reads it back would see them.
//
// Why simulate: a smaller cache lets a GPU hold longer windows, at a cost in
// accuracy that the perplexity tool measures. The CPU reference must give
// the same numbers as the GPU kernels, so each format is pinned down here to
// the byte and to the rounding of each float32 operation, and GPU kernels are
// tested against Encode.
//
// A cache tensor is one layer's keys or values of one window: tokens × heads
// × head size values, row-major (token, then head, then element). In the
// layouts below, "[t][h][i]" lists array dimensions outermost first, all
// multi-byte numbers are little-endian, and "rne" is round to nearest, ties
// to even. A Block holds the encoded planes: Data, Scales and TensorScale.
//
//	f32   Data: float32 [t][h][i]. Exact (the reference).
//	f16   Data: IEEE binary16 [t][h][i], rne; overflow becomes ±Inf.
//	bf16  Data: bfloat16 [t][h][i], rne (ggml's GGML_FP32_TO_BF16). The default.
//	int8  Data: int8 [t][h][i]; Scales: float32 [t][h].
//	      Per token and head: d = amax/127 (amax = max |x| over the head's
//	      values), q = clamp(rne(x/d), -127, 127), 0 when d = 0.
//	      Read back as float32(q)·d.
//	fp8   Data: E4M3 [t][h][i]; Scales: float32 [t][h].
//	      Per token and head: d = amax/448, q = e4m3(x/d) (0 when d = 0),
//	      read back as e4m3value(q)·d.
//	k8v4  keys as int8; values in blocks of 32 elements of one token's head
//	      (a head shorter than 32, or the tail of one, is a shorter block),
//	      each block 18 bytes in ggml's Q4_0 layout: fp16 d, then 16 bytes
//	      whose low nibbles hold elements 0..15 and high nibbles 16..31.
//	      Data: blocks [t][h][b]. Quantized as ggml's quantize_row_q4_0_ref:
//	      m = the element of largest magnitude (the first, on ties), d = m/-8,
//	      id = 1/d (0 when d = 0), nibble = min(15, trunc(x·id + 8.5)),
//	      stored d = fp16(d); read back as (nibble-8)·float32(fp16 d).
//	nvfp4 E2M1 values in blocks of 16 elements of one token's head (shorter
//	      tail blocks as above), an E4M3 scale per block and one float32
//	      scale per tensor: g = amax/(6·448), amax over the whole tensor (one
//	      layer's keys or values of the window). Per block: s = e4m3(bamax/6/g)
//	      (bamax = max |x| over the block), e = e4m3value(s)·g,
//	      q = e2m1(x/e) (0 when e = 0); read back as (e2m1value(q)·e4m3value(s))·g.
//	      Data: nibbles [t][h][⌈i/2⌉], element 2j in the low nibble of byte j
//	      (NVIDIA's __nv_fp4x2 order); Scales: E4M3 [t][h][b]; TensorScale: g.
//
// llama.cpp's cache types (its -ctk X -ctv X: keys and values both):
//
//	q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl
//	      ggml's block types of the same names, blocks of 32 elements of one
//	      token's head in ggml's byte layout (34, 18, 20, 22, 24 and 18 bytes).
//	      Data: blocks [t][h][b]. Each block is what ggml's
//	      quantize_row_<type>_ref writes for those 32 values (package quant's
//	      quantizers; iq4_nl's is quantIQ4NL here), read back as ggml's
//	      dequantize_row_<type>. A head size that is not a multiple of 32
//	      ends in a block padded with zeros to 32 before quantizing (so for
//	      q4_1 and q5_1 the minimum counts those zeros); the padding is not
//	      read back. (llama.cpp itself refuses such heads.) q4_0 is k8v4's
//	      value format.
//
// Hadamard-rotated formats (keys rotated, values as k8v4's):
//
//	rk8v4, rk4v4, rk2v4
//	      Each token's key head k (head size n, a power of two: other sizes
//	      are refused, Format.Check) is first rotated, r = H·k/√n (Hadamard:
//	      Sylvester order, butterflies of stride 1, 2, …, n/2 in float32,
//	      then times float32(1/√n)), which spreads outlier channels over the
//	      head, then r is stored as int8 (rk8v4: one float32 scale per token
//	      and head, as int8 above), Q4_0 blocks of 32 (rk4v4, as k8v4's
//	      values) or q2 blocks of 32 (rk2v4; a head of 16 is one block padded
//	      with zeros): 10 bytes, fp16 d then 8 bytes of 2-bit codes, element
//	      j in bits 2·(j%4) of byte j/4. Per block: d = amax/1.5 (NaN when
//	      the block has a NaN or an infinity), id = 1/d (0 when d is 0 or
//	      NaN), code = clamp(rne(x·id + 1.5), 0, 3), stored fp16(d); read
//	      back as (code − 1.5)·float32(fp16 d).
//	      Keys read back as H·r̂/√n (r̂ the decoded rotation; the transform
//	      is its own inverse): that is what the CPU simulation gives
//	      attention. Since q·(H r̂/√n) = (H q/√n)·r̂, the GPU instead rotates
//	      each query head once and reads r̂ as stored (kernels/kvstore.cu
//	      kv_rotate), which differs from the CPU only in float rounding.
//	      Values: Q4_0 blocks as k8v4's.
//
// All arithmetic above is float32 with one rounding per operation, in the
// order written. The minifloats are OCP's: E4M3 (bias 7, no infinities,
// 0x7f/0xff NaN, largest 448) and E2M1 (bias 1: ±0, 0.5, 1, 1.5, 2, 3, 4, 6).
// Conversions to them round to nearest even and saturate at the largest
// finite value (CUDA's __NV_SATFINITE); NaN becomes E4M3 NaN.
//
// A NaN or infinity in a scaled group (a head for int8/fp8, a block for
// k8v4 values and the llama.cpp types, the tensor for nvfp4) reads back as
// NaN for the whole group, so bad activations are never laundered into
// finite numbers. A rotated head with one spreads it over the whole head.
package kvcache

import (
	"fmt"
	"sort"
	"strings"

	"ppl.dev/gguf"
)

// Default is the cache format used when none is asked for.
const Default = "bf16"

// Block is one encoded cache tensor: the planes a kernel writes.
type Block struct {
	Tokens, Heads, HeadDim int
	Data                   []byte  // element payload
	Scales                 []byte  // per-group scales; nil for f32, f16, bf16 and the block formats (which keep their scales inline)
	TensorScale            float32 // nvfp4's per-tensor scale g

	rot []float32 // Rotated's buffer for the rotated input
}

// Codec is one storage format for keys or values.
type Codec interface {
	// Name is the format's name ("int8", "q4").
	Name() string
	// Encode stores x (tokens × heads × headDim) into b, reusing b's slices.
	Encode(b *Block, x []float32, tokens, heads, headDim int)
	// Decode reads b back into x (tokens × heads × headDim values).
	Decode(b *Block, x []float32)
}

// Format is a cache dtype: the codecs for keys and for values.
type Format struct {
	Name string
	K, V Codec
}

// PerToken reports whether c encodes each token on its own, so that a
// window's tokens may be encoded in parts with the same result: every codec
// here but NVFP4, whose second-level scale spans the tensor (and a
// rotation of it). A codec not listed is taken not to.
func PerToken(c Codec) bool {
	switch c := c.(type) {
	case F32, F16, BF16, GGML, Int8, FP8, Q4, Q2:
		return true
	case Rotated:
		return PerToken(c.Inner)
	}
	return false
}

// RoundTrip replaces x (tokens × heads × headDim) with what reading it
// back from a cache of codec c gives, using b as the encoding buffer.
func RoundTrip(c Codec, b *Block, x []float32, tokens, heads, headDim int) {
	if len(x) != tokens*heads*headDim {
		panic(fmt.Sprintf("kvcache: %d values for %d×%d×%d", len(x), tokens, heads, headDim))
	}
	c.Encode(b, x, tokens, heads, headDim)
	c.Decode(b, x)
}

var formats = map[string]Format{
	"f32":   {"f32", F32{}, F32{}},
	"f16":   {"f16", F16{}, F16{}},
	"bf16":  {"bf16", BF16{}, BF16{}},
	"int8":  {"int8", Int8{}, Int8{}},
	"fp8":   {"fp8", FP8{}, FP8{}},
	"k8v4":  {"k8v4", Int8{}, Q4{}},
	"nvfp4": {"nvfp4", NVFP4{}, NVFP4{}},

	"q8_0":   {"q8_0", GGML{T: gguf.TypeQ8_0}, GGML{T: gguf.TypeQ8_0}},
	"q4_0":   {"q4_0", Q4{}, Q4{}},
	"q4_1":   {"q4_1", GGML{T: gguf.TypeQ4_1}, GGML{T: gguf.TypeQ4_1}},
	"q5_0":   {"q5_0", GGML{T: gguf.TypeQ5_0}, GGML{T: gguf.TypeQ5_0}},
	"q5_1":   {"q5_1", GGML{T: gguf.TypeQ5_1}, GGML{T: gguf.TypeQ5_1}},
	"iq4_nl": {"iq4_nl", GGML{T: gguf.TypeIQ4_NL}, GGML{T: gguf.TypeIQ4_NL}},

	"rk8v4": {"rk8v4", Rotated{Int8{}}, Q4{}},
	"rk4v4": {"rk4v4", Rotated{Q4{}}, Q4{}},
	"rk2v4": {"rk2v4", Rotated{Q2{}}, Q4{}},
}

// Check returns an error when the format cannot store heads of headDim
// values (the rotated formats need a power of two).
func (f Format) Check(headDim int) error {
	for _, c := range []Codec{f.K, f.V} {
		if ch, ok := c.(interface{ Check(int) error }); ok {
			if err := ch.Check(headDim); err != nil {
				return fmt.Errorf("KV cache dtype %s: %w", f.Name, err)
			}
		}
	}
	return nil
}

// Names lists the cache formats, sorted.
func Names() []string {
	var out []string
	for n := range formats {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Lookup returns the format called name; "" means Default.
func Lookup(name string) (Format, error) {
	if name == "" {
		name = Default
	}
	f, ok := formats[strings.ToLower(name)]
	if !ok {
		return Format{}, fmt.Errorf("kvcache: unknown KV cache dtype %q (supported: %s)", name, strings.Join(Names(), ", "))
	}
	return f, nil
}

// grow returns b[:n], reallocating when its capacity is short.
func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

func setShape(b *Block, tokens, heads, headDim int) {
	b.Tokens, b.Heads, b.HeadDim = tokens, heads, headDim
	b.TensorScale = 0
}

func (b *Block) n() int { return b.Tokens * b.Heads * b.HeadDim }

// LlamaType returns the ggml block type of name where it is one of
// llama.cpp's quantized cache types, before which llama.cpp 0.7.0 turns
// the attention's heads by Hadamard matrices (llama_kv_cache's attn_rot_k
// and attn_rot_v) and whose blocks its CPU flash attention reads.
func LlamaType(name string) (gguf.Type, bool) {
	t, ok := llamaTypes[name]
	return t, ok
}

var llamaTypes = map[string]gguf.Type{
	"q8_0": gguf.TypeQ8_0, "q4_0": gguf.TypeQ4_0, "q4_1": gguf.TypeQ4_1,
	"q5_0": gguf.TypeQ5_0, "q5_1": gguf.TypeQ5_1, "iq4_nl": gguf.TypeIQ4_NL,
}

// LlamaHead0 is the first layer's key and value head sizes
// (n_embd_head_k(0), n_embd_head_v(0)), by which llama.cpp 0.7.0 decides
// for every layer whether to turn the attention's heads by Hadamard
// matrices before one of its quantized caches (LlamaType): Gemma 4's
// sliding heads of 32, say, leave its global heads of 64 unturned.
type LlamaHead0 struct{ K, V int }

// KeyRotation is the size of the Hadamard matrix llama.cpp turns the
// queries and keys of heads of headDim by before a cache of format name
// (build_input_k_rot): where the first layer's key heads and headDim are
// positive multiples of 64, the largest power of 2 dividing headDim; 0
// otherwise.
// Latent attention (MLA), whose values are a prefix of its keys, is
// never turned, whatever llama.cpp's log prints (probed: DeepSeek-V2's
// graph with a latent of 192 has no turn).
func (h LlamaHead0) KeyRotation(name string, headDim int) int {
	if !llamaTurns(name, h.K, headDim) {
		return 0
	}
	r := 64
	for headDim%(2*r) == 0 {
		r *= 2
	}
	return r
}

// ValueRotation is the size of the Hadamard matrix llama.cpp turns value
// heads of valueDim by before a cache of format name, and the attention's
// output back by: 64 where the first layer's value heads and valueDim are
// positive multiples of 64, whatever the keys' (MiniCPM3's values of 64
// are turned, its keys of 96 not); 0 otherwise, as for a cache that holds
// no values (llama.cpp's log prints n_rot_v = 0).
func (h LlamaHead0) ValueRotation(name string, valueDim int) int {
	if !llamaTurns(name, h.V, valueDim) {
		return 0
	}
	return 64
}

// llamaTurns reports whether llama.cpp turns heads of dim before a cache
// of format name where the first layer's heads of that kind are head0:
// one of its quantized types, both sizes positive multiples of 64.
func llamaTurns(name string, head0, dim int) bool {
	_, ok := LlamaType(name)
	return ok && head0 > 0 && head0%64 == 0 && dim > 0 && dim%64 == 0
}
