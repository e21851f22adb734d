package nn

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"ppl.dev/gguf"
	"ppl.dev/oracle"
	"ppl.dev/quant"
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
func (in *ggmlInputs) fa(n int) (q, k, v []float32) { return in.faDim(n, 64) }

// faDim is fa with heads of d.
func (in *ggmlInputs) faDim(n, d int) (q, k, v []float32) { return in.faHeads(n, d, 4) }

// faHeads is faDim with h query heads.
func (in *ggmlInputs) faHeads(n, d, h int) (q, k, v []float32) {
	q, k, v = make([]float32, n*h*d), make([]float32, n*2*d), make([]float32, n*2*d)
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
// CPU backend (Debian's llama.cpp 0.7.0 packages, the AVX-512 build zen4,
// and for the operations where they differ the AVX2 build haswell) and
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
		ex[i] = LibcExpf(x/3 - 95) // [-95, 5]: both sides of expf's |x| >= 88 branch
	}
	check("glibc expf", ex, 0xd0a3648d4f128451)

	// glibc's powf (not correctly rounded: float32(math.Pow) differs on
	// one of these RoPE θ scales), on RoPE's powf(base, -2/dims) for 13
	// bases and every even dims to 512, and ggml's ALiBi slopes for 1 to
	// 160 heads and 4 maximum biases (the hashes of glibc's own results).
	var pw []float32
	for _, base := range []float32{10000, 500000, 1e6, 5e6, 1e7, 150000, 40000, 75000, 8e6, 2e5, 1e5, 25000, 50000} {
		for dims := 2; dims <= 512; dims += 2 {
			pw = append(pw, libcPowf(base, float32(-2)/float32(dims)))
		}
	}
	check("glibc powf", pw, 0x90c8f7e4c8bbb418)
	var slopes []float32
	for _, b := range []float32{8, 16, 4, 12.5} {
		for h := 1; h <= 160; h++ {
			slopes = append(slopes, ALiBiSlopes(h, b)...)
		}
	}
	check("ALiBi slopes", slopes, 0x37af5bd416dfe2d6)

	rms := make([]float32, len(in.rmsX))
	(&RMSNorm{Name: "norm", W: in.rmsW, Eps: 1e-5}).Forward(c, rms, in.rmsX, 16)
	check("RMS_NORM, MUL", rms, 0xb22f9fa758bf055a)

	// The gates times 40 take both builds' e^x past their |n| > 126 and
	// > 192 branches (the AVX2 build's differ from the AVX-512 build's).
	g40 := make([]float32, len(in.gate))
	for i, g := range in.gate {
		g40[i] = g * 40
	}
	sw := make([]float32, len(in.gate))
	for _, b := range []struct {
		name string
		f    func(out, gate, up []float32)
		want [2]uint64
	}{
		{"SWIGLU", ggmlSwiGLU, [2]uint64{0x4fe3a09c42836532, 0xf33b77b62fc129d0}},
		{"SWIGLU, AVX2 build", ggmlSwiGLUAVX2, [2]uint64{0xb38cb3a4d76f39fe, 0xcfda61db885e33c5}},
		// Both builds: the same GELU table, glibc's expf.
		{"GEGLU", GGMLGeGLU, [2]uint64{0x953dfdafec74cb4e, 0xc726a6217f251967}},
		{"SWIGLU_OAI", GGMLOAISwiGLU, [2]uint64{0x78fd9068fc5d86e, 0x1863adec0b85e20f}},
	} {
		b.f(sw, in.gate, in.up)
		check(b.name, sw, b.want[0])
		b.f(sw, g40, in.up)
		check(b.name+", gates × 40", sw, b.want[1])
	}

	// Step-3.5's clamped SwiGLU (SILU, CLAMP, MUL; ggml_ops.py
	// swiglu-clamp 1.5) over the gates, then the gates times 40, as one
	// row: silu clamped above, ups both sides.
	for avx2, want := range map[bool]uint64{false: 0x9ce7677ad072b132, true: 0x5e01358045679548} {
		g, u := append(slices.Clone(in.gate), g40...), append(slices.Clone(in.up), in.up...)
		GGMLClampSwiGLU(1.5, avx2)(g, g, u)
		check(fmt.Sprintf("SILU, CLAMP, MUL (limit 1.5, AVX2 build %v)", avx2), g, want)
	}

	// Maple's SWIGLU_CLAMP (ggml_ops.py swiglu-clampf 1.5) over the same
	// row: the gate clamped above before silu, glibc's scalar expf, the
	// same bits in both builds.
	g, u := append(slices.Clone(in.gate), g40...), append(slices.Clone(in.up), in.up...)
	GGMLSwiGLUClampIn(1.5)(g, g, u)
	check("SWIGLU_CLAMP (limit 1.5)", g, 0x2445c21b024bf7e8)

	// GEGLU over every float16 value (up = 1): ggml's whole GELU table,
	// and its two branches past ±10, NaNs and infinities included.
	all := make([]float32, 1<<16)
	ones := make([]float32, 1<<16)
	for h := range all {
		all[h], ones[h] = quant.F16ToF32(uint16(h)), 1
	}
	GGMLGeGLU(all, all, ones)
	check("GEGLU, every float16 gate", all, 0x9101028ad05c27d)

	// The ungated GELU (ggml_gelu: StarCoder2's, Phi-2's, GPT-NeoX's
	// MLPs) on the gates, the gates times 40 and every float16 value.
	ge := append(append([]float32(nil), in.gate...), g40...)
	for h := range 1 << 16 {
		ge = append(ge, quant.F16ToF32(uint16(h)))
	}
	GGMLGELU(ge, ge, nil)
	check("GELU", ge, 0xbbbdb3d1a5fefbce)

	// qwen2moe's shared-expert gate, SILU then DIV, on the gates and
	// the gates times 40 (ggml_ops.py silu-div: both builds' bits).
	sd := append(append([]float32(nil), in.gate...), g40...)
	GGMLSiLUDiv(sd, sd)
	check("SILU, DIV", sd, 0x6126a505321b4071)

	// Logits in [-150, 150] through llama.cpp's final soft-cap at 30
	// (SCALE, TANH, SCALE), past tanh's saturation.
	capped := make([]float32, len(in.trig))
	for i, v := range in.trig {
		capped[i] = v - 150
	}
	GGMLSoftCap(capped, 30)
	check("SCALE, TANH, SCALE (soft-cap 30)", capped, 0x2c69bb2221a380a3)

	for _, neox := range []bool{false, true} {
		x := append([]float32(nil), in.rope...)
		(&RoPE{HeadDim: 64, Dims: 64, NeoX: neox, Base: 10000, FreqScale: 1, AttnFactor: 1}).Forward(c, x, 100, 2)
		want := map[bool]uint64{false: 0xa14d2717ea527727, true: 0xf1c7ca03b864fb42}[neox]
		check(map[bool]string{false: "ROPE normal", true: "ROPE NeoX"}[neox], x, want)
	}
	// YaRN (factor 8 over an original context of 256, OLMo 3's
	// attn_factor): the angles' ramp over pairs 0 to 13 mixed as GCC's
	// fused multiply-add does (both builds; a plain a·b + c·d differs).
	for _, neox := range []bool{false, true} {
		x := append([]float32(nil), in.rope...)
		r := &RoPE{HeadDim: 64, Dims: 64, NeoX: neox, Base: 10000, FreqScale: 0.125, ExtFactor: 1,
			AttnFactor: float64(float32(1 + 0.1*math.Log(8))), BetaFast: 32, BetaSlow: 1, OrigCtx: 256}
		r.Forward(c, x, 100, 2)
		want := map[bool]uint64{false: 0xd72d74975eee2c4f, true: 0xd839a38b00912932}[neox]
		check(map[bool]string{false: "ROPE normal, YaRN", true: "ROPE NeoX, YaRN"}[neox], x, want)
	}
	for _, n := range []int{20, 100} {
		q, k, v := in.fa(n)
		o := make([]float32, len(q))
		for _, avx2 := range []bool{false, true} {
			c.GGMLAVX2 = avx2
			(&Attention{Heads: 4, KVHeads: 2, HeadDim: 64, Scale: 0.125, GGMLF16: true}).Forward(c, o, q, k, v, n)
			want := map[[2]int]uint64{{20, 0}: 0xfeb3710730997143, {100, 0}: 0x46d49d639cede9f8,
				{20, 1}: 0xf54f941741298152, {100, 1}: 0x683c46f8ca6f3354}[[2]int{n, map[bool]int{false: 0, true: 1}[avx2]}]
			name := map[int]string{20: "FLASH_ATTN_EXT, one chunk (20 rows)", 100: "FLASH_ATTN_EXT, tiled (100 rows)"}[n]
			if avx2 {
				name += ", AVX2 build"
			}
			check(name, o, want)
		}
		c.GGMLAVX2 = false
	}
	// Gemma 2's soft-capped scores (a cap of 2, so that it bites), in
	// both kernels; heads of 24, whose tiled values end past the last
	// vector of 16; a sparse mask (DeepSeek's sparse attention), with
	// tiles of keys some rows do not see at all.
	for _, f := range ggmlFACases {
		heads := cmp.Or(f.heads, 4)
		q, k, v := in.faHeads(f.n, f.d, heads)
		o := make([]float32, len(q))
		a := &Attention{Heads: heads, KVHeads: 2, HeadDim: f.d, Scale: 0.125, SoftCap: f.cap, GGMLF16: true}
		if f.sparse {
			a.Keys = sparseKeys(f.n)
		}
		if f.maxBias > 0 {
			a.Slopes = ALiBiSlopes(heads, f.maxBias)
		}
		if f.sinks {
			a.Sinks = make([]float32, heads)
			for h := range a.Sinks {
				a.Sinks[h] = float32(1 + 2*in.r.NormFloat64())
			}
		}
		for b, avx2 := range []bool{false, true} {
			c.GGMLAVX2 = avx2
			a.Forward(c, o, q, k, v, f.n)
			check(fmt.Sprintf("FLASH_ATTN_EXT, %d rows of heads of %d, soft-cap %v, sparse %v, avx2 %v", f.n, f.d, f.cap, f.sparse, avx2), o, f.want[b])
		}
		c.GGMLAVX2 = false
	}
}

