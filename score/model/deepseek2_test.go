package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/oracle"
)

// TestDeepSeek2KVB checks the older MLA layout (attn_kv_b, no
// attention.key_length_mla): the oracle's tiny-deepseek2 rewritten that way
// (attn_k_b and attn_v_b folded back into attn_kv_b as HF's kv_b_proj
// stores it, key_length and value_length the per-head sizes of that form)
// scores exactly as the absorbed file, and so within the exact-archs
// bounds of the float64 reference.
func TestDeepSeek2KVB(t *testing.T) {
	dir := oracle.Require(t)
	src, err := gguf.Open(oracle.Model(dir, "tiny-deepseek2"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	meta := func(key string) int {
		v, err := src.Int("deepseek2." + key)
		if err != nil {
			t.Fatal(err)
		}
		return int(v)
	}
	H, kvr, dk, vh, rot := meta("attention.head_count"), meta("attention.kv_lora_rank"),
		meta("attention.key_length_mla"), meta("attention.value_length_mla"), meta("rope.dimension_count")
	nope := dk - rot

	w := gguf.NewWriter()
	for _, kv := range src.Metadata {
		switch kv.Key {
		case "deepseek2.attention.key_length_mla", "deepseek2.attention.value_length_mla":
		case "deepseek2.attention.key_length":
			w.Add(kv.Key, uint32(dk))
		case "deepseek2.attention.value_length":
			w.Add(kv.Key, uint32(vh))
		default:
			w.Add(kv.Key, kv.Value)
		}
	}
	f32 := func(tn *gguf.Tensor) []float32 {
		if tn.Type != gguf.TypeF32 {
			t.Fatalf("%s is %v", tn.Name, tn.Type)
		}
		return f32Floats(src.Data(tn))
	}
	kvbs := 0
	for _, tn := range src.Tensors {
		switch {
		case strings.HasSuffix(tn.Name, ".attn_v_b.weight"):
		case strings.HasSuffix(tn.Name, ".attn_k_b.weight"):
			p := strings.TrimSuffix(tn.Name, "attn_k_b.weight")
			vt, _ := src.Tensor(p + "attn_v_b.weight")
			kb, vb := f32(tn), f32(vt)             // kb[h][r][e] (kvr rows of nope), vb[h][e][r]
			kv := make([]float32, H*(nope+vh)*kvr) // per head nope rows, then vh rows, of kvr
			for h := range H {
				for r := range kvr {
					for e := range nope {
						kv[(h*(nope+vh)+e)*kvr+r] = kb[(h*kvr+r)*nope+e]
					}
				}
				copy(kv[(h*(nope+vh)+nope)*kvr:(h+1)*(nope+vh)*kvr], vb[h*vh*kvr:(h+1)*vh*kvr])
			}
			if err := w.AddTensor(p+"attn_kv_b.weight", gguf.TypeF32, []uint64{uint64(kvr), uint64(H * (nope + vh))}, f32Bytes(kv)); err != nil {
				t.Fatal(err)
			}
			kvbs++
		default:
			if err := w.AddTensor(tn.Name, tn.Type, tn.Shape, src.Data(tn)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if kvbs == 0 {
		t.Fatal("no attn_k_b tensors in the oracle model")
	}
	path := filepath.Join(t.TempDir(), "deepseek2-kvb.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	old, err := Load(path, Options{KVDtype: "f32"})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	abs := oracleModel(t, dir, "tiny-deepseek2", "f32")

	paths, _ := filepath.Glob(filepath.Join(dir, "exact-archs", "tiny-deepseek2__*.exact.ndjson"))
	if len(paths) == 0 {
		t.Fatal("no exact-archs files for tiny-deepseek2")
	}
	f, err := oracle.Read(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	d := scoreFile(t, old, f, 2)
	t.Logf("attn_kv_b layout: %v", &d)
	if d.max > 1e-4 || d.mean() > 2e-5 {
		t.Errorf("%v: want max <= 1e-4, mean <= 2e-5", &d)
	}
	for wi, win := range f.Windows[:2] {
		a, err := abs.Score(f.Header.Tokens[win.Begin:win.End], win.ScoreFrom-win.Begin)
		if err != nil {
			t.Fatal(err)
		}
		o, err := old.Score(f.Header.Tokens[win.Begin:win.End], win.ScoreFrom-win.Begin)
		if err != nil {
			t.Fatal(err)
		}
		for i := range a.Logprobs {
			if a.Logprobs[i] != o.Logprobs[i] {
				t.Fatalf("window %d target %d: %v, absorbed layout %v", wi, i, o.Logprobs[i], a.Logprobs[i])
			}
		}
	}
}

// TestDeepSeek2NoQLoRA checks the layout without q compression
// (attention.q_lora_rank absent, attn_q instead of attn_q_a, attn_q_a_norm,
// attn_q_b; DeepSeek-V2-Lite): the oracle model rewritten with a random
// attn_q loads and scores finite log-probabilities, which differ from the
// compressed model's (so attn_q is what it reads).
func TestDeepSeek2NoQLoRA(t *testing.T) {
	dir := oracle.Require(t)
	const embd, qd, layers = 64, 4 * 24, 3
	rng := rand.New(rand.NewPCG(11, 12))
	add := map[string]f32Tensor{}
	var drop []string
	for i := range layers {
		p := fmt.Sprintf("blk.%d.", i)
		v := make([]float32, embd*qd)
		for j := range v {
			v[j] = float32(rng.NormFloat64() / 8)
		}
		add[p+"attn_q.weight"] = f32Tensor{[]uint64{embd, qd}, v}
		drop = append(drop, p+"attn_q_a.weight", p+"attn_q_a_norm.weight", p+"attn_q_b.weight")
	}
	m, err := Load(rewriteModelAdd(t, dir, "tiny-deepseek2", map[string]any{"deepseek2.attention.q_lora_rank": nil}, add, drop...), Options{KVDtype: "f32"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	toks := tinyTokens(40, m.Vocab())
	r, err := m.Score(toks, 1)
	if err != nil {
		t.Fatal(err)
	}
	a, err := oracleModel(t, dir, "tiny-deepseek2", "f32").Score(toks, 1)
	if err != nil {
		t.Fatal(err)
	}
	same := 0
	for i, lp := range r.Logprobs {
		if math.IsNaN(lp) || math.IsInf(lp, 0) || lp > 0 {
			t.Fatalf("target %d: log-prob %v", i, lp)
		}
		if lp == a.Logprobs[i] {
			same++
		}
	}
	if same == len(r.Logprobs) {
		t.Fatal("scores equal the compressed model's")
	}
}
