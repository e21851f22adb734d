// Package aggregate turns the scores records of a perplexity run into its
// report: it merges the inputs (the shards of one run, or one whole run),
// proves that they form exactly the windows the protocol defines, and
// computes perplexity, its uncertainty and, against a reference model, the
// KL-divergence statistics, for every window, stream, domain and the
// corpus.
//
// The numbers are published, so they are computed to be reproducible to
// the bit: every sum is Neumaier-compensated and taken in one fixed order
// (streams in input order, their windows by index, targets in order), no
// matter how the windows were split between inputs or in which order the
// inputs are given; percentiles are nearest-rank; the bootstrap draws from
// a seeded, fully specified generator (package stats).
package aggregate

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"ppl.dev/aggregate/report"
	"ppl.dev/aggregate/stats"
	"ppl.dev/pipe"
)

// Tool and Version name this program in reports.
const (
	Tool    = "ppl-aggregate"
	Version = "0.1.0"
)

// Options are the settings that change a report.
type Options struct {
	// Resamples is the number of bootstrap replicates (0: no bootstrap).
	Resamples int
	// Seed seeds the bootstrap.
	Seed uint64
	// Created is the time written in the report's run object.
	Created time.Time
	// Build, when set, is written in the run object.
	Build *report.Build
}

// DefaultResamples and DefaultSeed are ppl-aggregate's defaults.
const (
	DefaultResamples = 1000
	DefaultSeed      = 1
)

// z is the two-sided 95% quantile of the standard normal distribution.
const z = 1.959963984540054

// Aggregate reads every source, checks that together they are one complete
// run, and computes its report.
func Aggregate(srcs []Source, opt Options) (*report.Report, error) {
	if len(srcs) == 0 {
		return nil, errors.New("no inputs")
	}
	c := &corpus{streams: map[string]*streamData{}}
	for _, s := range srcs {
		if err := c.read(s); err != nil {
			return nil, err
		}
	}
	if len(c.order) == 0 {
		return nil, errors.New("no streams in the input: nothing to aggregate")
	}
	if err := c.checkComplete(); err != nil {
		return nil, err
	}
	return c.report(opt)
}

func (c *corpus) report(opt Options) (*report.Report, error) {
	r := &report.Report{
		Schema:  report.Schema,
		Tool:    Tool,
		Version: Version,
		Run:     report.Run{Created: opt.Created.UTC().Format(time.RFC3339), Build: opt.Build},
		Method: report.Method{
			Summation:  "Neumaier-compensated float64 sums over targets in stream order, then window index, then target order",
			Percentile: "nearest rank: the ceil(q*N)-th smallest value, q*N in float64, rank clamped to [1, N]",
			NaiveError: "sqrt(sum((x-mean)^2)/N/(N-1)): tokens taken as independent, as llama-perplexity",
			Confidence: 0.95,
			Z:          z,
			Bootstrap: report.Bootstrap{
				Resamples: opt.Resamples,
				Seed:      opt.Seed,
				Block:     "window",
				Generator: "splitmix64 seeded with splitmix64(seed xor fnv1a64(group key)); indices by Lemire's multiply-and-reject",
				Interval:  "percentile: nearest-rank 2.5% and 97.5% of the replicates' token-weighted mean NLL; se: their standard deviation",
			},
		},
		Domains: []report.Group{},
		Streams: []report.Stream{},
	}
	for _, in := range c.inputs {
		r.Run.Inputs = append(r.Run.Inputs, report.Input{Name: in.name, Shard: in.shard.String(), Windows: len(in.scores)})
	}
	r.Provenance = c.provenance()
	r.Workload = c.workload()
	r.Warnings = c.warnings(r.Workload)
	if r.Workload.ScoredTokens == 0 {
		return nil, errors.New("no tokens were scored: every stream is too short for the protocol")
	}

	all := make([]*streamData, 0, len(c.order))
	var domains []string
	byDomain := map[string][]*streamData{}
	for _, id := range c.order {
		sd := c.streams[id]
		all = append(all, sd)
		if _, ok := byDomain[sd.Domain]; !ok {
			domains = append(domains, sd.Domain)
		}
		byDomain[sd.Domain] = append(byDomain[sd.Domain], sd)
	}
	// Streams first, windows before them, so that a non-finite result
	// names its stream.
	for _, sd := range all {
		windows := make([]report.Window, 0, len(sd.ordered))
		for _, w := range sd.ordered {
			wr := windowResult(w)
			if path := report.NonFinite(wr); path != "" {
				return nil, fmt.Errorf("stream %q, window %d (%s line %d): %s is not finite: log-probs too large in magnitude to aggregate", sd.ID, w.Index, w.input, w.line, path)
			}
			windows = append(windows, wr)
		}
		st := report.Stream{Group: summarize(sd.ID, "stream:"+sd.ID, []*streamData{sd}, opt), Domain: sd.Domain, Windows: windows}
		if err := finite(st.Group); err != nil {
			return nil, fmt.Errorf("stream %q: %w", sd.ID, err)
		}
		r.Streams = append(r.Streams, st)
	}
	for _, d := range domains {
		g := summarize(d, "domain:"+d, byDomain[d], opt)
		if err := finite(g); err != nil {
			return nil, fmt.Errorf("domain %q: %w", d, err)
		}
		r.Domains = append(r.Domains, g)
	}
	r.Overall = summarize("overall", "overall", all, opt)
	if err := finite(r.Overall); err != nil {
		return nil, fmt.Errorf("overall: %w", err)
	}
	return r, nil
}

