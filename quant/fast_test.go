package quant

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"ppl.dev/gguf"
)

// fastLevels returns the levels above Generic this CPU runs, and logs
// them with the types each one has kernels for, so that the test output
// says what was checked.
func fastLevels(t *testing.T) []Level {
	t.Helper()
	var out []Level
	for _, l := range Levels()[1:] {
		var deq, i8 []string
		for typ := range formats {
			if levelDeq[l][typ] != nil {
				deq = append(deq, gguf.Type(typ).String())
			}
			if levelInt8[l][typ] != nil {
				i8 = append(i8, gguf.Type(typ).String())
			}
		}
		t.Logf("level %v: dequantize %s; integer decoding %s", l, strings.Join(deq, " "), strings.Join(i8, " "))
		out = append(out, l)
	}
	if len(out) == 0 {
		t.Skip("no vector kernels on this CPU: only the plain Go level")
	}
	return out
}

// sameBits reports whether got is want bit for bit, or both are NaNs.
func sameBits(got, want float32) bool {
	return math.Float32bits(got) == math.Float32bits(want) || (got != got && want != want)
}

// fastInputs returns the rows TestFastDequantize runs each kernel of type
// typ on: random bytes (every bit pattern of scales and quants, including
// half-precision infinities, NaNs and subnormals), quantized random weights,
// (scaled by powers of two from 2^-20 to 2^19 when wide), and the blocks of
// adversarialBlocks.
func fastInputs(typ gguf.Type, r *rand.Rand, wide bool) [][]byte {
	f := lookup(typ)
	var rows [][]byte
	for _, blocks := range []int{1, 2, 3, 17} {
		n := blocks * f.bs
		if f.bs == 1 {
			n = blocks*16 + 5 // F16/BF16: a tail past the vector blocks
		}
		for trial := range 50 {
			src := make([]byte, n/f.bs*f.ts)
			if trial%2 == 0 {
				for i := range src {
					src[i] = byte(r.Uint32())
				}
			} else if CanQuantize(typ) {
				w := make([]float32, n)
				for i := range w {
					w[i] = float32(r.NormFloat64())
					if wide {
						w[i] *= float32(math.Pow(2, float64(r.IntN(40)-20)))
					}
				}
				if err := Quantize(typ, w, src); err != nil {
					panic(err)
				}
			}
			rows = append(rows, src)
		}
	}
	if a := adversarialBlocks(typ); a != nil {
		rows = append(rows, a)
	}
	return rows
}

