package cuda

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/oracle"
	"ppl.dev/quant"
	"ppl.dev/score/model"
)

// The emulation of kernels/dequant.cu: each dequant_<type> kernel is
// quant.Dequantize of the rows it reads, rounded once to its output type
// (f32ToHalf: otype is the half kernels' fp16 flag), or float32. It calls the Go decoder because
// the kernel must equal it bit for bit: on the emulator the parity test
// below checks the plumbing (rows, offsets, the index list, sizes), on a
// GPU and on the host device (hostdev_test.go) the CUDA C itself.
func init() {
	for typ, k := range dequantKernels {
		simKernels[k.name] = simKernel{9, simDequant(typ)}
	}
}

func simDequant(typ gguf.Type) func(s *simDevice, a *simArgs, grid dim3) error {
	return func(s *simDevice, a *simArgs, grid dim3) error {
		out, w, idx := a.ptr(0), a.ptr(1), a.ptr(2)
		row0, rows, in, rb, otype := a.i64(3), a.int(4), a.int(5), a.i64(6), a.int(7)
		if a.err != nil {
			return a.err
		}
		want, err := typ.RowSize(uint64(in))
		switch {
		case err != nil:
			return err
		case in%8 != 0:
			return fmt.Errorf("rows of %d values, not a multiple of 8", in)
		case int64(want) != rb:
			return fmt.Errorf("row of %d %v values is %d bytes, kernel told %d", in, typ, want, rb)
		case otype < otypeBF16 || otype > otypeF32:
			return fmt.Errorf("output type %d", otype)
		case len(out) < rows*in*dequantBytes(otype):
			return fmt.Errorf("output of %d bytes for %d rows of %d", len(out), rows, in)
		}
		var tok []int32
		if idx != nil {
			tok = i32s(idx)
		}
		vals := make([]float32, in)
		for r := range rows {
			src := row0 + int64(r)
			if tok != nil {
				src = int64(tok[r])
			}
			if (src+1)*rb > int64(len(w)) {
				return fmt.Errorf("row %d of a matrix of %d bytes", src, len(w))
			}
			if err := quant.Dequantize(typ, w[src*rb:(src+1)*rb], vals); err != nil {
				return err
			}
			if otype == otypeF32 {
				copy(f32s(out)[r*in:(r+1)*in], vals)
				continue
			}
			o := u16s(out)[r*in : (r+1)*in]
			for i, v := range vals {
				o[i] = f32ToHalf(v, otype)
			}
		}
		return nil
	}
}

// dequantBytes is the size of one value of a dequantization kernel's
// output type.
func dequantBytes(otype int) int {
	if otype == otypeF32 {
		return 4
	}
	return 2
}

// randomBlocks returns n rows of in weights of type typ: quantized from
// normal values where quant can quantize typ, else random bytes; in either
// case every block redrawn until it decodes to finite values (a NaN scale
// has no defined payload through a product, on either side).
func randomBlocks(t testing.TB, rng *rand.Rand, typ gguf.Type, rows, in int) []byte {
	t.Helper()
	rb, err := typ.RowSize(uint64(in))
	if err != nil {
		t.Fatal(err)
	}
	bs, ts := typ.BlockSize(), int(rb)/(in/typ.BlockSize())
	out := make([]byte, rows*int(rb))
	vals := make([]float32, bs)
	for b := 0; b < len(out)/ts; b++ {
		blk := out[b*ts : (b+1)*ts]
		for {
			if quant.CanQuantize(typ) && typ.BlockSize() > 1 && rng.IntN(4) != 0 {
				for i := range vals {
					vals[i] = float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()*2))
				}
				if err := quant.Quantize(typ, vals, blk); err != nil {
					t.Fatal(err)
				}
			} else {
				for i := range blk {
					blk[i] = byte(rng.Uint32())
				}
			}
			if err := quant.Dequantize(typ, blk, vals); err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(vals, func(v float32) bool { return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) }) {
				break
			}
		}
	}
	return out
}

