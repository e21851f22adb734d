package nn

import (
	"encoding/binary"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"slices"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/quant"
)

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// TestLinear runs a Q8_0 matrix with a bias through Linear, for a row count
// that is not a multiple of the 16-row block, and checks that the result
// does not depend on the number of threads.
func TestLinear(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	in, out, n := 64, 37, 6
	wf := randVec(r, in*out)
	data := make([]byte, out*in/32*34)
	if err := quant.Quantize(gguf.TypeQ8_0, wf, data); err != nil {
		t.Fatal(err)
	}
	l, err := NewLinear("w", gguf.TypeQ8_0, in, out, data)
	if err != nil {
		t.Fatal(err)
	}
	l.Bias = randVec(r, out)
	deq := make([]float32, in*out)
	if err := quant.Dequantize(gguf.TypeQ8_0, data, deq); err != nil {
		t.Fatal(err)
	}
	x := randVec(r, n*in)
	var first []float32
	for _, threads := range []int{1, 2, 3, 8} {
		c := NewContext(threads)
		y := make([]float32, n*out)
		l.Forward(c, y, x, n)
		for i := range y {
			y[i] -= l.Bias[i%out]
		}
		checkMatMul(t, "Linear", y, out, x, n, in, deq, out)
		if first == nil {
			first = y
		} else if !slices.Equal(first, y) {
			t.Fatalf("threads=%d: result differs from threads=1", threads)
		}
	}
	if _, err := NewLinear("w", gguf.TypeQ8_0, in, out, data[:len(data)-1]); err == nil {
		t.Error("NewLinear accepted short data")
	}
	if _, err := NewLinear("w", gguf.TypeQ8_1, 32, 1, make([]byte, 36)); err == nil {
		t.Error("NewLinear accepted an unsupported type")
	}
}

// TestLinearLong runs more rows than one pass over the panels takes, in
// both modes.
func TestLinearLong(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	in, out, n := 64, 37, linearRows+5
	data, deq := randWeights(t, r, gguf.TypeQ8_0, in, out)
	l, err := NewLinear("w", gguf.TypeQ8_0, in, out, data)
	if err != nil {
		t.Fatal(err)
	}
	x := randVec(r, n*in)
	for _, int8 := range []bool{false, true} {
		c := NewContext(2)
		c.Int8 = int8
		y := make([]float32, n*out)
		l.Forward(c, y, x, n)
		xs := x
		if int8 {
			xs = dequantActs(x, n, in, 32)
		}
		checkMatMul(t, "long Linear", y, out, xs, n, in, deq, out)
	}
}

func TestRMSNorm(t *testing.T) {
	m := &RMSNorm{Name: "n", W: []float32{1, 2}, Eps: 0}
	x := []float32{3, 4, 0, -2}
	out := make([]float32, 4)
	m.Forward(NewContext(2), out, x, 2)
	s1 := 1 / math.Sqrt(12.5)
	want := []float32{float32(3 * s1), float32(4 * s1 * 2), 0, float32(-2 * 1 / math.Sqrt(2) * 2)}
	if !slices.Equal(out, want) {
		t.Fatalf("got %v, want %v", out, want)
	}
	// Rows of 2 with a weight row each of 2 parts (Cols): rows 0 and 2
	// take {1, 2}, rows 1 and 3 {3, -1}, in both modes.
	parted := &RMSNorm{Name: "n", W: []float32{1, 2, 3, -1}, Eps: 0, Cols: 2}
	x = []float32{3, 4, 0, -2, 3, 4, 0, -2}
	for _, llama := range []bool{false, true} {
		c := NewContext(2)
		c.LlamaCPP = llama
		out = make([]float32, 8)
		parted.Forward(c, out, x, 4)
		s2 := 1 / math.Sqrt(2)
		want = []float32{float32(3 * s1), float32(4 * s1 * 2), 0, float32(-2 * s2 * -1), float32(3 * s1), float32(4 * s1 * 2), 0, float32(-2 * s2 * -1)}
		if !slices.Equal(out, want) {
			t.Fatalf("parted, llama.cpp's %v: got %v, want %v", llama, out, want)
		}
	}
}