// finite returns an error naming the first NaN or infinite number of a
// group's results: no such number is ever published. Log-probs are finite
// when read, but sums and exponentials of huge ones are not.
func finite(g report.Group) error {
	if path := report.NonFinite(g); path != "" {
		return fmt.Errorf("%s is not finite: log-probs too large in magnitude to aggregate", path)
	}
	return nil
}

func (c *corpus) provenance() report.Provenance {
	var p report.Provenance
	for _, in := range c.inputs {
		p.Tokenize = addDistinct(p.Tokenize, in.raw[pipe.StageTokenize])
		p.Window = addDistinct(p.Window, in.raw[pipe.StageWindow])
		p.Score = addDistinct(p.Score, in.raw[pipe.StageScore])
	}
	return p
}

func addDistinct(list []json.RawMessage, raw []byte) []json.RawMessage {
	for _, x := range list {
		if string(x) == string(raw) {
			return list
		}
	}
	return append(list, raw)
}

// warnings names the streams that got no window (a stream shorter than
// the context is left out of the measurement without an error), the
// machines' shares in the numbers where the inputs were scored on
// different machines (machineWarnings), and collects ppl-score's warnings
// from the score headers.
func (c *corpus) warnings(w report.Workload) []string {
	var out []string
	for _, s := range w.Streams {
		if s.Windows == 0 {
			out = append(out, fmt.Sprintf("stream %q (%d tokens) got no window under the %s protocol at context %d: it is shorter than the context and is not measured",
				s.ID, s.Tokens, w.Protocol.Mode, w.Protocol.Context))
		}
	}
	out = append(out, c.machineWarnings()...)
	seen := map[string]bool{}
	for _, in := range c.inputs {
		if sc := in.headers[pipe.StageScore]; sc != nil && sc.Score != nil {
			for _, m := range sc.Score.Warnings {
				if !seen[m] {
					seen[m] = true
					out = append(out, "ppl-score: "+m)
				}
			}
		}
	}
	return out
}

// machineWarnings names each of the score headers' pipe.ExtraMachine
// entries that differs between the inputs (shards scored on an H100 and on
// an H200, or on amd64 and arm64), with the first input of each value:
// the report is right, but a rerun on one machine gives log-probs that
// differ in their last digits. The arithmetic itself must agree
// (provenance).
func (c *corpus) machineWarnings() []string {
	var out []string
	for _, k := range pipe.ExtraMachine {
		var vals []string // "value (first input with it)"
		seen := map[string]bool{}
		for _, in := range c.inputs {
			sc := in.headers[pipe.StageScore]
			if sc == nil || sc.Score == nil {
				continue
			}
			if v := extraString(sc.Score.Extra, k); !seen[v] {
				seen[v] = true
				if v == "" {
					v = "none"
				}
				vals = append(vals, fmt.Sprintf("%s (%s)", v, in.name))
			}
		}
		if len(vals) > 1 {
			out = append(out, fmt.Sprintf("inputs scored on different machines: %s %s: a rerun on one machine gives log-probs that differ in their last digits", k, strings.Join(vals, ", ")))
		}
	}
	return out
}

