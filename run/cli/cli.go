// Package cli implements `ppl run`: one command for one measurement, the
// whole pipeline for a model and a text or corpus, with the same tools,
// caching and report as the four-stage pipeline it stands for:
//
//	ppl run --model m.gguf --text a.txt [--context 4096] [--output out/]
//	  = ppl-tokenize --model m.gguf --text a.txt
//	  | ppl-window --context 4096
//	  | ppl-score --model m.gguf
//	  | ppl-aggregate --output out/
//
// The stages run as the real tools (found beside the ppl binary, else on
// $PATH), joined by pipes, each one's progress and errors on stderr as
// when run by hand; the table of ppl-aggregate comes on stdout and the
// report in --output. Every choice of the measurement is a flag of the
// stage it belongs to, passed through:
//
//   - ppl-tokenize: --model, --text FILE (repeatable) or --corpus
//     MANIFEST [--quick];
//   - ppl-window: --protocol, --context, --stride, --max-windows;
//   - ppl-score: --reference, --kld-base, --write-kld-base, --kv-dtype,
//     --reference-kv-dtype, --reference-device, --reference-devices,
//     --activations, --device, --devices, --spread-weights, --gpu-weights,
//     --threads;
//   - every stage: --no-cache, --log-level.
//
// A stage that fails stops the run: ppl run names it and exits with its
// status (the stages upstream of it stop on the closed pipe, those
// downstream on its truncated output; neither is taken for the cause). SIGINT and SIGTERM are passed to
// every stage, which stops after its current record or window and keeps
// what its cache holds; ppl run then exits 130 or 143 and says that a
// rerun resumes from the cache.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/alecthomas/kong"

	"ppl.dev/command"
)

const tool = "ppl"

// Version is ppl's version.
const Version = "0.1.0"

type flags struct {
	Run     runFlags         `cmd:"" help:"Run the whole pipeline for one model on a text or corpus."`
	Version kong.VersionFlag `help:"Print the version and exit."`
}

type runFlags struct {
	Model     string   `help:"The GGUF model to measure." required:"" type:"path"`
	Text      []string `help:"A text file to score (repeatable); each file is one stream." type:"path"`
	Corpus    string   `help:"A corpus manifest (manifest.json) instead of --text." type:"path"`
	Quick     bool     `help:"With --corpus: its quick subset."`
	Protocol  string   `help:"Windowing protocol: sliding, disjoint or llama.cpp (ppl-window)." default:"sliding"`
	Context   int      `help:"Window length in tokens (ppl-window)." default:"4096"`
	Stride    int      `help:"Sliding protocol: new targets per window (ppl-window; default context/2)."`
	MaxWin    int      `name:"max-windows" placeholder:"N" help:"Only the first N windows of each stream, as llama-perplexity's --chunks (ppl-window)."`
	Reference string   `help:"A reference model: KL divergence of the model from it (ppl-score)." type:"path"`
	KLDBase   string   `name:"kld-base" placeholder:"BASE" help:"The reference from a llama-perplexity --kl-divergence-base file (ppl-score; needs --protocol llama.cpp at its context)." type:"path"`
	WriteBase string   `name:"write-kld-base" placeholder:"FILE" help:"Also write the model's log-probs as a llama-perplexity --kl-divergence-base file (ppl-score; --protocol llama.cpp, one text)." type:"path"`
	KVDtype   string   `name:"kv-dtype" help:"KV cache format (ppl-score)."`
	RefKV     string   `name:"reference-kv-dtype" help:"The reference's KV cache format (ppl-score)."`
	Act       string   `name:"activations" help:"Arithmetic: fp32, int8, int8-avx2 or int8-amx (ppl-score)."`
	Device    string   `help:"Where to score: auto, cpu, cuda, cuda:N (ppl-score)."`
	Devices   string   `placeholder:"N,N,..." help:"Score on several devices at once, one engine each: 0,1,2,3 (ppl-score)."`
	RefDev    string   `name:"reference-device" placeholder:"DEV" help:"Where the reference runs, cuda:N (default: the model's device; ppl-score)."`
	RefDevs   string   `name:"reference-devices" placeholder:"N,N,..." help:"With --devices: each engine's reference device, one per engine (ppl-score)."`
	Spread    bool     `name:"spread-weights" help:"With --devices: one copy of the weights spread over the GPUs (ppl-score)."`
	GPUWts    string   `name:"gpu-weights" help:"GPU weight storage: quantized or bf16 (ppl-score)."`
	Threads   int      `help:"CPU threads (ppl-score; default all)."`
	Output    string   `short:"o" help:"Directory for report.json (ppl-aggregate's default when absent)."`
	NoCache   bool     `help:"Neither read nor write the cache (every stage)."`
	LogLevel  string   `help:"debug, info, warn or error (every stage)."`
}

