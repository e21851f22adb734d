package model

import (
	"path/filepath"
	"slices"
	"testing"

	"ppl.dev/eval/mkmodel"
	"ppl.dev/gguf"
	"ppl.dev/oracle"
)

// TestRoutingKeysRead: ppl reads exactly the routing keys llama.cpp 0.7.0
// reads (routingIgnored). Each file (a generated one, or the oracle's) is
// rewritten with expert_gating_func set to the other of softmax and
// sigmoid, expert_weights_norm false, then true, and expert_weights_scale
// 2.5 (twice the file's where it has one); a window's log-probs must stay
// bit for bit the file's exactly where llama.cpp's did (probed on the same
// kinds of files: its log-probs the same bits for an ignored key) and
// change where its changed.
func TestRoutingKeysRead(t *testing.T) {
	dir := oracle.Require(t)
	gen := func(arch string, set func(*mkmodel.Shape)) func() string {
		return func() string { return genModel(t, dir, arch, set) }
	}
	tiny := func(name string) func() string { return func() string { return oracle.Model(dir, "tiny-"+name) } }
	arctic := func(s *mkmodel.Shape) { s.Layers, s.Experts, s.ExpertsUsed, s.ExpertFFN = 4, 8, 2, s.FFN }
	for _, c := range []struct {
		arch    string
		file    func() string
		changes []string // the variants that changed llama.cpp's log-probs
	}{
		{"arctic", gen("arctic", arctic), nil},
		{"bailingmoe", gen("bailingmoe", bailingMoE), []string{"norm false", "scale"}},
		{"bailingmoe2", gen("bailingmoe2", bailingMoE2), []string{"gating", "norm false", "scale"}},
		{"dbrx", gen("dbrx", dbrxShape), nil},
		{"deepseek", gen("deepseek", deepSeek), []string{"scale"}},
		{"ernie4_5-moe", gen("ernie4_5-moe", ernie45MoE), nil},
		{"granitemoe", gen("granitemoe", graniteMoE(0)), nil},
		{"grok", gen("grok", grokShape), nil},
		{"hunyuan-moe", gen("hunyuan-moe", hunyuanMoE), nil},
		{"lfm2moe", gen("lfm2moe", lfm2(true)), []string{"gating"}},
		{"llama4", gen("llama4", llama4(8, 64, 0)), nil},
		{"mellum", gen("mellum", mellumShape), []string{"gating", "norm false"}},
		{"minimax-m2", gen("minimax-m2", minimaxM2), []string{"gating"}},
		{"olmoe", gen("olmoe", olmoe), nil},
		{"phimoe", gen("phimoe", phiMoE(0)), nil},
		{"qwen2moe", gen("qwen2moe", qwen2MoE), nil},
		{"qwen4exp", gen("qwen4exp", q4Shape), nil},
		{"deepseek2", tiny("deepseek2"), []string{"gating", "norm false", "scale"}},
		{"gemma4", tiny("gemma4"), nil},
		{"glm4moe", tiny("glm4moe"), []string{"gating", "norm false", "scale"}},
		{"gpt-oss", tiny("gpt-oss"), nil},
		{"qwen35moe", tiny("qwen35moe"), nil},
		{"qwen3moe", tiny("qwen3moe"), nil},
		{"qwen3next", tiny("qwen3next"), nil},
	} {
		t.Run(c.arch, func(t *testing.T) {
			src := c.file()
			f, err := gguf.Open(src)
			if err != nil {
				t.Fatal(err)
			}
			a := c.arch + "."
			gate, scale := uint32(2), float32(2.5)
			if v, ok := f.Lookup(a + "expert_gating_func"); ok && v.Any() == uint32(2) {
				gate = 1
			}
			if v, ok := f.Lookup(a + "expert_weights_scale"); ok {
				if x, ok := v.Any().(float32); ok && x != 0 {
					scale = 2 * x
				}
			}
			f.Close()
			checkKeysRead(t, src, []keyVariant{
				{"gating", map[string]any{a + "expert_gating_func": gate}},
				{"norm false", map[string]any{a + "expert_weights_norm": false}},
				{"norm true", map[string]any{a + "expert_weights_norm": true}},
				{"scale", map[string]any{a + "expert_weights_scale": scale}},
			}, c.changes)
		})
	}
}

// keyVariant is a file's metadata changed (rewriteFile's set).
type keyVariant struct {
	name string
	set  map[string]any
}