// sparseKeys is ggml_ops.py's fa SPARSE mask as a KeySet: row i sees key
// j <= i unless (7i + 3j) mod 5 = 0, and rows from 80 on none of the keys
// [64, 128) but their own (whole tiles of 64 keys a row does not see).
func sparseKeys(n int) *KeySet {
	s := NewKeySet(n)
	for i := range n {
		for j := range i + 1 {
			if j == i || (i*7+j*3)%5 != 0 && !(i >= 80 && j >= 64 && j < 128) {
				s.Add(i, j)
			}
		}
	}
	return s
}

// ggmlFACases are TestGGMLArithmetic's attention cases past its first
// ones: rows, head size, soft-cap and llama.cpp's hashes (zen4, haswell).
var ggmlFACases = []struct {
	n, d    int
	cap     float64
	sparse  bool    // sparseKeys' mask
	heads   int     // query heads (2 KV heads); 0: 4
	maxBias float32 // > 0: ALiBi's slopes for heads (ALiBiSlopes)
	want    [2]uint64
	sinks   bool // a sink per head, 1 + 2·N(0, 1) of the inputs' generator
}{
	{20, 64, 2, false, 0, 0, [2]uint64{0x87e7c8aa89867372, 0xf52cfc8c1a0de1fd}, false},
	{100, 64, 2, false, 0, 0, [2]uint64{0x6c234f2f4fe03ea6, 0x58a480ff7fe9b1b4}, false},
	{100, 24, 0, false, 0, 0, [2]uint64{0x90a008050af38af8, 0x90653cd43c9f0aa3}, false},
	{20, 64, 0, true, 0, 0, [2]uint64{0xcd7337138ed93e10, 0x6e611eb331a41ad4}, false},
	{150, 64, 0, true, 0, 0, [2]uint64{0x6d79da584381aae2, 0x2e220adbd47e3893}, false},
	// ALiBi (6 heads: 4 with m0's powers, 2 with m1's), in both kernels,
	// and over 2100 rows, whose distances past 2048 the F16 mask rounds.
	{20, 64, 0, false, 6, 8, [2]uint64{0xab543cb5150d937e, 0xe88d5055acdebc09}, false},
	{100, 64, 0, false, 6, 8, [2]uint64{0x8693a3f5f4d407a6, 0xbbba4fd5b78da40}, false},
	{2100, 16, 0, false, 6, 8, [2]uint64{0x9f905ffc25bd62f0, 0x94b73b2fbd9ed166}, false},
	// Sinks (gpt-oss, hy_v4): 1 + 2·N(0, 1) per head, above many rows'
	// highest score, in both kernels.
	{20, 64, 0, false, 0, 0, [2]uint64{0x150d519e9371e08a, 0x37c381d4f0aeb5c1}, true},
	{100, 64, 0, false, 0, 0, [2]uint64{0x6525e294eb9b874a, 0x8be417f9dc2699a6}, true},
}

// productHash multiplies l by n rows of rand.NewSource(1) normal values,
// the activations of the libggml runs that pinned TestGGMLProducts' and
// TestGGMLProductsF32's hashes, and hashes the output.
func productHash(c *Context, l *Linear, n int) uint64 {
	r := rand.New(rand.NewSource(1))
	x := make([]float32, n*l.In)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	y := make([]float32, n*l.Out)
	l.Forward(c, y, x, n)
	return fnvBits(y)
}

// TestGGMLProductsF32 checks F32 matrices' products (panelF32) against
// libggml's MUL_MAT (ggml_ops.py's mm on a GGUF holding these weights):
// 24 rows of In normal values (sd 0.1, rand.NewSource(In)) times 5 rows of
// rand.NewSource(1) normal values, for row lengths that take only the
// lanes, only the tail, or both, in each build's lane width.
func TestGGMLProductsF32(t *testing.T) {
	const out, n = 24, 5
	c := NewContext(2)
	c.Int8, c.LlamaCPP = true, true
	for _, tc := range []struct {
		in   int
		avx2 bool
		want uint64
	}{
		{100, false, 0xbb1e2decd0e5f060}, {200, false, 0x60f3e8baecc017a1}, {32, false, 0x632de5f0ae98f272},
		{100, true, 0xc0d4a7ad828a2496}, {200, true, 0x52ec253ed08c2ff}, {32, true, 0x1da7464abe406263},
	} {
		r := rand.New(rand.NewSource(int64(tc.in)))
		data := make([]byte, 4*out*tc.in)
		for i := 0; i < out*tc.in; i++ {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(r.NormFloat64()*0.1)))
		}
		l, err := NewLinear("w", gguf.TypeF32, tc.in, out, data)
		if err != nil {
			t.Fatal(err)
		}
		c.GGMLAVX2 = tc.avx2
		if h := productHash(c, l, n); h != tc.want {
			t.Errorf("F32, rows of %d (AVX2 build: %v): hash %#x, libggml's %#x", tc.in, tc.avx2, h, tc.want)
		}
	}
}

