package kvcache

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/quant"
)

func TestE4M3(t *testing.T) {
	nan := float32(math.NaN())
	for _, tc := range []struct {
		x    float32
		want uint8
	}{
		{0, 0x00},
		{float32(math.Copysign(0, -1)), 0x80},
		{1, 0x38},
		{-1.5, 0xbc},
		{0.0625, 0x18},      // 2^-4
		{0x1p-6, 0x08},      // smallest normal
		{0x1p-9, 0x01},      // smallest subnormal
		{0x1p-10, 0x00},     // half of it: tie to even (0)
		{3 * 0x1p-10, 0x02}, // 1.5 subnormal steps: tie to even (2)
		{0x1.2p0, 0x39},     // 1.125 exact
		{0x1.1p0, 0x38},     // 1.0625: tie between 1 and 1.125, to even (1)
		{0x1.3p0, 0x3a},     // 1.1875: tie between 1.125 and 1.25, to even (1.25)
		{240, 0x77},
		{448, 0x7e},
		{449, 0x7e},  // saturates
		{464, 0x7e},  // tie with 480 (not a value): saturates
		{1e30, 0x7e}, // saturates
		{float32(math.Inf(-1)), 0xfe},
		{nan, 0x7f},
	} {
		if got := E4M3(tc.x); got != tc.want {
			t.Errorf("E4M3(%v) = %#02x, want %#02x", tc.x, got, tc.want)
		}
	}
	// Every value round-trips; NaN decodes to NaN.
	for b := range 256 {
		v := E4M3Value(uint8(b))
		if b&0x7f == 0x7f {
			if v == v {
				t.Errorf("E4M3Value(%#02x) = %v, want NaN", b, v)
			}
			continue
		}
		if got := E4M3(v); got != uint8(b) {
			t.Errorf("E4M3(E4M3Value(%#02x) = %v) = %#02x", b, v, got)
		}
	}
	if E4M3Value(0x7e) != 448 || E4M3Value(0x01) != 0x1p-9 || E4M3Value(0xb8) != -1 {
		t.Error("E4M3Value decodes 448, 2^-9 or -1 wrong")
	}
}

func TestE2M1(t *testing.T) {
	for _, tc := range []struct {
		x    float32
		want uint8
	}{
		{0, 0x0}, {0.25, 0x0}, {0.26, 0x1}, {0.5, 0x1},
		{0.75, 0x2}, // tie between 0.5 and 1: to even (1.0 = 0b010)
		{1, 0x2}, {1.25, 0x2}, {1.5, 0x3}, {1.75, 0x4}, {2, 0x4},
		{2.5, 0x4}, {3, 0x5}, {3.5, 0x6}, {4, 0x6}, {5, 0x6}, {5.01, 0x7}, {6, 0x7},
		{7, 0x7}, {1e9, 0x7}, // saturates
		{-0.5, 0x9}, {-6, 0xf}, {-100, 0xf},
	} {
		if got := E2M1(tc.x); got != tc.want {
			t.Errorf("E2M1(%v) = %#x, want %#x", tc.x, got, tc.want)
		}
	}
	want := []float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6}
	for b, w := range want {
		if E2M1Value(uint8(b)) != w {
			t.Errorf("E2M1Value(%#x) = %v, want %v", b, E2M1Value(uint8(b)), w)
		}
	}
}

func roundTrip(c Codec, x []float32, tokens, heads, hd int) ([]float32, *Block) {
	y := slices.Clone(x)
	var b Block
	RoundTrip(c, &b, y, tokens, heads, hd)
	return y, &b
}

// TestExactValues pins each format on hand-picked inputs.
func TestExactValues(t *testing.T) {
	x := []float32{127, 1, -0.5, 0.25, 1.5, -63.5, 2.5, 0}
	for _, tc := range []struct {
		c    Codec
		want []float32
	}{
		{F32{}, x},
		{F16{}, x},
		{BF16{}, x},
		// d = 127/127 = 1: rne(-0.5) = -0, rne(0.25) = 0, rne(1.5) = 2, rne(-63.5) = -64, rne(2.5) = 2.
		{Int8{}, []float32{127, 1, 0, 0, 2, -64, 2, 0}},
	} {
		got, _ := roundTrip(tc.c, x, 1, 1, len(x))
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: element %d = %v, want %v", tc.c.Name(), i, got[i], tc.want[i])
			}
		}
	}
	// FP8 with amax 448 has scale 1: E4M3 values stay, others round to
	// 3 mantissa bits, ties to even: 100 (steps of 8 in [64, 128)) is a tie
	// between 96 and 104: 96; -13.5 (steps of 1 in [8, 16)) a tie: -14;
	// 0.3 (steps of 1/32 in [0.25, 0.5)) -> 0.3125.
	y := []float32{448, 1, -3, 0.015625, 0, 100, -13.5, 0.3}
	want := []float32{448, 1, -3, 0.015625, 0, 96, -14, 0.3125}
	if got, b := roundTrip(FP8{}, y, 1, 1, 8); !slices.Equal(got, want) || getF32(b.Scales) != 1 {
		t.Errorf("fp8 values: got %v (scale %v), want %v", got, getF32(b.Scales), want)
	}
	// bf16 keeps 8 significant bits: 1 + 2^-8 is a tie, to even (1).
	if got, _ := roundTrip(BF16{}, []float32{1 + 0x1p-8, 1 + 0x1p-7}, 1, 1, 2); got[0] != 1 || got[1] != 1+0x1p-7 {
		t.Errorf("bf16 rounding: got %v", got)
	}
}