// ropeDirect rotates one head by the textbook formula with complex numbers:
// pair i, as (a + ib), is multiplied by e^{iθ}, θ = p·base^(-2i/dims).
func ropeDirect(v []float32, p int, dims int, neox bool, base float64) []float32 {
	out := slices.Clone(v)
	h := dims / 2
	for i := range h {
		ia, ib := 2*i, 2*i+1
		if neox {
			ia, ib = i, i+h
		}
		z := complex(float64(v[ia]), float64(v[ib])) * cmplx.Exp(complex(0, float64(p)*math.Pow(base, -float64(2*i)/float64(dims))))
		out[ia], out[ib] = float32(real(z)), float32(imag(z))
	}
	return out
}

func TestRoPE(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct {
		headDim, dims int
		neox          bool
		base          float64
	}{
		{64, 64, false, 10000},
		{32, 32, true, 1e6},
		{16, 8, false, 5e5}, // partial rotary: the last 8 elements stay
		{16, 8, true, 10000},
	} {
		n, heads := 300, 3
		rope := &RoPE{HeadDim: tc.headDim, Dims: tc.dims, NeoX: tc.neox, Base: tc.base, FreqScale: 1}
		if err := rope.Validate(); err != nil {
			t.Fatal(err)
		}
		x := randVec(r, n*heads*tc.headDim)
		orig := slices.Clone(x)
		rope.Forward(NewContext(2), x, n, heads)
		for p := range n {
			for h := range heads {
				off := (p*heads + h) * tc.headDim
				want := ropeDirect(orig[off:off+tc.headDim], p, tc.dims, tc.neox, tc.base)
				for i, w := range want {
					if d := math.Abs(float64(x[off+i] - w)); d > 1e-6*(1+math.Abs(float64(w))) {
						t.Fatalf("%+v: position %d head %d element %d: got %v, want %v", tc, p, h, i, x[off+i], w)
					}
				}
			}
		}
	}
}

// TestRoPEBack: Back turns by -θ, undoing Forward (DeepSeek-V4 turns its
// heads' outputs back), in float64 tables and in ggml's float32, with and
// without YaRN, to a few float32 roundings of each element.
func TestRoPEBack(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, llama := range []bool{false, true} {
		for _, yarn := range []bool{false, true} {
			rope := &RoPE{HeadDim: 16, Dims: 16, Base: 160000, FreqScale: 1, AttnFactor: 1}
			if yarn {
				rope.FreqScale, rope.ExtFactor, rope.BetaFast, rope.BetaSlow, rope.OrigCtx = 0.25, 1, 32, 1, 512
				rope.AttnFactor = float64(1 / (1 + 0.1*float32(math.Log(4))))
			}
			back := rope.WithBase(rope.Base)
			back.Back = true
			const n, heads = 600, 2
			x := randVec(r, n*heads*16)
			orig := slices.Clone(x)
			c := NewContext(2)
			c.LlamaCPP = llama
			rope.Forward(c, x, n, heads)
			back.Forward(c, x, n, heads)
			worst := 0.0
			for i, w := range orig {
				worst = max(worst, math.Abs(float64(x[i]-w))/max(1, math.Abs(float64(w))))
			}
			if worst > 3e-7 { // measured 1.2e-7, 2.3e-7 with YaRN
				t.Errorf("llama.cpp %v, YaRN %v: turned and back, %.2g off", llama, yarn, worst)
			}
			back.Forward(c, x, n, heads)
			if slices.Equal(x, orig) {
				t.Errorf("llama.cpp %v, YaRN %v: turning back changes nothing", llama, yarn)
			}
		}
	}
}

