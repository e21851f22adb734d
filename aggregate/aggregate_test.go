package aggregate

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"

	"ppl.dev/aggregate/report"
	"ppl.dev/aggregate/stats"
	"ppl.dev/oracle"
	"ppl.dev/pipe"
	"ppl.dev/window/protocol"
)

// synthRun makes a run of streams with the given token counts under p,
// with deterministic pseudo-random log-probabilities and, when withRef,
// kld, top1_agree and ref_logprobs.
func synthRun(t testing.TB, p pipe.Protocol, withRef bool, lengths ...int) testRun {
	t.Helper()
	r := stats.NewRand(42)
	u := func() float64 { return float64(r.Uint64()>>11) / (1 << 53) }
	tr := testRun{model: pipe.Model{Name: "m.gguf", SHA256: strings.Repeat("1", 64)}, tokenizerID: "tok", kv: "f16", proto: p}
	if withRef {
		tr.ref = &pipe.Model{Name: "ref.gguf", SHA256: strings.Repeat("2", 64)}
	}
	for i, n := range lengths {
		s := testStream{id: "s" + string(rune('a'+i)), domain: []string{"en", "zh"}[i%2], bytes: int64(3 * n), words: int64(n / 2)}
		for j := 0; j < n; j++ {
			s.tokens = append(s.tokens, int32(j%100))
		}
		spans, err := protocol.Windows(n, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range spans {
			w := pipe.Scores{Begin: sp.Begin, End: sp.End, ScoreFrom: sp.ScoreFrom, BOS: sp.BOS}
			for k := sp.ScoreFrom; k < sp.End; k++ {
				w.Logprobs = append(w.Logprobs, -8*u())
				if withRef {
					w.KLD = append(w.KLD, 0.1*u()*u())
					w.RefLogprobs = append(w.RefLogprobs, -8*u())
					w.Top1Agree = append(w.Top1Agree, u() < 0.8)
				}
			}
			s.windows = append(s.windows, w)
		}
		tr.streams = append(tr.streams, s)
	}
	return tr
}

var sliding = pipe.Protocol{Mode: "sliding", Context: 16, Stride: 8}

// encodeNoRun encodes a report without its run object, the only part
// that may differ between equivalent runs.
func encodeNoRun(t testing.TB, r *report.Report) []byte {
	t.Helper()
	c := *r
	c.Run = report.Run{}
	b, err := report.Encode(&c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Shards scored separately and aggregated together give the report of
// the unsharded run, byte for byte outside "run", in any input order.
func TestShardsMatchUnsharded(t *testing.T) {
	runs := map[string]testRun{"synthetic": synthRun(t, sliding, true, 100, 37, 1, 64)}
	if dir, ok := oracle.Optional(t); ok {
		tr, _ := goldenRun(t,
			oracle.Golden(dir, "tiny-llama-spm-q4_k_m", "en-gpl3", "sliding__kld-vs-tiny-llama-spm-f16"),
			oracle.Golden(dir, "tiny-llama-spm-q4_k_m", "zh-tang", "sliding__kld-vs-tiny-llama-spm-f16"))
		runs["golden"] = tr
	}
	for name, tr := range runs {
		t.Run(name, func(t *testing.T) {
			files := map[string][]byte{"whole": tr.pipeline(t, protocol.Shard{})}
			for k := 1; k <= 3; k++ {
				sh := protocol.Shard{K: k, N: 3}
				files["shard"+sh.String()] = tr.pipeline(t, sh)
			}
			whole, err := Aggregate(sources(files, "whole"), testOptions)
			if err != nil {
				t.Fatal(err)
			}
			want := encodeNoRun(t, whole)
			for _, order := range [][]string{{"shard1/3", "shard2/3", "shard3/3"}, {"shard3/3", "shard1/3", "shard2/3"}} {
				got, err := Aggregate(sources(files, order...), testOptions)
				if err != nil {
					t.Fatal(err)
				}
				if b := encodeNoRun(t, got); !bytes.Equal(b, want) {
					t.Errorf("inputs %v: report differs from the unsharded one:\n%s", order, firstDiff(b, want))
				}
				if len(got.Run.Inputs) != 3 || got.Run.Inputs[0].Shard != strings.TrimPrefix(order[0], "shard") {
					t.Errorf("run inputs %+v", got.Run.Inputs)
				}
			}

			_, err = Aggregate(sources(files, "shard1/3", "shard3/3"), testOptions)
			if err == nil || !strings.Contains(err.Error(), "shard 2/3 not among the inputs") || !strings.Contains(err.Error(), "windows 1, 4, 7") {
				t.Errorf("missing shard: err = %v", err)
			}
			_, err = Aggregate(sources(files, "shard1/3", "shard1/3"), testOptions)
			if err == nil || !strings.Contains(err.Error(), "shard 1/3 was already read from shard1/3") {
				t.Errorf("shard twice: err = %v", err)
			}
			_, err = Aggregate(sources(files, "whole", "shard2/3"), testOptions)
			if err == nil || !strings.Contains(err.Error(), `shard count "3" differs from "none" in whole`) {
				t.Errorf("whole and shard: err = %v", err)
			}
		})
	}
}

func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return "line " + al[i] + "\nwant " + bl[i]
		}
	}
	return "lengths differ"
}