// TestQ4MatchesGGML: k8v4's values are ggml Q4_0 blocks, byte for byte, for
// heads that are whole blocks.
func TestQ4MatchesGGML(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	tokens, heads, hd := 3, 2, 64
	x := make([]float32, tokens*heads*hd)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	var b Block
	Q4{}.Encode(&b, x, tokens, heads, hd)
	want := make([]byte, len(x)/32*18)
	if err := quant.Quantize(gguf.TypeQ4_0, x, want); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b.Data, want) {
		t.Fatal("Q4 bytes differ from ggml's Q4_0")
	}
	got := make([]float32, len(x))
	Q4{}.Decode(&b, got)
	deq := make([]float32, len(x))
	if err := quant.Dequantize(gguf.TypeQ4_0, want, deq); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, deq) {
		t.Fatal("Q4 decode differs from ggml's Q4_0 dequantization")
	}
	// A 16-element head is one short block: its high nibbles hold 8 (zero).
	Q4{}.Encode(&b, x[:16], 1, 1, 16)
	for _, q := range b.Data[2:18] {
		if q>>4 != 8 {
			t.Fatalf("short block high nibble %d, want 8", q>>4)
		}
	}
}

func TestNVFP4Values(t *testing.T) {
	// amax 2688 = 6·448 gives g = 1. Block 0: bamax 2688 -> s = e4m3(448),
	// e = 448: 2688 -> 6, 672 = 1.5·448 -> 1.5, 100/448 ≈ 0.22 -> 0.
	// Block 1: bamax 6 -> s = e4m3(1), e = 1: E2M1 values stay exact.
	x := make([]float32, 32)
	x[0], x[1], x[2] = 2688, -672, 100
	copy(x[16:], []float32{6, -4, 3, 2, 1.5, 1, 0.5, 0, -0.5, 5})
	got, b := roundTrip(NVFP4{}, x, 1, 1, 32)
	if b.TensorScale != 1 || b.Scales[0] != 0x7e || b.Scales[1] != 0x38 {
		t.Fatalf("scales: tensor %v, blocks %#x %#x", b.TensorScale, b.Scales[0], b.Scales[1])
	}
	want := slices.Clone(x)
	want[2] = 0
	want[16+9] = 4 // 5 is a tie between 4 and 6: to even (4)
	if !slices.Equal(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	if b.Data[0] != 0x7|0xb<<4 { // element 0: 6 = 0x7; element 1: -1.5 = 0xb
		t.Fatalf("packed byte 0 = %#02x", b.Data[0])
	}
}

// TestRoundTripBounds checks each format's error on Gaussian data with
// outliers against its rounding bound.
func TestRoundTripBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	tokens, heads, hd := 7, 3, 48 // 48: a short last block for q4 and nvfp4 checks
	x := make([]float32, tokens*heads*hd)
	for i := range x {
		x[i] = float32(r.NormFloat64())
		if i%97 == 0 {
			x[i] *= 30
		}
	}
	headAmax := func(i int) float64 {
		g := i / hd
		return float64(amax(x[g*hd : (g+1)*hd]))
	}
	blockAmax := func(i, bs int) float64 {
		g, j := i/hd, i%hd
		lo := g*hd + j/bs*bs
		return float64(amax(x[lo:min(lo+bs, (g+1)*hd)]))
	}
	for _, tc := range []struct {
		c     Codec
		bound func(i int) float64
	}{
		{F32{}, func(int) float64 { return 0 }},
		{F16{}, func(i int) float64 { return math.Abs(float64(x[i]))*0x1p-11 + 0x1p-25 }},
		{BF16{}, func(i int) float64 { return math.Abs(float64(x[i])) * 0x1p-8 }},
		{Int8{}, func(i int) float64 { return headAmax(i) / 127 / 2 * 1.0001 }},
		// E4M3: half a step, 2^-4 relative, or half the subnormal step 2^-10·d.
		{FP8{}, func(i int) float64 {
			return math.Abs(float64(x[i]))*0x1p-4 + headAmax(i)/448*0x1p-10
		}},
		// Q4_0: steps of |d| = bamax/8, and the clamp at +7 can cost a whole step.
		{Q4{}, func(i int) float64 { return blockAmax(i, 32) / 8 * 1.001 }},
		// E2M1 steps are at most 2 (between 4 and 6) at scale e ≈ bamax/6, so
		// half a step is bamax/6; the E4M3 scale's rounding adds 1/16.
		{NVFP4{}, func(i int) float64 { return blockAmax(i, 16) / 6 * (1 + 0x1p-4) * 1.001 }},
	} {
		got, _ := roundTrip(tc.c, x, tokens, heads, hd)
		var worst float64
		for i := range x {
			e := math.Abs(float64(got[i] - x[i]))
			if e > tc.bound(i) {
				t.Errorf("%s: element %d: %v -> %v, error %g over bound %g", tc.c.Name(), i, x[i], got[i], e, tc.bound(i))
				break
			}
			worst = max(worst, e/math.Max(tc.bound(i), 1e-30))
		}
		t.Logf("%s: worst error %.2f of bound", tc.c.Name(), worst)
	}
}

