package mkmodel

import (
	"fmt"
	"sort"
	"strings"

	"ppl.dev/gguf"
)

// FileType is a whole-model weight format as llama-quantize names them:
// a base type for the 2-D weights plus llama.cpp's rules for the tensors
// that get more bits.
type FileType struct {
	Name string
	ID   uint32    // general.file_type (enum llama_ftype)
	Base gguf.Type // type of most 2-D weights
	// Pure gives every 2-D tensor the base type (llama-quantize --pure).
	Pure bool
	// Low marks the low-bit types (IQ*, TQ*, MXFP4, NVFP4, Q1_0, Q2_0), which are
	// always written pure: we do not reproduce llama.cpp's mixtures for
	// them, nor its importance-matrix quantizers (see package quant).
	Low bool
}

// FileTypes lists the supported file types.
var FileTypes = []FileType{
	{Name: "F32", ID: 0, Base: gguf.TypeF32},
	{Name: "F16", ID: 1, Base: gguf.TypeF16},
	{Name: "BF16", ID: 32, Base: gguf.TypeBF16},
	{Name: "Q8_0", ID: 7, Base: gguf.TypeQ8_0},
	{Name: "Q4_0", ID: 2, Base: gguf.TypeQ4_0},
	{Name: "Q4_1", ID: 3, Base: gguf.TypeQ4_1},
	{Name: "Q5_0", ID: 8, Base: gguf.TypeQ5_0},
	{Name: "Q5_1", ID: 9, Base: gguf.TypeQ5_1},
	{Name: "Q2_K", ID: 10, Base: gguf.TypeQ2_K},
	{Name: "Q3_K_S", ID: 11, Base: gguf.TypeQ3_K},
	{Name: "Q3_K_M", ID: 12, Base: gguf.TypeQ3_K},
	{Name: "Q4_K_S", ID: 14, Base: gguf.TypeQ4_K},
	{Name: "Q4_K_M", ID: 15, Base: gguf.TypeQ4_K},
	{Name: "Q5_K_S", ID: 16, Base: gguf.TypeQ5_K},
	{Name: "Q5_K_M", ID: 17, Base: gguf.TypeQ5_K},
	{Name: "Q6_K", ID: 18, Base: gguf.TypeQ6_K},
	{Name: "IQ2_XXS", ID: 19, Base: gguf.TypeIQ2_XXS, Low: true},
	{Name: "IQ2_XS", ID: 20, Base: gguf.TypeIQ2_XS, Low: true},
	{Name: "IQ3_XXS", ID: 23, Base: gguf.TypeIQ3_XXS, Low: true},
	{Name: "IQ1_S", ID: 24, Base: gguf.TypeIQ1_S, Low: true},
	{Name: "IQ3_S", ID: 26, Base: gguf.TypeIQ3_S, Low: true},
	{Name: "IQ2_S", ID: 28, Base: gguf.TypeIQ2_S, Low: true},
	{Name: "IQ1_M", ID: 31, Base: gguf.TypeIQ1_M, Low: true},
	{Name: "TQ1_0", ID: 36, Base: gguf.TypeTQ1_0, Low: true},
	{Name: "TQ2_0", ID: 37, Base: gguf.TypeTQ2_0, Low: true},
	{Name: "MXFP4", ID: 38, Base: gguf.TypeMXFP4, Low: true}, // llama.cpp's MXFP4_MOE
	{Name: "NVFP4", ID: 39, Base: gguf.TypeNVFP4, Low: true},
	{Name: "Q1_0", ID: 40, Base: gguf.TypeQ1_0, Low: true},
	{Name: "Q2_0", ID: 41, Base: gguf.TypeQ2_0, Low: true},
}

// LookupFileType finds a file type by name, case-insensitively; Q4_K and
// Q5_K mean Q4_K_M and Q5_K_M, Q3_K means Q3_K_M, as for llama-quantize.
func LookupFileType(name string) (FileType, error) {
	n := strings.ToUpper(name)
	switch n {
	case "Q4_K", "Q5_K", "Q3_K":
		n += "_M"
	}
	for _, f := range FileTypes {
		if f.Name == n {
			return f, nil
		}
	}
	var names []string
	for _, f := range FileTypes {
		names = append(names, f.Name)
	}
	sort.Strings(names)
	return FileType{}, fmt.Errorf("unknown weight type %q (want one of %s)", name, strings.Join(names, ", "))
}

// Quantized reports whether the file type stores quantized blocks.
func (f FileType) Quantized() bool {
	return f.Base != gguf.TypeF32 && f.Base != gguf.TypeF16 && f.Base != gguf.TypeBF16
}

// useMoreBits is llama.cpp's choice of the layers that get more bits in
// the _M mixtures: the first and last eighth, and every third in between.
func useMoreBits(i, n int) bool {
	return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2
}

