package compare

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ppl.dev/aggregate/report"
	"ppl.dev/compare/internal/reporttest"
	"ppl.dev/pipe"
)

func in(t *testing.T, label string, s reporttest.Spec) Input {
	return Input{Path: label + ".json", Label: label, Report: reporttest.Build(t, s)}
}

func spec(f func(*reporttest.Spec)) reporttest.Spec {
	s := reporttest.Default()
	f(&s)
	return s
}

var opt = Options{Resamples: 500, Seed: 1}

func TestVerdicts(t *testing.T) {
	base := in(t, "base", reporttest.Default())
	inputs := []Input{
		base,
		in(t, "copy", reporttest.Default()),
		in(t, "worse", spec(func(s *reporttest.Spec) { s.SHA256, s.Shift, s.Jitter = "2", 0.3, 0.2 })),
		in(t, "better", spec(func(s *reporttest.Spec) { s.SHA256, s.Shift, s.Jitter = "3", -0.3, 0.2 })),
		in(t, "noise", spec(func(s *reporttest.Spec) { s.SHA256, s.Jitter = "4", 0.2 })),
		in(t, "retokenized", spec(func(s *reporttest.Spec) { s.Tokenizer, s.Seed = "tok2", 9 })),
	}
	res, err := Compare(inputs, opt)
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{res.Domains[0].Name, res.Domains[1].Name, res.Domains[2].Name}; strings.Join(got, ",") != "en,zh,overall" || !res.Domains[2].Overall {
		t.Fatalf("domains %v", got)
	}
	want := map[string]struct {
		verdict string
		paired  bool
	}{
		"copy": {Equal, true}, "worse": {Worse, true}, "better": {Better, true}, "noise": {Equal, true}, "retokenized": {Equal, false},
	}
	for _, d := range res.Domains {
		if d.Rows[0].Delta != nil {
			t.Errorf("%s: the base row has a delta", d.Name)
		}
		for _, r := range d.Rows[1:] {
			w := want[r.Report]
			if r.Delta == nil || r.Delta.Verdict != w.verdict || r.Delta.Paired != w.paired {
				t.Errorf("%s/%s: delta %+v, want verdict %q paired %v", d.Name, r.Report, r.Delta, w.verdict, w.paired)
			}
		}
	}
	o := res.Domains[2].Rows[1].Delta // the copy
	if o.Ratio != 1 || o.PPL != 0 || o.RatioCI != [2]report.F{1, 1} {
		t.Errorf("copy of the base: %+v", o)
	}
	if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "retokenized: tokenizer differs") {
		t.Errorf("notes %q", res.Notes)
	}
	// The paired interval of a noisy copy is much tighter than the
	// unpaired one would be: the shared difficulty of each window cancels.
	n := res.Domains[2].Rows[4].Delta
	unpaired, _ := Compare([]Input{base, {Label: "noise", Report: withTokenizer(inputs[4].Report, "x")}}, opt)
	u := unpaired.Domains[2].Rows[1].Delta
	if u.Paired || float64(n.MeanNLLCI[1]-n.MeanNLLCI[0])*3 > float64(u.MeanNLLCI[1]-u.MeanNLLCI[0]) {
		t.Errorf("paired width %v, unpaired width %v", n.MeanNLLCI[1]-n.MeanNLLCI[0], u.MeanNLLCI[1]-u.MeanNLLCI[0])
	}
	// Deterministic.
	again, _ := Compare(inputs, opt)
	a, _ := json.Marshal(res)
	b, _ := json.Marshal(again)
	if !bytes.Equal(a, b) {
		t.Error("two comparisons differ")
	}
}

func withTokenizer(r *report.Report, id string) *report.Report {
	c := *r
	tok := *r.Workload.Tokenizer
	tok.ID = id
	c.Workload.Tokenizer = &tok
	return &c
}

