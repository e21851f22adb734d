package quant

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/oracle"
)

// The shared quant zoos (../shared/oracle/zoo, see its README): one 512x256
// tensor per weight type, all cut from the same F16 tensor by
// llama-quantize, with the dequantized values beside each. quant-zoo has
// the classic types (gguf-py's values), quant-zoo-2 the low-bit ones
// (ggml's to_float, which gguf-py matches bit for bit there).

var zooTypes = []gguf.Type{
	gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0, gguf.TypeQ5_1,
	gguf.TypeQ8_0, gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K,
	gguf.TypeIQ4_NL, gguf.TypeIQ4_XS,
}

// zoo2Types are quant-zoo-2's.
var zoo2Types = []gguf.Type{
	gguf.TypeIQ2_XXS, gguf.TypeIQ2_XS, gguf.TypeIQ3_XXS, gguf.TypeIQ1_S, gguf.TypeIQ3_S,
	gguf.TypeIQ2_S, gguf.TypeIQ1_M, gguf.TypeTQ1_0, gguf.TypeTQ2_0, gguf.TypeMXFP4, gguf.TypeNVFP4,
}

// zooFiles lists both zoos: file stem and the types it holds.
var zooFiles = []struct {
	stem  string
	types []gguf.Type
}{{"quant-zoo", zooTypes}, {"quant-zoo-2", zoo2Types}}

const (
	zooCols = 512 // ne0
	zooRows = 256 // ne1
)

type zoo struct {
	dir, stem string
	f         *gguf.File
}

// openZoo opens quant-zoo.gguf.
func openZoo(t testing.TB) *zoo { return openZooFile(t, "quant-zoo") }

