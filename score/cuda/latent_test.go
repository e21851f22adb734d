package cuda

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/oracle"
	"ppl.dev/quant"
	"ppl.dev/score/kvcache"
	"ppl.dev/score/ml"
	"ppl.dev/score/model"
	"ppl.dev/score/nn"
)

// The latent attention operations (latent.go) against their plain
// definitions (ml.Latent's doc): Columns exactly; HeadLinear (one batched
// GEMM of all heads) as one float64 product per head of the values the
// device reads (the input
// rounded to the matrix's half type, the weights to bf16); LatentAttention
// as nn.Attention over the keys as the bf16 cache gives them back, with
// the keys as values, keeping each head's first valueDim outputs.
func TestLatentOpsParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		b := testBackend(e)
		defer b.Close()
		rng := rand.New(rand.NewPCG(43, 1))

		// Columns into the middle of a wider tensor.
		const rows = 9
		x := randF32(rng, rows*20, 1)
		xt := b.put(t, rows, 20, x)
		dst := b.put(t, rows, 12, make([]float32, rows*12))
		b.Columns(dst, 3, xt, 11, 8)
		got := b.Read(dst)
		var c bitCompare
		for r := range rows {
			for i := range 12 {
				want := float32(0)
				if i >= 3 && i < 11 {
					want = x[r*20+11+i-3]
				}
				c.add(got[r*12+i], want, r*12+i)
			}
		}
		c.check(t, "copy_cols (exact)", 0, 0)

		// HeadLinear: 4 heads of 16 -> 24, an F16 stack (the half path)
		// and an F32 one (float32 products).
		const H, in, out, n = 4, 16, 24, 37
		for _, typ := range []gguf.Type{gguf.TypeF16, gguf.TypeF32} {
			wv := randF32(rng, H*out*in, 0.3)
			w := testMatrix("blk.0.attn_k_b", typ, in, out, H, wv)
			if err := b.Prepare(w); err != nil {
				t.Fatal(err)
			}
			xv := randF32(rng, n*H*in, 2)
			xt = b.put(t, n, H*in, xv)
			yt := b.Alloc(n, H*out)
			batched := launched(e, "cublasGemmBatchedEx")
			b.HeadLinear(yt, xt, w)
			got = b.Read(yt)
			if n := launched(e, "cublasGemmBatchedEx") - batched; e.Ordinal < 0 && n != 1 {
				t.Errorf("HeadLinear of %d heads: %d batched GEMMs, want 1", H, n)
			}
			rh := operandOf(typ)
			var worst float64
			for r := range n {
				for h := range H {
					for o := range out {
						var acc float64
						for i := range in {
							acc += rh(xv[r*H*in+h*in+i]) * rh(wv[(h*out+o)*in+i])
						}
						d := math.Abs(float64(got[r*H*out+h*out+o])-acc) / (1e-6 + math.Abs(acc))
						worst = max(worst, d)
					}
				}
			}
			// float32 sums of exact products (the emulation: float64, one rounding):
			// 6e-8 measured. On a GPU cuBLAS's float32 sums in its order,
			// relative to sums that cancel: an H200 (2026-12-04) 1.0e-5
			// (F16), 8.9e-5 (F32).
			bound := 1e-6
			if e.Ordinal >= 0 {
				bound = 3e-4
			}
			t.Logf("HeadLinear (%v): worst relative error %.2e", typ, worst)
			if worst > bound {
				t.Errorf("HeadLinear (%v): worst relative error %.3g", typ, worst)
			}
		}

		// LatentAttention: the oracle model's shape (4 heads over one latent
		// head of 40, 32 values: attn_latent), DeepSeek-V3's (576, 512: the
		// tensor-core attn_fl576, checked against attn_latent at its first
		// use) over more keys than a 128-key chunk, a window with sinks, and
		// DSA's chosen keys (sparseKeys); in the int8 mode, float32 output,
		// attn_latent and attn_flx576.
		for _, c := range []struct {
			heads, hd, vd, m, window int
			sinks                    []float32
			sparse, int8             bool
		}{{4, 40, 32, 150, 0, nil, false, false}, {2, 576, 512, 140, 0, nil, false, false}, {4, 40, 32, 150, 20, []float32{-3, 0, 2, 9}, false, false},
			{4, 40, 32, 300, 0, nil, true, false}, {2, 576, 512, 280, 0, []float32{1, -2}, true, false},
			{4, 40, 32, 150, 0, nil, false, true}, {2, 576, 512, 140, 0, nil, false, true}} {
			q, k := randF32(rng, c.m*c.heads*c.hd, 1), randF32(rng, c.m*c.hd, 0.3)
			kr := append([]float32(nil), k...)
			var blk kvcache.Block
			kvcache.RoundTrip(kvcache.BF16{}, &blk, kr, c.m, 1, c.hd)
			a := &ml.Attn{Heads: c.heads, KVHeads: 1, HeadDim: c.hd, Scale: 1 / math.Sqrt(float64(c.hd)), Window: c.window}
			if c.sinks != nil {
				a.Sinks = &ml.Vector{Name: "sinks", V: c.sinks}
				if err := b.PrepareVector(a.Sinks); err != nil {
					t.Fatal(err)
				}
			}
			full := make([]float32, c.m*c.heads*c.hd)
			at := nn.Attention{Heads: c.heads, KVHeads: 1, HeadDim: c.hd, Scale: a.Scale, Window: c.window, Sinks: c.sinks}
			if c.sparse {
				at.Keys = sparseKeys(rng, c.m, 1)
				a.Keys = at.Keys
			}
			at.Forward(nn.NewContext(0), full, q, kr, kr, c.m)
			qt, kt := b.put(t, c.m, c.heads*c.hd, q), b.put(t, c.m, c.hd, k)
			ot := b.Alloc(c.m, c.heads*c.vd)
			kernel := map[bool]string{false: "attn_fl576", true: "attn_flx576"}[c.int8]
			flashed := launched(e, kernel)
			b.prec.Int8 = c.int8
			b.LatentAttention(ot, qt, kt, 0, a, c.vd)
			b.prec.Int8 = false
			got = b.Read(ot)
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			if ran, want := launched(e, kernel) > flashed, c.hd == 576; e.Ordinal < 0 && ran != want {
				t.Errorf("LatentAttention keys %d, values %d, int8 %v: %s ran %v, want %v", c.hd, c.vd, c.int8, kernel, ran, want)
			}
			// float32 softmax and sums, fp16 output (2^-11 relative); the
			// int8 mode's float32 output.
			rel, abs := 0x1p-8, 1e-3
			if c.int8 {
				rel, abs = 1e-5, 1e-6
			}
			worst := 0.0
			where := ""
			for r := range c.m * c.heads {
				for i := range c.vd {
					want := full[r*c.hd+i]
					d := math.Abs(float64(got[r*c.vd+i]-want)) / (abs + rel*math.Abs(float64(want)))
					if d != d {
						d = math.Inf(1)
					}
					if d > worst {
						worst, where = d, fmt.Sprintf("row %d value %d: %v vs %v", r, i, got[r*c.vd+i], want)
					}
				}
			}
			t.Logf("LatentAttention keys %d, values %d, window %d, sparse %v, int8 %v: worst error / tolerance %.3f (%s)", c.hd, c.vd, c.window, c.sparse, c.int8, worst, where)
			if worst > 1 {
				t.Errorf("LatentAttention keys %d, values %d, window %d, sparse %v, int8 %v: %s (%.3g × tolerance)", c.hd, c.vd, c.window, c.sparse, c.int8, where, worst)
			}
		}
	})
}

