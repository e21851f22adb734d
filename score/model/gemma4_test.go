package model

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/oracle"
	"ppl.dev/score/kvcache"
	"ppl.dev/score/ml"
	"ppl.dev/score/nn"
)

// rewriteOracle copies an oracle model to a temporary file with edits:
// meta maps a key to its new value (nil drops it; new keys are added),
// tensors maps each tensor to its replacements (none drops it; data
// gives a new tensor's bytes).
func rewriteOracle(t *testing.T, dir, stem string, meta map[string]any, tensors func(f *gguf.File, tt *gguf.Tensor) []*gguf.Tensor, data func(f *gguf.File, tt *gguf.Tensor) []byte) string {
	t.Helper()
	f, err := gguf.Open(oracle.Model(dir, stem))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, kv := range f.Metadata {
		if v, ok := meta[kv.Key]; ok {
			if v != nil {
				w.Add(kv.Key, v)
			}
			continue
		}
		w.Add(kv.Key, kv.Value)
	}
	for k, v := range meta {
		if _, ok := f.Lookup(k); !ok && v != nil {
			w.Add(k, v)
		}
	}
	for _, tt := range f.Tensors {
		outs := []*gguf.Tensor{tt}
		if tensors != nil {
			outs = tensors(f, tt)
		}
		for _, o := range outs {
			var d []byte
			if o == tt {
				d = f.Data(tt)
			} else {
				d = data(f, o)
			}
			if err := w.AddTensor(o.Name, o.Type, o.Shape, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	path := filepath.Join(t.TempDir(), stem+".gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// firstWindow returns the tokens and score start of the first window of
// the model's first exact-archs file.
func firstWindow(t *testing.T, dir, stem string) ([]int32, int) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "exact-archs", stem+"__*.exact.ndjson"))
	if len(paths) == 0 {
		t.Fatalf("no exact-archs files for %s", stem)
	}
	f, err := oracle.Read(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	w := f.Windows[0]
	return f.Header.Tokens[w.Begin:w.End], w.ScoreFrom - w.Begin
}

func scoreOf(t *testing.T, path string, tokens []int32, from int) []float64 {
	t.Helper()
	m, err := Load(path, Options{KVDtype: "f32"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r, err := m.Score(tokens, from)
	if err != nil {
		t.Fatal(err)
	}
	return r.Logprobs
}

// TestFusedGateUp fuses the expert gate and up stacks of tiny-gemma4 and
// tiny-qwen3moe (the MoE module's binding) into
// one ffn_gate_up_exps (per expert: gate rows, then up rows) and checks
// that the model scores the same, to the bit.
func TestFusedGateUp(t *testing.T) {
	for _, stem := range []string{"tiny-gemma4", "tiny-qwen3moe"} { // the MoE module's binding too
		t.Run(stem, func(t *testing.T) { testFusedGateUp(t, stem) })
	}
}

func testFusedGateUp(t *testing.T, stem string) {
	dir := oracle.Require(t)
	tokens, from := firstWindow(t, dir, stem)
	want := scoreOf(t, oracle.Model(dir, stem), tokens, from)
	fused := 0
	path := rewriteOracle(t, dir, stem, nil, func(f *gguf.File, tt *gguf.Tensor) []*gguf.Tensor {
		switch {
		case strings.HasSuffix(tt.Name, "ffn_up_exps.weight"):
			return nil
		case strings.HasSuffix(tt.Name, "ffn_gate_exps.weight"):
			fused++
			s := tt.Shape
			return []*gguf.Tensor{{Name: strings.Replace(tt.Name, "ffn_gate_exps", "ffn_gate_up_exps", 1), Type: tt.Type, Shape: []uint64{s[0], 2 * s[1], s[2]}}}
		}
		return []*gguf.Tensor{tt}
	}, func(f *gguf.File, tt *gguf.Tensor) []byte {
		gt, _ := f.Tensor(strings.Replace(tt.Name, "ffn_gate_up_exps", "ffn_gate_exps", 1))
		ut, _ := f.Tensor(strings.Replace(tt.Name, "ffn_gate_up_exps", "ffn_up_exps", 1))
		g, u := f.Data(gt), f.Data(ut)
		n := int(gt.Shape[2])
		per := len(g) / n
		var out []byte
		for e := range n {
			out = append(out, g[e*per:(e+1)*per]...)
			out = append(out, u[e*per:(e+1)*per]...)
		}
		return out
	})
	if fused == 0 {
		t.Fatal("no expert stacks to fuse")
	}
	got := scoreOf(t, path, tokens, from)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("target %d: fused %v, separate %v", i, got[i], want[i])
		}
	}
}

// TestGemma4LoadErrors checks that bad gemma4 metadata is refused with an
// error naming the key or tensor.
func TestGemma4LoadErrors(t *testing.T) {
	dir := oracle.Require(t)
	const a = "gemma4."
	drop := func(name string) func(f *gguf.File, tt *gguf.Tensor) []*gguf.Tensor {
		return func(f *gguf.File, tt *gguf.Tensor) []*gguf.Tensor {
			if tt.Name == name {
				return nil
			}
			return []*gguf.Tensor{tt}
		}
	}
	cases := []struct {
		name    string
		meta    map[string]any
		tensors func(f *gguf.File, tt *gguf.Tensor) []*gguf.Tensor
		want    string
	}{
		{"no pattern", map[string]any{a + "attention.sliding_window_pattern": nil}, nil, "missing metadata gemma4.attention.sliding_window_pattern"},
		{"short pattern", map[string]any{a + "attention.sliding_window_pattern": []bool{true, false}}, nil, "sliding_window_pattern: want an array of 6 bools"},
		{"no window", map[string]any{a + "attention.sliding_window": nil}, nil, "missing metadata gemma4.attention.sliding_window"},
		{"no key length", map[string]any{a + "attention.key_length": nil, a + "attention.value_length": nil}, nil, "missing metadata gemma4.attention.key_length"},
		{"value size", map[string]any{a + "attention.value_length_swa": uint32(16)}, nil, "value_length_swa = 16 differs"},
		{"kv heads", map[string]any{a + "attention.head_count_kv": []int32{2, 2, 1}}, nil, "head_count_kv has 3 values for 6 layers"},
		{"shared", map[string]any{a + "attention.shared_kv_layers": uint32(5)}, nil, "shared_kv_layers = 5"},
		{"shared shape", map[string]any{a + "attention.shared_kv_layers": uint32(4)}, nil, "layer 2 (KV-shared) reads the K/V of layer 1"},
		{"rot swa", map[string]any{a + "rope.dimension_count_swa": uint32(48)}, nil, "rope.dimension_count_swa"},
		{"no rope_freqs", nil, drop("rope_freqs.weight"), "missing tensor rope_freqs.weight"},
		{"no k norm", nil, drop("blk.0.attn_k_norm.weight"), "missing tensor blk.0.attn_k_norm.weight"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := rewriteOracle(t, dir, "tiny-gemma4", c.meta, c.tensors, nil)
			m, err := Load(path, Options{KVDtype: "f32"})
			if err == nil {
				m.Close()
				t.Fatalf("loaded; want an error containing %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q; want it to contain %q", err, c.want)
			}
		})
	}
}

// TestCPUGemma4Ops checks the CPU's ml.Gemma4 operations against their
// plain definitions: GLU against the nn activations, and AttentionShared,
// after an Attention call that stored k and v in an int8 cache, against
// plain float64 attention over what the cache gives back (with a window
// and GQA), with extreme values in the inputs. GLU is bitwise; attention
// within float32 rounding (1e-5 relative: the flash path sums in float32).
func TestCPUGemma4Ops(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	fill := func(x ml.Tensor, scale float64) []float32 {
		d := x.(*cpuT).d
		for i := range d {
			d[i] = float32(rng.NormFloat64() * scale)
		}
		d[0], d[len(d)-1] = 30, -30 // saturating GELU and SiLU inputs
		return d
	}
	for _, threads := range []int{1, 3} {
		c := nn.NewContext(threads)
		format, err := kvcache.Lookup("int8")
		if err != nil {
			t.Fatal(err)
		}
		c.KV = &kvStore{format: format}
		b := newCPU(c)

		for _, act := range []ml.Act{ml.SwiGLU, ml.GeGLU, ml.OAISwiGLU} {
			const n, w = 37, 24
			g, u, dst := b.Alloc(n, w), b.Alloc(n, w), b.Alloc(n, w)
			gd, ud := fill(g, 3), fill(u, 1)
			want := make([]float32, n*w)
			map[ml.Act]func(out, g, u []float32){ml.SwiGLU: nn.SwiGLU, ml.GeGLU: nn.GeGLU, ml.OAISwiGLU: nn.OAISwiGLU}[act](want, gd, ud)
			b.GLU(dst, g, u, act)
			for i, v := range dst.(*cpuT).d {
				if math.Float32bits(v) != math.Float32bits(want[i]) {
					t.Fatalf("threads %d: GLU %v element %d: %v, want %v", threads, act, i, v, want[i])
				}
			}
			b.GLU(g, g, u, act) // in place
			for i, v := range gd {
				if math.Float32bits(v) != math.Float32bits(want[i]) {
					t.Fatalf("threads %d: GLU %v in place, element %d: %v, want %v", threads, act, i, v, want[i])
				}
			}
		}

		for _, window := range []int{0, 5} {
			const n, heads, kvHeads, hd = 29, 4, 2, 16
			a := &ml.Attn{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 1, Window: window}
			q1, q2 := b.Alloc(n, heads*hd), b.Alloc(n, heads*hd)
			k, v := b.Alloc(n, kvHeads*hd), b.Alloc(n, kvHeads*hd)
			fill(q1, 1)
			q2d := fill(q2, 1)
			fill(k, 1)
			fill(v, 1)
			o1, o2 := b.Alloc(n, heads*hd), b.Alloc(n, heads*hd)
			b.Attention(o1, q1, k, v, 1, a) // stores k, v (rounded to int8 in place)
			b.AttentionShared(o2, q2, k, v, 1, a)
			def := nn.Attention{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 1, Window: window}
			exact := def.Exact(q2d, k.(*cpuT).d, v.(*cpuT).d, n)
			want := make([]float32, len(exact))
			for i, x := range exact {
				want[i] = float32(x)
			}
			for i, got := range o2.(*cpuT).d {
				if d := math.Abs(float64(got - want[i])); d > 1e-5*(1+math.Abs(float64(want[i]))) {
					t.Fatalf("threads %d, window %d: AttentionShared element %d: %v, plain %v", threads, window, i, got, want[i])
				}
			}
		}
		b.Close()
	}
}
