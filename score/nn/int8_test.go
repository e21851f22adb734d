package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"ppl.dev/gguf"
	"ppl.dev/quant"
)

// int8Types are the weight types with an integer decoding that quant can
// also produce (the others are checked on random bytes in package quant).
var int8Types = []gguf.Type{
	gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0, gguf.TypeQ5_1,
	gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K,
}

// dequantActs returns the activations as the int8 kernels see them:
// d·qx per value, from the generic quantizer with blocks of actBlock.
func dequantActs(x []float32, n, k, actBlock int) []float32 {
	a := &qacts{}
	a.layout(n, k, actBlock)
	a.buf = make([]byte, n*a.rec)
	out := make([]float32, n*k)
	prev := SetLevel(Generic)
	defer SetLevel(prev)
	for t := range n {
		rec := a.buf[t*a.rec : (t+1)*a.rec]
		a.quantizeRow(x[t*k:(t+1)*k], rec)
		d := unsafe.Slice((*float32)(unsafe.Pointer(&rec[a.dOff])), k/32)
		for i := range k {
			out[t*k+i] = d[i/32] * float32(int8(rec[i]))
		}
	}
	return out
}

func randWeights(t testing.TB, r *rand.Rand, typ gguf.Type, in, out int) (data []byte, deq []float32) {
	wf := randVec(r, in*out)
	rb, _ := typ.RowSize(uint64(in))
	data = make([]byte, int(rb)*out)
	if err := quant.Quantize(typ, wf, data); err != nil {
		t.Fatal(err)
	}
	deq = make([]float32, in*out)
	if err := quant.Dequantize(typ, data, deq); err != nil {
		t.Fatal(err)
	}
	return data, deq
}

// TestLinearInt8 checks the int8 mode against the float64 product of the
// dequantized weights and the quantized activations (within float32
// rounding), every level against the generic bits, and thread counts.
func TestLinearInt8(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, typ := range int8Types {
		for _, sh := range []struct{ in, out, n int }{{256, 37, 7}, {512, 64, 13}, {256, 32, 1}, {256, 33, 2}, {256, 40, 3}, {256, 37, 4}, {512, 35, 5}, {256, 32, 11}, {256, 31, 17}} {
			name := fmt.Sprintf("%v %dx%d n=%d", typ, sh.out, sh.in, sh.n)
			data, deq := randWeights(t, r, typ, sh.in, sh.out)
			l, err := NewLinear("w", typ, sh.in, sh.out, data)
			if err != nil {
				t.Fatal(err)
			}
			x := randVec(r, sh.n*sh.in)
			f, _ := quant.Int8FormatOf(typ)
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
						for i := range y {
							if y[i] != ref[i] {
								t.Fatalf("%s level %v threads %d: out[%d] = %v, generic %v", name, lv, threads, i, y[i], ref[i])
							}
						}
					}
				}
			})
		}
	}
}