func TestRoPELinear(t *testing.T) {
	// Linear scaling by 4 at position 4p is plain RoPE at position p.
	scaled := &RoPE{HeadDim: 64, Dims: 64, Base: 10000, FreqScale: 0.25}
	plain := &RoPE{HeadDim: 64, Dims: 64, Base: 10000, FreqScale: 1}
	for _, p := range []int{0, 1, 7, 1000, 4095} {
		for i := range 32 {
			c1, s1 := scaled.Angle(4*p, i)
			c2, s2 := plain.Angle(p, i)
			if math.Abs(c1-c2) > 1e-12 || math.Abs(s1-s2) > 1e-12 {
				t.Fatalf("p=%d i=%d: scaled (%v, %v), plain (%v, %v)", p, i, c1, s1, c2, s2)
			}
		}
	}
}

func TestRoPEYaRN(t *testing.T) {
	factor := 4.0
	y := &RoPE{HeadDim: 128, Dims: 128, Base: 10000, FreqScale: 1 / factor, ExtFactor: 1, AttnFactor: 1,
		BetaFast: 32, BetaSlow: 1, OrigCtx: 4096}
	if err := y.Validate(); err != nil {
		t.Fatal(err)
	}
	// corr_dim(b) = 128·ln(4096/(2πb)) / (2 ln 10000): 20.94 for b=32, 45.03 for b=1.
	if lo, hi := y.CorrDims(); lo != 20 || hi != 46 {
		t.Fatalf("CorrDims = %v, %v; want 20, 46", lo, hi)
	}
	mscale := 1 + 0.1*math.Log(factor)
	p := 10000
	for i := range 64 {
		theta := float64(p) * math.Pow(10000, -float64(2*i)/128)
		// rope_yarn: ramp 1 below the low corner (keep θ), 0 above the high one (θ/factor).
		ramp := 1 - math.Min(1, math.Max(0, (float64(i)-20)/(46-20)))
		want := theta/factor*(1-ramp) + theta*ramp
		c, s := y.Angle(p, i)
		if math.Abs(c-math.Cos(want)*mscale) > 1e-9 || math.Abs(s-math.Sin(want)*mscale) > 1e-9 {
			t.Fatalf("pair %d: got (%v, %v), want θ=%v scaled by %v", i, c, s, want, mscale)
		}
	}
	// Without YaRN the magnitude stays 1 (times AttnFactor).
	lin := &RoPE{HeadDim: 128, Dims: 128, Base: 10000, FreqScale: 0.25, AttnFactor: 1}
	if c, s := lin.Angle(123, 5); math.Abs(c*c+s*s-1) > 1e-12 {
		t.Fatalf("linear RoPE changes magnitude: %v", c*c+s*s)
	}
	bad := &RoPE{HeadDim: 64, Dims: 65, Base: 10000, FreqScale: 1}
	if bad.Validate() == nil {
		t.Error("odd rotary dims accepted")
	}
}

func TestAttention(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct{ n, heads, kvHeads, hd int }{
		{37, 4, 2, 16}, {1, 1, 1, 16}, {70, 12, 4, 64}, {33, 4, 1, 32}, {65, 16, 1, 48},
		{40, 6, 6, 128}, {31, 3, 1, 8}, {20, 26, 2, 16}, {100, 2, 2, 80},
	} {
		n, heads, kvHeads, hd := tc.n, tc.heads, tc.kvHeads, tc.hd
		a := &Attention{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 1 / math.Sqrt(float64(hd))}
		if err := a.Validate(); err != nil {
			t.Fatal(err)
		}
		q, k, v := randVec(r, n*heads*hd), randVec(r, n*kvHeads*hd), randVec(r, n*kvHeads*hd)
		for i := range q {
			q[i] *= 2 // sharper softmax
		}
		want := a.Exact(q, k, v, n)
		var ref []float32
		forEachLevel(t, func(t testing.TB, l Level) {
			for _, threads := range []int{1, 3} {
				out := make([]float32, n*heads*hd)
				a.Forward(NewContext(threads), out, q, k, v, n)
				for i, w := range want {
					if math.Abs(float64(out[i])-w) > 1e-5 {
						t.Fatalf("%+v level %v threads=%d: out[%d] = %v, want %v", tc, l, threads, i, out[i], w)
					}
				}
				if ref == nil {
					ref = out
				} else if !slices.Equal(ref, out) {
					t.Fatalf("%+v level %v threads=%d: differs from generic, 1 thread", tc, l, threads)
				}
			}
		})
	}
	if (&Attention{Heads: 3, KVHeads: 2, HeadDim: 4}).Validate() == nil {
		t.Error("3 heads over 2 KV heads accepted")
	}
}