// Every disagreement of provenance is refused with the field and both
// values.
func TestProvenanceMismatch(t *testing.T) {
	base := synthRun(t, sliding, true, 50, 30)
	for _, c := range []struct {
		name   string
		change func(*testRun)
		want   string
	}{
		{"model", func(r *testRun) { r.model.SHA256 = strings.Repeat("9", 64) }, `model sha256 "9999`},
		{"tokenizer", func(r *testRun) { r.tokenizerID = "other" }, `tokenizer id "other" differs from "tok" in shard1/2`},
		{"context", func(r *testRun) { r.proto.Context = 32 }, `protocol context "32" differs from "16"`},
		{"stride", func(r *testRun) { r.proto.Stride = 4 }, `protocol stride "4" differs from "8"`},
		{"mode", func(r *testRun) { r.proto = pipe.Protocol{Mode: "disjoint", Context: 16} }, `protocol mode "disjoint" differs from "sliding"`},
		{"kv", func(r *testRun) { r.kv = "q8_0" }, `kv dtype "q8_0" differs from "f16"`},
		{"reference", func(r *testRun) { r.ref = &pipe.Model{SHA256: "77"} }, `reference model sha256 "77" differs from "2222`},
		{"no reference", func(r *testRun) { r.ref = nil }, `reference model sha256 "" differs from "2222`},
		{"activations", func(r *testRun) { r.device = func(s *pipe.Score) { s.Activations = "int8" } }, `activations "int8" differs from "fp32"`},
		{"device", func(r *testRun) {
			r.device = func(s *pipe.Score) {
				s.Device, s.Extra = "cuda:1", map[string]any{"gpu": "NVIDIA H200", "weights": "quantized"}
			}
		}, `device "cuda" differs from "cpu"`},
		{"gpu weights", func(r *testRun) {
			r.device = func(s *pipe.Score) { s.Extra = map[string]any{"weights": "bf16"} }
		}, `weights "bf16" differs from ""`},
		{"int8 arithmetic", func(r *testRun) {
			r.device = func(s *pipe.Score) {
				s.Extra = map[string]any{"arithmetic": "ggml 0.27.0 (llama.cpp 0.7.0), revision 5"}
			}
		}, `arithmetic "ggml 0.27.0 (llama.cpp 0.7.0), revision 5" differs from ""`},
		{"rope", func(r *testRun) { r.device = func(s *pipe.Score) { s.RoPE = map[string]any{"freq_base": 1e6} } }, `rope "{\"freq_base\":1000000}" differs from "null"`},
		{"ssm state", func(r *testRun) { r.device = func(s *pipe.Score) { s.SSMStateDtype = "bf16" } }, `ssm state dtype "bf16" differs from ""`},
	} {
		t.Run(c.name, func(t *testing.T) {
			other := base
			c.change(&other)
			files := map[string][]byte{
				"shard1/2": base.pipeline(t, protocol.Shard{K: 1, N: 2}),
				"shard2/2": other.pipeline(t, protocol.Shard{K: 2, N: 2}),
			}
			_, err := Aggregate(sources(files, "shard1/2", "shard2/2"), testOptions)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "shard2/2: ") {
				t.Errorf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// Shards scored on different machines make one report, which names each
// machine's share that differs (here Go's math library on amd64 and on
// arm64, and the GPU absent from one) with the first shard of each value.
func TestMachineWarnings(t *testing.T) {
	base := synthRun(t, sliding, true, 50, 30)
	other := base
	other.device = func(s *pipe.Score) { s.Extra = map[string]any{"math": "01b65ec418a6", "gpu": "NVIDIA H200"} }
	files := map[string][]byte{
		"shard1/3": base.pipeline(t, protocol.Shard{K: 1, N: 3}),
		"shard2/3": other.pipeline(t, protocol.Shard{K: 2, N: 3}),
		"shard3/3": base.pipeline(t, protocol.Shard{K: 3, N: 3}),
	}
	r, err := Aggregate(sources(files, "shard1/3", "shard2/3", "shard3/3"), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"inputs scored on different machines: gpu none (shard1/3), NVIDIA H200 (shard2/3): a rerun on one machine gives log-probs that differ in their last digits",
		"inputs scored on different machines: math fe94f7a0b307 (shard1/3), 01b65ec418a6 (shard2/3): a rerun on one machine gives log-probs that differ in their last digits",
	}
	var got []string
	for _, w := range r.Warnings {
		if strings.HasPrefix(w, "inputs scored on different machines") {
			got = append(got, w)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestRefusals(t *testing.T) {
	tr := synthRun(t, sliding, false, 40, 20)
	whole := tr.pipeline(t, protocol.Shard{})

	dropped := tr
	dropped.streams = append([]testStream(nil), tr.streams...)
	dropped.streams[0].windows = dropped.streams[0].windows[:2] // windows 2.. of sa are never emitted

	moved := tr
	moved.streams = append([]testStream(nil), tr.streams...)
	moved.streams[1].windows = append([]pipe.Scores(nil), tr.streams[1].windows...)
	moved.streams[1].windows[1].Begin++

	empty := testRun{model: tr.model, tokenizerID: "tok", kv: "f16", proto: sliding}
	short := synthRun(t, sliding, false, 1, 0)

	var noScore []byte
	for _, l := range bytes.SplitAfter(whole, []byte("\n")) {
		if !bytes.Contains(l, []byte(`"stage":"score"`)) && !bytes.Contains(l, []byte(`"type":"scores"`)) {
			noScore = append(noScore, l...)
		}
	}

	huge := bytes.Replace(whole, []byte(`"n_tokens":40`), []byte(`"n_tokens":2000000000`), 1)

	spliced := tr
	spliced.scoreTokID = "the-scored-one"

	for _, c := range []struct {
		name  string
		files map[string][]byte
		order []string
		want  string
	}{
		// A stream that claims 2e9 tokens: its 250 million windows are
		// counted, not built.
		{"huge claim", map[string][]byte{"a": huge}, []string{"a"},
			`249999995 of 250000001 windows have no scores: stream "sa" windows 4-23 and 249999975 more`},
		{"twice", map[string][]byte{"a": whole}, []string{"a", "a"}, `a:14: window 0 of stream "sa" scored twice: here and in a:14`},
		{"missing windows", map[string][]byte{"a": dropped.pipeline(t, protocol.Shard{})}, []string{"a"}, `2 of 6 windows have no scores: stream "sa" windows 2-3`},
		{"wrong span", map[string][]byte{"a": moved.pipeline(t, protocol.Shard{})}, []string{"a"}, `window 1 of stream "sb" is [9,20) scored from 16 (bos false), but the protocol's is [8,20) scored from 16`},
		{"truncated", map[string][]byte{"a": whole[:bytes.LastIndexByte(whole[:len(whole)-1], '\n')+1]}, []string{"a"}, `truncated input: no end record for stage "score"`},
		{"no streams", map[string][]byte{"a": empty.pipeline(t, protocol.Shard{})}, []string{"a"}, "no streams in the input"},
		{"nothing scored", map[string][]byte{"a": short.pipeline(t, protocol.Shard{})}, []string{"a"}, "no tokens were scored"},
		{"no score stage", map[string][]byte{"a": noScore}, []string{"a"}, "a: no score stage (no header from ppl-score)"},
		{"spliced tokenize header", map[string][]byte{"a": spliced.pipeline(t, protocol.Shard{})}, []string{"a"},
			`a: the tokenize header's tokenizer id "tok" is not the "the-scored-one" ppl-score checked: the headers come from different runs`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Aggregate(sources(c.files, c.order...), testOptions)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v\nwant it to contain %q", err, c.want)
			}
		})
	}
}

// Exact statistics on a run small enough to check by hand.
func TestExactValues(t *testing.T) {
	lp := []float64{-1, -2, -3, -2}
	ref := []float64{-1, -1, -2, -2}
	tr := testRun{model: pipe.Model{Name: "m.gguf", SHA256: "1"}, tokenizerID: "t", kv: "f32", proto: pipe.Protocol{Mode: "disjoint", Context: 3},
		ref: &pipe.Model{SHA256: "2"},
		streams: []testStream{{id: "x", domain: "d", bytes: 10, words: 4, tokens: []int32{1, 2, 3, 4, 5, 6},
			windows: []pipe.Scores{
				{Begin: 0, End: 3, ScoreFrom: 1, Logprobs: lp[:2], RefLogprobs: ref[:2], KLD: []float64{0.1, 0.4}, Top1Agree: []bool{true, false}},
				{Begin: 3, End: 6, ScoreFrom: 4, Logprobs: lp[2:], RefLogprobs: ref[2:], KLD: []float64{0.3, 0.2}, Top1Agree: []bool{true, true}},
			}}}}
	rep, err := Aggregate(sources(map[string][]byte{"a": tr.pipeline(t, protocol.Shard{})}, "a"), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	o := rep.Overall
	p := o.Perplexity
	se := math.Sqrt(0.5 / 3) // σ² = 0.5 over NLLs 1,2,3,2
	checks := []struct {
		name      string
		got, want float64
	}{
		{"sum", float64(p.SumLogprob), -8},
		{"mean", float64(p.MeanNLL), 2},
		{"ppl", float64(p.PPL), math.Exp(2)},
		{"stddev", float64(p.NLLStddev), math.Sqrt(0.5)},
		{"se", float64(p.Naive.SE), se},
		{"ppl ci lo", float64(p.Naive.PPLCI[0]), math.Exp(2 - z*se)},
		{"bpb", float64(p.BitsPerByte), 8 / (10 * math.Ln2)},
		{"byte ppl", float64(p.BytePerplexity), math.Exp(0.8)},
		{"word ppl", float64(*p.WordPerplexity), math.Exp(2)},
		{"kld mean", float64(o.KLD.Mean), 0.25},
		{"kld p50", float64(o.KLD.P50), 0.2},
		{"kld p99", float64(o.KLD.P99), 0.4},
		{"kld p10", float64(o.KLD.P10), 0.1},
		{"top1", float64(o.Top1.Agreement), 0.75},
		{"top1 se", float64(o.Top1.SE), math.Sqrt(0.75 * 0.25 / 3)},
		{"ref mean", float64(o.Reference.MeanNLL), 1.5},
		{"ln ratio", float64(o.Reference.LnPPLRatio), 0.5},
		{"ppl ratio", float64(o.Reference.PPLRatio), math.Exp(0.5)},
		// d = nll - ref = 0, 1, 1, 0: var 0.25, se of the mean sqrt(0.25/3).
		{"ln ratio se", float64(o.Reference.LnPPLRatioSE), math.Sqrt(0.25 / 3)},
		{"dp max", float64(o.DeltaP.Max), math.Exp(-1) - math.Exp(-2)},
		{"dp min", float64(o.DeltaP.Min), 0},
		{"window 1 mean", float64(rep.Streams[0].Windows[1].MeanNLL), 2.5},
	}
	for _, c := range checks {
		if math.Abs(c.got-c.want) > 1e-15*math.Max(1, math.Abs(c.want)) {
			t.Errorf("%s = %.17g, want %.17g", c.name, c.got, c.want)
		}
	}
	if o.Perplexity.Bootstrap == nil || rep.Streams[0].Windows[0].MeanKLD == nil {
		t.Error("bootstrap or window KLD absent")
	}
	h := o.KLD.Histogram
	// 0.1 = 10^(-5/5) is edge 25: it counts in the bin it opens, 26.
	if h.Edges[25] != 0.1 || h.Counts[25] != 0 || h.Counts[26] != 1 || h.Counts[27] != 1 || h.Counts[28] != 1 || h.Counts[29] != 1 {
		t.Errorf("histogram edges %v counts around 0.1: %v", h.Edges[25], h.Counts[24:31])
	}
}

// The report's bytes depend only on the scores and options.
func TestDeterministic(t *testing.T) {
	tr := synthRun(t, pipe.Protocol{Mode: "llama.cpp", Context: 8}, true, 40, 33)
	in := tr.pipeline(t, protocol.Shard{})
	a, err := Aggregate(sources(map[string][]byte{"a": in}, "a"), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Aggregate(sources(map[string][]byte{"a": in}, "a"), testOptions)
	ea, _ := report.Encode(a)
	eb, _ := report.Encode(b)
	if !bytes.Equal(ea, eb) {
		t.Fatal("two runs differ")
	}
	back, err := report.Decode(ea)
	if err != nil {
		t.Fatal(err)
	}
	if ec, _ := report.Encode(back); !bytes.Equal(ec, ea) {
		t.Error("report does not survive decode and encode")
	}
	opt := testOptions
	opt.Seed = 2
	c, _ := Aggregate(sources(map[string][]byte{"a": in}, "a"), opt)
	if c.Overall.Perplexity.Bootstrap.SE == a.Overall.Perplexity.Bootstrap.SE {
		t.Error("the seed changes nothing")
	}
}

// Finite log-probs whose sum or exponential is not finite are refused,
// naming the stream or window, rather than published as NaN.
func TestNonFiniteRefused(t *testing.T) {
	run := func(lps ...[]float64) testRun {
		tr := testRun{model: pipe.Model{Name: "m.gguf", SHA256: "1"}, tokenizerID: "t", kv: "f32", proto: pipe.Protocol{Mode: "disjoint", Context: 3}}
		for i, lp := range lps {
			tr.streams = append(tr.streams, testStream{id: fmt.Sprint("s", i), domain: "d", bytes: 10, tokens: []int32{1, 2, 3},
				windows: []pipe.Scores{{Begin: 0, End: 3, ScoreFrom: 1, Logprobs: lp}}})
		}
		return tr
	}
	for _, c := range []struct {
		name string
		tr   testRun
		want string
	}{
		{"window overflows", run([]float64{-1e308, -1e308}), `stream "s0", window 0 (a line 7): sum_logprob = NaN is not finite`},
		{"window ppl", run([]float64{-1000, -1000}), `stream "s0", window 0 (a line 7): ppl = +Inf is not finite`},
		{"stream", run([]float64{-1, -2}, []float64{-1, -1e308}), `stream "s1", window 0 (a line 11): ppl = +Inf is not finite`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Aggregate(sources(map[string][]byte{"a": c.tr.pipeline(t, protocol.Shard{})}, "a"), testOptions)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v\nwant it to contain %q", err, c.want)
			}
		})
	}
}
