package kvcache

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/oracle"
	"ppl.dev/quant"
)

var ggmlTypes = []gguf.Type{gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_0, gguf.TypeQ5_1, gguf.TypeIQ4_NL}

// refBlock is the reference encoding of one block of up to 32 values (the
// rest zeros): quant.Quantize, or quantIQ4NL for IQ4_NL (which package
// quant cannot quantize).
func refBlock(t *testing.T, typ gguf.Type, v []float32) []byte {
	t.Helper()
	var x [32]float32
	copy(x[:], v)
	dst := make([]byte, typ.TypeSize())
	if typ == gguf.TypeIQ4_NL {
		quantIQ4NL(x[:], dst, -1)
		return dst
	}
	if err := quant.Quantize(typ, x[:], dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// adversarialBlocks are blocks of 32 that stress the quantizers' edges.
func adversarialBlocks() [][]float32 {
	mk := func(f func(i int) float32) []float32 {
		v := make([]float32, 32)
		for i := range v {
			v[i] = f(i)
		}
		return v
	}
	return [][]float32{
		mk(func(int) float32 { return 0 }),
		mk(func(i int) float32 { return float32(math.Copysign(0, -1)) }),
		mk(func(i int) float32 { return map[bool]float32{true: 1e30, false: 1e-3}[i == 7] }),  // one huge value
		mk(func(i int) float32 { return map[bool]float32{true: -6e4, false: 0.25}[i == 31] }), // huge, negative, last
		mk(func(i int) float32 { return float32(i%17-8) / 8 }),                                // ties: x·id lands on k+0.5
		mk(func(i int) float32 { return float32(i%16) - 7.5 }),                                // halves
		mk(func(i int) float32 { return map[bool]float32{true: 1, false: -1}[i%2 == 0] }),     // two values, equal magnitude
		mk(func(i int) float32 { return 3 }),                                                  // constant
		mk(func(i int) float32 { return float32(i) * 1e-20 }),                                 // tiny (iq4_nl: x² underflows)
		mk(func(i int) float32 { return 1e-16 }),                                              // under GROUP_MAX_EPS
		mk(func(i int) float32 { return float32(math.Ldexp(1, -24)) * float32(i-16) }),        // fp16 subnormal scales
		mk(func(i int) float32 { return float32(i-16) * 4096 }),                               // fp16 overflow of d
	}
}

// Each llama.cpp type writes, block by block, what ggml's reference
// quantizer writes for the block padded with zeros; a block with a NaN or
// an infinity reads back as NaN and leaves its neighbours alone.
func TestGGMLEncode(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 1))
	for _, typ := range ggmlTypes {
		f, err := Lookup(strings.ToLower(typ.String()))
		if err != nil {
			t.Fatal(err)
		}
		for _, hd := range []int{64, 48, 16, 96} {
			tokens, heads := 5, 3
			x := make([]float32, tokens*heads*hd)
			for i := range x {
				x[i] = float32(r.NormFloat64()) * float32(math.Exp(r.NormFloat64()))
			}
			// Plant the adversarial blocks at the start of each head.
			adv := adversarialBlocks()
			for g := range tokens * heads {
				copy(x[g*hd:g*hd+min(32, hd)], adv[g%len(adv)])
			}
			var b Block
			for _, c := range []Codec{f.K, f.V} {
				c.Encode(&b, x, tokens, heads, hd)
				nb := (hd + 31) / 32
				ts := typ.TypeSize()
				if len(b.Data) != tokens*heads*nb*ts {
					t.Fatalf("%s hd %d: %d bytes, want %d", f.Name, hd, len(b.Data), tokens*heads*nb*ts)
				}
				for g := range tokens * heads {
					for k := range nb {
						lo, hi := g*hd+k*32, g*hd+min(hd, (k+1)*32)
						want := refBlock(t, typ, x[lo:hi])
						if got := b.Data[(g*nb+k)*ts : (g*nb+k+1)*ts]; string(got) != string(want) {
							t.Errorf("%s hd %d group %d block %d: % x, want % x", f.Name, hd, g, k, got, want)
						}
					}
				}
				y := make([]float32, len(x))
				c.Decode(&b, y)
				for g := range tokens * heads {
					for k := range nb {
						lo, hi := g*hd+k*32, g*hd+min(hd, (k+1)*32)
						var full [32]float32
						quant.DequantizeRow(typ, refBlock(t, typ, x[lo:hi]), full[:])
						for i := lo; i < hi; i++ {
							if math.Float32bits(y[i]) != math.Float32bits(full[i-lo]) {
								t.Fatalf("%s hd %d: decoded[%d] = %v, want %v", f.Name, hd, i, y[i], full[i-lo])
							}
						}
					}
				}
			}
			// NaN and infinity poison their block only. (Clean blocks may
			// read back NaN too: a huge value overflows the fp16 scale, and
			// 0·Inf is NaN, as in ggml.)
			clean := make([]float32, len(x))
			f.K.Encode(&b, x, tokens, heads, hd)
			f.K.Decode(&b, clean)
			for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
				z := append([]float32(nil), x...)
				z[hd+min(hd, 32)-1] = bad // last element of head 1's first block
				f.K.Encode(&b, z, tokens, heads, hd)
				y := make([]float32, len(z))
				f.K.Decode(&b, y)
				for i := range y {
					inBlock := i >= hd && i < hd+min(hd, 32)
					if inBlock && y[i] == y[i] || !inBlock && math.Float32bits(y[i]) != math.Float32bits(clean[i]) {
						t.Fatalf("%s hd %d with %v: decoded[%d] = %v", f.Name, hd, bad, i, y[i])
					}
				}
			}
		}
	}
}