func TestRefusals(t *testing.T) {
	base := in(t, "base", reporttest.Default())
	for _, c := range []struct {
		name   string
		change func(*reporttest.Spec)
		want   string
	}{
		{"corpus", func(s *reporttest.Spec) { s.Corpus = "other" }, `corpus differs: "mini" in base, "other" in corpus`},
		{"sha", func(s *reporttest.Spec) { s.Streams[1].SHA256 = "beef" }, `stream sha256 differs: "en-2" bbbb`},
		{"streams", func(s *reporttest.Spec) { s.Streams = s.Streams[:2] }, `stream set differs: stream "zh-1" in base, no such stream in streams`},
		{"context", func(s *reporttest.Spec) { s.Protocol.Context = 32 }, "context differs: 16 in base, 32 in context"},
		{"stride", func(s *reporttest.Spec) { s.Protocol.Stride = 4 }, "stride differs: 8 in base, 4 in stride"},
		{"protocol", func(s *reporttest.Spec) { s.Protocol = pipe.Protocol{Mode: "disjoint", Context: 16} }, "protocol differs: sliding in base, disjoint in protocol"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := reporttest.Default()
			s.Streams = append([]reporttest.Stream(nil), s.Streams...)
			c.change(&s)
			other := in(t, c.name, s)
			_, err := Compare([]Input{base, other}, opt)
			var me MismatchError
			if !errors.As(err, &me) || !strings.Contains(err.Error(), c.want) || !strings.HasSuffix(err.Error(), "(--allow-protocol-mismatch compares anyway)") {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
			allow := opt
			allow.AllowMismatch = true
			res, err := Compare([]Input{base, other}, allow)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Mismatches) == 0 || !strings.Contains(res.Mismatches[0].String(), c.want) {
				t.Errorf("mismatches %v", res.Mismatches)
			}
		})
	}
}

func TestFormats(t *testing.T) {
	inputs := []Input{
		in(t, "base", reporttest.Default()),
		in(t, "q4|x", spec(func(s *reporttest.Spec) { s.SHA256, s.Shift, s.KLD = "2", 0.3, true })),
	}
	res, err := Compare(inputs, opt)
	if err != nil {
		t.Fatal(err)
	}
	var tb, md, js bytes.Buffer
	if err := WriteTable(&tb, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"== domain en ==", "== domain zh ==", "== overall ==", "mean KLD", "paired", "worse"} {
		if !strings.Contains(tb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tb.String())
		}
	}
	WriteMarkdown(&md, res)
	for _, want := range []string{"## domain en", "| report | tokens | PPL |", `| q4\|x |`, "| --- | ---: |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	WriteJSON(&js, res)
	var back Result
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Domains) != 3 || back.Domains[2].Rows[1].Delta.Verdict != Worse || back.Domains[2].Rows[1].MeanKLD == nil {
		t.Errorf("json round trip: %+v", back.Domains)
	}
}

// A report holding a non-finite number (null in the file) is refused,
// not compared as "equal within noise".
func TestLoadRefusesNonFinite(t *testing.T) {
	r := reporttest.Build(t, reporttest.Default())
	r.Overall.Perplexity.PPL = report.F(math.NaN())
	b, err := report.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "nan.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load([]string{p})
	if err == nil || !strings.Contains(err.Error(), "overall.perplexity.ppl = NaN is not a finite number (null in the file)") {
		t.Fatalf("err %v", err)
	}
}

// TestSettingsRoPE: the settings name a score header's RoPE, and an ALiBi
// model's maximum bias in its place (its header has no RoPE).
func TestSettingsRoPE(t *testing.T) {
	for _, c := range []struct{ score, want string }{
		{`{"device":"cpu","kv_dtype":"f16","rope":{"freq_base":10000,"layout":"neox"}}`, "freq_base=10000 layout=neox"},
		{`{"device":"cpu","kv_dtype":"f16","alibi_max_bias":8}`, "none (ALiBi, maximum bias 8)"},
	} {
		r := &report.Report{}
		r.Provenance.Score = []json.RawMessage{json.RawMessage(`{"type":"header","v":1,"stage":"score","score":` + c.score + `}`)}
		if got := Settings(r)["rope"]; got != c.want {
			t.Errorf("%s: rope %q, want %q", c.score, got, c.want)
		}
	}
}
