package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"ppl.dev/eval/corpus"
	"ppl.dev/gguf"
	"ppl.dev/score/model"
	"ppl.dev/tokenize/tokenizer"
)

// repoRoot is the repository root, two levels above eval/mkmodel/cli's
// parent.
const repoRoot = "../../.."

const demoModel = "eval/models/ppl-demo-bigram-q8_0.gguf"

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	o := filepath.Join(dir, "m.gguf")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "missing flags: --output"},
		{[]string{"-o", o, "--type", "Q9_0"}, 2, `unknown weight type "Q9_0"`},
		{[]string{"-o", o, "--arch", "bert"}, 2, "--arch must be one of"},
		{[]string{"-o", o, "--tied", "--untied"}, 2, "contradict"},
		{[]string{"-o", o, "--heads", "4", "--kv-heads", "3"}, 2, "not a multiple of 3 KV heads"},
		{[]string{"-o", o, "--params", "lots"}, 2, `bad parameter count "lots"`},
		{[]string{"-o", o, "--bigram", "x.json", "--tied"}, 2, "--bigram needs an untied output matrix"},
		{[]string{"-o", o, "--bpe-train", filepath.Join(dir, "none.txt")}, 1, "no such file"},
		{[]string{"-o", o, "--vocab-size", "100"}, 1, "below 256 byte tokens"},
	} {
		code, _, stderr := runCLI(c.args...)
		if code != c.code || !strings.Contains(stderr, c.msg) || !strings.HasPrefix(stderr, "ppl-mkmodel: ") {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.msg)
		}
	}
	if _, err := os.Stat(o); err == nil {
		t.Error("a failed run left an output file")
	}
}

func TestRandomModel(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.gguf")
	text := filepath.Join(dir, "t.txt")
	if err := os.WriteFile(text, bytes.Repeat([]byte("a small training text, a small vocabulary. "), 50), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI("-o", p, "--arch", "qwen3", "--embd", "64", "--heads", "2", "--kv-heads", "1", "--head-dim", "16",
		"--ffn", "96", "--layers", "1", "--tied", "--bpe-train", text, "--vocab-size", "300", "--type", "Q8_0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "wrote") || !strings.Contains(stderr, "qwen3") || !strings.Contains(stderr, "Q8_0") {
		t.Errorf("stderr %q", stderr)
	}
	f, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if name, _ := f.String("general.name"); name != "r" {
		t.Errorf("general.name %q, want r", name)
	}
	if _, ok := f.Tensor("output.weight"); ok {
		t.Error("tied model has output.weight")
	}
	if n, _ := f.Uint("qwen3.attention.key_length"); n != 16 {
		t.Errorf("key_length %d", n)
	}
	// --vocab-from copies the tokenizer.
	p2 := filepath.Join(dir, "r2.gguf")
	if code, _, stderr := runCLI("-o", p2, "--vocab-from", p, "--layers", "1", "--type", "F16"); code != 0 {
		t.Fatalf("--vocab-from: exit %d: %s", code, stderr)
	}
	g, err := gguf.Open(p2)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	a, _ := f.Strings("tokenizer.ggml.merges")
	b, _ := g.Strings("tokenizer.ggml.merges")
	if len(a) == 0 || strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("merges not copied: %d vs %d", len(a), len(b))
	}
}

// demoFlags reads DEMO_MODEL_FLAGS from eval/eval.mk, the one place the
// demo model's recipe is written down.
func demoFlags(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "eval", "eval.mk"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "DEMO_MODEL_FLAGS :="); ok {
			return strings.Fields(rest)
		}
	}
	t.Fatal("eval/eval.mk has no DEMO_MODEL_FLAGS line")
	return nil
}

// TestDemoModelReproducible regenerates the committed demo model with the
// flags of `make demo-model` and checks that it is byte-identical.
func TestDemoModelReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("regenerating the demo model takes about 20 s of CPU")
	}
	if runtime.GOARCH != "amd64" {
		// Go may fuse multiply-adds into FMA instructions on other
		// architectures, which changes the last bits of the factorization.
		t.Skipf("the committed model was made on amd64; %s may round differently", runtime.GOARCH)
	}
	want, err := fileSHA256(filepath.Join(repoRoot, demoModel))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "demo.gguf")
	args := append(demoFlags(t), "-o", out)
	t.Chdir(repoRoot)
	if code, _, stderr := runCLI(args...); code != 0 {
		t.Fatalf("ppl-mkmodel %s: exit %d: %s", strings.Join(args, " "), code, stderr)
	}
	got, err := fileSHA256(out)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("regenerated demo model has sha256 %s, %s has %s: run `make demo-model` and commit it, or find what changed", got, demoModel, want)
	}
}