// TestGGMLProducts checks the ggml modes' matrix products (ggmlPanels and
// the types ggml repacks, which take panelInt8) against libggml's MUL_MAT
// on the oracle models' and zoo's tensors: the hashes are of what libggml
// 0.27.0's CPU backend computes for x, n rows of rand.NewSource(1) normal
// values, through testdata/ggml_ops.py's mm (with the repacking buffer for
// Q4_0, IQ4_NL, Q4_K, Q2_K and MXFP4, as llama.cpp loads them). Its
// AVX-512 (zen4) and AVX2 (haswell) builds give the same bits for each of
// these, but for Q2_K, which the AVX2 build does not repack.
// n < 8 takes the vec_dot kernels of the types the tiled kernel takes from
// 8 rows on (Q6_K, the i-quants); an odd n also takes the repacked types'
// single-row kernels for the rows past the last multiple of 4.
//
// F16 and BF16 weights are ggml_vec_dot_f16's and _bf16's per output in
// both builds (Debian's libggml has no llamafile GEMM; the AVX-512 build's
// BF16 hashes are those of _mm512_dpbf16_ps on an AMD EPYC, Zen 5).
func TestGGMLProducts(t *testing.T) {
	dir := oracle.Require(t)
	cases := []struct {
		stem, tensor string
		n            int
		want         uint64
		avx2         bool // the AVX2 build's choice of kernel, where it differs
	}{
		{"tiny-llama-spm-q8_0", "blk.0.attn_q.weight", 64, 0xb9a765944b7a66cb, false},
		{"tiny-llama-spm-mxfp4", "blk.0.ffn_down.weight", 64, 0xb01ee37853ef3b3a, false},
		{"tiny-llama-spm-q4_k_m", "blk.0.attn_q.weight", 64, 0xf507d106f8117406, false},  // Q4_K
		{"tiny-llama-spm-q4_k_m", "blk.0.ffn_down.weight", 7, 0x8fdfbcf45cd022e, false},  // Q4_K
		{"tiny-llama-spm-q4_k_m", "blk.1.ffn_down.weight", 64, 0x3f0c4e52d0a221c, false}, // Q6_K
		{"tiny-llama-spm-q4_k_m", "blk.1.attn_v.weight", 5, 0x1ab58f1afb181e08, false},   // Q6_K
		{"tiny-llama-spm-iq2_xxs", "blk.0.attn_q.weight", 64, 0x402522578d6271d3, false},
		{"tiny-llama-spm-iq2_xxs", "blk.0.ffn_down.weight", 5, 0x149102632bd33524, false},
		{"tiny-llama-spm-iq3_s", "blk.0.attn_q.weight", 64, 0x9a00bf6952f3cb0e, false},
		{"tiny-llama-spm-iq3_s", "blk.0.ffn_down.weight", 5, 0xf825d36d3026d7ca, false},
		{"tiny-llama-spm-iq1_m", "blk.0.attn_q.weight", 64, 0x7e56642cdae831fc, false},
		{"tiny-llama-spm-iq1_m", "blk.0.ffn_down.weight", 5, 0xb1715486ca172a56, false},
		{"tiny-llama-spm-nvfp4", "blk.0.attn_q.weight", 64, 0x9e986ddb893449fc, false},
		{"tiny-llama-spm-nvfp4", "blk.0.ffn_down.weight", 5, 0x1451a807b4e02ff9, false},
		{"quant-zoo", "Q4_0", 7, 0xf23ae1854ae132e9, false},
		{"quant-zoo", "IQ4_NL", 7, 0xe77dc20ffc93f252, false},
		{"quant-zoo-2", "IQ2_XXS", 7, 0x45b9408bb9b0cfd5, false},
		{"quant-zoo", "Q5_0", 64, 0xcfb1246ce140495c, false},
		{"quant-zoo", "Q5_0", 5, 0x8bf533499012ecc0, false},
		{"quant-zoo", "Q6_K", 9, 0xdfff79f7c0e01f50, false},
		{"quant-zoo", "Q4_1", 64, 0xe37872722be9be35, false},
		{"quant-zoo", "Q5_1", 5, 0x27361ac799d68936, false},
		{"quant-zoo-2", "IQ2_XS", 8, 0x83fbfb2f5222bdbb, false},
		{"quant-zoo-2", "IQ2_XS", 5, 0xacfa11c7d006a941, false},
		{"quant-zoo-2", "IQ2_S", 8, 0x4e0f3d7580187f0a, false},
		{"quant-zoo-2", "IQ2_S", 5, 0xe7cfa1b730a91415, false},
		{"quant-zoo-2", "IQ3_XXS", 8, 0xa51864c2b2e3f4c8, false},
		{"quant-zoo-2", "IQ3_XXS", 5, 0xc0055d6f974f5cff, false},
		{"quant-zoo-2", "IQ1_S", 8, 0x15c68b641837fbc2, false},
		{"quant-zoo-2", "IQ1_S", 5, 0xb03bad9d9e865c4f, false},
		{"quant-zoo", "IQ4_XS", 8, 0xc4c91f555cd046b9, false},
		{"quant-zoo", "IQ4_XS", 5, 0x83cd9871dcf98076, false},
		{"quant-zoo", "Q2_K", 8, 0xcf8368b0c3353852, false},
		{"quant-zoo", "Q2_K", 5, 0xd67a815a2537c89f, false},
		{"quant-zoo", "Q3_K", 8, 0xba5014469fba9375, false},
		{"quant-zoo", "Q3_K", 5, 0x3dbcdfbc3f97eed4, false},
		{"quant-zoo", "Q5_K", 8, 0x5d73652d758f878b, false},
		{"quant-zoo", "Q5_K", 5, 0x1ba4b19419a2cde6, false},
		{"quant-zoo", "Q2_K", 8, 0x5b7c01b32d8c5e55, true}, // not repacked by the AVX2 build
		{"quant-zoo-2", "TQ2_0", 8, 0x29ba8441a3b9b798, false},
		{"quant-zoo-2", "TQ2_0", 3, 0xca9580336e3bd5, false},
		{"quant-zoo-2", "TQ1_0", 8, 0x29ba8441a3b9b798, false}, // the zoo's TQ1_0 and TQ2_0 hold the same values
		{"quant-zoo-2", "TQ1_0", 3, 0xca9580336e3bd5, false},
		{"quant-zoo", "F16", 64, 0x35f8344879728505, false},
		{"quant-zoo", "F16", 3, 0x1901e8e10d3cc18f, false},
		{"quant-zoo", "F16", 8, 0xa326a03067fac40f, true},
		{"quant-zoo", "BF16", 64, 0x48bfc8f4379e1be0, false},
		{"quant-zoo", "BF16", 3, 0x1ad57681b9e898f8, false},
		{"quant-zoo", "BF16", 64, 0xcb97f30faffa6a8d, true},
		{"quant-zoo", "BF16", 3, 0x4e310ec19e85cccf, true},
	}
	c := NewContext(2)
	c.Int8, c.LlamaCPP = true, true
	for _, tc := range cases {
		path := oracle.Model(dir, tc.stem)
		if strings.HasPrefix(tc.stem, "quant-zoo") {
			path = filepath.Join(dir, "zoo", tc.stem+".gguf")
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		ten, ok := f.Tensor(tc.tensor)
		if !ok {
			t.Fatalf("%s: no tensor %s", tc.stem, tc.tensor)
		}
		l, err := NewLinear(tc.tensor, ten.Type, int(ten.Shape[0]), int(ten.Shape[1]), f.Data(ten))
		if err != nil {
			t.Fatal(err)
		}
		c.GGMLAVX2 = tc.avx2
		if h := productHash(c, l, tc.n); h != tc.want {
			t.Errorf("%s %s (%v), %d rows: hash %#x, libggml's %#x", tc.stem, tc.tensor, l.Type, tc.n, h, tc.want)
		}
		f.Close()
	}
	// The types ggml repacks, in matrices it does not repack: the first 36
	// rows of a zoo tensor (not a multiple of 8), of their first 15 blocks
	// of 32 too (an odd number: the last one past IQ4_NL's and MXFP4's
	// pairs of lanes).
	crops := []struct {
		stem, tensor string
		blocks, n    int
		want         uint64
		avx2         bool
	}{
		{"quant-zoo", "Q4_0", 16, 8, 0xc6822767120393a4, false},
		{"quant-zoo", "IQ4_NL", 16, 3, 0x133968dff08c90a2, false},
		{"quant-zoo-2", "MXFP4", 16, 8, 0xf7c8ebaed949471, false},
		{"quant-zoo", "IQ4_NL", 15, 8, 0x57c91bf4b309b3ab, false},
		{"quant-zoo-2", "MXFP4", 15, 3, 0xbb866078ba44c3be, false},
		{"quant-zoo", "Q4_K", 16, 8, 0xa6efddfaa80e18cd, false}, // the tiled order with minima; both builds
		// ggml_vec_dot (fewer than 8 activation rows) of the K-quants
		// ggml repacks, where it does not; both builds.
		{"quant-zoo", "Q4_K", 16, 5, 0x9fd6288485d27a86, false},
		{"quant-zoo", "Q4_K", 16, 1, 0xef1b1cc889e6d670, false},
		{"quant-zoo", "Q2_K", 16, 5, 0xd3730e60f31067da, false},
		{"quant-zoo", "Q2_K", 16, 8, 0x2167dc8480b80120, false}, // tiled, in the AVX-512 build too
		// BF16 rows whose length leaves elements past the last step of 64
		// (AVX-512) or 32 (AVX2), added in float64.
		{"quant-zoo", "BF16", 15, 5, 0xbff7464eab4e2629, false},
		{"quant-zoo", "BF16", 3, 2, 0x8f13e4b9b57cfe13, false},
		{"quant-zoo", "BF16", 15, 5, 0xe29e4ed6a6ffc1eb, true},
		{"quant-zoo", "BF16", 3, 2, 0x636f4bf3c78b555b, true},
	}
	for _, tc := range crops {
		f, err := gguf.Open(filepath.Join(dir, "zoo", tc.stem+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		ten, _ := f.Tensor(tc.tensor)
		src := f.Data(ten)
		rb := len(src) / int(ten.Shape[1])
		nb := int(ten.Shape[0]) / 32
		var data []byte
		for r := range 36 {
			data = append(data, src[r*rb:r*rb+rb*tc.blocks/nb]...)
		}
		l, err := NewLinear(tc.tensor, ten.Type, 32*tc.blocks, 36, data)
		if err != nil {
			t.Fatal(err)
		}
		c.GGMLAVX2 = tc.avx2
		if h := productHash(c, l, tc.n); h != tc.want {
			t.Errorf("%s %s (%v), 36 rows of %d blocks, %d activation rows (AVX2 build: %v): hash %#x, libggml's %#x", tc.stem, tc.tensor, l.Type, tc.blocks, tc.n, tc.avx2, h, tc.want)
		}
		f.Close()
	}
}

// bf16Edges is TestGGMLBF16Edges's matrix and activations: 64 rows of
// 512 bf16 weights N(0, 1)·2^-63 (rows 0, 7, 14, ... ·2^-128, subnormal;
// rows 3, 12, 21, ... ·2^-3) and 5 rows of activations N(0, 1)·2^-63
// (the second ·2^-2), from rand.NewSource(63).
func bf16Edges() (data []byte, x []float32) {
	const out, in, n = 64, 512, 5
	r := rand.New(rand.NewSource(63))
	data = make([]byte, 2*out*in)
	for row := range out {
		scale := 0x1p-63
		switch {
		case row%7 == 0:
			scale = 0x1p-191
		case row%9 == 3:
			scale = 0x1p-66
		}
		for e := range in {
			binary.LittleEndian.PutUint16(data[2*(row*in+e):], quant.F32ToBF16(float32(r.NormFloat64()*scale)))
		}
	}
	x = make([]float32, n*in)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 0x1p-63)
		if i/in == 1 {
			x[i] *= 0x1p-2
		}
	}
	return data, x
}

// TestGGMLBF16Edges checks BF16 products whose terms and partial sums lie
// about float32's smallest normal (2^-126), where vdpbf16ps reads
// subnormal inputs as zero and flushes a subnormal FMA result but not a
// subnormal product, against libggml's MUL_MAT (ggml_ops.py's mm on a GGUF
// holding bf16Edges's matrix, its x.bin the activations) in both builds:
// the AVX-512 build's hash is of what an AMD EPYC (Zen 5) computed.
func TestGGMLBF16Edges(t *testing.T) {
	data, x := bf16Edges()
	l, err := NewLinear("w", gguf.TypeBF16, 512, 64, data)
	if err != nil {
		t.Fatal(err)
	}
	c := NewContext(2)
	c.Int8, c.LlamaCPP = true, true
	for _, tc := range []struct {
		avx2 bool
		want uint64
	}{{false, 0xe24e0c85dbb07121}, {true, 0x5b5ae3b805a6ab05}} {
		c.GGMLAVX2 = tc.avx2
		y := make([]float32, 5*64)
		l.Forward(c, y, x, 5)
		if h := fnvBits(y); h != tc.want {
			t.Errorf("AVX2 build: %v: hash %#x, libggml's %#x", tc.avx2, h, tc.want)
		}
	}
}

// TestGGMLExpfs checks ggmlExpfs at every level against ggmlExpf and
// ggmlExpfAVX2 (the one-lane copies of ggml_v_expf in the AVX-512 and AVX2
// builds that TestGGMLArithmetic pins to libggml's bits) on random and
// edge inputs: both sides of the |n| > 192 branch,
// overflow and underflow, infinities, NaN, zeros, subnormals.
func TestGGMLExpfs(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	x := make([]float32, 4096+7, 4096+7+8192)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 40)
	}
	// A sweep of [-135, 135): subnormal results below -87.3, overflow
	// above 88.7, and |n| crossing 192 near ±133.1.
	for i := range 8192 {
		x = append(x, -135+270*float32(i)/8192)
	}
	edge := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 88.7, 88.73, 89, -87.3, -103.9, -104, 133.1, 133.2, -133.1, -133.2,
		200, -200, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 3.4e38, -3.4e38}
	copy(x, edge)
	for _, avx2 := range []bool{false, true} {
		want := make([]float32, len(x))
		for i, v := range x {
			want[i] = ggmlExpf(v)
			if avx2 {
				want[i] = ggmlExpfAVX2(v)
			}
		}
		forEachLevel(t, func(t testing.TB, l Level) {
			got := make([]float32, len(x))
			ggmlExpfs(got, x, avx2)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
					t.Fatalf("level %v, AVX2 build %v: ggmlExpfs(%v) = %v, one lane %v", l, avx2, x[i], got[i], want[i])
				}
			}
		})
	}
}

