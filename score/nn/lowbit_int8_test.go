package nn

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/quant"
)

// lowbitTypes are the weight types quant decodes but cannot quantize: the
// i-quants, the ternary types, MXFP4 and NVFP4.
var lowbitTypes = []gguf.Type{
	gguf.TypeIQ2_XXS, gguf.TypeIQ2_XS, gguf.TypeIQ2_S, gguf.TypeIQ3_XXS, gguf.TypeIQ3_S,
	gguf.TypeIQ1_S, gguf.TypeIQ1_M, gguf.TypeTQ1_0, gguf.TypeTQ2_0, gguf.TypeMXFP4, gguf.TypeNVFP4,
}

// randLowbit returns random blocks of typ whose scales are sane (f16
// scales of magnitude 2^-4..2^3, E8M0 exponents 2^-8..2^0; UE4M3 and the
// grids accept any byte), and their dequantization.
func randLowbit(t testing.TB, r *rand.Rand, typ gguf.Type, in, out int) (data []byte, deq []float32) {
	rb, _ := typ.RowSize(uint64(in))
	data = make([]byte, int(rb)*out)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	scale := func() uint16 { return uint16(r.IntN(1<<10)) | uint16(11+r.IntN(8))<<10 | uint16(r.IntN(2))<<15 }
	ts := typ.TypeSize()
	for b := 0; b < len(data); b += ts {
		blk := data[b : b+ts]
		switch typ {
		case gguf.TypeIQ1_M: // the f16 d is the top nibbles of the 4 scale words
			d := scale()
			for i := range 4 {
				w := binary.LittleEndian.Uint16(blk[48+2*i:])&0x0fff | (d>>(4*i)&15)<<12
				binary.LittleEndian.PutUint16(blk[48+2*i:], w)
			}
		case gguf.TypeTQ1_0:
			binary.LittleEndian.PutUint16(blk[52:], scale())
		case gguf.TypeTQ2_0:
			binary.LittleEndian.PutUint16(blk[64:], scale())
		case gguf.TypeMXFP4:
			blk[0] = byte(120 + r.IntN(9))
		case gguf.TypeNVFP4:
		default:
			binary.LittleEndian.PutUint16(blk, scale())
		}
	}
	deq = make([]float32, in*out)
	if err := quant.Dequantize(typ, data, deq); err != nil {
		t.Fatal(err)
	}
	return data, deq
}

// TestLinearInt8Lowbit is TestLinearInt8 for the low-bit types: the int8
// mode against the float64 product of the dequantized weights and the
// activations as quantized (Q8_K for the IQ and TQ types, Q8_0 for MXFP4
// and NVFP4), within float32 rounding; every level and thread count gives
// the generic bits. Besides normal activations, adversarial ones: a single
// huge outlier per block (the others quantize to 0 or ±1), ties of the
// rounding (multiples of amax/254), zeros and a tiny block.
func TestLinearInt8Lowbit(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	acts := []struct {
		name string
		gen  func(n int) []float32
	}{
		{"normal", func(n int) []float32 { return randVec(r, n) }},
		{"outliers", func(n int) []float32 {
			x := randVec(r, n)
			for i := 0; i < n; i += 32 {
				x[i+r.IntN(32)] = 1e4
			}
			return x
		}},
		{"ties", func(n int) []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.IntN(255)-127) / 2 // halves: many ties at 127/amax
			}
			for i := 0; i < n; i += 32 {
				x[i] = 127
			}
			return x
		}},
		{"zeros", func(n int) []float32 {
			x := randVec(r, n)
			clear(x[:n/2])
			for i := n / 2; i < n/2+32; i++ {
				x[i] = 1e-32
			}
			return x
		}},
	}
	for _, typ := range lowbitTypes {
		f, ok := quant.Int8FormatOf(typ)
		if !ok {
			t.Fatalf("%v has no integer decoding", typ)
		}
		for _, sh := range []struct{ in, out, n int }{{256, 37, 7}, {512, 64, 13}, {256, 32, 1}, {512, 35, 5}, {256, 31, 17}} {
			data, deq := randLowbit(t, r, typ, sh.in, sh.out)
			l, err := NewLinear("w", typ, sh.in, sh.out, data)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range acts {
				name := fmt.Sprintf("%v %dx%d n=%d %s", typ, sh.out, sh.in, sh.n, a.name)
				x := a.gen(sh.n * sh.in)
				xq := dequantActs(x, sh.n, sh.in, f.ActBlock)
				var ref []float32
				forEachLevel(t, func(t testing.TB, lv Level) {
					for _, threads := range []int{1, 3} {
						c := NewContext(threads)
						c.Int8 = true
						y := make([]float32, sh.n*sh.out)
						l.Forward(c, y, x, sh.n)
						if ref == nil {
							ref = y
							checkMatMul(t, name, y, sh.out, xq, sh.n, sh.in, deq, sh.out)
						} else if !slices.Equal(ref, y) {
							i := 0
							for ; i < len(y)-1; i++ {
								if math.Float32bits(y[i]) != math.Float32bits(ref[i]) {
									break
								}
							}
							t.Fatalf("%s level %v threads %d: out[%d] = %v, generic %v", name, lv, threads, i, y[i], ref[i])
						}
					}
				})
			}
		}
	}
}
