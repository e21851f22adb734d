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
// each is held to against llama.cpp: mean |Δ log p| and |PPL ratio - 1|,
// in the fp32 mode (goldMean, gPPL) and in the int8 mode (int8Mean,
// int8PPL), per golden file. The models are F32 but for Q8_0 vocabulary
// matrices, against which llama.cpp rounds activations to 8 bits, which
// puts it about 0.01 per token from float64 (the oracle README's table);
// the fp32 mode's distance from it is that. The int8 mode computes as
// llama.cpp does: most windows to 5e-8, some from one token on by about
// 1e-3, which Gemma's float16 GELU table and gpt-oss's and gemma4's
// near-tie expert selections magnify. The cause is most likely the
// attention: these goldens have an F32 cache and flash attention off
// (MUL_MAT, SOFT_MAX_EXT, MUL_MAT), which the int8 mode does not copy; on
// the same windows scored by llama.cpp with its default F16 cache and flash
// attention, the int8 mode with an f16 cache gives qwen3moe's, glm4moe's
// and gemma4's log-probs to the bit (both builds). Its bounds are about
// twice the worst file's figure (measured: see TestGoldenArchsInt8).
var archCases = []struct {
	stem              string
	goldMean, gPPL    float64
	int8Mean, int8PPL float64
}{
	{"tiny-qwen3moe", 0.02, 2e-3, 3e-5, 1e-5},
	{"tiny-qwen35", 0.02, 2e-3, 3e-5, 1.5e-5},
	{"tiny-qwen35moe", 0.02, 2e-3, 3e-5, 1.5e-5},
	{"tiny-qwen3next", 0.02, 2e-3, 8e-5, 4e-5},
	{"tiny-gemma3", 0.02, 2e-3, 2e-3, 3e-4},
	{"tiny-mistral3", 0.02, 2e-3, 8e-6, 3e-6},
	{"tiny-gemma4", 0.04, 1e-2, 5e-3, 6e-4}, // fp32: llama.cpp's F16 GELU table and near-tie routing (oracle README)
	{"tiny-glm4moe", 0.02, 2e-3, 2e-5, 2e-5},
	{"tiny-deepseek2", 0.02, 2e-3, 2.5e-5, 4e-5}, // see TestGoldenArchsInt8
	{"tiny-gpt-oss", 0.08, 2e-3, 3e-3, 2e-4},
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
	goldenArchs(t, "", func(i int) (float64, float64) { return archCases[i].goldMean, archCases[i].gPPL })
}

// TestGoldenArchsInt8 is TestGoldenArchs in the int8 mode, llama.cpp's
// arithmetic. Measured on every window of every file (worst file's mean,
// worst |PPL ratio - 1|): qwen3moe 1.4e-5, 4e-6; qwen35 1.1e-5, 1e-5;
// qwen35moe 1.4e-5, 5e-6; qwen3next 4.5e-5, 2e-5; gemma3 9.1e-4,
// 1.4e-4; mistral3 3.6e-6, 1e-6; gemma4 2.36e-3, 2.8e-4; glm4moe 1.0e-5,
// 1.0e-5; deepseek2 1.5e-5, 4e-6 (2.0e-5, 2.0e-5 before YaRN mixed its
// angles with ggml's fused multiply-add); gpt-oss 1.45e-3, 9.5e-5. Since the
// router routes in ggml's float32 order (ml.Router.GGML: its experts and
// weights are llama.cpp's to the bit on llama.cpp's own router logits for
// every one of these models) the MoE models leave llama.cpp at other
// tokens; deepseek2's 508-target mixed-unicode disjoint file went from
// 6e-6 to 2e-5 in perplexity by such chance (before: 1.2e-5, 6e-6; its
// bound was 1.5e-5). The Gated DeltaNet layers are llama.cpp's to the
// bit (nn's ggml_deltanet.go: before, with the float32 chunked delta rule,
// qwen35 1.2e-5, 8e-6, qwen35moe 1.9e-5, 4e-6, qwen3next 5.3e-5,
// 5.3e-5). Most windows are llama.cpp's to 5e-8 (all of mixed-unicode's,
// for mistral3); a few leave it at a token or more because these goldens
// are llama.cpp's attention over an F32 cache without flash attention
// (MUL_MAT, SOFT_MAX, MUL_MAT), which the int8 modes do not copy: they
// copy llama.cpp's default, flash attention over an F16 cache, under which
// every model here but deepseek2 scores 8 windows of 256 of en-gpl3 within
// 5e-8 per token of llama.cpp (checked with the oracle's tools/oracle.cpp;
// the pinned cases are TestGeneratedLlama's). Before GeGLU
// went through ggml's GELU table, gemma4 was 0.019 mean and 0.46% in
// perplexity; before the F32 products summed in ggml's order, gpt-oss was
// 2.4e-3 and 1e-3.
func TestGoldenArchsInt8(t *testing.T) {
	goldenArchs(t, ActInt8, func(i int) (float64, float64) { return archCases[i].int8Mean, archCases[i].int8PPL })
}

