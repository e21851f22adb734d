// Package compare sets perplexity reports side by side: per domain, the
// PPL of each, and for each candidate against the base the difference, the
// ratio and a confidence interval from a paired bootstrap over windows,
// with a verdict.
//
// Two perplexities are only comparable when they were measured on the same
// text under the same protocol, so Check refuses reports whose corpus,
// stream sha256s, protocol, context or stride differ (the caller may
// override it and show the differences). When both reports scored the same
// windows of the same tokens, each window is a matched pair: the bootstrap
// resamples windows and takes the candidate's and the base's NLL on the
// same draw, so the noise that both models share (hard passages are hard
// for both) cancels, and the interval is much tighter than two independent
// ones. Otherwise (different tokenizers, or a protocol mismatch that was
// allowed) the two are resampled independently, and the result says so.
package compare

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"

	"ppl.dev/aggregate/report"
	"ppl.dev/aggregate/stats"
)

// Version is ppl-compare's version.
const Version = "0.1.0"

// Input is one report to compare.
type Input struct {
	Path   string
	Label  string
	Report *report.Report
}

// Load reads the reports at paths (files, or directories holding
// report.json) and labels each by its file name, or by its path when two
// names collide.
func Load(paths []string) ([]Input, error) {
	var out []Input
	count := map[string]int{}
	for _, p := range paths {
		r, err := report.Read(p)
		if err != nil {
			return nil, err
		}
		if path := report.NonFinite(r); path != "" {
			return nil, fmt.Errorf("%s: %s is not a finite number (null in the file): the report cannot be compared", p, path)
		}
		out = append(out, Input{Path: p, Label: label(p), Report: r})
		count[out[len(out)-1].Label]++
	}
	for i := range out {
		if count[out[i].Label] > 1 {
			out[i].Label = out[i].Path
		}
	}
	return out, nil
}

// label names a report by its file, or by its directory when the file is
// report.json.
func label(path string) string {
	path = filepath.Clean(path)
	if filepath.Base(path) == report.FileName {
		path = filepath.Dir(path)
	}
	return filepath.Base(path)
}

// Mismatch is a difference between the base and another report that makes
// their perplexities incomparable.
type Mismatch struct {
	BaseReport string `json:"base_report"`
	Report     string `json:"report"`
	Field      string `json:"field"`
	Base       string `json:"base"`
	Value      string `json:"value"`
}

func (m Mismatch) String() string {
	return fmt.Sprintf("%s differs: %s in %s, %s in %s", m.Field, m.Base, m.BaseReport, m.Value, m.Report)
}

// Check lists the differences between base and other in corpus, streams,
// protocol, context and stride.
func Check(base, other Input) []Mismatch {
	var out []Mismatch
	add := func(field, b, o string) {
		if b != o {
			out = append(out, Mismatch{BaseReport: base.Label, Report: other.Label, Field: field, Base: b, Value: o})
		}
	}
	bw, ow := base.Report.Workload, other.Report.Workload
	add("corpus", corpusName(bw), corpusName(ow))
	ostreams := map[string]string{}
	for _, s := range ow.Streams {
		ostreams[s.ID] = s.SHA256
	}
	bstreams := map[string]bool{}
	for _, s := range bw.Streams {
		bstreams[s.ID] = true
		sha, ok := ostreams[s.ID]
		if !ok {
			add("stream set", "stream "+strconv.Quote(s.ID), "no such stream")
			continue
		}
		add("stream sha256", fmt.Sprintf("%q %s", s.ID, s.SHA256), fmt.Sprintf("%q %s", s.ID, sha))
	}
	for _, s := range ow.Streams {
		if !bstreams[s.ID] {
			add("stream set", "no such stream", "stream "+strconv.Quote(s.ID))
		}
	}
	add("protocol", bw.Protocol.Mode, ow.Protocol.Mode)
	add("context", strconv.Itoa(bw.Protocol.Context), strconv.Itoa(ow.Protocol.Context))
	add("stride", strconv.Itoa(bw.Protocol.Stride), strconv.Itoa(ow.Protocol.Stride))
	return out
}

func corpusName(w report.Workload) string {
	if w.Corpus == nil {
		return `""`
	}
	s := w.Corpus.Name
	if w.Corpus.Version != "" {
		s += " " + w.Corpus.Version
	}
	return strconv.Quote(s)
}

// Options are the comparison's settings.
type Options struct {
	Resamples     int
	Seed          uint64
	AllowMismatch bool
}

