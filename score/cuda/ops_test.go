package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/quant"
	"ppl.dev/score/cuda/cublas"
	"ppl.dev/score/kvcache"
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// Parity of the elementwise kernels (elementwise.cu) with the CPU
// backend's arithmetic (score/model/cpu.go), on random and adversarial
// input: huge and tiny values, gates far in both tails.
func TestElementwiseParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(21, 1))
		const rows, cols = 11, 97
		n := rows * cols
		x, y := randF32(rng, n, 3), randF32(rng, n, 3)
		for i, v := range []float32{0, -0, 1e-30, -1e30, 3e38, 80, -80, 1e-45} {
			x[i], y[n-1-i] = v, -v
		}
		check := func(what string, got, want []float32, maxULP int64, frac float64) {
			t.Helper()
			var c bitCompare
			for i := range want {
				c.add(got[i], want[i], i)
			}
			c.check(t, what, maxULP, frac)
		}
		put := func(v []float32) ptr { return devPut(t, e, v) }

		xp, yp := put(x), put(y)
		do(t, e, func() error { return e.addF32(xp, yp, int64(n)) })
		want := make([]float32, n)
		copy(want, x)
		nn.Add(want, y)
		check("add_f32 (exact)", devGet[float32](t, e, xp, n), want, 0, 0)

		const s = 0.0883883476483184 // 1/sqrt(128), rounded to float32 as Scale does
		xp = put(x)
		do(t, e, func() error { return e.scaleF32(xp, int64(n), float32(s)) })
		for i, v := range x {
			want[i] = v * float32(s)
		}
		check("scale_f32 (exact)", devGet[float32](t, e, xp, n), want, 0, 0)

		const c = 0.75 // values of x past it of both signs, NaN, -Inf
		xc := slices.Clone(x)
		xc[0], xc[1] = float32(math.NaN()), float32(math.Inf(-1))
		xp = put(xc)
		do(t, e, func() error { return e.clampF32(xp, int64(n), c) })
		for i, v := range xc {
			want[i] = min(max(v, -c), c)
		}
		check("clamp_f32 (exact)", devGet[float32](t, e, xp, n), want, 0, 0)

		for _, f := range []ml.GateFn{ml.SigmoidGate, ml.SoftplusGate, ml.Softplus2Gate} {
			for _, gcols := range []int{cols, 1} {
				gate := randF32(rng, rows*gcols, 4)
				// e^800 overflows (the sigmoid's product is 0); softplus is
				// g itself past 20 (past 20/ln 2 = 28.85 in base 2) and
				// underflows to 0 below -745.
				gate[0], gate[1], gate[2], gate[len(gate)-1] = 800, 20.5, 29, -800
				xp, gp := put(x), put(gate)
				do(t, e, func() error { return e.gateMul(xp, gp, rows, cols, gcols, f) })
				for r := range rows {
					for c := range cols {
						gv := float64(gate[r*gcols+min(c, gcols-1)])
						switch f {
						case ml.SoftplusGate:
							want[r*cols+c] = float32(float64(x[r*cols+c]) * nn.Softplus(gv))
						case ml.Softplus2Gate:
							want[r*cols+c] = float32(float64(x[r*cols+c]) * nn.Softplus2(gv))
						default:
							want[r*cols+c] = float32(float64(x[r*cols+c]) / (1 + math.Exp(-gv)))
						}
					}
				}
				// exp and log1p in float64 within an ulp of Go's: equal after
				// rounding but for ties.
				check(fmt.Sprintf("gate_mul %d", f), devGet[float32](t, e, xp, n), want, 1, 1e-3)
			}
		}

		xp = put(x)
		p := nn.NewXIELU(0.8, 0.8, 0.5, -1e-6)
		do(t, e, func() error { return e.xielu(xp, int64(n), p) })
		p.Ref(want, x)
		// expm1 in float64 within an ulp of Go's: equal after rounding but for ties.
		check("xielu_f32", devGet[float32](t, e, xp, n), want, 1, 1e-3)

		const cp = 30.0
		xp = put(x)
		do(t, e, func() error { return e.softcap(xp, int64(n), cp) })
		for i, v := range x {
			want[i] = float32(cp * math.Tanh(float64(v)/cp))
		}
		check("softcap", devGet[float32](t, e, xp, n), want, 1, 1e-3)

		for _, ht := range []struct {
			t   int
			enc func(float32) uint16
			dec func(uint16) float32
		}{{0, quant.F32ToBF16, quant.BF16ToF32}, {1, quant.F32ToF16, quant.F16ToF32}} {
			h := make([]uint16, n)
			for i, v := range x {
				h[i] = ht.enc(v)
				want[i] = ht.dec(h[i])
			}
			hp, out := devPut(t, e, h), devAlloc(t, e, int64(4*n))
			typ := bf16
			if ht.t == 1 {
				typ = f16
			}
			do(t, e, func() error { return e.widenHalf(out, hp, int64(n), typ) })
			check("widen_half "+halfName(typ)+" (exact)", devGet[float32](t, e, out, n), want, 0, 0)
		}
	})
}

