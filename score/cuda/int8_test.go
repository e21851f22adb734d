package cuda

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"ppl.dev/eval/mkmodel"
	"ppl.dev/gguf"
	"ppl.dev/oracle"
	"ppl.dev/quant"
	"ppl.dev/score/ml"
	"ppl.dev/score/model"
	"ppl.dev/score/nn"
)

// actRows returns n rows of k activations: random ones of several scales,
// and rows of zeros, of values below the quantizer's 1e-30, of ±MaxFloat32,
// of exact ties (x·127/amax half-way), and with a NaN or an infinity.
func actRows(rng *rand.Rand, n, k int) []float32 {
	x := make([]float32, n*k)
	for t := range n {
		row := x[t*k : (t+1)*k]
		for i := range row {
			switch t % 8 {
			case 0, 1:
				row[i] = float32(rng.NormFloat64() * math.Pow(10, float64(t%3*2-2)))
			case 2: // zeros
			case 3:
				row[i] = float32(rng.NormFloat64() * 1e-31)
			case 4:
				row[i] = math.MaxFloat32 * float32(1-2*(i%2))
			case 5: // q = x·127/127 = i%255 - 127 + 0.5: ties
				row[i] = float32(i%254-127) + 0.5
				if i%32 == 0 {
					row[i] = 127
				}
			case 6:
				row[i] = float32(rng.NormFloat64())
				if i == k/3 {
					row[i] = float32(math.NaN())
				}
			case 7:
				row[i] = float32(rng.NormFloat64())
				if i == k/2 {
					row[i] = float32(math.Inf(-1))
				}
			}
		}
	}
	return x
}

