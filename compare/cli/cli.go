// Package cli implements ppl-compare: flags, loading the reports and
// choosing the output format. The comparison is package ppl.dev/compare,
// the HTML page ppl.dev/compare/html; the manual is the doc comment of
// cmd/ppl-compare.
package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"

	"github.com/alecthomas/kong"

	"ppl.dev/aggregate/report"
	"ppl.dev/command"
	"ppl.dev/compare"
	"ppl.dev/compare/html"
	"ppl.dev/pipe"
	"ppl.dev/progress"
)

const name = "ppl-compare"

// maxBootstrap bounds --bootstrap, as ppl-aggregate's: memory and time grow
// with it, and 100,000 resamples pin an interval far below any printed digit.
const maxBootstrap = 100000

const description = `Compare perplexity reports side by side.

BASE and each CANDIDATE are report.json files written by ppl-aggregate (or the
directories holding them). For each domain and overall it prints the PPL of each
report, and for each candidate the difference and ratio to the base with a 95%
confidence interval from a bootstrap over windows (paired when both scored the
same windows), a verdict (equal within noise, better or worse), and the mean KLD,
p99 KLD and top-1 agreement where the reports have them.

Reports must agree on corpus, stream sha256s, protocol, context and stride;
otherwise ppl-compare stops (exit 1) naming the field, unless
--allow-protocol-mismatch, which compares anyway and prints the differences.
Before the tables it lists the settings that differ between the reports (KV
dtype, activations, device, weight types, RoPE, reference, protocol, ...);
--label names each report (one per report, base first). When both reports have
KLD against the same reference the verdict is on the mean KLD (paired over
windows); across tokenizers it is on bits per byte. llama-perplexity's KLD
statistics (median, p90, p99, p99.9, max, Δp with llama.cpp's sign, PPL(Q)/PPL(ref),
same top p) follow each table when the reports have them.

A report holding a non-finite number is refused; so is an --output that is
one of the inputs.

Exit status: 0 on success, 1 on failure, 2 on a usage error.`

type flags struct {
	Base                  string           `arg:"" name:"BASE" help:"The base report (report.json or its directory)."`
	Candidates            []string         `arg:"" name:"CANDIDATE" help:"Reports to compare with the base."`
	Format                string           `short:"f" enum:"table,json,markdown,html" default:"table" help:"Output format: table, json, markdown or html (one self-contained page with inline SVG charts). Default ${default}."`
	Output                string           `short:"o" placeholder:"FILE" help:"Write to FILE (atomically) instead of standard output."`
	Label                 []string         `short:"l" placeholder:"NAME" help:"Name the reports, one --label per report in order (base first); default: their directory names."`
	AllowProtocolMismatch bool             `help:"Compare reports whose corpus, streams or protocol differ; the differences are printed."`
	Bootstrap             int              `default:"1000" placeholder:"N" help:"Bootstrap resamples for the paired intervals, at most 100000 (default ${default}; 0: none, and no verdict)."`
	Seed                  uint64           `default:"1" placeholder:"S" help:"Seed of the bootstrap (default ${default})."`
	LogLevel              string           `default:"info" enum:"debug,info,warn,error" help:"Least severe message to show on stderr: debug, info, warn, error."`
	Version               kong.VersionFlag `help:"Print the version and exit."`
}

// Main runs ppl-compare with os.Args and returns its exit status.
func Main() int {
	return Run(os.Args[1:], os.Stdout, os.Stderr)
}

// Run parses args, runs the tool and returns its exit status.
func Run(args []string, stdout, stderr io.Writer) int {
	return command.Exit(name, run(context.Background(), args, stdout, stderr), stderr)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f flags
	if err := command.Parse(name, compare.Version, description, &f, args, stdout, stderr); err != nil {
		return err
	}
	if f.Bootstrap < 0 || f.Bootstrap == 1 || f.Bootstrap > maxBootstrap {
		return command.Usagef("--bootstrap %d: want 0 (off) or 2 to %d resamples", f.Bootstrap, maxBootstrap)
	}
	paths := append([]string{f.Base}, f.Candidates...)
	var files []string // each input as given and, for a directory, its report.json
	for _, p := range paths {
		files = append(files, p, filepath.Join(p, report.FileName))
	}
	if err := pipe.CheckNotInput(f.Output, files...); err != nil {
		return err
	}
	if len(f.Label) > 0 && len(f.Label) != len(paths) {
		return command.Usagef("--label: %d labels for %d reports: give one per report, base first", len(f.Label), len(paths))
	}
	seen := map[string]bool{}
	for _, l := range f.Label {
		if l == "" || seen[l] {
			return command.Usagef("--label %q: labels must be distinct and not empty", l)
		}
		seen[l] = true
	}
	inputs, err := compare.Load(paths)
	if err != nil {
		return err
	}
	for i, l := range f.Label {
		inputs[i].Label = l
	}
	res, err := compare.Compare(inputs, compare.Options{Resamples: f.Bootstrap, Seed: f.Seed, AllowMismatch: f.AllowProtocolMismatch})
	if err != nil {
		return err
	}
	level, _ := progress.ParseLevel(f.LogLevel) // kong checked the enum
	log := progress.New(stderr, name, level)
	for _, w := range compare.Warnings(res) {
		log.Warnf("warning: %s", w)
	}
	var buf bytes.Buffer
	switch f.Format {
	case "json":
		err = compare.WriteJSON(&buf, res)
	case "markdown":
		err = compare.WriteMarkdown(&buf, res)
	case "html":
		err = html.Write(&buf, res, inputs)
	default:
		err = compare.WriteTable(&buf, res)
	}
	if err != nil {
		return err
	}
	if f.Output == "" {
		_, err = stdout.Write(buf.Bytes())
		return err
	}
	out, err := pipe.Create(f.Output)
	if err != nil {
		return err
	}
	defer out.Close()
	if _, err := out.Write(buf.Bytes()); err != nil {
		return err
	}
	if err := out.Commit(); err != nil {
		return err
	}
	// The temporary file was private (0600); the output is for sharing.
	if err := os.Chmod(f.Output, 0o644); err != nil {
		return err
	}
	return ctx.Err()
}