// Main runs ppl with the process's arguments and returns its exit status:
// a failed stage's own, 128 + the signal's number after SIGINT or SIGTERM,
// 2 for a bad command line.
func Main() int {
	err := run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	var st interface{ ExitStatus() int }
	if errors.As(err, &st) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", tool, err)
		return st.ExitStatus()
	}
	return command.Exit(tool, err, os.Stderr)
}

// interrupted is the error of a run stopped by a signal.
type interrupted struct{ sig os.Signal }

func (e interrupted) Error() string { return "interrupted by " + e.sig.String() }

// ExitStatus is 128 + the signal number, the shell's convention.
func (e interrupted) ExitStatus() int {
	if s, ok := e.sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 130
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var f flags
	if err := command.Parse(tool, Version, "Measure a model's perplexity in one command: the ppl pipeline, stage by stage.", &f, args, stdout, stderr); err != nil {
		return err
	}
	stages, err := plan(&f.Run)
	if err != nil {
		return err
	}
	return execute(ctx, stages, stdout, stderr)
}

// stage is one tool of the pipeline and its arguments.
type stage struct {
	tool string
	args []string
}

// plan turns the flags into the four stages' command lines.
func plan(r *runFlags) ([]stage, error) {
	switch {
	case len(r.Text) == 0 && r.Corpus == "":
		return nil, command.Usagef("give --text FILE or --corpus MANIFEST")
	case len(r.Text) > 0 && r.Corpus != "":
		return nil, command.Usagef("--text and --corpus exclude each other")
	case r.Quick && r.Corpus == "":
		return nil, command.Usagef("--quick selects a corpus's subset: give --corpus")
	case r.RefKV != "" && r.Reference == "":
		return nil, command.Usagef("--reference-kv-dtype needs --reference")
	case r.RefDev != "" && r.Reference == "":
		return nil, command.Usagef("--reference-device needs --reference")
	case r.RefDevs != "" && r.Reference == "":
		return nil, command.Usagef("--reference-devices needs --reference")
	}
	common := func(a []string) []string {
		if r.NoCache {
			a = append(a, "--no-cache")
		}
		if r.LogLevel != "" {
			a = append(a, "--log-level", r.LogLevel)
		}
		return a
	}
	tok := []string{"--model", r.Model}
	for _, t := range r.Text {
		tok = append(tok, "--text", t)
	}
	if r.Corpus != "" {
		tok = append(tok, "--corpus", r.Corpus)
		if r.Quick {
			tok = append(tok, "--quick")
		}
	}
	win := []string{"--context", strconv.Itoa(r.Context)}
	switch r.Protocol {
	case "sliding":
		if r.Stride != 0 {
			win = append(win, "--stride", strconv.Itoa(r.Stride))
		}
	case "disjoint", "llama.cpp":
		if r.Stride != 0 {
			return nil, command.Usagef("--stride is for the sliding protocol, not %s", r.Protocol)
		}
		win = append(win, "--protocol", r.Protocol)
	default:
		return nil, command.Usagef("--protocol %q: want sliding, disjoint or llama.cpp", r.Protocol)
	}
	if r.MaxWin != 0 {
		win = append(win, "--max-windows", strconv.Itoa(r.MaxWin))
	}
	score := []string{"--model", r.Model}
	for _, o := range []struct{ flag, v string }{
		{"--reference", r.Reference}, {"--kld-base", r.KLDBase}, {"--write-kld-base", r.WriteBase}, {"--kv-dtype", r.KVDtype}, {"--reference-kv-dtype", r.RefKV},
		{"--activations", r.Act}, {"--device", r.Device}, {"--devices", r.Devices}, {"--gpu-weights", r.GPUWts},
		{"--reference-device", r.RefDev}, {"--reference-devices", r.RefDevs},
	} {
		if o.v != "" {
			score = append(score, o.flag, o.v)
		}
	}
	if r.Spread {
		score = append(score, "--spread-weights")
	}
	if r.Threads != 0 {
		score = append(score, "--threads", strconv.Itoa(r.Threads))
	}
	var agg []string
	if r.Output != "" {
		agg = append(agg, "--output", r.Output)
	}
	if r.LogLevel != "" {
		agg = append(agg, "--log-level", r.LogLevel)
	}
	return []stage{
		{"ppl-tokenize", common(tok)},
		{"ppl-window", win},
		{"ppl-score", common(score)},
		{"ppl-aggregate", agg},
	}, nil
}

