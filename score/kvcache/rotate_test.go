package kvcache

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestHadamard(t *testing.T) {
	// H·e0/√4 = (1,1,1,1)/2; H·e1/√4 = (1,-1,1,-1)/2 (Sylvester order).
	for _, tc := range []struct{ in, want []float32 }{
		{[]float32{1, 0, 0, 0}, []float32{0.5, 0.5, 0.5, 0.5}},
		{[]float32{0, 1, 0, 0}, []float32{0.5, -0.5, 0.5, -0.5}},
		{[]float32{0, 0, 1, 0}, []float32{0.5, 0.5, -0.5, -0.5}},
		{[]float32{1, 2, 3, 4}, []float32{5, -1, -2, 0}},
		{[]float32{3}, []float32{3}},
	} {
		v := append([]float32(nil), tc.in...)
		Hadamard(v)
		for i := range v {
			if v[i] != tc.want[i] {
				t.Errorf("Hadamard(%v) = %v, want %v", tc.in, v, tc.want)
				break
			}
		}
	}
	if HadamardScale(2) != float32(1/math.Sqrt2) || HadamardScale(64) != 0.125 {
		t.Errorf("HadamardScale(2) = %v, (64) = %v", HadamardScale(2), HadamardScale(64))
	}
	// Its own inverse, to float32 rounding, and orthogonal (norm kept).
	r := rand.New(rand.NewPCG(2, 3))
	for _, n := range []int{2, 16, 32, 64, 128, 256} {
		x := make([]float32, n)
		var norm float64
		for i := range x {
			x[i] = float32(r.NormFloat64())
			norm += float64(x[i]) * float64(x[i])
		}
		y := append([]float32(nil), x...)
		Hadamard(y)
		var ny float64
		for _, v := range y {
			ny += float64(v) * float64(v)
		}
		if math.Abs(ny-norm) > 1e-5*norm {
			t.Errorf("n %d: norm² %v, rotated %v", n, norm, ny)
		}
		Hadamard(y)
		for i := range x {
			if math.Abs(float64(y[i]-x[i])) > 1e-6*math.Sqrt(norm) {
				t.Errorf("n %d: twice rotated [%d] = %v, want %v", n, i, y[i], x[i])
			}
		}
	}
}

// A rotated codec stores the inner codec's bytes of the rotated heads and
// reads back the rotation of the inner codec's decode.
func TestRotated(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	for _, name := range []string{"rk8v4", "rk4v4", "rk2v4"} {
		f, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		rot := f.K.(Rotated)
		for _, hd := range []int{16, 32, 64, 128} {
			tokens, heads := 7, 2
			x := make([]float32, tokens*heads*hd)
			for i := range x {
				x[i] = float32(r.NormFloat64())
				if i%hd == 3 {
					x[i] *= 40 // an outlier channel, what rotation is for
				}
			}
			rx := append([]float32(nil), x...)
			for g := range tokens * heads {
				Hadamard(rx[g*hd : (g+1)*hd])
			}
			var b, bi Block
			f.K.Encode(&b, x, tokens, heads, hd)
			rot.Inner.Encode(&bi, rx, tokens, heads, hd)
			if string(b.Data) != string(bi.Data) || string(b.Scales) != string(bi.Scales) {
				t.Fatalf("%s hd %d: bytes differ from %s of the rotated heads", name, hd, rot.Inner.Name())
			}
			y, want := make([]float32, len(x)), make([]float32, len(x))
			f.K.Decode(&b, y)
			rot.Inner.Decode(&bi, want)
			for g := range tokens * heads {
				Hadamard(want[g*hd : (g+1)*hd])
			}
			var se, sx float64
			for i := range y {
				if math.Float32bits(y[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s hd %d: decoded[%d] = %v, want %v", name, hd, i, y[i], want[i])
				}
				se += float64(y[i]-x[i]) * float64(y[i]-x[i])
				sx += float64(x[i]) * float64(x[i])
			}
			// Relative RMS error: bounded by the bits and the block scales,
			// and below the unrotated format's on these heads with an
			// outlier channel (what the rotation is for).
			limit := map[string]float64{"rk8v4": 0.02, "rk4v4": 0.15, "rk2v4": 0.6}[name]
			rel := math.Sqrt(se / sx)
			if rel > limit {
				t.Errorf("%s hd %d: relative RMS error %.4f over %.2f", name, hd, rel, limit)
			}
			plain := append([]float32(nil), x...)
			RoundTrip(rot.Inner, &bi, plain, tokens, heads, hd)
			var sp float64
			for i := range plain {
				sp += float64(plain[i]-x[i]) * float64(plain[i]-x[i])
			}
			relPlain := math.Sqrt(sp / sx)
			t.Logf("%s hd %d: relative RMS error %.4f (unrotated %s %.4f)", name, hd, rel, rot.Inner.Name(), relPlain)
			if hd >= 32 && rel >= relPlain {
				t.Errorf("%s hd %d: relative RMS error %.4f, not below unrotated %s's %.4f", name, hd, rel, rot.Inner.Name(), relPlain)
			}
		}
		// A NaN or an infinity in a head makes the whole head NaN, and only it.
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
			hd, tokens, heads := 32, 2, 2
			x := make([]float32, tokens*heads*hd)
			for i := range x {
				x[i] = float32(i%7) - 3
			}
			x[hd+5] = bad
			var b Block
			RoundTrip(f.K, &b, x, tokens, heads, hd)
			for i, v := range x {
				if (v != v) != (i >= hd && i < 2*hd) {
					t.Fatalf("%s with %v: [%d] = %v", name, bad, i, v)
				}
			}
		}
	}
}

