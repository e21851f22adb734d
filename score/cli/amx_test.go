package cli

import (
	"fmt"
	"strings"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/score/model"
)

// TestAMXNotice checks which matrices the notice counts as llama.cpp's
// AMX buffer takes them (amx.cpp's supports_op in llama.cpp 0.7.0), and
// when it is given at all. On this project's Xeon with AMX-INT8, llama.cpp
// 0.7.0's figures parted from its AVX-512 build's (and ppl-score's int8)
// exactly for the models with such matrices (README: "llama.cpp on CPUs
// with AMX").
func TestAMXNotice(t *testing.T) {
	dense := func(name string, typ gguf.Type, in, out int) model.MatrixShape {
		return model.MatrixShape{Name: name, Type: typ, In: in, Out: out}
	}
	llama := []model.MatrixShape{
		dense("blk.0.attn_q.weight", gguf.TypeQ4_K, 768, 768),
		dense("blk.0.ffn_down.weight", gguf.TypeQ6_K, 2048, 768),
		dense("blk.1.attn_q.weight", gguf.TypeQ4_K, 768, 768),
		dense("token_embd.weight", gguf.TypeQ6_K, 768, 32000), // read by row, unless the head is tied
		dense("blk.0.attn_k.weight", gguf.TypeQ2_K, 768, 256), // no AMX kernel
	}
	const want = `this CPU has AMX-INT8: llama.cpp built for it (Debian's sapphirerapids backend, or -march=native) multiplies 3 of m.gguf's matrices (Q4_K, Q6_K; attn_q, ffn_down) with its AMX kernels, whose sums are not those of its AVX-512 build, which --activations int8 reproduces: llama-perplexity's figures on this machine are --activations int8-amx's`
	if got := amxNotice("m.gguf", model.Info{Matrices: llama}, model.ActInt8, true); got != want {
		t.Errorf("notice:\n%s\nwant\n%s", got, want)
	}
	if got := amxNotice("m.gguf", model.Info{Matrices: llama}, model.ActInt8AVX2, true); !strings.Contains(got, "not those of its AVX2 build, which --activations int8-avx2 reproduces") {
		t.Errorf("int8-avx2's notice: %s", got)
	}
	for _, c := range []struct {
		name  string
		mats  []model.MatrixShape
		act   string
		amx   bool
		tied  bool // the output head is the token embedding
		taken int  // matrices counted; -1: no notice
	}{
		{"no AMX", llama, model.ActInt8, false, false, -1},
		{"tied head", llama, model.ActInt8, true, true, 4},
		{"fp32", llama, model.ActFP32, true, false, -1},
		{"int8-avx2", llama, model.ActInt8AVX2, true, false, 3},
		{"int8-amx", llama, model.ActInt8AMX, true, false, -1},
		{"experts", []model.MatrixShape{{Name: "blk.0.ffn_up_exps.weight", Type: gguf.TypeQ8_0, In: 1024, Out: 512, Experts: 8}}, model.ActInt8, true, false, -1},
		{"rows not 32k", []model.MatrixShape{dense("output.weight", gguf.TypeQ8_0, 1024, 32001)}, model.ActInt8, true, false, -1},
		{"rows 32k", []model.MatrixShape{dense("output.weight", gguf.TypeQ8_0, 1024, 32000)}, model.ActInt8, true, false, 1},
		{"F16 width 16k", []model.MatrixShape{dense("blk.0.attn_q.weight", gguf.TypeF16, 48, 64)}, model.ActInt8, true, false, 1},
		{"F16 width not 16k", []model.MatrixShape{dense("blk.0.attn_q.weight", gguf.TypeF16, 40, 64)}, model.ActInt8, true, false, -1},
		{"Q4_0, Q4_1, IQ4_XS", []model.MatrixShape{dense("a.weight", gguf.TypeQ4_0, 64, 32), dense("b.weight", gguf.TypeQ4_1, 64, 32), dense("c.weight", gguf.TypeIQ4_XS, 256, 32)}, model.ActInt8, true, false, 3},
		{"BF16, MXFP4, IQ4_NL", []model.MatrixShape{dense("a.weight", gguf.TypeBF16, 64, 32), dense("b.weight", gguf.TypeMXFP4, 64, 32), dense("c.weight", gguf.TypeIQ4_NL, 64, 32)}, model.ActInt8, true, false, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			info := model.Info{Matrices: c.mats}
			if c.tied {
				info.Shared = []string{"output=token_embd"}
			}
			got := amxNotice("m.gguf", info, c.act, c.amx)
			switch {
			case c.taken < 0 && got != "":
				t.Errorf("notice %q, want none", got)
			case c.taken >= 0 && !strings.Contains(got, fmt.Sprintf(" multiplies %d of m.gguf's matrices ", c.taken)):
				t.Errorf("notice %q; want one counting %d matrices", got, c.taken)
			}
		})
	}
}
