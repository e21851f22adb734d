package cuda

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/quant"
)

// f16Fields are the byte offsets of each type's f16 block scales (and
// minima), and scaleBytes the ranges of its sub-block scale bytes, which
// adversarialBlocks overwrites. IQ1_M's d is spread over four nibbles
// (adversarialBlocks sets them itself); the E8M0 and UE4M3 scales of
// MXFP4 and NVFP4 are whole bytes, which random bytes cover.
var (
	f16Fields = map[gguf.Type][]int{
		gguf.TypeQ4_0: {0}, gguf.TypeQ4_1: {0, 2}, gguf.TypeQ5_0: {0}, gguf.TypeQ5_1: {0, 2}, gguf.TypeQ8_0: {0},
		gguf.TypeQ2_K: {80, 82}, gguf.TypeQ3_K: {108}, gguf.TypeQ4_K: {0, 2}, gguf.TypeQ5_K: {0, 2}, gguf.TypeQ6_K: {208},
		gguf.TypeIQ4_NL: {0}, gguf.TypeIQ4_XS: {0}, gguf.TypeIQ2_XXS: {0}, gguf.TypeIQ2_XS: {0}, gguf.TypeIQ2_S: {0},
		gguf.TypeIQ3_XXS: {0}, gguf.TypeIQ3_S: {0}, gguf.TypeIQ1_S: {0}, gguf.TypeTQ1_0: {52}, gguf.TypeTQ2_0: {64},
		gguf.TypeQ1_0: {0}, gguf.TypeQ2_0: {0},
	}
	scaleBytes = map[gguf.Type][2]int{
		gguf.TypeQ2_K: {0, 16}, gguf.TypeQ3_K: {96, 108}, gguf.TypeQ4_K: {4, 16}, gguf.TypeQ5_K: {4, 16},
		gguf.TypeQ6_K: {192, 208}, gguf.TypeIQ4_XS: {2, 8},
	}
)

// specialF16 are f16 scales at the edges: zeros, subnormals, the largest
// finite, infinities and NaNs (quiet and signalling, either sign).
var specialF16 = []uint16{0x0000, 0x8000, 0x0001, 0x03ff, 0x8200, 0x0400, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe55, 0xffff}

// adversarialBlocks returns rows of in weights of type typ as random
// bytes, with about half of the f16 scales replaced by specialF16 values
// and, in a quarter of the blocks, every sub-block scale bit set.
func adversarialBlocks(t testing.TB, rng *rand.Rand, typ gguf.Type, rows, in int) []byte {
	t.Helper()
	rb, err := typ.RowSize(uint64(in))
	if err != nil {
		t.Fatal(err)
	}
	ts := int(rb) / (in / typ.BlockSize())
	out := make([]byte, rows*int(rb))
	for i := range out {
		out[i] = byte(rng.Uint32())
	}
	for b := 0; b < len(out)/ts; b++ {
		blk := out[b*ts : (b+1)*ts]
		for _, o := range f16Fields[typ] {
			if rng.IntN(2) == 0 {
				binary.LittleEndian.PutUint16(blk[o:], specialF16[rng.IntN(len(specialF16))])
			}
		}
		if typ == gguf.TypeIQ1_M && rng.IntN(2) == 0 {
			d := specialF16[rng.IntN(len(specialF16))]
			for i := range 4 {
				sc := binary.LittleEndian.Uint16(blk[48+2*i:])&0x0fff | (d>>(4*i)&15)<<12
				binary.LittleEndian.PutUint16(blk[48+2*i:], sc)
			}
		}
		if r, ok := scaleBytes[typ]; ok && rng.IntN(4) == 0 {
			for i := r[0]; i < r[1]; i++ {
				blk[i] = 0xff
			}
		}
	}
	return out
}