// The zoo (../shared/oracle/zoo) has llama-quantize's output for the F16
// tensor in each type, dequantized by gguf-py. Without importance weights
// llama-quantize uses the reference quantizers for Q4_0 … Q8_0, so encoding
// that tensor (as 256 tokens of one 512-value head) through the cache must
// give those values to the bit. IQ4_NL's llama-quantize path searches 15
// more scales (ntry 7) than the reference (ntry -1) the cache uses; the
// same port run with ntry 7 reproduces the zoo, which checks the port.
func TestGGMLZoo(t *testing.T) {
	dir := filepath.Join(oracle.Require(t), "zoo")
	f, err := gguf.Open(filepath.Join(dir, "quant-zoo.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ten, ok := f.Tensor("F16")
	if !ok || ten.Type != gguf.TypeF16 {
		t.Fatal("quant-zoo.gguf has no F16 tensor")
	}
	raw := f.Data(ten)
	const rows, cols = 256, 512
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = quant.F16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
	}
	for _, typ := range ggmlTypes {
		b, err := os.ReadFile(filepath.Join(dir, "quant-zoo."+typ.String()+".f32"))
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, len(b)/4)
		for i := range want {
			want[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		if len(want) != len(src) {
			t.Fatalf("%v: %d values, want %d", typ, len(want), len(src))
		}
		got := make([]float32, len(src))
		name := strings.ToLower(typ.String())
		if typ == gguf.TypeIQ4_NL {
			blk := make([]byte, 18)
			for i := 0; i < len(src); i += 32 {
				quantIQ4NL(src[i:i+32], blk, 7)
				quant.DequantizeRow(typ, blk, got[i:i+32])
			}
			name = "quantIQ4NL(ntry 7)"
		} else {
			fm, err := Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			copy(got, src)
			var blk Block
			RoundTrip(fm.K, &blk, got, rows, 1, cols)
		}
		bad := 0
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				if bad++; bad <= 3 {
					t.Errorf("%s: value %d = %v, zoo %v", name, i, got[i], want[i])
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d values differ from the zoo", name, bad, len(got))
		}
	}
}

func TestBestIndexIQ4(t *testing.T) {
	for _, tc := range []struct {
		x    float32
		want uint8
	}{
		{-200, 0}, {-127, 0}, {-115.5, 1}, {-115.6, 0}, {-115.4, 1}, {0, 8}, {-4.5, 8}, {-4.6, 7}, {113, 15}, {500, 15}, {101, 15}, {100.9, 14},
	} {
		if got := bestIndexIQ4(tc.x); got != tc.want {
			t.Errorf("bestIndexIQ4(%v) = %d, want %d", tc.x, got, tc.want)
		}
	}
}
