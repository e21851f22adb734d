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

		for _, gcols := range []int{cols, 1} {
			gate := randF32(rng, rows*gcols, 4)
			gate[0], gate[len(gate)-1] = 800, -800 // e^800 overflows: the product is 0
			xp, gp := put(x), put(gate)
			do(t, e, func() error { return e.sigmoidMul(xp, gp, rows, cols, gcols) })
			for r := range rows {
				for c := range cols {
					gv := gate[r*gcols+min(c, gcols-1)]
					want[r*cols+c] = float32(float64(x[r*cols+c]) / (1 + math.Exp(-float64(gv))))
				}
			}
			// exp in float64 within an ulp of Go's: equal after rounding but for ties.
			check("sigmoid_mul", devGet[float32](t, e, xp, n), want, 1, 1e-3)
		}

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
	return &gpuBackend{e: e, prec: Mixed, kvK: kvBF16, kvV: kvBF16,
		ropes: map[*nn.RoPE]*ropeTab{}, ones: map[int]ptr{}, flash: map[attnShape]string{}}
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

// Experts against its plain definition: per token, the K chosen experts'
// SwiGLU MLPs, scaled by their weights and added in the order of the
// choices (ml.Backend.Experts), computed here in float64 from the values
// the device's products read (F16 stacks: fp16 weights and inputs; F32
// stacks: float32 products of the exact values) with float32 roundings
// where the kernels round; and with more tokens than a block (expertRows),
// so that the grouping by expert runs over several blocks, with an expert
// no token chooses.
func TestExpertsParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		for _, typ := range []gguf.Type{gguf.TypeF16, gguf.TypeF32} {
			t.Run(typ.String(), func(t *testing.T) { expertsParity(t, e, typ) })
		}
	})
}

func expertsParity(t *testing.T, e *Engine, typ gguf.Type) {
	rng := rand.New(rand.NewPCG(22, 1))
	const N, K, in, F, out = 6, 3, 48, 40, 24
	n := expertRows + 37
	if e.Ordinal < 0 {
		n = 300 // the simulator's products are plain Go
	}
	gate, up, down := randF32(rng, N*F*in, 0.3), randF32(rng, N*F*in, 0.3), randF32(rng, N*out*F, 0.3)
	bias := randF32(rng, N*out, 0.1)
	m := &ml.MLP{Gate: testMatrix("blk.0.ffn_gate_exps.weight", typ, in, F, N, gate),
		Up:   testMatrix("blk.0.ffn_up_exps.weight", typ, in, F, N, up),
		Down: testMatrix("blk.0.ffn_down_exps.weight", typ, F, out, N, down)}
	m.Down.Bias = bias
	b := testBackend(e)
	defer b.Close()
	for _, w := range []*ml.Matrix{m.Gate, m.Up, m.Down} {
		if err := b.Prepare(w); err != nil {
			t.Fatal(err)
		}
	}
	x := randF32(rng, n*in, 1)
	logits := randF32(rng, n*N, 2)
	for i := range logits[:n] {
		logits[i*N+N-1] = -1e3 // expert N-1: never chosen
	}
	router := ml.Router{Experts: N, K: K, Gating: ml.GateSoftmax, Norm: true}
	r, err := router.Route(logits)
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	xt := b.put(t, n, in, x)
	dst := b.Alloc(n, out)
	b.Experts(dst, xt, m, r)
	got := b.Read(dst)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}

	rh := operandOf(typ)
	var worst float64
	ref := make([]float32, n*out)
	for tk := range n {
		xh := make([]float64, in)
		for i := range xh {
			xh[i] = rh(x[tk*in+i])
		}
		for j := range K {
			ex, w := int(r.Expert[tk*K+j]), r.Weight[tk*K+j]
			act := make([]float64, F)
			for f := range F {
				var gs, us float64
				for i := range in {
					gs += rh(gate[(ex*F+f)*in+i]) * xh[i]
					us += rh(up[(ex*F+f)*in+i]) * xh[i]
				}
				g, u := float64(float32(gs)), float64(float32(us))
				act[f] = rh(float32(g / (1 + math.Exp(-g)) * u))
			}
			res := make([]float32, out)
			for o := range out {
				var ds float64
				for f := range F {
					ds += rh(down[(ex*out+o)*F+f]) * act[f]
				}
				res[o] = (float32(ds) + bias[ex*out+o]) * w
			}
			row := ref[tk*out : (tk+1)*out]
			if j == 0 {
				copy(row, res)
				continue
			}
			for o := range out {
				row[o] += res[o]
			}
		}
		for o, want := range ref[tk*out : (tk+1)*out] {
			d := math.Abs(float64(got[tk*out+o]-want)) / (1 + math.Abs(float64(want)))
			worst = max(worst, d)
		}
	}
	t.Logf("experts (%v): %d tokens, %d of %d experts each: largest difference %.2g (relative to 1 + |value|)", typ, n, K, N, worst)
	// The same roundings; what remains is the order of float32 sums in
	// the products (float64 here): a few float32 ulps.
	if worst > 1e-5 {
		t.Errorf("experts differ from their definition by %g", worst)
	}
}

