package aggregate

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ppl.dev/oracle"
	"ppl.dev/pipe"
	"ppl.dev/window/protocol"
)

var testOptions = Options{Resamples: 200, Seed: 1, Created: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}

// goldenRun turns oracle golden files (same model and protocol) into a
// run with one stream per file, named after its text.
func goldenRun(t testing.TB, paths ...string) (testRun, []*oracle.File) {
	t.Helper()
	var tr testRun
	var files []*oracle.File
	for _, path := range paths {
		f, err := oracle.Read(path)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		h := f.Header
		stem := strings.TrimSuffix(h.Model, ".gguf")
		tr.model = pipe.Model{Name: h.Model, SHA256: strings.Repeat("ab", 32), Arch: "llama"}
		tr.tokenizerID = "tok-" + stem
		tr.kv = "f16"
		tr.proto = pipe.Protocol{Mode: h.Protocol.Mode, Context: h.Protocol.Context, Stride: h.Protocol.Stride}
		text := strings.TrimSuffix(h.Text, ".txt")
		s := testStream{id: text, domain: text, bytes: int64(h.TextBytes), tokens: h.Tokens}
		for i, w := range f.Windows {
			if w.Window != i {
				t.Fatalf("%s: window %d at position %d", path, w.Window, i)
			}
			sc := pipe.Scores{Begin: w.Begin, End: w.End, ScoreFrom: w.ScoreFrom, Logprobs: w.Logprobs, Argmax: w.Argmax,
				KLD: w.KLD, Top1Agree: w.Top1Agree}
			s.windows = append(s.windows, sc)
		}
		if strings.Contains(path, "__kld-vs-") {
			tr.ref = &pipe.Model{Name: "tiny-llama-spm-f16.gguf", SHA256: strings.Repeat("cd", 32)}
		}
		tr.streams = append(tr.streams, s)
	}
	return tr, files
}

func relErr(got, want float64) float64 { return math.Abs(got-want) / math.Abs(want) }

// On every golden file, converted to a pipeline, the report reproduces the
// oracle's totals: PPL and mean NLL to 1e-12 relative, and for the KLD
// files the mean KLD, the nearest-rank p99 KLD (exactly: it is one of the
// values) and the top-1 agreement.
func TestGolden(t *testing.T) {
	dir := oracle.Require(t)
	paths, _ := filepath.Glob(filepath.Join(dir, "golden", "*__*__*.ndjson"))
	if len(paths) == 0 {
		t.Fatal("no golden files")
	}
	kldFiles := 0
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			tr, files := goldenRun(t, path)
			h := files[0].Header
			rep, err := Aggregate(sources(map[string][]byte{"in": tr.pipeline(t, protocol.Shard{})}, "in"), testOptions)
			if err != nil {
				t.Fatal(err)
			}
			o := rep.Overall
			if o.ScoredTokens != h.ScoredTokens {
				t.Fatalf("scored tokens %d, golden %d", o.ScoredTokens, h.ScoredTokens)
			}
			p := o.Perplexity
			t.Logf("mean NLL rel err %.2g, PPL rel err %.2g", relErr(float64(p.MeanNLL), h.MeanNLL), relErr(float64(p.PPL), h.PPL))
			if e := relErr(float64(p.MeanNLL), h.MeanNLL); e > 1e-12 {
				t.Errorf("mean NLL %.17g, golden %.17g (rel %.3g)", p.MeanNLL, h.MeanNLL, e)
			}
			if e := relErr(float64(p.PPL), h.PPL); e > 1e-12 {
				t.Errorf("PPL %.17g, golden %.17g (rel %.3g)", p.PPL, h.PPL, e)
			}
			if e := relErr(float64(p.SumLogprob), h.SumLogprob); e > 1e-12 {
				t.Errorf("sum logprob %.17g, golden %.17g (rel %.3g)", p.SumLogprob, h.SumLogprob, e)
			}
			if !strings.Contains(path, "__kld-vs-") {
				if o.KLD != nil || o.Top1 != nil {
					t.Error("KLD block without kld in the scores")
				}
				return
			}
			kldFiles++
			if o.KLD == nil || o.Top1 == nil {
				t.Fatal("no KLD or top-1 block")
			}
			if o.DeltaP != nil || o.Reference != nil {
				t.Error("Δp or reference block without ref_logprobs")
			}
			if e := relErr(float64(o.KLD.Mean), h.MeanKLD); e > 1e-12 {
				t.Errorf("mean KLD %.17g, golden %.17g (rel %.3g)", o.KLD.Mean, h.MeanKLD, e)
			}
			if float64(o.KLD.P99) != h.P99KLD {
				t.Errorf("p99 KLD %.17g, golden %.17g", o.KLD.P99, h.P99KLD)
			}
			if e := relErr(float64(o.Top1.Agreement), h.Top1Agreement); e > 1e-12 {
				t.Errorf("top-1 agreement %.17g, golden %.17g", o.Top1.Agreement, h.Top1Agreement)
			}
			n := 0
			for _, c := range o.KLD.Histogram.Counts {
				n += c
			}
			if n != h.ScoredTokens {
				t.Errorf("histogram counts %d values, want %d", n, h.ScoredTokens)
			}
		})
	}
	if kldFiles == 0 {
		t.Error("no __kld-vs- golden file was checked")
	}
}
