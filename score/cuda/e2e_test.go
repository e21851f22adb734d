package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sync/atomic"
	"testing"

	"ppl.dev/oracle"
	"ppl.dev/score/model"
)

// End to end on the shared oracle models: the GPU's per-token
// log-probabilities against the CPU reference scoring the same file with
// the same KV cache format. What remains is the GPU's fp16 roundings of
// weights and of the inputs of products and attention: the bounds are a
// largest per-token difference of 0.012 with a bf16 cache (emulation:
// 0.0063-0.0091 on the three dense models; the bf16 copy's weights gave
// 0.027-0.034 against the same reference, and 0.0117-0.0163 against the
// CPU on the bf16 copy on an H200) and a perplexity ratio within 0.001 of
// 1.

var e2eModels = []string{"tiny-llama-spm-q8_0", "tiny-qwen3-q8_0", "tiny-llama3-q8_0", "tiny-qwen3moe"}

// e2eQuick are the models the simulator runs by default: the first, and
// the mixture of experts (the path only it takes).
var e2eQuick = map[string]bool{"tiny-llama-spm-q8_0": true, "tiny-qwen3moe": true}

// moeBounds are the mixtures of experts, checked by mean and perplexity
// (TestEndToEnd says why).
var moeBounds = map[string]bool{"tiny-qwen3moe": true}

// e2eWindow is a window of a test: tokens [begin, end) scored from from.
type e2eWindow struct{ begin, end, from int }

