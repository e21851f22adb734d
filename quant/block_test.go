package quant

import (
	"encoding/binary"
	"math"
	"testing"

	"ppl.dev/gguf"
)

// One hand-built block per type, with every expected value worked out by
// hand in the comments. A run {from, to, v} says weights from..to
// (inclusive) are v; the runs of a case cover its whole block.

type run struct {
	from, to int
	v        float32
}

// put16 writes little-endian uint16 values into b starting at off.
func put16(b []byte, off int, vs ...uint16) {
	for i, v := range vs {
		binary.LittleEndian.PutUint16(b[off+2*i:], v)
	}
}

func handBlocks() []struct {
	name string
	typ  gguf.Type
	b    []byte
	want []run
} {
	type tc = struct {
		name string
		typ  gguf.Type
		b    []byte
		want []run
	}
	var cases []tc
	add := func(name string, typ gguf.Type, b []byte, want ...run) {
		cases = append(cases, tc{name, typ, b, want})
	}

	// F32: little-endian float32 bits. 0x3fc00000 = 1.5; 0xbe200000 = -0.15625.
	add("F32", gguf.TypeF32, []byte{0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x20, 0xbe},
		run{0, 0, 1.5}, run{1, 1, -0.15625})

	// F16: 0x3c00 = 1; 0xc000 = -2; 0x0001 = 2^-24 (smallest subnormal);
	// 0x7bff = 65504 (largest finite); 0x3555 = 2^(13-15)*(1+341/1024)
	// = 0.333251953125; 0x8400 = -2^-14; 0x03ff = 1023*2^-24 (largest
	// subnormal); 0x7c00 = +Inf.
	f16b := make([]byte, 16)
	put16(f16b, 0, 0x3c00, 0xc000, 0x0001, 0x7bff, 0x3555, 0x8400, 0x03ff, 0x7c00)
	add("F16", gguf.TypeF16, f16b,
		run{0, 0, 1}, run{1, 1, -2}, run{2, 2, 1.0 / (1 << 24)}, run{3, 3, 65504},
		run{4, 4, 0.333251953125}, run{5, 5, -1.0 / (1 << 14)}, run{6, 6, 1023.0 / (1 << 24)},
		run{7, 7, float32(math.Inf(1))})

	// BF16: the top half of a float32. 0x3f80 = 1; 0xc040 = -3;
	// 0x4049 = 2*(1+0x49/128) = 3.140625; 0x0001 = float32 bits 0x00010000
	// = 2^16 * 2^-149 = 2^-133 (a float32 subnormal).
	bf := make([]byte, 8)
	put16(bf, 0, 0x3f80, 0xc040, 0x4049, 0x0001)
	add("BF16", gguf.TypeBF16, bf,
		run{0, 0, 1}, run{1, 1, -3}, run{2, 2, 3.140625}, run{3, 3, float32(math.Ldexp(1, -133))})

	// Q4_0: d = 0x3800 = 0.5; qs[j] = j | (15-j)<<4.
	// y[j] = 0.5*(j-8): -4, -3.5, ..., 3.5; y[16+j] = 0.5*((15-j)-8) = 0.5*(7-j): 3.5, ..., -4.
	q40 := make([]byte, 18)
	put16(q40, 0, 0x3800)
	for j := range 16 {
		q40[2+j] = byte(j) | byte(15-j)<<4
	}
	add("Q4_0", gguf.TypeQ4_0, q40, runs(
		-4, -3.5, -3, -2.5, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5,
		3.5, 3, 2.5, 2, 1.5, 1, 0.5, 0, -0.5, -1, -1.5, -2, -2.5, -3, -3.5, -4)...)

	// Q4_1: d = 0x3400 = 0.25, m = 0xbc00 = -1; qs[j] = j | 15<<4.
	// y[j] = 0.25*j - 1: -1, -0.75, ..., 2.75; y[16+j] = 0.25*15 - 1 = 2.75.
	q41 := make([]byte, 20)
	put16(q41, 0, 0x3400, 0xbc00)
	for j := range 16 {
		q41[4+j] = byte(j) | 0xf0
	}
	add("Q4_1", gguf.TypeQ4_1, q41, append(runs(
		-1, -0.75, -0.5, -0.25, 0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 2.25, 2.5, 2.75),
		run{16, 31, 2.75})...)

	// Q5_0: d = 0x3c00 = 1; qh = 0x80000001 (fifth bits of weights 0 and 31);
	// qs[0] = 0x0f, qs[15] = 0xf0, the rest 0.
	// y[0] = (15 | 1<<4) - 16 = 15; y[31] = (qs[15]>>4 = 15 | 1<<4) - 16 = 15;
	// every other weight has q = 0: 0 - 16 = -16.
	q50 := make([]byte, 22)
	put16(q50, 0, 0x3c00)
	binary.LittleEndian.PutUint32(q50[2:], 0x80000001)
	q50[6], q50[6+15] = 0x0f, 0xf0
	add("Q5_0", gguf.TypeQ5_0, q50, run{0, 0, 15}, run{1, 30, -16}, run{31, 31, 15})

	// Q5_1: d = 0x3800 = 0.5, m = 0x4000 = 2; qh = 0x0000ffff (fifth bit set
	// for weights 0..15); qs[j] = 0x31 (low nibble 1, high nibble 3).
	// y[j] = 0.5*(1 + 16) + 2 = 10.5; y[16+j] = 0.5*3 + 2 = 3.5.
	q51 := make([]byte, 24)
	put16(q51, 0, 0x3800, 0x4000)
	binary.LittleEndian.PutUint32(q51[4:], 0x0000ffff)
	for j := range 16 {
		q51[8+j] = 0x31
	}
	add("Q5_1", gguf.TypeQ5_1, q51, run{0, 15, 10.5}, run{16, 31, 3.5})

	// Q8_0: d = 0x3400 = 0.25; qs[i] = i - 16 except qs[0] = 0x80 = -128.
	// y[0] = 0.25*-128 = -32; y[i] = 0.25*(i-16): -3.75 .. 3.75.
	q80 := make([]byte, 34)
	put16(q80, 0, 0x3400)
	for i := range 32 {
		q80[2+i] = byte(int8(i - 16))
	}
	q80[2] = 0x80
	add("Q8_0", gguf.TypeQ8_0, q80, runs(
		-32, -3.75, -3.5, -3.25, -3, -2.75, -2.5, -2.25, -2, -1.75, -1.5, -1.25, -1, -0.75, -0.5, -0.25,
		0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 2.25, 2.5, 2.75, 3, 3.25, 3.5, 3.75)...)

	// Q2_K: scales[0] = 0x21 (scale 1, min 2), scales[1] = 0x13 (scale 3,
	// min 1), scales[15] = 0xff (15, 15), others 0; d = 1 (0x3c00),
	// dmin = 0.5 (0x3800). qs[0] = 0xe4 = 0b11_10_01_00, qs[16] = 0x03,
	// qs[63] = 0xc0.
	// Sub-block 0 (weights 0-15): dl = 1, ml = 0.5*2 = 1; weight 0 has
	//   q = qs[0]&3 = 0, the rest q = 0: all 1*0 - 1 = -1.
	// Sub-block 1 (16-31): dl = 3, ml = 0.5; weight 16: q = qs[16]&3 = 3 ->
	//   9 - 0.5 = 8.5; the rest -0.5.
	// Sub-blocks 2-14: scale and min 0 -> 0 (weights 32, 64, 96 read
	//   qs[0]'s other bit pairs 1, 2, 3, times 0).
	// Sub-block 15 (240-255): dl = 15, ml = 7.5; weight 255 = 128+96+31 reads
	//   qs[32+31] >> 6 = 3 -> 45 - 7.5 = 37.5; the rest q = 0 -> -7.5.
	q2 := make([]byte, 84)
	q2[0], q2[1], q2[15] = 0x21, 0x13, 0xff
	q2[16+0], q2[16+16], q2[16+63] = 0xe4, 0x03, 0xc0
	put16(q2, 80, 0x3c00, 0x3800)
	add("Q2_K", gguf.TypeQ2_K, q2,
		run{0, 15, -1}, run{16, 16, 8.5}, run{17, 31, -0.5}, run{32, 239, 0},
		run{240, 254, -7.5}, run{255, 255, 37.5})

	// Q3_K: hmask[0] = 0x01, hmask[31] = 0x80; qs[0] = 0x03, qs[63] = 0x40;
	// scales = 01 00 00 00 00 00 00 00 aa aa aa 2a; d = 0x3800 = 0.5.
	// Scales (low | high<<4) - 32: k = 0: low = 1, high = byte 8 bits 0-1 = 2
	//   -> 33 - 32 = 1. k = 15: low = byte 7 >> 4 = 0, high = byte 11
	//   bits 6-7 = 0 -> -32. Every other k: low 0, high 2 -> 0.
	// Weight 0: low = qs[0]&3 = 3, high bit (hmask[0] bit 0) set -> q = 3;
	//   0.5*1*3 = 1.5. Weights 1-15: low 0, high bit clear -> q = -4; 0.5*1*-4 = -2.
	// Weights 16-239: scale 0 -> 0.
	// Weight 255 (128+96+31): low = qs[63]>>6 = 1, high bit (hmask[31] bit 7)
	//   set -> q = 1; 0.5*-32*1 = -16. Weights 240-254: q = -4; 0.5*-32*-4 = 64.
	q3 := make([]byte, 110)
	q3[0], q3[31] = 0x01, 0x80
	q3[32+0], q3[32+63] = 0x03, 0x40
	copy(q3[96:], []byte{0x01, 0, 0, 0, 0, 0, 0, 0, 0xaa, 0xaa, 0xaa, 0x2a})
	put16(q3, 108, 0x3800)
	add("Q3_K", gguf.TypeQ3_K, q3,
		run{0, 0, 1.5}, run{1, 15, -2}, run{16, 239, 0}, run{240, 254, 64}, run{255, 255, -16})

	// Q4_K: d = 1 (0x3c00), dmin = 0.25 (0x3400);
	// scales = 01 c0 00 00 02 40 00 00 00 1f 00 00:
	//   sub-block 0: sc = b0&63 = 1, m = b4&63 = 2;
	//   sub-block 5: sc = b9&15 | (b1>>6)<<4 = 15 | 48 = 63, m = b9>>4 | (b5>>6)<<4 = 1 | 16 = 17;
	//   all others 0 (b1&63 = b5&63 = 0).
	// qs[0] = 0xf5 (weight 0 = 5, weight 32 = 15), qs[64] = 0xa0 (weight 128 = 0, weight 160 = 10).
	// Weight 0: 1*5 - 0.25*2 = 4.5; weights 1-31: -0.5.
	// Sub-blocks 1-4 (32-159): 0.
	// Weight 160: 63*10 - 0.25*17 = 630 - 4.25 = 625.75; weights 161-191: -4.25.
	// Sub-blocks 6-7 (192-255): 0.
	q4 := make([]byte, 144)
	put16(q4, 0, 0x3c00, 0x3400)
	copy(q4[4:], []byte{0x01, 0xc0, 0, 0, 0x02, 0x40, 0, 0, 0, 0x1f, 0, 0})
	q4[16+0], q4[16+64] = 0xf5, 0xa0
	add("Q4_K", gguf.TypeQ4_K, q4,
		run{0, 0, 4.5}, run{1, 31, -0.5}, run{32, 159, 0}, run{160, 160, 625.75},
		run{161, 191, -4.25}, run{192, 255, 0})

	// Q5_K: Q4_K's header and nibbles, plus qh[0] = 0x21: bit 0 gives weight 0
	// its fifth bit, bit 5 weight 5*32 = 160.
	// Weight 0: 1*(5+16) - 0.5 = 20.5; weight 160: 63*(10+16) - 4.25 = 1633.75.
	q5 := make([]byte, 176)
	copy(q5, q4[:16])
	q5[16] = 0x21
	q5[48+0], q5[48+64] = 0xf5, 0xa0
	add("Q5_K", gguf.TypeQ5_K, q5,
		run{0, 0, 20.5}, run{1, 31, -0.5}, run{32, 159, 0}, run{160, 160, 1633.75},
		run{161, 191, -4.25}, run{192, 255, 0})

	// Q6_K: ql[0] = 0x21, ql[127] = 0xf0; qh[0] = 0xe4 = 0b11_10_01_00,
	// qh[63] = 0xc0; scales[0] = 2, [1] = -1, [2] = 1, [4] = 3, [15] = -128,
	// others 0; d = 0x3800 = 0.5. Each quant is 6 bits minus 32.
	// Weight 0: ql[0]&15 = 1 | (qh[0]&3 = 0)<<4 = 1 -> -31; 0.5*2*-31 = -31.
	// Weights 1-15: 0 -> -32; 0.5*2*-32 = -32. Weights 16-31 (scale -1): 0.5*-1*-32 = 16.
	// Weight 32: ql[32]&15 = 0 | (qh[0]>>2&3 = 1)<<4 = 16 -> -16; scale 1: -8.
	// Weights 33-47: -32*0.5 = -16. Weights 48-63: scale 0 -> 0.
	// Weight 64: ql[0]>>4 = 2 | (qh[0]>>4&3 = 2)<<4 = 34 -> 2; scale 3: 0.5*3*2 = 3.
	// Weights 65-79: 0.5*3*-32 = -48. Weights 80-239: scale 0 -> 0 (weight 96
	//   has q = 0 | 3<<4 - 32 = 16, times 0).
	// Weight 255 (half 1, l = 31, +96): ql[64+63]>>4 = 15 | (qh[32+31]>>6 = 3)<<4
	//   = 63 -> 31; scale -128: 0.5*-128*31 = -1984. Weights 240-254: -32 ->
	//   0.5*-128*-32 = 2048.
	q6b := make([]byte, 210)
	q6b[0], q6b[127] = 0x21, 0xf0
	q6b[128+0], q6b[128+63] = 0xe4, 0xc0
	q6b[192+0], q6b[192+1], q6b[192+2], q6b[192+4], q6b[192+15] = 2, 0xff, 1, 3, 0x80
	put16(q6b, 208, 0x3800)
	add("Q6_K", gguf.TypeQ6_K, q6b,
		run{0, 0, -31}, run{1, 15, -32}, run{16, 31, 16}, run{32, 32, -8}, run{33, 47, -16},
		run{48, 63, 0}, run{64, 64, 3}, run{65, 79, -48}, run{80, 239, 0},
		run{240, 254, 2048}, run{255, 255, -1984})

	// Q8_K: float32 d = 0.25 (0x3e800000); qs[0] = -3, qs[255] = 127, others 0;
	// bsums filled with junk, which dequantization ignores.
	// y[0] = -0.75, y[255] = 31.75, the rest 0.
	q8k := make([]byte, 292)
	binary.LittleEndian.PutUint32(q8k, 0x3e800000)
	q8k[4+0], q8k[4+255] = 0xfd, 127
	for i := 260; i < 292; i++ {
		q8k[i] = 0xaa
	}
	add("Q8_K", gguf.TypeQ8_K, q8k, run{0, 0, -0.75}, run{1, 254, 0}, run{255, 255, 31.75})

	// IQ4_NL: d = 0.5; qs[0] = 0xf0, qs[1] = 0x87, qs[2..15] = 0x88; table
	// T = {-127,-104,-83,-65,-49,-35,-22,-10,1,13,25,38,53,69,89,113}.
	// y[0] = 0.5*T[0] = -63.5; y[16] = 0.5*T[15] = 56.5; y[1] = 0.5*T[7] = -5;
	// y[17] = 0.5*T[8] = 0.5; all others 0.5*T[8] = 0.5.
	nl := make([]byte, 18)
	put16(nl, 0, 0x3800)
	nl[2], nl[3] = 0xf0, 0x87
	for j := 2; j < 16; j++ {
		nl[2+j] = 0x88
	}
	add("IQ4_NL", gguf.TypeIQ4_NL, nl,
		run{0, 0, -63.5}, run{1, 1, -5}, run{2, 15, 0.5}, run{16, 16, 56.5}, run{17, 31, 0.5})

	// IQ4_XS: d = 0x3400 = 0.25; scales_h = 0x2aaa (high bits 2 for
	// sub-blocks 0-6, 0 for 7); scales_l = 01 00 00 00 (low nibble 1 for
	// sub-block 0). So ls - 32 = 33-32 = 1 for sub-block 0, 0 for 1-6,
	// 0-32 = -32 for 7. qs[0] = 0x9f, qs[127] = 0x0f, every other byte 0x88.
	// Sub-block 0: y[0] = 0.25*1*T[15] = 28.25; y[16] = 0.25*T[9] = 3.25; others 0.25*T[8] = 0.25.
	// Sub-blocks 1-6: 0.
	// Sub-block 7 (224-255, qs[112..127]): dl = -8; weight 239 (qs[127]&15 = 15):
	//   -8*113 = -904; weight 255 (qs[127]>>4 = 0): -8*-127 = 1016; others -8*T[8] = -8.
	xs := make([]byte, 136)
	put16(xs, 0, 0x3400, 0x2aaa)
	xs[4] = 0x01
	for i := 8; i < 136; i++ {
		xs[i] = 0x88
	}
	xs[8+0], xs[8+127] = 0x9f, 0x0f
	add("IQ4_XS", gguf.TypeIQ4_XS, xs,
		run{0, 0, 28.25}, run{1, 15, 0.25}, run{16, 16, 3.25}, run{17, 31, 0.25}, run{32, 223, 0},
		run{224, 238, -8}, run{239, 239, -904}, run{240, 254, -8}, run{255, 255, 1016})

	for _, c := range lowbitHandBlocks() {
		add(c.name, c.typ, c.b, c.want...)
	}
	return cases
}