// TestInt8Parity holds quant_acts and the i8mm kernels to their
// references (nn.QuantizeActs, nn.Int8Output): every code, scale, sum and
// output the same bits. The shapes cross the 64-row tiles on both sides,
// end with a k chunk shorter than the kernel's (128 bytes for groups of
// 32, 64 for groups of 16), read the activations through a row
// index (an expert's tokens, repeated) and write outputs with a stride;
// the tiled form takes tiles of several experts' tokens.
func TestInt8Parity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(41, 42))
		const n, k, ldx = 70, 512 + 32, 560 // k: 4 chunks of 128 (8 of 64), then 32 (not a Q8_K row)
		for _, block := range []int{32, 256} {
			kk := k
			if block == 256 {
				kk = 512
			}
			x := actRows(rng, n, ldx)
			xp := devPut(t, e, x)
			a := &qacts{n: n, k: kk}
			a.q, a.d, a.xs = devAlloc(t, e, int64(n*kk)), devAlloc(t, e, 4*int64(n*kk/32)), devAlloc(t, e, 4*int64(n*kk/16))
			do(t, e, func() error { return e.quantizeActs(a, xp, ldx, block) })
			gq, gd, gs := devGet[int8](t, e, a.q, n*kk), devGet[float32](t, e, a.d, n*kk/32), devGet[int32](t, e, a.xs, n*kk/16)
			qx, dx, sx := make([]int8, n*kk), make([]float32, n*kk/32), make([]int32, n*kk/16)
			bad := 0
			for r := range n {
				nn.QuantizeActs(x[r*ldx:r*ldx+kk], block, qx[r*kk:(r+1)*kk], dx[r*kk/32:(r+1)*kk/32], sx[r*kk/16:(r+1)*kk/16])
			}
			for i := range qx {
				if qx[i] != gq[i] {
					if bad++; bad <= 3 {
						t.Errorf("Q8 blocks of %d: row %d code %d: got %d, want %d", block, i/kk, i%kk, gq[i], qx[i])
					}
				}
			}
			for i := range dx {
				if !sameBits(dx[i], gd[i]) {
					if bad++; bad <= 6 {
						t.Errorf("blocks of %d: row %d scale %d: got %g, want %g", block, i/(kk/32), i%(kk/32), gd[i], dx[i])
					}
				}
			}
			for i := range sx {
				if sx[i] != gs[i] {
					if bad++; bad <= 9 {
						t.Errorf("blocks of %d: row %d sum %d: got %d, want %d", block, i/(kk/16), i%(kk/16), gs[i], sx[i])
					}
				}
			}
			if bad > 0 {
				t.Fatalf("quant_acts, blocks of %d: %d values differ", block, bad)
			}

			for _, c := range []struct {
				group  int
				minima bool
			}{{32, false}, {32, true}, {16, false}, {16, true}} {
				t.Run(fmt.Sprintf("block%d/g%d/min=%v", block, c.group, c.minima), func(t *testing.T) {
					const rows, ldy = 75, 80
					ng := kk / c.group
					qw := make([]int8, rows*kk)
					for i := range qw {
						qw[i] = int8(rng.IntN(256) - 128)
					}
					sw, mw := make([]float32, rows*ng), make([]float32, rows*ng)
					for i := range sw {
						sw[i] = float32(rng.NormFloat64() * 1e-3)
						mw[i] = float32(rng.NormFloat64() * 1e-2)
					}
					qwp, swp := devPut(t, e, qw), devPut(t, e, sw)
					var mwp ptr
					if c.minima {
						mwp = devPut(t, e, mw)
					}
					idx := make([]int32, n+3)
					for i := range idx {
						idx[i] = int32(rng.IntN(n))
					}
					ip := devPut(t, e, idx)
					// run launches into ldy-wide rows of -7 and compares them
					// with the references: each tile {first token (its place
					// in idx with gather), tokens, first row of y, first weight
					// row} of nrows weight rows, the rest left at -7.
					run := func(what string, tokens int, launch func(y ptr) error, tiles []int32, nrows int, gather bool) {
						want := make([]float32, tokens*ldy)
						for i := range want {
							want[i] = -7
						}
						yp := devPut(t, e, want)
						do(t, e, func() error { return launch(yp) })
						y := devGet[float32](t, e, yp, tokens*ldy)
						for ti := 0; ti < len(tiles); ti += 4 {
							for j := range int(tiles[ti+1]) {
								tk, src := int(tiles[ti+2])+j, int(tiles[ti])+j
								if gather {
									src = int(idx[src])
								}
								for r := range nrows {
									w := int(tiles[ti+3]) + r
									var m []float32
									if c.minima {
										m = mw[w*ng : (w+1)*ng]
									}
									want[tk*ldy+r] = nn.Int8Output(qw[w*kk:(w+1)*kk], qx[src*kk:(src+1)*kk], sw[w*ng:(w+1)*ng], m, dx[src*kk/32:(src+1)*kk/32], c.group)
								}
							}
						}
						bad := 0
						for i := range y {
							if !sameBits(y[i], want[i]) {
								if bad++; bad <= 3 {
									t.Errorf("%s: token %d row %d: got %g, want %g", what, i/ldy, i%ldy, y[i], want[i])
								}
							}
						}
						if bad > 0 {
							t.Errorf("%s: %d of %d outputs differ", what, bad, len(y))
						}
					}
					// The tiled form (i8mm_g<group>t): the rows as 3 experts of
					// R, tiles of 64 and fewer tokens.
					const R = 25
					for _, gather := range []bool{false, true} {
						tokens, ix := n, ptr(0)
						tiles := []int32{0, 50, 0, R, 50, 20, 50, 2 * R}
						if gather {
							tokens, ix = len(idx), ip
							tiles = []int32{0, 64, 0, 2 * R, 64, 6, 64, 2 * R, 70, 3, 70, 0}
						}
						run(fmt.Sprintf("gather=%v", gather), tokens, func(y ptr) error {
							return e.i8mm(y, ldy, a, ix, tokens, qwp, swp, mwp, rows, c.group)
						}, []int32{0, int32(tokens), 0, 0}, rows, gather)
						tp := devPut(t, e, tiles)
						run(fmt.Sprintf("tiles, gather=%v", gather), tokens, func(y ptr) error {
							return e.i8mmTiles(y, ldy, a, ix, tp, len(tiles)/4, qwp, swp, mwp, R, c.group)
						}, tiles, R, gather)
					}
				})
			}
		}
	})
}