// The plain attention kernel's sliding window and sinks against
// nn.Attention's (score/nn/attention.go) over the same bf16 cache: windows
// shorter and longer than the kernel's 128-key chunks, sinks far above and
// below the scores (the running maximum starts at the sink).
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
		}{{32, nil}, {200, nil}, {0, []float32{-20, 0, 3, 30}}, {50, []float32{1, -1, 8, 0.5}}} {
			want := make([]float32, len(q))
			att := nn.Attention{Heads: heads, KVHeads: kvheads, HeadDim: hd, Scale: scale, Window: c.window, Sinks: c.sinks}
			att.Forward(nn.NewContext(0), want, q, kr, vr, n)
			var sp ptr
			if c.sinks != nil {
				sp = devPut(t, e, c.sinks)
			}
			out := devAlloc(t, e, int64(4*len(q)))
			for _, o := range []struct {
				otype    int
				rel, abs float64
			}{
				{isF16(f16), 0x1p-8, 1e-3}, // float32 softmax and sums, fp16 output (2^-11 relative)
				{otypeF32, 0x1p-17, 1e-6},  // float32 output (the int8 mode's)
			} {
				do(t, e, func() error {
					return e.attentionPlain(out, qp, n, heads, kvheads, hd, scale, c.window, sp, kt, vt, o.otype)
				})
				got := devGet[float32](t, e, out, len(q))
				if o.otype != otypeF32 {
					got = fromHalf(devGet[uint16](t, e, out, len(q)), f16)
				}
				worst, at := worstError(got, want, o.abs, o.rel)
				t.Logf("window %d, sinks %v, output %d: worst error / tolerance %.3f (element %d: %v vs %v)", c.window, c.sinks, o.otype, worst, at, got[at], want[at])
				if worst > 1 {
					t.Errorf("window %d, sinks %v, output %d: element %d is %v, want %v (%.3g × tolerance)", c.window, c.sinks, o.otype, at, got[at], want[at], worst)
				}
			}
		}
	})
}

// glu_half against nn.GeGLU and nn.OAISwiGLU (score/nn/mlp.go), with
// gates and ups past gpt-oss's clamps.
func TestGLUParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		rng := rand.New(rand.NewPCG(24, 1))
		const rows, f = 7, 300
		gate, up := randF32(rng, rows*f, 4), randF32(rng, rows*f, 4)
		gate[0], up[1], up[2] = 9, 12, -30
		big := slices.Clone(gate) // GeGLU past fp16's range: scaled
		for i := range big {
			big[i] *= 1000
		}
		amax := devAlloc(t, e, 4)
		upp, out := devPut(t, e, up), devAlloc(t, e, 2*rows*f)
		for _, c := range []struct {
			act   ml.Act
			ref   func(out, gate, up []float32)
			gate  []float32
			amax  bool
			wantK int
		}{{ml.GeGLU, nn.GeGLU, gate, false, 0}, {ml.OAISwiGLU, nn.OAISwiGLU, gate, false, 0},
			{ml.GeGLU, nn.GeGLU, gate, true, 0}, {ml.GeGLU, nn.GeGLU, big, true, -3}, {ml.OAISwiGLU, nn.OAISwiGLU, big, true, 0}} {
			want := make([]float32, rows*f)
			c.ref(want, c.gate, up)
			gp := devPut(t, e, c.gate)
			eachGLUHalf(t, e, fmt.Sprintf("glu_half %v", c.act), c.amax, amax, out, want, c.wantK, func(ht cublas.DataType, am ptr) error {
				return e.glu(out, gp, upp, rows, f, c.act, ht, am)
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
