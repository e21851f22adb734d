// Package html renders a comparison as one self-contained HTML page:
// inline CSS, inline SVG charts and a few lines of inline script, no
// network access (a Content-Security-Policy forbids it), so the file can be
// mailed, archived or attached to a release and still open in any browser.
//
// The page holds, in order: the reports compared and any mismatch; per
// domain a bar chart of each report's PPL with its 95% interval and the
// comparison table; the same for the whole corpus; the per-window NLL curve
// of every stream with one line per report; and the KLD histogram of every
// report that has one.
package html

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"

	"ppl.dev/aggregate/report"
	"ppl.dev/compare"
)

// palette colours the reports, base first (colour-blind-safe, Okabe-Ito).
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"}

func colour(i int) string { return palette[i%len(palette)] }

type section struct {
	Title   string
	ID      string
	Chart   template.HTML
	Columns []string
	Rows    [][]string
	// KLDColumns and KLDRows are llama-perplexity's KLD statistics, when
	// a report has them.
	KLDColumns []string
	KLDRows    [][]string
}

type curve struct {
	Stream string
	Chart  template.HTML
}

type page struct {
	Reports     []compare.ReportInfo
	Differences []compare.Setting
	KLDNote     string
	Colours     []string
	Warnings    []string
	Domains     []section
	Overall     section
	Curves      []curve
	Histogram   template.HTML
	Resamples   int
	Seed        uint64
	NumDomains  int
}

// Write renders the comparison of inputs (as given to compare.Compare)
// to w.
func Write(w io.Writer, res *compare.Result, inputs []compare.Input) error {
	p := page{Reports: res.Reports, Differences: res.Differences, Warnings: compare.Warnings(res), Resamples: res.Bootstrap.Resamples, Seed: res.Bootstrap.Seed}
	for i := range res.Reports {
		p.Colours = append(p.Colours, colour(i))
	}
	for i, d := range res.Domains {
		s := section{Title: compare.Title(d), ID: fmt.Sprintf("d%d", i), Columns: compare.Columns(d)}
		for _, r := range d.Rows {
			s.Rows = append(s.Rows, compare.Cells(d, r))
		}
		if compare.HasKLDStats(d) {
			s.KLDColumns = compare.KLDColumns()
			for _, r := range d.Rows {
				s.KLDRows = append(s.KLDRows, compare.KLDCells(r))
			}
			p.KLDNote = compare.KLDNote
		}
		if d.Overall {
			s.Chart = bars(d, "chart overall-chart")
			p.Overall = s
		} else {
			s.Chart = bars(d, "chart domain-chart")
			p.Domains = append(p.Domains, s)
		}
	}
	p.NumDomains = len(p.Domains)
	for _, id := range compare.Streams(inputs) {
		p.Curves = append(p.Curves, curve{Stream: id, Chart: nllCurve(id, inputs)})
	}
	p.Histogram = kldHistogram(inputs)
	return tmpl.Execute(w, p)
}

func esc(s string) string { return template.HTMLEscapeString(s) }

func num(x float64) string { return fmt.Sprintf("%.2f", x) }

