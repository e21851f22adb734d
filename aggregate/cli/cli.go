// Package cli implements ppl-aggregate: flags, inputs, the report
// directory and the table on standard output. The computation is package
// ppl.dev/aggregate; the manual is the doc comment of cmd/ppl-aggregate.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kong"

	"ppl.dev/aggregate"
	"ppl.dev/aggregate/report"
	"ppl.dev/command"
	"ppl.dev/pipe"
	"ppl.dev/progress"
)

const name = "ppl-aggregate"

const description = `Aggregate the scores of a perplexity run into a report.

Reads scores records (the output of ppl-tokenize | ppl-window | ppl-score) from the
files given, or from standard input when there are none ("-" also names standard
input); .ndjson.zst files are decompressed. Several files are merged, e.g. the
shards of one run made with ppl-window --shard; they must agree on model sha256,
tokenizer id, corpus, protocol, kv dtype and reference model, and together hold
every window of the protocol exactly once, each stream's end trailer included.

Writes report.json (schema 1, docs/report.md) into --output, and prints a table per
domain and overall on standard output: streams, scored tokens, mean NLL, PPL and
95% confidence intervals (naive, and a block bootstrap over windows), and mean
KLD, p99 KLD and top-1 agreement when the scores carry kld.

Exit status: 0 on success, 1 on failure, 2 on a usage error.`

// MaxBootstrap bounds --bootstrap: each group keeps one float64 a
// resample, and each resample draws every window once; 100,000 resamples
// pin a 95% interval's ends far below any reported digit.
const MaxBootstrap = 100000

type flags struct {
	Files     []string         `arg:"" optional:"" name:"FILE" help:"Scores files (.ndjson or .ndjson.zst); none or \"-\" reads standard input."`
	Output    string           `short:"o" placeholder:"DIR" help:"Directory for report.json; must be empty or absent. Default: profiles/perplexity/<UTC timestamp>-<model stem>/."`
	Bootstrap int              `default:"1000" placeholder:"N" help:"Bootstrap resamples of windows for the confidence intervals, at most 100000 (default ${default}); 0 turns the bootstrap off."`
	Seed      uint64           `default:"1" placeholder:"S" help:"Seed of the bootstrap's generator (default ${default}; the report records it)."`
	LogLevel  string           `default:"info" enum:"debug,info,warn,error" help:"Least severe message to show on stderr: debug, info, warn, error."`
	Version   kong.VersionFlag `help:"Print the version and exit."`
}

// Main runs ppl-aggregate with os.Args and returns its exit status.
func Main() int {
	return Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

// Run parses args, runs the tool and returns its exit status.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return command.Exit(name, run(context.Background(), args, stdin, stdout, stderr), stderr)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	start := time.Now()
	var f flags
	if err := command.Parse(name, aggregate.Version, description, &f, args, stdout, stderr); err != nil {
		return err
	}
	if f.Bootstrap < 0 || f.Bootstrap == 1 || f.Bootstrap > MaxBootstrap {
		return command.Usagef("--bootstrap %d: want 0 (off) or 2 to %d resamples", f.Bootstrap, MaxBootstrap)
	}
	created, err := now()
	if err != nil {
		return err
	}
	files := f.Files
	if len(files) == 0 {
		files = []string{"-"}
	}
	var srcs []aggregate.Source
	stdinUsed := false
	for _, path := range files {
		if path == "-" {
			if stdinUsed {
				return command.Usagef(`standard input ("-") named twice`)
			}
			stdinUsed = true
			srcs = append(srcs, aggregate.Source{Name: "<stdin>", R: stdin})
			continue
		}
		rc, err := pipe.Open(path)
		if err != nil {
			return err
		}
		defer rc.Close()
		srcs = append(srcs, aggregate.Source{Name: path, R: rc})
	}
	dir := f.Output
	if dir != "" {
		// Refuse a non-empty directory before reading a large input.
		if err := checkDir(dir); err != nil {
			return err
		}
	}
	rep, err := aggregate.Aggregate(srcs, aggregate.Options{Resamples: f.Bootstrap, Seed: f.Seed, Created: created, Build: build()})
	if err != nil {
		return err
	}
	if os.Getenv("SOURCE_DATE_EPOCH") == "" { // a reproducible report has no clock in it
		wall := time.Since(start).Seconds()
		rep.Run.WallSeconds = report.F(wall)
		if wall > 0 {
			rep.Run.TokensPerSecond = report.F(float64(rep.Workload.ScoredTokens) / wall)
		}
	}
	if dir == "" {
		if dir, err = claimDir(DefaultDir(created, rep.Workload.Model)); err != nil {
			return err
		}
	}
	path, err := report.WriteDir(dir, rep)
	if err != nil {
		return err
	}
	if err := writeTable(stdout, rep); err != nil {
		return err
	}
	level, _ := progress.ParseLevel(f.LogLevel) // kong checked the enum
	log := progress.New(stderr, name, level)
	for _, m := range rep.Warnings {
		log.Warnf("warning: %s", m)
	}
	log.Infof("wrote %s", path)
	return ctx.Err()
}

