package quant

import (
	"fmt"
	"math"
	"testing"
)

// FuzzDotRow feeds arbitrary bytes, read as whole blocks of each supported
// type, to Dequantize, DequantizeRow and DotRow: none may panic, the two
// dequantizers must agree bit for bit, and DotRow must match a float64 dot
// of the dequantized values within float32 summation error (see
// TestZooDotRow) wherever sum|w_i x_i| is finite and normal.
func FuzzDotRow(f *testing.F) {
	for _, c := range handBlocks() {
		f.Add(c.b, uint64(1))
	}
	f.Add(make([]byte, 600), uint64(2))
	f.Add([]byte("\x00\x3c\xff\xff\xff\xff\x7f\x80\x01\x02"), uint64(3))
	f.Fuzz(checkDotRow)
}

// checkDotRow is FuzzDotRow's property. DotRow is checked on each block
// alone and on the whole row, each where sum|w_i x_i| is finite and normal
// (random bytes often make NaN or huge f16 scales; beyond float32 range the
// float32 sum may overflow where the float64 one does not, and with
// subnormal partial sums the relative bound does not hold).
func checkDotRow(t *testing.T, data []byte, seed uint64) {
	data = data[:min(len(data), 1<<14)] // longer inputs only slow the fuzzer down
	rng := newRand(seed)
	for _, typ := range supportedTypes {
		bs, ts := typ.BlockSize(), typ.TypeSize()
		nb := len(data) / ts
		if nb == 0 {
			continue
		}
		w := data[:nb*ts]
		n := nb * bs
		got := make([]float32, n)
		if err := Dequantize(typ, w, got); err != nil {
			t.Fatalf("%v: %v", typ, err)
		}
		row := make([]float32, n)
		DequantizeRow(typ, w, row)
		x := make([]float32, n)
		for i := range got {
			if math.Float32bits(row[i]) != math.Float32bits(got[i]) {
				t.Fatalf("%v: DequantizeRow[%d] = %v, Dequantize %v", typ, i, row[i], got[i])
			}
			x[i] = float32(rng.Float64()*2 - 1)
		}
		check := func(block, lo, hi int) { // block -1: the whole row
			var want, sumAbs float64
			for i := lo; i < hi; i++ {
				p := float64(got[i]) * float64(x[i])
				want += p
				sumAbs += math.Abs(p)
			}
			if math.IsNaN(sumAbs) || sumAbs > 1e30 || sumAbs < 1e-30 {
				return
			}
			// 1e-5 as in TestZooDotRow, or, for long rows and Q8_K's
			// 256-long block sums, the first-order worst case: no product
			// passes through more than hi-lo additions and 4 multiplications.
			tol := max(1e-5, float64(hi-lo+4)*0x1p-24)
			dot := float64(DotRow(typ, w[lo/bs*ts:hi/bs*ts], x[lo:hi]))
			if math.Abs(dot-want) > tol*sumAbs {
				what := fmt.Sprintf("block %d", block)
				if block < 0 {
					what = "row"
				}
				t.Fatalf("%v %s: DotRow = %v, want %v (sum|w x| = %v)", typ, what, dot, want, sumAbs)
			}
		}
		for b := range nb {
			check(b, b*bs, (b+1)*bs)
		}
		check(-1, 0, n)
	}
}

// TestDotRowRandomBlocks runs FuzzDotRow's property on random bytes, so
// plain `go test` exercises it beyond the seed corpus.
func TestDotRowRandomBlocks(t *testing.T) {
	rng := newRand(11)
	for it := range 300 {
		data := make([]byte, rng.IntN(3000))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		checkDotRow(t, data, uint64(it))
	}
}

// FuzzQuantize: Quantize never panics on finite input, and what it writes
// dequantizes to finite values.
func FuzzQuantize(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 192}, uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, pick uint8) {
		types := allQuantizable()
		typ := types[int(pick)%len(types)]
		bs := typ.BlockSize()
		n := len(data) / 4 / bs * bs
		if n == 0 {
			return
		}
		src := make([]float32, n)
		if err := Dequantize(0, data[:4*n], src); err != nil { // type 0 = F32
			t.Fatal(err)
		}
		for i, v := range src {
			// Keep to the range where f16 scales cannot overflow.
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || math.Abs(float64(v)) > 1e4 {
				src[i] = 0
			}
		}
		dst := make([]byte, n/bs*typ.TypeSize())
		if err := Quantize(typ, src, dst); err != nil {
			t.Fatal(err)
		}
		back := make([]float32, n)
		DequantizeRow(typ, dst, back)
		for i, v := range back {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("%v: weight %d (%v) came back as %v", typ, i, src[i], v)
			}
		}
	})
}