// TestTiledKernels checks every level's tiled kernels against tiledGeneric
// on random panels and activations, with extreme scales and weights
// (integer scales of ±127, weights 0 and 255) among them, without and with
// minima (6-bit, as Q2_K's to Q5_K's, 63 among them); and the narrow
// kernels (weights below 64) on such weights, with the largest int16 sums
// they form: a super-block of weights 63 against activations all -127 in
// one row and +127 in another; and the kernels in llama.cpp's AMX order
// against tiledGeneric's.
func TestTiledKernels(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	const k = 768 // three super-blocks
	c := NewContext(1)
	x := make([]float32, 4*k)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for i := range 256 {
		x[i], x[k+i] = 1, -1 // quantized to -127 each, and to +127 after the row's first
	}
	x[k] = 1
	a := &qacts{}
	c.quantizeActs(a, x, 4, k, 256)
	for _, g := range []int{32, 16} {
		ng := k / g
		w := make([]uint32, k/4*32)
		for i := range w {
			w[i] = r.Uint32()
		}
		w[0], w[1] = 0, 0xffffffff
		narrowW := make([]uint32, len(w))
		for i := range w {
			narrowW[i] = w[i] & 0x3f3f3f3f
			if i < 64*32 { // the first super-block
				narrowW[i] = 0x3f3f3f3f
			}
		}
		ls, mins := make([]int32, ng*32), make([]int32, ng*32)
		for i := range ls {
			ls[i], mins[i] = int32(r.Intn(255))-127, int32(r.Intn(64))
		}
		ls[0], ls[1], mins[2] = 127, -127, 63
		d0, dm := make([]float32, k/256*32), make([]float32, k/256*32)
		for i := range d0 {
			d0[i], dm[i] = float32(r.NormFloat64())*1e-3, float32(r.NormFloat64())*1e-3
		}
		xsOff := a.xs32Off
		if g == 16 {
			xsOff = a.xs16Off
		}
		for _, hasMin := range []bool{false, true} {
			ki := tiledKernels(g, hasMin)
			pm, pdm := &mins[0], &dm[0]
			if !hasMin {
				pm, pdm = nil, nil
			}
			for _, v := range []struct{ narrow, amx bool }{{false, false}, {true, false}, {false, true}} {
				narrow := v.narrow
				w, negoff := w, -128
				if narrow {
					w, negoff = narrowW, -32
				}
				for m := 1; m <= 4; m++ {
					want := make([]float32, 4*32)
					ref := generic.tiled[ki]
					if v.amx {
						ref = generic.tiledAMX[ki]
					}
					ref[m-1](&a.buf[0], a.rec, &w[0], &ls[0], pm, &d0[0], pdm, k/32, negoff, &want[0], 32, a.dOff, xsOff)
					forEachLevel(t, func(t testing.TB, l Level) {
						kerns := kern.tiled[ki]
						if narrow {
							kerns = kern.tiledNarrow[ki]
						}
						if v.amx {
							kerns = kern.tiledAMX[ki]
						}
						if len(kerns) < m {
							return // this level has no such kernels, or takes fewer rows at a time
						}
						got := make([]float32, 4*32)
						lw := levelCodes(w)
						kerns[m-1](&a.buf[0], a.rec, &lw[0], &ls[0], pm, &d0[0], pdm, k/32, negoff, &got[0], 32, a.dOff, xsOff)
						for i := range got[:m*32] {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("g=%d min %v narrow %v AMX %v m=%d level %v: out[%d] = %v, generic %v", g, hasMin, narrow, v.amx, m, l, i, got[i], want[i])
							}
						}
					})
				}
			}
		}
	}
}

// levelCodes returns a panel of biased codes as the level in use takes
// them: flipped where kernels.flipBias says so (a copy), else w.
func levelCodes(w []uint32) []uint32 {
	if !kern.flipBias {
		return w
	}
	f := slices.Clone(w)
	flipCodes(f)
	return f
}

// TestKRepackedKernels checks every level's repacked Q4_K and Q2_K
// kernels against kRepackedGeneric on random weights (nibbles, or Q2_K's 2
// bits), scales and minima (6-bit, their extremes among them), and on the
// largest integer sums: a super-block of activations all -127 against rows
// of nibbles all 15 (the AVX2 kernels' int16 sums reach -30480 there).
func TestKRepackedKernels(t *testing.T) {
	r := rand.New(rand.NewSource(6))
	const k = 768
	c := NewContext(1)
	x := make([]float32, 2*k)
	for i := range x {
		x[i] = float32(r.NormFloat64())
		if i < 256 {
			x[i] = 1 // quantized to -127 each
		}
	}
	a := &qacts{}
	c.quantizeActs(a, x, 2, k, 256)
	if q := int8(a.buf[0]); q != -127 {
		t.Fatalf("activation 0 quantized to %d, want -127", q)
	}
	for vi, v := range kRepackedVariants {
		mask := uint32(0x0f0f0f0f)
		if v.g == 16 {
			mask = 0x03030303
		}
		w := make([]uint32, k/4*32)
		for i := range w {
			w[i] = r.Uint32() & mask
			if i%32 < 8 || i%32 == 31 {
				w[i] = mask
			}
		}
		ng := k / v.g
		ls, mins := make([]int32, ng*32), make([]int32, ng*32)
		for i := range ls {
			ls[i], mins[i] = int32(r.Intn(64)), int32(r.Intn(64))
		}
		ls[0], mins[1] = 63, 63
		dw, dm := make([]float32, k/256*32), make([]float32, k/256*32)
		for i := range dw {
			dw[i], dm[i] = float32(r.NormFloat64())*1e-3, float32(r.NormFloat64())*1e-3
		}
		xsOff := a.xs32Off
		if v.g == 16 {
			xsOff = a.xs16Off
		}
		for m := 1; m <= 2; m++ {
			want := make([]float32, 2*32)
			generic.kRepacked[vi][m-1](&a.buf[0], a.rec, &w[0], &ls[0], &mins[0], &dw[0], &dm[0], k/32, &want[0], 32, a.dOff, xsOff)
			forEachLevel(t, func(t testing.TB, l Level) {
				if len(kern.kRepacked[vi]) == 0 {
					return
				}
				got := make([]float32, 2*32)
				kern.kRepacked[vi][m-1](&a.buf[0], a.rec, &w[0], &ls[0], &mins[0], &dw[0], &dm[0], k/32, &got[0], 32, a.dOff, xsOff)
				for i := range got[:m*32] {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("groups of %d, %d a pair, m=%d level %v: out[%d] = %v, generic %v", v.g, v.pair, m, l, i, got[i], want[i])
					}
				}
			})
		}
	}
}

// TestDotKernels checks the kernels of ggml's float dot products (the
// AVX-512 and AVX2 builds' lanes: kern.dotF32, dotF32x8, and kern.dotF16 on
// 1 to 4 rows) against
// dotLanesGeneric, bit for bit, at every level that has them, on random
// rows and on adversarial ones: values of mixed magnitudes (1e-30 to 1e30,
// so that lanes cancel) against signed zeros and f16's extremes.
func TestDotKernels(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	const n = 640
	rows := [][2][]float32{}
	for range 20 {
		x, y := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i], y[i] = float32(r.NormFloat64()), roundF16(float32(r.NormFloat64()))
		}
		rows = append(rows, [2][]float32{x, y})
	}
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i] = float32(math.Pow(10, float64(r.Intn(61)-30)) * r.NormFloat64())
		y[i] = []float32{1, -1, 0, float32(math.Copysign(0, -1)), 0x1p-24, 65504, -2}[i%7] // f16 values: the smallest subnormal, the largest
	}
	rows = append(rows, [2][]float32{x, y})
	forEachLevel(t, func(t testing.TB, l Level) {
		for ri, row := range rows {
			x, y := row[0], row[1]
			for _, m := range []int{32, 64, 96, 128, 576, n} {
				for _, k := range []struct {
					name string
					f    func(x, w *float32, n int) float32
					avx2 bool
				}{{"the AVX-512 build's", kern.dotF32, false}, {"the AVX2 build's", kern.dotF32x8, true}} {
					if k.f == nil || m%64 != 0 && !k.avx2 {
						continue
					}
					want, _ := dotLanesGeneric(x[:m], y[:m], k.avx2)
					if got := k.f(&x[0], &y[0], m); math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("level %v row %d, %d elements: %s kernel %v, dotLanesGeneric %v", l, ri, m, k.name, got, want)
					}
				}
				if kern.dotF16[0] == nil || m%64 != 0 {
					continue
				}
				// kern.dotF16: y with 1 to 4 rows of x (this row's and the
				// next ones').
				for rs := 1; rs <= 4; rs++ {
					xs := make([]float32, rs*m)
					for i := range rs {
						copy(xs[i*m:], rows[(ri+i)%len(rows)][0][:m])
					}
					var out [4]float64
					kern.dotF16[rs-1](&y[0], &xs[0], m, m, &out[0])
					for i := range rs {
						want, _ := dotLanesGeneric(xs[i*m:(i+1)*m], y[:m], false)
						if got := out[i]; got != float64(want) {
							t.Fatalf("level %v row %d, %d elements, kern.dotF16 of %d rows: row %d %v, dotLanesGeneric %v", l, ri, m, rs, i, got, want)
						}
					}
				}
			}
		}
	})
}

