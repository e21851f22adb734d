package model

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ppl.dev/oracle"
	"ppl.dev/qemutest"
	"ppl.dev/score/nn"
)

// TestLevels scores two short windows (of 40 and 130 tokens, a few targets
// each: the plain Go kernels are slow) of every oracle model, in both
// activation modes (and the Q8_0 Llama in the int8 mode over q8_0 and
// q4_1 caches too, the Q4_K_M Llama in int8-amx), at every kernel level this CPU has (generic Go, AVX2,
// AVX-512, AVX-512 VNNI; NEON on arm64), and requires the same log-probs to the bit:
// every level computes the same operations in the same order, so the
// golden checks, made at the best level, hold at all of them.
func TestLevels(t *testing.T) {
	dir := oracle.Require(t)
	paths, _ := filepath.Glob(filepath.Join(dir, "exact", "*__mixed-unicode__sliding.exact.ndjson"))
	if len(paths) == 0 {
		t.Fatalf("no exact files in %s/exact", dir)
	}
	prev := nn.CurrentLevel()
	defer nn.SetLevel(prev)
	// Say which levels this run checks: a machine without AVX-512 checks
	// generic and AVX2 only, an arm64 one generic and NEON, and the
	// others are then untested here.
	ran := nn.Levels()
	var missing []nn.Level
	for l := nn.Generic; l <= nn.NEON; l++ {
		if !slices.Contains(ran, l) {
			missing = append(missing, l)
		}
	}
	t.Logf("kernel levels checked: %v; not available on this CPU (not checked): %v", ran, missing)
	for _, p := range paths {
		stem := strings.Split(filepath.Base(p), "__")[0]
		f, err := oracle.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		type run struct{ act, kv string }
		runs := []run{{ActFP32, ""}, {ActInt8, ""}}
		if stem == "tiny-llama-spm-q8_0" { // llama.cpp's quantized caches: keys read in their blocks' lanes
			runs = append(runs, run{ActInt8, "q8_0"}, run{ActInt8, "q4_1"})
		}
		if stem == "tiny-llama-spm-q4_k_m" { // the AMX build's super-block order (F16's: TestDotLanes16)
			runs = append(runs, run{ActInt8AMX, ""})
		}
		for _, rn := range runs {
			act := rn.act
			m, err := Load(oracle.Model(dir, stem), Options{Activations: act, KVDtype: rn.kv})
			if err != nil {
				t.Fatal(err)
			}
			var ref [][]float64
			for _, lv := range nn.Levels() {
				nn.SetLevel(lv)
				for wi, w := range [][2]int{{40, 36}, {130, 126}} {
					r, err := m.Score(f.Header.Tokens[:w[0]], w[1])
					if err != nil {
						t.Fatal(err)
					}
					if lv == nn.Generic {
						ref = append(ref, r.Logprobs)
						continue
					}
					for i, lp := range r.Logprobs {
						if math.Float64bits(lp) != math.Float64bits(ref[wi][i]) {
							t.Fatalf("%s %s (KV %q) level %v: window %d target %d: %v, generic %v", stem, act, rn.kv, lv, wi, i, lp, ref[wi][i])
						}
					}
				}
			}
			m.Close()
		}
	}
}

// TestLevelsUnderQEMU runs TestLevels on an emulated arm64 CPU: the plain
// Go kernels against the NEON level, on every oracle model in both modes.
func TestLevelsUnderQEMU(t *testing.T) {
	oracle.Require(t)
	qemutest.Run(t, "TestLevels")
}