// testMatrix is a GGUF matrix of rows × in values v, of type F32 (a
// float32 product on the GPU) or F16 (v rounded to fp16: the half path).
func testMatrix(name string, typ gguf.Type, in, out, experts int, v []float32) *ml.Matrix {
	var data []byte
	for _, x := range v {
		if typ == gguf.TypeF16 {
			data = binary.LittleEndian.AppendUint16(data, quant.F32ToF16(x))
		} else {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(x))
		}
	}
	return &ml.Matrix{Name: name, Type: typ, In: in, Out: out, Experts: experts, Data: data}
}

// operandOf is the value a product of a matrix of type typ reads for v:
// v rounded to fp16 for F16 (weights and inputs alike), v itself for F32.
func operandOf(typ gguf.Type) func(float32) float64 {
	if typ == gguf.TypeF16 {
		return func(v float32) float64 { return float64(quant.F16ToF32(quant.F32ToF16(v))) }
	}
	return func(v float32) float64 { return float64(v) }
}

// testBackend is a backend without a model, for operation tests.
func testBackend(e *Engine) *gpuBackend {
	b := &gpuBackend{e: e, prec: Mixed, kvK: kvBF16, kvV: kvBF16, set: newWeightSet(e),
		ropes: map[*nn.RoPE]*ropeTab{}, ones: map[int]ptr{}, flash: map[attnShape]string{}}
	b.set.join()
	return b
}

func (b *gpuBackend) put(t *testing.T, rows, cols int, v []float32) ml.Tensor {
	x := b.Alloc(rows, cols)
	do(t, b.e, func() error { return upload(b.e, x.(*gt).p, v) })
	return x
}

// Embed on an F32 table (a float32 matrix: its rows copied as they are,
// gather_rows) and on an F16 one (the half path, or the table's blocks
// with a testBackend that keeps none): the table's rows, bit for bit.
func TestEmbedStorage(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(24, 1))
		const vocab, dim, n = 50, 24, 9
		tokens := []int32{0, 49, 3, 3, 17, 0, 22, 48, 1}
		for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeF16} {
			v := randF32(rng, vocab*dim, 2)
			v[3*dim+1] = 1e-30 // below fp16's range: kept by F32
			w := testMatrix("token_embd.weight", typ, dim, vocab, 0, v)
			b := testBackend(e)
			if err := b.Prepare(w); err != nil {
				t.Fatal(err)
			}
			dst := b.Alloc(n, dim)
			b.Embed(dst, w, tokens)
			got := b.Read(dst)
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			rh := operandOf(typ)
			var c bitCompare
			for i, tok := range tokens {
				for j := range dim {
					c.add(got[i*dim+j], float32(rh(v[int(tok)*dim+j])), i*dim+j)
				}
			}
			c.check(t, fmt.Sprintf("embedding from an %v table (exact)", typ), 0, 0)
			b.Close()
		}
	})
}

// mlpVals are the values of an MLP's matrices as a test made them (stacks
// of experts of in → F → out; gate nil for an ungated MLP) and Down's bias.
type mlpVals struct {
	act          ml.Act
	topk         float64 // ml.MLP.TopK
	in, F, out   int
	gate, up, dn []float32
	bias         []float32 // out per expert
	rh           func(float32) float64
	cut, seen    int // Up outputs ReLU² (or gates the top-k) set to 0, of all it saw
}

// The plain definition of an MLP (ml.Backend.MLP) in float64 from the
// values the device's products read (rh: fp16 weights and inputs for F16
// matrices, the exact values for F32), with float32 roundings where the
// kernels round: each product, the activation, ffn_down's input (rh again,
// times the power of two amax's scaling chose: 2^k, then 2^-k on the
// product's float32), Down's bias.

// acts is expert e's activations (F float32s) of the token row x: with
// topk, the products of Gate sparsified first (nn.GaussianTopK).
func (v *mlpVals) acts(x []float32, e int) []float32 {
	in, F := v.in, v.F
	act, gf, uf := make([]float32, F), make([]float32, F), make([]float32, F)
	for f := range F {
		var gs, us float64
		for i := range in {
			xi := v.rh(x[i])
			if v.gate != nil {
				gs += v.rh(v.gate[(e*F+f)*in+i]) * xi
			}
			us += v.rh(v.up[(e*F+f)*in+i]) * xi
		}
		gf[f], uf[f] = float32(gs), float32(us)
	}
	if v.topk > 0 {
		nn.GaussianTopK(gf, v.topk)
		for _, g := range gf {
			v.cut += b2i(g == 0)
		}
		v.seen += F
	}
	for f := range F {
		g, u := float64(gf[f]), float64(uf[f])
		switch v.act {
		case ml.SwiGLU:
			act[f] = float32(g / (1 + math.Exp(-g)) * u)
		case ml.GeGLU:
			nn.GeGLU(act[f:f+1], gf[f:f+1], uf[f:f+1])
		case ml.ReLUSqr, ml.GELU:
			if v.act == ml.GELU {
				nn.GELU(act[f:f+1], uf[f:f+1], nil)
			} else {
				r := max(u, 0)
				act[f] = float32(r * r)
			}
			if u < 0 {
				v.cut++
			}
			v.seen++
		default:
			panic(fmt.Sprintf("mlpVals: activation %v", v.act))
		}
	}
	return act
}

