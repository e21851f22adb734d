package quant

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/fnv"
	"math"
	"testing"

	"ppl.dev/gguf"
)

// TestGrids pins the expanded grids to ggml-common.h's tables: the FNV-1a
// hash of each table's bytes (entry by entry, byte 0 first, int8 as its
// byte), as computed from the header, and a few entries written out.
func TestGrids(t *testing.T) {
	flat := func(n, w int, at func(e, i int) byte) []byte {
		b := make([]byte, 0, n*w)
		for e := range n {
			for i := range w {
				b = append(b, at(e, i))
			}
		}
		return b
	}
	for _, c := range []struct {
		name  string
		bytes []byte
		hash  uint64
	}{
		{"iq2xxs_grid", flat(256, 8, func(e, i int) byte { return iq2xxsGrid[e][i] }), 13496971585842343566},
		{"iq2xs_grid", flat(512, 8, func(e, i int) byte { return iq2xsGrid[e][i] }), 14533659576766106045},
		{"iq2s_grid", flat(1024, 8, func(e, i int) byte { return iq2sGrid[e][i] }), 1314731376573295504},
		{"iq3xxs_grid", flat(256, 4, func(e, i int) byte { return iq3xxsGrid[e][i] }), 16115529300414911957},
		{"iq3s_grid", flat(512, 4, func(e, i int) byte { return iq3sGrid[e][i] }), 18029881884396505129},
		{"iq1s_grid", flat(2048, 8, func(e, i int) byte { return byte(iq1sGrid[e][i]) }), 7423037771507412526},
	} {
		h := fnv.New64a()
		h.Write(c.bytes)
		if got := h.Sum64(); got != c.hash {
			t.Errorf("%s: hash %d, want %d", c.name, got, c.hash)
		}
	}
	le64 := func(b [8]uint8) (v uint64) {
		for i := range 8 {
			v |= uint64(b[i]) << (8 * i)
		}
		return v
	}
	le32 := func(b [4]uint8) (v uint32) {
		for i := range 4 {
			v |= uint32(b[i]) << (8 * i)
		}
		return v
	}
	// Entries as ggml-common.h writes them.
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"iq2xxs_grid[0]", le64(iq2xxsGrid[0]), 0x0808080808080808},
		{"iq2xxs_grid[255]", le64(iq2xxsGrid[255]), 0x2b2b2b1908081908},
		{"iq2xs_grid[511]", le64(iq2xsGrid[511]), 0x2b2b2b2b2b2b2b2b},
		{"iq2s_grid[1023]", le64(iq2sGrid[1023]), 0x2b2b2b2b2b2b2b2b},
		{"iq3xxs_grid[0]", uint64(le32(iq3xxsGrid[0])), 0x04040404},
		{"iq3s_grid[511]", uint64(le32(iq3sGrid[511])), 0x0f0f0101},
		{"iq1s_grid[0]", le64([8]uint8(func() (b [8]uint8) {
			for i, v := range iq1sGrid[0] {
				b[i] = byte(v)
			}
			return b
		}())), 0xffffffffffffffff},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
	// ksigns_iq2xs: 0, 129, 130, 3, ...; entry 127 is 255.
	for i, want := range map[uint32]uint8{0: 0, 1: 129, 2: 130, 3: 3, 4: 132, 7: 135, 126: 126, 127: 255} {
		if got := signs8(i); got != want {
			t.Errorf("signs8(%d) = %d, want %d", i, got, want)
		}
	}
}