// TestQuantActs checks both activation quantizers on zeros, tiny blocks,
// huge values, infinities, NaNs and ties, and every level against the
// generic record bytes.
func TestQuantActs(t *testing.T) {
	for _, ab := range []int{32, 256} {
		k := 512
		x := make([]float32, k)
		x[0], x[1], x[2] = 3e38, -3e38, 1.5e38
		for i := 256; i < 512; i++ {
			x[i] = 1e-35 // a tiny block (super-block): all zero
		}
		got := dequantActs(x, 1, k, ab)
		if math.Abs(float64(got[0])-3e38) > 3e38/100 || math.Abs(float64(got[1])+3e38) > 3e38/100 {
			t.Errorf("block %d: ±3e38 -> %v, %v", ab, got[0], got[1])
		}
		for i := 256; i < 512; i++ {
			if got[i] != 0 {
				t.Fatalf("block %d: tiny block: %v", ab, got[i])
			}
		}
	}
	// Ties round to even: 127·2.5/127 = 2.5 -> 2, 3.5 -> 4.
	y := make([]float32, 256)
	y[0], y[1], y[2] = 127, 2.5, 3.5
	for _, ab := range []int{32, 256} {
		q := dequantActs(y, 1, 256, ab)
		if q[1] != 2 || q[2] != 4 {
			t.Errorf("block %d: ties: %v %v", ab, q[1], q[2])
		}
	}
	// Q8_0 scales are f16: 127·d rounds.
	z := make([]float32, 32)
	z[0] = 1000.3
	if q := dequantActs(z, 1, 32, 32); q[0] != 127*quant.F16ToF32(quant.F32ToF16(1000.3/127)) {
		t.Errorf("Q8_0 scale not f16: %v", q[0])
	}
	// Q8_K: the largest magnitude is the negative one; it maps to -127.
	w := make([]float32, 256)
	w[3], w[7] = -2, 1
	if q := dequantActs(w, 1, 256, 256); q[3] != -2 || math.Abs(float64(q[7])-1) > 2.0/127 {
		t.Errorf("Q8_K: %v %v", q[3], q[7])
	}
	// Every level gives the same record bytes on hard input.
	r := rand.New(rand.NewPCG(1, 1))
	for trial := range 20 {
		n, k := 5, 768
		v := randVec(r, n*k)
		for i := range v {
			v[i] *= float32(math.Pow(10, float64(r.IntN(80)-40)))
		}
		switch trial % 5 {
		case 4: // a super-block whose largest magnitude is actTiny itself
			sb := r.IntN(len(v)/256) * 256
			for i := sb; i < sb+256; i++ {
				v[i] = actTiny * float32(r.Float64())
			}
			v[sb+r.IntN(256)] = -actTiny
		case 1:
			v[r.IntN(len(v))] = float32(math.NaN())
		case 2:
			v[r.IntN(len(v))] = float32(math.Inf(1 - 2*r.IntN(2)))
		case 3: // the largest magnitude twice, with both signs, in a super-block
			sb := r.IntN(len(v)/256) * 256
			im := sb
			for i := sb; i < sb+256; i++ {
				if math.Abs(float64(v[i])) > math.Abs(float64(v[im])) {
					im = i
				}
			}
			v[sb+r.IntN(256)] = -v[im]
		}
		for _, ab := range []int{32, 256} {
			var ref *qacts
			forEachLevel(t, func(t testing.TB, lv Level) {
				c := NewContext(2)
				a := &qacts{}
				c.quantizeActs(a, v, n, k, ab)
				if ref == nil {
					ref = a
					ref.buf = slices.Clone(a.buf)
					return
				}
				defer runtime.KeepAlive(c) // a.buf is c's memory
				end := a.ds32Off + 4*k/32  // the fields every level writes
				// Again over garbage: every byte compared is written.
				for i := range a.buf {
					a.buf[i] = 0xa5
				}
				for row := range n {
					a.quantizeRow(v[row*k:(row+1)*k], a.buf[row*a.rec:(row+1)*a.rec])
				}
				for row := range n {
					got, want := a.buf[row*a.rec:row*a.rec+end], ref.buf[row*ref.rec:row*ref.rec+end]
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("trial %d block %d level %v: row %d record byte %d = %d, generic %d", trial, ab, lv, row, i, got[i], want[i])
						}
					}
					if a.q16Off != 0 {
						q16 := unsafe.Slice((*int16)(unsafe.Pointer(&a.buf[row*a.rec+a.q16Off])), k)
						for i, q := range q16 {
							if q != int16(int8(got[i])) {
								t.Fatalf("level %v: q16[%d] = %d, q %d", lv, i, q, int8(got[i]))
							}
						}
					}
				}
			})
		}
	}
}

// TestRoundHalf checks the f16 rounding of the int8 mode's float weights at
// every level against quant's conversions, NaNs and overflow included.
func TestRoundHalf(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 3))
	x := randVec(r, 1000)
	for i := range x {
		x[i] *= float32(math.Pow(2, float64(r.IntN(60)-30)))
	}
	x[0], x[1], x[2] = float32(math.NaN()), 1e6, -65520
	forEachLevel(t, func(t testing.TB, lv Level) {
		for h := range 2 {
			got := make([]float32, len(x))
			roundHalf(h, got, x)
			for i, v := range x {
				want := quant.F16ToF32(quant.F32ToF16(v))
				if h == 1 {
					want = quant.BF16ToF32(quant.F32ToBF16(v))
				}
				if math.Float32bits(got[i]) != math.Float32bits(want) {
					t.Fatalf("level %v rounding %d: %v -> %v, want %v", lv, h, v, got[i], want)
				}
			}
		}
	})
}