// down is expert e's output from its activations act, scaled by 2^k
// before their rounding to ffn_down's input.
func (v *mlpVals) down(act []float32, e, k int) []float32 {
	F, out := v.F, v.out
	res := make([]float32, out)
	for o := range out {
		var ds float64
		for f, a := range act {
			ds += v.rh(v.dn[(e*out+o)*F+f]) * v.rh(a*pow2f(k))
		}
		res[o] = float32(ds)*pow2f(-k) + v.bias[e*out+o]
	}
	return res
}

// mlpCase makes an MLP of act (gated unless ReLU²) of experts experts
// (0: a plain MLP) with random values of type typ, prepared on b.
func mlpCase(t *testing.T, b *gpuBackend, rng *rand.Rand, act ml.Act, typ gguf.Type, experts, in, F, out int) (*ml.MLP, *mlpVals) {
	N := max(experts, 1)
	v := &mlpVals{act: act, in: in, F: F, out: out, rh: operandOf(typ),
		up: randF32(rng, N*F*in, 0.3), dn: randF32(rng, N*out*F, 0.3), bias: randF32(rng, N*out, 0.1)}
	exps := ""
	if experts > 0 {
		exps = "_exps"
	}
	m := &ml.MLP{Act: act,
		Up:   testMatrix("blk.0.ffn_up"+exps+".weight", typ, in, F, experts, v.up),
		Down: testMatrix("blk.0.ffn_down"+exps+".weight", typ, F, out, experts, v.dn)}
	m.Down.Bias = v.bias
	if !act.Ungated() {
		v.gate = randF32(rng, N*F*in, 0.3)
		m.Gate = testMatrix("blk.0.ffn_gate"+exps+".weight", typ, in, F, experts, v.gate)
	}
	for _, w := range []*ml.Matrix{m.Gate, m.Up, m.Down} {
		if w == nil {
			continue
		}
		if err := b.Prepare(w); err != nil {
			t.Fatal(err)
		}
	}
	return m, v
}

// mlpBound is how far an MLP's outputs of activation act on matrices of
// type typ may be from mlpVals' (relative to 1 + |value|): the same
// roundings, so on the emulated devices (whose GEMM sums in float64) none,
// but on the host device for SwiGLU, whose CUDA C takes libm's exp (within
// an ulp of Go's: an activation an ulp off on a rare tie). On a GPU
// cuBLAS sums float32 in its own order, and the outputs move by more than
// a few ulps where that order counts: where Down's terms cancel (ReLU² of
// inputs ×150, terms to 10⁶) and, on F16 matrices, where an activation a
// float32 ulp off rounds to the other fp16 neighbour (2^-11 of it) on its
// way into Down. An H200 (2026-12-04): MLPs F16 1.4e-5 to 6.4e-4, F32 1e-6
// to 3.3e-4; experts F16 7.5e-4 to 2.4e-3, F32 4.2e-6 to 1.2e-5.
func mlpBound(e *Engine, act ml.Act, typ gguf.Type) float64 {
	_, host := e.dev.(*hostDevice)
	switch {
	case e.Ordinal >= 0 && typ == gguf.TypeF16:
		return 5e-3
	case e.Ordinal >= 0:
		return 1e-3
	case host && act != ml.ReLUSqr:
		return 1e-6 // GELU's tanh too
	}
	return 0
}