// bars draws one horizontal bar per report: PPL, with its 95% interval
// as a whisker. When the values lie close together (six KV dtypes within
// 0.2% of each other), the axis starts near the smallest, not at 0, so
// that the differences show; its first tick says where it starts.
func bars(d compare.Domain, class string) template.HTML {
	const width, left, right, rowH, top = 720.0, 170.0, 200.0, 30.0, 10.0
	hi, lo := 0.0, math.Inf(1)
	for _, r := range d.Rows {
		if !r.Present {
			continue
		}
		hi, lo = math.Max(hi, float64(r.PPL)), math.Min(lo, float64(r.PPL))
		if r.PPLCI != nil && finite(float64(r.PPLCI[1])) && finite(float64(r.PPLCI[0])) {
			hi, lo = math.Max(hi, float64(r.PPLCI[1])), math.Min(lo, float64(r.PPLCI[0]))
		}
	}
	if hi <= 0 || !finite(hi) {
		hi = 1
	}
	base := 0.0
	if finite(lo) && lo > 0 && lo > 0.5*hi {
		base = math.Max(0, lo-float64(0.25*(hi-lo)))
	}
	plot := width - left - right
	x := func(v float64) float64 { return left + plot*(math.Min(math.Max(v, base), hi)-base)/(hi-base) }
	height := top*2 + float64(rowH*float64(len(d.Rows))) + 20
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="%s" data-domain="%s" xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" role="img" aria-label="PPL by report, %s">`,
		class, esc(d.Name), num(width), num(height), num(width), num(height), esc(compare.Title(d)))
	for i, r := range d.Rows {
		y := top + float64(rowH*float64(i))
		fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="end" class="label"><title>%s</title>%s</text>`, num(left-8), num(y+rowH/2+4), esc(r.Report), esc(cut(r.Report, 22)))
		if !r.Present {
			fmt.Fprintf(&b, `<text x="%s" y="%s" class="value">absent</text>`, num(left+4), num(y+rowH/2+4))
			continue
		}
		ppl := float64(r.PPL)
		fmt.Fprintf(&b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s: PPL %.6g</title></rect>`,
			num(left), num(y+5), num(math.Max(1, x(ppl)-left)), num(rowH-10), colour(i), esc(r.Report), ppl)
		if ci := r.PPLCI; ci != nil && finite(float64(ci[0])) && finite(float64(ci[1])) {
			lo, up := x(float64(ci[0])), x(float64(ci[1]))
			ym := y + rowH/2
			fmt.Fprintf(&b, `<path d="M%s %sH%sM%s %sV%sM%s %sV%s" class="whisker"><title>95%% interval [%.6g, %.6g]</title></path>`,
				num(lo), num(ym), num(up), num(lo), num(ym-6), num(ym+6), num(up), num(ym-6), num(ym+6), float64(ci[0]), float64(ci[1]))
		}
		label := fmt.Sprintf("%.6g", ppl)
		if r.Delta != nil {
			label += fmt.Sprintf(" ×%.4f", float64(r.Delta.Ratio))
		}
		fmt.Fprintf(&b, `<text x="%s" y="%s" class="value">%s</text>`, num(x(hi)+6), num(y+rowH/2+4), esc(label))
	}
	axisY := top + float64(rowH*float64(len(d.Rows))) + 4
	from := "0"
	if base > 0 {
		from = fmt.Sprintf("%.6g (axis not from 0)", base)
	}
	fmt.Fprintf(&b, `<path d="M%s %sH%s" class="axis"/><text x="%s" y="%s" class="tick axis-from">%s</text><text x="%s" y="%s" text-anchor="end" class="tick">PPL %.6g</text>`,
		num(left), num(axisY), num(left+plot), num(left), num(axisY+14), esc(from), num(left+plot), num(axisY+14), hi)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// cut shortens s to n runes, ending in "…", for a label with little room
// (the whole label is in the element's title).
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// nllCurve draws the mean NLL of each window of a stream, one line per
// report.
func nllCurve(id string, inputs []compare.Input) template.HTML {
	const width, height, left, right, top, bottom = 720.0, 220.0, 60.0, 20.0, 12.0, 34.0
	type line struct {
		idx []int
		nll []float64
	}
	lines := make([]line, len(inputs))
	lo, hi, maxIdx := math.Inf(1), math.Inf(-1), 0
	for i, in := range inputs {
		idx, nll := compare.StreamWindows(in.Report, id)
		lines[i] = line{idx, nll}
		for j, v := range nll {
			if finite(v) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
			maxIdx = max(maxIdx, idx[j])
		}
	}
	if !finite(lo) {
		lo, hi = 0, 1
	}
	if hi-lo < 1e-9 {
		lo, hi = lo-0.5, hi+0.5
	}
	pw, ph := width-left-right, height-top-bottom
	x := func(i int) float64 {
		if maxIdx == 0 {
			return left + pw/2
		}
		return left + pw*float64(i)/float64(maxIdx)
	}
	y := func(v float64) float64 { return top + ph*(hi-v)/(hi-lo) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart nll-curve" data-stream="%s" xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" role="img" aria-label="mean NLL per window of stream %s">`,
		esc(id), num(width), num(height), num(width), num(height), esc(id))
	fmt.Fprintf(&b, `<path d="M%s %sV%sH%s" class="axis"/>`, num(left), num(top), num(top+ph), num(left+pw))
	fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="end" class="tick">%.4g</text><text x="%s" y="%s" text-anchor="end" class="tick">%.4g</text>`,
		num(left-4), num(top+8), hi, num(left-4), num(top+ph), lo)
	fmt.Fprintf(&b, `<text x="%s" y="%s" class="tick">0</text><text x="%s" y="%s" text-anchor="end" class="tick">window %d</text>`,
		num(left), num(top+ph+14), num(left+pw), num(top+ph+14), maxIdx)
	fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="middle" class="tick">mean NLL per window</text>`, num(left+pw/2), num(height-4))
	for i, l := range lines {
		if len(l.nll) == 0 {
			continue
		}
		var pts []string
		for j, v := range l.nll {
			if finite(v) {
				pts = append(pts, num(x(l.idx[j]))+","+num(y(v)))
			}
		}
		if len(pts) == 1 {
			fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3" fill="%s"><title>%s</title></circle>`,
				strings.Split(pts[0], ",")[0], strings.Split(pts[0], ",")[1], colour(i), esc(inputs[i].Label))
			continue
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"><title>%s</title></polyline>`,
			strings.Join(pts, " "), colour(i), esc(inputs[i].Label))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// kldHistogram draws the distribution of per-token KLD of every report