// lookTool finds a tool beside the running executable, else on $PATH.
func lookTool(name string) (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s not found beside ppl or on $PATH (make build puts the tools in bin/)", name)
	}
	return p, nil
}

// execute starts the stages joined by pipes and waits for all of them.
func execute(ctx context.Context, stages []stage, stdout, stderr io.Writer) error {
	cmds := make([]*exec.Cmd, len(stages))
	for i, s := range stages {
		p, err := lookTool(s.tool)
		if err != nil {
			return err
		}
		cmds[i] = exec.Command(p, s.args...)
		cmds[i].Stderr = stderr
	}
	var closers []io.Closer
	for i := 0; i+1 < len(cmds); i++ {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		cmds[i].Stdout, cmds[i+1].Stdin = w, r
		closers = append(closers, r, w)
	}
	cmds[len(cmds)-1].Stdout = stdout
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	started := 0
	var startErr error
	for _, c := range cmds {
		if startErr = c.Start(); startErr != nil {
			break
		}
		started++
	}
	// The children hold their ends of the pipes now.
	for _, c := range closers {
		c.Close()
	}
	if startErr != nil {
		for _, c := range cmds[:started] {
			c.Process.Kill()
			c.Wait()
		}
		return fmt.Errorf("starting %s: %w", stages[started].tool, startErr)
	}
	done := make(chan struct{})
	var got os.Signal
	go func() {
		for {
			select {
			case s := <-sigs:
				if got == nil {
					got = s
					fmt.Fprintf(stderr, "%s: %v: stopping every stage after its current work (again to stop at once)\n", tool, s)
					for _, c := range cmds {
						c.Process.Signal(s)
					}
				} else {
					for _, c := range cmds {
						c.Process.Kill()
					}
				}
			case <-ctx.Done():
				for _, c := range cmds {
					c.Process.Kill()
				}
				return
			case <-done:
				return
			}
		}
	}()
	errs := make([]error, len(cmds))
	for i, c := range cmds {
		errs[i] = c.Wait()
	}
	close(done)
	if got != nil {
		fmt.Fprintf(stderr, "%s: interrupted; the scored windows are in the cache: rerun the same command to resume\n", tool)
		return interrupted{got}
	}
	// The cause is the first stage that failed other than by a broken pipe:
	// the stages upstream of a failed one die of SIGPIPE when they write to
	// it, and those downstream of it fail on its truncated output.
	for i, err := range errs {
		if err == nil {
			continue
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return fmt.Errorf("%s: %w", stages[i].tool, err)
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && (ws.Signaled() && ws.Signal() == syscall.SIGPIPE || ws.ExitStatus() == command.PipeStatus) {
			continue
		}
		return stageFailed{stages[i].tool, ee.ExitCode(), i < len(errs)-1}
	}
	return nil
}

// stageFailed is a stage that exited with a status; its own message is
// already on stderr.
type stageFailed struct {
	tool   string
	status int
	before bool // a stage ran after it (and failed on its missing output)
}

func (e stageFailed) Error() string {
	if e.before {
		return fmt.Sprintf("%s failed (exit status %d); the stages after it stopped on its missing output", e.tool, e.status)
	}
	return fmt.Sprintf("%s failed (exit status %d)", e.tool, e.status)
}

func (e stageFailed) ExitStatus() int { return e.status }
