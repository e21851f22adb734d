package compare

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Formats lists the output formats.
var Formats = []string{"table", "json", "markdown", "html"}

// Columns returns the column titles of a domain's table; the KLD columns
// only when some report has KLD statistics in the domain.
func Columns(d Domain) []string {
	c := []string{"report", "tokens", "PPL", "95% CI", "bits/byte", "Δ PPL", "ratio", "ratio 95% CI", "pairing", "verdict"}
	if HasKLD(d) {
		c = append(c, "mean KLD", "p99 KLD", "top-1")
	}
	return c
}

// HasKLD reports whether a report has KLD statistics in the domain.
func HasKLD(d Domain) bool {
	for _, r := range d.Rows {
		if r.MeanKLD != nil || r.Top1 != nil {
			return true
		}
	}
	return false
}

// Cells returns a row's cells, matching Columns.
func Cells(d Domain, r Row) []string {
	kld := HasKLD(d)
	if !r.Present {
		c := []string{r.Report, "-", "absent", "-", "-", "-", "-", "-", "-", "-"}
		if kld {
			c = append(c, "-", "-", "-")
		}
		return c
	}
	c := []string{r.Report, fmt.Sprint(r.ScoredTokens), fmt.Sprintf("%.4f", r.PPL), "-", fmt.Sprintf("%.6f", r.BitsPerByte), "-", "-", "-", "-", "-"}
	if r.PPLCI != nil {
		c[3] = fmt.Sprintf("[%.4f, %.4f]", r.PPLCI[0], r.PPLCI[1])
	}
	if dl := r.Delta; dl != nil {
		c[5] = fmt.Sprintf("%+.4f", dl.PPL)
		c[6] = fmt.Sprintf("%.6f", dl.Ratio)
		if dl.HasCI {
			c[7] = fmt.Sprintf("[%.6f, %.6f]", dl.RatioCI[0], dl.RatioCI[1])
		}
		c[8] = "unpaired"
		if dl.Paired {
			c[8] = "paired"
		}
		c[9] = VerdictCell(dl)
	}
	if kld {
		c = append(c, "-", "-", "-")
		if r.MeanKLD != nil {
			c[10] = fmt.Sprintf("%.6f", *r.MeanKLD)
			c[11] = fmt.Sprintf("%.6f", *r.P99KLD)
		}
		if r.Top1 != nil {
			c[12] = fmt.Sprintf("%.2f%%", 100**r.Top1)
		}
	}
	return c
}

// VerdictCell is the verdict with what it is on when that is not PPL:
// "worse (KLD)", "better (bits/byte)".
func VerdictCell(dl *Delta) string {
	switch dl.VerdictOn {
	case "kld":
		return dl.Verdict + " (KLD)"
	case "bits_per_byte":
		return dl.Verdict + " (bits/byte)"
	}
	return dl.Verdict
}

// HasKLDStats reports whether a row of the domain has llama.cpp's KLD
// statistics.
func HasKLDStats(d Domain) bool {
	for _, r := range d.Rows {
		if r.KLDStats != nil {
			return true
		}
	}
	return false
}

// KLDColumns are the titles of a domain's table of llama-perplexity's
// statistics against the reference (--kl-divergence). Δp is llama.cpp's:
// p_model − p_reference of the actual token, negative when worse.
func KLDColumns() []string {
	return []string{"report", "mean KLD", "Δ KLD", "Δ KLD 95% CI", "KLD median", "p90", "p99", "p99.9", "max",
		"mean Δp", "RMS Δp", "PPL(Q)/PPL(ref)", "same top p"}
}