func (c *corpus) workload() report.Workload {
	in := c.inputs[0]
	tok, sc := in.headers[pipe.StageTokenize], in.headers[pipe.StageScore]
	w := report.Workload{Model: sc.Model, Tokenizer: tok.Tokenizer, Protocol: c.proto, Streams: []report.WorkStream{}}
	if sc.Score != nil {
		w.KVDtype = sc.Score.KVDtype
		w.Reference = sc.Score.Reference
	}
	for _, h := range []*pipe.Header{tok, in.headers[pipe.StageWindow], sc} {
		if h.Corpus != nil {
			w.Corpus = h.Corpus
			break
		}
	}
	for _, id := range c.order {
		sd := c.streams[id]
		n := 0
		for _, s := range sd.ordered {
			n += len(s.Logprobs)
		}
		w.Streams = append(w.Streams, report.WorkStream{ID: id, Domain: sd.Domain, Source: sd.Source, SHA256: sd.SHA256,
			Bytes: sd.Bytes, Words: sd.Words, Tokens: sd.NTokens, Windows: len(sd.ordered), ScoredTokens: n})
		w.Tokens += sd.NTokens
		w.ScoredTokens += n
	}
	return w
}

func windowResult(w *scored) report.Window {
	sum := stats.SumOf(w.Logprobs)
	n := len(w.Logprobs)
	mean := -sum / float64(n)
	out := report.Window{Index: w.Index, Begin: w.Begin, End: w.End, ScoreFrom: w.ScoreFrom, BOS: w.BOS,
		ScoredTokens: n, SumLogprob: report.F(sum), MeanNLL: report.F(mean), PPL: report.F(math.Exp(mean))}
	if w.KLD != nil {
		k := report.F(stats.Mean(w.KLD))
		out.MeanKLD = &k
	}
	return out
}

// summarize computes the results of a group of streams; key names the
// group's bootstrap stream of random numbers.
func summarize(name, key string, group []*streamData, opt Options) report.Group {
	g := report.Group{Name: name, Streams: len(group)}
	size, nwin := 0, 0
	for _, sd := range group {
		nwin += len(sd.ordered)
		for _, w := range sd.ordered {
			size += len(w.Logprobs)
		}
	}
	nll := make([]float64, 0, size)
	var kld, refNLL, dp []float64
	var agree, targets int
	var hasKLD, hasTop1, hasRef bool
	winNLL, winN := make([]float64, 0, nwin), make([]float64, 0, nwin)
	allWords := true
	for _, sd := range group {
		if len(sd.ordered) == 0 {
			continue
		}
		g.Bytes += sd.Bytes
		g.Words += sd.Words
		allWords = allWords && sd.Words > 0
		for _, w := range sd.ordered {
			g.Windows++
			var ws stats.Sum
			for _, lp := range w.Logprobs {
				nll = append(nll, -lp)
				ws.Add(-lp)
			}
			winNLL = append(winNLL, ws.Value())
			winN = append(winN, float64(len(w.Logprobs)))
			if w.KLD != nil {
				if !hasKLD {
					kld = make([]float64, 0, size)
				}
				hasKLD = true
				kld = append(kld, w.KLD...)
			}
			if w.Top1Agree != nil {
				hasTop1 = true
				for _, a := range w.Top1Agree {
					targets++
					if a {
						agree++
					}
				}
			}
			if w.RefLogprobs != nil {
				if !hasRef {
					refNLL, dp = make([]float64, 0, size), make([]float64, 0, size)
				}
				hasRef = true
				for j, rl := range w.RefLogprobs {
					refNLL = append(refNLL, -rl)
					dp = append(dp, math.Exp(rl)-math.Exp(w.Logprobs[j]))
				}
			}
		}
	}
	g.ScoredTokens = len(nll)
	if !allWords {
		g.Words = 0
	}
	if len(nll) == 0 {
		return g
	}
	g.Perplexity = perplexity(nll, winNLL, winN, g.Bytes, g.Words, key, opt)
	if hasKLD {
		g.KLD = &report.KLD{Dist: dist(kld), Histogram: histogram(kld)}
	}
	if hasTop1 {
		p := float64(agree) / float64(targets)
		t := &report.Top1{Agree: agree, Targets: targets, Agreement: report.F(p)}
		if targets > 1 {
			t.SE = report.F(math.Sqrt(p * (1 - p) / float64(targets-1)))
		}
		g.Top1 = t
	}
	if hasRef {
		g.DeltaP = deltaP(dp)
		g.Reference = reference(nll, refNLL)
	}
	return g
}