// claimDir creates the default output directory, or, when a run that
// ended in the same second took it, the first free of dir-2, dir-3, ...:
// os.Mkdir is atomic, so two runs never share one.
func claimDir(dir string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("output directory: %w", err)
	}
	for i := 1; ; i++ {
		d := dir
		if i > 1 {
			d = fmt.Sprintf("%s-%d", dir, i)
		}
		err := os.Mkdir(d, 0o755)
		if err == nil {
			return d, nil
		}
		if !errors.Is(err, os.ErrExist) || i == 1000 {
			return "", fmt.Errorf("output directory: %w", err)
		}
	}
}

func checkDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("output directory: %w", err)
	}
	for _, e := range ents {
		if !pipe.IsTemp(e.Name()) { // a killed write's leftover does not count
			return fmt.Errorf("output directory %s is not empty", dir)
		}
	}
	return nil
}

// build is this binary's build: Go version and VCS stamp (go build
// stamps a git checkout's revision; go test and go run do not).
func build() *report.Build {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	b := &report.Build{Go: bi.GoVersion}
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			b.Revision = kv.Value
		case "vcs.time":
			b.Time = kv.Value
		case "vcs.modified":
			b.Modified = kv.Value == "true"
		}
	}
	return b
}

// now returns the report's creation time: $SOURCE_DATE_EPOCH when set
// (reproducible builds' convention), else the clock.
func now() (time.Time, error) {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: not a number of seconds", s)
		}
		return time.Unix(sec, 0).UTC(), nil
	}
	return time.Now().UTC(), nil
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._+-]+`)

// DefaultDir is profiles/perplexity/<UTC timestamp>-<model stem>.
func DefaultDir(t time.Time, m *pipe.Model) string {
	stem := ""
	if m != nil {
		stem = strings.TrimSuffix(filepath.Base(m.Name), ".gguf")
		stem = strings.Trim(unsafeChars.ReplaceAllString(stem, "_"), "._")
	}
	if stem == "" {
		stem = "model"
	}
	return filepath.Join("profiles", "perplexity", t.UTC().Format("20060102T150405Z")+"-"+stem)
}

func writeTable(w io.Writer, r *report.Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	kld := r.Overall.KLD != nil
	head := "domain\tstreams\ttokens\tmean NLL\tPPL\t95% CI naive\t95% CI bootstrap"
	if kld {
		head += "\tmean KLD\tp99 KLD\ttop-1"
	}
	fmt.Fprintln(tw, head)
	groups := append(append([]report.Group(nil), r.Domains...), r.Overall)
	for _, g := range groups {
		fmt.Fprintf(tw, "%s\t%d\t%d", g.Name, g.Streams, g.ScoredTokens)
		if p := g.Perplexity; p != nil {
			fmt.Fprintf(tw, "\t%.6f\t%.4f\t%s\t%s", p.MeanNLL, p.PPL, naiveCI(p), bootCI(p))
		} else {
			fmt.Fprint(tw, "\t-\t-\t-\t-")
		}
		if kld {
			if g.KLD != nil {
				fmt.Fprintf(tw, "\t%.6f\t%.6f", g.KLD.Mean, g.KLD.P99)
			} else {
				fmt.Fprint(tw, "\t-\t-")
			}
			if g.Top1 != nil {
				fmt.Fprintf(tw, "\t%.2f%%", 100*g.Top1.Agreement)
			} else {
				fmt.Fprint(tw, "\t-")
			}
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func naiveCI(p *report.Perplexity) string {
	if p.Naive == nil {
		return "-"
	}
	return fmt.Sprintf("[%.4f, %.4f]", p.Naive.PPLCI[0], p.Naive.PPLCI[1])
}

func bootCI(p *report.Perplexity) string {
	if p.Bootstrap == nil {
		return "-"
	}
	return fmt.Sprintf("[%.4f, %.4f]", p.Bootstrap.PPLCI[0], p.Bootstrap.PPLCI[1])
}
