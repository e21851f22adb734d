package model

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
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

// yarnKeys is arch's rope.scaling keys for YaRN of factor 4 over an
// original context of orig, with the further keys kv (suffix, value pairs).
func yarnKeys(arch string, orig uint32, kv ...any) map[string]any {
	a := arch + ".rope.scaling."
	m := map[string]any{a + "type": "yarn", a + "factor": float32(4), a + "original_context_length": orig}
	for i := 0; i < len(kv); i += 2 {
		m[a+kv[i].(string)] = kv[i+1]
	}
	return m
}

// TestRoPEScalingAsLlamaCPP: RoPE scaling as llama.cpp 0.7.0 applies it,
// where a probe of every architecture ppl runs (each file rewritten with
// YaRN of factor 4 over an original context of 32 or 4096, with linear
// scaling, and with rope.scaling.attn_factor, yarn_beta_fast,
// yarn_beta_slow, yarn_ext_factor and yarn_log_multiplier set otherwise)
// found ppl apart from it or refusing the file:
//   - bailingmoe3, dots3note and hy_v4 turn q and k by the RoPE as it
//     stands and scale scores by 1/sqrt(key_length_mla) (ppl refused);
//   - deepseek2-ocr turns them by a plain RoPE whatever the scaling, which
//     goes into the score scale as deepseek2's, and reads no
//     yarn_log_multiplier (ppl refused);
//   - plamo3's sliding layers are unscaled (freq_scale_swa 1);
//   - gemma3's, gemma3n's, gemma4's and muse-glimmer's unscaled layers
//     keep rope.scaling.attn_factor;
//   - deepseek2 and its kin (latentYaRN) rotate by attn_factor/(1 +
//     0.1·ln f) under YaRN with a log multiplier lm, times get_mscale(f,
//     1)/get_mscale(f, 10·lm) but in deepseek2 itself, and under linear
//     scaling by attn_factor, with mscale attn_factor·(1 + 0.1·ln f)(1 +
//     lm·ln f);
//   - yarn_beta_fast and yarn_beta_slow are read for grok (beta_fast 8
//     when absent), mistral3, k2-horizon and laguna alone, and
//     yarn_ext_factor for grok alone: llama, gemma2 and gpt-oss ignore the
//     betas;
//   - mistral3's YaRN factor with a log multiplier is llama.cpp's float32
//     value (in float64 one log-prob was 4.6e-4 off);
//   - the old key rope.scale_linear is read only where the file has no
//     rope.scaling.factor (ppl had let it override the factor: gpt-oss's
//     YaRN of 32 taken as 2, up to 3.0 per token off).
//
// llama.cpp's sums of log-probs over the first window of 128 on the same
// bytes; every token was within 5.3e-8 of it.
func TestRoPEScalingAsLlamaCPP(t *testing.T) {
	dir := oracle.Require(t)
	gen := func(arch string, set func(*mkmodel.Shape)) func() string {
		return func() string { return genModel(t, dir, arch, set) }
	}
	tiny := func(name string) func() string { return func() string { return oracle.Model(dir, "tiny-"+name) } }
	linear := func(arch string) map[string]any {
		return map[string]any{arch + ".rope.scaling.type": "linear", arch + ".rope.scaling.factor": float32(2)}
	}
	checkRewrites(t, dir, []rewriteCase{
		{"bailingmoe3 yarn", gen("bailingmoe3", ling3Shape(false)), yarnKeys("bailingmoe3", 32),
			"26f8b80bbde6429da46113143979daf098f658c74b843c77977d2e7c80e70353", -1596.9758922},
		{"dots3note yarn", gen("dots3note", dots3Shape), yarnKeys("dots3note", 32),
			"4262301fe47fc9650da62de7b7bef643e2ec014e5881731ef7b412c9a9902222", -1609.1795222},
		{"hy_v4 yarn", gen("hy_v4", hyV4Shape), yarnKeys("hy_v4", 32),
			"1539adddc33d6dea076df8e50f09d13c9c373afe890bca9b95ef91ec145ebe6f", -1591.2505497},
		{"deepseek2-ocr yarn", gen("deepseek2-ocr", ocrShape(false)), yarnKeys("deepseek2-ocr", 32),
			"bcc70f496410649922fb6b56af24439dcd7e07d3ffde9670fc56297aa93f31fd", -1622.8056354},
		{"deepseek2-ocr linear", gen("deepseek2-ocr", ocrShape(false)), linear("deepseek2-ocr"),
			"5759486b866648f0ea402cc35ac6764c82afe4ef7a5c6f57ee7146f28d00b823", -1624.7438239},
		{"deepseek2-ocr log multiplier", gen("deepseek2-ocr", ocrShape(false)), yarnKeys("deepseek2-ocr", 32, "yarn_log_multiplier", float32(0.5)),
			"674e4881cb06e32ad7e95b8c022d81c65c8b26ad87ebd7d8ffa7aaf6b597bcfd", -1622.8056354},
		{"plamo3 yarn", gen("plamo3", plamo3Shape), yarnKeys("plamo3", 32),
			"f5b8ce52ee0d3b9ec8893de840c9ae896c156dfdd1830d70a49f45a28f9392dd", -1618.3569752},
		{"grok beta_fast 8", gen("grok", grokShape), yarnKeys("grok", 4096),
			"6b8e222a7e2f9a9f5c3655f8c3bc0489c180d0a8a6b0e6e68c9470cc5443875b", -1426.1846406},
		{"grok ext_factor", gen("grok", grokShape), yarnKeys("grok", 32, "yarn_ext_factor", float32(0.5)),
			"26c527849a4eabc5f62d4c0a2a050814d0249114a5141e5abe22c5d6b42fc2eb", -1426.3566762},
		{"grok beta_slow", gen("grok", grokShape), yarnKeys("grok", 32, "yarn_beta_slow", float32(2)),
			"70e0b8f2f594f1fb961c78e3a461402cf00d2b6d2d47da8f2e0d7b272f5eec35", -1426.0243390},
		{"laguna beta_slow", gen("laguna", lagunaShape), yarnKeys("laguna", 32, "yarn_beta_slow", float32(2)),
			"9dd1e228016c258ea22ea182ab9130226d70121fb541deb997f08c1dbefb4f1b", -1550.2331102},
		{"k2-horizon beta_fast", gen("k2-horizon", k2Shape), yarnKeys("k2-horizon", 4096, "yarn_beta_fast", float32(8)),
			"87c70bc061b1ea4bc5ee4a668bee63528b7624e14eac8ecbee0975a57a2f1319", -1596.1895081},
		{"muse-glimmer attn_factor", gen("muse-glimmer", sparkShape), yarnKeys("muse-glimmer", 32, "attn_factor", float32(0.8)),
			"f9bbf52a47b98f2ce67b254ee81cb46d392e469ae6851211ad8461a8f887e88d", -1442.9666166},
		{"gemma3 attn_factor", tiny("gemma3"), yarnKeys("gemma3", 32, "attn_factor", float32(0.8)),
			"843138dd2f41e063538d89c9639c60f66ff3ebb87b03d0b3c2f845e767cc2f66", -1774.0756880},
		{"gemma4 attn_factor", tiny("gemma4"), yarnKeys("gemma4", 32, "attn_factor", float32(0.8)),
			"b1281d3e8e63ab0b6d4ff0132c65f2f4e5e8f0a8ace48f305523f83e604cf60a", -1561.2170919},
		{"deepseek2 attn_factor", tiny("deepseek2"), yarnKeys("deepseek2", 32, "attn_factor", float32(0.8)),
			"1ad96d63626b58d48e98968a248a18983691cb20218509cb3f1f975fae69758f", -1529.3487834},
		{"mistral4 log multiplier", func() string { return mlaVariant(t, dir, "mistral4", nil) }, yarnKeys("mistral4", 32, "yarn_log_multiplier", float32(0.5)),
			"9032855e971185ad2f6f4a1f307ae1d0835eecb06ef80e9f2547f38b555279ef", -1542.6227308},
		{"gemma3n attn_factor", gen("gemma3n", gemma3nShape), yarnKeys("gemma3n", 32, "attn_factor", float32(0.8), "yarn_beta_fast", float32(16), "yarn_beta_slow", float32(2)),
			"c80339fddf4303c0e429a21876ba990a7680ab896eae8cc261e3d44627c15bca", -1275.2786415},
		{"deepseek2 linear", tiny("deepseek2"), linear("deepseek2"),
			"2d3e80de9fc0a3dc8f611886635390fa75f7bc4c00f7e106c08df5d8cf6d9b5b", -1534.9137929},
		{"mistral3 log multiplier 0.1", tiny("mistral3"), yarnKeys("mistral3", 32, "yarn_log_multiplier", float32(0.1)),
			"ff2a221936162cb1a78656a0a1bb310c5056809ac7eb1693a7843647bec50145", -1523.2620521},
		{"mistral3 beta_fast", tiny("mistral3"), yarnKeys("mistral3", 4096, "yarn_beta_fast", float32(8)),
			"26a9620a3813610ca3f98926d4b04de58983112ba1d84497e0e6d4ab75f7375f", -1535.7432079},
		{"llama betas ignored", gen("llama", nil), yarnKeys("llama", 4096, "yarn_beta_fast", float32(8)),
			"69f301146b8b0bf745204ca7c6e3af55e3a9473ac4d0f7f6c878f9a8748e2cca", -1628.7988845},
		{"gemma2 beta_slow ignored", gen("gemma2", gemma2(4, 32)), yarnKeys("gemma2", 32, "yarn_beta_slow", float32(2)),
			"8f9b15636d0d387912e4d26454d29a146842afa884be1ac6da721a55f9c3f42a", -1529.7563713},
		{"gpt-oss beta_slow ignored", tiny("gpt-oss"), yarnKeys("gpt-oss", 32, "yarn_beta_slow", float32(2)),
			"2f79a9da75258c1f5319eed2a462249c2e673d3d549a1b92b686055039595640", -1803.2086613},
		{"llama old scale key", gen("llama", nil), map[string]any{"llama.rope.scale_linear": float32(2)},
			"4023cb0dccaa42100c90bff695c952481df7e25e110aee6679bda6aca467d3c1", -1637.0982145},
		{"gpt-oss old scale key beside the factor", tiny("gpt-oss"), map[string]any{"gpt-oss.rope.scale_linear": float32(2)},
			"356d4541b52d8ed1cd4640f7f0e7339a9d4e015662c7aaa6b4dd4d422df2b281", -1807.1633186},
	})
}