// int8Bounds are TestEndToEndInt8's: mean |Δ log p| and |PPL ratio - 1| of
// the GPU's int8 mode against the CPU's on the same file, a bf16 cache,
// two windows of 256 tokens (383 targets): about 1.5 times the emulation's
// (in the comments: mean, max, PPL ratio), and at least 0.0005 and 0.0002
// (room for a GPU's float32 sums in cuBLAS's order, not measured yet).
//
// Not the bits: the CPU's int8 mode computes every float32 operation as
// ggml-cpu does (RMSNorm, RoPE, SwiGLU, the lanes of its products;
// nn/ggml.go), the GPU's as package nn's references and int8Generic, and a
// difference of one ulp upstream moves a code of the next quantization by
// a step now and then, which later quantizations carry on. The products
// themselves are the CPU generic int8 kernel's bits (with exact attention,
// the emulated GPU gives the generic CPU int8 mode's log-probs exactly over
// a window of 256 tokens, an f32 cache), hence float32's precision
// everywhere else: attention (attn_fx or the plain kernel; the fp16 flash
// kernel alone gave a mean of 0.019 on tiny-llama-spm-q8_0) and F32
// matrices (float32 products in both modes, as llama.cpp's; rounded to
// fp16, the tiny models of F32 matrices were at means of 0.005 to 0.036).
// The fp32 mode's figures in brackets were measured while it still rounded
// F32 matrices to fp16. Those models
// quantize only the head's input and sit near the CPU's bits; the Q8_0 and
// MXFP4 ones carry the flips. Held by the mean and the PPL ratio: the
// maximum is a few flips where codes move (0.03 to 0.14), 0.8 where a
// routing choice flips.
//
// On an H200 (2026-12-04, cuBLAS 13.1) the same windows part further
// (means 1.4 to 20 times the emulator's on the dense models, PPL ratios
// to 0.9988): the device's float32 steps round apart from the emulator's
// (cuBLAS's float32 products, CUDA's expf), and every code that moves
// carries on. Each entry holds the emulator's bounds, then the device's;
// the comments give the emulator's mean, max and PPL ratio, then the
// device's mean and PPL ratio.
var int8Bounds = map[string][4]float64{
	"tiny-llama-spm-q8_0": {0.018, 0.0005, 0.017, 0.0003},   // 0.0127, 0.065, 0.99979 (the GPU's fp32 mode against the CPU's int8: 0.0184, 0.99858); H200 0.0127, 1.00016
	"tiny-qwen3-q8_0":     {0.004, 0.0005, 0.004, 0.0005},   // 0.0027, 0.033, 0.99971 (fp32 mode: 0.0172, 0.99892); H200 not measured (not in a bundle)
	"tiny-llama3-q8_0":    {0.0006, 0.0002, 0.0037, 0.0003}, // 0.00038, 0.030, 1.000007; H200 0.00274, 1.00019
	"tiny-qwen3moe":       {0.008, 0.001, 0.008, 0.0006},    // 0.0054, 0.14, 1.00063; H200 0.0056, 1.00043
	"tiny-qwen35":         {0.0005, 0.0002, 0.0002, 0.0001}, // 0.00031, 0.0074, 1.00012 (heads of 256: attn_fx256; the plain kernel gave the same); H200 0.00012, 1.000014
	"tiny-qwen35moe":      {0.0005, 0.0002, 0.0001, 0.0001}, // 0.00003, 0.0038, 1.000008; H200 0.00006, 0.999965
	"tiny-qwen3next":      {0.0005, 0.0002, 0.0002, 0.0001}, // 0.00007, 0.0053, 1.000029; H200 0.00009, 1.000058
	"tiny-deepseek2":      {0.0002, 0.0001, 0.011, 0.0006},  // 0.00008, 0.010, 0.999984 (the latent attention's output float32 since 2026-12-07; rounded to fp16: 0.0075, 0.074, 0.99935); H200 0.0082, 1.00044 with the fp16 output, not measured since
	"tiny-gemma4":         {0.027, 0.0005, 0.017, 0.0017},   // 0.0178, 0.79, 0.99982; H200 0.0123, 0.99873
	"tiny-gemma3":         {0.018, 0.0002, 0.016, 0.0015},   // 0.0120, 0.054, 1.00013; H200 0.0118, 0.99892
	"tiny-mistral3":       {0.0005, 0.0002, 0.0014, 0.0001}, // 0.00005, 0.0053, 1.000027 (fp32 mode: 0.0096, 1.00044); H200 0.00102, 0.999972
	"tiny-glm4moe":        {0.0005, 0.0002, 0.0005, 0.0001}, // 0.00006, 0.0072, 1.000008; H200 0.00030, 0.999990
	"tiny-gpt-oss":        {0.006, 0.001, 0.015, 0.0016},    // 0.0041, 0.066, 0.99933 (fp32 mode: 0.0235, 0.99929); H200 0.0109, 0.99884
}