// Each integer decoding kernel writes what quant.DecodeInt8 writes, less
// the format's Offset, for rows [1, 4) of a matrix: the codes byte for
// byte, the scales and minima bit for bit (NaNs as NaNs), on blocks
// quantized from values of three magnitudes and on random bytes with edge
// scales; and nothing past its rows, nor into m for a type without minima.
func TestInt8DecodeParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		for _, typ := range slices.Sorted(maps.Keys(int8DecodeKernels)) {
			t.Run(typ.String(), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(typ), 29))
				const rows, row0, in = 3, 1, 512 // two 256-weight blocks a row, eight 64, sixteen 32
				f, _ := quant.Int8FormatOf(typ)
				groups := in / f.Group
				var grid ptr
				if int8DecodeKernels[typ].grid {
					grid = devPut(t, e, iqGrids())
				}
				type dataCase struct {
					name string
					data []byte
				}
				var cases []dataCase
				if quant.CanQuantize(typ) {
					for _, sc := range []struct {
						name  string
						scale float64
					}{{"1e-3", 1e-3}, {"1", 1}, {"1e3", 1e3}} {
						vals := randF32(rng, (row0+rows)*in, sc.scale)
						rb, _ := typ.RowSize(in)
						data := make([]byte, (row0+rows)*int(rb))
						if err := quant.Quantize(typ, vals, data); err != nil {
							t.Fatal(err)
						}
						cases = append(cases, dataCase{"quantized×" + sc.name, data})
					}
				}
				for i := range 3 {
					cases = append(cases, dataCase{fmt.Sprint("adversarial", i), adversarialBlocks(t, rng, typ, row0+rows, in)})
				}
				const poison = 0xa5
				poisoned := func(n int) (ptr, []byte) {
					b := make([]byte, n)
					for i := range b {
						b[i] = poison
					}
					return devPut(t, e, b), b
				}
				for ci, c := range cases {
					rb := int64(len(c.data) / (row0 + rows))
					wantQ := make([]byte, rows*in)
					wantS := make([]float32, rows*groups)
					wantM := make([]float32, rows*groups)
					for r := range rows {
						var m []float32
						if f.HasMin {
							m = wantM[r*groups : (r+1)*groups]
						}
						src := c.data[(row0+int64(r))*rb:][:rb]
						quant.DecodeInt8(typ, src, wantQ[r*in:(r+1)*in], wantS[r*groups:(r+1)*groups], m)
					}
					// one row's worth more of each, to show the kernel
					// writes nothing past its rows; m also for the types
					// without minima (every other case: 0, as callers pass)
					qp, _ := poisoned((rows + 1) * in)
					sp, _ := poisoned(4 * (rows + 1) * groups)
					mp, _ := poisoned(4 * (rows + 1) * groups)
					passM := mp
					if !f.HasMin && ci%2 == 0 {
						passM = 0
					}
					mq := &qmat{p: devPut(t, e, c.data), typ: typ, rowBytes: rb, grid: grid}
					do(t, e, func() error { return e.int8Rows(qp, sp, passM, mq, row0, rows, in) })
					gotQ := devGet[byte](t, e, qp, (rows+1)*in)
					gotS := devGet[float32](t, e, sp, (rows+1)*groups)
					gotM := devGet[float32](t, e, mp, (rows+1)*groups)
					bad := 0
					fail := func(format string, args ...any) {
						if bad++; bad <= 5 {
							t.Errorf("%s: "+format, append([]any{c.name}, args...)...)
						}
					}
					for i, g := range gotQ[:rows*in] {
						if want := wantQ[i] - byte(f.Offset); g != want {
							fail("row %d weight %d: q %d, want %d", row0+i/in, i%in, int8(g), int8(want))
						}
					}
					for i, g := range gotS[:rows*groups] {
						if !sameBits(g, wantS[i]) {
							fail("row %d group %d: s %#x (%v), want %#x (%v)", row0+i/groups, i%groups, math.Float32bits(g), g, math.Float32bits(wantS[i]), wantS[i])
						}
					}
					if f.HasMin {
						for i, g := range gotM[:rows*groups] {
							if !sameBits(g, wantM[i]) {
								fail("row %d group %d: m %#x (%v), want %#x (%v)", row0+i/groups, i%groups, math.Float32bits(g), g, math.Float32bits(wantM[i]), wantM[i])
							}
						}
					}
					poisonF := math.Float32frombits(poison * 0x01010101)
					for i, g := range gotQ[rows*in:] {
						if g != poison {
							fail("q written past its rows, at byte %d", rows*in+i)
						}
					}
					for i, g := range gotS[rows*groups:] {
						if math.Float32bits(g) != math.Float32bits(poisonF) {
							fail("s written past its rows, at %d", rows*groups+i)
						}
					}
					mFrom := rows * groups
					if !f.HasMin {
						mFrom = 0
					}
					for i, g := range gotM[mFrom:] {
						if math.Float32bits(g) != math.Float32bits(poisonF) {
							fail("m written at %d (has minima: %v)", mFrom+i, f.HasMin)
						}
					}
					if bad > 0 {
						t.Errorf("%s: %d values differ", c.name, bad)
					}
				}
			})
		}
	})
}

// Every type with an integer decoding (quant.Int8FormatOf) and a
// dequantization kernel has an integer decoding kernel, and no other.
func TestInt8DecodeCoverage(t *testing.T) {
	for typ := range gguf.Type(64) {
		_, ok := quant.Int8FormatOf(typ)
		_, deq := dequantKernels[typ]
		_, dec := int8DecodeKernels[typ]
		if want := ok && deq; dec != want {
			t.Errorf("%v: integer decoding kernel %v, want %v (integer form %v, dequantization kernel %v)", typ, dec, want, ok, deq)
		}
	}
	for typ, k := range int8DecodeKernels {
		if want := "i8dec_" + strings.ToLower(typ.String()); k.name != want || k.grid != dequantKernels[typ].grid {
			t.Errorf("%v: kernel %s (grid %v), want %s (grid %v)", typ, k.name, k.grid, want, dequantKernels[typ].grid)
		}
	}
}