// rewriteCase is a file rewritten with set, and llama.cpp's sum of
// log-probs over the first window of 128 on the bytes of sha256.
type rewriteCase struct {
	name   string
	file   func() string
	set    map[string]any
	sha256 string
	sum    float64
}

// checkRewrites scores each case's rewritten file against its sum.
func checkRewrites(t *testing.T, dir string, cases []rewriteCase) {
	t.Helper()
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkVariants(t, c.file(), golden.Header.Tokens, []fileVariant{{name: "rewritten", sha256: c.sha256, set: c.set, sums: []float64{c.sum}}})
		})
	}
}

// TestLayerKeysAsLlamaCPP: the keys a probe of every architecture found
// llama.cpp 0.7.0 reading otherwise than ppl (each file rewritten with
// attention.sliding_window 24, attention.sliding_window_pattern 2,
// rope.freq_base_swa 5000, attention.temperature_scale 0.1, half the
// rope.dimension_count, 2 expert groups with 1 used, and
// nextn_predict_layers 1): the
// sliding_window_pattern period of cohere2 and afmoe (whose layers without
// RoPE stay every fourth, as its graph fixes them); rope.freq_base_swa for
// the sliding layers of gemma2, gemma3n, gpt-oss, llama4 and afmoe; no
// window for lfm2moe; no attention temperature for dots3note and
// kimi-linear (ppl had refused the file); the trailing
// nextn_predict_layers block not run in mimo2 and nemotron_h_moe (ppl had
// run it as a layer), and per-layer arrays of every block, the MTP
// block's included, read for step35 (ppl had refused them). llama.cpp's sums of log-probs
// over the first window of 128 on the same bytes (every token within
// 5.4e-8). Expert groups in llama4 and gemma4, which llama.cpp routes
// otherwise than ppl, are refused by name, as is rope.scaling.type none
// with a factor in the architectures whose sliding layers llama.cpp still
// scales by it (noneScalesSWA). A later probe (attention.causal false,
// attention.layer_norm_rms_epsilon absent, and attention.clamp_kqv,
// attention.max_alibi_bias, use_parallel_residual, pooling_type set where
// llama.cpp reads none of them) found ppl scoring as causal a file llama.cpp
// runs without the causal mask (now refused), and assuming an epsilon of
// 1e-5 where llama.cpp refuses the file or assumes 0 (now required but for
// the architectures of LayerNorms alone and qwen2vl, rmsEpsUnread); gemma3n's pattern
// given as llama.cpp's period 5 now runs. A probe of attention.head_count,
// head_count_kv and feed_forward_length given as arrays of one value per
// layer found ppl refusing them but in perLayerArchs, where llama.cpp
// reads them so for every architecture: they now run (values that differ
// from layer to layer stay refused there).
func TestLayerKeysAsLlamaCPP(t *testing.T) {
	dir := oracle.Require(t)
	gen := func(arch string, set func(*mkmodel.Shape)) func() string {
		return func() string { return genModel(t, dir, arch, set) }
	}
	checkRewrites(t, dir, []rewriteCase{
		{"cohere2 pattern", gen("cohere2", cohere2Shape(40)), map[string]any{"cohere2.attention.sliding_window_pattern": uint32(2)},
			"670fdcd2bc6e5669d346f75948f4381104cfb918b6e1ae93ec4f2889cb3b9722", -1325.6510676},
		{"afmoe pattern", gen("afmoe", afmoe), map[string]any{"afmoe.attention.sliding_window_pattern": uint32(2)},
			"ef55d2a401f32d3e47b83c38d7d54c40d82194d1e51e435eb065776f34f0016c", -1613.0652883},
		{"afmoe sliding base", gen("afmoe", afmoe), map[string]any{"afmoe.rope.freq_base_swa": float32(5000)},
			"63806a946486441ed66f66bddcddd5c07543d6ac16d3318aec1e6ec84285d748", -1613.0270089},
		{"gemma2 sliding base", gen("gemma2", gemma2(4, 32)), map[string]any{"gemma2.rope.freq_base_swa": float32(5000)},
			"b5d85bf2d6169626b326cc7be998958e7ba0beb1791e139ccc19c265890200db", -1541.2534598},
		{"gemma3n sliding base", gen("gemma3n", gemma3nShape), map[string]any{"gemma3n.rope.freq_base_swa": float32(5000)},
			"3c8257ce1689aac0a6db86c39e1f57148d9893bf9736a6887f3497cf65cf7e54", -1261.1640569},
		{"gpt-oss sliding base", func() string { return oracle.Model(dir, "tiny-gpt-oss") }, map[string]any{"gpt-oss.rope.freq_base_swa": float32(5000)},
			"ec4afb7ae2039ef82330d058d3e2a11f47b85ba9aa2f3c14451cce8dddfdb97c", -1804.6328376},
		{"llama4 chunked base", gen("llama4", llama4(8, 64, 0)), map[string]any{"llama4.rope.freq_base_swa": float32(5000)},
			"23dbcf9a19bd0f1f9f067fca70eb163f392d72fbf4bb149735c75b0a3eb27ddc", -1575.0682246},
		{"lfm2moe window ignored", gen("lfm2moe", lfm2(true)), map[string]any{"lfm2moe.attention.sliding_window": uint32(24)},
			"440c2a83a2616c4d94ee0a140ee285954bb699cce1d588a989c57e49147c795f", -1613.9717337},
		{"dots3note temperature ignored", gen("dots3note", dots3Shape), map[string]any{"dots3note.attention.temperature_scale": float32(0.1)},
			"76fd43271267172d898db75943d28b92147b6270372086824c35a444beb0e6a8", -1620.3802614},
		{"kimi-linear temperature ignored", gen("kimi-linear", kimiShape), map[string]any{"kimi-linear.attention.temperature_scale": float32(0.1)},
			"6c2cd451b92a6c50fcde4af718c88e230465e9a3bbbfddbc7fa6f20045c625da", -1637.0837594},
		{"mimo2 MTP block", gen("mimo2", mimo2Shape), map[string]any{"mimo2.nextn_predict_layers": uint32(1)},
			"bb0d81fea30946527b478a9515848baf5836cf2a3ed35dac37e608e7efee8285", -1609.0716112},
		{"nemotron_h_moe MTP block", gen("nemotron_h_moe", nemotronH(true)), map[string]any{"nemotron_h_moe.nextn_predict_layers": uint32(1)},
			"ab6727d29f8930fdadb7cffcc0738b159a35bf782d35ae1a219c366f281c0598", -1529.7707239},
		{"step35 MTP block", gen("step35", step35Shape), map[string]any{"step35.nextn_predict_layers": uint32(1)},
			"d76b18c3676f6998c2051b50d37431c7a59de435776bfae69329ae503d9970c9", -1621.9560742},
		{"gemma3n pattern as a period", gen("gemma3n", gemma3nShape), map[string]any{"gemma3n.attention.sliding_window_pattern": uint32(5)},
			"f05ccc79927fa705b67d7271ff7dbad99972877b5c566bcf9e72adf5838d28fd", -1265.5716098},
		{"gpt2 without an RMS epsilon", gen("gpt2", gpt2Shape), map[string]any{"gpt2.attention.layer_norm_rms_epsilon": nil},
			"f85c0939fdfc1c30bc6751dcef319ee8903a9a329c3e2f6399887749102e068e", -1535.3119408},
		{"llama KV heads per layer", gen("llama", nil), map[string]any{"llama.attention.head_count_kv": []uint32{2, 2}},
			"0142fa19b92cb4b237a49b708e50391ceca1390814e1eea277f3a62d3041e6f5", -1626.4546316},
		{"rwkv6qwen2 KV heads per layer", gen("rwkv6qwen2", qrwkv6Shape), map[string]any{"rwkv6qwen2.attention.head_count_kv": []uint32{1, 1}},
			"195d57305a8f9ff5e3ec33d6e70be568838db0ae0ccb0d23d033495951338b9a", -1628.4244002},
	})
	checkRefusals(t, genModel(t, dir, "llama", nil), []refusal{
		{"non-causal", map[string]any{"llama.attention.causal": false}, nil, "metadata llama.attention.causal = false: a model whose attention reads later tokens"},
		{"no RMS epsilon", map[string]any{"llama.attention.layer_norm_rms_epsilon": nil}, nil, "missing metadata llama.attention.layer_norm_rms_epsilon"},
		{"KV heads differing per layer", map[string]any{"llama.attention.head_count_kv": []uint32{2, 1}}, nil,
			"metadata llama.attention.head_count_kv[1] = 1, [0] = 2: ppl runs llama with one value for every layer"},
	})
	checkRefusals(t, genModel(t, dir, "gemma3n", gemma3nShape), []refusal{
		{"pattern period 2", map[string]any{"gemma3n.attention.sliding_window_pattern": uint32(2)}, nil,
			"metadata gemma3n.attention.sliding_window_pattern: layer 1 sliding false; llama.cpp runs gemma3n with 4 sliding layers of every 5"},
	})
	none := func(arch string) []refusal {
		return []refusal{{"scaling type none with a factor", map[string]any{arch + ".rope.scaling.type": "none", arch + ".rope.scaling.factor": float32(4)}, nil,
			"metadata " + arch + ".rope.scaling.type none with factor 4: llama.cpp 0.7.0 still scales " + arch + "'s sliding layers by it"}}
	}
	checkRefusals(t, genModel(t, dir, "gemma2", gemma2(4, 32)), none("gemma2"))
	checkRefusals(t, oracle.Model(dir, "tiny-gpt-oss"), none("gpt-oss"))
	checkRefusals(t, genModel(t, dir, "afmoe", afmoe), none("afmoe")) // its RoPE is read after its experts'
	checkRefusals(t, genModel(t, dir, "llama4", llama4(8, 64, 0)), none("llama4"))
	groups := map[string]any{"expert_group_count": uint32(2), "expert_group_used_count": uint32(1)}
	for arch, src := range map[string]string{"llama4": genModel(t, dir, "llama4", llama4(8, 64, 0)), "gemma4": oracle.Model(dir, "tiny-gemma4")} {
		set := map[string]any{}
		for k, v := range groups {
			set[arch+"."+k] = v
		}
		checkRefusals(t, src, []refusal{{"expert groups", set, nil, "metadata " + arch + ".expert_group_count = 2: expert groups in " + arch + " are not matched to llama.cpp's routing"}})
	}
}