// Result is the whole comparison.
type Result struct {
	Reports []ReportInfo `json:"reports"`
	// Differences lists the settings (KV dtype, activations, device,
	// weight types, RoPE, reference, protocol, ...) whose values differ
	// between the reports.
	Differences []Setting  `json:"differences"`
	Mismatches  []Mismatch `json:"mismatches"`
	Notes       []string   `json:"notes"`
	Bootstrap   struct {
		Resamples int    `json:"resamples"`
		Seed      uint64 `json:"seed"`
	} `json:"bootstrap"`
	// Domains lists the domains of the base, then those only in other
	// reports, then "overall".
	Domains []Domain `json:"domains"`
}

// ReportInfo identifies one compared report.
type ReportInfo struct {
	Label     string `json:"label"`
	Path      string `json:"path"`
	Model     string `json:"model"`
	SHA256    string `json:"sha256"`
	Tokenizer string `json:"tokenizer"`
	Protocol  string `json:"protocol"`
	Created   string `json:"created"`
	HasKLD    bool   `json:"has_kld"`
}

// Domain is one domain (or the whole corpus) across the reports.
type Domain struct {
	Name    string `json:"name"`
	Overall bool   `json:"overall"`
	Rows    []Row  `json:"rows"` // one per report, base first
}

// Row is one report's result in a domain.
type Row struct {
	Report       string   `json:"report"`
	Present      bool     `json:"present"`
	Streams      int      `json:"streams,omitempty"`
	ScoredTokens int      `json:"scored_tokens,omitempty"`
	MeanNLL      report.F `json:"mean_nll"`
	PPL          report.F `json:"ppl"`
	// PPLCI is the report's own 95% interval: bootstrap, else naive.
	PPLCI       *[2]report.F `json:"ppl_ci,omitempty"`
	BitsPerByte report.F     `json:"bits_per_byte"`
	// Delta compares the row with the base's; absent in the base row.
	Delta *Delta `json:"delta,omitempty"`
	// KLD statistics, when the report has them.
	MeanKLD *report.F `json:"mean_kld,omitempty"`
	P99KLD  *report.F `json:"p99_kld,omitempty"`
	Top1    *report.F `json:"top1_agreement,omitempty"`
	// KLDStats are llama-perplexity's statistics against the reference,
	// when the report has them.
	KLDStats *KLDStats `json:"kld_stats,omitempty"`
}

// KLDStats are the statistics llama-perplexity prints with
// --kl-divergence, from the report: the KLD distribution, Δp and the PPL
// ratio to the reference. DeltaP follows llama.cpp's sign: p_model −
// p_reference of the actual token, negative when the model is worse (the
// report's delta_p is p_reference − p_model).
type KLDStats struct {
	Median      report.F `json:"median"`
	P90         report.F `json:"p90"`
	P99         report.F `json:"p99"`
	P999        report.F `json:"p99.9"`
	Max         report.F `json:"max"`
	DeltaP      report.F `json:"delta_p"` // mean p_model − p_reference, llama.cpp's "Mean Δp"
	DeltaPSE    report.F `json:"delta_p_se"`
	DeltaPRMS   report.F `json:"delta_p_rms"`
	PPLRatio    report.F `json:"ppl_ratio"` // PPL(model) / PPL(reference)
	PPLRatioSE  report.F `json:"ppl_ratio_se"`
	SameTop     report.F `json:"same_top_p"` // llama.cpp's "Same top p": top-1 agreement
	SameTopSE   report.F `json:"same_top_p_se"`
	HasDeltaP   bool     `json:"has_delta_p"`
	HasPPLRatio bool     `json:"has_ppl_ratio"`
	HasSameTop  bool     `json:"has_same_top_p"`
}

// Delta is a candidate against the base in one domain.
type Delta struct {
	PPL       report.F    `json:"ppl"`   // candidate − base
	Ratio     report.F    `json:"ratio"` // candidate / base
	MeanNLL   report.F    `json:"mean_nll"`
	RatioCI   [2]report.F `json:"ratio_ci"`
	MeanNLLCI [2]report.F `json:"mean_nll_ci"`
	HasCI     bool        `json:"has_ci"`
	Paired    bool        `json:"paired"`
	Windows   int         `json:"windows"`
	// VerdictOn says what the verdict is on: "kld" when both reports have
	// KLD against the same reference (the mean KLD, paired over windows),
	// "bits_per_byte" across tokenizers (PPL counts different tokens),
	// else "ppl".
	VerdictOn string `json:"verdict_on"`
	Verdict   string `json:"verdict"`
	// KLD is the candidate's mean KLD minus the base's, with its 95%
	// interval, when the verdict is on KLD.
	KLD *Diff `json:"kld,omitempty"`
	// BitsPerByte is the candidate's minus the base's, with its 95%
	// interval (unpaired), across tokenizers.
	BitsPerByte *Diff `json:"bits_per_byte,omitempty"`
}

