package cuda

import (
	"fmt"

	"ppl.dev/gguf"
)

// Integer decoding of quantized weights on the device, for the int8
// tensor-core GEMM of --activations int8: rows of a matrix kept in its
// GGUF blocks decoded into signed bytes and per-group scales (and minima),
// what quant.DecodeInt8 writes on the host less the format's Offset (see
// the i8dec section of kernels/dequant.cu).

// int8DecodeKernels are the types with an integer decoding kernel: every
// type with both an integer decoding (quant.Int8FormatOf) and a
// dequantization kernel. Q8_K, llama.cpp's activation format, has
// neither kernel: no model file holds it.
var int8DecodeKernels = map[gguf.Type]dequantKernel{
	gguf.TypeQ4_0:    {"i8dec_q4_0", false},
	gguf.TypeQ4_1:    {"i8dec_q4_1", false},
	gguf.TypeQ5_0:    {"i8dec_q5_0", false},
	gguf.TypeQ5_1:    {"i8dec_q5_1", false},
	gguf.TypeQ8_0:    {"i8dec_q8_0", false},
	gguf.TypeQ2_K:    {"i8dec_q2_k", false},
	gguf.TypeQ3_K:    {"i8dec_q3_k", false},
	gguf.TypeQ4_K:    {"i8dec_q4_k", false},
	gguf.TypeQ5_K:    {"i8dec_q5_k", false},
	gguf.TypeQ6_K:    {"i8dec_q6_k", false},
	gguf.TypeIQ4_NL:  {"i8dec_iq4_nl", false},
	gguf.TypeIQ4_XS:  {"i8dec_iq4_xs", false},
	gguf.TypeMXFP4:   {"i8dec_mxfp4", false},
	gguf.TypeNVFP4:   {"i8dec_nvfp4", false},
	gguf.TypeTQ1_0:   {"i8dec_tq1_0", false},
	gguf.TypeTQ2_0:   {"i8dec_tq2_0", false},
	gguf.TypeQ1_0:    {"i8dec_q1_0", false},
	gguf.TypeQ2_0:    {"i8dec_q2_0", false},
	gguf.TypeIQ2_XXS: {"i8dec_iq2_xxs", true},
	gguf.TypeIQ2_XS:  {"i8dec_iq2_xs", true},
	gguf.TypeIQ2_S:   {"i8dec_iq2_s", true},
	gguf.TypeIQ3_XXS: {"i8dec_iq3_xxs", true},
	gguf.TypeIQ3_S:   {"i8dec_iq3_s", true},
	gguf.TypeIQ1_S:   {"i8dec_iq1_s", true},
	gguf.TypeIQ1_M:   {"i8dec_iq1_m", true},
}

// int8Rows decodes rows [row0, row0+rows) of mq, of in weights each, into
// q (rows × in signed bytes, 16-byte aligned), s (rows × in/G scales) and,
// for the types with minima, m (rows × in/G; may be 0 for the others),
// G the type's quant.Int8Format Group; the i-quants read mq's lattices
// (iqGrids). in must be a multiple of 32 and of the type's block size. On
// the engine's thread.
func (e *Engine) int8Rows(q, s, m ptr, mq *qmat, row0 int64, rows, in int) error {
	k, ok := int8DecodeKernels[mq.typ]
	switch {
	case !ok:
		return fmt.Errorf("cuda: no integer decoding kernel for %v", mq.typ)
	case in%32 != 0 || in%mq.typ.BlockSize() != 0:
		return fmt.Errorf("cuda: integer decoding of %v rows of %d weights: not a multiple of 32 and of the block size %d", mq.typ, in, mq.typ.BlockSize())
	case k.grid && mq.grid == 0:
		return fmt.Errorf("cuda: integer decoding of %v needs the i-quant grids", mq.typ)
	}
	units := int64(rows) * int64(in/32)
	if units >= 1<<32 { // the kernel counts in 32 bits
		return fmt.Errorf("cuda: integer decoding of %d rows of %d at once: more than 2^32 groups of 32", rows, in)
	}
	return e.launch(k.name, gridFor(units), block256, q, s, m, mq.p, row0, rows, in, mq.rowBytes, mq.grid)
}