// TestHeadSizeAsLlamaCPP: heads twice as wide as embedding_length /
// head_count (attention.key_length) on every architecture. llama.cpp
// 0.7.0 runs such a file where it shapes the attention by key_length, as
// ppl does (71 architectures probed, every token within 5.4e-8; llama
// here, against llama.cpp's sum over the first window of 128), and refuses
// it where it shapes the attention tensors by the width (widthHeadArchs:
// 38 architectures), where ppl had run it; ppl now refuses it there too.
func TestHeadSizeAsLlamaCPP(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	wide := func(s *mkmodel.Shape) { s.HeadDim *= 2 }
	p := genModel(t, dir, "llama", wide)
	checkSHA(t, p, "7d0a0fa45c5e206129a151271e5c1f78ead9d900e51750ddd9df4ce53970637e")
	generatedScores(t, p, golden.Header.Tokens, []float64{-1644.2029655})
	for _, arch := range []string{"phi3", "olmo2", "starcoder2"} {
		checkRefusals(t, genModel(t, dir, arch, wide), []refusal{{arch, nil, nil,
			"bad attention shape: 4 heads of 64 (attention.key_length) for a width of 128: llama.cpp 0.7.0 shapes " + arch + "'s attention tensors by the width"}})
	}
}

// TestUnread: a tensor the architecture does not read is named in
// Info.Unread (ppl-score warns of it: llama.cpp 0.7.0 computes with it, or
// refuses the file); tensors llama.cpp also leaves unread are not: a NextN
// block, the rope factors LongRoPE does not choose, NVFP4's activation
// scales. Every file the generated and oracle tests load has none
// (generatedScoresTo, oracleModelAct).
func TestUnread(t *testing.T) {
	dir := oracle.Require(t)
	for _, c := range []struct {
		name, path string
		add        map[string]f32Tensor
		want       []string
	}{
		{"extra", genModel(t, dir, "llama", nil), map[string]f32Tensor{"blk.0.ffn_gate_inp.weight": {[]uint64{128}, make([]float32, 128)}}, []string{"blk.0.ffn_gate_inp.weight"}},
		{"nextn", oracle.Model(dir, "tiny-glm4moe"), nil, nil},
		{"longrope", genModel(t, dir, "phi3", longRoPE(200)), nil, nil},
		{"input scales", oracle.Model(dir, "tiny-llama-spm-nvfp4"), map[string]f32Tensor{"blk.0.attn_q.input_scale": {[]uint64{1}, []float32{1}}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := Load(rewriteFile(t, c.path, nil, c.add), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if got := m.Info().Unread; !slices.Equal(got, c.want) {
				t.Errorf("unread %v, want %v", got, c.want)
			}
		})
	}
}

// biases gives every blk.N.ROLE.weight of the file at path (of blocks,
// or all when none are named) a bias of 0.2·sin(7i + len(name)) where it
// has none: the values of the probe that found which of them llama.cpp
// applies.
func biases(t *testing.T, path, role string, blocks ...int) map[string]f32Tensor {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	add := map[string]f32Tensor{}
	for _, tn := range f.Tensors {
		var b int
		if _, err := fmt.Sscanf(tn.Name, "blk.%d.", &b); err != nil || !strings.HasSuffix(tn.Name, "."+role+".weight") || len(tn.Shape) != 2 ||
			len(blocks) > 0 && !slices.Contains(blocks, b) {
			continue
		}
		name := strings.TrimSuffix(tn.Name, ".weight") + ".bias"
		if _, ok := f.Tensor(name); ok {
			continue
		}
		v := make([]float32, tn.Shape[1])
		for i := range v {
			v[i] = float32(0.2 * math.Sin(float64(i*7+len(name))))
		}
		add[name] = f32Tensor{[]uint64{tn.Shape[1]}, v}
	}
	return add
}

// TestBiasesAsLlamaCPP: a probe gave every architecture's attention and
// MLP matrices biases (each role apart where both sides ran the file) and
// found llama.cpp 0.7.0 loading and leaving unapplied attn_output's in
// ernie4_5, ernie4_5-moe, falcon-h1 and deci's "linear attention" layers,
// and refact's attention output and MLP biases, where ppl had applied them
// (0.5 to 3.4 per token off). llama.cpp's sums over the first window of
// 128 on the same bytes, each equal to the file's without the biases
// (deci's layer 0, full attention, shows its bias applied).
func TestBiasesAsLlamaCPP(t *testing.T) {
	dir := oracle.Require(t)
	golden, err := oracle.Read(filepath.Join(dir, "golden", "tiny-llama-spm-q8_0__en-gpl3__sliding.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	refact := func(s *mkmodel.Shape) { alibiShape(s); s.KVHeads = 2 }
	for _, c := range []struct {
		arch   string
		set    func(*mkmodel.Shape)
		role   string
		blocks []int
		sha256 string
		sum    float64
	}{
		{"deci", deci, "attn_output", []int{0}, "3facfadb68760240ef4d0a1ca9d5397af81dc0ab83a8e0826869644a7af92001", -1607.3858666},
		{"deci", deci, "attn_output", []int{1}, "3889e058e882bc92347f4b5dbc0dc865a85b8a104b0aa7599eddae8691046abe", -1604.2728121},
		{"ernie4_5", nil, "attn_output", nil, "cd60c9d12feb815e7354286925aafeeae469e657c163c97fbe84caf443029d46", -1626.4546316},
		{"ernie4_5-moe", ernie45MoE, "attn_output", nil, "f1ac0011e6ea2b7df841cd4287de10d6160f75baf6ba7ff13a1072ba39770b0b", -1597.8855739},
		{"falcon-h1", falconH1(false), "attn_output", nil, "ef315493c6185f1b6bd2dde618d786b3d85007e303f01eb84098b9cefecf2d0f", -1604.6202265},
		{"refact", refact, "attn_output", nil, "a5877e7e6af545e1b1bbed27569895ad9427d5fbecba7ce0e45eb3efca7a868a", -1558.3375375},
		{"refact", refact, "ffn_up", nil, "78b6c97db906531d211c3b321075407582d977f4744a63ecbadce9afc44ae06d", -1558.3375375},
	} {
		t.Run(fmt.Sprintf("%s %s %v", c.arch, c.role, c.blocks), func(t *testing.T) {
			src := genModel(t, dir, c.arch, c.set)
			checkVariants(t, src, golden.Header.Tokens, []fileVariant{{name: "biased", sha256: c.sha256, add: biases(t, src, c.role, c.blocks...), sums: []float64{c.sum}}})
		})
	}
}

// TestUntiedAsLlamaCPP: a probe dropped output.weight from every
// architecture's file. llama.cpp 0.7.0 runs most with the token embedding
// in its place, as ppl does (Q4_K_M files of every architecture are within
// 5.3e-8 per token of it, the tied ones within 5.1e-7), and refuses the
// file for those whose loader requires the output matrix (untiedArchs),
// of which ppl had tied 16; it now refuses them all, naming the tensor.
func TestUntiedAsLlamaCPP(t *testing.T) {
	dir := oracle.Require(t)
	for _, c := range []struct {
		arch string
		set  func(*mkmodel.Shape)
	}{{"olmo2", nil}, {"internlm2", nil}, {"qwen2moe", qwen2MoE}, {"minimax-m2", minimaxM2}, {"phi2", nil}} {
		checkRefusals(t, genModel(t, dir, c.arch, c.set), []refusal{{c.arch, nil, []string{"output.weight"},
			"missing tensor output.weight (llama.cpp's " + c.arch + " reads no tied output)"}})
	}
}