// TestFastDequantize compares each vector dequantizer of every level with
// the reference, bit for bit (NaNs need only be NaNs).
func TestFastDequantize(t *testing.T) {
	for _, l := range fastLevels(t) {
		for typ, fast := range levelDeq[l] {
			if fast == nil {
				continue
			}
			typ := gguf.Type(typ)
			t.Run(l.String()+"/"+typ.String(), func(t *testing.T) {
				r := newRand(21)
				f := lookup(typ)
				rows := fastInputs(typ, r, true)
				for k, src := range rows {
					n := len(src) / f.ts * f.bs
					if f.bs == 1 {
						n = len(src) / f.ts
					}
					want, got := make([]float32, n), make([]float32, n)
					f.deq(src, want)
					fast(src, got)
					for i := range want {
						if !sameBits(got[i], want[i]) {
							t.Fatalf("row %d of %d weights: weight %d = %v (%#x), reference %v (%#x)", k, n, i,
								got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
					}
				}
			})
		}
	}
}

// TestFastDecodeInt8 compares each vector integer decoder of every level
// with the reference decoder: the same q bytes and the same scales' bits.
func TestFastDecodeInt8(t *testing.T) {
	for _, l := range fastLevels(t) {
		for typ, fast := range levelInt8[l] {
			if fast == nil {
				continue
			}
			typ := gguf.Type(typ)
			t.Run(l.String()+"/"+typ.String(), func(t *testing.T) {
				r := newRand(22)
				f, i8 := lookup(typ), int8Formats[typ]
				rows := fastInputs(typ, r, false)
				for k, src := range rows {
					n := len(src) / f.ts * f.bs
					g := n / i8.Group
					q, s, m := make([]byte, n), make([]float32, g), make([]float32, g)
					q2, s2, m2 := make([]byte, n), make([]float32, g), make([]float32, g)
					int8Decoders[typ](src, q, s, m)
					fast(src, q2, s2, m2)
					for i := range q {
						if q[i] != q2[i] {
							t.Fatalf("row %d: q[%d] = %d, reference %d", k, i, q2[i], q[i])
						}
					}
					for j := range s {
						if !sameBits(s2[j], s[j]) || (i8.HasMin && !sameBits(m2[j], m[j])) {
							t.Fatalf("row %d: group %d: S %v M %v, reference S %v M %v", k, j, s2[j], m2[j], s[j], m[j])
						}
					}
				}
			})
		}
	}
}

// TestDecodeCodes checks DecodeCodes against the reference decoders' codes
// for every type with an integer decoding at every level: the code kernels
// and, where a level has none, the fallback through DecodeInt8 (rows of 1,
// 2, 3 and 17 blocks: a legacy type's tail past 256 weights).
func TestDecodeCodes(t *testing.T) {
	defer SetLevel(SetLevel(Generic))
	for _, l := range Levels() {
		SetLevel(l)
		for typ := range formats {
			typ := gguf.Type(typ)
			i8, ok := Int8FormatOf(typ)
			if !ok || lookup(typ) == nil {
				continue
			}
			r := newRand(23)
			f := lookup(typ)
			for k, src := range fastInputs(typ, r, false) {
				n := len(src) / f.ts * f.bs
				q, q2 := make([]byte, n), make([]byte, n)
				int8Decoders[typ](src, q, make([]float32, n/i8.Group), make([]float32, n/i8.Group))
				DecodeCodes(typ, src, q2)
				for i := range q {
					if q[i] != q2[i] {
						t.Fatalf("%v %v row %d: q[%d] = %d, reference %d", l, typ, k, i, q2[i], q[i])
					}
				}
			}
		}
	}
}

// TestSetLevel checks that the switch reaches DequantizeRow and DecodeInt8
// and is capped by the CPU.
func TestSetLevel(t *testing.T) {
	prev := SetLevel(Generic)
	defer SetLevel(prev)
	if simdOn || CurrentLevel() != Generic {
		t.Fatal("SetLevel(Generic) left the fast paths on")
	}
	src := make([]byte, 34)
	src[1] = 0x3c // d = 1
	src[2] = 5
	dst := make([]float32, 32)
	DequantizeRow(gguf.TypeQ8_0, src, dst)
	if dst[0] != 5 {
		t.Fatalf("got %v", dst[0])
	}
	for _, l := range Levels() {
		SetLevel(l)
		if CurrentLevel() != l || simdOn != (l > Generic) ||
			(fastDeq[gguf.TypeMXFP4] == nil) != (levelDeq[l][gguf.TypeMXFP4] == nil) ||
			(fastInt8[gguf.TypeMXFP4] == nil) != (levelInt8[l][gguf.TypeMXFP4] == nil) {
			t.Fatalf("SetLevel(%v): level %v, SIMD %v", l, CurrentLevel(), simdOn)
		}
	}
	if SetLevel(NEON + 1); CurrentLevel() != Levels()[len(Levels())-1] {
		t.Fatalf("SetLevel above the CPU's best gave %v", CurrentLevel())
	}
}

// putBits writes the n low bits of v at bit off of b (little-endian).
func putBits(b []byte, off, n int, v uint) {
	for i := range n {
		p := off + i
		b[p/8] = b[p/8]&^(1<<(p%8)) | byte(v>>i&1)<<(p%8)
	}
}

// specialF16 are block scales for adversarial blocks: zeros, the smallest
// and largest subnormal, one, the largest finite, infinities, a quiet and
// a signaling NaN.
var specialF16 = []uint16{0x0000, 0x8000, 0x0001, 0x03ff, 0x3c00, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7d00, 0x2e66}

// adversarialBlocks returns, for the low-bit types with vector kernels,
// blocks that run their fields through every value: each grid index and
// sign pattern (and IQ1_M shift sign) at least once, every scale nibble or
// 3-bit scale, every E8M0 and UE4M3 byte (NaN-producing, zero and largest
// included), and the block scale d through specialF16. Nil for other types.
func adversarialBlocks(typ gguf.Type) []byte {
	f := lookup(typ)
	const nb = 96 // enough blocks for the 2048 indices of IQ1_M
	b := make([]byte, nb*f.ts)
	k := 0 // runs over the grid entries of all blocks
	for c := range nb {
		blk := b[c*f.ts : (c+1)*f.ts]
		d := specialF16[c%len(specialF16)]
		switch typ {
		case gguf.TypeIQ2_XXS:
			binary16(blk, d)
			for ib := range 8 {
				for l := range 4 {
					blk[2+8*ib+l] = byte(k)
					putBits(blk, 8*(6+8*ib)+7*l, 7, uint(k*3+c))
					k++
				}
				putBits(blk, 8*(6+8*ib)+28, 4, uint(c*8+ib))
			}
		case gguf.TypeIQ3_XXS:
			binary16(blk, d)
			for ib := range 8 {
				for j := range 8 {
					blk[2+8*ib+j] = byte(k)
					k++
				}
				for l := range 4 {
					putBits(blk, 8*(66+4*ib)+7*l, 7, uint(4*(c*8+ib)+l))
				}
				putBits(blk, 8*(66+4*ib)+28, 4, uint(c*8+ib))
			}
		case gguf.TypeIQ3_S:
			binary16(blk, d)
			for ib := range 8 {
				for j := range 8 {
					blk[2+8*ib+j] = byte(k)
					putBits(blk, 8*(66+ib)+j, 1, uint(k>>8))
					k++
				}
				for l := range 4 {
					blk[74+4*ib+l] = byte(4*(c*8+ib) + l)
				}
				putBits(blk, 8*106+4*ib, 4, uint(c*8+ib))
			}
		case gguf.TypeIQ2_S:
			binary16(blk, d)
			for ib := range 8 {
				for l := range 4 {
					blk[2+4*ib+l] = byte(k)
					putBits(blk, 8*(66+ib)+2*l, 2, uint(k>>8))
					blk[34+4*ib+l] = byte(k*7 + c)
					k++
				}
				blk[74+ib] = byte(c*8 + ib*17)
			}
		case gguf.TypeIQ1_M:
			for ib := range 8 {
				for l := range 4 {
					blk[4*ib+l] = byte(k)
					putBits(blk, 8*32+16*ib+4*l, 3, uint(k>>8))
					putBits(blk, 8*32+16*ib+4*l+3, 1, uint(k/3+c))
					k++
				}
			}
			for i := range 4 {
				putBits(blk, 8*48+16*i, 12, uint(c*4+i)*0x249)
				putBits(blk, 8*48+16*i+12, 4, uint(d>>(4*i)))
			}
		case gguf.TypeMXFP4:
			blk[0] = byte(c * 3) // with nb = 96: every E8M0 byte once in 256/gcd
			if c < 2 {
				blk[0] = byte(254 + c) // the largest scales
			}
			for j := range 16 {
				blk[1+j] = byte(16*c + j)
			}
		case gguf.TypeNVFP4:
			for sb := range 4 {
				blk[sb] = byte(4*c + sb) // every UE4M3 byte: 0, 0x7f, 0xff, ...
			}
			for j := range 32 {
				blk[4+j] = byte(32*c + j)
			}
		default:
			return nil
		}
	}
	if typ == gguf.TypeMXFP4 {
		// and a second pass that covers every E8M0 byte exactly
		extra := make([]byte, 256*f.ts)
		for e := range 256 {
			extra[e*f.ts] = byte(e)
			for j := range 16 {
				extra[e*f.ts+1+j] = byte(e + 16*j)
			}
		}
		b = append(b, extra...)
	}
	return b
}

// binary16 writes the f16 bits h at b[0:2].
func binary16(b []byte, h uint16) { b[0], b[1] = byte(h), byte(h>>8) }

// TestAdversarialCoverage checks that adversarialBlocks reaches every grid
// entry and every sign pattern of the i-quants it makes blocks for, as the
// reference decoder reads them.
func TestAdversarialCoverage(t *testing.T) {
	for _, c := range []struct {
		typ          gguf.Type
		width, grid  int // weights per grid entry, entries
		signs, signW int // sign patterns, weights per pattern
	}{
		{gguf.TypeIQ2_XXS, 8, 256, 128, 8},
		{gguf.TypeIQ3_XXS, 4, 256, 128, 8},
		{gguf.TypeIQ3_S, 4, 512, 256, 8},
		{gguf.TypeIQ2_S, 8, 1024, 256, 8},
		{gguf.TypeIQ1_M, 8, 2048, 2, 8},
	} {
		b := adversarialBlocks(c.typ)
		f := lookup(c.typ)
		n := len(b) / f.ts * f.bs
		q, s := make([]byte, n), make([]float32, n/int8Formats[c.typ].Group)
		int8Decoders[c.typ](b, q, s, nil)
		entries, signs := map[string]bool{}, map[string]bool{}
		for i := 0; i < n; i += c.width {
			e := make([]byte, c.width)
			for j := range e {
				v := int(q[i+j]) - 128
				if c.typ == gguf.TypeIQ1_M {
					v = (v + 12) >> 3 // 8·g ± 1 to g + 1
				} else if v < 0 {
					v = -v
				}
				e[j] = byte(v)
			}
			entries[string(e)] = true
		}
		for i := 0; i < n; i += c.signW {
			p := make([]byte, c.signW)
			for j := range p {
				v := int(q[i+j]) - 128
				if c.typ == gguf.TypeIQ1_M {
					v -= 8 * ((v+12)>>3 - 1) // the shift, ±1
				}
				if v < 0 {
					p[j] = 1
				}
			}
			if c.typ == gguf.TypeIQ1_M {
				p = p[:1] // one shift sign per 8 weights
			}
			signs[string(p)] = true
		}
		if len(entries) != c.grid || len(signs) != c.signs {
			t.Errorf("%v: %d grid entries of %d, %d sign patterns of %d", c.typ, len(entries), c.grid, len(signs), c.signs)
		}
	}
}

// FuzzFastKernels feeds arbitrary bytes, read as whole blocks of each type
// with a kernel, to every level's dequantizer and integer decoder: each
// must give the reference's bits.
func FuzzFastKernels(f *testing.F) {
	f.Add([]byte("\x00\x3c\xff\xff\xff\xff\x7f\x80\x01\x02"))
	f.Add(make([]byte, 300))
	for _, typ := range []gguf.Type{gguf.TypeIQ2_XXS, gguf.TypeIQ3_S, gguf.TypeIQ1_M, gguf.TypeNVFP4} {
		f.Add(adversarialBlocks(typ)[:4*lookup(typ).ts])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		data = data[:min(len(data), 1<<13)]
		for _, l := range Levels()[1:] {
			for typ := range formats {
				fa, fi := levelDeq[l][typ], levelInt8[l][typ]
				if fa == nil && fi == nil {
					continue
				}
				f := &formats[typ]
				nb := len(data) / f.ts
				if nb == 0 {
					continue
				}
				w, n := data[:nb*f.ts], nb*f.bs
				if f.bs == 1 {
					n = nb
				}
				if fa != nil {
					want, got := make([]float32, n), make([]float32, n)
					f.deq(w, want)
					fa(w, got)
					for i := range want {
						if !sameBits(got[i], want[i]) {
							t.Fatalf("%v %v: weight %d = %#x, reference %#x", l, gguf.Type(typ), i, math.Float32bits(got[i]), math.Float32bits(want[i]))
						}
					}
				}
				if fi != nil {
					g := n / int8Formats[typ].Group
					q, s, m := make([]byte, n), make([]float32, g), make([]float32, g)
					q2, s2, m2 := make([]byte, n), make([]float32, g), make([]float32, g)
					int8Decoders[typ](w, q, s, m)
					fi(w, q2, s2, m2)
					for i := range q {
						if q[i] != q2[i] {
							t.Fatalf("%v %v: q[%d] = %d, reference %d", l, gguf.Type(typ), i, q2[i], q[i])
						}
					}
					for j := range s {
						if !sameBits(s2[j], s[j]) || !sameBits(m2[j], m[j]) {
							t.Fatalf("%v %v: group %d: S %v M %v, reference S %v M %v", l, gguf.Type(typ), j, s2[j], m2[j], s[j], m[j])
						}
					}
				}
			}
		}
	})
}