// int8Quick are the models the emulator runs by default (all with
// PPL_CUDA_SIM_E2E=1): a dense model, a mixture of experts, a recurrent
// hybrid, MXFP4 experts and latent attention.
var int8Quick = map[string]bool{"tiny-llama-spm-q8_0": true, "tiny-qwen3moe": true, "tiny-qwen35": true, "tiny-gpt-oss": true, "tiny-deepseek2": true}

// TestEndToEndInt8: every oracle model in the int8 mode (--activations
// int8) on the GPU and on the CPU, a bf16 cache, two windows of 256 tokens
// (one scored from the middle); int8Bounds.
func TestEndToEndInt8(t *testing.T) {
	dir := oracle.Require(t)
	onDevices(t, func(t *testing.T, e *Engine) {
		quick := e.Ordinal < 0 && os.Getenv("PPL_CUDA_SIM_E2E") != "1"
		for _, stem := range slices.Sorted(maps.Keys(int8Bounds)) {
			t.Run(stem, func(t *testing.T) {
				if quick && !int8Quick[stem] {
					t.Skip("simulator: four models (PPL_CUDA_SIM_E2E=1 runs all)")
				}
				path := oracle.Model(dir, stem)
				if _, err := os.Stat(path); err != nil {
					t.Skipf("skipping: %v", err)
				}
				info, err := model.Load(path, model.Options{})
				if err != nil {
					t.Fatal(err)
				}
				toks := archTokens(dir, stem, info.Vocab(), 512)
				if slices.Contains(e2eModels, stem) {
					toks = e2eTokens(dir, stem, info.Vocab(), 512)
				}
				info.Close()
				s := e2eCase(t, e, Mixed, path, model.Options{KVDtype: "bf16", Activations: model.ActInt8}, []e2eWindow{{0, 256, 1}, {100, 356, 228}}, toks, false)
				t.Logf("int8, bf16 cache: %v", s)
				all := int8Bounds[stem]
				b := all[:2] // the emulator's, or the device's
				if e.Ordinal >= 0 {
					b = all[2:]
				}
				if mean := s.sumAbs / float64(s.n); mean > b[0] || math.Abs(s.pplRatio()-1) > b[1] {
					t.Errorf("int8: %v; want mean |Δ| <= %g and |PPL ratio - 1| <= %g", s, b[0], b[1])
				}
			})
		}
	})
}