// TestDotBF16Kernels checks ggml_vec_dot_bf16's kernels (kern.dotBF16 on
// 1 to 4 activation rows in bf16Pairs's order, kern.dotBF16Raw on them as
// bf16 values, dotBF16x8 through dotBF16; with the elements past them) against dotBF16Generic, bit for bit, at
// every level, for both builds' orders, on random bf16 rows and on
// adversarial ones: mixed magnitudes (whose sums round, where a product of
// two bf16 values is short enough that most sums do not), subnormal bf16 values
// (read as zero by the AVX-512 build), products and sums about the
// smallest normal float32 (a subnormal result flushed there, a subnormal
// product not), signed zeros and products that overflow.
func TestDotBF16Kernels(t *testing.T) {
	r := rand.New(rand.NewSource(10))
	const n = 608 // 9 steps of 64 and 32 more
	bf := func(v float64) float32 { return quant.BF16ToF32(quant.F32ToBF16(float32(v))) }
	var rows [][2][]float32
	for i := range 24 {
		w, x := make([]float32, n), make([]float32, n)
		for e := range w {
			w[e], x[e] = bf(r.NormFloat64()*0.05), bf(r.NormFloat64())
			switch i % 4 {
			case 1: // magnitudes from 2^-16 to 2^16: sums that round
				w[e] = bf(math.Ldexp(r.NormFloat64(), r.Intn(33)-16))
			case 2: // subnormal bf16 values, zeros of both signs, tiny products
				switch e % 5 {
				case 0:
					w[e] = math.Float32frombits(uint32(r.Intn(0x80)) << 16)
				case 1:
					x[e] = math.Float32frombits(0x80000000 | uint32(r.Intn(0x80))<<16)
				case 2:
					w[e], x[e] = bf(1e-20*r.NormFloat64()), bf(1e-19*r.NormFloat64())
				case 3:
					w[e] = float32(math.Copysign(0, -1))
				}
			case 3: // products and sums about float32's smallest normal, 2^-126
				w[e], x[e] = bf(0x1p-63*r.NormFloat64()), bf(0x1p-63*r.NormFloat64())
			}
		}
		rows = append(rows, [2][]float32{w, x})
	}
	w, x := make([]float32, n), make([]float32, n)
	for e := range w { // products that overflow, all of one sign
		w[e], x[e] = bf(1e30*(1+r.Float64())), bf(1e10*(1+r.Float64()))
	}
	rows = append(rows, [2][]float32{w, x})
	forEachLevel(t, func(t testing.TB, l Level) {
		for ri, row := range rows {
			for _, k := range []int{0, 32, 64, 96, 128, 576, n} {
				w := row[0][:k]
				want := dotBF16Generic(w, row[1][:k], true)
				if got := dotBF16(w, row[1][:k], true); math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("level %v row %d, %d elements, the AVX2 build's: dotBF16 %v, dotBF16Generic %v", l, ri, k, got, want)
				}
				// The AVX-512 build's on rows in order (kern.dotBF16Seq).
				want = dotBF16Generic(w, row[1][:k], false)
				if got := dotBF16(w, row[1][:k], false); math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("level %v row %d, %d elements, the AVX-512 build's in order: dotBF16 %v, dotBF16Generic %v", l, ri, k, got, want)
				}
				if kern.dotBF16[0] == nil {
					continue
				}
				// The AVX-512 build's, as panelHalf runs it: w with 1 to 4
				// rows of x (this row's and the next ones'), in pairs order;
				// and as panelBF16Raw runs it, by VDPBF16PS on the bf16
				// values where the level has it.
				bits := func(v []float32) []uint16 {
					b := make([]uint16, len(v))
					for e, f := range v {
						b[e] = uint16(math.Float32bits(f) >> 16)
					}
					return b
				}
				wb := bits(w)
				for m := 1; m <= 4; m++ {
					wp, x := make([]float32, k), make([]float32, m*k)
					bf16Pairs(wp, w)
					var xb []uint16
					for i := range m {
						xi := rows[(ri+i)%len(rows)][1][:k]
						bf16Pairs(x[i*k:(i+1)*k], xi)
						xb = append(xb, bits(xi)...)
					}
					var out, raw [4]float64
					kern.dotBF16[m-1](unsafe.SliceData(wp), unsafe.SliceData(x), k, k&^63, &out[0])
					if kern.dotBF16Raw[0] != nil {
						kern.dotBF16Raw[m-1](unsafe.SliceData(wb), unsafe.SliceData(xb), k, k&^63, &raw[0])
					}
					for i := range m {
						for e := k &^ 63; e < k; e++ {
							out[i] += float64(wp[e] * x[i*k+e])
							raw[i] += float64(quant.BF16ToF32(wb[e]) * quant.BF16ToF32(xb[i*k+e]))
						}
						want := dotBF16Generic(w, rows[(ri+i)%len(rows)][1][:k], false)
						if got := float32(out[i]); math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("level %v row %d, %d elements, the AVX-512 build's, %d rows: row %d %v, dotBF16Generic %v", l, ri, k, m, i, got, want)
						}
						if got := float32(raw[i]); kern.dotBF16Raw[0] != nil && math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("level %v row %d, %d elements, VDPBF16PS, %d rows: row %d %v, dotBF16Generic %v", l, ri, k, m, i, got, want)
						}
					}
				}
			}
		}
	})
}

// TestBF16Panels checks BF16 products in the AVX-512 build's order
// through Linear.Forward at every level: plain Go (panelHalf with
// dotBF16Generic), the FMAs of the AVX-512 level (panelHalf on rows in
// bf16Pairs's order) and VDPBF16PS (panelBF16Raw) where the CPU has it,
// bit for bit; matrices of 40 rows (a full panel and a part) of 64 inputs
// and of 608 (steps of 64 and a tail of 32), random with subnormal and
// zero weights among them, times 1 to 6 activation rows (the 4-row
// kernels and the rest).
func TestBF16Panels(t *testing.T) {
	r := rand.New(rand.NewSource(13))
	const out = 40
	for _, in := range []int{64, 608} {
		data := make([]byte, 2*in*out)
		for i := range in * out {
			v := quant.F32ToBF16(float32(r.NormFloat64() * 0.05))
			switch i % 7 {
			case 3:
				v = uint16(r.Intn(0x80)) // subnormal
			case 5:
				v = 0x8000 // -0
			}
			data[2*i], data[2*i+1] = byte(v), byte(v>>8)
		}
		l, err := NewLinear("w", gguf.TypeBF16, in, out, data)
		if err != nil {
			t.Fatal(err)
		}
		const n = 6
		x := make([]float32, n*in)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		for m := 1; m <= n; m++ {
			levelsAgree(t, fmt.Sprintf("%d inputs, %d rows", in, m), l, x[:m*in], m, 1, true, true)
		}
	}
}

// TestTernaryKernels checks panelTernary's kernels (kern.ternary: VNNI's,
// and AVX2's on 8-row slices) against its plain lanes, bit for bit, at
// every level that has them: TQ1_0 and TQ2_0 matrices of 40 rows (a full
// panel and a part) of 3 super-blocks, random and with every weight +1 or
// every weight -1 (the integer lanes' extremes), times 1 to 9 activation
// rows, random and of one sign at the largest codes.
func TestTernaryKernels(t *testing.T) {
	r := rand.New(rand.NewSource(12))
	const in, out = 768, 40
	for _, typ := range []gguf.Type{gguf.TypeTQ1_0, gguf.TypeTQ2_0} {
		rb, _ := typ.RowSize(in)
		for wi, wv := range []func() float32{
			func() float32 { return float32(r.NormFloat64()) },
			func() float32 { return 1 },
			func() float32 { return -1 },
		} {
			w := make([]float32, in*out)
			for i := range w {
				w[i] = wv()
			}
			data := make([]byte, int(rb)*out)
			if err := quant.Quantize(typ, w, data); err != nil {
				t.Fatal(err)
			}
			l, err := NewLinear("w", typ, in, out, data)
			if err != nil {
				t.Fatal(err)
			}
			for xi := range 2 {
				const n = 9
				x := make([]float32, n*in)
				for i := range x {
					x[i] = float32(r.NormFloat64())
					if xi == 1 { // one sign, most at the largest code
						x[i] = float32(1 + r.Intn(2))
					}
				}
				for m := 1; m <= n; m++ {
					levelsAgree(t, fmt.Sprintf("%v weights %d activations %d, %d rows", typ, wi, xi, m), l, x[:m*in], m, 1, true, true)
				}
			}
		}
	}
}