func TestSwiGLU(t *testing.T) {
	out := make([]float32, 3)
	SwiGLU(out, []float32{0, 1, -2}, []float32{5, 2, 3})
	want := []float32{0, float32(2 / (1 + math.Exp(-1))), float32(-2 / (1 + math.Exp(2)) * 3)}
	if !slices.Equal(out, want) {
		t.Fatalf("got %v, want %v", out, want)
	}
}

// TestClampedSwiGLUs: Step-3.5's clamped SwiGLU (silu's output clamped)
// and ggml's SWIGLU_CLAMP (Maple: the gate clamped before silu) at each
// side of their limit, and llama.cpp's float32 forms (both builds) within
// 4 ulp of the float64 references over gates and ups well past it.
func TestClampedSwiGLUs(t *testing.T) {
	const l = 1.5
	silu := func(g float64) float64 { return g / (1 + math.Exp(-g)) }
	for _, c := range []struct {
		name  string
		ref   func(float32) func(out, gate, up []float32)
		ggml  func(l float32, avx2 bool) func(out, gate, up []float32)
		cases [][3]float64 // gate, up, want
	}{
		{"ClampSwiGLU", ClampSwiGLU, GGMLClampSwiGLU, [][3]float64{
			{0, 5, 0},
			{1, 0.5, silu(1) * 0.5},     // neither clamped
			{1, -9, silu(1) * -l},       // up clamped below
			{9, 0.5, l * 0.5},           // silu clamped
			{9, 9, l * l},               // both
			{-30, 9, silu(-30) * l},     // silu's negative side never clamped
			{-1.2, -1, silu(-1.2) * -1}, // near silu's minimum
		}},
		{"SwiGLUClampIn", SwiGLUClampIn, func(l float32, _ bool) func(out, gate, up []float32) { return GGMLSwiGLUClampIn(l) }, [][3]float64{
			{0, 5, 0},
			{1, 0.5, silu(1) * 0.5}, // neither clamped
			{1, -9, silu(1) * -l},   // up clamped below
			{9, 0.5, silu(l) * 0.5}, // the gate clamped before silu
			{9, 9, silu(l) * l},     // both
			{-30, 9, silu(-30) * l}, // the gate's negative side never clamped
			{-1.2, -1, silu(-1.2) * -1},
		}},
	} {
		for _, x := range c.cases {
			out := make([]float32, 1)
			c.ref(l)(out, []float32{float32(x[0])}, []float32{float32(x[1])})
			if out[0] != float32(x[2]) {
				t.Errorf("%s(%v)(%v, %v) = %v, want %v", c.name, l, x[0], x[1], out[0], float32(x[2]))
			}
		}
		r := rand.New(rand.NewPCG(3, 1))
		n := 1000 + 7 // a tail past the lanes
		g, u := make([]float32, n), make([]float32, n)
		for i := range g {
			g[i], u[i] = float32(r.NormFloat64()*4), float32(r.NormFloat64()*2)
		}
		want, got := make([]float32, n), make([]float32, n)
		c.ref(l)(want, g, u)
		for _, avx2 := range []bool{false, true} {
			c.ggml(l, avx2)(got, g, u)
			for i := range got {
				if d := math.Abs(float64(got[i] - want[i])); d > 4*float64(math.Nextafter32(want[i], float32(math.Inf(1)))-want[i]) {
					t.Fatalf("avx2 %v: GGML %s(%v, %v) = %v, reference %v", avx2, c.name, g[i], u[i], got[i], want[i])
				}
			}
		}
	}
}