// MLP against its plain definition (mlpVals), gated (SwiGLU) and ungated
// (ReLU²: Up's outputs of both signs, the negatives cut to 0), on F16
// matrices (fp16 products, the activation into ffn_down's fp16 input:
// swiglu_half, glu_half) and F32 ones (float32 products, the activation in
// float32: glu_f32), with widths no multiple of the kernels' 256 threads
// or of a 64-row tile; ReLU² past fp16's range (inputs ×150: Up's
// outputs to about 10³, their squares to 10⁶, ffn_down's input scaled by
// 2^k, k < 0); and Gemma 3n's top-k gate (TopK: gaussian_topk_f32 before
// the activation, SwiGLU and GeGLU, in both paths; gates of 300, past one
// block's 128 threads).
func TestMLPParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		const g3nTopK = 1.6448533535003662 // Gemma 3n's: the normal's 95th percentile
		for _, c := range []struct {
			act        ml.Act
			typ        gguf.Type
			in, F, out int
			xscale     float64
			scaled     bool // ffn_down's fp16 input scaled by amax
			topk       float64
		}{
			{ml.SwiGLU, gguf.TypeF16, 48, 100, 24, 1, false, 0},
			{ml.ReLUSqr, gguf.TypeF16, 48, 100, 24, 1, false, 0},
			{ml.ReLUSqr, gguf.TypeF16, 64, 37, 70, 1, false, 0},
			{ml.ReLUSqr, gguf.TypeF16, 48, 100, 24, 150, true, 0},
			{ml.SwiGLU, gguf.TypeF32, 48, 100, 24, 1, false, 0},
			{ml.ReLUSqr, gguf.TypeF32, 48, 100, 24, 1, false, 0},
			{ml.ReLUSqr, gguf.TypeF32, 64, 37, 70, 1, false, 0},
			{ml.ReLUSqr, gguf.TypeF32, 48, 100, 24, 150, false, 0},
			{ml.GELU, gguf.TypeF16, 48, 100, 24, 1, false, 0},
			{ml.GELU, gguf.TypeF32, 64, 37, 70, 1, false, 0},
			{ml.SwiGLU, gguf.TypeF16, 48, 100, 24, 1, false, g3nTopK},
			{ml.GeGLU, gguf.TypeF16, 48, 300, 24, 1, false, g3nTopK},
			{ml.SwiGLU, gguf.TypeF32, 48, 100, 24, 1, false, 0.5},
			{ml.GeGLU, gguf.TypeF32, 48, 300, 24, 1, false, g3nTopK},
		} {
			t.Run(fmt.Sprintf("%v/%v/%dx%dx%d/x%g/topk%g", c.act, c.typ, c.in, c.F, c.out, c.xscale, c.topk), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(25, uint64(c.F)))
				const n = 70
				b := testBackend(e)
				defer b.Close()
				m, v := mlpCase(t, b, rng, c.act, c.typ, 0, c.in, c.F, c.out)
				m.TopK, v.topk = c.topk, c.topk
				x := randF32(rng, n*c.in, c.xscale)
				xt, dst := b.put(t, n, c.in, x), b.Alloc(n, c.out)
				b.MLP(dst, xt, m)
				got := b.Read(dst)
				if err := b.Err(); err != nil {
					t.Fatal(err)
				}
				acts := make([][]float32, n)
				var amax float32
				for tk := range n {
					acts[tk] = v.acts(x[tk*c.in:(tk+1)*c.in], 0)
					for _, a := range acts[tk] {
						amax = max(amax, float32(math.Abs(float64(a))))
					}
				}
				k := 0
				if c.typ == gguf.TypeF16 {
					k = downExp(math.Float32bits(amax))
				}
				if (k != 0) != c.scaled {
					t.Fatalf("largest activation %v: ffn_down's input scaled by 2^%d", amax, k)
				}
				var worst float64
				for tk := range n {
					for o, want := range v.down(acts[tk], 0, k) {
						worst = max(worst, math.Abs(float64(got[tk*c.out+o]-want))/(1+math.Abs(float64(want))))
					}
				}
				checkMLP(t, fmt.Sprintf("MLP (largest activation %.3g, scaled by 2^%d)", amax, k), v, worst, mlpBound(e, v.act, c.typ))
			})
		}
	})
}

// checkMLP reports an MLP test's largest difference (relative to
// 1 + |value|) and fails past bound; an ungated one must have seen
// pre-activations of both signs, a top-k gates both kept and cut.
func checkMLP(t *testing.T, what string, v *mlpVals, worst, bound float64) {
	t.Helper()
	t.Logf("%s %v: largest difference %.2g (relative to 1 + |value|)", what, v.act, worst)
	if v.act.Ungated() || v.topk > 0 {
		cutter := "the ungated " + v.act.String() // sees negatives as well
		if v.topk > 0 {
			cutter = "the top-k"
		}
		t.Logf("%s cut %d of %d pre-activations", cutter, v.cut, v.seen)
		if v.cut == 0 || v.cut == v.seen {
			t.Errorf("%s: %s cut %d of %d pre-activations: want both kept and cut", what, cutter, v.cut, v.seen)
		}
	}
	if worst > bound {
		t.Errorf("%s differs from its definition by %g (bound %g)", what, worst, bound)
	}
}

// Experts against its plain definition: per token, the K chosen experts'
// MLPs (mlpVals), scaled by their weights and added in the order of the
// choices (ml.Backend.Experts), gated (SwiGLU) and ungated (ReLU²), on F16
// and F32 stacks as TestMLPParity; with more tokens than a block
// (expertRows) on a GPU, so that the grouping by expert runs over several
// blocks, with uneven token counts per expert and an expert no token
// chooses; and with the weights on the experts' inputs (Routing.Before,
// Llama 4's).
func TestExpertsParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		for _, c := range []struct {
			act    ml.Act
			typ    gguf.Type
			F      int
			before bool
		}{{ml.SwiGLU, gguf.TypeF16, 40, false}, {ml.SwiGLU, gguf.TypeF32, 40, false}, {ml.ReLUSqr, gguf.TypeF16, 37, false},
			{ml.ReLUSqr, gguf.TypeF32, 37, false}, {ml.SwiGLU, gguf.TypeF16, 40, true}, {ml.SwiGLU, gguf.TypeF32, 40, true}} {
			t.Run(fmt.Sprintf("%v/%v/before=%v", c.act, c.typ, c.before), func(t *testing.T) { expertsParity(t, e, c.act, c.typ, c.F, c.before) })
		}
	})
}

// unevenRoute routes n tokens to K of N experts by softmax over random
// logits, skewed: expert 0 chosen by most tokens, expert 1 by few (by
// every 20th at least), and with noneLast expert N-1 by none; it checks
// that the counts came out so.
func unevenRoute(t *testing.T, rng *rand.Rand, n, N, K int, noneLast bool) *ml.Routing {
	t.Helper()
	logits := randF32(rng, n*N, 2)
	for i := range n {
		logits[i*N] += 3
		if logits[i*N+1] -= 3; i%20 == 0 {
			logits[i*N+1] = 10
		}
		if noneLast {
			logits[i*N+N-1] = -1e3
		}
	}
	router := ml.Router{Experts: N, K: K, Gating: ml.GateSoftmax, Norm: true}
	r, err := router.Route(logits)
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, N)
	for _, x := range r.Expert {
		counts[x]++
	}
	if noneLast && counts[N-1] != 0 || counts[1] == 0 || counts[1]*4 > counts[0] {
		t.Fatalf("tokens per expert %v: want them uneven (none for the last: %v)", counts, noneLast)
	}
	return r
}