// TestScaleBytes checks the 8-bit float scales of MXFP4 and NVFP4 against
// values worked out by hand from ggml's definitions.
func TestScaleBytes(t *testing.T) {
	for _, c := range []struct {
		name string
		got  float32
		want float64
	}{
		{"e8m0Half(0)", e8m0Half(0), 0x1p-128},
		{"e8m0Half(1)", e8m0Half(1), 0x1p-127},
		{"e8m0Half(2)", e8m0Half(2), 0x1p-126},
		{"e8m0Half(121)", e8m0Half(121), 0x1p-7},
		{"e8m0Half(128)", e8m0Half(128), 1},
		{"e8m0Half(255)", e8m0Half(255), 0x1p127},
		{"ue4m3Half(0)", ue4m3Half(0), 0},
		{"ue4m3Half(1)", ue4m3Half(1), 0x1p-10},     // subnormal: 1·2^-9, halved
		{"ue4m3Half(7)", ue4m3Half(7), 7 * 0x1p-10}, // largest subnormal
		{"ue4m3Half(8)", ue4m3Half(8), 0x1p-7},      // smallest normal, 2^-6 halved
		{"ue4m3Half(0x38)", ue4m3Half(0x38), 0.5},   // 1.0 halved
		{"ue4m3Half(0x7e)", ue4m3Half(0x7e), 224},   // 448 halved
		{"ue4m3Half(0x7f)", ue4m3Half(0x7f), 0},     // NaN reads as 0
		{"ue4m3Half(0xb8)", ue4m3Half(0xb8), 0.5},   // the unused sign bit
	} {
		if float64(c.got) != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// lowbitHandBlocks are handBlocks' cases for the low-bit types, each value
// worked out by hand from ggml's definitions (see lowbit.go). Unset bytes
// are zero.
func lowbitHandBlocks() (cases []struct {
	name string
	typ  gguf.Type
	b    []byte
	want []run
}) {
	add := func(typ gguf.Type, n int, set func(b []byte), want ...run) {
		b := make([]byte, n)
		set(b)
		cases = append(cases, struct {
			name string
			typ  gguf.Type
			b    []byte
			want []run
		}{typ.String(), typ, b, want})
	}
	const one = 0x3c00 // f16 1.0

	// IQ2_XXS: d = 1. A zero group has ls = 0, db = 0.5/4 = 0.125, grid 0
	// (all 8) and no signs: 1. Group 0: grid index 255 (bytes 8, 25, 8, 8,
	// 25, 43, 43, 43) for weights 0-7, sign index 1 (ksigns 129: weights 0
	// and 7 negative), ls = 15: db = 15.5/4 = 3.875; weights 8-31 grid 0: 31.
	add(gguf.TypeIQ2_XXS, 66, func(b []byte) { put16(b, 0, one); b[2], b[6], b[9] = 255, 1, 0xf0 },
		run{0, 0, -31}, run{1, 1, 96.875}, run{2, 3, 31}, run{4, 4, 96.875}, run{5, 6, 166.625},
		run{7, 7, -166.625}, run{8, 31, 31}, run{32, 255, 1})

	// IQ2_XS: d = 1; zero: db = 0.125 and grid 0: 1. qs[0] = 0x3ff: grid 511
	// (all 43), sign index 1 (weights 0 and 7 negative); scales[0] = 0x0f:
	// weights 0-15 db = 3.875, 16-31 db = 0.125.
	add(gguf.TypeIQ2_XS, 74, func(b []byte) { put16(b, 0, one, 0x3ff); b[66] = 0x0f },
		run{0, 0, -166.625}, run{1, 6, 166.625}, run{7, 7, -166.625}, run{8, 15, 31}, run{16, 255, 1})

	// IQ2_S: d = 1; zero: 1. qs[0] = 0xff with qh[0] bits 0-1 = 3: grid
	// 1023 (all 43); signs[0] = 0x81 (weights 0 and 7); scales[0] = 0xf0:
	// weights 0-15 db = 0.125, 16-31 db = 3.875 (grid 0: 31).
	add(gguf.TypeIQ2_S, 82, func(b []byte) { put16(b, 0, one); b[2], b[34], b[66], b[74] = 0xff, 0x81, 3, 0xf0 },
		run{0, 0, -5.375}, run{1, 6, 5.375}, run{7, 7, -5.375}, run{8, 15, 1}, run{16, 31, 31}, run{32, 255, 1})

	// IQ3_XXS: d = 1; zero: db = 0.5·0.5 = 0.25, grid 0 (all 4): 1. Group
	// 0: ls = 15 (db = 7.75), sign index 1 (weights 0 and 7); weights 4-7
	// grid 255 (4, 28, 52, 62), the others grid 0: 31.
	add(gguf.TypeIQ3_XXS, 98, func(b []byte) { put16(b, 0, one); b[3], b[66], b[69] = 255, 1, 0xf0 },
		run{0, 0, -31}, run{1, 4, 31}, run{5, 5, 217}, run{6, 6, 403}, run{7, 7, -480.5},
		run{8, 31, 31}, run{32, 255, 1})

	// IQ3_S: d = 1; zero: db = 1, grid 0 (all 1): 1. qs[0] = 255 with qh[0]
	// bit 0: grid 511 (1, 1, 15, 15) for weights 0-3; signs[0] = 0x11
	// (weights 0 and 4); scales[0] = 1: group 0 db = 3.
	add(gguf.TypeIQ3_S, 110, func(b []byte) { put16(b, 0, one); b[2], b[66], b[74], b[106] = 255, 1, 0x11, 1 },
		run{0, 0, -3}, run{1, 1, 3}, run{2, 3, 45}, run{4, 4, -3}, run{5, 31, 3}, run{32, 255, 1})

	// IQ1_S: d = 1; zero: dl = 1, shift +1/8, grid 0 (all -1): -0.875.
	// qh[0] = 0xf038: ls = 7 (dl = 15), shift -1/8, and index bits 8-10 of
	// the second eight 7: with qs[1] = 255, grid 2047 (all 1): 15·0.875.
	add(gguf.TypeIQ1_S, 50, func(b []byte) { put16(b, 0, one); b[3] = 255; put16(b, 34, 0xf038) },
		run{0, 7, -16.875}, run{8, 15, 13.125}, run{16, 31, -16.875}, run{32, 255, -0.875})

	// IQ1_M: d = 1 = 0x3c00 in the scales' top nibbles (0xc of the third,
	// 0x3 of the fourth); all ls 0 (dl = 1) but ls = 7 (dl = 15) for
	// weights 16-31. Zero: grid 0, +1/8: -0.875. qh[0] = 0x8f: weights 0-7
	// index high bits 7 (with qs[0] = 255: grid 2047, all 1) and shift -1/8,
	// 1·0.875; weights 8-15 grid 0 and shift -1/8: -1.125.
	add(gguf.TypeIQ1_M, 56, func(b []byte) { b[0], b[32] = 255, 0x8f; put16(b, 48, 7<<3, 0, 0xc000, 0x3000) },
		run{0, 7, 0.875}, run{8, 15, -1.125}, run{16, 31, -13.125}, run{32, 255, -0.875})

	// TQ1_0: d = 1; zero digits: -1. Byte 0xff holds the digits 2, 2, 2, 2,
	// 2 (255·3^n mod 256 = 255, 253, 247, 229, 175, each ·3 >> 8 = 2), byte
	// 0x80 the digits 1 (128·3^n mod 256 = 128). qs[0] = 0xff: weights 0,
	// 32, 64, 96, 128; qs[1] = 0x80: weights 1, 33, 65, 97, 129; qs[32] =
	// 0xff: weights 160, 176, 192, 208, 224; qh[0] = 0xff: 240, 244, 248, 252.
	add(gguf.TypeTQ1_0, 54, func(b []byte) { b[0], b[1], b[32], b[48] = 0xff, 0x80, 0xff, 0xff; put16(b, 52, one) },
		func() (r []run) {
			for i := range 256 {
				v := float32(-1)
				switch {
				case i < 160 && i%32 == 0, i >= 160 && i < 240 && i%16 == 0, i >= 240 && i%4 == 0:
					v = 1
				case i < 160 && i%32 == 1:
					v = 0
				}
				r = append(r, run{i, i, v})
			}
			return r
		}()...)

	// TQ2_0: d = -2; zero digits: (0-1)·-2 = 2. qs[0] = 0xe4 gives weights
	// 0, 32, 64, 96 the digits 0, 1, 2, 3: 2, -0, -2, -4; qs[33] = 0x1b
	// weights 129, 161, 193, 225 the digits 3, 2, 1, 0: -4, -2, -0, 2.
	add(gguf.TypeTQ2_0, 66, func(b []byte) { b[0], b[33] = 0xe4, 0x1b; put16(b, 64, 0xc000) },
		func() (r []run) {
			set := map[int]float32{32: 0, 64: -2, 96: -4, 129: -4, 161: -2, 193: 0}
			for i := range 256 {
				v, ok := set[i]
				if !ok {
					v = 2
				}
				r = append(r, run{i, i, v})
			}
			return r
		}()...)

	// MXFP4: e = 121, scale 2^(121-128) = 2^-7; nibble 0 is 0. qs[0] = 0xf7:
	// weight 0 12·2^-7, weight 16 -12·2^-7; qs[15] = 0x19: weight 15 -2^-7,
	// weight 31 2^-7.
	add(gguf.TypeMXFP4, 17, func(b []byte) { b[0], b[1], b[16] = 121, 0xf7, 0x19 },
		run{0, 0, 0.09375}, run{1, 14, 0}, run{15, 15, -0.0078125}, run{16, 16, -0.09375},
		run{17, 30, 0}, run{31, 31, 0.0078125})

	// NVFP4: scales 0x38 (1, halved 0.5), 0x01 (subnormal 2^-9, halved
	// 2^-10), 0x7f (NaN, read as 0), 0x7e (448, halved 224). qs[0] = 0x95:
	// weight 0 6·0.5, weight 8 -1·0.5; qs[8] = 0x07: weight 16 12·2^-10;
	// qs[16] = 0x77 (scale 0): weights 32, 40 are 0; qs[31] = 0xf1: weight
	// 55 1·224, weight 63 -12·224.
	add(gguf.TypeNVFP4, 36, func(b []byte) { copy(b, []byte{0x38, 0x01, 0x7f, 0x7e, 0x95}); b[12], b[20], b[35] = 7, 0x77, 0xf1 },
		run{0, 0, 3}, run{1, 7, 0}, run{8, 8, -0.5}, run{9, 15, 0}, run{16, 16, 0.01171875},
		run{17, 54, 0}, run{55, 55, 224}, run{56, 62, 0}, run{63, 63, -2688})
	// Q1_0: d = -0.5; clear bits are -d = 0.5. qs[0] = 0x81: weights 0
	// and 7 -0.5; qs[15] = 0x40: weight 126 -0.5.
	add(gguf.TypeQ1_0, 18, func(b []byte) { put16(b, 0, 0xb800); b[2], b[17] = 0x81, 0x40 },
		run{0, 0, -0.5}, run{1, 6, 0.5}, run{7, 7, -0.5}, run{8, 125, 0.5}, run{126, 126, -0.5}, run{127, 127, 0.5})

	// Q2_0: d = 2; code 0 is -2. qs[0] = 0xe4: weights 0-3 the codes 0, 1,
	// 2, 3: -2, 0, 2, 4; qs[15] = 0x55: weights 60-63 code 1, 0.
	add(gguf.TypeQ2_0, 18, func(b []byte) { put16(b, 0, 0x4000); b[2], b[17] = 0xe4, 0x55 },
		run{0, 0, -2}, run{1, 1, 0}, run{2, 2, 2}, run{3, 3, 4}, run{4, 59, -2}, run{60, 63, 0})
	return cases
}

// TestZoo2Quantize quantizes the zoo's F16 tensor, the source of
// quant-zoo-2, for the types that llama-quantize quantized there without
// an importance matrix, with llama.cpp's reference quantizers: TQ1_0,
// TQ2_0, MXFP4 and NVFP4 must give llama-quantize's bytes.
func TestZoo2Quantize(t *testing.T) {
	src := make([]float32, zooCols*zooRows)
	if err := Dequantize(gguf.TypeF16, openZoo(t).raw(t, gguf.TypeF16), src); err != nil {
		t.Fatal(err)
	}
	z := openZooFile(t, "quant-zoo-2")
	for _, typ := range []gguf.Type{gguf.TypeTQ1_0, gguf.TypeTQ2_0, gguf.TypeMXFP4, gguf.TypeNVFP4} {
		t.Run(typ.String(), func(t *testing.T) {
			want := z.raw(t, typ)
			got := make([]byte, len(want))
			if err := Quantize(typ, src, got); err != nil {
				t.Fatal(err)
			}
			if bad := diffBlocks(t, typ, got, want); bad > 0 {
				t.Errorf("%d of %d blocks differ from llama-quantize's", bad, len(want)/typ.TypeSize())
			}
		})
	}
}

// TestLowbitQuantizeRoundTrip quantizes the test weights with each low-bit
// type and bounds the relative RMS error, sqrt(mean err^2)/sqrt(mean x^2),
// about 10% above what our quantizers measure (a regression bound):
// IQ2_XXS 0.500, IQ2_XS 0.396, IQ2_S 0.369, IQ3_XXS 0.253, IQ3_S 0.190,
// IQ1_S 0.678, IQ1_M 0.523, TQ1_0 and TQ2_0 0.799 (ternary with d = amax:
// most Gaussian weights round to 0), MXFP4 0.135, NVFP4 0.096, Q1_0 0.726
// (signs times the mean magnitude), Q2_0 0.715 (TQ2_0's codes over blocks
// of 64). All-zero blocks stay zero.
func TestLowbitQuantizeRoundTrip(t *testing.T) {
	x := testWeights(256 * 64)
	bound := map[gguf.Type]float64{
		gguf.TypeIQ2_XXS: 0.55, gguf.TypeIQ2_XS: 0.44, gguf.TypeIQ2_S: 0.41, gguf.TypeIQ3_XXS: 0.28,
		gguf.TypeIQ3_S: 0.21, gguf.TypeIQ1_S: 0.75, gguf.TypeIQ1_M: 0.58, gguf.TypeTQ1_0: 0.88,
		gguf.TypeTQ2_0: 0.88, gguf.TypeMXFP4: 0.148, gguf.TypeNVFP4: 0.106, gguf.TypeQ1_0: 0.80,
		gguf.TypeQ2_0: 0.79,
	}
	for _, typ := range lowbitTypes {
		t.Run(typ.String(), func(t *testing.T) {
			q := make([]byte, len(x)/typ.BlockSize()*typ.TypeSize())
			if err := Quantize(typ, x, q); err != nil {
				t.Fatal(err)
			}
			y := make([]float32, len(x))
			if err := Dequantize(typ, q, y); err != nil {
				t.Fatal(err)
			}
			var se, sx float64
			for i := range x {
				e := float64(y[i]) - float64(x[i])
				se += e * e
				sx += float64(x[i]) * float64(x[i])
			}
			rel := math.Sqrt(se / sx)
			t.Logf("relative RMS error %.4f", rel)
			if rel > bound[typ] {
				t.Errorf("relative RMS error %.4f > %.4f", rel, bound[typ])
			}
			for i := 256; i < 512; i++ {
				if y[i] != 0 {
					t.Fatalf("zero weight %d became %v", i, y[i])
				}
			}
		})
	}
}

// TestQ1Q2AsLibggml quantizes the zoo's F16 tensor (512 × 256) to Q1_0 and
// Q2_0 and dequantizes the result: the bytes must be those of libggml
// 0.27.0's quantize_row_q1_0_ref and quantize_row_q2_0_ref (also
// ggml_quantize_chunk's without an importance matrix, llama-quantize's
// call) and the values those of its dequantize_row_q1_0 and _q2_0, each
// pinned by its sha256.
func TestQ1Q2AsLibggml(t *testing.T) {
	src := make([]float32, zooCols*zooRows)
	if err := Dequantize(gguf.TypeF16, openZoo(t).raw(t, gguf.TypeF16), src); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		typ        gguf.Type
		quant, deq string
	}{
		{gguf.TypeQ1_0, "6837bde4df2915167ed5f832dc71b8dea373fd0c73ffe9b561669324b82d844b", "696b78eb0c6b0c9bcf6c92ba7e01bbde0946298e0e9c2913946683aff3859039"},
		{gguf.TypeQ2_0, "995a74ca947e331a7eefb436e9b1fb48e93d56f6f6e8ed29cce9444f2f3311dc", "670122703c7770bae94d64e993280f14df85f792e68b42c5dd6209d2c47f9133"},
	} {
		q := make([]byte, len(src)/c.typ.BlockSize()*c.typ.TypeSize())
		if err := Quantize(c.typ, src, q); err != nil {
			t.Fatal(err)
		}
		y := make([]float32, len(src))
		if err := Dequantize(c.typ, q, y); err != nil {
			t.Fatal(err)
		}
		yb := make([]byte, 4*len(y))
		for i, v := range y {
			binary.LittleEndian.PutUint32(yb[4*i:], math.Float32bits(v))
		}
		if h := sha256.Sum256(q); hex.EncodeToString(h[:]) != c.quant {
			t.Errorf("%v: quantized bytes sha256 %x, libggml's %s", c.typ, h, c.quant)
		}
		if h := sha256.Sum256(yb); hex.EncodeToString(h[:]) != c.deq {
			t.Errorf("%v: dequantized values sha256 %x, libggml's %s", c.typ, h, c.deq)
		}
	}
}

// TestPutSigned checks the word-at-a-time putSigned, putSigned4 and
// iq1Put against the weights' definitions (128 + the grid value, negated
// where its sign bit is set; 128 + 8·grid ± 1) for every grid entry and
// every sign byte.
func TestPutSigned(t *testing.T) {
	q := make([]byte, 8)
	want := func(g uint8, s, j int) byte {
		if s>>j&1 == 1 {
			return byte(128 - int(g))
		}
		return byte(128 + int(g))
	}
	for name, grid := range map[string][][8]uint8{"iq2xxs": iq2xxsGrid[:], "iq2xs": iq2xsGrid[:], "iq2s": iq2sGrid[:]} {
		for e := range grid {
			for s := range 256 {
				putSigned(q, &grid[e], uint8(s))
				for j := range 8 {
					if w := want(grid[e][j], s, j); q[j] != w {
						t.Fatalf("%s entry %d, signs %#x: weight %d = %d, want %d", name, e, s, j, q[j], w)
					}
				}
			}
		}
	}
	for name, grid := range map[string][][4]uint8{"iq3xxs": iq3xxsGrid[:], "iq3s": iq3sGrid[:]} {
		for e := range grid {
			for s := range 256 {
				clear(q)
				putSigned4(q, &grid[e], uint8(s))
				for j := range 4 {
					if w := want(grid[e][j], s, j); q[j] != w {
						t.Fatalf("%s entry %d, signs %#x: weight %d = %d, want %d", name, e, s, j, q[j], w)
					}
				}
				if q[4]|q[5]|q[6]|q[7] != 0 {
					t.Fatalf("%s entry %d: putSigned4 wrote past its four weights", name, e)
				}
			}
		}
	}
	for idx := range iq1sGrid {
		for _, neg := range []bool{false, true} {
			iq1Put(q, idx, neg)
			delta := 1
			if neg {
				delta = -1
			}
			for j, g := range iq1sGrid[idx] {
				if w := byte(128 + 8*int(g) + delta); q[j] != w {
					t.Fatalf("iq1s entry %d, negative %v: weight %d = %d, want %d", idx, neg, j, q[j], w)
				}
			}
		}
	}
}