// TestLanesKernels checks the lanes kernels (kern.lanes: VNNI's, and
// AVX2's on 8-row slices; kern.q2 and kern.pairs, whose blocks alternate
// between two sets of lanes in runs of 2 and 1) against panelLanes's plain
// lanes, bit for bit, at every level that has them, on a panel of 32
// weight rows: for each offset of the formats, weights over their whole
// range (0 and the extremes included) and activations in [-127, 127],
// scales per 32 and 16.
func TestLanesKernels(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	const nb = 24
	k := 32 * nb
	forEachLevel(t, func(t testing.TB, l Level) {
		for _, kc := range []struct {
			name       string
			kl         lanesFunc
			group, run int // run: blocks of 32 per set of lanes, 0 for one set
		}{
			{"lanes", kern.lanes[0], 32, 0}, {"lanes", kern.lanes[1], 16, 0},
			{"q2", kern.q2, 32, 2}, {"pairs", kern.pairs, 32, 1},
		} {
			kl, group := kc.kl, kc.group
			if kl == nil {
				continue
			}
			for _, off := range []int{0, 1, 4, 8, 16, 32, 128} {
				hi := 2*off - 1
				if off == 0 {
					hi = 31
				} else if off == 128 {
					hi = 255
				}
				// The record: the activations' codes, their scales per
				// 32 at doff, the sums of each 4 at xs4off.
				doff, xs4off := k, k+4*nb
				rec := make([]byte, xs4off+k)
				x := rec[:k]
				q := make([]byte, 32*k)
				for i := range q {
					q[i] = byte(r.Intn(hi + 1))
				}
				for i := range x {
					x[i] = byte(int8(r.Intn(255) - 127))
				}
				for i := 0; i < 32; i++ { // extremes in the first block
					x[i] = byte(int8([]int{127, -127}[i/2%2]))
					for row := range 32 {
						q[row*k+i] = byte([]int{0, hi}[(i+row)%2])
					}
				}
				d := unsafe.Slice((*float32)(unsafe.Pointer(&rec[doff])), nb)
				for i := range d {
					d[i] = float32(r.ExpFloat64() * 0.01)
				}
				xs4 := unsafe.Slice((*int32)(unsafe.Pointer(&rec[xs4off])), k/4)
				for i := range xs4 {
					xs4[i] = int32(int8(x[4*i])) + int32(int8(x[4*i+1])) + int32(int8(x[4*i+2])) + int32(int8(x[4*i+3]))
				}
				ng := k / group
				sc := make([]float32, 32*ng)
				for i := range sc {
					sc[i] = float32(r.NormFloat64())
				}
				var want [32]float32
				per := 32 / group
				for row := range 32 {
					var lanes [2][8]float32
					for b := range nb {
						set := 0
						if kc.run > 0 {
							set = b / kc.run % 2
						}
						for s := range 8 {
							lanes[set][s] = fma32(sc[row*ng+per*b+s*per/8]*d[b], float32(lanePair(q[row*k:], x, 32*b+4*s, 4, off)), lanes[set][s])
						}
					}
					if kc.run > 0 {
						for s := range 8 {
							lanes[0][s] += lanes[1][s]
						}
					}
					want[row] = hsum8(&lanes[0])
				}
				panel := make([]uint32, 32*k/4)
				packCodes(panel, unsafe.Slice((*uint32)(unsafe.Pointer(&q[0])), 32*k/4), k/4, 32, kern.flipBias)
				ps := make([]float32, 32*ng)
				pack32(ps, sc, ng, 32)
				var got [32]float32
				kl(&rec[0], &panel[0], &ps[0], nb, -off, &got[0], doff, xs4off)
				for row := range 32 {
					if math.Float32bits(got[row]) != math.Float32bits(want[row]) {
						t.Fatalf("level %v, %s kernel, scales per %d, offset %d: row %d %v, want %v", l, kc.name, group, off, row, got[row], want[row])
					}
				}
			}
		}
	})
}

// TestLaneSums checks laneSums at every level against laneSums256 on
// random weights and activations over their whole ranges, and on the
// extremes (every product 2¹⁵·2⁷ of one sign, the int32 lanes' largest
// sums; alternating signs), for 1 to 5 blocks.
func TestLaneSums(t *testing.T) {
	r := rand.New(rand.NewSource(56))
	type input struct {
		name string
		w    func(i int) int16
		x    func(i int) int8
	}
	inputs := []input{
		{"random", func(int) int16 { return int16(r.Uint32()) }, func(int) int8 { return int8(r.Uint32()) }},
		{"K-quant range", func(int) int16 { return int16(r.Intn(2*8064+1) - 8064) }, func(int) int8 { return int8(r.Intn(255) - 127) }},
		{"max positive", func(int) int16 { return -32768 }, func(int) int8 { return -128 }},
		{"max negative", func(int) int16 { return -32768 }, func(int) int8 { return 127 }},
		{"alternating", func(i int) int16 { return int16(32767 - 65535*(i%2)) }, func(i int) int8 { return int8(127 - 255*(i/3%2)) }},
	}
	forEachLevel(t, func(t testing.TB, l Level) {
		for _, in := range inputs {
			for n := 1; n <= 5; n++ {
				w, x := make([]int16, 256*n), make([]int8, 256*n)
				for i := range w {
					w[i], x[i] = in.w(i), in.x(i)
				}
				got := make([][8]int32, n)
				laneSums(got, w, x)
				for b := range n {
					if want := laneSums256(w[256*b:], x[256*b:]); got[b] != want {
						t.Fatalf("%v %s, %d blocks: block %d lanes %v, reference %v", l, in.name, n, b, got[b], want)
					}
				}
			}
		}
	})
}

// TestK4RowScales checks the Q4_K and Q5_K row scales, four bytes at a
// time, against k4Scales's per-field decoding on random super-blocks.
func TestK4RowScales(t *testing.T) {
	r := rand.New(rand.NewSource(44))
	for _, bytes := range []int{144, 176} {
		row := make([]byte, 5*bytes)
		for trial := range 200 {
			r.Read(row)
			ls, m := make([]int32, 40), make([]int32, 40)
			d0, dm := make([]float32, 5), make([]float32, 5)
			k4RowScales(bytes)(row, ls, d0, m, dm)
			for b := range 5 {
				blk := row[bytes*b:]
				sc, mn := k4Scales(blk[4:16])
				d := quant.F16ToF32(uint16(blk[0]) | uint16(blk[1])<<8)
				dmin := quant.F16ToF32(uint16(blk[2]) | uint16(blk[3])<<8)
				if [8]int32(ls[8*b:]) != sc || [8]int32(m[8*b:]) != mn || !sameBits(d0[b], d) || !sameBits(dm[b], dmin) {
					t.Fatalf("%d-byte blocks, trial %d, block %d: %v %v %v %v, k4Scales %v %v %v %v", bytes, trial, b, ls[8*b:8*b+8], m[8*b:8*b+8], d0[b], dm[b], sc, mn, d, dmin)
				}
			}
		}
	}
}

// TestMinSumsKernel checks kern.minSums (addMinSums's chain of FMAs per
// row) against fma32's chain, bit for bit, at every level that has it: 32
// rows of random minima and sums, and rows whose terms cancel (1e-30 to
// 1e30, both signs, zeros of both signs).
func TestMinSumsKernel(t *testing.T) {
	r := rand.New(rand.NewSource(12))
	const nb = 40
	m, s := make([]float32, 32*nb), make([]float32, nb)
	for i := range m {
		m[i] = float32(r.NormFloat64())
		if i%32 >= 16 {
			m[i] = float32(math.Pow(10, float64(r.Intn(61)-30)) * r.NormFloat64())
		}
		if i%32 == 31 {
			m[i] = []float32{0, float32(math.Copysign(0, -1))}[i/32%2]
		}
	}
	for i := range s {
		s[i] = float32(r.NormFloat64() * 100)
	}
	var want [32]float32
	for row := range 32 {
		for b := range nb {
			want[row] = fma32(m[b*32+row], s[b], want[row])
		}
	}
	forEachLevel(t, func(t testing.TB, l Level) {
		if kern.minSums == nil {
			return
		}
		var got [32]float32
		kern.minSums(&m[0], &s[0], nb, &got[0])
		for row := range 32 {
			if math.Float32bits(got[row]) != math.Float32bits(want[row]) {
				t.Fatalf("level %v: row %d %v, want %v", l, row, got[row], want[row])
			}
		}
	})
}

// TestGGMLSiLUDiv: silu(x)/x within 2 ulp of the sigmoid (1/(1+e^-x) in
// float64) on random and extreme gates, 0.5 at 0 (llama.cpp's 0/0), 0
// and 1 where the sigmoid saturates.
func TestGGMLSiLUDiv(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	x := []float32{0, 1e-30, -1e-30, 1e-7, 20, -20, 80, -80, 88.7, -87, -103, -104, 1e4, -1e4}
	for range 1000 {
		x = append(x, float32(r.NormFloat64()*8))
	}
	y := make([]float32, len(x))
	GGMLSiLUDiv(y, x)
	for i, v := range x {
		want := float32(1 / (1 + math.Exp(-float64(v))))
		ulp := math.Abs(float64(y[i])-float64(want)) / float64(math.Nextafter32(want, 2)-want)
		if ulp > 2 || math.IsNaN(float64(y[i])) {
			t.Errorf("GGMLSiLUDiv(%g) = %g, sigmoid %g (%.1f ulp)", v, y[i], want, ulp)
		}
	}
}