// TestHeadLinearQuantized: deepseek2's per-head stacks (attn_k_b, attn_v_b)
// kept in their blocks on the device give, bit for bit, the log-probs of
// the same stacks taken as a host copy rounded once to the same halves.
// The oracle's model has them as F32 (float32 products); a copy of it with
// attn_k_b in F16 (rows of 16) and attn_v_b in Q4_0 takes the quantized
// path, and the same copy with no device kernel for those two types (the
// model's token_embd, Q8_0, keeps its kernel) the host copy.
func TestHeadLinearQuantized(t *testing.T) {
	dir := oracle.Require(t)
	src := oracle.Model(dir, "tiny-deepseek2")
	heads := filepath.Join(t.TempDir(), "deepseek2-heads.gguf")
	retype := map[string]gguf.Type{".attn_k_b.weight": gguf.TypeF16, ".attn_v_b.weight": gguf.TypeQ4_0}
	stacks := 0
	rewrite(t, src, heads, func(name string, typ gguf.Type, data []byte) (gguf.Type, []byte) {
		for suffix, to := range retype {
			if strings.HasSuffix(name, suffix) {
				stacks++
				return to, convertTensor(t, typ, to, data)
			}
		}
		return typ, data
	})
	if stacks == 0 {
		t.Fatal("no attn_k_b or attn_v_b in " + src)
	}
	info, err := model.Load(heads, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	toks := e2eTokens(dir, "tiny-deepseek2", info.Vocab(), 120)
	info.Close()
	e := simEngine()
	score := func() ([]float64, *Model) {
		m, err := loadOn(e, heads, model.Options{KVDtype: "bf16"}, Mixed)
		if err != nil {
			t.Fatal(err)
		}
		r, err := m.Score(toks, 1)
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
		return r.Logprobs, m
	}
	got, mq := score()
	for _, name := range []string{"attn_k_b", "attn_v_b"} {
		if why := mq.b.qw.describe(); strings.Contains(why, name) {
			t.Errorf("%s took the host copy: %s", name, why)
		}
	}
	if n := mq.b.qw.quantized["F16"] + mq.b.qw.quantized["Q4_0"]; n != stacks {
		t.Errorf("%d matrices kept quantized as F16 or Q4_0, want the %d stacks: %s", n, stacks, mq.b.qw.describe())
	}
	kernels := maps.Clone(dequantKernels)
	defer func() { dequantKernels = kernels }()
	delete(dequantKernels, gguf.TypeF16)
	delete(dequantKernels, gguf.TypeQ4_0)
	want, mh := score()
	if why := mh.b.qw.describe(); !strings.Contains(why, "attn_k_b") || !strings.Contains(why, "attn_v_b") {
		t.Errorf("without their kernels, the stacks did not take the host copy: %s", why)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("target %d: quantized stacks give log p %v, their host copy %v", i+1, got[i], want[i])
		}
	}
	t.Logf("%d targets identical; %s", len(want), mq.b.qw.describe())
}