// e2eModel returns the oracle model stem's path and 512 of its tokens
// (e2eTokens).
func e2eModel(t *testing.T, dir, stem string) (string, []int32) {
	t.Helper()
	path := oracle.Model(dir, stem)
	info, err := model.Load(path, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer info.Close()
	return path, e2eTokens(dir, stem, info.Vocab(), 512)
}

// e2eTokens returns a long token sequence for a model: the golden file's
// tokens of the oracle's texts when present, else random tokens.
func e2eTokens(dir, stem string, vocab, n int) []int32 {
	var toks []int32
	for _, text := range []string{"en-gpl3", "zh-tang", "code-go-strings", "mixed-unicode"} {
		if f, err := oracle.Read(oracle.Golden(dir, stem, text, "sliding")); err == nil {
			toks = append(toks, f.Header.Tokens...)
		}
	}
	rng := rand.New(rand.NewPCG(11, uint64(vocab)))
	for len(toks) < n {
		toks = append(toks, int32(rng.IntN(vocab)))
	}
	return toks[:n]
}

// flipCap is what a target counts for at most in lpStats.sumCapped: a
// mixture of experts' routing flip moves its token by 0.1 to 2, which
// says nothing of the roundings elsewhere.
const flipCap = 0.05

// lpStats compares log-probabilities.
type lpStats struct {
	n                 int
	maxAbs, sumAbs    float64
	sumCapped         float64 // of min(|Δ|, flipCap)
	sumGot, sumWant   float64
	argDiff           int
	worst             string
	kldMax, refLPMax  float64
	top1Diff, withRef int
}

func (s *lpStats) add(got, want *model.Result, where string) {
	for i := range want.Logprobs {
		d := math.Abs(got.Logprobs[i] - want.Logprobs[i])
		if d != d {
			d = math.Inf(1)
		}
		if d > s.maxAbs || s.n == 0 {
			s.maxAbs, s.worst = d, fmt.Sprintf("%s target %d", where, want.ScoreFrom+i)
		}
		s.n++
		s.sumAbs += d
		s.sumCapped += min(d, flipCap)
		s.sumGot += got.Logprobs[i]
		s.sumWant += want.Logprobs[i]
		if got.Argmax[i] != want.Argmax[i] {
			s.argDiff++
		}
		if want.KLD != nil {
			s.withRef++
			s.kldMax = max(s.kldMax, math.Abs(got.KLD[i]-want.KLD[i]))
			s.refLPMax = max(s.refLPMax, math.Abs(got.RefLogprobs[i]-want.RefLogprobs[i]))
			if got.Top1Agree[i] != want.Top1Agree[i] {
				s.top1Diff++
			}
		}
	}
}

func (s *lpStats) pplRatio() float64 { return math.Exp((s.sumWant - s.sumGot) / float64(s.n)) }

func (s *lpStats) String() string {
	out := fmt.Sprintf("%d targets: max |Δ log p| %.4f (%s), mean %.5f, PPL ratio %.6f, argmax differs %d",
		s.n, s.maxAbs, s.worst, s.sumAbs/float64(s.n), s.pplRatio(), s.argDiff)
	if s.withRef > 0 {
		out += fmt.Sprintf("; with reference: max |Δ KLD| %.2e, max |Δ ref log p| %.4f, top-1 agreement differs %d", s.kldMax, s.refLPMax, s.top1Diff)
	}
	return out
}

// loadBoth loads the file on the CPU and on e with opts; done closes both.
func loadBoth(t *testing.T, e *Engine, path string, opts model.Options, p Precision) (cpu *model.Model, g *Model, done func()) {
	t.Helper()
	cpu, err := model.Load(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	if g, err = loadOn(e, path, opts, p); err != nil {
		cpu.Close()
		t.Fatal(err)
	}
	return cpu, g, func() { cpu.Close(); g.Close() }
}

// e2eCase scores windows with the GPU model and the CPU reference on the
// same file, both loaded with opts; withRef, each against a reference of
// the same weights with an exact cache.
func e2eCase(t *testing.T, e *Engine, p Precision, path string, opts model.Options, windows []e2eWindow, toks []int32, withRef bool) *lpStats {
	t.Helper()
	cpu, g, done := loadBoth(t, e, path, opts, p)
	defer done()
	var cref *model.Model
	var gref *Model
	if withRef {
		ropts := opts
		ropts.KVDtype = "f32"
		var rdone func()
		cref, gref, rdone = loadBoth(t, e, path, ropts, p)
		defer rdone()
	}
	t.Logf("attention: %s", g.attn)
	var s lpStats
	for wi, w := range windows {
		tok := toks[w.begin:w.end]
		from := w.from - w.begin
		var want, got *model.Result
		var err error
		if withRef {
			want, err = cpu.ScoreWith(tok, from, cref)
			if err == nil {
				got, err = g.ScoreWith(tok, from, gref)
			}
		} else {
			want, err = cpu.Score(tok, from)
			if err == nil {
				got, err = g.Score(tok, from)
			}
		}
		if err != nil {
			t.Fatalf("window %d: %v", wi, err)
		}
		s.add(got, want, fmt.Sprintf("window %d [%d,%d)", wi, w.begin, w.end))
	}
	return &s
}

func e2eSetup(t *testing.T) (dir string, stems []string) {
	dir = oracle.Require(t)
	for _, s := range e2eModels {
		if _, err := os.Stat(oracle.Model(dir, s)); err == nil {
			stems = append(stems, s)
		}
	}
	if len(stems) == 0 {
		t.Skipf("skipping: none of %v in %s/models", e2eModels, dir)
	}
	return dir, stems
}

// TestEndToEnd: every oracle model, a bf16 cache, windows of 256 tokens
// scored from the start and from the middle (a row offset), on the GPU
// also a 2048-token window (RoPE and attention over several tiles), and
// once with a reference model (KL divergence).
//
// The simulator (slow: its products are plain Go) runs the models of
// e2eQuick, or everything with PPL_CUDA_SIM_E2E=1.
func TestEndToEnd(t *testing.T) {
	dir, stems := e2eSetup(t)
	onDevices(t, func(t *testing.T, e *Engine) {
		sim := e.Ordinal < 0
		quick := sim && os.Getenv("PPL_CUDA_SIM_E2E") != "1"
		for _, stem := range stems {
			t.Run(stem, func(t *testing.T) {
				if quick && !e2eQuick[stem] {
					t.Skip("simulator: the first model and the mixture of experts only (PPL_CUDA_SIM_E2E=1 runs all)")
				}
				path := oracle.Model(dir, stem)
				windows := []e2eWindow{{0, 256, 1}, {100, 356, 228}}
				if !sim {
					windows = append(windows, e2eWindow{0, 2048, 1024})
				}
				info, err := model.Load(path, model.Options{})
				if err != nil {
					t.Fatal(err)
				}
				toks := e2eTokens(dir, stem, info.Vocab(), 2048)
				info.Close()
				s := e2eCase(t, e, Mixed, path, model.Options{KVDtype: "bf16"}, windows, toks, false)
				t.Logf("bf16 cache: %v", s)
				if moeBounds[stem] {
					// A mixture of experts: its router chooses experts on
					// logits that the GPU's half-precision roundings
					// upstream move (by about 5e-3 when its F32 matrices
					// were rounded to fp16 too), so a choice near a tie
					// flips and changes that token by up to 0.6 and,
					// through attention, its followers a little. The
					// per-token maximum says nothing then: the bounds are
					// the mean and the perplexity, allowing one flip
					// (0.0016 on each). Emulation: max 0.0135, mean
					// 0.0025, PPL ratio 1.00013 (its F32 matrices rounded
					// to fp16: mean 0.0096); an H200 (2026-12-04): max
					// 1.43 (a flip), mean 0.0054, PPL ratio 0.99856.
					if mean := s.sumAbs / float64(s.n); mean > 0.007 || math.Abs(s.pplRatio()-1) > 0.002 {
						t.Errorf("bf16 cache: %v; want mean |Δ| <= 0.007 and |PPL ratio - 1| <= 0.002", s)
					}
				} else if s.maxAbs > 0.012 || math.Abs(s.pplRatio()-1) > 0.001 {
					t.Errorf("bf16 cache: %v; want max |Δ| <= 0.012 and |PPL ratio - 1| <= 0.001", s)
				}
				if !quick {
					// For the record: everything in bf16, as the issue first
					// described it (not checked against the bounds).
					b := e2eCase(t, e, BF16, path, model.Options{KVDtype: "bf16"}, windows, toks, false)
					t.Logf("bf16 cache, precision bf16 (not checked): %v", b)
				}
				if stem == stems[0] {
					r := e2eCase(t, e, Mixed, path, model.Options{KVDtype: "bf16"}, windows[1:2], toks, true)
					t.Logf("with reference (f32 cache): %v", r)
					if r.maxAbs > 0.02 || r.refLPMax > 0.02 || r.kldMax > 1e-3 {
						t.Errorf("with reference: %v", r)
					}
				}
			})
		}
	})
}

// TestEndToEndScoreVisit checks ScoreVisit on the device: each target's logits
// come back once, and their log-softmax at the target is the device's
// log-prob (ppl-score --kld-base and --write-kld-base read them).
func TestEndToEndScoreVisit(t *testing.T) {
	dir, stems := e2eSetup(t)
	onDevices(t, func(t *testing.T, e *Engine) {
		path := oracle.Model(dir, stems[0])
		_, g, done := loadBoth(t, e, path, model.Options{KVDtype: "bf16"}, Mixed)
		defer done()
		toks := e2eTokens(dir, stems[0], g.Vocab(), 80)
		const from = 41
		seen := make([]int32, len(toks)-from)
		lse := make([]float64, len(toks)-from)
		res, err := g.ScoreVisit(toks, from, func(j int, logits []float32) {
			atomic.AddInt32(&seen[j], 1)
			m := float64(slices.Max(logits))
			var s float64
			for _, v := range logits {
				s += math.Exp(float64(v) - m)
			}
			lse[j] = float64(logits[toks[from+j]]) - m - math.Log(s)
		})
		if err != nil {
			t.Fatal(err)
		}
		var worst float64
		for j, n := range seen {
			if n != 1 {
				t.Fatalf("target %d visited %d times", j, n)
			}
			worst = max(worst, math.Abs(lse[j]-res.Logprobs[j]))
		}
		// Emulation: 8.9e-16 (its log-softmax is the host's float64 one).
		// A GPU's kernel (logsoftmax.cu) sums its exponentials its own
		// way: 2e-6 there, not yet run on one.
		bound := 2e-6
		if e.Ordinal < 0 {
			bound = 1e-14
		}
		if worst > bound {
			t.Errorf("log-softmax of the visited logits vs the device's log-probs: worst |Δ| %.3g", worst)
		}
		t.Logf("worst |Δ| %.3g over %d targets", worst, len(seen))
	})
}

// TestEndToEndKV: every other KV cache dtype on the first oracle model.
// The CPU and the GPU quantize slightly different keys and values (their
// activations differ by the rounding of product inputs), so a value near a
// rounding boundary can land on another code, a step of the format: the
// coarser the format, the larger the difference a flip makes, and the
// looser the bounds (measured on the simulator, at most per token on 383
// targets: f32 0.0037, f16 0.0036, int8 0.018, fp8 0.034, k8v4 0.086,
// nvfp4 0.14, q8_0 0.017, q4_0 0.091, q4_1 0.062, q5_0 0.036, q5_1 0.053,
// iq4_nl 0.056, rk8v4 0.082, rk4v4 0.084, rk2v4 0.297).
func TestEndToEndKV(t *testing.T) {
	dir, stems := e2eSetup(t)
	bounds := map[string][2]float64{ // max |Δ log p|, |PPL ratio - 1|
		"f32": {0.01, 0.0005}, "f16": {0.01, 0.0005}, "int8": {0.04, 0.002},
		"fp8": {0.07, 0.002}, "k8v4": {0.15, 0.004}, "nvfp4": {0.3, 0.004},
		"q8_0": {0.04, 0.001}, "q4_0": {0.15, 0.002}, "q4_1": {0.12, 0.002}, "q5_0": {0.07, 0.002}, "q5_1": {0.1, 0.002},
		"iq4_nl": {0.12, 0.002}, "rk8v4": {0.15, 0.003}, "rk4v4": {0.15, 0.003}, "rk2v4": {0.5, 0.008},
	}
	onDevices(t, func(t *testing.T, e *Engine) {
		if e.Ordinal < 0 && os.Getenv("PPL_CUDA_SIM_E2E") != "1" {
			t.Skip("simulator: slow; PPL_CUDA_SIM_E2E=1 runs it")
		}
		path, toks := e2eModel(t, dir, stems[0])
		for _, kv := range []string{"f32", "f16", "int8", "fp8", "k8v4", "nvfp4", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "rk8v4", "rk4v4", "rk2v4"} {
			t.Run(kv, func(t *testing.T) {
				s := e2eCase(t, e, Mixed, path, model.Options{KVDtype: kv}, []e2eWindow{{0, 256, 1}, {100, 356, 228}}, toks, false)
				t.Logf("%s cache: %v", kv, s)
				b := bounds[kv]
				if s.maxAbs > b[0] || math.Abs(s.pplRatio()-1) > b[1] {
					t.Errorf("%s cache: %v; want max |Δ| <= %g and |PPL ratio - 1| <= %g", kv, s, b[0], b[1])
				}
			})
		}
	})
}

// TestEndToEndKLD: the KL divergence of the GPU's next-token distributions
// from the CPU's on the same file, KL(CPU || GPU) over the whole
// vocabulary: the CPU model as the reference of the GPU one
// (model.ScoreWithApart, which carries the CPU's logits through the host
// to the GPU's LogSoftmax), bf16 cache, a window of 256 tokens; every
// oracle model of TestEndToEnd on a GPU, the first on the emulator. Its
// log-probs are the CPU's own to the rounding of the GPU's LogSoftmax.
// Emulation: tiny-llama-spm-q8_0 mean 1.8e-6, max 8.4e-6. The GPU's bound,
// 1e-4 (and 1e-3 for a mixture of experts, whose flips weigh more), awaits
// a measurement: KL ≈ E[Δ²]/2 puts the H200's dense models (mean |Δ log p|
// 0.0013) near 1e-6.
func TestEndToEndKLD(t *testing.T) {
	dir, stems := e2eSetup(t)
	onDevices(t, func(t *testing.T, e *Engine) {
		run := stems
		if e.Ordinal < 0 {
			run = stems[:1]
		}
		for _, stem := range run {
			t.Run(stem, func(t *testing.T) {
				cpu, g, done := loadBoth(t, e, oracle.Model(dir, stem), model.Options{KVDtype: "bf16"}, Mixed)
				defer done()
				toks := e2eTokens(dir, stem, g.Vocab(), 256)
				r, err := g.Model.ScoreWithApart(toks, 1, cpu)
				if err != nil {
					t.Fatal(err)
				}
				var sum, most, dlp float64
				agree := 0
				for i, k := range r.KLD {
					sum += k
					most = max(most, k)
					dlp = max(dlp, math.Abs(r.Logprobs[i]-r.RefLogprobs[i]))
					if r.Top1Agree[i] {
						agree++
					}
				}
				mean := sum / float64(len(r.KLD))
				t.Logf("%s: KL(CPU || GPU), %d targets: mean %.2e, max %.2e; max |Δ log p| %.4f; top-1 agreement %d", stem, len(r.KLD), mean, most, dlp, agree)
				bound := 1e-4
				switch {
				case e.Ordinal < 0:
					bound = 4e-6
				case moeBounds[stem]:
					bound = 1e-3
				}
				if !(mean <= bound) {
					t.Errorf("KL(CPU || GPU): mean %.3g, want <= %g", mean, bound)
				}
			})
		}
	})
}
