package cuda

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"ppl.dev/gguf"
	"ppl.dev/quant"
	"ppl.dev/score/cuda/cublas"
	"ppl.dev/score/model"
)

// The throughput benchmark of tests/gpu/check.sh, hidden in the test
// binary: it skips unless PPL_GPU_BENCH=1. Throughput does not depend on
// the weights' values, so the models are made from a seed directly in
// device memory (synthetic: their file holds only the shapes), sized like
// Llama 3.2 1B, Llama 3 8B and Qwen3-30B-A3B (a mixture of 128 experts, 8
// per token), Qwen3.5-27B (bench_qwen35_test.go), gpt-oss-20b and Gemma 3
// 27B (bench_shapes_test.go: sliding windows, sinks); a model file's type (Q8_0, F16) only changes the host-side
// load, which the benchmark measures separately per type.
//
// Reported per model and context: tokens scored per second, model FLOP/s
// (the products, causal attention and the output head over the scored
// rows, as counted by windowFLOPs) and their fraction of the bf16 GEMM peak
// measured in the same run, the forward pass's share of the time, and peak
// device memory.
//
// Environment: PPL_GPU_BENCH_MODELS (default
// "1b,8b,qwen3moe-30b-a3b,qwen35-27b,gpt-oss-20b,gemma3-27b,gemma4-31b,deepseek-v2-lite"),
// PPL_GPU_BENCH_CONTEXTS (default "4096/2048,32768/16384": context/stride;
// the mixtures of experts, gpt-oss and Gemma 3 run the first only, and so
// do models whose attention takes the plain kernel; Qwen3.5-27B's default is
// "4096/2048,65536/32768", issue #14's long context, on the tensor-core
// kernel for its heads of 256), PPL_GPU_BENCH_LONG=1 (lift those limits,
// for runs by hand; Gemma 3 at 32768/16384 is about 1.8 PFLOP a window),
// PPL_GPU_BENCH_WINDOWS (timed windows per setting, default 3;
// 1 for the contexts above 32,768), PPL_GPU_BENCH_SECONDS (stop starting
// new settings after this long, default 150), PPL_GPU_BENCH_OUT (write
// the results there as JSON).
//
// Contexts above 32,768 run after every model's other settings, so that
// they cannot take the others' turn, and each only when its time,
// projected from the model's shorter setting (projectSeconds), ends
// within the budget and before the test's deadline; otherwise its row says
// "skipped" and why. Qwen3.5-27B at 65,536/32,768 is about 4.1 PFLOP a
// window (3.2 of products, 0.84 of attention, 0.08 of head): some 10 to
// 16 s a window on an H200 (the products near 500 TFLOP/s, attention at
// 100 to 200), 30 to 50 s for its three windows (warm-up, one timed,
// forward alone). On its own: PPL_GPU_BENCH_MODELS=qwen35-27b
// PPL_GPU_BENCH_CONTEXTS=65536/32768 PPL_GPU_BENCH_SECONDS=600.

type benchShape struct {
	name string
	hp   model.HParams
	tied bool
	moe  *model.MoEParams // qwen3moe, gpt-oss: Experts, Used, FFN
	// maxContext: longer contexts are skipped (0: none;
	// PPL_GPU_BENCH_LONG=1 runs them). The experts' routing runs on the
	// host (ml.Router), one layer at a time, so a mixture of experts is
	// measured at the usual context only.
	maxContext int
}

var benchShapes = []benchShape{
	{"llama-1b", model.HParams{Arch: "llama", Embd: 2048, Layers: 16, FFN: 8192, Heads: 32, KVHeads: 8, HeadDim: 64, ValueDim: 64, Vocab: 128256, CtxTrain: 131072, Eps: 1e-5}, true, nil, 0},
	{"llama-8b", model.HParams{Arch: "llama", Embd: 4096, Layers: 32, FFN: 14336, Heads: 32, KVHeads: 8, HeadDim: 128, ValueDim: 128, Vocab: 128256, CtxTrain: 8192, Eps: 1e-5}, false, nil, 0},
	// Qwen3-30B-A3B: 128 experts of width 768, 8 per token; q and k norms.
	{"qwen3moe-30b-a3b", model.HParams{Arch: "qwen3moe", Embd: 2048, Layers: 48, FFN: 6144, Heads: 32, KVHeads: 4, HeadDim: 128, ValueDim: 128, Vocab: 151936, CtxTrain: 40960, Eps: 1e-6}, false,
		&model.MoEParams{Experts: 128, Used: 8, FFN: 768}, 4096},
}

// windowFLOPs counts a window's model FLOPs: 2 per multiply-add of the
// weight products over all n tokens (for a mixture of experts, the router
// and the experts each token uses), of causal attention (QKᵀ and PV over
// the n(n+1)/2 query-key pairs of each head) and of the output head over
// the scored rows.
func windowFLOPs(hp model.HParams, n, scored int) (linear, attn, head float64) {
	if f := archFLOPs[hp.Arch]; f != nil { // bench_qwen35_test.go, bench_shapes_test.go
		return f(hp, n, scored)
	}
	return transformerFLOPs(hp, n, scored)
}