// TestDemoPerplexity scores the demo model on the held-out English prose
// and on the same text with its bytes shuffled, with ppl-score's model and
// ppl-tokenize's tokenizer, in sliding windows of 512 tokens with stride
// 256 as `make demo` does. The model encodes the corpus's bigram
// statistics, so in-domain text must score at least 10 times better.
func TestDemoPerplexity(t *testing.T) {
	if testing.Short() {
		t.Skip("scoring 25,000 tokens takes a few seconds")
	}
	path := filepath.Join(repoRoot, demoModel)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tk, err := tokenizer.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(path, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	man, err := corpus.Load(filepath.Join(repoRoot, "eval/corpora/ppl-heldout-v1/manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var in, shuf [2]float64 // NLL sum, targets
	rng := rand.New(rand.NewPCG(1, 1))
	for _, s := range man.Streams {
		if s.Domain != "en" {
			continue
		}
		text, err := man.Read(&s)
		if err != nil {
			t.Fatal(err)
		}
		shuffled := append([]byte(nil), text...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		shuffled, _ = tokenizer.Sanitize(shuffled)
		for _, c := range []struct {
			text []byte
			acc  *[2]float64
		}{{text, &in}, {shuffled, &shuf}} {
			toks, err := tk.Encode(c.text)
			if err != nil {
				t.Fatal(err)
			}
			nll, n := sliding(t, m, toks, 512, 256)
			c.acc[0] += nll
			c.acc[1] += float64(n)
		}
	}
	pin, pshuf := math.Exp(in[0]/in[1]), math.Exp(shuf[0]/shuf[1])
	t.Logf("held-out English: PPL %.2f over %.0f targets; shuffled bytes: PPL %.1f over %.0f targets", pin, in[1], pshuf, shuf[1])
	if pshuf < 10*pin {
		t.Errorf("shuffled PPL %.1f is less than 10 times the in-domain PPL %.2f", pshuf, pin)
	}
	if pin > 40 {
		t.Errorf("in-domain PPL %.2f: the bigram model should do far better than that", pin)
	}
}

// sliding scores toks in sliding windows (the first [0,ctx) from 1, then
// stride new targets after ctx-stride tokens of history) and returns the
// NLL sum and the number of targets.
func sliding(t *testing.T, m *model.Model, toks []int32, ctx, stride int) (float64, int) {
	var nll float64
	n := 0
	for s := 0; s < len(toks); {
		begin, from, end := 0, 1, min(ctx, len(toks))
		if s > 0 {
			begin, from, end = s-(ctx-stride), s, min(s+stride, len(toks))
		}
		r, err := m.Score(toks[begin:end], from-begin)
		if err != nil {
			t.Fatal(err)
		}
		for _, lp := range r.Logprobs {
			nll -= lp
			n++
		}
		s = end
	}
	return nll, n
}

func fileSHA256(path string) (string, error) {
	b, err := os.ReadFile(path)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), err
}

// TestDefaultShapesRunInLlamaCPP: the default shapes that llama.cpp 0.7.0
// could not run (each probed: it crashed, or refused the file) now have
// what it needs: the Gated DeltaNet hybrids an attention layer, llama4 its
// fourth layer, granite_swa its sliding window, granitehybrid Mamba-2's
// inner width twice the model's (also at another --embd), deci a last
// layer that is not attention alone.
func TestDefaultShapesRunInLlamaCPP(t *testing.T) {
	dir := t.TempDir()
	shape := func(args ...string) *gguf.File {
		p := filepath.Join(dir, "m.gguf")
		if code, _, stderr := runCLI(append([]string{"-o", p, "--type", "F16"}, args...)...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		f, err := gguf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	u := func(f *gguf.File, key string) uint64 {
		v, err := f.Uint(key)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, a := range []string{"qwen35", "qwen35moe", "qwen4exp"} {
		f := shape("--arch", a)
		if n, every := u(f, a+".block_count"), u(f, a+".full_attention_interval"); n < every {
			t.Errorf("%s: %d layers, attention every %d: none", a, n, every)
		}
	}
	if n := u(shape("--arch", "llama4"), "llama4.block_count"); n < 4 {
		t.Errorf("llama4: %d layers", n)
	}
	if w := u(shape("--arch", "granite_swa"), "granite_swa.attention.sliding_window"); w != 40 {
		t.Errorf("granite_swa: window %d", w)
	}
	if n := u(shape("--arch", "deci"), "deci.block_count"); n != 5 {
		t.Errorf("deci: %d layers, want ALFNA's 5", n)
	}
	for _, embd := range []string{"128", "256"} {
		f := shape("--arch", "granitehybrid", "--embd", embd)
		if inner, e := u(f, "granitehybrid.ssm.inner_size"), u(f, "granitehybrid.embedding_length"); inner != 2*e {
			t.Errorf("granitehybrid at %d wide: inner size %d", e, inner)
		}
	}
}