func TestQ2(t *testing.T) {
	var b Block
	// amax 3: d = 2; codes of -3, -1, 0, 1, 2 (tie: rne(2.5) = 2), 3,
	// 0.999, -2 (tie: rne(0.5) = 0).
	x := []float32{-3, -1, 0, 1, 2, 3, 0.999, -2}
	Q2{}.Encode(&b, x, 1, 1, len(x))
	if len(b.Data) != 10 || b.Data[0] != 0x00 || b.Data[1] != 0x40 { // fp16 2 = 0x4000
		t.Fatalf("q2 block % x", b.Data)
	}
	wantCodes := []uint8{0, 1, 2, 2, 2, 3, 2, 0}
	for j, w := range wantCodes {
		if c := b.Data[2+j/4] >> (2 * (j % 4)) & 3; c != w {
			t.Errorf("code of %v = %d, want %d", x[j], c, w)
		}
	}
	y := make([]float32, len(x))
	Q2{}.Decode(&b, y)
	want := []float32{-3, -1, 1, 1, 1, 3, 1, -3}
	for i := range y {
		if y[i] != want[i] {
			t.Errorf("q2 decode %v = %v, want %v", x, y, want)
			break
		}
	}
	// Zeros: d 0, every value reads back 0.
	Q2{}.Encode(&b, make([]float32, 40), 1, 1, 40)
	y = make([]float32, 40)
	Q2{}.Decode(&b, y)
	for _, v := range y {
		if v != 0 {
			t.Fatalf("q2 of zeros reads %v", y)
		}
	}
}

func TestFormatCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		hd   int
		err  string
	}{
		{"rk8v4", 64, ""},
		{"rk2v4", 16, ""},
		{"rk4v4", 48, "KV cache dtype rk4v4: keys are rotated by a Walsh-Hadamard transform, which needs a power-of-two head size, not 48"},
		{"rk8v4", 192, "not 192"},
		{"q8_0", 48, ""},
		{"k8v4", 80, ""},
	} {
		f, err := Lookup(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		err = f.Check(tc.hd)
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s.Check(%d) = %v, want %q", tc.name, tc.hd, err, tc.err)
		}
	}
	_, err := Lookup("q3_k")
	want := `kvcache: unknown KV cache dtype "q3_k" (supported: bf16, f16, f32, fp8, int8, iq4_nl, k8v4, nvfp4, q4_0, q4_1, q5_0, q5_1, q8_0, rk2v4, rk4v4, rk8v4)`
	if err == nil || err.Error() != want {
		t.Errorf("Lookup(q3_k) = %v, want %s", err, want)
	}
}