// runs turns a full list of values into one-weight runs.
func runs(vs ...float32) []run {
	r := make([]run, len(vs))
	for i, v := range vs {
		r[i] = run{i, i, v}
	}
	return r
}

func TestHandBlocks(t *testing.T) {
	seen := map[gguf.Type]bool{}
	for _, c := range handBlocks() {
		t.Run(c.name, func(t *testing.T) {
			seen[c.typ] = true
			n := len(c.b) / c.typ.TypeSize() * c.typ.BlockSize()
			got := make([]float32, n)
			if err := Dequantize(c.typ, c.b, got); err != nil {
				t.Fatal(err)
			}
			covered := 0
			for _, r := range c.want {
				for i := r.from; i <= r.to; i++ {
					covered++
					if got[i] != r.v {
						t.Errorf("y[%d] = %v, want %v", i, got[i], r.v)
					}
				}
			}
			if covered != n {
				t.Fatalf("test bug: runs cover %d of %d weights", covered, n)
			}
			row := make([]float32, n)
			DequantizeRow(c.typ, c.b, row)
			for i := range row {
				if math.Float32bits(row[i]) != math.Float32bits(got[i]) {
					t.Errorf("DequantizeRow y[%d] = %v, Dequantize gave %v", i, row[i], got[i])
				}
			}
		})
	}
	for _, typ := range supportedTypes {
		if !seen[typ] {
			t.Errorf("no hand-built block for %v", typ)
		}
	}
}