// that has one, as the fraction of its tokens in each of the report's
// fixed logarithmic bins.
func kldHistogram(inputs []compare.Input) template.HTML {
	var with []int
	for i, in := range inputs {
		if in.Report.Overall.KLD != nil {
			with = append(with, i)
		}
	}
	if len(with) == 0 {
		return ""
	}
	const width, height, left, right, top, bottom = 720.0, 240.0, 50.0, 20.0, 12.0, 40.0
	h0 := inputs[with[0]].Report.Overall.KLD.Histogram
	nb := len(h0.Counts)
	pw, ph := width-left-right, height-top-bottom
	frac := make([][]float64, len(with))
	maxF := 0.0
	for k, i := range with {
		h := inputs[i].Report.Overall.KLD.Histogram
		total := 0
		for _, c := range h.Counts {
			total += c
		}
		frac[k] = make([]float64, nb)
		for j := 0; j < nb && j < len(h.Counts); j++ {
			if total > 0 {
				frac[k][j] = float64(h.Counts[j]) / float64(total)
			}
			maxF = math.Max(maxF, frac[k][j])
		}
	}
	if maxF == 0 {
		maxF = 1
	}
	bw := pw / float64(nb)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart kld-histogram" xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" role="img" aria-label="histogram of per-token KLD">`,
		num(width), num(height), num(width), num(height))
	fmt.Fprintf(&b, `<path d="M%s %sV%sH%s" class="axis"/>`, num(left), num(top), num(top+ph), num(left+pw))
	fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="end" class="tick">%.0f%%</text><text x="%s" y="%s" text-anchor="end" class="tick">0</text>`,
		num(left-4), num(top+8), 100*maxF, num(left-4), num(top+ph))
	for j := 0; j < nb; j++ {
		for k, i := range with {
			f := frac[k][j]
			if f == 0 {
				continue
			}
			w := bw / float64(len(with))
			hgt := ph * f / maxF
			fmt.Fprintf(&b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s, %s: %.3g%% of tokens</title></rect>`,
				num(left+float64(bw*float64(j))+float64(w*float64(k))), num(top+ph-hgt), num(math.Max(w-0.5, 0.5)), num(hgt), colour(i),
				esc(inputs[i].Label), esc(binName(h0.Edges, j)), 100*f)
		}
	}
	// Decade ticks: edges are 10^(k/5), so every fifth edge is a power of ten.
	for j, e := range h0.Edges {
		lg := float64(math.Log10(float64(e))) // rounded: Log10 multiplies, never fused into lg-Round(lg)
		if math.Abs(lg-math.Round(lg)) > 1e-9 {
			continue
		}
		xx := left + float64(bw*float64(j+1))
		fmt.Fprintf(&b, `<path d="M%s %sv4" class="axis"/><text x="%s" y="%s" text-anchor="middle" class="tick">1e%d</text>`,
			num(xx), num(top+ph), num(xx), num(top+ph+16), int(math.Round(lg)))
	}
	fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="middle" class="tick">KL divergence per token (nats, log scale)</text>`, num(left+pw/2), num(height-4))
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func binName(edges []report.F, j int) string {
	switch {
	case len(edges) == 0:
		return "all"
	case j == 0:
		return fmt.Sprintf("KLD < %.3g", float64(edges[0]))
	case j >= len(edges):
		return fmt.Sprintf("KLD ≥ %.3g", float64(edges[len(edges)-1]))
	}
	return fmt.Sprintf("%.3g ≤ KLD < %.3g", float64(edges[j-1]), float64(edges[j]))
}

var tmpl = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Perplexity comparison</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8em 0; font-variant-numeric: tabular-nums; }
th, td { padding: 0.25em 0.7em; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
table.reports th, table.reports td { text-align: left; }
.scroll { max-width: 100%; overflow-x: auto; }
.legend { display: flex; flex-wrap: wrap; gap: 0.3em 1.2em; margin: 0.4em 0; }
.legend span { white-space: nowrap; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; margin-right: 0.4em; vertical-align: -0.1em; }
.warnings li { color: #a40; }
svg { display: block; max-width: 100%; height: auto; }
svg text { font: 12px system-ui, sans-serif; fill: #222; }
svg .tick { fill: #666; font-size: 11px; }
svg .axis, svg .whisker { stroke: #444; stroke-width: 1; fill: none; }
figure { margin: 1em 0; } figcaption { font-weight: 600; }
</style>
</head>
<body>
<h1>Perplexity comparison</h1>
<div class="scroll"><table class="reports">
<tr><th>report</th><th>model</th><th>sha256</th><th>tokenizer</th><th>protocol</th><th>created</th></tr>
{{range $i, $r := .Reports}}<tr><td><span class="swatch" style="background: {{index $.Colours $i}}"></span>{{$r.Label}}{{if eq $i 0}} (base){{end}}</td><td>{{$r.Model}}</td><td><code title="{{$r.SHA256}}">{{printf "%.12s" $r.SHA256}}</code></td><td><code title="{{$r.Tokenizer}}">{{printf "%.12s" $r.Tokenizer}}</code></td><td>{{$r.Protocol}}</td><td>{{$r.Created}}</td></tr>
{{end}}</table></div>
{{if .Differences}}<h2>Settings that differ</h2>
<div class="scroll"><table class="differences"><tr><th>setting</th>{{range .Reports}}<th>{{.Label}}</th>{{end}}</tr>
{{range .Differences}}<tr><td>{{.Name}}</td>{{range .Values}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table></div>
{{end}}{{if .Warnings}}<ul class="warnings">{{range .Warnings}}<li>{{.}}</li>{{end}}</ul>{{end}}
<p>Intervals are 95%: each report's own (bootstrap over windows when it has one), and for the ratio candidate PPL / base PPL a bootstrap over windows ({{.Resamples}} resamples, seed {{.Seed}}), paired when both reports scored the same windows.</p>
{{range .Domains}}<section class="domain" id="{{.ID}}">
<h2>{{.Title}}</h2>
{{.Chart}}
<div class="scroll"><table><tr>{{range .Columns}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table></div>
{{if .KLDColumns}}<div class="scroll"><table class="kld-stats"><tr>{{range .KLDColumns}}<th>{{.}}</th>{{end}}</tr>
{{range .KLDRows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table></div>
{{end}}</section>
{{end}}<section class="overall" id="overall">
<h2>{{.Overall.Title}}</h2>
{{.Overall.Chart}}
<div class="scroll"><table><tr>{{range .Overall.Columns}}<th>{{.}}</th>{{end}}</tr>
{{range .Overall.Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table></div>
{{if .Overall.KLDColumns}}<div class="scroll"><table class="kld-stats"><tr>{{range .Overall.KLDColumns}}<th>{{.}}</th>{{end}}</tr>
{{range .Overall.KLDRows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table></div>
{{end}}{{if .KLDNote}}<p>{{.KLDNote}}</p>{{end}}
</section>
<section class="curves">
<h2>Mean NLL per window</h2>
<p>One line per report; x: window index, y: the window's mean NLL.</p>
{{template "legend" .}}
{{range .Curves}}<figure><figcaption>stream {{.Stream}}</figcaption>{{.Chart}}</figure>
{{end}}</section>
<section class="kld">
<h2>KLD histogram</h2>
<p>Fraction of each report's scored tokens per bin of KL(reference ‖ model), all domains.</p>
{{if .Histogram}}{{template "legend" .}}{{end}}
{{if .Histogram}}{{.Histogram}}{{else}}<p>No report has KLD statistics.</p>{{end}}
</section>
<script>
document.body.dataset.domainCharts = String(document.querySelectorAll("svg.domain-chart").length);
document.body.dataset.ready = "1";
</script>
</body>
</html>
{{define "legend"}}<p class="legend">{{range $i, $r := .Reports}}<span><span class="swatch" style="background: {{index $.Colours $i}}"></span>{{$r.Label}}</span>{{end}}</p>{{end}}`))