// FuzzLinearInt8 checks every level against the generic int8 kernels on
// arbitrary types, shapes and scales of activations.
func FuzzLinearInt8(f *testing.F) {
	f.Add(uint8(0), uint8(3), uint8(33), uint64(1), int8(0))
	f.Add(uint8(7), uint8(13), uint8(64), uint64(2), int8(20))
	f.Add(uint8(9), uint8(1), uint8(5), uint64(3), int8(-30))
	f.Fuzz(func(t *testing.T, ti, n8, out8 uint8, seed uint64, exp int8) {
		typ := int8Types[int(ti)%len(int8Types)]
		n, out := int(n8%20)+1, int(out8%70)+1
		in := 256 * (1 + int(seed%2))
		r := rand.New(rand.NewPCG(seed, 5))
		data, _ := randWeights(t, r, typ, in, out)
		l, err := NewLinear("w", typ, in, out, data)
		if err != nil {
			t.Fatal(err)
		}
		x := randVec(r, n*in)
		for i := range x {
			x[i] *= float32(math.Pow(2, float64(exp%40)))
		}
		levelsAgree(t, fmt.Sprintf("%v n=%d out=%d", typ, n, out), l, x, n, 2, true, false)
	})
}

// TestLinearExtremes runs both modes on weights whose block scales sit at
// the f16 limits (65504, the smallest subnormal 2^-24, zero) with quants
// at their extremes (-128 for Q8_0), and NaN-free activations from 1e-20 to
// 1e20 (f16 overflows in the int8 mode's Q8_0 scales): every level gives
// the generic bits, and the results are within float32 rounding of the
// float64 product of the weights and the (quantized) activations.
func TestLinearExtremes(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	in, out, n := 256, 40, 9
	scales := []uint16{0x7bff, 0x0001, 0x0000, 0x3c00, 0x0400}
	for _, typ := range []gguf.Type{gguf.TypeQ8_0, gguf.TypeQ4_K, gguf.TypeQ6_K} {
		rb, _ := typ.RowSize(uint64(in))
		data := make([]byte, int(rb)*out)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		bs, ts := typ.BlockSize(), typ.TypeSize()
		for b := 0; b < len(data)/ts; b++ {
			blk := data[b*ts : (b+1)*ts]
			sc := scales[r.IntN(len(scales))]
			switch typ {
			case gguf.TypeQ8_0:
				blk[0], blk[1] = byte(sc), byte(sc>>8)
				blk[2] = 0x80 // -128
			case gguf.TypeQ4_K:
				blk[0], blk[1] = byte(sc), byte(sc>>8)
				sm := scales[r.IntN(len(scales))]
				blk[2], blk[3] = byte(sm), byte(sm>>8)
			case gguf.TypeQ6_K:
				blk[208], blk[209] = byte(sc), byte(sc>>8)
			}
		}
		_ = bs
		deq := make([]float32, in*out)
		if err := quant.Dequantize(typ, data, deq); err != nil {
			t.Fatal(err)
		}
		l, err := NewLinear("w", typ, in, out, data)
		if err != nil {
			t.Fatal(err)
		}
		x := randVec(r, n*in)
		for i := range x {
			x[i] *= float32(math.Pow(10, float64(r.IntN(41)-20)))
		}
		for _, int8 := range []bool{false, true} {
			f, _ := quant.Int8FormatOf(typ)
			xs := x
			if int8 {
				xs = dequantActs(x, n, in, f.ActBlock)
			}
			y := levelsAgree(t, fmt.Sprintf("%v int8=%v", typ, int8), l, x, n, 2, int8, false)
			checkMatMul(t, fmt.Sprintf("%v int8=%v extremes", typ, int8), y, out, xs, n, in, deq, out)
		}
	}
}

