package mkmodel

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"ppl.dev/eval/bpe"
	"ppl.dev/eval/corpora"
	"ppl.dev/gguf"
	"ppl.dev/score/model"
	"ppl.dev/tokenize/tokenizer"
)

func heldoutTexts(t testing.TB) [][]byte {
	t.Helper()
	m, err := corpora.Heldout()
	if err != nil {
		t.Fatal(err)
	}
	texts, err := m.Texts(false)
	if err != nil {
		t.Fatal(err)
	}
	return texts
}

// smallVocab trains a small vocabulary on the held-out corpus.
func smallVocab(t testing.TB, size int) *bpe.Vocab {
	t.Helper()
	v, err := bpe.Train(heldoutTexts(t), bpe.TrainOptions{Size: size, Special: []string{"<|endoftext|>"}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func tinyConfig(t testing.TB, arch, typ string, voc *bpe.Vocab) *Config {
	t.Helper()
	ft, err := LookupFileType(typ)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := BPETokenizer(voc)
	if err != nil {
		t.Fatal(err)
	}
	c := &Config{
		Shape: Shape{Arch: arch, Embd: 256, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 512, Context: 1024,
			Vocab: tok.NVocab, RopeBase: 10000, Eps: 1e-5},
		Type: ft, Seed: 7, Name: "tiny-" + arch, Tokenizer: tok, Residual: 1,
	}
	switch arch {
	case "qwen2":
		c.HeadDim = 64 // llama.cpp's qwen2 needs Heads·HeadDim = Embd
	case "qwen", "cogvlm": // and as many KV heads as heads
		c.HeadDim, c.KVHeads = 64, c.Heads
	case "qwen3":
		c.HeadDim = 48 // not Embd/Heads, as in Qwen3
	case "qwen3moe":
		c.HeadDim, c.Experts, c.ExpertsUsed, c.ExpertFFN = 48, 8, 2, 64
	case "qwen35", "qwen35moe": // layer 0 Gated DeltaNet, layer 1 attention
		c.SSMState, c.SSMKHeads, c.SSMVHeads, c.SSMConv, c.AttnInterval, c.RopeDims = 16, 2, 6, 4, 2, 8
		if arch == "qwen35moe" {
			c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN = 8, 2, 64, 96
		}
	case "qwen4exp": // layers 0 and 1 Gated DeltaNet (PLE in 1), layer 2 attention with QSA
		c.Layers, c.SSMState, c.SSMKHeads, c.SSMVHeads, c.SSMConv, c.AttnInterval, c.RopeDims = 3, 16, 2, 6, 4, 3, 8
		c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN, c.PerLayer = 8, 2, 64, 96, 64
	case "minimax-m2":
		c.Experts, c.ExpertsUsed, c.ExpertFFN = 8, 2, c.FFN
	case "ernie4_5-moe":
		c.DenseLead, c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN = 1, 8, 2, 64, 96
	case "dots1":
		c.DenseLead, c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN, c.KVHeads = 1, 8, 2, 64, 64, c.Heads
	case "minimax-m3": // a dense first layer, then experts, a shared one and MSA's indexer
		c.DenseLead, c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN = 1, 8, 2, 64, 64
	case "hy_v3": // a dense first layer, grouped KV heads
		c.DenseLead, c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN = 1, 8, 2, 64, 64
	case "mimo2": // layer 0 sliding and dense, layer 1 sliding with experts
		c.DenseLead, c.Experts, c.ExpertsUsed, c.ExpertFFN, c.HeadDim, c.Window = 1, 8, 2, 64, 48, 40
	case "hy_v4": // 4 layers: indexing (dense), reusing, indexing, reusing; experts and a shared one
		c.Layers, c.DenseLead, c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN = 4, 1, 8, 2, 64, 64
	case "deepseek4": // 4 layers: raw keys, then compressed by 4, 128 and 4; experts (the first layer's by token) and a shared one
		c.Layers, c.HeadDim, c.Window, c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN = 4, 32, 16, 8, 2, 64, 64
	case "dots3note": // 4 layers: full (dense), sliding, full, sliding; experts and a shared one
		c.Layers, c.DenseLead, c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN, c.Window = 4, 1, 8, 2, 64, 64, 40
	case "kimi-linear", "bailingmoe3", "kimi-k3", "glm5-next": // 4 layers: 3 KDA (the first dense), then latent attention with experts and a shared one
		c.Layers, c.SSMConv, c.DenseLead, c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN = 4, 4, 1, 8, 2, 64, 64
	case "smallthinker": // layer 0 global without RoPE, layer 1 sliding; experts in both
		c.Experts, c.ExpertsUsed, c.ExpertFFN = 8, 2, 64
	case "muse-glimmer": // layer 0 sliding, layer 1 global
		c.Window = 40
	case "spark2_5": // layer 0 global, layer 1 sliding
		c.Window = 40
	case "step35", "laguna": // layer 0 global and dense, layer 1 sliding with experts and a shared one
		c.DenseLead, c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN, c.Window = 1, 8, 2, 64, 96, 40
	case "phi3": // LongRoPE over 3/4 of the head, as Phi-4-mini
		c.OrigContext, c.RopeDims = 512, 24
	case "nemotron_h", "nemotron_h_moe": // Mamba-2, attention, the MLP (or experts and a shared one)
		c.Layers, c.Layout = 3, "MAF"
		c.SSMState, c.SSMKHeads, c.SSMVHeads, c.SSMHeadDim, c.SSMConv = 16, 2, 4, 16, 4
		if arch == "nemotron_h_moe" { // with a latent width, as Nemotron 3 Super
			c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN, c.MoELatent = 8, 2, 64, 96, 64
		}
	case "lfm2", "lfm2moe": // layer 0 a short convolution, layer 1 attention; experts past layer 0
		c.SSMConv, c.AttnInterval = 3, 2
		if arch == "lfm2moe" {
			c.DenseLead, c.Experts, c.ExpertsUsed, c.ExpertFFN = 1, 8, 2, 64
		}
	case "granitehybrid": // layer 0 Mamba-2, layer 1 attention; experts and a shared one
		c.SSMState, c.SSMKHeads, c.SSMVHeads, c.SSMHeadDim, c.SSMConv, c.AttnInterval = 16, 2, 4, 16, 4, 2
		c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN = 8, 2, c.FFN, 96
	case "gemma2": // tied, as llama.cpp reads it; a window narrower than the context
		c.Tied, c.Window = true, 64
	case "llama4": // a dense layer between mixtures
		c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN, c.MoEStep = 8, 1, 64, 64, 2
	case "cohere2": // tied, as llama.cpp reads it; a window narrower than the context
		c.Tied, c.Window = true, 64
	case "command-r":
		c.Tied = true
	case "qwen2moe": // llama.cpp's qwen2moe needs Heads·HeadDim = Embd
		c.HeadDim, c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN = 64, 8, 2, 64, 96
	case "olmoe": // its k norm spans the width: no grouped heads
		c.HeadDim, c.KVHeads, c.Experts, c.ExpertsUsed, c.ExpertFFN = 64, c.Heads, 8, 2, c.FFN
	case "granitemoe":
		c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN = 8, 2, c.FFN, 96
	case "hunyuan-moe":
		c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN = 8, 2, c.FFN, 96
	case "bailingmoe2": // a dense first layer; 4 groups of experts, 2 chosen
		c.DenseLead, c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN, c.RopeDims = 1, 8, 2, 64, 64, 16
		c.ExpertGroups, c.ExpertGroupsUsed = 4, 2
	case "cohere2moe": // tied, as cohere2; a dense first layer, a shared expert
		c.Tied, c.Window, c.DenseLead, c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN = true, 64, 1, 8, 2, 64, 64
	case "exaone-moe", "afmoe": // a dense first layer; a window narrower than the context
		c.DenseLead, c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN, c.Window = 1, 8, 2, 64, 64, 64
	case "gemma", "bitnet", "openelm": // tied, as llama.cpp reads them
		c.Tied = true
	case "deci": // attention, "linear attention", none, no MLP
		c.Layers, c.Layout = 4, "ALFN"
	case "deepseek": // a dense first layer, two shared experts
		c.DenseLead, c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN = 1, 8, 2, 64, 128
	case "minimax-01": // lightning attention, then softmax attention over half of each head; 8 experts of the FFN's width
		c.AttnInterval, c.RopeDims, c.Experts, c.ExpertsUsed, c.ExpertFFN = 2, 16, 8, 2, c.FFN
	case "deepseek2-ocr": // and a KV head per head filling the width
		c.DenseLead, c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN, c.HeadDim, c.KVHeads = 1, 8, 2, 64, 128, 64, c.Heads
	case "phimoe": // experts of the FFN's width, LongRoPE
		c.Experts, c.ExpertsUsed, c.ExpertFFN, c.OrigContext = 8, 2, c.FFN, 512
	case "gemma3n": // tied, with a window; llama.cpp's per-layer width
		c.Tied, c.Window, c.PerLayer = true, 64, 256
	case "plm": // a KV head per head, tied
		c.KVHeads, c.Tied = c.Heads, true
	case "k2-horizon": // a dense first layer, then experts, a shared one and MoVA
		c.DenseLead, c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN = 1, 8, 2, 64, 64
	case "grovemoe": // experts
		c.Experts, c.ExpertsUsed, c.ExpertFFN = 8, 2, 64
	case "mellum", "maple", "maion-coder": // experts, a window narrower than the context
		c.HeadDim, c.Experts, c.ExpertsUsed, c.ExpertFFN, c.Window = 48, 8, 2, 64, 64
	case "granite_swa": // a window narrower than the context
		c.Window = 64
	case "bailingmoe": // a shared expert as wide as an expert
		c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN = 8, 2, 64, 64
	case "dbrx": // experts of the FFN's width
		c.Experts, c.ExpertsUsed, c.ExpertFFN = 8, 2, c.FFN
	case "olmo2": // OLMo 3's window and YaRN
		c.Window, c.YaRN = 64, 8
	case "falcon-h1": // a mixer beside each attention, without ssm_norm
		c.SSMState, c.SSMKHeads, c.SSMVHeads, c.SSMHeadDim, c.SSMConv, c.SSMNoNorm = 16, 2, 4, 16, 4, true
	case "mamba": // Falcon-Mamba's norms of dt, B and C
		c.SSMState, c.SSMConv, c.DtBCRMS = 16, 4, true
	case "mamba2": // 16 heads of 32 in 2 groups: twice the width
		c.SSMState, c.SSMKHeads, c.SSMVHeads, c.SSMHeadDim, c.SSMConv = 16, 2, 16, 32, 4
	case "arctic": // experts of the FFN's width beside the dense MLP
		c.Experts, c.ExpertsUsed, c.ExpertFFN = 8, 2, c.FFN
	case "minicpm3": // a KV head per head; LongRoPE
		c.KVHeads, c.OrigContext = c.Heads, 512
	case "grok": // experts beside a dense MLP
		c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN = 8, 2, 128, c.FFN
	case "plamo2": // layer 0 Mamba, layer 1 attention
		c.SSMState, c.SSMVHeads, c.SSMHeadDim, c.SSMConv, c.AttnInterval = 16, 4, 32, 4, 2
	case "plamo3": // layer 0 sliding, layer 1 global
		c.Window = 64
	case "rwkv7", "arwkv7", "rwkv6": // RWKV's heads of 64
		c.HeadDim, c.Heads, c.KVHeads = 64, c.Embd/64, c.Embd/64
	case "rwkv6qwen2": // heads of 64 sharing a head of keys and values
		c.HeadDim, c.Heads, c.KVHeads = 64, c.Embd/64, 1
	case "jamba": // layer 0 Mamba-1 and dense, layer 1 attention with experts
		c.SSMState, c.SSMConv, c.AttnInterval, c.Experts, c.ExpertsUsed, c.ExpertFFN = 16, 4, 2, 8, 2, c.FFN
	}
	if model.HeadsFillWidth(arch) { // llama.cpp shapes the attention by the width
		c.HeadDim = c.Embd / c.Heads
	}
	return c
}

func TestParams(t *testing.T) {
	want := map[string]int64{"100M": 100_092_672, "1B": 1_235_814_400, "8B": 8_030_261_248}
	for _, p := range Presets {
		if got := p.Shape.Params(); got != want[p.Name] {
			t.Errorf("%s: %d parameters, want %d", p.Name, got, want[p.Name])
		}
	}
	// Qwen3-30B-A3B has 30.5B parameters (Qwen's model card), as our 30B
	// preset with the GGUF files' 151,936-token vocabulary.
	wantMoE := map[string]int64{"1B": 967_862_784, "30B": 30_532_122_624}
	for _, p := range MoEPresets {
		if got := p.Shape.Params(); got != wantMoE[p.Name] {
			t.Errorf("MoE %s: %d parameters, want %d", p.Name, got, wantMoE[p.Name])
		}
	}
	// The Qwen3.5 text models without their vision towers: 0.75B, 26.9B
	// and 34.7B of the 0.8B, 27B and 35B-A3B.
	wantQ35 := map[string]int64{"0.8B": 752_393_024, "27B": 26_895_998_464, "35B-A3B": 34_660_610_688}
	for _, p := range append(append([]Preset(nil), Qwen35Presets...), Qwen35MoEPresets...) {
		if err := p.Shape.Check(); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
		if got := p.Shape.Params(); got != wantQ35[p.Name] {
			t.Errorf("%s %s: %d parameters, want %d", p.Shape.Arch, p.Name, got, wantQ35[p.Name])
		}
	}
	// RWKV-7 G1's shapes with its 65,536-token vocabulary, as GGUF files
	// hold them (layer 0's unused v0, v1, v2 included): the model cards'
	// 0.19B, 1.5B, 2.9B and 7.2B.
	wantRWKV := map[string]int64{"0.1B": 191_133_696, "1.5B": 1_527_799_808, "2.9B": 2_948_229_120, "7.2B": 7_200_194_560}
	for _, p := range RWKV7Presets {
		if err := p.Shape.Check(); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
		if got := p.Shape.Params(); got != wantRWKV[p.Name] {
			t.Errorf("rwkv7 %s: %d parameters, want %d", p.Name, got, wantRWKV[p.Name])
		}
	}
	if got := NearestPreset("rwkv7", 2e9).Name; got != "1.5B" {
		t.Errorf("NearestPreset(rwkv7, 2B) = %s", got)
	}
	if got := NearestPreset("qwen35", 1e9).Name; got != "0.8B" {
		t.Errorf("NearestPreset(qwen35, 1B) = %s", got)
	}
	if got := NearestPreset("qwen3moe", 1e9).Name; got != "1B" {
		t.Errorf("NearestPreset(qwen3moe, 1B) = %s", got)
	}
	for _, c := range []struct {
		in   string
		want string
	}{{"100M", "100M"}, {"135m", "100M"}, {"500M", "1B"}, {"1.2B", "1B"}, {"3B", "1B"}, {"7b", "8B"}, {"70B", "8B"}} {
		n, err := ParseCount(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := NearestPreset("llama", n).Name; got != c.want {
			t.Errorf("NearestPreset(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	for _, bad := range []string{"", "M", "-1B", "1X", "inf"} {
		if _, err := ParseCount(bad); err == nil {
			t.Errorf("ParseCount(%q) accepted", bad)
		}
	}
}

func TestTensorTypes(t *testing.T) {
	q4km, _ := LookupFileType("q4_k")
	if q4km.Name != "Q4_K_M" || q4km.ID != 15 {
		t.Fatalf("q4_k -> %+v", q4km)
	}
	// 8 layers: useMoreBits picks 0 (first eighth), 7 (last eighth), 3 and 6.
	var got []string
	for l := 0; l < 8; l++ {
		got = append(got, q4km.TensorType("blk.x.attn_v.weight", 4096, 2, l, 8, 4, false).String())
	}
	want := []string{"Q6_K", "Q4_K", "Q4_K", "Q6_K", "Q4_K", "Q4_K", "Q6_K", "Q6_K"}
	if !slices.Equal(got, want) {
		t.Errorf("Q4_K_M attn_v by layer: %v, want %v", got, want)
	}
	for _, c := range []struct {
		ft, name      string
		ne0, dims     int
		tied          bool
		want          gguf.Type
		layer, layers int
	}{
		{"Q4_K_M", "output.weight", 4096, 2, false, gguf.TypeQ6_K, -1, 8},
		{"Q4_K_M", "token_embd.weight", 4096, 2, false, gguf.TypeQ4_K, -1, 8},
		{"Q4_K_M", "token_embd.weight", 4096, 2, true, gguf.TypeQ6_K, -1, 8},
		{"Q4_K_M", "blk.0.attn_norm.weight", 4096, 1, false, gguf.TypeF32, 0, 8},
		{"Q4_K_M", "blk.1.attn_q.weight", 128, 2, false, gguf.TypeQ5_0, 1, 8},
		{"Q4_K_M", "output.weight", 128, 2, false, gguf.TypeQ8_0, -1, 8},
		{"Q8_0", "output.weight", 4096, 2, false, gguf.TypeQ8_0, -1, 8},
		{"Q8_0", "blk.0.ffn_up.weight", 100, 2, false, gguf.TypeF16, 0, 8},
		{"Q4_0", "output.weight", 4096, 2, false, gguf.TypeQ6_K, -1, 8},
		{"Q2_K", "blk.3.ffn_down.weight", 4096, 2, false, gguf.TypeQ3_K, 3, 8},
		{"Q2_K", "blk.3.attn_q.weight", 128, 2, false, gguf.TypeQ4_0, 3, 8},
		{"F16", "output.weight", 4096, 2, false, gguf.TypeF16, -1, 8},
		{"BF16", "blk.0.ffn_norm.weight", 4096, 1, false, gguf.TypeF32, 0, 8},
	} {
		ft, err := LookupFileType(c.ft)
		if err != nil {
			t.Fatal(err)
		}
		if got := ft.TensorType(c.name, c.ne0, c.dims, c.layer, c.layers, 4, c.tied); got != c.want {
			t.Errorf("%s %s ne0 %d tied %v: %v, want %v", c.ft, c.name, c.ne0, c.tied, got, c.want)
		}
	}
	pure, _ := LookupFileType("Q4_K_M")
	pure.Pure = true
	if got := pure.TensorType("output.weight", 4096, 2, -1, 8, 4, false); got != gguf.TypeQ4_K {
		t.Errorf("pure Q4_K_M output: %v", got)
	}
	if _, err := LookupFileType("Q9_9"); err == nil {
		t.Error("unknown type accepted")
	}
}

// TestStreamMatchesWriter checks that Write, whose tensor rows are
// produced while the file is written (gguf.Writer.AddTensorFunc), gives
// the bytes gguf.Writer gives for the same tensors quantized in memory.
func TestStreamMatchesWriter(t *testing.T) {
	voc := smallVocab(t, 300)
	for _, arch := range Archs {
		c := tinyConfig(t, arch, "Q4_K_M", voc)
		dir := t.TempDir()
		path := filepath.Join(dir, "s.gguf")
		if err := Write(path, c); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		w := gguf.NewWriter()
		for _, kv := range f.Metadata {
			w.Add(kv.Key, kv.Value)
		}
		c.tensors(func(name string, shape []uint64, layer int, fill RowFunc) {
			typ := c.tensorType(name, shape, layer)
			rows := 1
			for _, d := range shape[1:] {
				rows *= int(d)
			}
			rs, _ := typ.RowSize(shape[0])
			data := make([]byte, int(rs)*rows)
			src := make([]float32, shape[0])
			for r := 0; r < rows; r++ {
				fill(r, src)
				if err := encodeRow(typ, src, data[r*int(rs):(r+1)*int(rs)]); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.AddTensor(name, typ, shape, data); err != nil {
				t.Fatal(err)
			}
		})
		var want bytes.Buffer
		if _, err := w.WriteTo(&want); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s: streaming writer wrote %d bytes that differ from gguf.Writer's %d", arch, len(got), want.Len())
		}
	}
}

// TestModels writes a tiny model of every architecture and checks that
// the metadata is what llama.cpp reads, that the file is deterministic and
// independent of the number of CPUs, and that ppl-score's model package
// loads it and gives finite log-probabilities.
func TestModels(t *testing.T) {
	voc := smallVocab(t, 400)
	for _, c := range []struct{ arch, typ string }{{"llama", "F16"}, {"llama", "Q4_K_M"}, {"qwen2", "Q8_0"}, {"qwen3", "BF16"}, {"qwen3moe", "Q4_K_M"}, {"qwen35", "Q8_0"}, {"qwen35moe", "Q4_K_M"}, {"phi3", "Q4_K_M"}, {"glm4", "Q8_0"}, {"granite", "Q8_0"}, {"smollm3", "Q4_K_M"}, {"olmo2", "Q8_0"}, {"seed_oss", "Q4_K_M"}, {"exaone4", "Q8_0"}, {"minimax-m2", "Q4_K_M"}, {"ernie4_5-moe", "Q8_0"}, {"dots1", "Q4_K_M"}, {"qwen2moe", "Q8_0"}, {"olmoe", "Q4_K_M"}, {"granitemoe", "Q8_0"}, {"hunyuan-moe", "Q4_K_M"}, {"bailingmoe2", "Q8_0"}, {"ernie4_5", "Q8_0"}, {"exaone", "Q4_K_M"}, {"hunyuan-dense", "Q8_0"}, {"arcee", "Q4_K_M"}, {"afmoe", "Q8_0"}, {"apertus", "Q8_0"}, {"exaone-moe", "Q4_K_M"}, {"cohere2moe", "Q8_0"}, {"gemma3n", "Q4_K_M"}, {"phimoe", "Q8_0"}, {"gemma", "Q4_K_M"}, {"internlm2", "Q8_0"}, {"xverse", "Q4_K_M"}, {"minicpm", "Q8_0"}, {"deepseek", "Q4_K_M"}, {"deci", "Q8_0"}, {"nanbeige", "Q8_0"}, {"orion", "Q4_K_M"}, {"stablelm", "Q8_0"}, {"starcoder2", "Q4_K_M"}, {"phi2", "Q8_0"}, {"gptneox", "Q4_K_M"}, {"falcon", "Q8_0"}, {"gpt2", "Q4_K_M"}, {"nemotron", "Q8_0"}, {"chatglm", "Q4_K_M"}, {"olmo", "Q8_0"}, {"dbrx", "Q4_K_M"}, {"bailingmoe", "Q8_0"}, {"granite_swa", "Q4_K_M"}, {"mellum", "Q8_0"}, {"baichuan", "Q4_K_M"}, {"bloom", "Q8_0"}, {"mpt", "Q4_K_M"}, {"refact", "Q8_0"}, {"jais", "Q4_K_M"}, {"jais2", "Q8_0"}, {"maincoder", "Q4_K_M"}, {"pangu-embedded", "Q8_0"}, {"mimo2", "Q4_K_M"}, {"bitnet", "Q8_0"}, {"openelm", "Q4_K_M"}, {"qwen", "Q8_0"}, {"step35", "Q4_K_M"}, {"kimi-linear", "Q8_0"}, {"smallthinker", "Q4_K_M"}, {"mamba", "Q8_0"}, {"mamba2", "Q4_K_M"}, {"jamba", "Q8_0"}, {"plamo3", "Q4_K_M"}, {"plamo2", "Q8_0"}, {"grok", "Q4_K_M"}, {"minicpm3", "Q8_0"}, {"plamo", "Q4_K_M"}, {"arctic", "Q8_0"}, {"rwkv7", "Q4_K_M"}, {"arwkv7", "Q8_0"}, {"rwkv6", "Q8_0"}, {"rwkv6qwen2", "Q4_K_M"}, {"hy_v3", "Q8_0"}, {"maple", "Q4_K_M"}, {"laguna", "Q8_0"}, {"maion-coder", "Q4_K_M"}, {"spark2_5", "Q8_0"}, {"muse-glimmer", "Q4_K_M"}, {"talkie", "Q8_0"}, {"hunyuan_vl", "Q4_K_M"}, {"plm", "Q8_0"}, {"hrm_text", "Q4_K_M"}, {"grovemoe", "Q8_0"}, {"k2-horizon", "Q4_K_M"}, {"graniteswitch", "Q8_0"}, {"paddleocr", "Q4_K_M"}, {"cogvlm", "Q8_0"}, {"deepseek2-ocr", "Q4_K_M"}, {"minimax-01", "Q8_0"}, {"bailingmoe3", "Q4_K_M"}, {"dots3note", "Q8_0"}, {"hy_v4", "Q4_K_M"}, {"kimi-k3", "Q8_0"}, {"minimax-m3", "Q4_K_M"}, {"qwen4exp", "Q8_0"}, {"glm5-next", "Q4_K_M"}, {"deepseek4", "Q4_K_M"}} {
		t.Run(c.arch+"-"+c.typ, func(t *testing.T) {
			cfg := tinyConfig(t, c.arch, c.typ, voc)
			dir := t.TempDir()
			p1, p2 := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf")
			if err := Write(p1, cfg); err != nil {
				t.Fatal(err)
			}
			old := runtime.GOMAXPROCS(1)
			err := Write(p2, cfg)
			runtime.GOMAXPROCS(old)
			if err != nil {
				t.Fatal(err)
			}
			b1, _ := os.ReadFile(p1)
			b2, _ := os.ReadFile(p2)
			if !bytes.Equal(b1, b2) {
				t.Fatal("two writes differ (one with GOMAXPROCS 1)")
			}
			f, err := gguf.Open(p1)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			a := c.arch
			keys := map[string]uint64{
				a + ".context_length": 1024, a + ".embedding_length": 256, a + ".block_count": 2,
				a + ".feed_forward_length": 512, a + ".attention.head_count": 4, a + ".attention.head_count_kv": uint64(cfg.KVHeads),
				a + ".attention.key_length": uint64(cfg.HeadDim), "general.file_type": uint64(cfg.Type.ID),
				"tokenizer.ggml.eos_token_id": 399,
			}
			if a == "mimo2" { // per-layer head counts: twice the KV heads in sliding layers
				for key, want := range map[string][]int32{a + ".attention.head_count": {4, 4}, a + ".attention.head_count_kv": {4, 4}} {
					delete(keys, key)
					if got, err := f.Int32s(key); err != nil || !slices.Equal(got, want) {
						t.Errorf("%s = %v (%v), want %v", key, got, err, want)
					}
				}
			}
			if a == "hunyuan_vl" { // NTK alpha and four RoPE sections of a quarter of the pairs
				al, _ := f.Float(a + ".rope.scaling.alpha")
				sec, _ := f.Int32s(a + ".rope.dimension_sections")
				if al != 8 || !slices.Equal(sec, []int32{4, 4, 4, 4}) {
					t.Errorf("hunyuan_vl's alpha %v, sections %v", al, sec)
				}
			}
			if a == "paddleocr" { // PaddleOCR-VL's sections in proportion
				if sec, _ := f.Int32s(a + ".rope.dimension_sections"); !slices.Equal(sec, []int32{4, 6, 6, 0}) {
					t.Errorf("paddleocr's sections %v", sec)
				}
			}
			if a == "talkie" { // no norm weights; the logits' multiplier
				if _, ok := f.Tensor("output_norm.weight"); ok {
					t.Errorf("talkie has output_norm.weight")
				}
				if ls, _ := f.Float(a + ".logit_scale"); ls != 2 {
					t.Errorf("talkie's logit scale %v", ls)
				}
			}
			if a == "muse-glimmer" { // the logits' multiplier and soft-cap llama.cpp reads
				ls, _ := f.Float(a + ".logit_scale")
				sc, _ := f.Float(a + ".final_logit_softcapping")
				if ls != 0.75 || sc != 4 {
					t.Errorf("muse-glimmer's logit scale %v, soft-cap %v", ls, sc)
				}
			}
			if a == "spark2_5" { // step35's heads and sliding flags; RoPE over half the head, the sliding layers' over the whole
				for key, want := range map[string][]int32{a + ".attention.head_count": {4, 6}, a + ".attention.head_count_kv": {2, 2}} {
					delete(keys, key)
					if got, err := f.Int32s(key); err != nil || !slices.Equal(got, want) {
						t.Errorf("%s = %v (%v), want %v", key, got, err, want)
					}
				}
				p, _ := f.Lookup(a + ".attention.sliding_window_pattern")
				d, _ := f.Uint(a + ".rope.dimension_count")
				dswa, _ := f.Uint(a + ".rope.dimension_count_swa")
				if !slices.Equal(p.Any().([]bool), []bool{false, true}) || d != 16 || dswa != 32 {
					t.Errorf("spark2_5's pattern %v, RoPE dimensions %d, %d", p.Any(), d, dswa)
				}
			}
			if a == "maion-coder" { // the sliding layers, experts in every second layer at half the width
				if p, _ := f.Lookup(a + ".attention.sliding_window_pattern"); !slices.Equal(p.Any().([]bool), []bool{true, true}) {
					t.Errorf("maion-coder's pattern %v", p.Any())
				}
				if s, _ := f.Uint(a + ".interleave_moe_layer_step"); s != 2 {
					t.Errorf("maion-coder's step %d", s)
				}
				if x, _ := f.Uint(a + ".moe_latent_size"); x != 128 { // half of 256
					t.Errorf("maion-coder's latent width %d", x)
				}
			}
			if a == "laguna" { // step35's heads; RoPE over half the head, the sliding layers' over the whole
				for key, want := range map[string][]int32{a + ".attention.head_count": {4, 6}, a + ".attention.head_count_kv": {2, 2}} {
					delete(keys, key)
					if got, err := f.Int32s(key); err != nil || !slices.Equal(got, want) {
						t.Errorf("%s = %v (%v), want %v", key, got, err, want)
					}
				}
				if d, _ := f.Uint(a + ".rope.dimension_count"); d != 16 {
					t.Errorf("%s.rope.dimension_count = %d, want 16", a, d)
				}
				if d, _ := f.Uint(a + ".rope.dimension_count_swa"); d != 32 {
					t.Errorf("%s.rope.dimension_count_swa = %d, want 32", a, d)
				}
				if _, ok := f.Lookup(a + ".attention.sliding_window_pattern"); ok {
					t.Errorf("%s has a sliding_window_pattern (the converter writes none)", a)
				}
			}
			if a == "step35" { // per-layer head counts: half again as many heads in sliding layers
				for key, want := range map[string][]int32{a + ".attention.head_count": {4, 6}, a + ".attention.head_count_kv": {2, 2}} {
					delete(keys, key)
					if got, err := f.Int32s(key); err != nil || !slices.Equal(got, want) {
						t.Errorf("%s = %v (%v), want %v", key, got, err, want)
					}
				}
				exp, _ := f.Float32s(a + ".swiglu_clamp_exp")
				shexp, _ := f.Float32s(a + ".swiglu_clamp_shexp")
				p, _ := f.Lookup(a + ".attention.sliding_window_pattern")
				if !slices.Equal(exp, []float32{0.25, 0}) || !slices.Equal(shexp, []float32{0.375, 0}) || !slices.Equal(p.Any().([]bool), []bool{false, true}) {
					t.Errorf("step35's limits %v, %v, pattern %v", exp, shexp, p.Any())
				}
			}
			if a == "maple" { // the experts' clamps, per layer
				if exp, _ := f.Float32s(a + ".swiglu_clamp_exp"); !slices.Equal(exp, []float32{7, 7}) {
					t.Errorf("maple's limits %v", exp)
				}
			}
			if a == "dots3note" { // one latent KV head; both layers' latent sizes, the sliding layers, the indexer of the full ones
				keys[a+".block_count"], keys[a+".attention.head_count_kv"], keys[a+".attention.key_length"] = 4, 1, 80
				for key, want := range map[string]uint64{a + ".attention.value_length": 64, a + ".attention.key_length_swa": 48,
					a + ".attention.value_length_swa": 32, a + ".attention.q_lora_rank": 64, a + ".attention.kv_lora_rank": 64,
					a + ".attention.key_length_mla": 48, a + ".attention.value_length_mla": 32, a + ".attention.kv_lora_rank_swa": 32,
					a + ".attention.key_length_mla_swa": 32, a + ".attention.value_length_mla_swa": 16, a + ".rope.dimension_count": 16,
					a + ".attention.sliding_window": 40, a + ".attention.indexer.head_count": 4, a + ".attention.indexer.key_length": 64,
					a + ".attention.indexer.top_k": 48, a + ".leading_dense_block_count": 1, a + ".expert_shared_count": 1} {
					keys[key] = want
				}
				p, _ := f.Lookup(a + ".attention.sliding_window_pattern")
				types, _ := f.Int32s(a + ".attention.indexer.types")
				if !slices.Equal(p.Any().([]bool), []bool{false, true, false, true}) || !slices.Equal(types, []int32{1, 0, 1, 0}) {
					t.Errorf("dots3note's sliding layers %v, indexer types %v", p.Any(), types)
				}
			}
			if a == "deepseek4" { // one key, also its value; the compressions, the indexer, the output's groups, the routing, the streams
				keys[a+".block_count"], keys[a+".attention.head_count_kv"], keys[a+".attention.key_length"] = 4, 1, 32
				for key, want := range map[string]uint64{a + ".attention.value_length": 32, a + ".rope.dimension_count": 16,
					a + ".attention.q_lora_rank": 128, a + ".attention.sliding_window": 16, a + ".attention.output_group_count": 2,
					a + ".attention.output_lora_rank": 32, a + ".attention.indexer.head_count": 2, a + ".attention.indexer.key_length": 64,
					a + ".attention.indexer.top_k": 8, a + ".hyper_connection.count": 4, a + ".hash_layer_count": 1,
					a + ".expert_gating_func": 4, a + ".expert_shared_count": 1} {
					keys[key] = want
				}
				ratios, _ := f.Int32s(a + ".attention.compress_ratios")
				table, ok := f.Tensor("blk.0.ffn_gate_tid2eid.weight")
				if !slices.Equal(ratios, []int32{0, 4, 128, 4}) || !ok || table.Type != gguf.TypeI32 {
					t.Errorf("deepseek4's compress_ratios %v, experts by token %v", ratios, table)
				}
			}
			if a == "hy_v4" { // one latent KV head; the latent sizes, the streams, the indexer, the routed experts' clamps
				keys[a+".block_count"], keys[a+".attention.head_count_kv"], keys[a+".attention.key_length"] = 4, 1, 80
				for key, want := range map[string]uint64{a + ".attention.value_length": 64, a + ".attention.q_lora_rank": 64,
					a + ".attention.kv_lora_rank": 64, a + ".attention.key_length_mla": 48, a + ".attention.value_length_mla": 32,
					a + ".rope.dimension_count": 16, a + ".hyper_connection.count": 4, a + ".attention.indexer.head_count": 4,
					a + ".attention.indexer.key_length": 64, a + ".attention.indexer.top_k": 48, a + ".leading_dense_block_count": 1,
					a + ".expert_shared_count": 1} {
					keys[key] = want
				}
				types, _ := f.Int32s(a + ".attention.indexer.types")
				clamps, _ := f.Float32s(a + ".swiglu_clamp_exp")
				if !slices.Equal(types, []int32{1, 0, 1, 0}) || !slices.Equal(clamps, []float32{0.5, 0.5, 0.5, 0.5}) {
					t.Errorf("hy_v4's indexer types %v, clamps %v", types, clamps)
				}
			}
			if a == "qwen4exp" { // 3 layers; the streams, the indexer and QSA's ratios, PLE's hash
				keys[a+".block_count"] = 3
				for key, want := range map[string]uint64{a + ".hyper_connection.count": 4, a + ".hyper_connection.low_rank": 16,
					a + ".attention.indexer.head_count": 2, a + ".attention.indexer.key_length": 32, a + ".attention.indexer.top_k": 16,
					a + ".ple.ngram_size": 3, a + ".ple.heads_per_ngram": 2, a + ".ple.conv_kernel": 4, a + ".ple.eos_token_id": 13,
					a + ".embedding_length_per_layer_input": 64, a + ".full_attention_interval": 3, a + ".expert_shared_feed_forward_length": 96} {
					keys[key] = want
				}
				ratios, _ := f.Int32s(a + ".attention.compress_ratios")
				layers, _ := f.Int32s(a + ".ple.layers")
				sizes, _ := f.Int32s(a + ".ple.head_vocab_sizes")
				offsets, _ := f.Int32s(a + ".ple.head_offsets")
				if !slices.Equal(ratios, []int32{0, 0, 4}) || !slices.Equal(layers, []int32{1}) || !slices.Equal(sizes, []int32{101, 103, 107, 109}) || !slices.Equal(offsets, []int32{0, 101, 204, 311}) {
					t.Errorf("qwen4exp's ratios %v, PLE layers %v, head sizes %v, offsets %v", ratios, layers, sizes, offsets)
				}
				if v, ok := f.Lookup(a + ".ple.layer_multipliers"); !ok || !slices.Equal(v.Any().([]uint64), q4Mult) {
					t.Errorf("qwen4exp's multipliers %v", v.Any())
				}
			}
			if a == "kimi-linear" || a == "bailingmoe3" || a == "kimi-k3" { // KDA layers have no KV heads; the latent cache's key and value
				keys[a+".block_count"], keys[a+".attention.key_length"] = 4, 48
				delete(keys, a+".attention.head_count_kv")
				if got, err := f.Int32s(a + ".attention.head_count_kv"); err != nil || !slices.Equal(got, []int32{0, 0, 0, 1}) {
					t.Errorf("%s.attention.head_count_kv = %v (%v), want [0 0 0 1]", a, got, err)
				}
			}
			if a == "glm5-next" { // KDA layers have no KV heads; the latent cache's key and value (no RoPE), the streams, the k-pool indexer
				keys[a+".block_count"], keys[a+".attention.key_length"] = 4, 64
				delete(keys, a+".attention.head_count_kv")
				for key, want := range map[string]uint64{a + ".attention.value_length": 64, a + ".attention.q_lora_rank": 128,
					a + ".attention.kv_lora_rank": 64, a + ".attention.key_length_mla": 32, a + ".attention.value_length_mla": 32,
					a + ".rope.dimension_count": 0, a + ".hyper_connection.count": 4, a + ".hyper_connection.sinkhorn_iterations": 20,
					a + ".attention.indexer.head_count": 4, a + ".attention.indexer.key_length": 32, a + ".attention.indexer.top_k": 16,
					a + ".attention.indexer.kpool": 4, a + ".leading_dense_block_count": 1, a + ".expert_shared_count": 1} {
					keys[key] = want
				}
				kv, _ := f.Int32s(a + ".attention.head_count_kv")
				tail, _ := f.Bool(a + ".attention.indexer.kpool_select_tail")
				if !slices.Equal(kv, []int32{0, 0, 0, 1}) || !tail {
					t.Errorf("glm5-next's KV heads %v, tail %v", kv, tail)
				}
				for name, want := range map[string]gguf.Type{"blk.0.ssm_f_a.weight": gguf.TypeF16, "blk.3.indexer_compressor_ape.weight": gguf.TypeF32,
					"blk.3.indexer.attn_k.weight": gguf.TypeF16, "blk.3.hc_attn_fn.weight": gguf.TypeF16, "blk.0.attn_q.weight": gguf.TypeQ4_K} {
					if i := slices.IndexFunc(f.Tensors, func(x *gguf.Tensor) bool { return x.Name == name }); i < 0 || f.Tensors[i].Type != want {
						t.Errorf("glm5-next's %s: not of type %v (llama-quantize's choice)", name, want)
					}
				}
			}
			if a == "mamba" || a == "mamba2" { // no attention, no FFN: zeros, and the SSM's sizes
				keys[a+".feed_forward_length"], keys[a+".attention.head_count"] = 0, 0
				keys[a+".ssm.inner_size"], keys[a+".ssm.state_size"], keys[a+".ssm.conv_kernel"] = 512, 16, 4
				delete(keys, a+".attention.head_count_kv")
				delete(keys, a+".attention.key_length")
				if _, ok := f.Lookup(a + ".rope.freq_base"); ok {
					t.Errorf("%s has a RoPE base", a)
				}
				rms, _ := f.Bool(a + ".ssm.dt_b_c_rms")
				if rms != (a == "mamba") {
					t.Errorf("%s.ssm.dt_b_c_rms = %v", a, rms)
				}
			}
			if a == "rwkv7" || a == "arwkv7" { // no attention: heads of wkv.head_size, the low-rank widths at 256 wide
				keys[a+".attention.head_count"], keys[a+".wkv.head_size"] = 0, 64
				keys[a+".attention.decay_lora_rank"], keys[a+".attention.iclr_lora_rank"] = 32, 32 // the converter's at 256 wide
				keys[a+".attention.value_residual_mix_lora_rank"], keys[a+".attention.gate_lora_rank"] = 32, 64
				delete(keys, a+".attention.head_count_kv")
				delete(keys, a+".attention.key_length")
				if a == "arwkv7" { // its converter's fixed ranks, no gate, one token shift
					keys[a+".attention.decay_lora_rank"], keys[a+".attention.iclr_lora_rank"] = 64, 64
					keys[a+".attention.value_residual_mix_lora_rank"], keys[a+".attention.gate_lora_rank"], keys[a+".token_shift_count"] = 32, 0, 1
				}
				if _, ok := f.Lookup(a + ".rope.freq_base"); ok {
					t.Errorf("%s has a RoPE base", a)
				}
			}
			if a == "rwkv6" || a == "rwkv6qwen2" { // no attention: heads of wkv.head_size, the low-rank widths at 256 wide
				keys[a+".attention.head_count"], keys[a+".wkv.head_size"] = 0, 64
				keys[a+".time_mix_extra_dim"], keys[a+".time_decay_extra_dim"] = 32, 64
				delete(keys, a+".attention.key_length")
				if a == "rwkv6" { // every sixth layer's output halved
					delete(keys, a+".attention.head_count_kv")
					keys[a+".rescale_every_n_layers"] = 6
				} else { // one token shift, a head of keys and values
					keys[a+".token_shift_count"], keys[a+".attention.head_count_kv"] = 1, 1
				}
				if _, ok := f.Lookup(a + ".rope.freq_base"); ok {
					t.Errorf("%s has a RoPE base", a)
				}
			}
			if a == "plamo2" { // KV heads per layer: 0 for the Mamba layers; one group, written 0
				delete(keys, a+".attention.head_count_kv")
				if got, err := f.Int32s(a + ".attention.head_count_kv"); err != nil || !slices.Equal(got, []int32{0, 2}) {
					t.Errorf("%s.attention.head_count_kv = %v (%v), want [0 2]", a, got, err)
				}
				keys[a+".ssm.group_count"], keys[a+".ssm.time_step_rank"] = 0, 4
			}
			if a == "jamba" { // KV heads per layer: 0 for Mamba-1's; dt_rank ceil(256/16)
				keys[a+".ssm.time_step_rank"] = 16
				delete(keys, a+".attention.head_count_kv")
				if got, err := f.Int32s(a + ".attention.head_count_kv"); err != nil || !slices.Equal(got, []int32{0, 2}) {
					t.Errorf("%s.attention.head_count_kv = %v (%v), want [0 2]", a, got, err)
				}
			}
			if a == "minicpm3" { // key heads of 32 + 16 rotated, LongRoPE's original context
				keys[a+".attention.key_length"], keys[a+".attention.value_length"], keys[a+".rope.dimension_count"] = 48, 32, 16
				keys[a+".attention.q_lora_rank"], keys[a+".attention.kv_lora_rank"], keys[a+".rope.scaling.original_context_length"] = 128, 64, 512
			}
			if a == "k2-horizon" { // norms in 2 groups, 2 of 4 value experts
				if g, _ := f.Uint(a + ".attention.group_norm_groups"); g != 2 {
					t.Errorf("k2-horizon's groups %d", g)
				}
				if u, _ := f.Uint(a + ".attention.value_expert_used_count"); u != 2 {
					t.Errorf("k2-horizon's value experts used %d", u)
				}
			}
			if a == "graniteswitch" { // 2 adapters, switched on by the vocabulary's last 2 tokens
				if ids, _ := f.Int32s(a + ".adapters.token_ids_activate"); !slices.Equal(ids, []int32{398, 399}) {
					t.Errorf("graniteswitch's adapter tokens %v", ids)
				}
			}
			if a == "grovemoe" { // chunk experts of pairs, their output halved
				if g, _ := f.Uint(a + ".experts_per_group"); g != 2 {
					t.Errorf("grovemoe's group %d", g)
				}
			}
			if a == "hrm_text" { // two blocks run as 2 · 2 passes of a layer each
				keys[a+".block_count"] = 4
				if lps, _ := f.Uint(a + ".hrm.layers_per_stack"); lps != 1 {
					t.Errorf("hrm_text's layers per stack %d", lps)
				}
			}
			if a == "plm" { // key heads of 32 + 16 rotated, no q rank
				keys[a+".attention.key_length"], keys[a+".attention.value_length"], keys[a+".rope.dimension_count"] = 48, 32, 16
				keys[a+".attention.kv_lora_rank"] = 64
			}
			if a == "qwen" { // Qwen's intermediate_size: twice the MLP's width
				keys[a+".feed_forward_length"] = 1024
			}
			if a == "openelm" { // per-layer head counts and widths
				for key, want := range map[string][]int32{a + ".feed_forward_length": {512, 576},
					a + ".attention.head_count": {4, 8}, a + ".attention.head_count_kv": {int32(cfg.KVHeads), int32(cfg.KVHeads)}} {
					delete(keys, key)
					if got, err := f.Int32s(key); err != nil || !slices.Equal(got, want) {
						t.Errorf("%s = %v (%v), want %v", key, got, err, want)
					}
				}
			}
			if a == "deci" { // per-layer head counts and widths by its layout, ALFN
				keys[a+".block_count"] = 4
				for key, want := range map[string][]int32{a + ".feed_forward_length": {512, 512, 512, 0},
					a + ".attention.head_count": {4, 4, 0, 4}, a + ".attention.head_count_kv": {2, 0, 0, 2}} {
					delete(keys, key)
					if got, err := f.Int32s(key); err != nil || !slices.Equal(got, want) {
						t.Errorf("%s = %v (%v), want %v", key, got, err, want)
					}
				}
			}
			if a == "gemma3n" { // one width per layer, as its converter writes it
				delete(keys, a+".feed_forward_length")
				if got, err := f.Int32s(a + ".feed_forward_length"); err != nil || !slices.Equal(got, []int32{512, 512}) {
					t.Errorf("%s.feed_forward_length = %v (%v), want [512 512]", a, got, err)
				}
			}
			if a == "olmo2" { // OLMo 3's keys, as its converter writes them
				keys[a+".attention.sliding_window"], keys[a+".rope.scaling.original_context_length"] = 64, 128
				p, _ := f.Lookup(a + ".attention.sliding_window_pattern")
				typ, _ := f.String(a + ".rope.scaling.type")
				factor, _ := f.Float(a + ".rope.scaling.factor")
				attn, _ := f.Float(a + ".rope.scaling.attn_factor")
				if !slices.Equal(p.Any().([]bool), []bool{true, true}) || typ != "yarn" || factor != 8 || attn != float64(float32(1+0.1*math.Log(8))) {
					t.Errorf("OLMo 3's keys: sliding_window_pattern %v, rope.scaling.type %q, factor %v, attn_factor %v", p.Any(), typ, factor, attn)
				}
			}
			for key, want := range keys {
				if got, err := f.Uint(key); err != nil || got != want {
					t.Errorf("%s = %d (%v), want %d", key, got, err, want)
				}
			}
			if s, _ := f.String("general.architecture"); s != a {
				t.Errorf("general.architecture %q", s)
			}
			if s, _ := f.String("tokenizer.ggml.pre"); s != "gpt-2" {
				t.Errorf("tokenizer.ggml.pre %q", s)
			}
			if len(f.Tensors) != len(cfg.Tensors()) {
				t.Errorf("%d tensors, want %d", len(f.Tensors), len(cfg.Tensors()))
			}
			var n uint64
			for _, tt := range f.Tensors {
				n += tt.Elements()
			}
			if int64(n) != cfg.Params() {
				t.Errorf("file holds %d weights, Params says %d", n, cfg.Params())
			}
			m, err := model.Load(p1, model.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			toks := voc.Encode([]byte("The perplexity of a model is the exponential of its mean negative log-likelihood."))
			r, err := m.Score(toks, 1)
			if err != nil {
				t.Fatal(err)
			}
			var nll float64
			for _, lp := range r.Logprobs {
				if math.IsNaN(lp) || lp > 0 {
					t.Fatalf("log-probability %v", lp)
				}
				nll -= lp
			}
			// A random model is about as good as uniform guessing.
			if ppl := math.Exp(nll / float64(len(r.Logprobs))); ppl < 20 || ppl > 40000 {
				t.Errorf("random model PPL %.1f, want roughly the vocabulary size", ppl)
			}
		})
	}
}

// TestTokenizerMatches checks that a vocabulary trained here tokenizes the
// held-out corpus exactly as the tokenize package (llama.cpp's algorithm)
// does with the GGUF metadata written for it: the bigram statistics are
// only right if both agree.
func TestTokenizerMatches(t *testing.T) {
	voc := smallVocab(t, 2048)
	tok, err := BPETokenizer(voc)
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriter()
	w.Add("general.architecture", "llama")
	for _, kv := range tok.KVs {
		w.Add(kv.Key, kv.Value)
	}
	path := filepath.Join(t.TempDir(), "tok.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tk, err := tokenizer.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	if tk.AddBOS() || tk.NVocab() != 2048 || tk.EOS() != 2047 {
		t.Errorf("tokenizer: add BOS %v, %d tokens, EOS %d", tk.AddBOS(), tk.NVocab(), tk.EOS())
	}
	texts := heldoutTexts(t)
	texts = append(texts, []byte("Tabs\tand  spaces,   runs\n\n\nof newlines; émigré naïve 数字１２３ 😀 it's THEY'RE\r\n"))
	for i, text := range texts {
		want, err := tk.Encode(text)
		if err != nil {
			t.Fatal(err)
		}
		if got := voc.Encode(text); !slices.Equal(got, want) {
			k := 0
			for k < min(len(got), len(want)) && got[k] == want[k] {
				k++
			}
			t.Errorf("text %d: tokens differ at %d: bpe %v, tokenize %v", i, k, got[k:min(k+5, len(got))], want[k:min(k+5, len(want))])
		}
	}
}

func TestLowRank(t *testing.T) {
	// A rank-3 matrix is recovered exactly at rank 3.
	r, c := 40, 30
	u, v := newDense(r, 3), newDense(c, 3)
	for i := range u.D {
		u.D[i] = math.Sin(float64(i) * 1.3)
	}
	for i := range v.D {
		v.D[i] = math.Cos(float64(i) * 0.7)
	}
	m := mul(u, transpose(v))
	a, b := lowRank(m, 3, 1)
	got := mul(a, transpose(b))
	for i := range m.D {
		if math.Abs(got.D[i]-m.D[i]) > 1e-9 {
			t.Fatalf("element %d: %v, want %v", i, got.D[i], m.D[i])
		}
	}
	vals, _ := jacobiEigen(&Dense{R: 2, C: 2, D: []float64{2, 1, 1, 2}})
	if math.Abs(vals[0]-3) > 1e-12 || math.Abs(vals[1]-1) > 1e-12 {
		t.Errorf("eigenvalues %v, want [3 1]", vals)
	}
}

// TestEmbeddings checks the RMSNorm trick: every embedding row has root
// mean square 1, and embedding·output reproduces A·B.
func TestEmbeddings(t *testing.T) {
	voc := smallVocab(t, 300)
	var seqs [][]int32
	for _, text := range heldoutTexts(t) {
		seqs = append(seqs, voc.Encode(text))
	}
	g, nll, err := TrainBigram(voc.Size(), seqs, BigramOptions{Rank: 20, Refine: 3, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if nll <= 0 || nll > math.Log(300) {
		t.Errorf("training NLL %v", nll)
	}
	d := 24
	embd, out, err := g.Embeddings(d)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < g.V; i++ {
		e := embd[i*d : (i+1)*d]
		var ss float64
		for _, x := range e {
			ss += float64(x) * float64(x)
		}
		if rms := math.Sqrt(ss / float64(d)); math.Abs(rms-1) > 1e-5 {
			t.Fatalf("row %d: rms %v", i, rms)
		}
		for _, j := range []int{0, 7, g.V - 1} {
			var z float64
			for k := 0; k < d; k++ {
				z += float64(e[k]) * float64(out[j*d+k])
			}
			if want := dot(g.A.row(i), g.B.row(j)); math.Abs(z-want) > 1e-4*(1+math.Abs(want)) {
				t.Fatalf("logit %d,%d: %v, want %v", i, j, z, want)
			}
		}
	}
	if _, _, err := g.Embeddings(21); err == nil {
		t.Error("width 21 accepted for rank 20")
	}
}