// TestReGLU: ggml's REGLU, +0 for a gate at or below 0 and for NaN.
func TestReGLU(t *testing.T) {
	nan := float32(math.NaN())
	gate := []float32{2, -1, 0, nan, 3}
	up := []float32{1.5, -4, 7, 1, -2}
	out := make([]float32, len(gate))
	ReGLU(out, gate, up)
	for i, want := range []float32{3, 0, 0, 0, -6} {
		if math.Float32bits(out[i]) != math.Float32bits(want) {
			t.Errorf("ReGLU(%v, %v) = %v, want %v", gate[i], up[i], out[i], want)
		}
	}
}

func TestContextArena(t *testing.T) {
	c := NewContext(2)
	pass := func() (a, b []float32) {
		c.Reset()
		a = c.Alloc(100)
		m := c.Mark()
		c.Alloc(50)
		c.Release(m)
		b = c.Alloc(30) // reuses the released space
		c.Alloc(3 * minChunk)
		c.Alloc64(10)
		return a, b
	}
	a1, b1 := pass()
	a, b := pass() // served from the same chunks
	if &a[0] != &a1[0] || &b[0] != &b1[0] || &b[0] != &c.mem.f32.chunks[0][100] {
		t.Fatal("second pass not served from the arena in order")
	}
	if allocs := testing.AllocsPerRun(10, func() { pass() }); allocs != 0 {
		t.Fatalf("%v allocations per pass after the first", allocs)
	}
	if len(c.mem.f32.chunks) != 2 || len(c.mem.f64.chunks) != 1 {
		t.Fatalf("%d, %d chunks; want 2, 1", len(c.mem.f32.chunks), len(c.mem.f64.chunks))
	}
}

func TestParallel(t *testing.T) {
	for _, threads := range []int{1, 2, 5} {
		c := NewContext(threads)
		for _, n := range []int{0, 1, 4, 33} {
			seen := make([]int32, n)
			c.Parallel(n, func(_, lo, hi int) {
				for i := lo; i < hi; i++ {
					seen[i]++
				}
			})
			dyn := make([]int32, n)
			c.ParallelDynamic(n, 3, func(_, lo, hi int) {
				for i := lo; i < hi; i++ {
					dyn[i]++
				}
			})
			for i := range n {
				if seen[i] != 1 || dyn[i] != 1 {
					t.Fatalf("threads=%d n=%d: item %d done %d/%d times", threads, n, i, seen[i], dyn[i])
				}
			}
		}
	}
}

// TestRMSNormLevels checks rows of several lengths at every level against
// the generic bits and a float64 reference.
func TestRMSNormLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	for _, d := range []int{1, 7, 16, 33, 768} {
		m := &RMSNorm{Name: "n", W: randVec(r, d), Eps: 1e-5}
		x := randVec(r, 3*d)
		var ref []float32
		forEachLevel(t, func(t testing.TB, l Level) {
			out := make([]float32, 3*d)
			m.Forward(NewContext(2), out, x, 3)
			if ref == nil {
				ref = out
				for row := range 3 {
					var ss float64
					for _, v := range x[row*d : (row+1)*d] {
						ss += float64(v) * float64(v)
					}
					s := 1 / math.Sqrt(ss/float64(d)+1e-5)
					for i := range d {
						want := float32(float64(x[row*d+i]) * s * float64(m.W[i]))
						if math.Abs(float64(out[row*d+i]-want)) > 1e-6*math.Abs(float64(want)) {
							t.Fatalf("d=%d: out[%d] = %v, want %v", d, row*d+i, out[row*d+i], want)
						}
					}
				}
				return
			}
			if !slicesEqualBits(ref, out) {
				t.Fatalf("d=%d level %v: differs from generic", d, l)
			}
		})
	}
}

