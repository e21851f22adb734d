package nn

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/quant"
)

// BenchmarkLinear runs a window of 512 positions through a (2048, 768)
// matrix, the shape of a 100M model's MLP, per weight type and mode, and an
// output head's shape. It reports multiply-adds per second.
func BenchmarkLinear(b *testing.B) {
	for _, sh := range []struct{ in, out, n int }{{768, 2048, 512}, {768, 32000, 256}} {
		for _, typ := range []gguf.Type{gguf.TypeQ8_0, gguf.TypeQ4_K, gguf.TypeQ6_K, gguf.TypeF16} {
			for _, int8 := range []bool{false, true} {
				if _, ok := quant.Int8FormatOf(typ); int8 && !ok {
					continue
				}
				mode := "fp32"
				if int8 {
					mode = "int8"
				}
				b.Run(fmt.Sprintf("%dx%d/n=%d/%v/%s", sh.out, sh.in, sh.n, typ, mode), func(b *testing.B) {
					r := rand.New(rand.NewPCG(1, 1))
					rb, _ := typ.RowSize(uint64(sh.in))
					data := make([]byte, int(rb)*sh.out)
					if err := quant.Quantize(typ, randVec(r, sh.in*sh.out), data); err != nil {
						b.Fatal(err)
					}
					l, err := NewLinear("w", typ, sh.in, sh.out, data)
					if err != nil {
						b.Fatal(err)
					}
					c := NewContext(0)
					c.Int8 = int8
					x, y := randVec(r, sh.n*sh.in), make([]float32, sh.n*sh.out)
					for b.Loop() {
						c.Reset()
						l.Forward(c, y, x, sh.n)
					}
					b.ReportMetric(float64(sh.in*sh.out*sh.n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
				})
			}
		}
	}
}

// BenchmarkGGMLLinear runs 64 positions through a (2048, 768) matrix in
// llama.cpp's orders (the int8 modes: AVX-512's and the AVX2 build's) at
// every CPU level, for a type of each kernel family: the vec_dot lanes
// (Q8_0, Q5_0, NVFP4; Q4_1 with its minima), the types repacked by blocks
// of 32 (Q4_0, MXFP4),
// the repacked Q4_K, the tiled order (Q6_K, Q3_K, IQ2_XXS, IQ3_S) and with
// minima (Q5_K; Q2_K in the AVX2 build, its repacked GEMM in AVX-512's),
// F16 and BF16 (ggml_vec_dot per output), TQ1_0 and TQ2_0 (the ternary
// lanes).
// It reports multiply-adds per second; the generic level is the plain Go
// reference the others are measured against.
func BenchmarkGGMLLinear(b *testing.B) {
	const in, out, n = 768, 2048, 64
	r := rand.New(rand.NewPCG(1, 1))
	x := randVec(r, n*in)
	for _, typ := range []gguf.Type{gguf.TypeQ8_0, gguf.TypeQ5_0, gguf.TypeNVFP4, gguf.TypeQ4_1, gguf.TypeQ4_0, gguf.TypeMXFP4, gguf.TypeQ4_K,
		gguf.TypeQ6_K, gguf.TypeQ3_K, gguf.TypeIQ2_XXS, gguf.TypeIQ3_S, gguf.TypeQ5_K, gguf.TypeQ2_K, gguf.TypeF16, gguf.TypeBF16, gguf.TypeTQ1_0, gguf.TypeTQ2_0, gguf.TypeQ1_0, gguf.TypeQ2_0} {
		rb, _ := typ.RowSize(in)
		data := make([]byte, int(rb)*out)
		if err := quant.Quantize(typ, randVec(r, in*out), data); err != nil {
			b.Fatal(err)
		}
		l, err := NewLinear("w", typ, in, out, data)
		if err != nil {
			b.Fatal(err)
		}
		for _, avx2 := range []bool{false, true} {
			for _, lv := range Levels() {
				name := fmt.Sprintf("%v/int8/%v", typ, lv)
				if avx2 {
					name = fmt.Sprintf("%v/int8-avx2/%v", typ, lv)
				}
				b.Run(name, func(b *testing.B) {
					prev := SetLevel(lv)
					defer SetLevel(prev)
					c := NewContext(1)
					c.Int8, c.LlamaCPP, c.GGMLAVX2 = true, true, avx2
					y := make([]float32, n*out)
					for b.Loop() {
						c.Reset()
						l.Forward(c, y, x, n)
					}
					b.ReportMetric(float64(in*out*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
				})
			}
		}
	}
}

// BenchmarkAttention is one layer of a 100M model's attention over 512
// positions.
func BenchmarkAttention(b *testing.B) { benchAttention(b, 512, 0, false, false) }

// BenchmarkAttention4096 is one layer of a 100M model's attention over a
// 4096-token window, one thread.
func BenchmarkAttention4096(b *testing.B) { benchAttention(b, 4096, 1, false, false) }

// BenchmarkGGMLAttention4096 is BenchmarkAttention4096 in llama.cpp's
// arithmetic: ggml-cpu's tiled flash attention over f16 keys and values
// (ggmlTiled), as the int8 modes compute it with --kv-dtype f16.
func BenchmarkGGMLAttention4096(b *testing.B) { benchAttention(b, 4096, 1, false, true) }

// BenchmarkAttentionALiBi4096 is BenchmarkAttention4096 with ALiBi's
// slopes (BLOOM, MPT): the scores scaled and biased before the softmax
// (measured: 0.75 of BenchmarkAttention4096's rate).
func BenchmarkAttentionALiBi4096(b *testing.B) { benchAttention(b, 4096, 1, true, false) }

// BenchmarkGGMLBlockAttention4096 is BenchmarkGGMLAttention4096 over a
// cache of llama.cpp's block types (ggmlBlockAttention: the int8 modes
// with --kv-dtype q8_0, q4_0, iq4_nl); its rate against
// BenchmarkGGMLAttention4096's is the cost of the blocks' arithmetic
// (measured on one thread of the 2-core CI machine: f16 50.5 GMAC/s, Q8_0
// 8.3, Q4_0 8.5, IQ4_NL 7.1; IQ4_NL was 0.95 before its two sets of lanes
// had a vector kernel, pairLanesAVX2).
func BenchmarkGGMLBlockAttention4096(b *testing.B) {
	for _, t := range []gguf.Type{gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeIQ4_NL} {
		b.Run(t.String(), func(b *testing.B) { benchAttentionKeys(b, 4096, 1, false, true, t) })
	}
}

func benchAttention(b *testing.B, n, threads int, alibi, ggml bool) {
	benchAttentionKeys(b, n, threads, alibi, ggml, 0)
}

// benchAttentionKeys is benchAttention, over keys of block type kt when
// it is not 0 (KeyBlocks).
func benchAttentionKeys(b *testing.B, n, threads int, alibi, ggml bool, kt gguf.Type) {
	r := rand.New(rand.NewPCG(1, 1))
	heads, kv, hd := 12, 4, 64
	a := &Attention{Heads: heads, KVHeads: kv, HeadDim: hd, Scale: 0.125, GGMLF16: ggml && kt == 0}
	if alibi {
		a.Slopes = ALiBiSlopes(heads, 8)
	}
	q, k, v := randVec(r, n*heads*hd), randVec(r, n*kv*hd), randVec(r, n*kv*hd)
	if kt != 0 {
		a.KeyBlocks, a.KeyType = make([]byte, len(k)/32*kt.TypeSize()), kt
		for i := range a.KeyBlocks {
			a.KeyBlocks[i] = byte(r.IntN(256))
		}
		for i := 0; i < len(a.KeyBlocks); i += kt.TypeSize() { // scales of about 1/64
			binary.LittleEndian.PutUint16(a.KeyBlocks[i:], quant.F32ToF16(float32(r.Float64()/64)))
		}
	}
	out := make([]float32, n*heads*hd)
	c := NewContext(threads)
	c.Int8, c.LlamaCPP = ggml, ggml
	for b.Loop() {
		c.Reset()
		a.Forward(c, out, q, k, v, n)
	}
	b.ReportMetric(float64(2*heads*hd*n*(n+1)/2)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
}

// BenchmarkLightningTopK is one layer of DeepSeek-V3.2's lightning
// indexer at a quarter of its heads (16 of 128 wide) over a 2048-token
// window with a top_k of 512, and the same window's latent attention over
// the keys it keeps (16 heads of 576, values of 512), the work the indexer
// adds to; both on one thread. It reports multiply-adds per second (the
// attention's as if dense: its keys past top_k are masked, not skipped).
func BenchmarkLightningTopK(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const n, heads, dim, topK = 2048, 16, 128, 512
	q, k, w := randVec(r, n*heads*dim), randVec(r, n*dim), randVec(r, n*heads)
	c := NewContext(1)
	var keys *KeySet
	b.Run("indexer", func(b *testing.B) {
		for b.Loop() {
			c.Reset()
			keys = LightningTopK(c, q, k, w, n, heads, dim, topK)
		}
		b.ReportMetric(float64(heads*dim*n*(n+1)/2)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
	})
	b.Run("sparse attention", func(b *testing.B) {
		const hd, dv = 576, 512
		a := &Attention{Heads: heads, KVHeads: 1, HeadDim: hd, Scale: 0.1, ValueDim: dv, Keys: keys}
		ql, kl := randVec(r, n*heads*hd), randVec(r, n*hd)
		out := make([]float32, n*heads*hd)
		for b.Loop() {
			c.Reset()
			a.Forward(c, out, ql, kl, kl, n)
		}
		b.ReportMetric(float64(heads*(hd+dv)*n*(n+1)/2)*float64(b.N)/b.Elapsed().Seconds()/1e9, "dense-GMAC/s")
	})
}

// BenchmarkMSABlocks is one layer of MiniMax-M3's sparse attention at a
// quarter of its width over a 2048-token window: the indexer's choice of
// 8 of 16 blocks of 128 keys (2 heads of 128, 1 local block), then the
// attention as llama.cpp computes it (ggml's tiled kernel, 8 heads of 128
// over 2 KV heads) over the keys chosen and over every key; on one thread.
// It reports multiply-adds per second (the attention's as if dense).
func BenchmarkMSABlocks(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const n, kv, heads, hd, block, topK = 2048, 2, 8, 128, 128, 8
	iq, ik := randVec(r, n*kv*hd), randVec(r, n*hd)
	q, k, v := randVec(r, n*heads*hd), randVec(r, n*kv*hd), randVec(r, n*kv*hd)
	for i := range k {
		k[i], v[i] = roundF16(k[i]), roundF16(v[i])
	}
	c := NewContext(1)
	keys := MSABlocks(c, iq, ik, n, kv, hd, block, topK, 1, true)
	b.Run("indexer", func(b *testing.B) {
		for b.Loop() {
			c.Reset()
			MSABlocks(c, iq, ik, n, kv, hd, block, topK, 1, true)
		}
		b.ReportMetric(float64(kv*hd*n*(n+1)/2)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
	})
	for _, s := range []struct {
		name string
		keys *KeySet
	}{{"sparse attention", keys}, {"dense attention", nil}} {
		b.Run(s.name, func(b *testing.B) {
			a := &Attention{Heads: heads, KVHeads: kv, HeadDim: hd, Scale: 0.1, Keys: s.keys, GGMLF16: true}
			out := make([]float32, n*heads*hd)
			for b.Loop() {
				c.Reset()
				a.Forward(c, out, q, k, v, n)
			}
			b.ReportMetric(float64(2*heads*hd*n*(n+1)/2)*float64(b.N)/b.Elapsed().Seconds()/1e9, "dense-GMAC/s")
		})
	}
}

// BenchmarkGemmTile is the fp32 tile kernels alone at every level: 120
// rows × 16 and 32 columns over 768 inputs, the panel in L2.
func BenchmarkGemmTile(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	k := 768
	a, p, c := randVec(r, 120*k), randVec(r, 32*k), make([]float32, 120*32)
	for _, l := range Levels() {
		prev := SetLevel(l)
		for _, nr := range []int{16, 32} {
			b.Run(fmt.Sprintf("%d/%v", nr, l), func(b *testing.B) {
				for b.Loop() {
					Gemm(120, nr, a, k, p, nr, k, c, nr, nil)
				}
				b.ReportMetric(float64(120*nr*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
		SetLevel(prev)
	}
}

// BenchmarkPack32Words is a panel's packing (kernels.transpose16 where the
// level has it) at every level: 32 rows of 4096 words.
func BenchmarkPack32Words(b *testing.B) {
	const k = 4096
	src, dst := make([]uint32, 32*k), make([]uint32, 32*k)
	for _, l := range Levels() {
		prev := SetLevel(l)
		b.Run(l.String(), func(b *testing.B) {
			for b.Loop() {
				pack32Words(dst, src, k, 32)
			}
			b.ReportMetric(float64(32*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gwords/s")
		})
		SetLevel(prev)
	}
}

// BenchmarkLaneSums is the vec_dot orders' integer lanes (kernels.laneSums16
// where the level has it) at every level: one weight row of 4096 int16
// weights times int8 activations.
func BenchmarkLaneSums(b *testing.B) {
	const k = 4096
	r := rand.New(rand.NewPCG(3, 4))
	w, x := make([]int16, k), make([]int8, k)
	for i := range w {
		w[i], x[i] = int16(r.IntN(2*8064+1)-8064), int8(r.IntN(255)-127)
	}
	s := make([][8]int32, k/256)
	for _, l := range Levels() {
		prev := SetLevel(l)
		b.Run(l.String(), func(b *testing.B) {
			for b.Loop() {
				laneSums(s, w, x)
			}
			b.ReportMetric(float64(k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gweights/s")
		})
		SetLevel(prev)
	}
}

// BenchmarkMiscKernels times the exp-based kernels at every level.
func BenchmarkMiscKernels(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const rows = 16
	s0 := randVec(r, rows*keyBlock)
	lim := make([]int32, rows)
	for i := range lim {
		lim[i] = keyBlock
	}
	g, u := randVec(r, 4096), randVec(r, 4096)
	out := make([]float32, 4096)
	pz, qz := randVec(r, 151669), randVec(r, 151669)
	for _, l := range Levels() {
		prev := SetLevel(l)
		b.Run("softmax/"+l.String(), func(b *testing.B) {
			s := make([]float32, len(s0))
			m, ls, a := make([]float32, rows), make([]float32, rows), make([]float32, rows)
			for range b.N {
				copy(s, s0)
				kern.softmax(&s[0], rows, &lim[0], 0.125, &m[0], &ls[0], &a[0])
			}
		})
		b.Run("swiglu/"+l.String(), func(b *testing.B) {
			for range b.N {
				swiglu32(out, g, u)
			}
		})
		b.Run("expsum/"+l.String(), func(b *testing.B) {
			for range b.N {
				ExpSum(g, 3)
			}
		})
		b.Run("kld/"+l.String(), func(b *testing.B) { // a token's KLD over Qwen's 151,669 logits
			for range b.N {
				KLD(pz, 7.5, qz, 7.25)
			}
		})
		SetLevel(prev)
	}
}

// BenchmarkDeltaRule: one value head of 128 (Qwen3.5's) over 512 tokens,
// the float32 chunked form (DeltaScan, the fp32 mode's) and ggml's token
// by token (DeltaRuleGGML, the int8 modes'), in tokens/s per head.
func BenchmarkDeltaRule(b *testing.B) {
	const D, n = 128, 512
	in := makeDelta(rand.New(rand.NewPCG(3, 4)), 0, D, n)
	out, st := make([]float32, n*D), make([]float32, D*D)
	sc, m := NewDeltaScan(D), make([]float32, D*D)
	for _, c := range []struct {
		name string
		run  func()
	}{
		{"chunked", func() { sc.Run(out, D, in.q, in.k, in.ldq, in.v, in.ldv, in.g, in.beta, in.ldg, n, st, nil) }},
		{"ggml", func() {
			DeltaRuleGGML(D, out, D, in.q, in.k, in.ldq, in.v, in.ldv, in.g, in.beta, in.ldg, n, st, false, m, nil)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				copy(st, in.state)
				c.run()
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkResMix: Kimi K3's residual attention of one token over 16
// checkpoints of 7168 (a K3-sized residual), the float64 reference (the
// fp32 mode's) and llama.cpp's float32 sequence (the int8 modes'), in
// tokens/s and the rows' GB/s read.
func BenchmarkResMix(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const C, E = 16, 7168
	ck := make([][]float32, C)
	for i := range ck {
		ck[i] = randVec(r, E)
	}
	cur, w, out, tmp := randVec(r, E), randVec(r, E), make([]float32, E), make([]float32, E)
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"ref", func() { ResMix(out, ck, cur, w, 1e-5) }},
		{"ggml", func() { GGMLResMix(out, ck, cur, w, tmp, 1e-5, false) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.f()
			}
			tps := float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(tps, "tokens/s")
			b.ReportMetric(tps*float64(2*(C+1)*E*4)/1e9, "GB/s")
		})
	}
}
