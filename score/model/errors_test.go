package model

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ppl.dev/gguf"
)

// tinySpec describes a small random llama-family model written by
// writeTiny: F32 weights unless a tensor's type is overridden.
type tinySpec struct {
	arch           string
	embd, ffn      int
	heads, kvHeads int
	headDim        int
	layers, vocab  int
	skip           map[string]bool      // tensors to leave out
	types          map[string]gguf.Type // tensors to store as another type (zero data)
	edit           func(name string, v []float32)
	meta           map[string]any
}

func defaultTiny() tinySpec {
	return tinySpec{arch: "llama", embd: 32, ffn: 64, heads: 4, kvHeads: 2, headDim: 8, layers: 2, vocab: 50}
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// f32Floats is f32Bytes' inverse: little-endian float32 values.
func f32Floats(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// writeTiny writes the model to a temporary file and returns its path.
func writeTiny(t *testing.T, s tinySpec) string {
	t.Helper()
	w := gguf.NewWriter()
	a := s.arch
	w.Add("general.architecture", a)
	w.Add("general.name", "tiny-test")
	w.Add(a+".embedding_length", uint32(s.embd))
	w.Add(a+".block_count", uint32(s.layers))
	w.Add(a+".feed_forward_length", uint32(s.ffn))
	w.Add(a+".attention.head_count", uint32(s.heads))
	w.Add(a+".attention.head_count_kv", uint32(s.kvHeads))
	w.Add(a+".attention.key_length", uint32(s.headDim))
	w.Add(a+".attention.value_length", uint32(s.headDim))
	w.Add(a+".attention.layer_norm_rms_epsilon", float32(1e-6))
	w.Add(a+".rope.freq_base", float32(10000))
	w.Add(a+".context_length", uint32(512))
	for k, v := range s.meta {
		w.Add(k, v)
	}
	r := rand.New(rand.NewPCG(42, 42))
	add := func(name string, shape ...int) {
		if s.skip[name] {
			return
		}
		n := 1
		for _, d := range shape {
			n *= d
		}
		ushape := make([]uint64, len(shape))
		for i, d := range shape {
			ushape[i] = uint64(d)
		}
		if typ, ok := s.types[name]; ok {
			rs, err := typ.RowSize(uint64(shape[0]))
			if err != nil {
				t.Fatal(err)
			}
			if err := w.AddTensor(name, typ, ushape, make([]byte, int(rs)*n/shape[0])); err != nil {
				t.Fatal(err)
			}
			return
		}
		v := make([]float32, n)
		for i := range v {
			if len(shape) == 1 && !strings.HasSuffix(name, ".bias") {
				v[i] = 1 + 0.1*float32(r.NormFloat64()) // norm weights
			} else {
				v[i] = float32(r.NormFloat64()) / float32(math.Sqrt(float64(shape[0])))
			}
		}
		if s.edit != nil {
			s.edit(name, v)
		}
		if err := w.AddTensor(name, gguf.TypeF32, ushape, f32Bytes(v)); err != nil {
			t.Fatal(err)
		}
	}
	qd, kvd := s.heads*s.headDim, s.kvHeads*s.headDim
	add("token_embd.weight", s.embd, s.vocab)
	add("output_norm.weight", s.embd)
	add("output.weight", s.embd, s.vocab)
	for i := range s.layers {
		p := fmt.Sprintf("blk.%d.", i)
		add(p+"attn_norm.weight", s.embd)
		add(p+"attn_q.weight", s.embd, qd)
		add(p+"attn_k.weight", s.embd, kvd)
		add(p+"attn_v.weight", s.embd, kvd)
		if a == "qwen2" {
			add(p+"attn_q.bias", qd)
			add(p+"attn_k.bias", kvd)
			add(p+"attn_v.bias", kvd)
		}
		if a == "qwen3" {
			add(p+"attn_q_norm.weight", s.headDim)
			add(p+"attn_k_norm.weight", s.headDim)
		}
		add(p+"attn_output.weight", qd, s.embd)
		add(p+"ffn_norm.weight", s.embd)
		add(p+"ffn_gate.weight", s.embd, s.ffn)
		add(p+"ffn_up.weight", s.embd, s.ffn)
		add(p+"ffn_down.weight", s.ffn, s.embd)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func loadTiny(t *testing.T, s tinySpec, o Options) (*Model, error) {
	t.Helper()
	m, err := Load(writeTiny(t, s), o)
	if err == nil {
		t.Cleanup(func() { m.Close() })
	}
	return m, err
}

func tinyTokens(n, vocab int) []int32 {
	toks := make([]int32, n)
	for i := range toks {
		toks[i] = int32((i*7 + 3) % vocab)
	}
	return toks
}

func TestLoadErrors(t *testing.T) {
	mod := func(f func(*tinySpec)) tinySpec {
		s := defaultTiny()
		f(&s)
		return s
	}
	for _, tc := range []struct {
		name string
		spec tinySpec
		opts Options
		want string // regexp-free substring of the error
	}{
		{"unsupported arch", mod(func(s *tinySpec) { s.arch = "bert" }), Options{},
			`architecture "bert" not supported (supported: ` + strings.Join(Architectures(), ", ") + ")"},
		{"missing tensor", mod(func(s *tinySpec) { s.skip = map[string]bool{"blk.1.ffn_up.weight": true} }), Options{},
			"missing tensor blk.1.ffn_up.weight"},
		{"missing output and embedding", mod(func(s *tinySpec) {
			s.skip = map[string]bool{"output.weight": true, "token_embd.weight": true}
		}), Options{}, "missing tensor token_embd.weight"},
		{"unsupported type", mod(func(s *tinySpec) { s.types = map[string]gguf.Type{"blk.0.attn_k.weight": gguf.TypeQ8_1} }), Options{},
			"tensor blk.0.attn_k.weight: weight type Q8_1 not supported (supported: F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ4_NL, IQ3_S, IQ2_S, IQ4_XS, IQ1_M, BF16, TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0)"},
		{"qwen2 without bias", mod(func(s *tinySpec) {
			s.arch = "qwen2"
			s.skip = map[string]bool{"blk.0.attn_k.bias": true}
		}), Options{}, "missing tensor blk.0.attn_k.bias"},
		{"qwen3 without q norm", mod(func(s *tinySpec) {
			s.arch = "qwen3"
			s.skip = map[string]bool{"blk.1.attn_q_norm.weight": true}
		}), Options{}, "missing tensor blk.1.attn_q_norm.weight"},
		{"bad KV dtype", defaultTiny(), Options{KVDtype: "q3"}, `unknown KV cache dtype "q3"`},
		{"bad rope scaling", defaultTiny(), Options{RopeScaling: "ntk"}, `rope scaling type "ntk" not supported (supported: none, linear, yarn)`},
		{"heads not grouping", mod(func(s *tinySpec) { s.kvHeads = 3 }), Options{}, "bad attention shape: 4 heads, 3 KV heads"},
		// Counts are checked against the tensors before anything is sized by
		// them (this file used to take 4.8 GB and 43 s to fail).
		{"block count beyond the tensors", mod(func(s *tinySpec) { s.meta = map[string]any{"llama.block_count": uint32(1<<31 - 1)} }), Options{},
			"metadata llama.block_count = 2147483647, but the file has tensors for 2 blocks (blk.0 to blk.1)"},
		{"infinite epsilon", mod(func(s *tinySpec) {
			s.meta = map[string]any{"llama.attention.layer_norm_rms_epsilon": float32(math.Inf(1))}
		}), Options{}, "metadata llama.attention.layer_norm_rms_epsilon = +Inf: not a finite number"},
		{"NaN rope base", mod(func(s *tinySpec) { s.meta = map[string]any{"llama.rope.freq_base": float32(math.NaN())} }), Options{},
			"metadata llama.rope.freq_base = NaN: not a finite number"},
		{"NaN YaRN factor", mod(func(s *tinySpec) {
			s.meta = map[string]any{"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": float32(4), "llama.rope.scaling.attn_factor": float32(math.NaN())}
		}), Options{}, "metadata llama.rope.scaling.attn_factor = NaN: not a finite number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadTiny(t, tc.spec, tc.opts)
			if err == nil {
				t.Fatalf("loaded; want error %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "model: ") {
				t.Fatalf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestWrongShape(t *testing.T) {
	// The metadata claims heads of 16, the tensors are made for heads of 8.
	s := defaultTiny()
	s.meta = map[string]any{"llama.attention.key_length": uint32(16), "llama.attention.value_length": uint32(16)}
	_, err := loadTiny(t, s, Options{})
	if err == nil || !strings.Contains(err.Error(), "tensor blk.0.attn_q.weight has shape [32 32], want [32 64]") {
		t.Fatalf("error %v", err)
	}
}

func TestTruncated(t *testing.T) {
	path := writeTiny(t, defaultTiny())
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, keep := range []int{len(data) - 1, len(data) / 2, 100, 3} {
		p := filepath.Join(t.TempDir(), "cut.gguf")
		if err := os.WriteFile(p, data[:keep], 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := Load(p, Options{})
		if err == nil {
			m.Close()
			t.Fatalf("model cut to %d of %d bytes loaded", keep, len(data))
		}
		t.Logf("cut to %d: %v", keep, err)
		if !strings.HasPrefix(err.Error(), "model: ") || !strings.Contains(err.Error(), "cut.gguf") {
			t.Errorf("cut to %d: error %q does not name the file", keep, err)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "absent.gguf"), Options{}); err == nil {
		t.Fatal("absent file loaded")
	}
}

func TestScoreErrors(t *testing.T) {
	m, err := loadTiny(t, defaultTiny(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	toks := tinyTokens(10, 50)
	for _, tc := range []struct {
		toks []int32
		from int
		want string
	}{
		{append(slices.Clone(toks[:5]), 50), 1, "model: token 50 at position 5 is outside the vocabulary [0, 50)"},
		{append(slices.Clone(toks[:3]), -1), 1, "model: token -1 at position 3 is outside the vocabulary [0, 50)"},
		{toks, 0, "model: score from 0 with 10 tokens (want 1 <= from <= tokens)"},
		{toks, 11, "model: score from 11 with 10 tokens"},
		{nil, 1, "model: score from 1 with 0 tokens"},
	} {
		_, err := m.Score(tc.toks, tc.from)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Score(%v, %d): error %v, want %q", tc.toks, tc.from, err, tc.want)
		}
	}
	if r, err := m.Score(toks, 10); err != nil || len(r.Logprobs) != 0 {
		t.Errorf("scoring nothing: %v, %v", r, err)
	}
}

func TestNaNLogits(t *testing.T) {
	s := defaultTiny()
	s.edit = func(name string, v []float32) {
		if name == "output.weight" {
			v[7*s.embd] = float32(math.Inf(1)) // row of token 7
		}
	}
	m, err := loadTiny(t, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Score(tinyTokens(8, 50), 3)
	if err == nil || !strings.Contains(err.Error(), "model: logits for target 3 contain") || !strings.Contains(err.Error(), "(token 7): tensor output.weight row 7 holds +Inf") {
		t.Fatalf("error %v", err)
	}
}

// TestThreadsDeterministic: results are bit-identical for any thread count.
func TestThreadsDeterministic(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		s := defaultTiny()
		s.arch = arch
		path := writeTiny(t, s)
		toks := tinyTokens(100, 50)
		var first *Result
		for _, threads := range []int{1, 2, 7} {
			m, err := Load(path, Options{Threads: threads})
			if err != nil {
				t.Fatal(err)
			}
			r, err := m.Score(toks, 1)
			m.Close()
			if err != nil {
				t.Fatal(err)
			}
			if first == nil {
				first = r
			} else if !slices.Equal(r.Logprobs, first.Logprobs) || !slices.Equal(r.Argmax, first.Argmax) {
				t.Fatalf("%s: threads=%d differs from threads=1", arch, threads)
			}
		}
		// Scoring from a later target gives the same numbers for those targets.
		m, _ := Load(path, Options{Threads: 2})
		r, err := m.Score(toks, 70)
		m.Close()
		if err != nil || !slices.Equal(r.Logprobs, first.Logprobs[69:]) {
			t.Fatalf("%s: scoring from 70 differs (%v)", arch, err)
		}
	}
}

func TestScoreWithSelf(t *testing.T) {
	path := writeTiny(t, defaultTiny())
	a, err := Load(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Load(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	toks := tinyTokens(150, 50) // more than one row block
	r, err := a.ScoreWith(toks, 1, b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range r.KLD {
		if math.Abs(r.KLD[i]) > 1e-12 || !r.Top1Agree[i] || r.RefLogprobs[i] != r.Logprobs[i] {
			t.Fatalf("target %d: KLD %g, agree %v, logprobs %v vs %v", i+1, r.KLD[i], r.Top1Agree[i], r.Logprobs[i], r.RefLogprobs[i])
		}
	}
	if _, err := a.ScoreWith(toks, 1, a); err == nil {
		t.Error("ScoreWith accepted the model as its own reference")
	}
	s := defaultTiny()
	s.vocab = 60
	c, err := loadTiny(t, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.ScoreWith(toks, 1, c); err == nil || !strings.Contains(err.Error(), "reference vocabulary has 60 tokens, model 50") {
		t.Errorf("vocabulary mismatch: %v", err)
	}
}

func TestInfo(t *testing.T) {
	s := defaultTiny()
	s.skip = map[string]bool{"output.weight": true} // tied
	s.types = map[string]gguf.Type{"blk.1.ffn_down.weight": gguf.TypeQ8_0}
	m, err := loadTiny(t, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	info := m.Info()
	if info.WeightTypes["output"] != "F32" || info.WeightTypes["ffn_down"] != "F32,Q8_0" || !slices.Equal(info.Shared, []string{"output=token_embd"}) {
		t.Errorf("weight types %v, shared %v", info.WeightTypes, info.Shared)
	}
	if info.Arch != "llama" || info.HParams.Vocab != 50 || info.HParams.HeadDim != 8 || info.KVDtype != "bf16" || info.Rope.Layout != "normal" {
		t.Errorf("info %+v", info)
	}
}

func TestRopeOptions(t *testing.T) {
	m, err := loadTiny(t, defaultTiny(), Options{RopeScaling: "yarn", RopeScaleFactor: 4, RopeOrigCtx: 128, KVDtype: "int8"})
	if err != nil {
		t.Fatal(err)
	}
	want := RopeInfo{Layout: "normal", Dims: 8, FreqBase: 10000, Scaling: "yarn", Factor: 4, OrigCtx: 128,
		ExtFactor: 1, AttnFactor: 1, BetaFast: 32, BetaSlow: 1}
	if got := m.Info().Rope; got != want {
		t.Errorf("rope info %+v, want %+v", got, want)
	}
	if m.Info().KVDtype != "int8" {
		t.Errorf("kv dtype %q", m.Info().KVDtype)
	}
	if _, err := m.Score(tinyTokens(40, 50), 1); err != nil {
		t.Fatal(err)
	}
	s := defaultTiny()
	s.meta = map[string]any{"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": float32(2)}
	m2, err := loadTiny(t, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := m2.Info().Rope; r.Scaling != "linear" || r.Factor != 2 {
		t.Errorf("linear from metadata: %+v", r)
	}
	m3, _ := loadTiny(t, defaultTiny(), Options{})
	if r := m3.Info().Rope; r.Scaling != "none" || r.Factor != 1 {
		t.Errorf("no scaling: %+v", r)
	}
}
