package model

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"ppl.dev/oracle"
)

// archCases are the oracle's models of the newer architectures
// (oracle/golden-archs, oracle/exact-archs) that we load, with the bounds
// each is held to against llama.cpp: mean |Δ log p| and |PPL ratio - 1|.
// The models are F32 but for Q8_0 vocabulary matrices, against which
// llama.cpp rounds activations to 8 bits, which puts it about 0.01 per token
// from float64 (the oracle README's table); our distance from it is that.
var archCases = []struct {
	stem           string
	goldMean, gPPL float64
}{
	{"tiny-qwen3moe", 0.02, 2e-3},
	{"tiny-qwen35", 0.02, 2e-3},
	{"tiny-qwen35moe", 0.02, 2e-3},
	{"tiny-qwen3next", 0.02, 2e-3},
	{"tiny-gemma3", 0.02, 2e-3},
	{"tiny-mistral3", 0.02, 2e-3},
	{"tiny-gemma4", 0.04, 1e-2}, // llama.cpp's F16 GELU table and near-tie routing (oracle README)
	{"tiny-glm4moe", 0.02, 2e-3},
	{"tiny-deepseek2", 0.02, 2e-3},
	{"tiny-gpt-oss", 0.08, 2e-3},
}

// TestExactArchs compares our float32 forward pass, with an f32 KV cache,
// with the oracle's float64 reference (exact-archs: the first 3 windows of
// three files per model). Bounds: 1e-4 max and 2e-5 mean per token (the
// issue's acceptance; measured 5e-6 and 5e-7, see the log).
func TestExactArchs(t *testing.T) {
	dir := oracle.Require(t)
	for _, c := range archCases {
		t.Run(c.stem, func(t *testing.T) {
			paths, _ := filepath.Glob(filepath.Join(dir, "exact-archs", c.stem+"__*.exact.ndjson"))
			if len(paths) == 0 {
				t.Fatalf("no exact-archs files for %s", c.stem)
			}
			m := oracleModel(t, dir, c.stem, "f32")
			var all diffStats
			for _, p := range paths {
				f, err := oracle.Read(p)
				if err != nil {
					t.Fatal(err)
				}
				d := scoreFile(t, m, f, -1)
				t.Logf("%s: %v", filepath.Base(p), &d)
				all.merge(d)
			}
			t.Logf("%s: %v", c.stem, &all)
			if all.max > 1e-4 || all.mean() > 2e-5 {
				t.Errorf("%v: want max <= 1e-4, mean <= 2e-5", &all)
			}
		})
	}
}

// TestGoldenArchs compares with llama.cpp's log-probs (golden-archs, every
// window of the 8 files per model; F32 KV cache as llama.cpp's goldens).
func TestGoldenArchs(t *testing.T) {
	dir := oracle.Require(t)
	for _, c := range archCases {
		t.Run(c.stem, func(t *testing.T) {
			paths, _ := filepath.Glob(filepath.Join(dir, "golden-archs", c.stem+"__*.ndjson"))
			if len(paths) == 0 {
				t.Fatalf("no golden-archs files for %s", c.stem)
			}
			m := oracleModel(t, dir, c.stem, "f32")
			var all diffStats
			for _, p := range paths {
				name := strings.TrimSuffix(filepath.Base(p), ".ndjson")
				if testing.Short() && !strings.Contains(name, "mixed-unicode") {
					continue
				}
				f, err := oracle.Read(p)
				if err != nil {
					t.Fatal(err)
				}
				d := scoreFile(t, m, f, -1)
				t.Logf("%s: %v", name, &d)
				if d.mean() > c.goldMean || math.Abs(d.pplRatio()-1) > c.gPPL {
					t.Errorf("%s: %v: want mean <= %g, |PPL ratio - 1| <= %g", name, &d, c.goldMean, c.gPPL)
				}
				all.merge(d)
			}
			t.Logf("%s: %v", c.stem, &all)
		})
	}
}