// Diff is a candidate's value minus the base's, with a 95% bootstrap
// interval when HasCI.
type Diff struct {
	Diff  report.F    `json:"diff"`
	CI    [2]report.F `json:"ci"`
	HasCI bool        `json:"has_ci"`
}

// Verdicts.
const (
	Equal  = "equal within noise"
	Better = "better"
	Worse  = "worse"
	NoCI   = "n/a"
)

// MismatchError is the refusal to compare incomparable reports.
type MismatchError struct{ Mismatch }

func (e MismatchError) Error() string {
	return fmt.Sprintf("%s: %s (--allow-protocol-mismatch compares anyway)", e.Report, e.Mismatch)
}

// Compare compares inputs[1:] with inputs[0].
func Compare(inputs []Input, opt Options) (*Result, error) {
	if len(inputs) < 2 {
		return nil, errors.New("need a base and at least one candidate report")
	}
	res := &Result{Mismatches: []Mismatch{}, Notes: []string{}}
	res.Bootstrap.Resamples, res.Bootstrap.Seed = opt.Resamples, opt.Seed
	base := inputs[0]
	for _, in := range inputs[1:] {
		ms := Check(base, in)
		if len(ms) > 0 && !opt.AllowMismatch {
			return nil, MismatchError{ms[0]}
		}
		res.Mismatches = append(res.Mismatches, ms...)
		if tokID(base.Report) != tokID(in.Report) {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: tokenizer differs from the base's (%s, %s): PPL counts different tokens, compare bits per byte; windows unpaired",
				in.Label, tokID(in.Report), tokID(base.Report)))
		}
	}
	for _, in := range inputs {
		res.Reports = append(res.Reports, info(in))
	}
	res.Differences = Differences(inputs)
	for _, d := range domainNames(inputs) {
		res.Domains = append(res.Domains, compareDomain(inputs, d, false, opt))
	}
	res.Domains = append(res.Domains, compareDomain(inputs, "overall", true, opt))
	return res, nil
}

func tokID(r *report.Report) string {
	if r.Workload.Tokenizer == nil {
		return ""
	}
	return r.Workload.Tokenizer.ID
}

func info(in Input) ReportInfo {
	w := in.Report.Workload
	ri := ReportInfo{Label: in.Label, Path: in.Path, Tokenizer: tokID(in.Report), Created: in.Report.Run.Created,
		HasKLD: in.Report.Overall.KLD != nil}
	if w.Model != nil {
		ri.Model, ri.SHA256 = w.Model.Name, w.Model.SHA256
	}
	ri.Protocol = fmt.Sprintf("%s context %d", w.Protocol.Mode, w.Protocol.Context)
	if w.Protocol.Stride > 0 {
		ri.Protocol += fmt.Sprintf(" stride %d", w.Protocol.Stride)
	}
	return ri
}

func domainNames(inputs []Input) []string {
	var names []string
	seen := map[string]bool{}
	for _, in := range inputs {
		for _, g := range in.Report.Domains {
			if !seen[g.Name] {
				seen[g.Name] = true
				names = append(names, g.Name)
			}
		}
	}
	return names
}

func group(r *report.Report, name string, overall bool) *report.Group {
	if overall {
		return &r.Overall
	}
	for i := range r.Domains {
		if r.Domains[i].Name == name {
			return &r.Domains[i]
		}
	}
	return nil
}

func compareDomain(inputs []Input, name string, overall bool, opt Options) Domain {
	d := Domain{Name: name, Overall: overall}
	baseG := group(inputs[0].Report, name, overall)
	for i, in := range inputs {
		g := group(in.Report, name, overall)
		row := Row{Report: in.Label}
		if g != nil && g.Perplexity != nil {
			p := g.Perplexity
			row.Present = true
			row.Streams, row.ScoredTokens = g.Streams, g.ScoredTokens
			row.MeanNLL, row.PPL, row.BitsPerByte = p.MeanNLL, p.PPL, p.BitsPerByte
			if p.Bootstrap != nil {
				ci := p.Bootstrap.PPLCI
				row.PPLCI = &ci
			} else if p.Naive != nil {
				ci := p.Naive.PPLCI
				row.PPLCI = &ci
			}
			if g.KLD != nil {
				m, p99 := g.KLD.Mean, g.KLD.P99
				row.MeanKLD, row.P99KLD = &m, &p99
			}
			if g.Top1 != nil {
				a := g.Top1.Agreement
				row.Top1 = &a
			}
			row.KLDStats = kldStats(g)
			if i > 0 && baseG != nil && baseG.Perplexity != nil {
				row.Delta = delta(inputs[0], in, name, overall, i, opt)
			}
		}
		d.Rows = append(d.Rows, row)
	}
	return d
}