// TestAttentionWindowSinks checks sliding windows (narrower and wider than
// a 64-key block, of one key, wider than the sequence), sinks (small,
// and large enough to take most of the mass) and soft-caps (that bite,
// alone and with a window) in the flash path and the
// plain one against the float64 definition, with ALiBi's slopes too, at every level and thread
// count, the fast path bit-identical across them.
func TestAttentionWindowSinks(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, tc := range []struct {
		n, heads, kvHeads, hd, window int
		sinks                         float64 // scale of the sinks; 0 for none
		cap                           float64 // soft-cap; 0 for none
		sparse                        bool    // sparseKeys' key sets
		alibi                         float32 // ALiBi's maximum bias; 0 for none
	}{
		{150, 4, 2, 16, 32, 0, 0, false, 0}, {150, 4, 2, 16, 1, 0, 0, false, 0}, {200, 2, 1, 32, 64, 0, 0, false, 0}, {200, 2, 1, 32, 65, 0, 0, false, 0},
		{130, 12, 4, 64, 100, 0, 0, false, 0}, {40, 4, 2, 16, 500, 0, 0, false, 0}, {150, 4, 2, 16, 0, 1, 0, false, 0}, {150, 4, 2, 16, 0, 8, 0, false, 0},
		{150, 8, 2, 16, 32, 2, 0, false, 0}, {90, 3, 1, 8, 20, 1, 0, false, 0},
		{150, 4, 2, 16, 0, 0, 2, false, 0}, {150, 4, 2, 32, 40, 0, 2, false, 0}, {90, 3, 1, 8, 20, 1, 1.5, false, 0},
		{150, 4, 2, 16, 0, 0, 0, true, 0}, {200, 2, 1, 32, 100, 0, 0, true, 0}, {150, 8, 2, 16, 0, 2, 2, true, 0}, {90, 3, 1, 8, 0, 1, 0, true, 0},
		{150, 4, 2, 16, 0, 0, 0, false, 8}, {130, 12, 4, 64, 100, 0, 0, false, 8}, {200, 6, 2, 32, 0, 0, 0, false, 16},
		{90, 3, 1, 8, 20, 1, 1.5, false, 8}, {150, 8, 2, 16, 0, 2, 2, true, 4},
	} {
		var sinks []float32
		if tc.sinks != 0 {
			sinks = make([]float32, tc.heads)
			for i := range sinks {
				sinks[i] = float32(r.NormFloat64() * tc.sinks)
			}
		}
		scale := 1 / math.Sqrt(float64(tc.hd))
		a := &Attention{Heads: tc.heads, KVHeads: tc.kvHeads, HeadDim: tc.hd, Scale: scale, Window: tc.window, Sinks: sinks, SoftCap: tc.cap}
		if tc.sparse {
			a.Keys = sparseKeys(tc.n)
		}
		if tc.alibi > 0 {
			a.Slopes = ALiBiSlopes(tc.heads, tc.alibi)
		}
		if err := a.Validate(); err != nil {
			t.Fatal(err)
		}
		q, k, v := randVec(r, tc.n*tc.heads*tc.hd), randVec(r, tc.n*tc.kvHeads*tc.hd), randVec(r, tc.n*tc.kvHeads*tc.hd)
		for i := range q {
			q[i] *= 3
		}
		want := a.Exact(q, k, v, tc.n)
		// Both paths take float32 dot products for scores: about 1e-6
		// from float64 here (measured: at most 3.8e-6).
		plain := make([]float32, len(q))
		a.attentionRef(NewContext(2), plain, q, k, v, tc.n)
		for i, w := range want {
			if math.Abs(float64(plain[i])-w) > 5e-6 {
				t.Fatalf("%+v: plain out[%d] = %v, want %v", tc, i, plain[i], w)
			}
		}
		var ref []float32
		forEachLevel(t, func(t testing.TB, l Level) {
			for _, threads := range []int{1, 3} {
				out := make([]float32, len(q))
				a.Forward(NewContext(threads), out, q, k, v, tc.n)
				for i, w := range want {
					if math.Abs(float64(out[i])-w) > 5e-6 {
						t.Fatalf("%+v level %v threads=%d: out[%d] = %v, want %v", tc, l, threads, i, out[i], w)
					}
				}
				if ref == nil {
					ref = out
				} else if !slices.Equal(ref, out) {
					t.Fatalf("%+v level %v threads=%d: differs from generic, 1 thread", tc, l, threads)
				}
			}
		})
	}
}