// The GPU computes activations fp32 (half-precision products) and int8
// (with the file's blocks kept); it refuses the rest with the reason.
func TestInt8Refusal(t *testing.T) {
	for _, c := range []struct {
		act, storage, want string
	}{
		{"", WeightsQuantized, ""},
		{"fp32", WeightsBF16, ""},
		{"int8", WeightsQuantized, ""},
		{"int8", WeightsBF16, "--activations int8 multiplies the file's quantized blocks, which --gpu-weights bf16 does not keep"},
		{"int8-avx2", WeightsQuantized, `activations "int8-avx2": the GPU computes fp32 (half-precision products) or int8`},
	} {
		if got := int8Refusal(c.act, c.storage); got != c.want {
			t.Errorf("int8Refusal(%q, %q) = %q, want %q", c.act, c.storage, got, c.want)
		}
	}
}

// int8Want is the int8 mode's product of rows x (n of k values) with rows
// [r0, r0+rows) of w's blocks (type typ), from the references: one
// nn.Int8Output per output.
func int8Want(t *testing.T, typ gguf.Type, w []byte, r0, rows int, x []float32, n, k, ldx int) []float32 {
	f, _ := quant.Int8FormatOf(typ)
	rb, err := typ.RowSize(uint64(k))
	if err != nil {
		t.Fatal(err)
	}
	ng := k / f.Group
	qx, d, xs := make([]int8, k), make([]float32, k/32), make([]int32, k/16)
	u, qw := make([]byte, k), make([]int8, k)
	s, m := make([]float32, ng), make([]float32, ng)
	out := make([]float32, n*rows)
	for tk := range n {
		nn.QuantizeActs(x[tk*ldx:tk*ldx+k], f.ActBlock, qx, d, xs)
		for r := range rows {
			quant.DecodeInt8(typ, w[(r0+r)*int(rb):(r0+r+1)*int(rb)], u, s, m)
			for i, v := range u {
				qw[i] = int8(int(v) - f.Offset)
			}
			mm := m
			if !f.HasMin {
				mm = nil
			}
			out[tk*rows+r] = nn.Int8Output(qw, qx, s, mm, d, f.Group)
		}
	}
	return out
}

// The int8 mode through the backend's operations: Linears over matrices of
// both activation blocks (Q8_0, Q4_K: the input quantized once per block)
// and HeadLinear over a Q8_0 stack (each head's columns quantized on their
// own), each output the references' bits.
func TestInt8Operations(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(51, 52))
		b := testBackend(e)
		b.prec.Int8 = true
		b.qw.mode = WeightsQuantized
		defer b.Close()
		blocks := func(typ gguf.Type, in, rows int) []byte { return randBlocks(t, rng, typ, in, rows) }
		const n, in = 70, 512
		x := randF32(rng, n*in, 1)
		ws := []*ml.Matrix{
			{Name: "a.weight", Type: gguf.TypeQ8_0, In: in, Out: 40},
			{Name: "b.weight", Type: gguf.TypeQ4_K, In: in, Out: 66},
		}
		for _, w := range ws {
			w.Data = blocks(w.Type, in, w.Out)
			if err := b.Prepare(w); err != nil {
				t.Fatal(err)
			}
		}
		xt := b.put(t, n, in, x)
		dsts := []ml.Tensor{b.Alloc(n, ws[0].Out), b.Alloc(n, ws[1].Out)}
		b.Linears(dsts, xt, ws)
		for i, w := range ws {
			got, want := b.Read(dsts[i]), int8Want(t, w.Type, w.Data, 0, w.Out, x, n, in, in)
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			for j := range want {
				if !sameBits(got[j], want[j]) {
					t.Fatalf("Linears %s: output %d (token %d, row %d) %v, the references' %v", w.Name, j, j/w.Out, j%w.Out, got[j], want[j])
				}
			}
		}

		const heads, hin, hout = 3, 64, 24
		stack := &ml.Matrix{Name: "blk.0.attn_k_b.weight", Type: gguf.TypeQ8_0, In: hin, Out: hout, Experts: heads}
		stack.Data = blocks(stack.Type, hin, hout*heads)
		if err := b.Prepare(stack); err != nil {
			t.Fatal(err)
		}
		hx := randF32(rng, n*heads*hin, 1)
		dst := b.Alloc(n, heads*hout)
		b.HeadLinear(dst, b.put(t, n, heads*hin, hx), stack)
		got := b.Read(dst)
		if err := b.Err(); err != nil {
			t.Fatal(err)
		}
		for h := range heads {
			want := int8Want(t, stack.Type, stack.Data, h*hout, hout, hx[h*hin:], n, hin, heads*hin)
			for tk := range n {
				for r := range hout {
					if g, w := got[tk*heads*hout+h*hout+r], want[tk*hout+r]; !sameBits(g, w) {
						t.Fatalf("HeadLinear head %d token %d row %d: %v, the references' %v", h, tk, r, g, w)
					}
				}
			}
		}
	})
}