// windowSums lists the windows of a domain (streams in report order, then
// window index) with their NLL sums and token counts.
type windowSums struct {
	keys []string
	nll  []float64
	n    []float64
}

func sums(r *report.Report, name string, overall bool) windowSums {
	var ws windowSums
	sha := map[string]string{}
	for _, s := range r.Workload.Streams {
		sha[s.ID] = s.SHA256
	}
	for _, s := range r.Streams {
		if !overall && s.Domain != name {
			continue
		}
		for _, w := range s.Windows {
			ws.keys = append(ws.keys, fmt.Sprintf("%s\x00%s\x00%d\x00%d\x00%d\x00%d\x00%v", s.Name, sha[s.Name], w.Index, w.Begin, w.End, w.ScoreFrom, w.BOS))
			ws.nll = append(ws.nll, -float64(w.SumLogprob))
			ws.n = append(ws.n, float64(w.ScoredTokens))
		}
	}
	return ws
}

func delta(base, cand Input, name string, overall bool, idx int, opt Options) *Delta {
	bg, cg := group(base.Report, name, overall).Perplexity, group(cand.Report, name, overall).Perplexity
	dn := float64(cg.MeanNLL) - float64(bg.MeanNLL)
	out := &Delta{
		PPL:     cg.PPL - bg.PPL,
		Ratio:   report.F(math.Exp(dn)),
		MeanNLL: report.F(dn),
		Verdict: NoCI,
	}
	b, c := sums(base.Report, name, overall), sums(cand.Report, name, overall)
	out.Paired = tokID(base.Report) == tokID(cand.Report) && sameKeys(b, c)
	out.Windows = len(b.keys)
	key := fmt.Sprintf("compare:%s:%d", name, idx)
	var reps []float64
	if out.Paired {
		diff := make([]float64, len(b.nll))
		for i := range diff {
			diff[i] = c.nll[i] - b.nll[i]
		}
		reps = stats.Replicates(diff, b.n, opt.Resamples, stats.NewRand(stats.Seed(opt.Seed, key)))
	} else {
		rb := stats.Replicates(b.nll, b.n, opt.Resamples, stats.NewRand(stats.Seed(opt.Seed, key+":base")))
		rc := stats.Replicates(c.nll, c.n, opt.Resamples, stats.NewRand(stats.Seed(opt.Seed, key+":candidate")))
		if rb != nil && rc != nil {
			reps = make([]float64, len(rb))
			for i := range reps {
				reps[i] = rc[i] - rb[i]
			}
		}
		out.Windows = min(len(b.keys), len(c.keys))
	}
	out.VerdictOn = "ppl"
	if reps != nil {
		iv := stats.Summarize(reps)
		out.HasCI = true
		out.MeanNLLCI = [2]report.F{report.F(iv.Lo), report.F(iv.Hi)}
		out.RatioCI = [2]report.F{report.F(math.Exp(iv.Lo)), report.F(math.Exp(iv.Hi))}
		out.Verdict = verdict(iv)
	}
	cgroup, bgroup := group(cand.Report, name, overall), group(base.Report, name, overall)
	if tokID(base.Report) != tokID(cand.Report) {
		// PPL counts different tokens: the verdict is on bits per byte.
		out.VerdictOn, out.Verdict = "bits_per_byte", NoCI
		d := &Diff{Diff: cg.BitsPerByte - bg.BitsPerByte}
		out.BitsPerByte = d
		if bb, cb := bgroup.Bytes, cgroup.Bytes; bb > 0 && cb > 0 {
			rb := stats.Replicates(b.nll, b.n, opt.Resamples, stats.NewRand(stats.Seed(opt.Seed, key+":base")))
			rc := stats.Replicates(c.nll, c.n, opt.Resamples, stats.NewRand(stats.Seed(opt.Seed, key+":candidate")))
			if rb != nil && rc != nil {
				// A replicate of the mean NLL per token, times the tokens,
				// over the bytes and ln 2: bits per byte.
				kb := float64(bgroup.ScoredTokens) / (float64(bb) * math.Ln2)
				kc := float64(cgroup.ScoredTokens) / (float64(cb) * math.Ln2)
				reps := make([]float64, len(rb))
				for i := range reps {
					reps[i] = float64(kc*rc[i]) - float64(kb*rb[i])
				}
				iv := stats.Summarize(reps)
				d.CI, d.HasCI = [2]report.F{report.F(iv.Lo), report.F(iv.Hi)}, true
				out.Verdict = verdict(iv)
			}
		}
		return out
	}
	if sameReference(base, cand) && bgroup.KLD != nil && cgroup.KLD != nil {
		out.VerdictOn, out.Verdict = "kld", NoCI
		d := &Diff{Diff: cgroup.KLD.Mean - bgroup.KLD.Mean}
		out.KLD = d
		bk, ok1 := kldSums(base.Report, name, overall)
		ck, ok2 := kldSums(cand.Report, name, overall)
		if ok1 && ok2 && sameKeys(bk, ck) {
			diff := make([]float64, len(bk.nll))
			for i := range diff {
				diff[i] = ck.nll[i] - bk.nll[i]
			}
			if reps := stats.Replicates(diff, bk.n, opt.Resamples, stats.NewRand(stats.Seed(opt.Seed, key+":kld"))); reps != nil {
				iv := stats.Summarize(reps)
				d.CI, d.HasCI = [2]report.F{report.F(iv.Lo), report.F(iv.Hi)}, true
				out.Verdict = verdict(iv)
			}
		}
	}
	return out
}