// KLDCells are a row's cells of the KLD table, matching KLDColumns.
func KLDCells(r Row) []string {
	c := []string{r.Report, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"}
	k := r.KLDStats
	if k == nil {
		return c
	}
	if r.MeanKLD != nil {
		c[1] = fmt.Sprintf("%.6f", *r.MeanKLD)
	}
	if r.Delta != nil && r.Delta.KLD != nil {
		c[2] = fmt.Sprintf("%+.6f", r.Delta.KLD.Diff)
		if r.Delta.KLD.HasCI {
			c[3] = fmt.Sprintf("[%+.6f, %+.6f]", r.Delta.KLD.CI[0], r.Delta.KLD.CI[1])
		}
	}
	c[4], c[5], c[6], c[7], c[8] = fmt.Sprintf("%.6f", k.Median), fmt.Sprintf("%.6f", k.P90), fmt.Sprintf("%.6f", k.P99), fmt.Sprintf("%.6f", k.P999), fmt.Sprintf("%.6f", k.Max)
	if k.HasDeltaP {
		c[9] = fmt.Sprintf("%+.3f ± %.3f %%", 100*k.DeltaP, 100*k.DeltaPSE)
		c[10] = fmt.Sprintf("%.3f %%", 100*k.DeltaPRMS)
	}
	if k.HasPPLRatio {
		c[11] = fmt.Sprintf("%.6f ± %.6f", k.PPLRatio, k.PPLRatioSE)
	}
	if k.HasSameTop {
		c[12] = fmt.Sprintf("%.3f ± %.3f %%", 100*k.SameTop, 100*k.SameTopSE)
	}
	return c
}

// KLDNote explains the KLD table.
const KLDNote = "KLD = KL(reference ‖ model); Δp = p_model − p_reference of the actual token, llama-perplexity's sign (negative: the model is worse); Δ KLD = candidate − base, paired over windows."

// Title is a domain's heading.
func Title(d Domain) string {
	if d.Overall {
		return "overall"
	}
	return "domain " + d.Name
}

// Warnings returns the mismatches and notes as lines.
func Warnings(res *Result) []string {
	var w []string
	for _, m := range res.Mismatches {
		w = append(w, "mismatch: "+m.String())
	}
	w = append(w, res.Notes...)
	return w
}

// WriteTable writes the plain-text tables.
func WriteTable(w io.Writer, res *Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, r := range res.Reports {
		role := "candidate"
		if i == 0 {
			role = "base"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", role, r.Label, r.Model, short(r.SHA256), r.Protocol)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(res.Differences) > 0 {
		fmt.Fprintln(w, "\nsettings that differ:")
		for _, s := range res.Differences {
			fmt.Fprintf(tw, "  %s\t%s\n", s.Name, strings.Join(s.Values, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, l := range Warnings(res) {
		fmt.Fprintln(w, "warning: "+l)
	}
	for _, d := range res.Domains {
		fmt.Fprintf(w, "\n== %s ==\n", Title(d))
		fmt.Fprintln(tw, strings.Join(Columns(d), "\t"))
		for _, r := range d.Rows {
			fmt.Fprintln(tw, strings.Join(Cells(d, r), "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if HasKLDStats(d) {
			fmt.Fprintln(w)
			fmt.Fprintln(tw, strings.Join(KLDColumns(), "\t"))
			for _, r := range d.Rows {
				fmt.Fprintln(tw, strings.Join(KLDCells(r), "\t"))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
	}
	if hasKLDStats(res) {
		fmt.Fprintln(w, "\n"+KLDNote)
	}
	return nil
}

func hasKLDStats(res *Result) bool {
	for _, d := range res.Domains {
		if HasKLDStats(d) {
			return true
		}
	}
	return false
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// WriteMarkdown writes GitHub-flavoured Markdown tables.
func WriteMarkdown(w io.Writer, res *Result) error {
	fmt.Fprintln(w, "# Perplexity comparison")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| role | report | model | sha256 | protocol |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- |")
	for i, r := range res.Reports {
		role := "candidate"
		if i == 0 {
			role = "base"
		}
		fmt.Fprintf(w, "| %s | %s | %s | `%s` | %s |\n", role, md(r.Label), md(r.Model), short(r.SHA256), md(r.Protocol))
	}
	if len(res.Differences) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Settings that differ:")
		fmt.Fprintln(w)
		head := []string{"setting"}
		for _, r := range res.Reports {
			head = append(head, md(r.Label))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(head, " | "))
		fmt.Fprintf(w, "|%s\n", strings.Repeat(" --- |", len(head)))
		for _, s := range res.Differences {
			cells := []string{md(s.Name)}
			for _, v := range s.Values {
				cells = append(cells, md(v))
			}
			fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
		}
	}
	if ws := Warnings(res); len(ws) > 0 {
		fmt.Fprintln(w)
		for _, l := range ws {
			fmt.Fprintf(w, "- **warning**: %s\n", md(l))
		}
	}
	for _, d := range res.Domains {
		fmt.Fprintf(w, "\n## %s\n\n", md(Title(d)))
		cols := Columns(d)
		fmt.Fprintf(w, "| %s |\n", strings.Join(cols, " | "))
		align := make([]string, len(cols))
		for i := range align {
			align[i] = "---:"
		}
		align[0], align[8], align[9] = "---", "---", "---"
		fmt.Fprintf(w, "| %s |\n", strings.Join(align, " | "))
		for _, r := range d.Rows {
			cells := Cells(d, r)
			for i := range cells {
				cells[i] = md(cells[i])
			}
			fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
		}
		if HasKLDStats(d) {
			cols := KLDColumns()
			fmt.Fprintf(w, "\n| %s |\n", strings.Join(cols, " | "))
			fmt.Fprintf(w, "| --- |%s\n", strings.Repeat(" ---: |", len(cols)-1))
			for _, r := range d.Rows {
				cells := KLDCells(r)
				for i := range cells {
					cells[i] = md(cells[i])
				}
				fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
			}
		}
	}
	if hasKLDStats(res) {
		fmt.Fprintln(w, "\n"+md(KLDNote))
	}
	fmt.Fprintf(w, "\nIntervals: 95%%, bootstrap over windows (%d resamples, seed %d); ratio = candidate PPL / base PPL.\n",
		res.Bootstrap.Resamples, res.Bootstrap.Seed)
	return nil
}

var mdEscaper = strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;")

func md(s string) string { return mdEscaper.Replace(s) }

// WriteJSON writes the result as indented JSON.
func WriteJSON(w io.Writer, res *Result) error {
	b, err := json.MarshalIndent(res, "", " ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
