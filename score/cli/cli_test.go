package cli

import (
	"bytes"
	"context"
	"io"
	"math"
	"strings"
	"testing"

	"ppl.dev/gguf"
	"ppl.dev/oracle"
	"ppl.dev/pipe"
	"ppl.dev/tokenize/tokenizer"
)

// pipeline builds ppl-window output for the golden file's tokens and windows.
func pipeline(t *testing.T, modelPath string, g *oracle.File, bos bool) []byte {
	t.Helper()
	f, err := gguf.Open(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := pipe.NewWriter(&buf, pipe.StageTokenize)
	tw.Header(pipe.Header{Tool: "test", Version: "0", Tokenizer: &pipe.Tokenizer{Model: tok.Model(), ID: tok.Identity()}})
	ww := pipe.NewWriter(&buf, pipe.StageWindow)
	tw.Flush()
	ww.Header(pipe.Header{Tool: "test", Version: "0", Protocol: &pipe.Protocol{Mode: "sliding", Context: 256, Stride: 128}})
	ww.Flush()
	ids := g.Header.Tokens
	tw.Stream(&pipe.Stream{ID: "s", Domain: "d", SHA256: strings.Repeat("0", 64), NTokens: len(ids)})
	tw.Tokens(&pipe.Tokens{Stream: "s", IDs: ids})
	tw.Flush()
	for i, w := range g.Windows {
		ww.Window(&pipe.Window{Stream: "s", Index: i, Begin: w.Begin, End: w.End, ScoreFrom: w.ScoreFrom, BOS: bos})
	}
	ww.Flush()
	tw.End()
	tw.Flush()
	ww.End()
	ww.Flush()
	return buf.Bytes()
}

func scores(t *testing.T, out []byte) []*pipe.Scores {
	t.Helper()
	r := pipe.NewReader(bytes.NewReader(out), "out")
	var s []*pipe.Scores
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return s
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Scores != nil {
			s = append(s, rec.Scores)
		}
	}
}

// The tool end to end against llama.cpp on one case, then replayed from the cache.
func TestScoreMatchesGolden(t *testing.T) {
	dir := oracle.Require(t)
	g, err := oracle.Read(oracle.Golden(dir, "tiny-llama-spm-f16", "mixed-unicode", "sliding"))
	if err != nil {
		t.Fatal(err)
	}
	model := oracle.Model(dir, "tiny-llama-spm-f16")
	in := pipeline(t, model, g, false)
	cacheDir := t.TempDir()
	var outs [2][]byte
	for run := range outs {
		var out, errb bytes.Buffer
		err := runArgs(t, []string{"--model", model, "--kv-dtype", "f16", "--device", "cpu", "--cache-dir", cacheDir}, in, &out, &errb)
		if err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, errb.String())
		}
		outs[run] = out.Bytes()
		want := []string{"4 windows (4 scored, 0 from the cache)", "4 windows (0 scored, 4 from the cache)"}[run]
		if len(g.Windows) != 4 || !strings.Contains(errb.String(), want) {
			t.Fatalf("run %d: %d golden windows; stderr %q lacks %q", run, len(g.Windows), errb.String(), want)
		}
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Fatal("replay from the cache changed the output")
	}
	sc := scores(t, outs[0])
	var sum, gsum, diff float64
	n := 0
	for i, s := range sc {
		for j, lp := range s.Logprobs {
			diff += math.Abs(lp - g.Windows[i].Logprobs[j])
			sum += lp
			gsum += g.Windows[i].Logprobs[j]
			n++
		}
	}
	if mad := diff / float64(n); mad > 0.002 {
		t.Errorf("mean |Δ logprob| vs llama.cpp %.5f > 0.002", mad)
	}
	if r := math.Exp(-sum/float64(n)) / math.Exp(-gsum/float64(n)); math.Abs(r-1) > 0.0005 {
		t.Errorf("PPL ratio %.6f", r)
	}
}

func runArgs(t *testing.T, args []string, in []byte, out, errb *bytes.Buffer) error {
	t.Helper()
	return run(context.Background(), args, bytes.NewReader(in), out, errb)
}
