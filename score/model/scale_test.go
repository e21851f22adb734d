package model

import (
	"math"
	"strings"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/oracle"
)

// withScales writes a copy of the oracle model stem with the extra
// "<name>.scale" tensors scale gives (nil: none).
func withScales(t *testing.T, dir, stem string, scale func(name string) []float32) string {
	t.Helper()
	src, err := gguf.Open(oracle.Model(dir, stem))
	if err != nil {
		t.Fatal(err)
	}
	add := map[string]f32Tensor{}
	for _, tn := range src.Tensors {
		if name, ok := strings.CutSuffix(tn.Name, ".weight"); ok {
			if s := scale(name); s != nil {
				add[name+".scale"] = f32Tensor{[]uint64{uint64(len(s))}, s}
			}
		}
	}
	src.Close()
	if len(add) == 0 {
		t.Fatalf("%s: no tensor took a scale", stem)
	}
	return rewriteModelAdd(t, dir, stem, nil, add)
}

// TestOutputScale checks the "<name>.scale" tensors of NVFP4 files (the
// second-level scale, multiplied into the product): scales by powers of two
// that cancel (attn_v by s and attn_output by 1/s, attention being linear in
// V; ffn_up by s and ffn_down by 1/s; an expert's up by s_e and down by
// 1/s_e) leave every float bit for bit as it was, which holds only if each
// is applied exactly where llama.cpp applies it; the token embedding's
// scale is not read (llama.cpp does not); one scale alone changes the
// scores.
func TestOutputScale(t *testing.T) {
	dir := oracle.Require(t)
	pow := func(e int) []float32 { return []float32{float32(math.Ldexp(1, e))} }
	cases := []struct {
		stem, kv, act string
		scale         func(name string) []float32
		same          bool
	}{
		{"tiny-llama-spm-nvfp4", "f32", "", func(name string) []float32 {
			switch {
			case strings.HasSuffix(name, ".attn_v"):
				return pow(1)
			case strings.HasSuffix(name, ".attn_output"):
				return pow(-1)
			case strings.HasSuffix(name, ".ffn_up"):
				return pow(2)
			case strings.HasSuffix(name, ".ffn_down"):
				return pow(-2)
			case name == "token_embd":
				return pow(3)
			}
			return nil
		}, true},
		{"tiny-llama-spm-nvfp4", "bf16", "int8", func(name string) []float32 {
			switch {
			case strings.HasSuffix(name, ".attn_v"):
				return pow(-3)
			case strings.HasSuffix(name, ".attn_output"):
				return pow(3)
			}
			return nil
		}, true},
		{"tiny-qwen3moe", "f32", "", func(name string) []float32 {
			n := 0
			switch {
			case strings.HasSuffix(name, ".ffn_up_exps"):
				n = 1
			case strings.HasSuffix(name, ".ffn_down_exps"):
				n = -1
			default:
				return nil
			}
			s := make([]float32, 8)
			for e := range s {
				s[e] = float32(math.Ldexp(1, n*(e%3)))
			}
			return s
		}, true},
		{"tiny-llama-spm-nvfp4", "f32", "", func(name string) []float32 {
			if name == "blk.0.ffn_down" {
				return pow(1)
			}
			return nil
		}, false},
	}
	for _, c := range cases {
		t.Run(c.stem+"/"+c.kv+"/"+c.act, func(t *testing.T) {
			if c.stem == "tiny-qwen3moe" {
				f, err := gguf.Open(oracle.Model(dir, c.stem))
				if err != nil {
					t.Fatal(err)
				}
				n, err := f.Uint("qwen3moe.expert_count")
				f.Close()
				if err != nil || n != 8 {
					t.Fatalf("tiny-qwen3moe: %d experts (%v), the case is written for 8", n, err)
				}
			}
			scaled, err := Load(withScales(t, dir, c.stem, c.scale), Options{KVDtype: c.kv, Activations: c.act})
			if err != nil {
				t.Fatal(err)
			}
			defer scaled.Close()
			plain := oracleModelAct(t, dir, c.stem, c.kv, c.act)
			toks := tinyTokens(48, plain.Vocab())
			a, err := plain.Score(toks, 1)
			if err != nil {
				t.Fatal(err)
			}
			b, err := scaled.Score(toks, 1)
			if err != nil {
				t.Fatal(err)
			}
			differ := 0
			for i := range a.Logprobs {
				if a.Logprobs[i] != b.Logprobs[i] {
					differ++
				}
			}
			switch {
			case c.same && differ > 0:
				t.Errorf("%d of %d log-probs differ from the unscaled model's", differ, len(a.Logprobs))
			case !c.same && differ == 0:
				t.Errorf("the scale changed no log-prob: it is not applied")
			}
		})
	}
}

// TestOutputScaleErrors: a scale that is zero or not finite is refused at
// load, naming the tensor.
func TestOutputScaleErrors(t *testing.T) {
	dir := oracle.Require(t)
	for _, c := range []struct {
		v    float32
		want string
	}{
		{0, "tensor blk.0.ffn_down.scale: element 0 is 0"},
		{float32(math.NaN()), "tensor blk.0.ffn_down.scale: element 0 is NaN"},
		{float32(math.Inf(-1)), "tensor blk.0.ffn_down.scale: element 0 is -Inf"},
	} {
		path := withScales(t, dir, "tiny-llama-spm-nvfp4", func(name string) []float32 {
			if name == "blk.0.ffn_down" {
				return []float32{c.v}
			}
			return nil
		})
		m, err := Load(path, Options{})
		if err == nil {
			m.Close()
			t.Errorf("scale %v: loaded", c.v)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("scale %v: %v, want %q", c.v, err, c.want)
		}
	}
}