func perplexity(nll, winNLL, winN []float64, bytes, words int64, key string, opt Options) *report.Perplexity {
	var s stats.Sum
	for _, x := range nll {
		s.Add(x)
	}
	sumNLL := s.Value()
	n := float64(len(nll))
	mean, se := stats.MeanSE(nll)
	// MeanSE's mean is the same compensated sum divided by N.
	p := &report.Perplexity{
		SumLogprob: report.F(-sumNLL),
		MeanNLL:    report.F(mean),
		PPL:        report.F(math.Exp(mean)),
		NLLStddev:  report.F(se * math.Sqrt(n-1)),
	}
	if len(nll) < 2 {
		p.NLLStddev = 0
	} else {
		h := float64(z * se) // the interval's half-width, rounded: never fused into mean ± h
		p.Naive = &report.Naive{
			SE:        report.F(se),
			PPLSE:     report.F(math.Exp(mean) * se),
			MeanNLLCI: [2]report.F{report.F(mean - h), report.F(mean + h)},
			PPLCI:     [2]report.F{report.F(math.Exp(mean - h)), report.F(math.Exp(mean + h))},
		}
	}
	if reps := stats.Replicates(winNLL, winN, opt.Resamples, stats.NewRand(stats.Seed(opt.Seed, key))); reps != nil {
		iv := stats.Summarize(reps)
		p.Bootstrap = &report.Interval{
			SE:        report.F(iv.SE),
			MeanNLLCI: [2]report.F{report.F(iv.Lo), report.F(iv.Hi)},
			PPLCI:     [2]report.F{report.F(math.Exp(iv.Lo)), report.F(math.Exp(iv.Hi))},
		}
	}
	if bytes > 0 {
		p.BitsPerByte = report.F(sumNLL / (float64(bytes) * math.Ln2))
		p.BytePerplexity = report.F(math.Exp(sumNLL / float64(bytes)))
	}
	if words > 0 {
		wp := report.F(math.Exp(sumNLL / float64(words)))
		p.WordPerplexity = &wp
	}
	return p
}

// dist summarises values (not empty).
func dist(xs []float64) report.Dist {
	mean, se := stats.MeanSE(xs)
	s := stats.Sorted(xs)
	q := func(f float64) report.F { return report.F(stats.Percentile(s, f)) }
	return report.Dist{
		Mean: report.F(mean), SE: report.F(se),
		Max:  report.F(s[len(s)-1]),
		P999: q(0.999), P99: q(0.99), P95: q(0.95), P90: q(0.9), P50: q(0.5),
		P10: q(0.1), P5: q(0.05), P1: q(0.01), P01: q(0.001),
		Min: report.F(s[0]),
	}
}

// kldEdges are the KLD histogram's bin edges, 10^(k/5) for k = -30..10:
// five bins a decade from 1e-6 to 100 nats, the same for every report so
// that histograms compare.
var kldEdges = func() []float64 {
	var e []float64
	for k := -30; k <= 10; k++ {
		e = append(e, math.Pow(10, float64(k)/5))
	}
	return e
}()

func histogram(xs []float64) report.Histogram {
	h := report.Histogram{Counts: make([]int, len(kldEdges)+1)}
	for _, e := range kldEdges {
		h.Edges = append(h.Edges, report.F(e))
	}
	for _, x := range xs {
		h.Counts[sort.SearchFloat64s(kldEdges, math.Nextafter(x, math.Inf(1)))]++
	}
	return h
}

func deltaP(dp []float64) *report.DeltaP {
	d := &report.DeltaP{Dist: dist(dp)}
	sq := make([]float64, len(dp))
	for i, x := range dp {
		sq[i] = x * x
	}
	mse, mseSE := stats.MeanSE(sq)
	rms := math.Sqrt(mse)
	d.RMS = report.F(rms)
	if rms > 0 {
		d.RMSSE = report.F(0.5 / rms * mseSE)
	}
	return d
}

// reference compares the model's per-token NLL with the reference's on
// the same targets, as llama-perplexity's "Perplexity statistics".
func reference(nll, ref []float64) *report.Reference {
	m, se := stats.MeanSE(nll)
	mr, ser := stats.MeanSE(ref)
	cov := stats.CovMean(nll, ref)
	ppl, pplr := math.Exp(m), math.Exp(mr)
	lnr := m - mr
	lnrSE := math.Sqrt(math.Max(0, float64(se*se)+float64(ser*ser)-float64(2*cov)))
	out := &report.Reference{
		MeanNLL:      report.F(mr),
		PPL:          report.F(pplr),
		PPLSE:        report.F(pplr * ser),
		LnPPLRatio:   report.F(lnr),
		LnPPLRatioSE: report.F(lnrSE),
		PPLRatio:     report.F(math.Exp(lnr)),
		PPLRatioSE:   report.F(math.Exp(lnr) * lnrSE),
		PPLDiff:      report.F(ppl - pplr),
		PPLDiffSE: report.F(math.Sqrt(math.Max(0,
			float64((ppl*se)*(ppl*se))+float64((pplr*ser)*(pplr*ser))-float64(2*ppl*pplr*cov)))),
	}
	if se > 0 && ser > 0 {
		out.Correlation = report.F(cov / (se * ser))
	}
	return out
}