// TestArchsF16Cache holds the int8 mode with an f16 cache to llama.cpp's
// default configuration (flash attention over an F16 cache, which the
// goldens' F32 cache without flash attention is not): the sums of
// log-probs of the first 4 windows of each model's en-gpl3 sliding file,
// pinned from llama.cpp 0.7.0 (the oracle's tools/oracle.cpp, Debian's
// libllama, its defaults), to 1.5e-6 per window of 255 or 128 targets
// (measured 6.9e-7: the printed precision).
// This holds every operation of these architectures to llama.cpp's bits:
// the Gated DeltaNet layers, the MoE routers and products, the latent
// attention (before its score scale was computed in float32 as
// llama.cpp's and its attention took ggml's kernel for values of 32,
// deepseek2 was off at many tokens by up to 0.01).
func TestArchsF16Cache(t *testing.T) {
	dir := oracle.Require(t)
	for _, c := range []struct {
		stem string
		sums []float64
	}{
		{"tiny-deepseek2", []float64{-3133.1720651, -1569.8469738, -1631.1524528, -1583.3428023}},
		{"tiny-qwen35", []float64{-3566.3624337, -1742.9763164, -1802.2570132, -1756.8563333}},
		{"tiny-qwen35moe", []float64{-3099.9955763, -1626.3896027, -1604.5156422, -1574.0855275}},
		{"tiny-qwen3next", []float64{-3100.8136120, -1537.0817440, -1609.1718184, -1556.4509105}},
		{"tiny-qwen3moe", []float64{-3156.3112241, -1627.1442409, -1633.9371107, -1528.8427124}},
		{"tiny-gemma3", []float64{-3696.4660991, -1849.8645284, -1863.6448642, -1846.4555228}},
		{"tiny-gemma4", []float64{-3166.3691839, -1500.4313561, -1578.8417869, -1564.8644917}},
		{"tiny-gpt-oss", []float64{-3638.4879366, -1893.0304480, -1833.6375862, -1832.1033544}},
		{"tiny-glm4moe", []float64{-3029.8186159, -1586.4098068, -1539.2479241, -1576.7998255}},
		{"tiny-mistral3", []float64{-3176.3788576, -1604.3168640, -1601.2514407, -1607.9190536}},
	} {
		t.Run(c.stem, func(t *testing.T) {
			f, err := oracle.Read(filepath.Join(dir, "golden-archs", c.stem+"__en-gpl3__sliding.ndjson"))
			if err != nil {
				t.Fatal(err)
			}
			wins := make([]window, len(c.sums))
			for i := range wins {
				w := f.Windows[i]
				wins[i] = window{w.Begin, w.End, w.ScoreFrom}
			}
			scoreSums(t, oracleModelAct(t, dir, c.stem, "f16", ActInt8), c.stem, f.Header.Tokens, wins, c.sums, 1.5e-6)
		})
	}
}

func goldenArchs(t *testing.T, act string, bounds func(i int) (meanAbs, pplRatio float64)) {
	dir := oracle.Require(t)
	for i, c := range archCases {
		t.Run(c.stem, func(t *testing.T) {
			paths, _ := filepath.Glob(filepath.Join(dir, "golden-archs", c.stem+"__*.ndjson"))
			if len(paths) == 0 {
				t.Fatalf("no golden-archs files for %s", c.stem)
			}
			m := oracleModelAct(t, dir, c.stem, "f32", act)
			meanBound, pplBound := bounds(i)
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
				if d.mean() > meanBound || math.Abs(d.pplRatio()-1) > pplBound {
					t.Errorf("%s: %v: want mean <= %g, |PPL ratio - 1| <= %g", name, &d, meanBound, pplBound)
				}
				all.merge(d)
			}
			t.Logf("%s: %v", c.stem, &all)
		})
	}
}