// TensorType returns the type of a tensor of the given row length (ne0),
// following llama_tensor_get_type in llama.cpp for the rules that apply to
// llama-like models:
//
//   - 1-D tensors (norms, biases), MoE routers (ffn_gate_inp) and Gated
//     DeltaNet convolutions (ssm_conv1d) are F32;
//   - the output matrix (token_embd when the output is tied) is Q6_K in
//     every quantized type but Q8_0;
//   - Q2_K: attn_v Q4_K with 4+ query heads per KV head, else Q3_K;
//     ffn_down Q3_K; attn_output Q3_K;
//   - Q3_K_M: attn_v Q5_K in the first two layers, else Q4_K; ffn_down Q5_K
//     in the first sixteenth of the layers, else Q4_K; attn_output Q4_K;
//   - Q4_K_M and Q5_K_M: attn_v and ffn_down Q6_K in useMoreBits layers;
//   - Q4_K_S: attn_v Q5_K in the first four layers, ffn_down Q5_K in the
//     first eighth;
//   - a type whose block does not divide the row length falls back as in
//     llama.cpp (Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0, Q2_K and Q3_K to
//     Q4_0), then to F16.
//
// For every file type listed in FileTypes, llama-quantize (Debian's
// llama.cpp) chooses the same type for every tensor of a 100M preset
// model, a 16-layer untied model with 4 query heads per KV head, and a
// 128-wide model where the fallbacks apply.
//
// With Pure, and for the low-bit types (Low), every 2-D tensor gets the
// base type (still subject to the fallback, where the i-quants, the
// ternary types and Q2_0 fall back to Q4_0: llama.cpp's IQ4_NL for the
// i-quants we cannot quantize; Q2_0's as llama-quantize's, probed; Q1_0,
// for which llama-quantize defines no fallback and refuses the file, and
// NVFP4, which it does not write, to F16). The sentence above is about the
// other types only.
func (f FileType) TensorType(name string, ne0, dims, layer, layers, gqa int, tiedOutput bool) gguf.Type {
	if dims < 2 || strings.HasSuffix(name, "ffn_gate_inp.weight") || strings.Contains(name, "ssm_conv1d") || strings.HasSuffix(name, "shortconv.conv.weight") ||
		strings.HasSuffix(name, "altup_correct_coef.weight") || strings.HasSuffix(name, "altup_predict_coef.weight") { // llama-quantize leaves MoE routers, convolutions and Gemma 3n's AltUp coefficients F32
		return gguf.TypeF32
	}
	if rwkvSmall(name) {
		return gguf.TypeF32 // llama-quantize's list of RWKV's small 2-D weights it leaves as they are
	}
	if strings.HasSuffix(name, "ssm_a") || strings.HasSuffix(name, "ssm_d") || strings.HasSuffix(name, "_norm.weight") || strings.HasSuffix(name, "_norm.bias") || strings.Contains(name, ".ple_norm_") {
		return gguf.TypeF32 // Mamba-2's per-head values, norms of 2-D (Mamba-2's grouped one, Command R+'s and chameleon's per head, with its biases, qwen4exp's per stream): F32 as llama-quantize leaves them (qwen4exp's PLE norms as its converter writes them: llama.cpp multiplies by them, which a quantized one refuses)
	}
	t := f.Base
	if f.Quantized() && !f.Pure && !f.Low {
		t = f.mix(name, layer, layers, gqa, tiedOutput)
	}
	return fallback(t, ne0)
}

func (f FileType) mix(name string, layer, layers, gqa int, tied bool) gguf.Type {
	isOutput := name == "output.weight" || tied && name == "token_embd.weight"
	has := func(s string) bool { return strings.Contains(name, s) }
	switch {
	case isOutput:
		if f.Base != gguf.TypeQ8_0 {
			return gguf.TypeQ6_K
		}
	case has("attn_v.weight"):
		switch f.Name {
		case "Q2_K":
			if gqa >= 4 {
				return gguf.TypeQ4_K
			}
			return gguf.TypeQ3_K
		case "Q3_K_M":
			if layer < 2 {
				return gguf.TypeQ5_K
			}
			return gguf.TypeQ4_K
		case "Q4_K_M", "Q5_K_M":
			if useMoreBits(layer, layers) {
				return gguf.TypeQ6_K
			}
		case "Q4_K_S":
			if layer < 4 {
				return gguf.TypeQ5_K
			}
		}
	case has("ffn_down"):
		switch f.Name {
		case "Q2_K":
			return gguf.TypeQ3_K
		case "Q3_K_M":
			if layer < layers/16 {
				return gguf.TypeQ5_K
			}
			return gguf.TypeQ4_K
		case "Q4_K_M", "Q5_K_M":
			if useMoreBits(layer, layers) {
				return gguf.TypeQ6_K
			}
		case "Q4_K_S":
			if layer < layers/8 {
				return gguf.TypeQ5_K
			}
		}
	case has("attn_output.weight"):
		switch f.Name {
		case "Q2_K":
			return gguf.TypeQ3_K
		case "Q3_K_M":
			return gguf.TypeQ4_K
		}
	}
	return f.Base
}

func fallback(t gguf.Type, ne0 int) gguf.Type {
	for {
		if ne0%t.BlockSize() == 0 {
			return t
		}
		switch t {
		case gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeTQ1_0, gguf.TypeTQ2_0, gguf.TypeQ2_0,
			gguf.TypeIQ2_XXS, gguf.TypeIQ2_XS, gguf.TypeIQ2_S, gguf.TypeIQ3_XXS, gguf.TypeIQ3_S,
			gguf.TypeIQ1_S, gguf.TypeIQ1_M:
			t = gguf.TypeQ4_0
		case gguf.TypeQ4_K:
			t = gguf.TypeQ5_0
		case gguf.TypeQ5_K:
			t = gguf.TypeQ5_1
		case gguf.TypeQ6_K:
			t = gguf.TypeQ8_0
		default:
			return gguf.TypeF16
		}
	}
}

// rwkvSmall reports RWKV's low-rank and blend weights, which llama-quantize
// does not quantize (time_mix_w0..w2, a0..a2, v0..v2, g1, g2, lerp_fused,
// first, decay_w1, decay_w2).
func rwkvSmall(name string) bool {
	i := strings.Index(name, ".time_mix_")
	if i < 0 {
		return false
	}
	switch strings.TrimSuffix(name[i+len(".time_mix_"):], ".weight") {
	case "w0", "w1", "w2", "a0", "a1", "a2", "v0", "v1", "v2", "g1", "g2", "lerp_fused", "first", "decay_w1", "decay_w2":
		return true
	}
	return false
}