// transformerFLOPs is windowFLOPs for the llama-like decoder: every
// layer's products and full causal attention.
func transformerFLOPs(hp model.HParams, n, scored int) (linear, attn, head float64) {
	qd, kvd := float64(hp.Heads*hp.HeadDim), float64(hp.KVHeads*hp.HeadDim)
	E, F := float64(hp.Embd), float64(hp.FFN)
	ffn := 3 * E * F
	if m := hp.MoE; m != nil {
		ffn = E*float64(m.Experts) + 3*E*float64(m.FFN)*float64(m.Used)
	}
	perTok := E*qd + 2*E*kvd + qd*E + ffn
	L, N := float64(hp.Layers), float64(n)
	linear = 2 * perTok * N * L
	attn = 2 * 2 * float64(hp.HeadDim) * float64(hp.Heads) * N * (N + 1) / 2 * L
	head = 2 * E * float64(hp.Vocab) * float64(scored)
	return
}

// syntheticModel makes a model of a shape with uniform random weights of
// the usual scale (1/sqrt(fan-in)) and unit norms, filled in device
// memory: the file it loads (a temporary one, removed once mapped) holds
// the metadata and the tensors' shapes, its data a hole of zeros that is
// never read.
func syntheticModel(e *Engine, s benchShape, p Precision, kv string, seed uint64) (*Model, error) {
	dir, err := os.MkdirTemp("", "ppl-synthetic-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, s.name+".gguf")
	if err := writeSkeleton(path, s); err != nil {
		return nil, err
	}
	// Matrices filled on the device in their half type, as before weights
	// stayed quantized (the F16 skeleton would otherwise be kept as F16
	// blocks): TestBenchmarkWeights compares the two storages.
	if p.Storage == "" {
		p.Storage = WeightsBF16
	}
	return readyModel(load(e, path, model.Options{KVDtype: kv}, p, seed, newWeightSet(e)))
}

// writeSkeleton writes a GGUF file of shape s (F16 matrices, F32 norms)
// whose tensor data are zeros left as a hole in a sparse file.
// readyModel copies a freshly loaded model's weights to the device
// (lazy.go), so that the benchmarks' load times include the copies.
func readyModel(m *Model, err error) (*Model, error) {
	if err == nil {
		if err = m.Upload(); err != nil {
			m.Close()
			return nil, err
		}
	}
	return m, err
}

// readySeconds is how long the model took to load and copy its weights.
func (m *Model) readySeconds() float64 {
	_, _, took := m.b.uploaded()
	return (m.loadTime + took).Seconds()
}

func writeSkeleton(path string, s benchShape) error { return writeSkeletonTyped(path, s, nil) }

// writeSkeletonTyped is writeSkeleton with each matrix of type typ(name)
// (F16 when typ is nil): a quantized synthetic model (qweights_bench_test.go).
func writeSkeletonTyped(path string, s benchShape, typ func(name string) gguf.Type) error {
	if d, ok := qwen35Bench[s.name]; ok { // bench_qwen35_test.go
		return writeSkeletonQwen35(path, s, d)
	}
	if d, ok := slidingBench[s.name]; ok { // bench_shapes_test.go
		return writeSkeletonSliding(path, s, d, typ)
	}
	if d, ok := gemma4Bench[s.name]; ok { // bench_gemma4_test.go
		return writeSkeletonGemma4(path, s, d, typ)
	}
	if d, ok := mlaBench[s.name]; ok { // bench_deepseek2_test.go
		return writeSkeletonDeepSeek2(path, s, d, typ)
	}
	hp, arch := s.hp, s.hp.Arch
	w := gguf.NewWriter()
	w.Add("general.architecture", arch)
	w.Add("general.name", "synthetic "+s.name)
	for k, v := range map[string]any{
		"embedding_length": uint32(hp.Embd), "block_count": uint32(hp.Layers), "feed_forward_length": uint32(hp.FFN),
		"attention.head_count": uint32(hp.Heads), "attention.head_count_kv": uint32(hp.KVHeads),
		"attention.key_length": uint32(hp.HeadDim), "attention.value_length": uint32(hp.HeadDim),
		"attention.layer_norm_rms_epsilon": float32(hp.Eps), "context_length": uint32(max(hp.CtxTrain, 1)),
		"rope.freq_base": float32(500000),
	} {
		w.Add(arch+"."+k, v)
	}
	if m := s.moe; m != nil {
		w.Add(arch+".expert_count", uint32(m.Experts))
		w.Add(arch+".expert_used_count", uint32(m.Used))
		w.Add(arch+".expert_feed_forward_length", uint32(m.FFN))
	}
	sk := newSkeleton(w, typ)
	add := sk.add
	E, V := uint64(hp.Embd), uint64(hp.Vocab)
	qd, kvd := uint64(hp.Heads*hp.HeadDim), uint64(hp.KVHeads*hp.HeadDim)
	add("token_embd.weight", gguf.TypeF16, E, V)
	add("output_norm.weight", gguf.TypeF32, E)
	if !s.tied {
		add("output.weight", gguf.TypeF16, E, V)
	}
	for i := range hp.Layers {
		b := fmt.Sprintf("blk.%d.", i)
		add(b+"attn_norm.weight", gguf.TypeF32, E)
		add(b+"attn_q.weight", gguf.TypeF16, E, qd)
		add(b+"attn_k.weight", gguf.TypeF16, E, kvd)
		add(b+"attn_v.weight", gguf.TypeF16, E, kvd)
		add(b+"attn_output.weight", gguf.TypeF16, qd, E)
		add(b+"ffn_norm.weight", gguf.TypeF32, E)
		if arch != "llama" {
			add(b+"attn_q_norm.weight", gguf.TypeF32, uint64(hp.HeadDim))
			add(b+"attn_k_norm.weight", gguf.TypeF32, uint64(hp.HeadDim))
		}
		if m := s.moe; m != nil {
			N, F := uint64(m.Experts), uint64(m.FFN)
			add(b+"ffn_gate_inp.weight", gguf.TypeF16, E, N)
			add(b+"ffn_gate_exps.weight", gguf.TypeF16, E, F, N)
			add(b+"ffn_up_exps.weight", gguf.TypeF16, E, F, N)
			add(b+"ffn_down_exps.weight", gguf.TypeF16, F, E, N)
		} else {
			F := uint64(hp.FFN)
			sk.ffn(b, E, F)
		}
	}
	return sk.write(path)
}

// sparseWriter writes to f, but seeks over writes of (a part of) zero, so
// that a file of many gigabytes of zeros takes no time and no disk.
type sparseWriter struct {
	f    *os.File
	zero []byte
}

func (s *sparseWriter) Write(p []byte) (int, error) {
	if len(p) > 0 {
		a, z := uintptr(unsafe.Pointer(&p[0])), uintptr(unsafe.Pointer(&s.zero[0]))
		if a >= z && a+uintptr(len(p)) <= z+uintptr(len(s.zero)) {
			_, err := s.f.Seek(int64(len(p)), io.SeekCurrent)
			return len(p), err
		}
	}
	return s.f.Write(p)
}

// measureGEMMPeak times n³ products of half type typ (float32
// accumulation, output of the same type, random inputs) and returns the
// median rate in FLOP/s.
func measureGEMMPeak(t *testing.T, e *Engine, typ cublas.DataType, n int) float64 {
	const reps, samples = 10, 7
	nn := int64(n) * int64(n)
	a, b, c := devAlloc(t, e, 2*nn), devAlloc(t, e, 2*nn), devAlloc(t, e, 2*nn)
	do(t, e, func() error {
		if err := e.fillUniform(a, nn, 101, 1, typ); err != nil {
			return err
		}
		return e.fillUniform(b, nn, 102, 1, typ)
	})
	gemm := func() error { return e.gemm(c, typ, n, a, n, b, typ, n, n, n, 0) }
	var rates []float64
	do(t, e, func() error {
		for range 3 {
			if err := gemm(); err != nil {
				return err
			}
		}
		for range samples {
			d, err := e.elapsed(func() error {
				for range reps {
					if err := gemm(); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			rates = append(rates, 2*float64(nn)*float64(n)*reps/d.Seconds())
		}
		return nil
	})
	slices.Sort(rates)
	return rates[len(rates)/2]
}

type benchResult struct {
	Model          string    `json:"model"`
	Precision      string    `json:"precision"`
	Context        int       `json:"context"`
	Stride         int       `json:"stride"`
	Windows        int       `json:"windows"`
	Attention      string    `json:"attention"`
	SecondsPerWin  float64   `json:"seconds_per_window"`
	ForwardShare   float64   `json:"forward_share"`
	TokensPerSec   float64   `json:"tokens_per_second_scored"`
	ProcessedPerS  float64   `json:"tokens_per_second_processed"`
	ModelTFLOPs    float64   `json:"model_tflop_per_s"`
	MFU            float64   `json:"mfu_vs_bf16_gemm_peak"`
	AttnFLOPShare  float64   `json:"attention_flop_share"`
	PeakAllocGiB   float64   `json:"peak_allocated_gib"`
	PeakDeviceGiB  float64   `json:"peak_device_used_gib"`
	WeightsGiB     float64   `json:"weights_gib"`
	MakeSeconds    float64   `json:"make_seconds"`
	Skipped        string    `json:"skipped,omitempty"`
	WindowsSeconds []float64 `json:"window_seconds"`
	// A mixture of experts at context 4096: tokens/s with its experts run
	// one at a time, the baseline of running them together.
	OneExpertPerS   float64 `json:"tokens_per_second_experts_one_at_a_time,omitempty"`
	HostRoutingPerS float64 `json:"tokens_per_second_routing_on_host,omitempty"`
	SyncCopiesPerS  float64 `json:"tokens_per_second_copies_synchronous,omitempty"`
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func TestBenchmark(t *testing.T) {
	if os.Getenv("PPL_GPU_BENCH") != "1" {
		t.Skip("throughput benchmark: set PPL_GPU_BENCH=1 (tests/gpu/check.sh does)")
	}
	e := gpuEngine(t)
	e.SyncEach = false
	defer func() { e.SyncEach = true }()
	start := time.Now()
	budget := 150.0
	fmt.Sscan(envOr("PPL_GPU_BENCH_SECONDS", "150"), &budget)
	timed := 3
	fmt.Sscan(envOr("PPL_GPU_BENCH_WINDOWS", "3"), &timed)

	out := map[string]any{"device": e.Describe()}
	peak := measureGEMMPeak(t, e, bf16, 8192)
	peak16 := measureGEMMPeak(t, e, f16, 8192)
	fmt.Printf("bench: %s\n", e.Describe())
	fmt.Printf("bench: GEMM peak 8192³ (median of 7×10 products, random inputs): bf16 %.1f TFLOP/s, fp16 %.1f TFLOP/s\n", peak/1e12, peak16/1e12)
	out["gemm_peak_bf16_tflops"], out["gemm_peak_fp16_tflops"] = peak/1e12, peak16/1e12

	// Host-side load: dequantize and round 64 MiB of weights per file type.
	loads := map[string]float64{}
	for _, typ := range []gguf.Type{gguf.TypeQ8_0, gguf.TypeF16} {
		loads[typ.String()] = hostLoadRate(t, typ)
	}
	fmt.Printf("bench: host load (dequantize + round to bf16, all cores): Q8_0 %.2f, F16 %.2f Gweights/s; an 8B model loads in about %.0f s (Q8_0) / %.0f s (F16) plus the copy\n",
		loads["Q8_0"]/1e9, loads["F16"]/1e9, 8e9/loads["Q8_0"], 8e9/loads["F16"])
	out["host_load_gweights_per_s"] = loads

	wantModels := strings.Split(envOr("PPL_GPU_BENCH_MODELS", "1b,8b,qwen3moe-30b-a3b,qwen35-27b,gpt-oss-20b,gemma3-27b,gemma4-31b,deepseek-v2-lite"), ",")
	long := os.Getenv("PPL_GPU_BENCH_LONG") == "1"
	ctxEnv := os.Getenv("PPL_GPU_BENCH_CONTEXTS")
	var ctxs [][2]int
	for _, c := range strings.Split(envOr("PPL_GPU_BENCH_CONTEXTS", "4096/2048,32768/16384"), ",") {
		var n, s int
		if _, err := fmt.Sscanf(c, "%d/%d", &n, &s); err != nil || n <= 0 || s <= 0 || s > n {
			t.Fatalf("PPL_GPU_BENCH_CONTEXTS: bad %q", c)
		}
		ctxs = append(ctxs, [2]int{n, s})
	}
	// The budget's end: start + PPL_GPU_BENCH_SECONDS, and no later than
	// the test's deadline less the time to write the table.
	end := start.Add(time.Duration(budget * float64(time.Second)))
	if d, ok := t.Deadline(); ok && d.Add(-15*time.Second).Before(end) {
		end = d.Add(-15 * time.Second)
	}
	var results []benchResult
	// run makes shape's model and measures it at the contexts cs; a
	// deferred pass (contexts above benchLateContext) projects each
	// setting's time from the model's earlier result and skips it when
	// it would not end within the budget.
	run := func(shape benchShape, cs [][2]int, deferred bool) {
		e.ResetPeak()
		m, err := syntheticModel(e, shape, Mixed, "bf16", 7)
		if err != nil {
			t.Errorf("%s: %v", shape.name, err)
			// its rows still appear in the table, saying why they are empty
			for _, c := range cs {
				results = append(results, benchResult{Model: shape.name, Precision: Mixed.Name, Context: c[0], Stride: c[1],
					Skipped: "failed: " + firstLine(err.Error())})
			}
			return
		}
		defer m.Close()
		fmt.Printf("bench: %s: %s of weights made on the device in %.2f s; attention: %s\n", shape.name, humanBytes(m.weightBytes), m.readySeconds(), m.attn)
		for _, c := range cs {
			r := benchResult{Model: shape.name, Precision: m.prec.Name, Context: c[0], Stride: c[1], Attention: m.attn,
				WeightsGiB: float64(m.weightBytes) / (1 << 30), MakeSeconds: m.readySeconds()}
			n := timed
			if deferred && os.Getenv("PPL_GPU_BENCH_WINDOWS") == "" {
				n = 1
			}
			proj, from := 0.0, 0
			if deferred {
				proj, from = projectSeconds(results, shape.name, m.HP, c, n)
			}
			switch {
			case time.Since(start).Seconds() > budget:
				r.Skipped = fmt.Sprintf("time budget of %.0f s spent", budget)
			case !long && shape.maxContext > 0 && c[0] > shape.maxContext:
				r.Skipped = fmt.Sprintf("contexts above %d not benchmarked for this model", shape.maxContext)
			case !long && !m.flash && c[0] > 8192:
				r.Skipped = "no tensor-core attention kernel: the plain one is too slow at this context"
			case deferred && proj == 0 && ctxEnv == "" && !long:
				r.Skipped = "no shorter setting of this model measured to project its time from"
			case proj > 0 && time.Now().Add(time.Duration(proj*float64(time.Second))).After(end):
				r.Skipped = fmt.Sprintf("would take about %.0f s (%d windows, projected from context %d), %.0f s of the budget left",
					proj, n+2, from, max(0, time.Until(end).Seconds()))
			default:
				if err := benchRun(t, e, m, c[0], c[1], n, &r); err != nil {
					t.Errorf("%s context %d: %v", shape.name, c[0], err)
					r.Skipped = err.Error()
				}
				r.MFU = r.ModelTFLOPs * 1e12 / peak
				if shape.moe != nil && c[0] <= 4096 && r.Skipped == "" {
					// The mixture's baselines, a window each: its experts
					// one at a time, its routing on the host, its copies to
					// the device synchronous.
					for _, b := range []struct {
						what string
						set  func(on bool)
						into *float64
					}{
						{"experts one at a time", func(on bool) { expertsTogether = b2i(on) }, &r.OneExpertPerS},
						{"routing on the host", func(on bool) { hostRouting = on }, &r.HostRoutingPerS},
						{"copies to the device synchronous", func(on bool) { stagedCopies = !on }, &r.SyncCopiesPerS},
					} {
						var base benchResult
						b.set(true)
						err := benchRun(t, e, m, c[0], c[1], 1, &base)
						b.set(false)
						if err != nil {
							t.Errorf("%s context %d, %s: %v", shape.name, c[0], b.what, err)
							continue
						}
						*b.into = base.TokensPerSec
						fmt.Printf("bench: %s context %d stride %d: %.0f tokens/s scored, %s %.0f: %.2f×\n",
							shape.name, c[0], c[1], r.TokensPerSec, b.what, base.TokensPerSec, r.TokensPerSec/base.TokensPerSec)
					}
				}
				if c[0] <= 4096 && r.Skipped == "" {
					if tab, err := benchProfile(m, c[0], c[1]); err != nil {
						t.Errorf("%s context %d, profiled: %v", shape.name, c[0], err)
					} else {
						fmt.Printf("bench: %s context %d stride %d: %s\n", shape.name, c[0], c[1], strings.ReplaceAll(tab, "\n", "\nbench: "))
					}
				}
			}
			results = append(results, r)
			if r.Skipped != "" {
				fmt.Printf("bench: %s context %d stride %d: skipped: %s\n", shape.name, c[0], c[1], r.Skipped)
				continue
			}
			fmt.Printf("bench: %s context %d stride %d: %.0f tokens/s scored (%.0f processed), %.3f s/window (forward %.0f%%), %.1f model TFLOP/s = %.1f%% of the bf16 GEMM peak (attention %.0f%% of FLOPs); peak memory %.2f GiB allocated, %.2f GiB in use on the device\n",
				shape.name, c[0], c[1], r.TokensPerSec, r.ProcessedPerS, r.SecondsPerWin, 100*r.ForwardShare, r.ModelTFLOPs, 100*r.MFU, 100*r.AttnFLOPShare, r.PeakAllocGiB, r.PeakDeviceGiB)
		}
	}
	// Contexts above benchLateContext run after every model's others, so
	// that a long setting cannot take their turn.
	type lateRun struct {
		shape benchShape
		cs    [][2]int
	}
	var late []lateRun
	for _, shape := range benchShapes {
		if !slices.Contains(wantModels, strings.TrimPrefix(shape.name, "llama-")) && !slices.Contains(wantModels, shape.name) {
			continue
		}
		cs := ctxs
		if own, ok := benchContexts[shape.name]; ok && ctxEnv == "" {
			cs = own
		}
		var now, later [][2]int
		for _, c := range cs {
			if c[0] > benchLateContext {
				later = append(later, c)
			} else {
				now = append(now, c)
			}
		}
		if len(now) > 0 {
			run(shape, now, false)
		}
		if len(later) > 0 {
			late = append(late, lateRun{shape, later})
		}
	}
	for _, l := range late {
		run(l.shape, l.cs, true)
	}
	out["results"] = results
	if p := os.Getenv("PPL_GPU_BENCH_OUT"); p != "" {
		b, _ := json.MarshalIndent(out, "", "  ")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Error(err)
		}
	}
	fmt.Printf("bench: %-16s %-14s %12s %12s %9s %8s %9s\n", "model", "context/stride", "tok/s", "TFLOP/s", "MFU", "fwd", "peak GiB")
	for _, r := range results {
		if r.Skipped != "" {
			fmt.Printf("bench: %-16s %6d/%-7d skipped: %s\n", r.Model, r.Context, r.Stride, r.Skipped)
			continue
		}
		fmt.Printf("bench: %-16s %6d/%-7d %12.0f %12.1f %8.1f%% %7.0f%% %9.2f\n", r.Model, r.Context, r.Stride, r.TokensPerSec, r.ModelTFLOPs, 100*r.MFU, 100*r.ForwardShare, r.PeakDeviceGiB)
	}
	if goal := findResult(results, "llama-8b", 4096); goal != nil && goal.Skipped == "" {
		fmt.Printf("bench: goal (8B, context 4096): %.1f%% of the bf16 GEMM peak end to end (goal 40%%)\n", 100*goal.MFU)
	}
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func findResult(rs []benchResult, model string, ctx int) *benchResult {
	for i := range rs {
		if rs[i].Model == model && rs[i].Context == ctx {
			return &rs[i]
		}
	}
	return nil
}

// benchLateContext: settings of longer contexts run last, each only when
// its projected time fits what is left of the budget (projectSeconds).
const benchLateContext = 32768

// benchContexts are the default contexts of the models that do not take
// PPL_GPU_BENCH_CONTEXTS's default (it still overrides them when set).
var benchContexts = map[string][][2]int{}

// projectSeconds estimates a setting of model name (a warm-up, timed
// windows and the forward pass alone: timed+2 windows) from its measured
// setting of the longest context below c: that setting's seconds a window
// times the ratio of the FLOPs, attention's counted 3 times (the
// tensor-core flash kernel runs well below the GEMMs' rate, and its share
// grows with the context). 0 when the model has no such result.
func projectSeconds(results []benchResult, name string, hp model.HParams, c [2]int, timed int) (secs float64, from int) {
	var prev *benchResult
	for i := range results {
		r := &results[i]
		if r.Model != name || r.Skipped != "" || r.Context >= c[0] || r.SecondsPerWin <= 0 {
			continue
		}
		if prev == nil || r.Context > prev.Context {
			prev = r
		}
	}
	if prev == nil {
		return 0, 0
	}
	cost := func(n, stride int) float64 {
		lin, att, head := windowFLOPs(hp, n, min(stride, n-1)) // benchRun's scored rows
		return lin + 3*att + head
	}
	perWin := prev.SecondsPerWin * cost(c[0], c[1]) / cost(prev.Context, prev.Stride)
	return perWin * float64(timed+2), prev.Context
}

// benchProfile scores one window of n random tokens (the last stride
// scored) with PPL_CUDA_PROFILE's account on and returns its table.
func benchProfile(m *Model, n, stride int) (string, error) {
	m.b.prof = newProfile()
	defer func() { m.b.prof = nil }()
	if _, err := m.Score(randomTokens(rand.New(rand.NewPCG(uint64(n), 5)), n, m.HP.Vocab), max(1, n-stride)); err != nil {
		return "", err
	}
	return m.b.prof.table(12), nil
}

// randomTokens is a window of n tokens drawn uniformly from a vocabulary.
func randomTokens(rng *rand.Rand, n, vocab int) []int32 {
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(rng.IntN(vocab))
	}
	return v
}

// benchRun scores one warm-up and timed windows of random tokens.
func benchRun(t *testing.T, e *Engine, m *Model, n, stride, timed int, r *benchResult) error {
	rng := rand.New(rand.NewPCG(uint64(n), 3))
	tokens := func() []int32 { return randomTokens(rng, n, m.HP.Vocab) }
	from := n - stride
	if from < 1 {
		from = 1
	}
	if _, err := m.Score(tokens(), from); err != nil { // warm-up: buffers, tables
		return err
	}
	e.ResetPeak()
	var secs []float64
	for range timed {
		tok := tokens()
		t0 := time.Now()
		if _, err := m.Score(tok, from); err != nil {
			return err
		}
		secs = append(secs, time.Since(t0).Seconds())
	}
	// The forward pass alone: a window scoring only its last target.
	t0 := time.Now()
	if _, err := m.Score(tokens(), n-1); err != nil {
		return err
	}
	fwd := time.Since(t0)
	slices.Sort(secs)
	med := secs[len(secs)/2]
	scored := n - from
	lin, att, head := windowFLOPs(m.HP, n, scored)
	r.Windows, r.WindowsSeconds, r.SecondsPerWin = timed, secs, med
	r.ForwardShare = fwd.Seconds() / med
	r.TokensPerSec, r.ProcessedPerS = float64(scored)/med, float64(n)/med
	r.ModelTFLOPs = (lin + att + head) / med / 1e12
	r.AttnFLOPShare = att / (lin + att + head)
	r.PeakAllocGiB = float64(e.PeakAllocated()) / (1 << 30)
	r.PeakDeviceGiB = float64(e.PeakDeviceUsed()) / (1 << 30)
	return nil
}

// hostLoadRate measures dequantizing and rounding weights of type typ on
// the host (Model.uploadRows's work without the copy), in weights per second.
func hostLoadRate(t *testing.T, typ gguf.Type) float64 {
	const in, rows = 4096, 4096
	src := make([]float32, in*rows)
	rng := rand.New(rand.NewPCG(5, 5))
	for i := range src {
		src[i] = float32(rng.NormFloat64() * 0.02)
	}
	rb, _ := typ.RowSize(in)
	data := make([]byte, int(rb)*rows)
	if err := quant.Quantize(typ, src, data); err != nil {
		t.Fatal(err)
	}
	out := make([]uint16, in*rows)
	t0 := time.Now()
	if err := convertRows(out, typ, data, int(rb), in, 0, rows, 0, f16, false); err != nil {
		t.Fatal(err)
	}
	return float64(in*rows) / time.Since(t0).Seconds()
}

// The benchmark's host side on the simulator, with a small shape.
func TestBenchmarkSim(t *testing.T) {
	e := simEngine()
	if p := measureGEMMPeak(t, e, f16, 64); !(p > 0) {
		t.Errorf("GEMM rate %v", p)
	}
	for _, shape := range []benchShape{
		{"tiny", model.HParams{Arch: "llama", Embd: 128, Layers: 2, FFN: 256, Heads: 4, KVHeads: 2, HeadDim: 32, ValueDim: 32, Vocab: 1000, Eps: 1e-5}, false, nil, 0},
		{"tiny-moe", model.HParams{Arch: "qwen3moe", Embd: 128, Layers: 2, FFN: 256, Heads: 4, KVHeads: 2, HeadDim: 32, ValueDim: 32, Vocab: 1000, Eps: 1e-6}, false,
			&model.MoEParams{Experts: 8, Used: 2, FFN: 64}, 0},
	} {
		m, err := syntheticModel(e, shape, Mixed, "bf16", 1)
		if err != nil {
			t.Fatal(err)
		}
		if !m.flash {
			t.Fatalf("%s: attention: %s", shape.name, m.attn)
		}
		var r benchResult
		if err := benchRun(t, e, m, 96, 48, 2, &r); err != nil {
			t.Fatal(err)
		}
		if r.TokensPerSec <= 0 || r.ModelTFLOPs <= 0 || r.PeakAllocGiB <= 0 {
			t.Errorf("%s: result %+v", shape.name, r)
		}
		tab, err := benchProfile(m, 96, 48)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"× layer N attention", "the host, between operations"} {
			if !strings.Contains(tab, want) {
				t.Errorf("%s: profile without %q:\n%s", shape.name, want, tab)
			}
		}
		if shape.moe != nil && !strings.Contains(tab, "× experts blk.N.ffn_up_exps.weight") {
			t.Errorf("%s: profile without the experts:\n%s", shape.name, tab)
		}
		res, err := m.Score(make([]int32, 64), 1)
		if err != nil {
			t.Fatal(err)
		}
		for i, lp := range res.Logprobs {
			if !(lp < 0) || lp < -20 {
				t.Fatalf("%s: target %d: log p %v: synthetic activations out of scale", shape.name, i, lp)
			}
		}
		m.Close()
	}
	lin, att, head := windowFLOPs(benchShapes[1].hp, 4096, 2048)
	t.Logf("8B at 4096/2048: %.1f TFLOP linear, %.1f attention, %.1f head", lin/1e12, att/1e12, head/1e12)
	if math.Abs(lin/1e12-2*6.98e9*4096/1e12) > 1 {
		t.Errorf("linear FLOPs %v", lin)
	}
}

// projectSeconds scales the model's longest shorter setting by the
// FLOPs, attention's counted 3 times, and finds nothing for another model.
func TestProjectSeconds(t *testing.T) {
	var q *benchShape
	for i := range benchShapes {
		if benchShapes[i].name == "qwen35-27b" {
			q = &benchShapes[i]
		}
	}
	if q == nil {
		t.Fatal("no qwen35-27b shape")
	}
	rs := []benchResult{{Model: "qwen35-27b", Context: 4096, Stride: 2048, SecondsPerWin: 0.5},
		{Model: "qwen35-27b", Context: 2048, Stride: 1024, SecondsPerWin: 9},
		{Model: "llama-8b", Context: 32768, Stride: 16384, SecondsPerWin: 100}}
	secs, from := projectSeconds(rs, q.name, q.hp, [2]int{65536, 32768}, 1)
	lin, att, head := windowFLOPs(q.hp, 65536, 32768)
	lin0, att0, head0 := windowFLOPs(q.hp, 4096, 2048)
	want := 3 * 0.5 * (lin + 3*att + head) / (lin0 + 3*att0 + head0)
	t.Logf("qwen35-27b at 65536/32768: %.1f PFLOP a window (%.2f of attention), projected %.0f s for 3 windows from 0.5 s at 4096", (lin+att+head)/1e15, att/1e15, secs)
	if from != 4096 || math.Abs(secs-want) > 1e-9*want || secs < 30 || secs > 60 {
		t.Errorf("projection %v s from %d, want %v from 4096", secs, from, want)
	}
	if secs, _ := projectSeconds(rs, "gemma3-27b", q.hp, [2]int{65536, 32768}, 1); secs != 0 {
		t.Errorf("projection %v for a model without results", secs)
	}
}

// Buffers grow with the window and are reused: scores do not depend on
// what ran before (simulator).
func TestWindowSizesSim(t *testing.T) {
	e := simEngine()
	shape := benchShape{"tiny", model.HParams{Arch: "llama", Embd: 64, Layers: 1, FFN: 128, Heads: 2, KVHeads: 1, HeadDim: 32, ValueDim: 32, Vocab: 500, Eps: 1e-5}, true, nil, 0}
	rng := rand.New(rand.NewPCG(9, 9))
	toks := make([]int32, 600)
	for i := range toks {
		toks[i] = int32(rng.IntN(500))
	}
	score := func(m *Model, n, from int) []float64 {
		r, err := m.Score(toks[:n], from)
		if err != nil {
			t.Fatal(err)
		}
		return r.Logprobs
	}
	m, err := syntheticModel(e, shape, Mixed, "int8", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var seq [][]float64
	for _, w := range [][2]int{{100, 1}, {300, 200}, {50, 10}, {600, 599}} {
		seq = append(seq, score(m, w[0], w[1]))
	}
	for i, w := range [][2]int{{100, 1}, {300, 200}, {50, 10}, {600, 599}} {
		f, err := syntheticModel(e, shape, Mixed, "int8", 3)
		if err != nil {
			t.Fatal(err)
		}
		fresh := score(f, w[0], w[1])
		f.Close()
		for j := range fresh {
			if fresh[j] != seq[i][j] {
				t.Fatalf("window %d target %d: %v after other windows, %v fresh", i, j, seq[i][j], fresh[j])
			}
		}
	}
	if n := m.b.caches[shape.hp.HeadDim].k.groups / int64(shape.hp.KVHeads); n != 768 {
		t.Errorf("capacity %d tokens, want 768", n)
	}
}

// skeleton is a model file of zeros (a benchmark's weights, filled on the
// device) written sparsely: its tensors take no time and no disk.
type skeleton struct {
	w    *gguf.Writer
	typ  func(name string) gguf.Type
	zero []byte
}

// newSkeleton writes w's tensors as zeros: of the type add is given, or of
// typ(name) for the F16 matrices when typ is not nil.
func newSkeleton(w *gguf.Writer, typ func(name string) gguf.Type) *skeleton {
	return &skeleton{w: w, typ: typ, zero: make([]byte, 16<<20)}
}

// add adds a tensor of zeros.
func (sk *skeleton) add(name string, t gguf.Type, shape ...uint64) {
	if t == gguf.TypeF16 && sk.typ != nil {
		t = sk.typ(name)
	}
	size, _ := t.RowSize(shape[0])
	for _, d := range shape[1:] {
		size *= d
	}
	sk.w.AddTensorFunc(name, t, shape, func(out io.Writer) error {
		for left := size; left > 0; {
			n := min(left, uint64(len(sk.zero)))
			if _, err := out.Write(sk.zero[:n]); err != nil {
				return err
			}
			left -= n
		}
		return nil
	})
}

// ffn adds layer b's gated FFN of width F over E.
func (sk *skeleton) ffn(b string, E, F uint64) {
	sk.add(b+"ffn_gate.weight", gguf.TypeF16, E, F)
	sk.add(b+"ffn_up.weight", gguf.TypeF16, E, F)
	sk.add(b+"ffn_down.weight", gguf.TypeF16, F, E)
}

// write writes the file at path, the zeros as holes.
func (sk *skeleton) write(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := sk.w.WriteTo(&sparseWriter{f: f, zero: sk.zero}); err != nil {
		f.Close()
		return err
	}
	end, err := f.Seek(0, io.SeekCurrent)
	if err == nil {
		err = f.Truncate(end) // the hole up to the end
	}
	return errors.Join(err, f.Close())
}
