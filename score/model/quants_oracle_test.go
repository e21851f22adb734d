package model

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"ppl.dev/oracle"
)

// The low-bit weight types (IQ*, MXFP4, NVFP4) against the oracle: the
// tiny-llama-spm files of oracle/models quantized by llama-quantize (see
// the oracle README's "low-bit quantizations"). To keep the tests short,
// the golden and KLD comparisons score the first quantWindows windows of
// each file (about a fifth of the targets; all windows measure the same,
// see TestGoldenQuants).
const quantWindows = 6

// TestExactQuants compares our float32 forward pass (f32 KV cache) with the
// float64 reference on the IQ2_XXS and MXFP4 models (oracle/exact-quants,
// the first 6 windows of 6 golden files each, 4,336 targets per model).
// Measured: max 5.5e-6 and mean 1.1e-6 (IQ2_XXS), 4.5e-6 and 8.9e-7
// (MXFP4): float32 rounding only, as for the other types (TestExact); the
// dequantized weights are exact. With -short, the mixed-unicode files.
func TestExactQuants(t *testing.T) {
	dir := oracle.Require(t)
	paths, _ := filepath.Glob(filepath.Join(dir, "exact-quants", "*.exact.ndjson"))
	if len(paths) == 0 {
		t.Skip("no exact-quants files")
	}
	perModel := map[string]*diffStats{}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".exact.ndjson")
		stem := strings.Split(name, "__")[0]
		t.Run(name, func(t *testing.T) {
			if testing.Short() && !strings.Contains(name, "__mixed-unicode__") {
				t.Skip("long case; run without -short")
			}
			f, err := oracle.Read(p)
			if err != nil {
				t.Fatal(err)
			}
			d := scoreFile(t, oracleModel(t, dir, stem, "f32"), f, -1)
			t.Logf("%v", &d)
			if d.max > 2e-5 || d.mean() > 3e-6 {
				t.Errorf("%v: want max <= 2e-5, mean <= 3e-6", &d)
			}
			if perModel[stem] == nil {
				perModel[stem] = &diffStats{}
			}
			perModel[stem].merge(d)
		})
	}
	for stem, d := range perModel {
		t.Logf("%s: %v", stem, d)
	}
}

// quantGolden scores the first windows windows of every golden-quants
// file (with -short, the mixed-unicode ones) with an f16 KV cache, as
// llama.cpp's, in activation mode act, and checks each file's mean
// |Δ log p| and PPL ratio against the bounds of its model.
func quantGolden(t *testing.T, act string, windows int, bounds func(stem string) (meanAbs, pplRatio float64)) {
	dir := oracle.Require(t)
	perModel := map[string]*diffStats{}
	for _, c := range goldenCases(t, dir, "golden-quants") {
		t.Run(c.name, func(t *testing.T) {
			if testing.Short() && c.text != "mixed-unicode" {
				t.Skip("long case; run without -short")
			}
			f, err := oracle.Read(c.path)
			if err != nil {
				t.Fatal(err)
			}
			d := scoreFile(t, oracleModelAct(t, dir, c.stem, "f16", act), f, windows)
			t.Logf("%v", &d)
			meanB, pplB := bounds(c.stem)
			if d.mean() > meanB || math.Abs(d.pplRatio()-1) > pplB {
				t.Errorf("%v: want mean <= %g, |PPL ratio - 1| <= %g", &d, meanB, pplB)
			}
			if perModel[c.stem] == nil {
				perModel[c.stem] = &diffStats{}
			}
			perModel[c.stem].merge(d)
		})
	}
	for stem, d := range perModel {
		t.Logf("%s: %v", stem, d)
	}
}

// isFP4 reports whether a golden-quants model is MXFP4 or NVFP4 (else an
// IQ type).
func isFP4(stem string) bool { return strings.HasSuffix(stem, "fp4") }

// TestGoldenQuants compares with llama.cpp's log-probs (oracle/golden-quants)
// in the fp32 mode. llama.cpp rounds the activations to 8 bits before
// these products (Q8_K for the IQ types, Q8_0 for MXFP4 and NVFP4), which
// puts it about 0.03 (IQ) and 0.018 (MXFP4, NVFP4) per token from exact
// arithmetic (oracle README); we are exact to 1e-6 (TestExactQuants), so
// our distance from it is its own. Measured per file, on the first 6
// windows: mean |Δ| up to 0.032 (IQ) and 0.0195 (FP4), |PPL ratio - 1| up
// to 0.0040 (IQ) and 0.0019 (FP4); over all windows of all 40 files the
// same (mean 0.027 to 0.031 and 0.017 to 0.019, PPL ratio 0.99597 to
// 1.00153). Bounds: the acceptance ones, mean 0.04 and |PPL ratio - 1|
// 0.005, for IQ; 0.025 and 0.003 for FP4.
func TestGoldenQuants(t *testing.T) {
	quantGolden(t, "", quantWindows, func(stem string) (float64, float64) {
		if isFP4(stem) {
			return 0.025, 0.003
		}
		return 0.04, 0.005
	})
}