// MLP and Experts in the int8 mode: Up (and Gate) and Down with integer
// forms (Q8_0, Q4_K), the activation in float32 between them (glu_f32),
// quantized again for Down. Ungated (ReLU², Nemotron-H's) every output is
// the references' bits: int8Want's Up, max(u, 0)² in float32 (exact),
// int8Want's Down, and for Experts each choice's times its weight, added
// in the order of the choices (float32, as scatter_scaled and
// sum_choices). Gated (SwiGLU) the same with nn.SwiGLU between. The rows
// are actRows' (zeros, NaN, infinities, ±MaxFloat32, ties), 70 tokens (a
// 64-token tile and a part), widths of 96 (no multiple of the 64-row
// tile), experts chosen by uneven numbers of tokens. With Gemma 3n's
// top-k gate (TopK) Gate's products sparsified first (nn.GaussianTopK:
// gaussian_topk_f32's float64 sums in another order, the same bits here).
func TestInt8MLP(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		for _, c := range []struct {
			act      ml.Act
			up, down gguf.Type
			topk     float64
		}{
			{ml.ReLUSqr, gguf.TypeQ8_0, gguf.TypeQ8_0, 0},
			{ml.ReLUSqr, gguf.TypeQ4_K, gguf.TypeQ8_0, 0},
			{ml.GELU, gguf.TypeQ8_0, gguf.TypeQ8_0, 0},
			{ml.SwiGLU, gguf.TypeQ8_0, gguf.TypeQ8_0, 0},
			{ml.SwiGLU, gguf.TypeQ8_0, gguf.TypeQ8_0, 1.6448533535003662},
		} {
			t.Run(fmt.Sprintf("%v/%v/%v/topk%g", c.act, c.up, c.down, c.topk), func(t *testing.T) { int8MLP(t, e, c.act, c.up, c.down, c.topk) })
		}
	})
}

