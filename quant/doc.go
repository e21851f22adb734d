// Package quant converts ggml weight blocks to float32 and back.
//
// A GGUF tensor stores each row as a run of fixed-size blocks: BlockSize
// weights packed into TypeSize bytes. Perplexity numbers are only comparable
// with llama.cpp's if we read those blocks exactly as ggml does, so every
// dequantizer here reproduces ggml's dequantize_row_* (and gguf-py's numpy
// reference) to the last bit: all products that form a weight are exact in
// float32 (an f16 scale has 11 significant bits, and a sub-block scale and a
// quant together at most 13 more, e.g. Q6_K's 7 and 6: 24 bits, float32's
// precision), so the order of multiplications does not matter and the only
// rounding is the final subtraction of a block minimum, which we do where
// ggml does. (Q8_K, whose scale is a float32, rounds its one product d*q,
// the same way in any order.)
//
// Quantize implements llama.cpp's reference quantizers (quantize_row_*_ref,
// the ones llama-quantize uses without an importance matrix) so that a model
// we generate resembles one llama-quantize made; for the source tensors of
// the shared quant zoo they reproduce llama-quantize's bytes.
//
// DequantizeRow and DotRow are the fast paths of the forward pass: no
// checks beyond one length assertion, and DotRow multiplies a quantized row
// with a float32 vector block by block, never materializing the row. DotRow
// factors each block's scale out of its sum, so it agrees with
// Dequantize-then-dot up to float32 summation error, not bit for bit.
// Dequantize, DequantizeRow and DecodeInt8 run vector versions of the
// common types' decoders where the CPU has AVX2 or AVX-512 (fast.go; Levels
// and SetLevel choose among them), with the reference's bits.
//
// DecodeInt8 (int8.go) writes a row as unsigned 8-bit integers with a
// scale and minimum per group of 16 or 32 weights, exactly, for matrix
// products with 8-bit activations (llama.cpp's CPU arithmetic); Int8FormatOf
// says how, and how llama.cpp quantizes the activations for that type.
//
// # Block layouts
//
// All multi-byte fields are little-endian. "f16" is an IEEE binary16 scale,
// decoded with F16ToF32. Within a block, weight i is written y[i]. Nibble
// order: a byte's low 4 bits come before its high 4 bits in the sense given
// per type (usually low nibbles are the first half of a group, high nibbles
// the second half, not interleaved).
//
// F32 (1 weight, 4 bytes): the float32 itself.
//
// F16 (1 weight, 2 bytes): an IEEE binary16.
//
// BF16 (1 weight, 2 bytes): the top 16 bits of a float32.
//
// Q4_0 (32 weights, 18 bytes): bytes 0-1 f16 d; bytes 2-17 qs[16].
// y[j] = d*((qs[j]&15) - 8), y[j+16] = d*((qs[j]>>4) - 8), j = 0..15.
//
// Q4_1 (32 weights, 20 bytes): bytes 0-1 f16 d; 2-3 f16 m; 4-19 qs[16].
// y[j] = d*(qs[j]&15) + m, y[j+16] = d*(qs[j]>>4) + m.
//
// Q5_0 (32 weights, 22 bytes): bytes 0-1 f16 d; 2-5 qh, a uint32 holding
// the fifth bit of weight i in bit i; 6-21 qs[16] as Q4_0.
// y[j] = d*((qs[j]&15 | (qh>>j&1)<<4) - 16),
// y[j+16] = d*((qs[j]>>4 | (qh>>(j+16)&1)<<4) - 16).
//
// Q5_1 (32 weights, 24 bytes): bytes 0-1 f16 d; 2-3 f16 m; 4-7 qh; 8-23 qs.
// As Q5_0 without the -16 and with + m.
//
// Q8_0 (32 weights, 34 bytes): bytes 0-1 f16 d; 2-33 int8 qs[32].
// y[i] = d*qs[i].
//
// Q8_1 (32 weights, 36 bytes, not supported here): f16 d, f16 s = d*sum(qs),
// int8 qs[32]. It only exists as a matmul intermediate.
//
// The K-quants pack 256 weights per super-block, split into sub-blocks of
// 16 or 32 weights, each with its own small integer scale (and minimum) that
// multiplies the super-block's f16 scale.
//
// Q2_K (256 weights, 84 bytes): bytes 0-15 scales[16], one per 16 weights,
// low nibble the scale and high nibble the minimum; 16-79 qs[64], 2-bit
// quants; 80-81 f16 d; 82-83 f16 dmin. Weight i = 128*h + 32*s + l
// (h = 0..1, s = 0..3, l = 0..31) is q = qs[32*h + l] >> (2*s) & 3 in
// sub-block k = i/16, and y[i] = (d*(scales[k]&15))*q - dmin*(scales[k]>>4).
//
// Q3_K (256 weights, 110 bytes): bytes 0-31 hmask[32]; 32-95 qs[64]; 96-107
// scales, twelve bytes packing sixteen 6-bit scales; 108-109 f16 d. Sub-block
// k (16 weights) has scale (low | high<<4) - 32 where low is
// scales[k]&15 for k < 8 and scales[k-8]>>4 for k >= 8, and high is
// scales[8 + k%4] >> (2*(k/4)) & 3. Weight i = 128*h + 32*s + l has low bits
// qs[32*h + l] >> (2*s) & 3 and high bit hmask[i%32] >> (i/32) & 1; its quant
// is low - 4 when the high bit is clear and low when it is set, and
// y[i] = (d*scale_k)*q.
//
// Q4_K (256 weights, 144 bytes): bytes 0-1 f16 d; 2-3 f16 dmin; 4-15
// scales, twelve bytes packing eight 6-bit scales sc and eight 6-bit minima
// m (one pair per 32 weights): for k < 4, sc[k] = b[k]&63 and
// m[k] = b[k+4]&63; for k >= 4, sc[k] = b[k+4]&15 | (b[k-4]>>6)<<4 and
// m[k] = b[k+4]>>4 | (b[k]>>6)<<4, where b is the twelve bytes. Bytes 16-143
// qs[128]: weights 64*c .. 64*c+31 are the low nibbles of qs[32*c ..
// 32*c+31], weights 64*c+32 .. 64*c+63 their high nibbles (c = 0..3).
// y[i] = (d*sc[k])*q - dmin*m[k], k = i/32.
//
// Q5_K (256 weights, 176 bytes): as Q4_K, with qh[32] (bytes 16-47) before
// qs[128] (bytes 48-175). Weight i's fifth bit is qh[i%32] >> (i/32) & 1, so
// q = nibble | bit<<4 in 0..31.
//
// Q6_K (256 weights, 210 bytes): bytes 0-127 ql[128], low 4 bits; 128-191
// qh[64], high 2 bits; 192-207 int8 scales[16], one per 16 weights; 208-209
// f16 d. For half h = 0..1 and l = 0..31, with L = ql[64h:], H = qh[32h:]:
// weight 128h+l is L[l]&15 | (H[l]&3)<<4, 128h+l+32 is L[l+32]&15 |
// (H[l]>>2&3)<<4, 128h+l+64 is L[l]>>4 | (H[l]>>4&3)<<4, 128h+l+96 is
// L[l+32]>>4 | (H[l]>>6)<<4; each minus 32. y[i] = (d*scales[i/16])*q.
//
// Q8_K (256 weights, 292 bytes): bytes 0-3 float32 d; 4-259 int8 qs[256];
// 260-291 int16 bsums[16] (sums of 16 quants, unused here). y[i] = d*qs[i].
//
// IQ4_NL (32 weights, 18 bytes): bytes 0-1 f16 d; 2-17 qs[16]. Like Q4_0,
// but a nibble n indexes the non-linear table
// {-127,-104,-83,-65,-49,-35,-22,-10,1,13,25,38,53,69,89,113}:
// y[j] = d*T[qs[j]&15], y[j+16] = d*T[qs[j]>>4].
//
// IQ4_XS (256 weights, 136 bytes): bytes 0-1 f16 d; 2-3 uint16 scales_h;
// 4-7 scales_l[4]; 8-135 qs[128]. Sub-block k (32 weights) has 6-bit scale
// ls = (scales_l[k/2] >> (4*(k%2)) & 15) | (scales_h >> (2*k) & 3)<<4 and
// uses qs[16k .. 16k+15] as IQ4_NL does: y[32k+j] = (d*(ls-32))*T[qs[16k+j]&15],
// y[32k+j+16] = (d*(ls-32))*T[qs[16k+j]>>4].
//
// The low-bit types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
// TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0) are described with their decoders
// in lowbit.go: each weight is a scale per 16 or 32 weights times a small
// integer (a signed value of a lattice grid, a ternary digit, a sign, a
// doubled E2M1 value), so all three entry points decode them through that
// integer form.
package quant