// verdict reads a 95% interval of candidate − base, where lower is better.
func verdict(iv stats.Interval) string {
	switch {
	case iv.Lo > 0:
		return Worse
	case iv.Hi < 0:
		return Better
	}
	return Equal
}

// sameReference reports whether both reports measured KLD against the
// same reference model with the same reference KV cache.
func sameReference(a, b Input) bool {
	sa, sb := Settings(a.Report), Settings(b.Report)
	return sa["reference"] != "" && sa["reference"] == sb["reference"] && sa["reference kv dtype"] == sb["reference kv dtype"]
}

// kldSums is sums for the KLD: each window's summed KLD (mean times
// targets); ok is false when a window lacks its mean KLD.
func kldSums(r *report.Report, name string, overall bool) (windowSums, bool) {
	ws := sums(r, name, overall)
	i := 0
	for _, s := range r.Streams {
		if !overall && s.Domain != name {
			continue
		}
		for _, w := range s.Windows {
			if w.MeanKLD == nil {
				return ws, false
			}
			ws.nll[i] = float64(*w.MeanKLD) * float64(w.ScoredTokens)
			i++
		}
	}
	return ws, true
}

// kldStats collects llama-perplexity's KLD statistics from a group.
func kldStats(g *report.Group) *KLDStats {
	if g.KLD == nil {
		return nil
	}
	k := &KLDStats{Median: g.KLD.P50, P90: g.KLD.P90, P99: g.KLD.P99, P999: g.KLD.P999, Max: g.KLD.Max}
	if dp := g.DeltaP; dp != nil {
		k.DeltaP, k.DeltaPSE, k.DeltaPRMS, k.HasDeltaP = -dp.Mean, dp.SE, dp.RMS, true
	}
	if ref := g.Reference; ref != nil {
		k.PPLRatio, k.PPLRatioSE, k.HasPPLRatio = ref.PPLRatio, ref.PPLRatioSE, true
	}
	if t := g.Top1; t != nil {
		k.SameTop, k.SameTopSE, k.HasSameTop = t.Agreement, t.SE, true
	}
	return k
}

func sameKeys(a, b windowSums) bool {
	if len(a.keys) != len(b.keys) || len(a.keys) == 0 {
		return false
	}
	for i := range a.keys {
		if a.keys[i] != b.keys[i] || a.n[i] != b.n[i] {
			return false
		}
	}
	return true
}

// Streams returns the stream ids of all inputs, base order first.
func Streams(inputs []Input) []string {
	var ids []string
	seen := map[string]bool{}
	for _, in := range inputs {
		for _, s := range in.Report.Streams {
			if !seen[s.Name] {
				seen[s.Name] = true
				ids = append(ids, s.Name)
			}
		}
	}
	return ids
}

// StreamWindows returns a stream's per-window mean NLL in a report, by
// window index (nil when the report lacks the stream).
func StreamWindows(r *report.Report, id string) (index []int, nll []float64) {
	for _, s := range r.Streams {
		if s.Name != id {
			continue
		}
		ws := append([]report.Window(nil), s.Windows...)
		sort.Slice(ws, func(i, j int) bool { return ws[i].Index < ws[j].Index })
		for _, w := range ws {
			index = append(index, w.Index)
			nll = append(nll, float64(w.MeanNLL))
		}
	}
	return index, nll
}