func expertsParity(t *testing.T, e *Engine, act ml.Act, typ gguf.Type, F int, before bool) {
	rng := rand.New(rand.NewPCG(22, 1))
	const N, K, in, out = 6, 3, 48, 24
	n := expertRows + 37
	if e.Ordinal < 0 {
		n = 300 // the simulator's products are plain Go
	}
	b := testBackend(e)
	defer b.Close()
	m, v := mlpCase(t, b, rng, act, typ, N, in, F, out)
	x := randF32(rng, n*in, 1)
	r := unevenRoute(t, rng, n, N, K, true)
	r.Before = before
	b.Reset()
	xt := b.put(t, n, in, x)
	dst := b.Alloc(n, out)
	batched := launched(e, "cublasGemmBatchedEx")
	b.Experts(dst, xt, m, r)
	got := b.Read(dst)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	// One expert at a time: the same products (bit for bit on the
	// emulator, whose GEMM sums each output alone; the host device runs
	// the same kernels as it, and takes its time).
	if _, host := e.dev.(*hostDevice); !host {
		expertsTogether = 1
		b.Reset()
		xt, dst = b.put(t, n, in, x), b.Alloc(n, out)
		b.Experts(dst, xt, m, r)
		one := b.Read(dst)
		expertsTogether = 0
		if err := b.Err(); err != nil {
			t.Fatal(err)
		}
		var apart float64
		for i := range got {
			apart = max(apart, math.Abs(float64(got[i]-one[i])))
			if e.Ordinal < 0 && math.Float32bits(got[i]) != math.Float32bits(one[i]) {
				t.Fatalf("output %d: %v with the experts together, %v one at a time", i, got[i], one[i])
			}
		}
		t.Logf("experts together and one at a time: max |Δ| %.3g", apart)
	}
	if e.Ordinal < 0 {
		// The experts of a block run together: one batched GEMM per
		// matrix and padded row count.
		choices, k := n, K
		if before {
			choices, k = n*K, 1
		}
		want := 0
		for r0 := 0; r0 < choices; r0 += expertRows {
			count := make([]int, N)
			for _, x := range r.Expert[r0*k : min(choices, r0+expertRows)*k] {
				count[x]++
			}
			pads := map[int]bool{}
			for _, c := range count {
				if c > 0 {
					pads[expertPad(c)] = true
				}
			}
			want += len(pads) * (2 + b2i(m.Gated()))
		}
		if got := launched(e, "cublasGemmBatchedEx") - batched; got != want {
			t.Errorf("%d batched GEMMs, want %d (one per matrix and padded row count)", got, want)
		}
	}

	var worst float64
	var amax float32
	ref := make([]float32, out)
	for tk := range n {
		for j := range K {
			w, xr := r.Weight[tk*K+j], x[tk*in:(tk+1)*in]
			if before {
				xr = slices.Clone(xr)
				for i := range xr {
					xr[i] *= w
				}
				w = 1
			}
			a := v.acts(xr, int(r.Expert[tk*K+j]))
			for _, x := range a {
				amax = max(amax, float32(math.Abs(float64(x))))
			}
			res := v.down(a, int(r.Expert[tk*K+j]), 0)
			for o := range out {
				res[o] *= w
				if j == 0 {
					ref[o] = res[o]
				} else {
					ref[o] += res[o]
				}
			}
		}
		for o, want := range ref {
			worst = max(worst, math.Abs(float64(got[tk*out+o]-want))/(1+math.Abs(float64(want))))
		}
	}
	if k := downExp(math.Float32bits(amax)); k != 0 {
		t.Fatalf("largest activation %v: ffn_down's input scaled by 2^%d, which the reference leaves out", amax, k)
	}
	checkMLP(t, fmt.Sprintf("experts (%v, %d tokens, %d of %d experts each)", typ, n, K, N), v, worst, mlpBound(e, v.act, typ))
}