func int8MLP(t *testing.T, e *Engine, act ml.Act, upType, downType gguf.Type, topk float64) {
	rng := rand.New(rand.NewPCG(53, uint64(upType)))
	b := testBackend(e)
	b.prec.Int8 = true
	b.qw.mode = WeightsQuantized
	defer b.Close()
	const n, in, F, out, N, K = 70, 256, 96, 72, 5, 2
	blocks := func(typ gguf.Type, in, rows int) []byte { return randBlocks(t, rng, typ, in, rows) }
	// mlp is the references' MLP of the matrices' expert ex for x's rows:
	// n rows of in values.
	mlp := func(m *ml.MLP, ex int, x []float32, n int) []float32 {
		u := int8Want(t, m.Up.Type, m.Up.Data, ex*F, F, x, n, in, in)
		a := make([]float32, len(u))
		switch {
		case act == ml.GELU:
			nn.GELU(a, u, nil)
		case m.Gate == nil:
			for i, v := range u {
				r := max(v, 0)
				a[i] = r * r
			}
		default:
			g := int8Want(t, m.Gate.Type, m.Gate.Data, ex*F, F, x, n, in, in)
			if topk > 0 {
				for r := range n {
					nn.GaussianTopK(g[r*F:(r+1)*F], topk)
				}
			}
			nn.SwiGLU(a, g, u)
		}
		return int8Want(t, m.Down.Type, m.Down.Data, ex*out, out, a, n, F, F)
	}
	x := actRows(rng, n, in)
	check := func(what string, got, want []float32) {
		t.Helper()
		var c bitCompare
		for i := range want {
			c.add(got[i], want[i], i)
		}
		c.check(t, what, 0, 0)
	}
	for _, experts := range []int{0, N} {
		exps, stack := "", 1
		if experts > 0 {
			exps, stack = "_exps", N
		}
		m := &ml.MLP{Act: act, TopK: topk,
			Up:   &ml.Matrix{Name: "blk.0.ffn_up" + exps + ".weight", Type: upType, In: in, Out: F, Experts: experts},
			Down: &ml.Matrix{Name: "blk.0.ffn_down" + exps + ".weight", Type: downType, In: F, Out: out, Experts: experts}}
		if !act.Ungated() {
			m.Gate = &ml.Matrix{Name: "blk.0.ffn_gate" + exps + ".weight", Type: upType, In: in, Out: F, Experts: experts}
		}
		for _, w := range []*ml.Matrix{m.Gate, m.Up, m.Down} {
			if w == nil {
				continue
			}
			w.Data = blocks(w.Type, w.In, w.Out*stack)
			if err := b.Prepare(w); err != nil {
				t.Fatal(err)
			}
			if _, ok := b.int8Format(w); !ok {
				t.Fatalf("%s: no int8 product", w.Name)
			}
		}
		b.Reset()
		xt, dst := b.put(t, n, in, x), b.Alloc(n, out)
		if experts == 0 {
			b.MLP(dst, xt, m)
			got := b.Read(dst)
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			check(fmt.Sprintf("MLP %v (int8)", act), got, mlp(m, 0, x, n))
			continue
		}
		r := unevenRoute(t, rng, n, N, K, false)
		tiled := launched(e, "i8mm_g32t")
		b.Experts(dst, xt, m, r)
		got := b.Read(dst)
		if err := b.Err(); err != nil {
			t.Fatal(err)
		}
		if n, want := launched(e, "i8mm_g32t")-tiled, 2+b2i(m.Gate != nil); e.Ordinal < 0 && n != want {
			t.Errorf("Experts: %d tiled int8 products, want one per matrix (%d)", n, want)
		}
		want := make([]float32, n*out)
		for tk := range n {
			row := want[tk*out : (tk+1)*out]
			for j := range K {
				y := mlp(m, int(r.Expert[tk*K+j]), x[tk*in:(tk+1)*in], 1)
				for o, v := range y {
					if v *= r.Weight[tk*K+j]; j == 0 {
						row[o] = v
					} else {
						row[o] += v
					}
				}
			}
		}
		check(fmt.Sprintf("Experts %v (int8)", act), got, want)
	}
}

// randBlocks returns rows rows of in random weights (standard deviation
// 1) quantized to typ.
func randBlocks(t testing.TB, rng *rand.Rand, typ gguf.Type, in, rows int) []byte {
	t.Helper()
	rb, _ := typ.RowSize(uint64(in))
	data := make([]byte, int(rb)*rows)
	if err := quant.Quantize(typ, randF32(rng, in*rows, 1), data); err != nil {
		t.Fatal(err)
	}
	return data
}