// TestInt8Tiles runs every tile kernel of every level (each row count m as
// the last, partial tile of some n) for the four kinds of int8 kernels:
// groups of 32 or 16, with minima or not, against the generic bits.
func TestInt8Tiles(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, typ := range []gguf.Type{gguf.TypeQ8_0, gguf.TypeQ4_K, gguf.TypeQ6_K, gguf.TypeQ2_K} {
		in, out := 512, 45
		data, _ := randWeights(t, r, typ, in, out)
		l, err := NewLinear("w", typ, in, out, data)
		if err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= 14; n++ {
			x := randVec(r, n*in)
			levelsAgree(t, fmt.Sprintf("%v n=%d", typ, n), l, x, n, 1, true, false)
		}
	}
}

// levelsAgree runs l on x (n rows) with threads goroutines in the given
// mode (int8, and in llama.cpp's order) at every level, fails t where a
// level's bits differ from the generic ones, and returns the generic
// output.
func levelsAgree(t testing.TB, what string, l *Linear, x []float32, n, threads int, int8, llamaCPP bool) []float32 {
	var ref []float32
	forEachLevel(t, func(t testing.TB, lv Level) {
		c := NewContext(threads)
		c.Int8, c.LlamaCPP = int8, llamaCPP
		y := make([]float32, n*l.Out)
		l.Forward(c, y, x, n)
		if ref == nil {
			ref = y
		} else if !slicesEqualBits(ref, y) {
			t.Fatalf("%s level %v: differs from generic", what, lv)
		}
	})
	return ref
}

// TestInt8Output checks the exported references of the GPU's int8 kernels,
// QuantizeActs and Int8Output over quant.DecodeInt8, against the int8
// mode's product at the generic level: the same bits for every weight
// type it can quantize, on random rows and on rows of zeros, of values
// below actTiny, of ±MaxFloat32 and with a NaN.
func TestInt8Output(t *testing.T) {
	prev := SetLevel(Generic)
	defer SetLevel(prev)
	r := rand.New(rand.NewPCG(31, 32))
	const in, out = 512, 7
	rows := [][]float32{randVec(r, in), randVec(r, in), make([]float32, in), make([]float32, in), make([]float32, in), randVec(r, in)}
	for i := range in {
		rows[3][i] = float32(r.NormFloat64()) * 1e-31
		rows[4][i] = float32(math.MaxFloat32 * (2*float64(i%2) - 1))
	}
	rows[5][300] = float32(math.NaN())
	x := slices.Concat(rows...)
	n := len(rows)
	for _, typ := range int8Types {
		f, _ := quant.Int8FormatOf(typ)
		data, _ := randWeights(t, r, typ, in, out)
		l, err := NewLinear("w", typ, in, out, data)
		if err != nil {
			t.Fatal(err)
		}
		c := NewContext(1)
		c.Int8 = true
		want := make([]float32, n*out)
		l.Forward(c, want, x, n)
		qx, d, xs := make([]int8, in), make([]float32, in/32), make([]int32, in/16)
		qw, u := make([]int8, in), make([]byte, in)
		s, m := make([]float32, in/f.Group), make([]float32, in/f.Group)
		for tk := range n {
			QuantizeActs(x[tk*in:(tk+1)*in], f.ActBlock, qx, d, xs)
			for j := range in / 16 {
				var sum int32
				for _, v := range qx[16*j : 16*j+16] {
					sum += int32(v)
				}
				if sum != xs[j] {
					t.Fatalf("%v row %d: xs16[%d] = %d, codes sum to %d", typ, tk, j, xs[j], sum)
				}
			}
			for o := range out {
				quant.DecodeInt8(typ, data[o*l.RowBytes:(o+1)*l.RowBytes], u, s, m)
				for i, v := range u {
					qw[i] = int8(int(v) - f.Offset)
				}
				mm := m
				if !f.HasMin {
					mm = nil
				}
				got, w := Int8Output(qw, qx, s, mm, d, f.Group), want[tk*out+o]
				if math.Float32bits(got) != math.Float32bits(w) && !(got != got && w != w) {
					t.Fatalf("%v row %d output %d: Int8Output %g, the int8 mode %g", typ, tk, o, got, w)
				}
			}
		}
	}
}