// launched counts the launches of a kernel (or "cublasGemmBatchedEx")
// on an emulated device; 0 on a GPU.
func launched(e *Engine, kernel string) int {
	var s *simDevice
	n := 0
	switch d := e.dev.(type) {
	case *simDevice:
		s = d
	case *hostDevice:
		s, n = d.simDevice, hostRan(e, kernel)
	default:
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return n + s.launches[kernel]
}

// expertPad rounds a count up to a multiple of 8 or of an eighth of its
// power of two: at most 1/8 more rows, and few distinct counts.
func TestExpertPad(t *testing.T) {
	for _, c := range []struct{ c, want int }{{0, 0}, {1, 8}, {8, 8}, {9, 16}, {127, 128}, {128, 128}, {129, 144},
		{255, 256}, {256, 256}, {257, 288}, {1000, 1024}, {4096, 4096}, {4097, 4608}} {
		if got := expertPad(c.c); got != c.want {
			t.Errorf("expertPad(%d) = %d, want %d", c.c, got, c.want)
		}
	}
	for c := 1; c <= 1<<15; c++ {
		if p := expertPad(c); p < c || p-c > max(7, c/8) {
			t.Fatalf("expertPad(%d) = %d: more than an eighth (or 7) above", c, p)
		}
	}
}

// The plain attention kernel's sliding window, sinks and soft-cap against
// nn.Attention's (score/nn/attention.go) over the same bf16 cache: windows
// shorter and longer than the kernel's 128-key chunks, sinks far above and
// below the scores (the running maximum starts at the sink), soft-caps of
// 1.5 (biting: the scores reach 4) alone and with a window, Llama 4's
// chunks (of 128 and 100 keys, the latter with a window of 40), ALiBi's
// slopes (maximum bias 8; 16 with a window, sinks and a soft-cap), and
// sparse attention's key sets (sparseKeys: one for every KV head, one per
// KV head, with sinks and a window).
func TestAttentionWindowParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(23, 1))
		const n, heads, kvheads, hd = 300, 4, 2, 32
		q := randF32(rng, n*heads*hd, 1)
		k := randF32(rng, n*kvheads*hd, 1)
		v := randF32(rng, n*kvheads*hd, 1)
		kr, vr := append([]float32(nil), k...), append([]float32(nil), v...)
		var blk kvcache.Block
		kvcache.RoundTrip(kvcache.BF16{}, &blk, kr, n, kvheads, hd)
		kvcache.RoundTrip(kvcache.BF16{}, &blk, vr, n, kvheads, hd)
		kt, vt := storeKV(t, e, kvBF16, kvBF16, k, v, n, kvheads, hd)
		qp := devPut(t, e, q)
		scale := 1 / math.Sqrt(float64(hd))
		for _, c := range []struct {
			window int
			sinks  []float32
			cap    float64
			chunk  int
			alibi  float32 // ALiBi's maximum bias
			groups int     // > 0: a key set of so many groups
		}{{32, nil, 0, 0, 0, 0}, {200, nil, 0, 0, 0, 0}, {0, []float32{-20, 0, 3, 30}, 0, 0, 0, 0}, {50, []float32{1, -1, 8, 0.5}, 0, 0, 0, 0}, {0, nil, 1.5, 0, 0, 0}, {40, nil, 1.5, 0, 0, 0},
			{0, nil, 0, 128, 0, 0}, {40, nil, 0, 100, 0, 0}, {0, nil, 0, 0, 8, 0}, {50, []float32{1, -1, 8, 0.5}, 1.5, 0, 16, 0},
			{0, nil, 0, 0, 0, 1}, {0, nil, 0, 0, 0, kvheads}, {250, []float32{1, -1, 8, 0.5}, 0, 0, 0, kvheads}} {
			want := make([]float32, len(q))
			att := nn.Attention{Heads: heads, KVHeads: kvheads, HeadDim: hd, Scale: scale, Window: c.window, Sinks: c.sinks, SoftCap: c.cap, Chunk: c.chunk}
			var sp ptr
			if c.sinks != nil {
				sp = devPut(t, e, c.sinks)
			}
			plain, mask := plainOpts{softCap: c.cap, chunk: c.chunk}, attnMask{window: c.window, sinks: sp}
			if c.groups > 0 {
				att.Keys = sparseKeys(rng, n, c.groups)
				mask.keys, mask.kgroups = devPut(t, e, att.Keys.Words()), c.groups
			}
			if c.alibi > 0 {
				att.Slopes = nn.ALiBiSlopes(heads, c.alibi)
				mask.slopes = devPut(t, e, att.Slopes)
			}
			att.Forward(nn.NewContext(0), want, q, kr, vr, n)
			out := devAlloc(t, e, int64(4*len(q)))
			for _, o := range []struct {
				otype    int
				rel, abs float64
			}{
				{isF16(f16), 0x1p-8, 1e-3}, // float32 softmax and sums, fp16 output (2^-11 relative)
				{otypeF32, 0x1p-17, 1e-6},  // float32 output (the int8 mode's)
			} {
				do(t, e, func() error {
					return e.attentionPlain(out, qp, n, heads, kvheads, hd, scale, mask, plain, kt, vt, o.otype)
				})
				got := devGet[float32](t, e, out, len(q))
				if o.otype != otypeF32 {
					got = fromHalf(devGet[uint16](t, e, out, len(q)), f16)
				}
				worst, at := worstError(got, want, o.abs, o.rel)
				t.Logf("window %d, sinks %v, cap %v, chunk %d, ALiBi %v, key groups %d, output %d: worst error / tolerance %.3f (element %d: %v vs %v)", c.window, c.sinks, c.cap, c.chunk, c.alibi, c.groups, o.otype, worst, at, got[at], want[at])
				if worst > 1 || worst != worst {
					t.Errorf("window %d, sinks %v, cap %v, key groups %d, output %d: element %d is %v, want %v (%.3g × tolerance)", c.window, c.sinks, c.cap, c.groups, o.otype, at, got[at], want[at], worst)
				}
			}
		}
	})
}

