package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"ppl.dev/gguf"
)

// TestDotLanes16 checks every level's dotLanes16 kernels against
// dotLanes16Generic bit for bit: random rows of 16 to 4096 values, rows
// whose sums cancel (x and -x), overflow to ±Inf, hold a NaN, and
// subnormal products; 1 to 4 rows of x at once, ldx wider than n.
func TestDotLanes16(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 1))
	for _, n := range []int{16, 32, 272, 4096} {
		for c := range 5 {
			w := make([]float32, n)
			ldx := n + 16
			x := make([]float32, 4*ldx)
			for i := range w {
				w[i] = float32(r.NormFloat64())
			}
			for i := range x {
				x[i] = float32(r.NormFloat64() * math.Exp(4*r.NormFloat64()))
			}
			switch c {
			case 1: // cancellation: row 1 is -row 0
				for i := range n {
					x[ldx+i] = -x[i]
				}
			case 2: // overflow
				x[3], w[3], x[ldx+5], w[5] = 3e38, 3e38, -3e38, 3e38
			case 3: // NaN
				x[2*ldx+n-1] = float32(math.NaN())
			case 4: // subnormal products
				for i := range w {
					w[i] *= 1e-30
				}
			}
			for m := 1; m <= 4; m++ {
				want := make([]float32, m)
				dotLanes16Generic(w, x, ldx, m, want)
				forEachLevel(t, func(t testing.TB, l Level) {
					f := kern.dotLanes16[m-1]
					if f == nil {
						return
					}
					got := make([]float32, m)
					f(&w[0], &x[0], ldx, n, &got[0])
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
							t.Fatalf("n=%d case %d m=%d level %v: row %d = %v, generic %v", n, c, m, l, i, got[i], want[i])
						}
					}
				})
			}
		}
	}
}

// TestAMXTaken pins which matrices llama.cpp 0.7.0's AMX buffer takes
// (amx.cpp's supports_op).
func TestAMXTaken(t *testing.T) {
	for _, c := range []struct {
		t       gguf.Type
		in, out int
		routed  bool
		want    bool
	}{
		{gguf.TypeQ8_0, 64, 32, false, true},
		{gguf.TypeQ8_0, 64, 48, false, false}, // rows not a multiple of 32
		{gguf.TypeQ8_0, 64, 32, true, false},  // an expert's: MUL_MAT_ID
		{gguf.TypeQ4_0, 96, 64, false, true},
		{gguf.TypeQ4_1, 32, 32, false, true},
		{gguf.TypeQ4_K, 256, 32, false, true},
		{gguf.TypeQ5_K, 512, 32, false, true},
		{gguf.TypeQ6_K, 256, 64, false, true},
		{gguf.TypeIQ4_XS, 256, 32, false, true},
		{gguf.TypeF16, 48, 32, false, true},
		{gguf.TypeF16, 40, 32, false, false}, // inputs not a multiple of 16
		{gguf.TypeQ2_K, 256, 32, false, false},
		{gguf.TypeQ5_0, 64, 32, false, false},
		{gguf.TypeBF16, 64, 32, false, false},
		{gguf.TypeIQ4_NL, 64, 32, false, false},
		{gguf.TypeMXFP4, 64, 32, false, false},
	} {
		if got := AMXTaken(c.t, c.in, c.out, c.routed); got != c.want {
			t.Errorf("AMXTaken(%v, %d, %d, %v) = %v, want %v", c.t, c.in, c.out, c.routed, got, c.want)
		}
	}
	// A fused projection's part is taken as its tensor is: q of 64 rows
	// and k and v of 16, one tensor of 96.
	for _, out := range []int{64, 16} {
		l := &Linear{Type: gguf.TypeQ8_0, In: 64, Out: out, TensorRows: 96}
		if !l.amxTaken() {
			t.Errorf("a part of %d rows of a tensor of 96: not taken", out)
		}
	}
	if l := (&Linear{Type: gguf.TypeQ8_0, In: 64, Out: 16}); l.amxTaken() {
		t.Error("a matrix of 16 rows: taken")
	}
}