// Each dequantization kernel, on random blocks of its type, writes the
// values of quant.Dequantize rounded once to bf16 or fp16, or as float32:
// by row range (a slab, an expert) and by an index list (an embedding's
// tokens).
func TestDequantParity(t *testing.T) {
	onDevicesAndHost(t, func(t *testing.T, e *Engine) {
		for _, typ := range slices.Sorted(maps.Keys(dequantKernels)) {
			t.Run(typ.String(), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(typ), 17))
				const rows = 13
				in := 512 // two 256-weight blocks, eight 64, sixteen 32
				data := randomBlocks(t, rng, typ, rows, in)
				rb := int64(len(data) / rows)
				vals := make([]float32, rows*in)
				if err := quant.Dequantize(typ, data, vals); err != nil {
					t.Fatal(err)
				}
				wp := devPut(t, e, data)
				m := &gmat{q: &qmat{p: wp, typ: typ, kernel: dequantKernels[typ].name, rowBytes: rb}}
				if dequantKernels[typ].grid {
					m.q.grid = devPut(t, e, iqGrids())
				}
				idx := []int32{12, 0, 5, 5, 7}
				ip := devPut(t, e, idx)
				for _, ot := range []int{otypeBF16, otypeF16, otypeF32} {
					name := []string{"bf16", "fp16", "float32"}[ot]
					// rows [3, 11), then the rows of idx; the bits of each
					// value as a uint32
					get := func(p ptr, n int) []uint32 {
						if ot == otypeF32 {
							return devGet[uint32](t, e, p, n)
						}
						var out []uint32
						for _, h := range devGet[uint16](t, e, p, n) {
							out = append(out, uint32(h))
						}
						return out
					}
					out := devAlloc(t, e, 4*int64(rows*in))
					do(t, e, func() error { return e.dequantRows(out, m, ot, 0, 3, 8, in) })
					got := get(out, 8*in)
					do(t, e, func() error { return e.dequantRows(out, m, ot, ip, 0, len(idx), in) })
					gotIdx := get(out, len(idx)*in)
					bad := 0
					check := func(what string, got []uint32, row func(r int) int) {
						for i, h := range got {
							r, c := i/in, i%in
							v := vals[row(r)*in+c]
							want := math.Float32bits(v)
							if ot != otypeF32 {
								want = uint32(f32ToHalf(v, ot))
							}
							if h != want {
								if bad++; bad <= 3 {
									t.Errorf("%s %s row %d weight %d: got %#x, want %#x (of %v)", name, what, row(r), c, h, want, v)
								}
							}
						}
					}
					check("slab", got, func(r int) int { return 3 + r })
					check("gathered", gotIdx, func(r int) int { return int(idx[r]) })
					if bad > 0 {
						t.Errorf("%s: %d values differ", name, bad)
					}
				}
			})
		}
	})
}

// Every type the CPU decodes that has no device kernel is named, so that
// adding one is a decision: F32 matrices are float32 products, their rows
// copied as they are (gpuBackend.storage), and Q8_K is llama.cpp's
// activation format, not found in model files.
func TestDequantCoverage(t *testing.T) {
	var without []string
	for typ := range gguf.Type(64) {
		if quant.Supported(typ) {
			if _, ok := dequantKernels[typ]; !ok {
				without = append(without, typ.String())
			}
		}
	}
	want := "F32 Q8_K"
	if got := strings.Join(without, " "); got != want {
		t.Errorf("types without a dequantization kernel: %s, want %s", got, want)
	}
}

// The slab split: products of a matrix larger than slabBytes run a slab of
// output rows at a time, with the same results.
func TestSlabRows(t *testing.T) {
	defer func(v int64) { slabBytes = v }(slabBytes)
	slabBytes = 1 << 20
	for _, c := range []struct{ out, in, want int }{{100, 1024, 100}, {1000, 1024, 512}, {10, 1 << 20, 1}} {
		if got := slabRows(c.out, c.in); got != c.want {
			t.Errorf("slabRows(%d, %d) = %d, want %d", c.out, c.in, got, c.want)
		}
	}
}

func TestWeightsFromEnv(t *testing.T) {
	for _, c := range []struct{ env, want, err string }{
		{"", WeightsQuantized, ""}, {"bf16", WeightsBF16, ""}, {"quantized", WeightsQuantized, ""},
		{"q4", "", `cuda: PPL_CUDA_WEIGHTS="q4": want quantized or bf16`},
	} {
		t.Setenv("PPL_CUDA_WEIGHTS", c.env)
		got, err := weightsFromEnv()
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
			t.Errorf("PPL_CUDA_WEIGHTS=%q: %q, %v; want %q, %q", c.env, got, err, c.want, c.err)
		}
	}
}

// qweightModels are the oracle models the weight-storage parity runs:
// the e2e models and the quantized variants of the first (K-quants, the
// 4-bit floats, i-quants, F16), and the other architectures (gpt-oss's
// expert stacks are MXFP4; deepseek2's per-head stacks take the host copy).
var qweightModels = []string{"tiny-llama-spm-q8_0", "tiny-qwen3-q8_0", "tiny-llama3-q8_0", "tiny-qwen3moe",
	"tiny-llama-spm-q4_k_m", "tiny-llama-spm-mxfp4", "tiny-llama-spm-nvfp4", "tiny-llama-spm-iq2_xxs", "tiny-llama-spm-iq1_m",
	"tiny-llama-spm-iq3_s", "tiny-llama-spm-f16", "tiny-gpt-oss", "tiny-glm4moe", "tiny-gemma4", "tiny-gemma3", "tiny-deepseek2", "tiny-qwen35"}