// TestXIELU: Apertus's activation. Forward against libggml 0.27.0's XIELU
// (ggml_ops.py xielu 0.8 0.8 0.5 -1e-6: the same bits in the zen4 and
// haswell builds, which fuse both branches' last multiply-add) on 4000
// normal inputs of sd 3 from rand.NewSource(11), its transformed
// parameters included; and within 2 ulp (of the largest term) of the
// float64 Ref, at 0, past Eps, and where the negative branch saturates.
func TestXIELU(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	x := make([]float32, 4000)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 3)
	}
	p := NewXIELU(0.8, 0.8, 0.5, -1e-6)
	got := make([]float32, len(x))
	p.Forward(got, x)
	if h := fnvBits(got); h != 0x19cec88f261e9765 {
		t.Errorf("XIELU: hash %#x, llama.cpp's %#x", h, uint64(0x19cec88f261e9765))
	}
	x = append(x, 0, -1e-7, -1e-6, -2e-6, 1e-30, -30, -100, 100)
	got, want := make([]float32, len(x)), make([]float32, len(x))
	p.Forward(got, x)
	p.Ref(want, x)
	for i, v := range x {
		// 2 ulp of the largest of the result and the terms summed (the
		// negative branch cancels near its root).
		m := math.Max(math.Abs(float64(want[i])), math.Abs(float64(p.Beta*v)))
		if v <= 0 {
			m = math.Max(m, math.Abs((math.Expm1(math.Min(float64(v), float64(p.Eps)))-float64(v))*float64(p.AlphaN)))
		} else {
			m = math.Max(m, float64(p.AlphaP)*float64(v)*float64(v))
		}
		ulp := math.Abs(float64(got[i]-want[i])) / math.Max(m*0x1p-23, 0x1p-149)
		if ulp > 2 {
			t.Errorf("xielu(%g) = %g, float64 %g (%.1f ulp of %g)", v, got[i], want[i], ulp, m)
		}
	}
}

// TestGGMLMatMulAttention pins the matrix-product attention of llama.cpp
// without flash attention (Attention.MatMul: Grok's) against libggml
// 0.27.0's bits on the same inputs (testdata/ggml_ops.py mmattn: KQ and
// KQV as F16 MUL_MATs over the keys padded to 256, SOFT_MAX_EXT with the
// causal mask between; with a soft-cap of 2 Grok's SCALE, TANH, SCALE),
// in both builds, over 20, 100 and 300 rows (past one padded block of
// 256 keys): 4 heads of 64 reading 2 KV heads, scale 0.125.
func TestGGMLMatMulAttention(t *testing.T) {
	in := &ggmlInputs{r: rand.New(rand.NewSource(5))}
	want := map[int][2][2]uint64{ // rows -> [cap 0, 2] -> [zen4, haswell]
		20:  {{0x19b8f60950e4a3d5, 0x38b45c907e53f1d9}, {0xcc7db6bbe5407e45, 0xac0fa9ae45aafcf3}},
		100: {{0xff5814bef926418, 0xd3f8c5a05fa1306a}, {0xb4f3bd3ad7da95b0, 0x80af232017b42cbf}},
		300: {{0x679da5f8fb774637, 0xafa6586071ddccf9}, {0x92ed398dbdab9201, 0xbdb5e9337d217209}},
	}
	for _, n := range []int{20, 100, 300} {
		q, k, v := in.fa(n)
		for ci, cp := range []float64{0, 2} {
			for bi, avx2 := range []bool{false, true} {
				c := NewContext(2)
				c.GGMLAVX2 = avx2
				o := make([]float32, len(q))
				(&Attention{Heads: 4, KVHeads: 2, HeadDim: 64, Scale: 0.125, SoftCap: cp, GGMLF16: true, MatMul: true}).Forward(c, o, q, k, v, n)
				if h := fnvBits(o); h != want[n][ci][bi] {
					t.Errorf("%d rows, soft-cap %v, avx2 %v: hash %#x, llama.cpp's %#x", n, cp, avx2, h, want[n][ci][bi])
				}
			}
		}
	}
}

// TestScalarAttention: GGMLScalarAttention (Granite Switch's router as
// ggml-cpu's F16 flash attention computes it) against the float64
// ScalarAttention on random keys and values: within 6e-3 of the values'
// largest magnitude (the f16 accumulator over 700 keys; measured 2.9e-3). Exact
// where the router needs it: one adapter among other tokens reads its
// slot, none reads 0, two read their mean exactly (1.5, where float64's
// 1.5 − 1e-13 would round down).
func TestScalarAttention(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	worst := 0.0
	for _, gain := range []float64{0.3, 2, 15} {
		n := 700
		k, v := make([]float32, n), make([]float32, n)
		for i := range k {
			k[i] = float32(gain * r.NormFloat64())
			v[i] = float32(r.Intn(9) - 4)
		}
		got, want := make([]float32, n), make([]float32, n)
		GGMLScalarAttention(got, k, v)
		ScalarAttention(want, k, v)
		for i := range got {
			worst = max(worst, math.Abs(float64(got[i]-want[i]))/4)
		}
	}
	if worst > 6e-3 {
		t.Errorf("worst |Δ| / max |v| = %.3g, want <= 6e-3", worst)
	}
	t.Logf("worst |Δ| / max |v| = %.3g", worst)
	router := func(slots ...float32) []float32 { // keys ±15, the output at the end
		k, v := make([]float32, len(slots)), slices.Clone(slots)
		for i, s := range slots {
			k[i] = -15
			if s != 0 {
				k[i] = 15
			}
		}
		out := make([]float32, len(slots))
		GGMLScalarAttention(out, k, v)
		return out
	}
	for _, c := range []struct {
		slots []float32
		want  float32
	}{
		{[]float32{0, 0, 0}, 0},
		{[]float32{0, 0, 2, 0, 0, 0}, 2},
		{[]float32{2, 0, 0}, 2},
		{[]float32{0, 1, 0, 2, 0}, 1.5},
	} {
		if out := router(c.slots...); out[len(out)-1] != c.want {
			t.Errorf("router over %v: %v, want %v", c.slots, out, c.want)
		}
	}
}

// TestGGMLSoftMax checks ggmlSoftMax (ggml_vec_soft_max_f32) at every
// level against its arithmetic written out with the scalar references
// (ggmlExpf or ggmlExpfAVX2 of each difference, reduce16 or hsum8 of each
// lane group, glibc's expf past them): the same bits, for lengths with
// and without a tail, maxima at, above and below the row's, differences
// past both builds' |n| > 126 and > 192 branches, zeros of both signs,
// infinities and a NaN.
func TestGGMLSoftMax(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	x := make([]float32, 4096+7)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 30)
	}
	copy(x[40:], []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 88.7, -87.3, -103.9, -104, 133.2, -133.2,
		-200, float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.NaN()), 3.4e38, -3.4e38})
	for _, avx2 := range []bool{false, true} {
		lanes := map[bool]int{false: 16, true: 8}[avx2]
		for _, n := range []int{0, 5, 16, 64, 100, len(x)} {
			for _, m := range []float32{slices.Max(x[:max(n, 1)]), 0, 50, -3.4e38} {
				want := make([]float32, n)
				var wsum float64
				nv := n / lanes * lanes
				for i := 0; i < nv; i += lanes {
					var e [16]float32
					for l := range lanes {
						if avx2 {
							e[l] = ggmlExpfAVX2(x[i+l] - m)
						} else {
							e[l] = ggmlExpf(x[i+l] - m)
						}
					}
					copy(want[i:], e[:lanes])
					if avx2 {
						wsum += float64(hsum8((*[8]float32)(e[:8])))
					} else {
						wsum += float64(reduce16(&e))
					}
				}
				for i := nv; i < n; i++ {
					want[i] = LibcExpf(x[i] - m)
					wsum += float64(want[i])
				}
				forEachLevel(t, func(t testing.TB, l Level) {
					got := make([]float32, n)
					sum := ggmlSoftMax(got, x[:n], m, avx2)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
							t.Fatalf("level %v, AVX2 build %v, n %d, max %v: y[%d] = %v, the reference %v", l, avx2, n, m, i, got[i], want[i])
						}
					}
					if math.Float64bits(sum) != math.Float64bits(wsum) && !(sum != sum && wsum != wsum) {
						t.Fatalf("level %v, AVX2 build %v, n %d, max %v: sum %v, the reference %v", l, avx2, n, m, sum, wsum)
					}
				})
			}
		}
	}
}

// TestScaleMax checks every level's scaleMax against the plain loop on
// random rows and rows of zeros of both signs, subnormals, infinities and
// products that overflow: the same products, bit for bit, and the same
// maximum (as a value: the vector kernels may take -0 for +0).
func TestScaleMax(t *testing.T) {
	r := rand.New(rand.NewSource(8))
	edge := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 3.4e38, -3.4e38, float32(math.Inf(1)), float32(math.Inf(-1))}
	for _, n := range []int{16, 64, 4096} {
		for trial := range 20 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64() * 100)
				if trial%2 == 1 {
					x[i] = edge[r.Intn(len(edge))]
				}
			}
			if trial == 4 {
				clear(x)
				x[r.Intn(n)] = float32(math.Copysign(0, -1))
			}
			scale := []float32{0.125, 1, -0.5, 1e-30, 7.3}[trial%5]
			want := make([]float32, n)
			wm := scaleMaxGeneric(want, x, scale)
			forEachLevel(t, func(t testing.TB, l Level) {
				got := make([]float32, n)
				if m := scaleMax(got, x, scale); m != wm {
					t.Fatalf("level %v, n %d, trial %d: max %v, the plain loop's %v", l, n, trial, m, wm)
				}
				if !slicesEqualBits(got, want) {
					t.Fatalf("level %v, n %d, trial %d: products differ from the plain loop's", l, n, trial)
				}
			})
		}
	}
}