// rewrite writes the GGUF file src to dst with each tensor's type and data
// as fn returns them.
func rewrite(t *testing.T, src, dst string, fn func(name string, typ gguf.Type, data []byte) (gguf.Type, []byte)) {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // the writer reads the mapping's metadata and data
	w := gguf.NewWriter()
	for _, kv := range f.Metadata {
		w.Add(kv.Key, kv.Value)
	}
	for _, tn := range f.Tensors {
		typ, data := fn(tn.Name, tn.Type, f.Data(tn))
		if err := w.AddTensor(tn.Name, typ, tn.Shape, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteFile(dst); err != nil {
		t.Fatal(err)
	}
}

// convertTensor dequantizes data of type from and quantizes it to type to.
func convertTensor(t *testing.T, from, to gguf.Type, data []byte) []byte {
	t.Helper()
	n := uint64(len(data) / from.TypeSize() * from.BlockSize())
	vals := make([]float32, n)
	if err := quant.Dequantize(from, data, vals); err != nil {
		t.Fatal(err)
	}
	rb, err := to.RowSize(n)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, rb)
	if err := quant.Quantize(to, vals, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// attn_fl576 (latent attention on the tensor cores, DeepSeek's MLA: keys
// of 576, values their first 512) against attn_latent over the same bf16
// cache, fp16 outputs both, and attn_flx576 (float32 output, the int8
// mode's) against float64, as TestFlashVsPlain holds the other flash
// kernels: 100 queries (two query tiles, the last partial) of one latent
// head; random and nearly one-hot scores; a sliding window, sinks and a
// key set (DSA's chosen keys). Measured on the host runtime: flash within
// 4.9e-4 of attn_latent (one fp16 step), attn_flx576 within 2.0e-7 of
// float64 where attn_latent is within 7.9e-7.
func TestLatentFlashParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		kid, _, err := kvFormat("bf16")
		if err != nil {
			t.Fatal(err)
		}
		const n, hd, vd = 100, 576, 512
		for ci, c := range []struct {
			name   string
			heads  int
			gen    func(rng *rand.Rand, n, heads, kvheads, hd int) (q, k, v []float32)
			window int
			sinks  []float32
			keys   bool
			bound  float64
		}{
			{"random", 2, flashRandom, 0, nil, false, 1e-3},
			{"peaked", 1, flashPeaked, 0, nil, false, 1e-3},
			{"window-sinks", 2, flashRandom, 40, []float32{-3, 2}, false, 1e-3},
			{"keys", 2, flashRandom, 0, nil, true, 1e-3},
		} {
			t.Run(c.name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(ci), 103))
				q, k, _ := c.gen(rng, n, c.heads, 1, hd)
				kt, _ := storeKV(t, e, kid, kid, k, k, n, 1, hd)
				qp := devPut(t, e, q)
				outs := n * c.heads * vd
				plain, flash := devAlloc(t, e, int64(2*outs)), devAlloc(t, e, int64(2*outs))
				scale := 1 / math.Sqrt(192)
				mask := attnMask{window: c.window}
				if c.sinks != nil {
					mask.sinks = devPut(t, e, c.sinks)
				}
				var keys *nn.KeySet
				if c.keys {
					keys = sparseKeys(rng, n, 1)
					mask.keys, mask.kgroups = devPut(t, e, keys.Words()), 1
				}
				do(t, e, func() error {
					if err := e.latentAttention(plain, qp, n, c.heads, 1, hd, vd, scale, mask, kt, false, otypeF16); err != nil {
						return err
					}
					return e.latentAttention(flash, qp, n, c.heads, 1, hd, vd, scale, mask, kt, true, otypeF16)
				})
				a := fromHalf(devGet[uint16](t, e, plain, outs), f16)
				b := fromHalf(devGet[uint16](t, e, flash, outs), f16)
				worst, at := worstError(b, a, 1, 0)
				t.Logf("max |flash - plain| %.3g (element %d: %v vs %v), bound %.3g", worst, at, b[at], a[at], c.bound)
				if worst > c.bound {
					t.Errorf("latent flash attention: element %d (row %d) is %v, attn_latent's %v: |Δ| %.3g > %.3g", at, at/(c.heads*vd), b[at], a[at], worst, c.bound)
				}
				// attn_flx576 and attn_latent, float32 outputs both (the
				// int8 mode's), against float64 over the cache's keys.
				plain32, split := devAlloc(t, e, int64(4*outs)), devAlloc(t, e, int64(4*outs))
				do(t, e, func() error {
					if err := e.latentAttention(plain32, qp, n, c.heads, 1, hd, vd, scale, mask, kt, false, otypeF32); err != nil {
						return err
					}
					return e.latentAttention(split, qp, n, c.heads, 1, hd, vd, scale, mask, kt, true, otypeF32)
				})
				a32, b32 := devGet[float32](t, e, plain32, outs), devGet[float32](t, e, split, outs)
				kr := slices.Clone(k)
				var blk kvcache.Block
				kvcache.RoundTrip(kvcache.BF16{}, &blk, kr, n, 1, hd)
				def := nn.Attention{Heads: c.heads, KVHeads: 1, HeadDim: hd, Scale: scale, Window: c.window, Sinks: c.sinks, Keys: keys}
				full := def.Exact(q, kr, kr, n)
				exact := make([]float64, outs)
				for r := range n * c.heads {
					copy(exact[r*vd:(r+1)*vd], full[r*hd:])
				}
				plainErr, _ := exactError(a32, exact)
				bound := max(splitBound, 1.5*plainErr)
				worst, at = exactError(b32, exact)
				t.Logf("max |split - exact| %.3g (element %d: %v vs %.9g), attn_latent's %.3g, bound %.3g", worst, at, b32[at], exact[at], plainErr, bound)
				if worst > bound {
					t.Errorf("latent split attention: element %d (row %d) is %v, float64 gives %.9g: |Δ| %.3g > %.3g", at, at/(c.heads*vd), b32[at], exact[at], worst, bound)
				}
			})
		}
	})
}