// qweightQuick are the models the simulator runs by default (a K-quant
// mix, a lattice i-quant, quantized expert stacks); PPL_CUDA_SIM_E2E=1
// runs all.
var qweightQuick = map[string]bool{"tiny-llama-spm-q4_k_m": true, "tiny-llama-spm-iq1_m": true, "tiny-gpt-oss": true}

// Weights kept quantized on the device and dequantized at each product,
// each rounded once to fp16, are closer to the CPU scoring the file itself
// than the bf16 copy (--gpu-weights bf16), on every oracle model at hand: a
// mean |Δ log p| (each target's capped at flipCap) no larger, smaller but
// for the types whose every weight bf16 holds (MXFP4, NVFP4); both are
// logged, with the device memory of the
// weights both ways. On the simulator a second quantized run splits every
// product into slabs of a few rows (the slab path), which must not change
// a bit (its GEMM sums each output alone). The second window reuses the
// output head the first left in the operand buffer.
func TestWeightStorageParity(t *testing.T) {
	dir := oracle.Require(t)
	onDevices(t, func(t *testing.T, e *Engine) {
		sim := e.Ordinal < 0
		quick := sim && os.Getenv("PPL_CUDA_SIM_E2E") != "1"
		for _, stem := range qweightModels {
			path := oracle.Model(dir, stem)
			if _, err := os.Stat(path); err != nil {
				continue
			}
			t.Run(stem, func(t *testing.T) {
				if quick && !qweightQuick[stem] {
					t.Skip("simulator: a few models only (PPL_CUDA_SIM_E2E=1 runs all)")
				}
				opts := model.Options{KVDtype: "bf16"}
				cpu, err := model.Load(path, opts)
				if err != nil {
					t.Fatal(err)
				}
				toks := e2eTokens(dir, stem, cpu.Vocab(), 160)
				windows := []e2eWindow{{0, 64, 1}, {40, 160, 100}}
				var want []*model.Result
				for _, w := range windows {
					r, err := cpu.Score(toks[w.begin:w.end], w.from-w.begin)
					if err != nil {
						t.Fatal(err)
					}
					want = append(want, r)
				}
				cpu.Close()
				score := func(storage string, slab int64) ([]*model.Result, *Model, *lpStats) {
					defer func(v int64) { slabBytes = v }(slabBytes)
					if slab > 0 {
						slabBytes = slab
					}
					p := Mixed
					p.Storage = storage
					g, err := loadOn(e, path, opts, p)
					if err != nil {
						t.Fatal(err)
					}
					var out []*model.Result
					var s lpStats
					for wi, w := range windows {
						r, err := g.Score(toks[w.begin:w.end], w.from-w.begin)
						if err != nil {
							t.Fatal(err)
						}
						out = append(out, r)
						s.add(r, want[wi], fmt.Sprintf("window %d", wi))
					}
					g.Close()
					return out, g, &s
				}
				_, gb, sb := score(WeightsBF16, 0)
				got, gq, sq := score(WeightsQuantized, 0)
				t.Logf("weights on the device: quantized %s, bf16 copy %s (%.2f×); %s",
					humanBytes(gq.weightBytes), humanBytes(gb.weightBytes), float64(gb.weightBytes)/float64(gq.weightBytes), gq.b.qw.describe())
				t.Logf("against the CPU on the file: quantized %v; bf16 copy %v", sq, sb)
				// Closer on every target but routing flips (flipCap); the
				// same where bf16 holds every weight (MXFP4, NVFP4).
				if sq.sumCapped > sb.sumCapped {
					t.Errorf("quantized weights are further from the CPU than the bf16 copy (mean |Δ| capped at %g: %.5f against %.5f): %v, against %v",
						flipCap, sq.sumCapped/float64(sq.n), sb.sumCapped/float64(sb.n), sq, sb)
				}
				if sim { // slabs of a few rows of the tiny models' matrices
					slabbed, _, _ := score(WeightsQuantized, 4096)
					for wi := range windows {
						for i, lp := range got[wi].Logprobs {
							if g := slabbed[wi].Logprobs[i]; g != lp || slabbed[wi].Argmax[i] != got[wi].Argmax[i] {
								t.Fatalf("window %d target %d: slabs give log p %v (argmax %d), whole matrices %v (argmax %d)",
									wi, got[wi].ScoreFrom+i, g, slabbed[wi].Argmax[i], lp, got[wi].Argmax[i])
							}
						}
					}
				}
				if gq.Device().Extra["weights"] != WeightsQuantized || gb.Device().Extra["weights"] != WeightsBF16 {
					t.Errorf("Device().Extra[weights]: %v and %v", gq.Device().Extra["weights"], gb.Device().Extra["weights"])
				}
			})
		}
	})
}