// TestKLDQuants scores each low-bit model against the F16 model (f16 KV
// caches) on the first quantWindows windows of its en-gpl3 sliding KLD
// golden file and compares the mean KL divergence with llama.cpp's over the
// same targets: within 0.5%, tighter than the acceptance bound of 2%
// (measured: 0.9977 to 0.9999 of llama.cpp's, on 2 or 6 windows; top-1
// agreement within 0.008 of llama.cpp's). With -short, the first 2 windows.
func TestKLDQuants(t *testing.T) {
	quantKLD(t, "", 0.005, quantWindows)
}

// quantKLD is TestKLDQuants in activation mode act on the first windows
// windows of each file, with relative bound rel.
func quantKLD(t *testing.T, act string, rel float64, windows int) {
	dir := oracle.Require(t)
	paths, _ := filepath.Glob(filepath.Join(dir, "golden-quants", "*__kld-vs-*.ndjson"))
	if len(paths) == 0 {
		t.Skip("no golden-quants KLD files")
	}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".ndjson")
		parts := strings.Split(name, "__")
		stem, refStem := parts[0], strings.TrimPrefix(parts[3], "kld-vs-")
		t.Run(name, func(t *testing.T) {
			f, kw, err := readKLD(p)
			if err != nil {
				t.Fatal(err)
			}
			m, ref := oracleModelAct(t, dir, stem, "f16", act), oracleModelAct(t, dir, refStem, "f16", act)
			var ours, theirs float64
			var n, agree, agreeT int
			if testing.Short() {
				windows = min(windows, 2)
			}
			for wi, w := range f.Windows {
				if wi == windows {
					break
				}
				r, err := m.ScoreWith(f.Header.Tokens[w.Begin:w.End], w.ScoreFrom-w.Begin, ref)
				if err != nil {
					t.Fatalf("window %d: %v", wi, err)
				}
				if len(r.KLD) != len(kw[wi].KLD) {
					t.Fatalf("window %d: %d KL divergences, oracle has %d", wi, len(r.KLD), len(kw[wi].KLD))
				}
				for i, k := range r.KLD {
					ours += k
					theirs += kw[wi].KLD[i]
					n++
					if r.Top1Agree[i] {
						agree++
					}
					agreeT += kw[wi].Top1Agree[i]
				}
			}
			ratio := ours / theirs
			msg := fmt.Sprintf("%d targets: mean KLD %.5f, llama.cpp %.5f (ratio %.4f); top-1 agreement %.4f, llama.cpp %.4f",
				n, ours/float64(n), theirs/float64(n), ratio, float64(agree)/float64(n), float64(agreeT)/float64(n))
			t.Log(msg)
			if math.Abs(ratio-1) > rel {
				t.Errorf("%s: want the mean KLD within %g%%", msg, 100*rel)
			}
		})
	}
}

// TestGoldenQuantsInt8 is TestGoldenQuants in the int8 mode of the AVX2
// build (ActInt8AVX2), llama.cpp's arithmetic as the build that wrote
// golden-quants computes it (libggml-cpu-haswell: these files are not what
// its AVX-512 build gives, which differs from them in about half of the
// windows, by up to 0.09 per token). Every weight type of these files is
// in llama.cpp's order (nn/ggml.go), so the log-probs are llama.cpp's to
// the printed digits: measured on the first 6 windows of all 40 files,
// mean |Δ| 2.2e-8 and max 2.0e-7 for each model, PPL ratio 1.000000. The
// bounds, 1e-6, are those of TestGoldenInt8's Q8_0 models. With -short,
// 2 windows per file.
func TestGoldenQuantsInt8(t *testing.T) {
	windows := quantWindows
	if testing.Short() {
		windows = 2
	}
	quantGolden(t, ActInt8AVX2, windows, func(string) (float64, float64) { return 1e-6, 1e-6 })
}

// TestKLDQuantsInt8 is TestKLDQuants in the int8 mode of the AVX2 build,
// the one that wrote these files, on the first 2 windows (its F16
// reference's products take the AVX2 build's plain-Go dot products).
// Measured on 6 windows: the mean KLD 1.0000 of llama.cpp's for each model
// and the top-1 agreement identical.
func TestKLDQuantsInt8(t *testing.T) {
	quantKLD(t, ActInt8AVX2, 1e-5, 2)
}
