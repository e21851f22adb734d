package nn

import (
	"hash/fnv"
	"math"
	"math/rand"
	"testing"
)

// ggmlInputs are the inputs of TestGGMLArithmetic.
type ggmlInputs struct {
	trig, rmsX, rmsW, gate, up, rope []float32
	r                                *rand.Rand
}

func ggmlTestInputs() *ggmlInputs {
	r := rand.New(rand.NewSource(7))
	v := func(n int, s float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64() * s)
		}
		return x
	}
	in := &ggmlInputs{r: r}
	in.trig = make([]float32, 2000)
	for i := range in.trig {
		in.trig[i] = float32(r.Float64() * 300) // both of glibc's reductions (|x| < 120 and above)
	}
	in.rmsX, in.rmsW = v(16*256, 1), v(256, 1)
	in.gate, in.up = v(1024+5, 3), v(1024+5, 1) // a tail past the lanes of 16
	in.rope = v(100*2*64, 1)
	return in
}

// fa returns queries (n, 4 heads, 64) and f16 keys and values (n, 2
// heads, 64).
func (in *ggmlInputs) fa(n int) (q, k, v []float32) {
	q, k, v = make([]float32, n*4*64), make([]float32, n*2*64), make([]float32, n*2*64)
	for i := range q {
		q[i] = float32(in.r.NormFloat64())
	}
	for i := range k {
		k[i] = roundF16(float32(in.r.NormFloat64()))
		v[i] = roundF16(float32(in.r.NormFloat64()))
	}
	return q, k, v
}

// fnvBits hashes the bits of v (FNV-1a over little-endian float32s).
func fnvBits(v []float32) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for _, x := range v {
		u := math.Float32bits(x)
		b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		h.Write(b[:])
	}
	return h.Sum64()
}

// TestGGMLArithmetic checks the ggml mode's copies of llama.cpp's CPU
// operations (ggml.go, libm.go) against the bits llama.cpp itself gives
// on the same inputs: the hashes are of the outputs of libggml 0.27.0's
// CPU backend (Debian's llama.cpp 0.7.0 packages, the AVX-512 build) and
// of glibc's sinf, cosf and expf, computed from these inputs through ctypes
// (testdata/ggml_ops.py).
// Each operation agrees to the last bit on every element; a formula that
// is right but rounds differently (float64 cosines, a float64 RMS norm,
// exp32 in SiLU, f32 accumulation in the short-batch attention) changes
// its hash.
func TestGGMLArithmetic(t *testing.T) {
	in := ggmlTestInputs()
	c := NewContext(2)
	c.Int8, c.LlamaCPP = true, true
	check := func(what string, got []float32, want uint64) {
		t.Helper()
		if h := fnvBits(got); h != want {
			t.Errorf("%s: hash %#x, llama.cpp's %#x", what, h, want)
		}
	}
	trig := make([]float32, 2*len(in.trig))
	for i, x := range in.trig {
		trig[2*i], trig[2*i+1] = libcCosf(x), libcSinf(x)
	}
	check("glibc cosf, sinf", trig, 0x78c51ce2eea7eb)

	ex := make([]float32, len(in.trig))
	for i, x := range in.trig {
		ex[i] = libcExpf(x/3 - 95) // [-95, 5]: both sides of expf's |x| >= 88 branch
	}
	check("glibc expf", ex, 0xd0a3648d4f128451)

	rms := make([]float32, len(in.rmsX))
	(&RMSNorm{Name: "norm", W: in.rmsW, Eps: 1e-5}).Forward(c, rms, in.rmsX, 16)
	check("RMS_NORM, MUL", rms, 0xb22f9fa758bf055a)

	sw := make([]float32, len(in.gate))
	ggmlSwiGLU(sw, in.gate, in.up)
	check("SWIGLU", sw, 0x4fe3a09c42836532)

	for _, neox := range []bool{false, true} {
		x := append([]float32(nil), in.rope...)
		(&RoPE{HeadDim: 64, Dims: 64, NeoX: neox, Base: 10000, FreqScale: 1, AttnFactor: 1}).Forward(c, x, 100, 2)
		want := map[bool]uint64{false: 0xa14d2717ea527727, true: 0xf1c7ca03b864fb42}[neox]
		check(map[bool]string{false: "ROPE normal", true: "ROPE NeoX"}[neox], x, want)
	}
	for _, n := range []int{20, 100} {
		q, k, v := in.fa(n)
		o := make([]float32, len(q))
		(&Attention{Heads: 4, KVHeads: 2, HeadDim: 64, Scale: 0.125, GGMLF16: true}).Forward(c, o, q, k, v, n)
		want := map[int]uint64{20: 0xfeb3710730997143, 100: 0x46d49d639cede9f8}[n]
		check(map[int]string{20: "FLASH_ATTN_EXT, one chunk (20 rows)", 100: "FLASH_ATTN_EXT, tiled (100 rows)"}[n], o, want)
	}
}