// checkKeysRead scores a window of src and of each variant of it: the
// log-probs change exactly for the variants named in changes (those that
// changed llama.cpp's), and stay bit for bit src's for the others.
func checkKeysRead(t *testing.T, src string, vs []keyVariant, changes []string) {
	t.Helper()
	logprobs := func(p string) []float64 {
		m, err := Load(p, Options{KVDtype: "f16", Activations: ActInt8, Context: 128})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		r, err := m.Score(tinyTokens(96, m.Vocab()), 1)
		if err != nil {
			t.Fatal(err)
		}
		return r.Logprobs
	}
	base := logprobs(src)
	for _, v := range vs {
		got := logprobs(rewriteFile(t, src, v.set, nil))
		if changed, want := !slices.Equal(got, base), slices.Contains(changes, v.name); changed != want {
			t.Errorf("%s: log-probs changed %v, llama.cpp's %v", v.name, changed, want)
		}
	}
}

// TestScaleKeysRead: attention.scale, final_logit_softcapping and
// logit_scale are read where llama.cpp 0.7.0 reads them (probed on every
// architecture ppl-mkmodel writes: attention.scale for the granite family
// alone, gemma3n's cap fixed at 30), and not elsewhere: each file
// rewritten with attention.scale 0.05, final_logit_softcapping 3 and
// logit_scale 0.37 changes ppl's log-probs exactly where it changed
// llama.cpp's.
func TestScaleKeysRead(t *testing.T) {
	dir := oracle.Require(t)
	for _, c := range []struct {
		arch    string
		set     func(*mkmodel.Shape)
		changes []string
	}{
		{"granite", nil, []string{"attention.scale", "logit_scale"}},
		{"minicpm", miniCPM, []string{"logit_scale"}},
		{"arcee", nil, nil},
		{"seed_oss", nil, nil},
		{"falcon-h1", falconH1(false), nil},
		{"nemotron_h", nemotronH(false), nil},
		{"nemotron_h_moe", nemotronH(true), nil},
		{"gemma2", gemma2(4, 32), []string{"final_logit_softcapping"}},
		{"gemma3n", gemma3nShape, nil},
	} {
		t.Run(c.arch, func(t *testing.T) {
			a := c.arch + "."
			checkKeysRead(t, genModel(t, dir, c.arch, c.set), []keyVariant{
				{"attention.scale", map[string]any{a + "attention.scale": float32(0.05)}},
				{"final_logit_softcapping", map[string]any{a + "final_logit_softcapping": float32(3)}},
				{"logit_scale", map[string]any{a + "logit_scale": float32(0.37)}},
			}, c.changes)
		})
	}
}

// TestLinearRoPEScaling: linear RoPE scaling (rope.scaling.type linear,
// factor 2) as llama.cpp 0.7.0 applies it where ppl had not: mimo2's and
// step35's sliding layers keep an unscaled RoPE (llama.cpp's
// freq_scale_swa is 1 for them, as its log says), and kimi-linear, whose
// latent attention turns nothing, keeps its score scale 1/sqrt(key
// length) (ppl had taken YaRN's mscale). llama.cpp's sums on the same
// bytes (24 windows: every token within 5.3e-8; here the first 4).
func TestLinearRoPEScaling(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		arch, sha256 string
		set          func(*mkmodel.Shape)
		sums         []float64
	}{
		{"mimo2", "fd4f76d4da1b15a5d846b2e7823333d56df28da11a1cfdc49224bf1b1a66f278", mimo2Shape,
			[]float64{-1604.1476513, -787.1543147, -800.9454561, -760.3813928}},
		{"step35", "8307231ce5d7a74bee1c3e2d15ab2e1431af4e704b037a79ce7141b203fb1839", step35Shape,
			[]float64{-1588.3802193, -790.2899468, -811.5311869, -785.0641176}},
		{"kimi-linear", "4605449a095ccf40325ae20353515f8460c83dac9df398dba17df18282445bdd", kimiShape,
			[]float64{-1637.0837594, -784.6017670, -781.0746519, -792.7773821}},
	} {
		t.Run(c.arch, func(t *testing.T) {
			checkVariants(t, genModel(t, dir, c.arch, c.set), golden.Header.Tokens, []fileVariant{{
				name: "linear RoPE scaling", sha256: c.sha256, sums: c.sums,
				set: map[string]any{c.arch + ".rope.scaling.type": "linear", c.arch + ".rope.scaling.factor": float32(2)},
			}})
		})
	}
}