// TestNonFinite: a NaN or infinity makes its scaling group read back NaN.
func TestNonFinite(t *testing.T) {
	for _, c := range []Codec{F16{}, BF16{}, Int8{}, FP8{}, Q4{}, NVFP4{}, Q2{}, GGML{T: gguf.TypeQ8_0}, GGML{T: gguf.TypeQ8_0, CPU: true}, GGML{T: gguf.TypeQ5_1}, GGML{T: gguf.TypeIQ4_NL}, Rotated{Int8{}}, Rotated{Q2{}}} {
		x := []float32{1, 2, float32(math.Inf(1)), 4}
		got, _ := roundTrip(c, x, 1, 1, 4)
		if c.Name() == "f16" || c.Name() == "bf16" {
			if !math.IsInf(float64(got[2]), 1) {
				t.Errorf("%s: +Inf -> %v", c.Name(), got[2])
			}
			continue
		}
		for i, v := range got {
			if v == v {
				t.Errorf("%s: element %d = %v, want NaN", c.Name(), i, v)
			}
		}
	}
}

// TestQ8CPU: Q8_0 as ggml-cpu's x86 quantize_row_q8_0 writes it: on a
// block of amax 127, values on a half (2.5, -3.5, 0.5) round to even where
// the reference rounds away from zero, and the scale is the same; a zero
// block stays zero.
func TestQ8CPU(t *testing.T) {
	x := make([]float32, 32)
	x[0], x[1], x[2], x[3] = 127, 2.5, -3.5, 0.5
	cpu, _ := roundTrip(GGML{T: gguf.TypeQ8_0, CPU: true}, x, 1, 1, 32)
	ref, _ := roundTrip(GGML{T: gguf.TypeQ8_0}, x, 1, 1, 32)
	for i, want := range [][2]float32{{127, 127}, {2, 3}, {-4, -4}, {0, 1}} {
		if cpu[i] != want[0] || ref[i] != want[1] {
			t.Errorf("value %v: cpu %v, reference %v; want %v and %v", x[i], cpu[i], ref[i], want[0], want[1])
		}
	}
	zero, _ := roundTrip(GGML{T: gguf.TypeQ8_0, CPU: true}, make([]float32, 32), 1, 1, 32)
	for i, v := range zero {
		if v != 0 {
			t.Fatalf("zero block: element %d = %v", i, v)
		}
	}
}

func TestLookup(t *testing.T) {
	f, err := Lookup("")
	if err != nil || f.Name != Default {
		t.Fatalf("Lookup(\"\") = %v, %v", f.Name, err)
	}
	if f, _ := Lookup("k8v4"); f.K.Name() != "int8" || f.V.Name() != "q4" {
		t.Errorf("k8v4 = %s/%s", f.K.Name(), f.V.Name())
	}
	_, err = Lookup("q2")
	if err == nil || err.Error() != `kvcache: unknown KV cache dtype "q2" (supported: bf16, f16, f32, fp8, int8, iq4_nl, k8v4, nvfp4, q4_0, q4_1, q5_0, q5_1, q8_0, rk2v4, rk4v4, rk8v4)` {
		t.Errorf("Lookup(q2) error = %v", err)
	}
}