// TestGGMLTiledPlain checks ggmlTiled's vector path for rows without
// ALiBi, soft-cap or a KeySet (scaleMax, maskedMax), and its loop for a
// soft-cap alone, against its general loop, which a KeySet of the same
// causal (windowed, chunked) keys takes: the same bits at every level and
// in both builds, over 200 and 130 rows (tiles cut by the diagonal, by a
// window of 70 and 64 keys and by chunks of 48 and 96), heads of 64 and
// 24, with and without sinks, without and with a soft-cap of 0.7 (most
// scores capped) and 50 (Gemma 2's).
func TestGGMLTiledPlain(t *testing.T) {
	in := ggmlTestInputs()
	for _, f := range []struct {
		n, d, window, chunk int
		sinks               bool
		softCap             float64
	}{{200, 64, 0, 0, false, 0}, {200, 64, 70, 0, false, 0}, {130, 24, 64, 0, false, 0}, {130, 64, 0, 0, true, 0},
		{200, 64, 0, 48, false, 0}, {200, 64, 70, 96, true, 0}, {200, 64, 70, 0, false, 0.7}, {130, 64, 0, 48, true, 50}} {
		q, k, v := in.faHeads(f.n, f.d, 4)
		plain := &Attention{Heads: 4, KVHeads: 2, HeadDim: f.d, Scale: 0.125, Window: f.window, Chunk: f.chunk, SoftCap: f.softCap, GGMLF16: true}
		if f.sinks {
			plain.Sinks = []float32{0.5, 3, -1, 2}
		}
		general := *plain
		general.Chunk = 0
		general.Keys = NewKeySet(f.n)
		for i := range f.n {
			for j := range i + 1 {
				if (f.window == 0 || j > i-f.window) && (f.chunk == 0 || j >= i/f.chunk*f.chunk) {
					general.Keys.Add(i, j)
				}
			}
		}
		for _, avx2 := range []bool{false, true} {
			c := NewContext(2)
			c.Int8, c.LlamaCPP, c.GGMLAVX2 = true, true, avx2
			forEachLevel(t, func(t testing.TB, l Level) {
				want, got := make([]float32, len(q)), make([]float32, len(q))
				general.Forward(c, want, q, k, v, f.n)
				plain.Forward(c, got, q, k, v, f.n)
				if !slicesEqualBits(got, want) {
					t.Fatalf("%+v, AVX2 build %v, level %v: the vector path differs from the general loop", f, avx2, l)
				}
			})
		}
	}
}

// TestLibcExpfs checks LibcExpf against glibc 2.43's expf (the sid
// chroot's; by hand, all 2^32 inputs agree) on the inputs where rounding
// x·N/ln 2 before its two uses would differ, and on the 2^25 inputs of
// 32 <= |x| < 128 (blocks 0x42 and 0xc2 of the bit patterns: the hashes
// of glibc's results); then LibcExpfs at every level against LibcExpf,
// bit for bit: every 251st float32 bit pattern (17 million, both signs,
// NaNs, infinities and subnormals among them) and the neighbours of
// glibc's bounds (±88, the overflow and underflow thresholds), each in
// both halves of a kernel's lanes and in the scalar tail.
func TestLibcExpfs(t *testing.T) {
	for x, want := range map[float32]uint32{32.564632: 0x56fc9f1c, -63.09946: 0x11fa2993} {
		if got := math.Float32bits(LibcExpf(x)); got != want {
			t.Errorf("LibcExpf(%v) = %#08x, glibc's %#08x", x, got, want)
		}
	}
	block := make([]float32, 1<<24)
	for top, want := range map[uint32]uint64{0x42: 0x06ddcb56b924719c, 0xc2: 0x1ca8d298aeb2104a} {
		for j := range block {
			block[j] = LibcExpf(math.Float32frombits(top<<24 | uint32(j)))
		}
		if h := fnvBits(block); h != want {
			t.Errorf("LibcExpf over the bit patterns %#02x000000 to %#02xffffff: hash %#x, glibc's %#x", top, top, h, want)
		}
	}
	var x []float32
	for u := uint64(0); u < 1<<32; u += 251 {
		x = append(x, math.Float32frombits(uint32(u)))
	}
	for _, b := range []float32{88, -88, expfHigh, expfLow, 0, 1e-45, 127} {
		for _, v := range []float32{b, -b} {
			u := math.Float32bits(v)
			for d := uint32(0); d < 9; d++ {
				x = append(x, math.Float32frombits(u-4+d))
			}
		}
	}
	x = append(x, 1, 2, 3) // a tail past the lanes of 16
	want := make([]float32, len(x))
	for i, v := range x {
		want[i] = LibcExpf(v)
	}
	forEachLevel(t, func(t testing.TB, l Level) {
		got := make([]float32, len(x))
		LibcExpfs(got, x)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("level %v: LibcExpfs(%v [%#08x]) = %v [%#08x], LibcExpf's %v [%#08x]", l, x[i], math.Float32bits(x[i]), got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
		}
	})
}

// TestHalfShortRows checks F16 and BF16 products of rows shorter than a
// vector block, which are all ggml's scalar tail (float32 products summed
// in float64 in order) and which panelHalf runs four rows' chains at a
// time (qwen4exp's hyper-connections' up-projections, 16 inputs wide):
// bit for bit at every level against the generic one's per-output dot
// products, in both builds' orders, for widths under and past the AVX2
// build's block of 32 and matrices of 42 rows (not a multiple of 4), times
// 1 to 6 activation rows.
func TestHalfShortRows(t *testing.T) {
	r := rand.New(rand.NewSource(14))
	const out, n = 42, 6
	for _, typ := range []gguf.Type{gguf.TypeF16, gguf.TypeBF16} {
		for _, in := range []int{8, 16, 31, 40, 63} {
			data := make([]byte, 2*in*out)
			for i := range in * out {
				f := float32(r.NormFloat64() * 0.3)
				v := quant.F32ToF16(f)
				if typ == gguf.TypeBF16 {
					v = quant.F32ToBF16(f)
				}
				data[2*i], data[2*i+1] = byte(v), byte(v>>8)
			}
			l, err := NewLinear("w", typ, in, out, data)
			if err != nil {
				t.Fatal(err)
			}
			x := make([]float32, n*in)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			for _, avx2 := range []bool{false, true} {
				for m := 1; m <= n; m++ {
					var ref []float32
					forEachLevel(t, func(t testing.TB, lv Level) {
						c := NewContext(2)
						c.Int8, c.LlamaCPP, c.GGMLAVX2 = true, true, avx2
						y := make([]float32, m*out)
						l.Forward(c, y, x[:m*in], m)
						if ref == nil {
							ref = y
						} else if !slicesEqualBits(ref, y) {
							t.Fatalf("%v, %d inputs, %d rows, avx2 %v, level %v: differs from generic", typ, in, m, avx2, lv)
						}
					})
				}
			}
		}
	}
}

// TestGGMLProductsQ1Q2 checks Q1_0's and Q2_0's products (panelQ1_0,
// panelLanes' blocks of 64 in two sets) against libggml 0.27.0's MUL_MAT
// (ggml_ops.py's mm on a GGUF holding these weights, both builds giving
// these same bits): 24 rows of In normal values (sd 0.1,
// rand.NewSource(In)) quantized by quant's quantizers (llama.cpp's bytes,
// quant.TestQ1Q2AsLibggml) times n rows of rand.NewSource(1) normal
// values. Rows of 1, 3, 8 and 64 and In of 128, 384 and 1024 all matched
// in both builds; here a few, at every kernel level (the Go loops, and
// q1LanesVNNI and q2LanesVNNI with VNNI).
func TestGGMLProductsQ1Q2(t *testing.T) {
	const out = 24
	c := NewContext(2)
	c.Int8, c.LlamaCPP = true, true
	for _, tc := range []struct {
		typ   gguf.Type
		in, n int
		want  uint64
	}{
		{gguf.TypeQ1_0, 128, 1, 0xbe6c0d91c6986825}, {gguf.TypeQ1_0, 384, 3, 0x268df8c7bc1bb76d},
		{gguf.TypeQ1_0, 1024, 64, 0xdb364caf07ec5e0f}, {gguf.TypeQ2_0, 128, 8, 0xacf0ff0c8201f9af},
		{gguf.TypeQ2_0, 384, 3, 0x2175b18485a362f7}, {gguf.TypeQ2_0, 1024, 64, 0x461fd9ed0c6daae5},
	} {
		r := rand.New(rand.NewSource(int64(tc.in)))
		w := make([]float32, out*tc.in)
		for i := range w {
			w[i] = float32(r.NormFloat64() * 0.1)
		}
		data := make([]byte, out*tc.in/tc.typ.BlockSize()*tc.typ.TypeSize())
		if err := quant.Quantize(tc.typ, w, data); err != nil {
			t.Fatal(err)
		}
		l, err := NewLinear("w", tc.typ, tc.in, out, data)
		if err != nil {
			t.Fatal(err)
		}
		for _, lv := range Levels() {
			prev := SetLevel(lv)
			for _, avx2 := range []bool{false, true} {
				c.GGMLAVX2 = avx2
				if h := productHash(c, l, tc.n); h != tc.want {
					t.Errorf("%v, rows of %d, %d activation rows (AVX2 build: %v, %v kernels): hash %#x, libggml's %#x", tc.typ, tc.in, tc.n, avx2, lv, h, tc.want)
				}
			}
			SetLevel(prev)
		}
	}
}