// glu_half against nn.GeGLU, nn.OAISwiGLU, nn.ReGLU, nn.ClampSwiGLU and
// nn.SwiGLUClampIn (limits that clamp some of the gates or their silu and
// of the ups, and one that clamps nearly all) and the ungated nn.ReLUSqr and nn.GELU (score/nn/mlp.go),
// with gates and ups past gpt-oss's clamps, and
// for the ungated ones (which read no up: 0) negatives, NaN, infinities
// and values below fp16's subnormals and past its range.
func TestGLUParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(24, 1))
		const rows, f = 7, 300
		gate, up := randF32(rng, rows*f, 4), randF32(rng, rows*f, 4)
		gate[0], up[1], up[2] = 9, 12, -30
		big := slices.Clone(gate) // GeGLU and ReLU² past fp16's range: scaled
		for i := range big {
			big[i] *= 1000
		}
		odd := slices.Clone(gate) // ReLU² without amax
		copy(odd, []float32{float32(math.NaN()), float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
			1e-30, -1e-30, 1e-4, 300, 3e19, -3e19})
		amax := devAlloc(t, e, 4)
		upp, out := devPut(t, e, up), devAlloc(t, e, 2*rows*f)
		for _, c := range []struct {
			act   ml.Act
			ref   func(out, gate, up []float32)
			gate  []float32
			amax  bool
			wantK int
			limit float32
		}{{ml.GeGLU, nn.GeGLU, gate, false, 0, 0}, {ml.OAISwiGLU, nn.OAISwiGLU, gate, false, 0, 0},
			{ml.ClampSwiGLU, nn.ClampSwiGLU(2.5), gate, false, 0, 2.5}, {ml.ClampSwiGLU, nn.ClampSwiGLU(0.25), gate, true, 0, 0.25},
			{ml.ClampSwiGLU, nn.ClampSwiGLU(7), big, true, 0, 7},
			{ml.SwiGLUClampIn, nn.SwiGLUClampIn(2.5), gate, false, 0, 2.5}, {ml.SwiGLUClampIn, nn.SwiGLUClampIn(0.25), gate, true, 0, 0.25},
			{ml.SwiGLUClampIn, nn.SwiGLUClampIn(7), big, true, 0, 7},
			{ml.ReGLU, nn.ReGLU, gate, false, 0, 0}, {ml.ReGLU, nn.ReGLU, big, true, -3, 0},
			{ml.GeGLU, nn.GeGLU, gate, true, 0, 0}, {ml.GeGLU, nn.GeGLU, big, true, -3, 0}, {ml.OAISwiGLU, nn.OAISwiGLU, big, true, 0, 0},
			{ml.ReLUSqr, nn.ReLUSqr, gate, false, 0, 0}, {ml.ReLUSqr, nn.ReLUSqr, odd, false, 0, 0},
			{ml.ReLUSqr, nn.ReLUSqr, gate, true, 0, 0}, {ml.ReLUSqr, nn.ReLUSqr, big, true, -13, 0},
			{ml.GELU, nn.GELU, gate, false, 0, 0}, {ml.GELU, nn.GELU, odd, false, 0, 0}, {ml.GELU, nn.GELU, big, true, 0, 0}} {
			want := make([]float32, rows*f)
			up, upp := up, upp
			if c.act.Ungated() {
				up, upp = nil, 0
			}
			c.ref(want, c.gate, up)
			gp := devPut(t, e, c.gate)
			eachGLUHalf(t, e, fmt.Sprintf("glu_half %v %v", c.act, c.limit), c.amax, amax, out, want, c.wantK, func(ht cublas.DataType, am ptr) error {
				return e.glu(out, gp, upp, rows, f, c.act, c.limit, ht, am)
			})
		}
	})
}

// TestFillUniform: the benchmarks' synthetic weights (fill_uniform_half),
// bit for bit the hash of uniformHalf, within a (rounded to bf16) of 0
// and centred, in both
// half types, over a count that is no multiple of the block.
func TestFillUniform(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		const n, seed, a = 10007, 42, 0.03
		limit := float64(quant.BF16ToF32(quant.F32ToBF16(a))) // a value's bf16 rounding can reach a's
		for _, typ := range []cublas.DataType{bf16, f16} {
			p := devAlloc(t, e, 2*n)
			do(t, e, func() error { return e.fillUniform(p, n, seed, a, typ) })
			got := devGet[uint16](t, e, p, n)
			var sum float64
			for i, h := range got {
				want := uniformHalf(seed, int64(i), a, isF16(typ))
				if h != want {
					t.Fatalf("%v element %d: %#04x, want %#04x", typ, i, h, want)
				}
				v := float64(halfToF32(h, isF16(typ)))
				if math.Abs(v) > limit {
					t.Fatalf("%v element %d: %v outside [-%v, %v]", typ, i, v, limit, limit)
				}
				sum += v
			}
			// the mean of n uniform(-a, a): standard deviation a/sqrt(3n)
			if mean := sum / n; math.Abs(mean) > 4*a/math.Sqrt(3*n) {
				t.Errorf("%v: mean %v, over 4 standard deviations from 0", typ, mean)
			}
		}
	})
}