// TestEndToEndInt8KV: the int8 mode with llama.cpp's quantized caches on
// the GPU against the CPU, tiny-llama-spm-q8_0 (heads of 64, which
// llama.cpp turns before such a cache: both backends turn them as
// ggml-cpu does, fwht_f32 and nn.FWHT, the same bits), two windows of 256
// tokens. The CPU attends as llama.cpp's flash attention over the cache's
// blocks, the GPU in float32 over their values, so the output's
// quantization still moves now and then, as with a bf16 cache
// (TestEndToEndInt8). Emulation, 383 targets: q8_0 mean 0.0207, PPL
// ratio 0.99978; q4_0 0.0320, 1.00064 (iq4_nl 0.0315, 1.0015). Without
// the GPU's turns the codes of the 4-bit caches differed: q8_0 0.0231,
// 0.99882; q4_0 0.117, 0.99695 (iq4_nl 0.104, 0.98434). The device's
// bounds, twice the emulator's, await an H200.
//
// A MiniCPM3 of value heads of 64 padded to its key heads of 96, whose
// values llama.cpp turns and keys not (fwhtHeads over the values' 64 of
// each head), q4_0, emulation: mean 0.0140, PPL ratio 0.99963 (without
// the GPU's turn of the values 0.0238, 1.00059). A DeepSeek-V4 of heads
// of 128 (every expert used), whose keys are its values (ml.Attn.
// KeyValues: q and the raw and compressed keys turned by 128, the output
// back), q4_0, a window of 256: mean 0.138, PPL ratio 1.0166, where an
// f16 cache is at 0.033 (the indexer's choices flip past row 35 as the
// layers' outputs move); without the GPU's turns 0.235.
func TestEndToEndInt8KV(t *testing.T) {
	path, toks := e2eModel(t, oracle.Require(t), "tiny-llama-spm-q8_0")
	dir, tok, ft := q8Vocab(t)
	mini := filepath.Join(t.TempDir(), "minicpm3.gguf")
	s := mkmodel.Shape{Arch: "minicpm3", Embd: 128, Layers: 2, Heads: 4, KVHeads: 4, HeadDim: 64, FFN: 256,
		Context: 2048, Vocab: tok.NVocab, RopeBase: 10000, Eps: 1e-5}
	if err := mkmodel.Write(mini, &mkmodel.Config{Shape: s, Type: ft, Seed: 1, Tokenizer: tok, Residual: 1}); err != nil {
		t.Fatal(err)
	}
	miniToks := archTokens(dir, "tiny-llama-spm-q8_0", tok.NVocab, 512)
	dsv4 := filepath.Join(t.TempDir(), "deepseek4.gguf")
	s = mkmodel.Shape{Arch: "deepseek4", Embd: 128, Layers: 4, Heads: 4, KVHeads: 1, HeadDim: 128, FFN: 256, Window: 16,
		Experts: 8, ExpertsUsed: 8, ExpertFFN: 64, SharedFFN: 64, Context: 2048, Vocab: tok.NVocab, RopeBase: 10000, Eps: 1e-5}
	if err := mkmodel.Write(dsv4, &mkmodel.Config{Shape: s, Type: ft, Seed: 1, Tokenizer: tok, Residual: 1}); err != nil {
		t.Fatal(err)
	}
	onDevices(t, func(t *testing.T, e *Engine) {
		for _, c := range []struct {
			path, kv  string
			toks      []int32
			mean, ppl float64 // the emulator's bounds on mean |Δ| and |PPL ratio - 1|
		}{{path, "q8_0", toks, 0.025, 0.0004}, {path, "q4_0", toks, 0.04, 0.001}, {mini, "q4_0", miniToks, 0.018, 0.0006}, {dsv4, "q4_0", miniToks, 0.18, 0.03}} {
			wins := []e2eWindow{{0, 256, 1}, {100, 356, 228}}
			if c.path == dsv4 {
				wins = wins[:1]
			}
			s := e2eCase(t, e, Mixed, c.path, model.Options{KVDtype: c.kv, Activations: model.ActInt8}, wins, c.toks, false)
			t.Logf("int8, %s, %s cache: %v", filepath.Base(c.path), c.kv, s)
			f := 1.0
			if e.Ordinal >= 0 {
				f = 2
			}
			if mean := s.sumAbs / float64(s.n); mean > f*c.mean || math.Abs(s.pplRatio()-1) > f*c.ppl {
				t.Errorf("int8, %s cache: %v; want mean |Δ| <= %g and |PPL ratio - 1| <= %g", c.kv, s, f*c.mean, f*c.ppl)
			}
		}
	})
}
