package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/score/model"
)

// The weight-storage check of tests/gpu/check.sh (issue #17), hidden in
// the test binary: it skips unless PPL_GPU_BENCH_WEIGHTS=1. Synthetic
// models as TestBenchmark's (shapes in a sparse file, blocks made on the
// host from uniform values and copied over every matrix: synthBlocks):
//
//   - memory: a Llama-70B-shaped Q4_K_M model (Q4_K matrices, Q6_K output
//     head and ffn_down, as llama-quantize's Q4_K_M mostly keeps them),
//     quantized on the device, scores one window of 4096 tokens (and of
//     32768 with PPL_GPU_BENCH_WEIGHTS_LONG=1); peak device memory must stay
//     within the file's size + 10 GB;
//   - throughput: Llama-8B-shaped Q4_K_M and Q8_0 models at context
//     4096/2048, weights quantized on the device against the host's bf16
//     copy in the same run; the issue asks for at least 0.9 of the copy's
//     tokens/s. The Q4_K_M model also in the int8 mode (--activations
//     int8: integer tensor cores, attn_fx's split-fp16 attention), one
//     window;
//   - load time: a 27B-shaped dense Q4_K_M file read as any file is (its
//     blocks zeros, the sparse file's hole, at the page cache's speed:
//     what ppl adds to the disk's own time), its blocks copied to the
//     device and made ready.
//
// Lines start with "bench: " for the summary.
func TestBenchmarkWeights(t *testing.T) {
	if os.Getenv("PPL_GPU_BENCH_WEIGHTS") != "1" {
		t.Skip("weight-storage benchmark: set PPL_GPU_BENCH_WEIGHTS=1 (tests/gpu/check.sh does)")
	}
	e := gpuEngine(t)
	e.SyncEach = false
	defer func() { e.SyncEach = true }()

	llama70b := benchShape{"llama-70b", model.HParams{Arch: "llama", Embd: 8192, Layers: 80, FFN: 28672, Heads: 64, KVHeads: 8, HeadDim: 128, ValueDim: 128,
		Vocab: 128256, CtxTrain: 131072, Eps: 1e-5}, false, nil, 0}
	var llama8b benchShape
	for _, s := range benchShapes {
		if s.name == "llama-8b" {
			llama8b = s
		}
	}
	q4km := func(name string) gguf.Type {
		if name == "output.weight" || strings.Contains(name, "ffn_down") {
			return gguf.TypeQ6_K
		}
		return gguf.TypeQ4_K
	}
	q8 := func(string) gguf.Type { return gguf.TypeQ8_0 }

	// memory
	ctxs := []int{4096}
	if os.Getenv("PPL_GPU_BENCH_WEIGHTS_LONG") == "1" {
		ctxs = append(ctxs, 32768)
	}
	func() {
		e.ResetPeak()
		m, size, err := typedSyntheticModel(e, llama70b, q4km, WeightsQuantized, model.ActFP32, 7)
		if err != nil {
			t.Errorf("llama-70b Q4_K_M: %v", err)
			return
		}
		defer m.Close()
		fmt.Printf("bench: llama-70b Q4_K_M: file %.2f GiB, weights on the device %.2f GiB (a bf16 copy: %.2f GiB), made in %.1f s\n",
			float64(size)/(1<<30), float64(m.weightBytes)/(1<<30), float64(m.bf16Bytes)/(1<<30), m.readySeconds())
		for _, n := range ctxs {
			var r benchResult
			if err := benchRun(t, e, m, n, n/2, 1, &r); err != nil {
				t.Errorf("llama-70b Q4_K_M context %d: %v", n, err)
				continue
			}
			peak := e.PeakDeviceUsed()
			limit := uint64(size) + 10<<30
			fmt.Printf("bench: llama-70b Q4_K_M context %d: %.0f tokens/s scored, peak %.2f GiB in use on the device (%.2f GiB allocated by ppl); bound file + 10 GiB = %.2f GiB\n",
				n, r.TokensPerSec, float64(peak)/(1<<30), float64(e.PeakAllocated())/(1<<30), float64(limit)/(1<<30))
			if n == 4096 && peak > limit {
				t.Errorf("llama-70b Q4_K_M context 4096: peak device memory %.2f GiB > file + 10 GiB = %.2f GiB", float64(peak)/(1<<30), float64(limit)/(1<<30))
			}
		}
	}()

	// load time of a file's blocks (Gemma-3-27B's sizes in llama's layout)
	func() {
		dense27b := benchShape{"dense-27b", model.HParams{Arch: "llama", Embd: 5376, Layers: 62, FFN: 21504, Heads: 32, KVHeads: 16, HeadDim: 128, ValueDim: 128,
			Vocab: 262144, CtxTrain: 131072, Eps: 1e-6}, false, nil, 0}
		m, size, err := typedSyntheticModel(e, dense27b, q4km, WeightsQuantized, model.ActFP32, 0)
		if err != nil {
			t.Errorf("dense-27b Q4_K_M from its file: %v", err)
			return
		}
		defer m.Close()
		took := m.readySeconds()
		fmt.Printf("bench: dense-27b Q4_K_M: file %.2f GiB read, copied and ready on the device in %.1f s (%.1f GiB/s; the file from the page cache)\n",
			float64(size)/(1<<30), took, float64(size)/(1<<30)/took)
	}()

	// throughput, quantized against the bf16 copy
	for _, c := range []struct {
		name string
		typ  func(string) gguf.Type
	}{{"Q4_K_M", q4km}, {"Q8_0", q8}} {
		var tps [3]float64
		for i, r := range []struct {
			storage, act string
			windows      int
		}{{WeightsQuantized, model.ActFP32, 3}, {WeightsBF16, model.ActFP32, 3}, {WeightsQuantized, model.ActInt8, 1}} {
			if r.act == model.ActInt8 && c.name != "Q4_K_M" {
				continue
			}
			what := fmt.Sprintf("llama-8b %s weights %s activations %s", c.name, r.storage, r.act)
			m, _, err := typedSyntheticModel(e, llama8b, c.typ, r.storage, r.act, 7)
			if err != nil {
				t.Errorf("%s: %v", what, err)
				continue
			}
			var res benchResult
			err = benchRun(t, e, m, 4096, 2048, r.windows, &res)
			m.Close()
			if err != nil {
				t.Errorf("%s: %v", what, err)
				continue
			}
			tps[i] = res.TokensPerSec
			fmt.Printf("bench: %s: context 4096 stride 2048: %.0f tokens/s scored, %.1f model TFLOP/s, weights %.2f GiB, loaded in %.1f s\n",
				what, res.TokensPerSec, res.ModelTFLOPs, float64(m.weightBytes)/(1<<30), m.readySeconds())
		}
		if tps[1] > 0 {
			fmt.Printf("bench: llama-8b %s: quantized/bf16-copy throughput %.3f (the issue asks >= 0.9)\n", c.name, tps[0]/tps[1])
		}
		if tps[0] > 0 && tps[2] > 0 {
			fmt.Printf("bench: llama-8b %s: int8/fp32-mode throughput %.3f\n", c.name, tps[2]/tps[0])
		}
	}
}

// typedSyntheticModel is syntheticModel with matrices of type typ(name),
// the given weight storage and activations, its blocks made on the device
// from seed (0: read from the file, zeros); it also returns the file's
// size.
func typedSyntheticModel(e *Engine, s benchShape, typ func(string) gguf.Type, storage, act string, seed uint64) (*Model, int64, error) {
	dir, err := os.MkdirTemp("", "ppl-synthetic-")
	if err != nil {
		return nil, 0, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, s.name+".gguf")
	if err := writeSkeletonTyped(path, s, typ); err != nil {
		return nil, 0, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, 0, err
	}
	p := Mixed
	p.Storage = storage
	m, err := readyModel(load(e, path, model.Options{KVDtype: "bf16", Activations: act}, p, seed, newWeightSet(e)))
	return m, st.Size(), err
}