// TestPerToken encodes 9 tokens of 2 heads of 64 (magnitudes varying by
// token) whole and in parts of 4, 1 and 4 tokens with every format's
// codecs: a codec PerToken reports gives the same values both ways, and
// NVFP4, which it does not report, gives others (its scale spans the
// tensor), as does its rotation.
func TestPerToken(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const tokens, heads, hd = 9, 2, 64
	x := make([]float32, tokens*heads*hd)
	for i := range x {
		x[i] = float32(r.NormFloat64() * math.Pow(4, float64(i/(heads*hd)%5)))
	}
	codecs := map[string]Codec{"nvfp4 rotated": Rotated{NVFP4{}}}
	for name, f := range formats {
		codecs[name+" K"], codecs[name+" V"] = f.K, f.V
	}
	for name, c := range codecs {
		whole := slices.Clone(x)
		var b Block
		RoundTrip(c, &b, whole, tokens, heads, hd)
		parts := slices.Clone(x)
		for _, p := range [][2]int{{0, 4}, {4, 5}, {5, 9}} {
			var pb Block
			RoundTrip(c, &pb, parts[p[0]*heads*hd:p[1]*heads*hd], p[1]-p[0], heads, hd)
		}
		same := slices.Equal(whole, parts)
		if PerToken(c) && !same {
			t.Errorf("%s (%s): PerToken, but its parts decode otherwise than the whole", name, c.Name())
		}
		if _, nvfp4 := c.(NVFP4); nvfp4 || name == "nvfp4 rotated" {
			if PerToken(c) || same {
				t.Errorf("%s: PerToken %v, parts the same %v: want false, false", name, PerToken(c), same)
			}
		}
	}
}

// LlamaHead0's rotations: llama.cpp's turn of key heads before its
// quantized caches, the largest power of 2 dividing a head size that is a
// multiple of 64 (a latent of 576 by 64, Gemma 4's 512 whole), none for
// other formats or head sizes, nor where the first layer's key heads are
// not a multiple of 64 (a Gemma 4 whose first, sliding, layer has heads of
// 32); of value heads, 64 where they and the first layer's are multiples
// of 64, whatever the keys (MiniCPM3's keys of 96, values of 64); none of
// heads of 0 (a cache that holds no values).
func TestLlamaRotation(t *testing.T) {
	for _, c := range []struct {
		name         string
		head0        LlamaHead0
		hd, vd       int
		wantK, wantV int
	}{
		{"q8_0", LlamaHead0{64, 64}, 64, 64, 64, 64}, {"q8_0", LlamaHead0{128, 128}, 128, 128, 128, 64},
		{"q4_0", LlamaHead0{192, 128}, 192, 128, 64, 64}, {"q5_1", LlamaHead0{256, 256}, 256, 256, 256, 64},
		{"iq4_nl", LlamaHead0{256, 256}, 512, 512, 512, 64}, {"q4_1", LlamaHead0{576, 512}, 576, 512, 64, 64},
		{"q5_0", LlamaHead0{80, 80}, 80, 80, 0, 0}, {"q8_0", LlamaHead0{32, 32}, 32, 32, 0, 0},
		{"q8_0", LlamaHead0{96, 64}, 96, 64, 0, 64}, {"q4_0", LlamaHead0{128, 96}, 128, 96, 128, 0},
		{"q8_0", LlamaHead0{32, 32}, 64, 64, 0, 0}, {"q8_0", LlamaHead0{64, 64}, 32, 32, 0, 0},
		{"f16", LlamaHead0{128, 128}, 128, 128, 0, 0}, {"int8", LlamaHead0{128, 128}, 128, 128, 0, 0},
		{"rk4v4", LlamaHead0{128, 128}, 128, 128, 0, 0}, {"k8v4", LlamaHead0{128, 128}, 128, 128, 0, 0},
		{"q8_0", LlamaHead0{0, 0}, 64, 64, 0, 0}, {"q8_0", LlamaHead0{64, 64}, 0, 0, 0, 0},
	} {
		if got := c.head0.KeyRotation(c.name, c.hd); got != c.wantK {
			t.Errorf("%+v.KeyRotation(%q, %d) = %d, want %d", c.head0, c.name, c.hd, got, c.wantK)
		}
		if got := c.head0.ValueRotation(c.name, c.vd); got != c.wantV {
			t.Errorf("%+v.ValueRotation(%q, %d) = %d, want %d", c.head0, c.name, c.vd, got, c.wantV)
		}
	}
}