// TestReLUSqrMLP: ReLUSqr is max(x, 0)² rounded once, and an ungated MLP
// (Gate nil) is Down(ReLUSqr(Up·x)): against the float64 sequence on F32
// weights, with pre-activations of both signs, across more rows than one
// block of the MLP's loop would take at once if it were smaller.
func TestReLUSqrMLP(t *testing.T) {
	out := make([]float32, 4)
	ReLUSqr(out, []float32{-3, 0, 1.5, 0x1p60}, nil)
	if want := []float32{0, 0, 2.25, 0x1p120}; !slices.Equal(out, want) {
		t.Fatalf("ReLUSqr: %v, want %v", out, want)
	}
	r := rand.New(rand.NewPCG(3, 4))
	const n, in, ff = 37, 48, 40
	mat := func(rows, cols int) ([]float32, *Linear) {
		w := make([]float32, rows*cols)
		for i := range w {
			w[i] = float32(r.NormFloat64() / 4)
		}
		data := make([]byte, 4*len(w))
		for i, v := range w {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
		}
		l, err := NewLinear("w", gguf.TypeF32, cols, rows, data)
		if err != nil {
			t.Fatal(err)
		}
		return w, l
	}
	up, lu := mat(ff, in)
	down, ld := mat(in, ff)
	x := make([]float32, n*in)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	got := make([]float32, n*in)
	(&MLP{Up: lu, Down: ld, Act: ReLUSqr}).Forward(NewContext(2), got, x, n)
	worst := 0.0
	defer func() { t.Logf("worst %.2g", worst) }()
	for t0 := range n {
		h := make([]float64, ff)
		for j := range ff {
			var s float64
			for k := range in {
				s += float64(up[j*in+k]) * float64(x[t0*in+k])
			}
			h[j] = math.Max(s, 0) * math.Max(s, 0)
		}
		for j := range in {
			var s float64
			for k := range ff {
				s += float64(down[j*ff+k]) * h[k]
			}
			worst = max(worst, math.Abs(float64(got[t0*in+j])-s)/(1+math.Abs(s)))
			if d := math.Abs(float64(got[t0*in+j]) - s); d > 1e-5*(1+math.Abs(s)) {
				t.Fatalf("row %d col %d: %v, want %v", t0, j, got[t0*in+j], s)
			}
		}
	}
}

// TestGELU: the ungated GELU (tanh form) in float64 rounded once, at
// values of both signs and at ±10; ggml's table form (GGMLGELU) is within
// the float16 table's rounding of it over [-10, 10] and exact past it.
func TestGELU(t *testing.T) {
	x := []float32{-10, -3, -1, -0.5, 0, 0.5, 1, 3, 10}
	want := []float32{0, -0.0036373920817729943, -0.15880800939172324, -0.15428599017485606, 0,
		0.34571400982514394, 0.8411919906082768, 2.996362607918227, 10}
	out := make([]float32, len(x))
	GELU(out, x, nil)
	if !slices.Equal(out, want) {
		t.Fatalf("GELU: %v, want %v", out, want)
	}
	x = x[:0]
	for v := float32(-12); v <= 12; v += 1.0 / 64 {
		x = append(x, v)
	}
	ref, got := make([]float32, len(x)), make([]float32, len(x))
	GELU(ref, x, nil)
	GGMLGELU(got, x, nil)
	worst := 0.0
	for i, v := range x {
		d := math.Abs(float64(got[i] - ref[i]))
		if v <= -10 || v >= 10 {
			if got[i] != max(v, 0) {
				t.Errorf("GGMLGELU(%v) = %v, want %v", v, got[i], max(v, 0))
			}
			continue
		}
		worst = max(worst, d/(1e-3+math.Abs(float64(ref[i]))))
	}
	t.Logf("GGMLGELU vs GELU: worst relative %.2g", worst)
	if worst > 1e-3 { // measured 4.4e-4
		t.Errorf("GGMLGELU is %.2g from GELU (relative), want <= 1e-3 (the float16 table)", worst)
	}
}