// openZooFile opens the zoo stem.gguf.
func openZooFile(t testing.TB, stem string) *zoo {
	t.Helper()
	dir := filepath.Join(oracle.Require(t), "zoo")
	f, err := gguf.Open(filepath.Join(dir, stem+".gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &zoo{dir, stem, f}
}

// raw returns the bytes of the zoo tensor of type typ, checking its header.
func (z *zoo) raw(t testing.TB, typ gguf.Type) []byte {
	t.Helper()
	ten, ok := z.f.Tensor(typ.String())
	if !ok {
		t.Fatalf("zoo has no tensor %q", typ)
	}
	if ten.Type != typ || len(ten.Shape) != 2 || ten.Shape[0] != zooCols || ten.Shape[1] != zooRows {
		t.Fatalf("zoo tensor %q: type %v shape %v, want %v [%d %d]", typ, ten.Type, ten.Shape, typ, zooCols, zooRows)
	}
	data := z.f.Data(ten)
	if want := zooCols * zooRows / typ.BlockSize() * typ.TypeSize(); len(data) != want {
		t.Fatalf("zoo tensor %q: %d bytes, want %d", typ, len(data), want)
	}
	return data
}

// values returns the reference dequantization of the zoo tensor of type typ.
func (z *zoo) values(t testing.TB, typ gguf.Type) []float32 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(z.dir, z.stem+"."+typ.String()+".f32"))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 4*zooCols*zooRows {
		t.Fatalf("%s.%v.f32: %d bytes, want %d", z.stem, typ, len(b), 4*zooCols*zooRows)
	}
	v := make([]float32, zooCols*zooRows)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// ulps is the distance between a and b in units in the last place (the
// number of float32 values between them), for finite a and b.
func ulps(a, b float32) int64 {
	key := func(f float32) int64 {
		u := int64(math.Float32bits(f))
		if u&(1<<31) != 0 {
			return -(u &^ (1 << 31))
		}
		return u
	}
	d := key(a) - key(b)
	if d < 0 {
		d = -d
	}
	return d
}

// TestZooDequantize checks Dequantize against the reference on every
// tensor of both zoos. The README allows 1 ulp where the order of scale
// multiplications may differ; every product here is exact in float32 (see
// the package comment), so we demand identical bits for every type.
func TestZooDequantize(t *testing.T) {
	for _, zf := range zooFiles {
		z := openZooFile(t, zf.stem)
		for _, typ := range zf.types {
			t.Run(zf.stem+"/"+typ.String(), func(t *testing.T) { z.checkDequantize(t, typ) })
		}
	}
}

func (z *zoo) checkDequantize(t *testing.T, typ gguf.Type) {
	want := z.values(t, typ)
	got := make([]float32, len(want))
	if err := Dequantize(typ, z.raw(t, typ), got); err != nil {
		t.Fatal(err)
	}
	bad, worst := 0, int64(0)
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if bad < 5 {
				t.Errorf("value %d (row %d col %d): got %v (%#08x), want %v (%#08x)", i, i/zooCols, i%zooCols,
					got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
			bad++
			worst = max(worst, ulps(got[i], want[i]))
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d values differ, by up to %d ulp", bad, len(want), worst)
	}
}

// TestZooDotRow compares DotRow on every row of every zoo tensor with a
// float64 dot product of the row's Dequantize values.
//
// Tolerance: DotRow sums in float32 and factors each block's scale out of
// its sum, so it differs from the exact dot product by float32 rounding
// alone. A chain of k roundings errs by at most about k * 2^-24 *
// sum|w_i x_i| (each partial sum is bounded by sum|w_i x_i|). In DotRow a
// product goes through at most 32 additions within a (sub-)block, 16
// combining sub-blocks, 16 combining the blocks of a 512-wide row and 3
// scale multiplications; for F16/F32, 128 additions in one of four
// accumulators and 2 combining them. So at most 130 roundings:
// 130 * 2^-24 = 7.7e-6 < 1e-5, the tolerance we allow (measured errors are
// below 1e-7, and a SIMD version that reorders the sums stays within it).
// The bound is relative to sum|w_i x_i|, not to the dot product, which may
// cancel to nearly zero.
func TestZooDotRow(t *testing.T) {
	x := make([]float32, zooCols)
	rng := newRand(1)
	for i := range x {
		x[i] = float32(rng.Float64()*2 - 1)
	}
	for _, zf := range zooFiles {
		z := openZooFile(t, zf.stem)
		types := zf.types
		if zf.stem == "quant-zoo" {
			types = append([]gguf.Type{gguf.TypeF32}, types...)
		}
		for _, typ := range types {
			t.Run(zf.stem+"/"+typ.String(), func(t *testing.T) {
				var raw []byte
				if typ == gguf.TypeF32 {
					v := make([]float32, zooCols*zooRows)
					DequantizeRow(gguf.TypeF16, z.raw(t, gguf.TypeF16), v)
					raw = make([]byte, 4*len(v))
					if err := Quantize(gguf.TypeF32, v, raw); err != nil {
						t.Fatal(err)
					}
				} else {
					raw = z.raw(t, typ)
				}
				checkDotRows(t, typ, raw, x)
			})
		}
	}
}

// checkDotRows checks DotRow(row, x) on each of the zooRows rows of raw.
func checkDotRows(t *testing.T, typ gguf.Type, raw []byte, x []float32) {
	rowBytes := len(raw) / zooRows
	w := make([]float32, zooCols)
	worst := 0.0
	for r := range zooRows {
		row := raw[r*rowBytes : (r+1)*rowBytes]
		if err := Dequantize(typ, row, w); err != nil {
			t.Fatal(err)
		}
		var want, sumAbs float64
		for i := range w {
			p := float64(w[i]) * float64(x[i])
			want += p
			sumAbs += math.Abs(p)
		}
		got := float64(DotRow(typ, row, x))
		rel := math.Abs(got-want) / sumAbs
		worst = max(worst, rel)
		if rel > 1e-5 {
			t.Errorf("row %d: DotRow = %v, want %v (error %.3g of sum|w x| = %v)", r, got, want, rel, sumAbs)
		}
	}
	t.Logf("worst error %.3g of sum|w x|", worst)
}