// The lattices read back from package quant hold the levels ggml's grids
// are made of, at the offsets kernels/dequant.cu reads them.
func TestIQGrids(t *testing.T) {
	g := iqGrids()
	for _, c := range []struct {
		name       string
		off, n     int
		levels     []int
		signedByte bool
	}{
		{"iq2xxs", 0, 2048, []int{8, 25, 43}, false}, {"iq2xs", 2048, 4096, []int{8, 25, 43}, false},
		{"iq2s", 6144, 8192, []int{8, 25, 43}, false}, {"iq3xxs", 14336, 1024, []int{4, 12, 20, 28, 36, 44, 52, 62}, false},
		{"iq3s", 15360, 2048, []int{1, 3, 5, 7, 9, 11, 13, 15}, false}, {"iq1s", 17408, 16384, []int{-1, 0, 1}, true},
	} {
		seen := map[int]int{}
		for _, b := range g[c.off : c.off+c.n] {
			v := int(b)
			if c.signedByte {
				v = int(int8(b))
			}
			seen[v]++
		}
		for v := range seen {
			if !slices.Contains(c.levels, v) {
				t.Errorf("%s: value %d, not one of %v", c.name, v, c.levels)
			}
		}
		if len(seen) != len(c.levels) {
			t.Errorf("%s: values %v, want all of %v", c.name, seen, c.levels)
		}
	}
	if sum := fmt.Sprintf("%x", sha256.Sum256(g)); len(g) != iqGridBytes {
		t.Errorf("%d bytes (sha256 %s), want %d", len(g), sum, iqGridBytes)
	}
}

// A synthetic quantized model (TestBenchmarkWeights' path: shapes in a
// sparse file, blocks made by synthBlocks) loads and scores finite
// log-probabilities on the simulator, in less memory than its bf16 copy;
// in the int8 mode too, with the same bits when every product decodes its
// weights a few rows at a time (slabBytes).
func TestSyntheticQuantized(t *testing.T) {
	e := simEngine()
	s := benchShape{"tiny-q4km", model.HParams{Arch: "llama", Embd: 256, Layers: 2, FFN: 512, Heads: 4, KVHeads: 2, HeadDim: 64, ValueDim: 64,
		Vocab: 512, CtxTrain: 4096, Eps: 1e-5}, false, nil, 0}
	q4km := func(name string) gguf.Type {
		if name == "output.weight" || strings.Contains(name, "ffn_down") {
			return gguf.TypeQ6_K
		}
		return gguf.TypeQ4_K
	}
	toks := make([]int32, 32)
	for i := range toks {
		toks[i] = int32(i * 7 % s.hp.Vocab)
	}
	score := func(storage, act string) (*model.Result, int64) {
		m, size, err := typedSyntheticModel(e, s, q4km, storage, act, 7)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		r, err := m.Score(toks, 1)
		if err != nil {
			t.Fatal(err)
		}
		for j, lp := range r.Logprobs {
			if math.IsNaN(lp) || math.IsInf(lp, 0) || lp > 0 {
				t.Fatalf("%s, %s: target %d: log p %v", storage, act, j, lp)
			}
		}
		t.Logf("%s, %s: file %d bytes, weights on the device %d bytes; %s", storage, act, size, m.weightBytes, m.b.qw.describe())
		return r, m.weightBytes
	}
	var bytes [2]int64
	for i, storage := range []string{WeightsQuantized, WeightsBF16} {
		_, bytes[i] = score(storage, model.ActFP32)
	}
	whole, _ := score(WeightsQuantized, model.ActInt8)
	defer func(b int64) { slabBytes = b }(slabBytes)
	slabBytes = 3 * (256 + 4*256/16) // three decoded rows of 256 Q6_K weights
	slabs, _ := score(WeightsQuantized, model.ActInt8)
	if !slices.Equal(whole.Logprobs, slabs.Logprobs) {
		t.Errorf("int8 mode: log-probs differ when products decode three rows at a time:\n%v\n%v", whole.Logprobs[:4], slabs.Logprobs[:4])
	}
	if bytes[0]*3 > bytes[1] {
		t.Errorf("quantized weights take %d bytes, the bf16 copy %d", bytes[0], bytes[1])
	}
}