// TestKVCacheByHeadSize: layers of two head sizes (Gemma 4's 256 and 512)
// keep a KV cache each, allocated once, and a layer after the other size's
// computes what it computed before.
func TestKVCacheByHeadSize(t *testing.T) {
	onDevices(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(41, 3))
		b := testBackend(e)
		defer b.Close()
		const n, heads = 7, 2
		run := func(hd int, q, k, v []float32) []float32 {
			a := &ml.Attn{Heads: heads, KVHeads: 1, HeadDim: hd, Scale: 1 / math.Sqrt(float64(hd))}
			dst := b.Alloc(n, heads*hd)
			b.Attention(dst, b.put(t, n, heads*hd, q), b.put(t, n, hd, k), b.put(t, n, hd, v), 0, a)
			out := b.Read(dst)
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			return out
		}
		in := func(hd int) ([]float32, []float32, []float32) {
			return randF32(rng, n*heads*hd, 1), randF32(rng, n*hd, 1), randF32(rng, n*hd, 1)
		}
		q1, k1, v1 := in(64)
		q2, k2, v2 := in(128)
		first := run(64, q1, k1, v1)
		c64 := *b.caches[64]
		run(128, q2, k2, v2)
		again := run(64, q1, k1, v1)
		if len(b.caches) != 2 || *b.caches[64] != c64 {
			t.Errorf("%d caches, the one of head size 64 reallocated: %v", len(b.caches), *b.caches[64] != c64)
		}
		for i := range first {
			if math.Float32bits(first[i]) != math.Float32bits(again[i]) {
				t.Fatalf("output %d: %v, after a layer of head size 128 %v", i, first[i], again[i])
			}
		}
	})
}

// sparseKeys is a key set of groups groups of n rows as the sparse
// attentions' indexers leave them, and harder: row i holds each key j <= i
// with probability 1/4 and always key i/2 (at least one key); rows past
// 200 hold none of the first 128 keys (a chunk of attn_simple skipped
// whole) and rows past 260 none of the last 40 either (the diagonal out).
func sparseKeys(rng *rand.Rand, n, groups int) *nn.KeySet {
	set := nn.NewKeySets(n, groups)
	for g := range groups {
		for i := range n {
			for j := 0; j <= i; j++ {
				if rng.IntN(4) == 0 && !(i > 200 && j < 128) && !(i > 260 && j > i-40) {
					set.AddIn(g, i, j)
				}
			}
			set.AddIn(g, i, i/2)
		}
	}
	return set
}

// fwht_f32 (llama.cpp's turns of the heads before its quantized caches, in
// the int8 mode) against nn.FWHT, bit for bit: 37 rows each of 64, 128,
// 256 and 512 values (normal, a row of powers of 2 apart by 2^±60, a
// spike, zeros, -0, an infinity), out of place and in place. Every
// butterfly is one float32 sum of the same two values in either.
func TestFWHTParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(81, 1))
		for _, n := range []int{64, 128, 256, 512} {
			const rows = 37
			x := randF32(rng, rows*n, 1)
			for j := range n {
				x[n+j] = float32(math.Ldexp(1, 60*(j%3-1)))
			}
			x[2*n+5] = 3e4
			clear(x[3*n : 4*n])
			x[3*n+1] = float32(math.Copysign(0, -1))
			x[4*n+2] = float32(math.Inf(-1))
			want := make([]float32, len(x))
			nn.FWHT(nn.NewContext(1), want, x, rows, n)
			xp, op := devPut(t, e, x), devAlloc(t, e, int64(4*len(x)))
			do(t, e, func() error { return e.fwht(op, xp, rows, n) })
			do(t, e, func() error { return e.fwht(xp, xp, rows, n) })
			for name, p := range map[string]ptr{"out of place": op, "in place": xp} {
				got := devGet[float32](t, e, p, len(x))
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
						t.Fatalf("n %d, %s: value %d (row %d) %v, want %v", n, name, i, i/n, got[i], want[i])
					}
				}
			}
		}
	})
}

// fwhtHeads over value heads padded to the key heads' size (64 of 96 and
// 128 of 192, 5 heads of each: MiniCPM3's, MiMo-V2's) against
// nn.FWHTHeads, bit for bit, out of place and in place: the padding
// copied.
func TestFWHTHeadsParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(83, 1))
		for _, s := range []struct{ stride, width int }{{96, 64}, {192, 128}} {
			const heads = 5
			x := randF32(rng, heads*s.stride, 1)
			want := make([]float32, len(x))
			nn.FWHTHeads(nn.NewContext(1), want, x, heads, s.stride, s.width, 64)
			xp, op := devPut(t, e, x), devAlloc(t, e, int64(4*len(x)))
			do(t, e, func() error { return e.fwhtHeads(op, xp, heads, s.stride, s.width, 64) })
			do(t, e, func() error { return e.fwhtHeads(xp, xp, heads, s.stride, s.width, 64) })
			for name, p := range map[string]ptr{"out of place": op, "in place": xp} {
				got := devGet[float32](t, e, p, len(x))
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%+v, %s: value %d (head %d) %v, want %v", s, name, i, i/s.stride, got[i], want[i])
					}
				}
			}
		}
	})
}
