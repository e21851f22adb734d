// Package cli implements ppl-slurm: one perplexity run of the ppl pipeline
// over many machines of a Slurm cluster, as three batch jobs in a shared
// directory.
//
//	ppl-slurm --dir /shared/runs/q4 --shards 8 --model m.gguf \
//	  --corpus eval/corpora/ppl-heldout-v1/manifest.json --context 4096 \
//	  --partition gpu --gpus-per-task 1 --time 2:00:00 --score-arg=--kv-dtype=int8
//
// writes three sbatch scripts into --dir and submits them:
//
//   - tokenize.sbatch: ppl-tokenize, once, into DIR/tokens.ndjson (skipped
//     with --tokens FILE, an existing tokenize output).
//   - shard.sbatch: an array job, --array=0-(N-1), depending on the
//     tokenize job (afterok). Task k (SLURM_ARRAY_TASK_ID) runs
//     ppl-window --shard (k+1)/N | ppl-score into
//     DIR/shards/shard-(k+1)-of-N.ndjson. ppl-window deals the windows by
//     cost, so the tasks take equally long. The output is written to a
//     temporary name and renamed when the task succeeds, so a shard file
//     is whole or absent. ppl-score keeps every scored window in
//     DIR/cache: a task that is requeued (a preempted or failed node, or a
//     failed pipeline, which the task requeues itself up to --retries
//     times) replays what it scored and goes on from there. A task whose
//     shard file exists exits at once.
//   - merge.sbatch: depends on the whole array (afterok, and cancelled if
//     the array fails: --kill-on-invalid-dep); checks that every shard
//     file is there, naming the missing shards and the sbatch command
//     that reruns them, then runs ppl-aggregate over the shards, which
//     checks that every window of the protocol was scored once, into
//     DIR/report/report.json and DIR/report/table.txt (written under a
//     temporary name, then renamed).
//
// Job logs go to DIR/logs. DIR must be on a filesystem every node sees at
// the same path, as must the model, the corpus and the tools (--bin).
// ppl-slurm prints the job ids, the report's path and the commands that
// rerun a shard and the merge.
//
// # Flags
//
// --dir DIR and --shards N (at least 1) are required, as is --model M.gguf
// (for ppl-tokenize and ppl-score). The input is one of --corpus MANIFEST
// (with --quick, --streams a,b), --text FILE (repeated) or --tokens FILE.
//
// The windows: --context N, --stride S, --protocol MODE, passed to
// ppl-window as given (its defaults otherwise); --window-arg A, repeated,
// passes any other flag. The shards are dealt by cost, with attention's
// share set from the model: --split-attention 12d for a model of width d
// (read from the GGUF file when ppl-slurm can open it; --window-arg
// =--split-attention=A or =--split=count overrides it).
// --score-arg A and --aggregate-arg A do the same for ppl-score and
// ppl-aggregate (e.g. --score-arg=--kv-dtype=int8, --score-arg=--reference=r.gguf).
//
// Slurm: --partition, --account, --time (each job's limit), --gpus-per-task
// and --cpus-per-task (the shard tasks'), --max-running M (at most M shard
// tasks at once: --array=0-(N-1)%M), --job-name (default ppl; the jobs
// are NAME-tokenize, NAME-shard and NAME-merge) and --sbatch-arg A,
// repeated, for any other sbatch option of every job (e.g.
// --sbatch-arg=--qos=long). --requeue (the default; --no-requeue turns it
// off) lets Slurm requeue a shard task whose node fails or that is
// preempted; a task whose pipeline fails requeues itself while it has been
// restarted fewer than --retries times (default 2; restarts of any cause
// count, SLURM_RESTART_COUNT), then stops and names the command that
// reruns it. --bin DIR is where the ppl tools are on the nodes (default:
// the directory of ppl-slurm itself).
//
// --dry-run prints the scripts and the sbatch commands, and writes and
// submits nothing.
//
// # Exit status
//
// 0 on success; 2 for a usage error; 1 when a script cannot be written or
// sbatch fails, with sbatch's message.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/alecthomas/kong"

	"ppl.dev/command"
	"ppl.dev/gguf"
)

// Version is ppl-slurm's version.
const Version = "0.1.0"

const tool = "ppl-slurm"

type flags struct {
	Dir    string `required:"" placeholder:"DIR" help:"Shared directory of the run (same path on every node): scripts, tokens, shards, cache, logs, report."`
	Shards int    `required:"" placeholder:"N" help:"Number of shard tasks (the array job's size)."`
	Model  string `required:"" placeholder:"M.gguf" help:"The model (for ppl-tokenize and ppl-score)."`

	Corpus  string   `placeholder:"MANIFEST" help:"Tokenize this corpus manifest."`
	Quick   bool     `help:"With --corpus: only the quick stream of each domain."`
	Streams string   `placeholder:"ID,..." help:"With --corpus: only these streams."`
	Text    []string `placeholder:"FILE" sep:"none" help:"Tokenize this text file (repeatable)."`
	Tokens  string   `placeholder:"FILE" help:"Existing ppl-tokenize output to window: no tokenize job."`

	Context      *int     `placeholder:"N" help:"ppl-window --context."`
	Stride       *int     `placeholder:"S" help:"ppl-window --stride."`
	Protocol     string   `placeholder:"MODE" help:"ppl-window --protocol."`
	WindowArg    []string `placeholder:"ARG" sep:"none" help:"Another ppl-window flag (repeatable)."`
	ScoreArg     []string `placeholder:"ARG" sep:"none" help:"A ppl-score flag (repeatable), e.g. --score-arg=--kv-dtype=int8."`
	AggregateArg []string `placeholder:"ARG" sep:"none" help:"A ppl-aggregate flag (repeatable)."`

	Partition   string   `placeholder:"P" help:"sbatch --partition of every job."`
	Account     string   `placeholder:"A" help:"sbatch --account of every job."`
	Time        string   `placeholder:"T" help:"sbatch --time of every job (e.g. 2:00:00)."`
	GPUsPerTask int      `name:"gpus-per-task" placeholder:"G" help:"sbatch --gpus-per-task of the shard tasks."`
	CPUsPerTask int      `name:"cpus-per-task" placeholder:"C" help:"sbatch --cpus-per-task of the shard tasks."`
	MaxRunning  int      `placeholder:"M" help:"At most M shard tasks at once (sbatch --array=0-(N-1)%M)."`
	JobName     string   `default:"ppl" placeholder:"NAME" help:"Job name prefix (default ${default})."`
	SbatchArg   []string `placeholder:"ARG" sep:"none" help:"Another sbatch option for every job (repeatable), e.g. --sbatch-arg=--qos=long."`
	Requeue     bool     `default:"true" negatable:"" help:"Let Slurm requeue a preempted shard task, and requeue a failed one (default on)."`
	Retries     int      `default:"2" placeholder:"R" help:"Times a shard task whose pipeline fails requeues itself (default ${default})."`
	Bin         string   `placeholder:"DIR" help:"Directory of the ppl tools on the nodes (default: ppl-slurm's own)."`

	DryRun  bool             `help:"Print the scripts and the sbatch commands; write and submit nothing."`
	Version kong.VersionFlag `help:"Print the version and exit."`
}

const description = `Run one perplexity evaluation over a Slurm cluster: a tokenize job, an array
of shard jobs (ppl-window --shard k/n | ppl-score, windows dealt by cost) and a
merge job (ppl-aggregate), in a directory every node shares.

Example:
  ppl-slurm --dir /shared/runs/q4 --shards 8 --model m.gguf \
    --corpus eval/corpora/ppl-heldout-v1/manifest.json --context 4096 \
    --partition gpu --gpus-per-task 1 --time 2:00:00 --score-arg=--kv-dtype=int8`

// Main runs ppl-slurm with os.Args and returns its exit status.
func Main() int {
	return command.Exit(tool, run(context.Background(), os.Args[1:], os.Stdout, os.Stderr), os.Stderr)
}

// plan is a validated command line: the run's paths and scripts.
type plan struct {
	f      flags
	dir    string // absolute
	bin    string // absolute
	tokens string // the tokenize output the shards read
	// attention is ppl-window's --split-attention for the model, 12 times
	// its width, or 0 to leave ppl-window's default.
	attention int
	scripts   []script
}

type script struct {
	name string // tokenize, shard, merge
	path string
	text string
}

func parse(args []string, stdout, stderr io.Writer) (*plan, error) {
	var f flags
	if err := command.Parse(tool, Version, description, &f, args, stdout, stderr); err != nil {
		return nil, err
	}
	if f.Shards < 1 {
		return nil, command.Usagef("--shards %d: want at least 1", f.Shards)
	}
	inputs := 0
	for _, given := range []bool{f.Corpus != "", len(f.Text) > 0, f.Tokens != ""} {
		if given {
			inputs++
		}
	}
	if inputs != 1 {
		return nil, command.Usagef("give one input: --corpus MANIFEST, --text FILE or --tokens FILE")
	}
	if (f.Quick || f.Streams != "") && f.Corpus == "" {
		return nil, command.Usagef("--quick and --streams: only with --corpus")
	}
	if f.Retries < 0 {
		return nil, command.Usagef("--retries %d: want at least 0", f.Retries)
	}
	if f.GPUsPerTask < 0 || f.CPUsPerTask < 0 || f.MaxRunning < 0 {
		return nil, command.Usagef("--gpus-per-task, --cpus-per-task and --max-running: want at least 0")
	}
	for _, a := range f.SbatchArg {
		if !strings.HasPrefix(a, "-") {
			return nil, command.Usagef("--sbatch-arg %q: want an sbatch option, e.g. --qos=long", a)
		}
	}
	// A newline would end an #SBATCH line or a command of the scripts.
	for _, a := range [][]string{f.WindowArg, f.ScoreArg, f.AggregateArg, f.SbatchArg, f.Text,
		{f.Dir, f.Model, f.Corpus, f.Streams, f.Tokens, f.Protocol, f.Partition, f.Account, f.Time, f.JobName, f.Bin}} {
		for _, x := range a {
			if strings.ContainsAny(x, "\n\x00") {
				return nil, command.Usagef("%q: a flag value cannot hold a newline", x)
			}
		}
	}
	// Values of #SBATCH lines, which sbatch splits at white space.
	for _, o := range []struct{ flag, v string }{{"dir", f.Dir}, {"partition", f.Partition}, {"account", f.Account}, {"time", f.Time}, {"job-name", f.JobName}} {
		if strings.ContainsAny(o.v, " \t") {
			return nil, command.Usagef("--%s %q: cannot hold white space (it goes into #SBATCH lines)", o.flag, o.v)
		}
	}
	p := &plan{f: f}
	var err error
	if p.dir, err = filepath.Abs(f.Dir); err != nil {
		return nil, err
	}
	p.bin = f.Bin
	if p.bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("--bin not given and ppl-slurm's own directory unknown: %w", err)
		}
		p.bin = filepath.Dir(exe)
	}
	if p.bin, err = filepath.Abs(p.bin); err != nil {
		return nil, err
	}
	// Paths the jobs read must not depend on the submitting shell's
	// directory: make them absolute.
	abs := func(s *string) error {
		if *s == "" {
			return nil
		}
		a, err := filepath.Abs(*s)
		*s = a
		return err
	}
	for _, s := range []*string{&p.f.Model, &p.f.Corpus, &p.f.Tokens} {
		if err := abs(s); err != nil {
			return nil, err
		}
	}
	for i := range p.f.Text {
		if err := abs(&p.f.Text[i]); err != nil {
			return nil, err
		}
	}
	p.attention = modelAttention(p.f)
	p.tokens = p.f.Tokens
	if p.tokens == "" {
		p.tokens = filepath.Join(p.dir, "tokens.ndjson")
	}
	p.scripts = p.build()
	return p, nil
}

// sbatchLines are the #SBATCH lines of one job.
func (p *plan) sbatchLines(job string, extra ...string) string {
	f := p.f
	opts := []string{"--job-name=" + f.JobName + "-" + job}
	if job == "shard" {
		opts = append(opts, "--output="+filepath.Join(p.dir, "logs", "shard-%A_%a.out"), "--open-mode=append")
	} else {
		opts = append(opts, "--output="+filepath.Join(p.dir, "logs", job+"-%j.out"))
	}
	for _, o := range []struct{ flag, v string }{{"--partition", f.Partition}, {"--account", f.Account}, {"--time", f.Time}} {
		if o.v != "" {
			opts = append(opts, o.flag+"="+o.v)
		}
	}
	opts = append(opts, extra...)
	opts = append(opts, f.SbatchArg...)
	var b strings.Builder
	for _, o := range opts {
		b.WriteString("#SBATCH " + o + "\n")
	}
	return b.String()
}

func (p *plan) build() []script {
	f := p.f
	n := strconv.Itoa(f.Shards)
	q := quote
	tool := func(name string) string { return q(filepath.Join(p.bin, name)) }
	cache := q(filepath.Join(p.dir, "cache"))
	header := "#!/bin/bash\n"
	var out []script

	if f.Tokens == "" {
		args := []string{"--model", f.Model}
		if f.Corpus != "" {
			args = append(args, "--corpus", f.Corpus)
			if f.Quick {
				args = append(args, "--quick")
			}
			if f.Streams != "" {
				args = append(args, "--streams", f.Streams)
			}
		}
		args = append(args, "--cache-dir", filepath.Join(p.dir, "cache"), "-o", p.tokens)
		if len(f.Text) > 0 {
			args = append(args, "--text")
			args = append(args, f.Text...)
		}
		out = append(out, script{name: "tokenize", text: header + p.sbatchLines("tokenize") + `
# ppl-slurm: tokenize the corpus once, for every shard (written atomically).
set -euo pipefail
` + tool("ppl-tokenize") + " " + words(args) + "\n"})
	}

	var win []string
	if f.Protocol != "" {
		win = append(win, "--protocol", f.Protocol)
	}
	if f.Context != nil {
		win = append(win, "--context", strconv.Itoa(*f.Context))
	}
	if f.Stride != nil {
		win = append(win, "--stride", strconv.Itoa(*f.Stride))
	}
	win = append(win, f.WindowArg...)
	if p.attention > 0 {
		win = append(win, "--split-attention", strconv.Itoa(p.attention))
	}
	score := append([]string{"--model", f.Model}, f.ScoreArg...)
	var extra []string
	array := "--array=0-" + strconv.Itoa(f.Shards-1)
	if f.MaxRunning > 0 {
		array += "%" + strconv.Itoa(f.MaxRunning)
	}
	extra = append(extra, array, "--ntasks=1")
	if f.CPUsPerTask > 0 {
		extra = append(extra, "--cpus-per-task="+strconv.Itoa(f.CPUsPerTask))
	}
	if f.GPUsPerTask > 0 {
		extra = append(extra, "--gpus-per-task="+strconv.Itoa(f.GPUsPerTask))
	}
	if f.Requeue {
		extra = append(extra, "--requeue")
	} else {
		extra = append(extra, "--no-requeue")
	}
	shardScript := filepath.Join(p.dir, "shard.sbatch")
	mergeScript := filepath.Join(p.dir, "merge.sbatch")
	retries := 0
	if f.Requeue {
		retries = f.Retries
	}
	out = append(out, script{name: "shard", text: header + p.sbatchLines("shard", extra...) + `
# ppl-slurm: task k of the array scores shard k+1 of ` + n + `. The shard file
# is written under a temporary name and renamed when whole; ppl-score keeps
# each scored window in the cache, so a requeued task goes on where it stopped.
set -uo pipefail
k=$((SLURM_ARRAY_TASK_ID + 1))
out=` + q(filepath.Join(p.dir, "shards")) + `/shard-$k-of-` + n + `.ndjson
if [ -s "$out" ]; then
  echo "ppl-slurm: shard $k/` + n + ` is done: $out"
  exit 0
fi
mkdir -p ` + q(filepath.Join(p.dir, "shards")) + `
rm -f "$out".tmp.*
tmp="$out.tmp.$SLURM_JOB_ID"
echo "ppl-slurm: shard $k/` + n + ` on $(hostname), attempt $((${SLURM_RESTART_COUNT:-0} + 1))"
` + tool("ppl-window") + " " + words(win) + ` --shard "$k/` + n + `" ` + q(p.tokens) + ` \
  | ` + tool("ppl-score") + " " + words(score) + ` --cache-dir ` + cache + ` > "$tmp"
status=$?
if [ "$status" -eq 0 ]; then
  mv -f "$tmp" "$out"
  echo "ppl-slurm: shard $k/` + n + ` written: $out"
  exit 0
fi
rm -f "$tmp"
restarts=${SLURM_RESTART_COUNT:-0}
if [ "$restarts" -lt ` + strconv.Itoa(retries) + ` ]; then
  echo "ppl-slurm: shard $k/` + n + ` failed (exit $status); requeueing it (restart $((restarts + 1)) of ` + strconv.Itoa(retries) + `): its scored windows are in the cache"
  scontrol requeue "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
  sleep 60 # the requeue ends this job
  exit "$status"
fi
echo "ppl-slurm: shard $k/` + n + ` failed (exit $status); rerun it with: sbatch --array=$SLURM_ARRAY_TASK_ID ` + q(shardScript) + `, then: sbatch ` + q(mergeScript) + `" >&2
exit "$status"
`})

	report := filepath.Join(p.dir, "report")
	out = append(out, script{name: "merge", text: header + p.sbatchLines("merge") + `
# ppl-slurm: merge the ` + n + ` shards into one report, after checking that every
# shard file is there (ppl-aggregate then checks every window is, once).
set -euo pipefail
files=()
missing=()
tasks=()
for k in $(seq 1 ` + n + `); do
  f=` + q(filepath.Join(p.dir, "shards")) + `/shard-$k-of-` + n + `.ndjson
  if [ -s "$f" ]; then files+=("$f"); else missing+=("$k/` + n + `"); tasks+=("$((k - 1))"); fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  list=$(IFS=,; echo "${tasks[*]}")
  echo "ppl-slurm: shard ${missing[*]} missing (no file in ` + filepath.Join(p.dir, "shards") + `): rerun with: sbatch --array=$list ` + q(shardScript) + `, then, once they are done: sbatch ` + q(mergeScript) + `" >&2
  exit 1
fi
tmp=` + q(report) + `.tmp.$SLURM_JOB_ID
rm -rf "$tmp"
` + tool("ppl-aggregate") + ` --output "$tmp" ` + words(f.AggregateArg) + ` "${files[@]}" > "$tmp.txt"
mv "$tmp.txt" "$tmp/table.txt"
rm -rf ` + q(report) + `
mv "$tmp" ` + q(report) + `
echo "ppl-slurm: report: ` + filepath.Join(report, "report.json") + `"
cat ` + q(filepath.Join(report, "table.txt")) + `
`})
	for i := range out {
		out[i].path = filepath.Join(p.dir, out[i].name+".sbatch")
	}
	return out
}

// run is ppl-slurm without the process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	p, err := parse(args, stdout, stderr)
	if err != nil {
		return err
	}
	if p.f.DryRun {
		for _, s := range p.scripts {
			fmt.Fprintf(stdout, "# %s\n%s\n", s.path, s.text)
		}
		dep := ""
		for _, s := range p.scripts {
			fmt.Fprintf(stdout, "sbatch --parsable%s %s\n", dep, quote(s.path))
			dep = " --dependency=afterok:$" + strings.ToUpper(s.name) + "_JOB --kill-on-invalid-dep=yes"
		}
		return nil
	}
	for _, d := range []string{p.dir, filepath.Join(p.dir, "logs"), filepath.Join(p.dir, "shards"), filepath.Join(p.dir, "cache")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, s := range p.scripts {
		if err := writeAtomic(s.path, []byte(s.text)); err != nil {
			return err
		}
	}
	ids := map[string]string{}
	prev := ""
	for _, s := range p.scripts {
		args := []string{"--parsable"}
		if prev != "" {
			args = append(args, "--dependency=afterok:"+prev, "--kill-on-invalid-dep=yes")
		}
		id, err := sbatch(ctx, append(args, s.path))
		if err != nil {
			return fmt.Errorf("submitting %s: %w", s.path, err)
		}
		ids[s.name], prev = id, id
	}
	if id, ok := ids["tokenize"]; ok {
		fmt.Fprintf(stdout, "tokenize job: %s\n", id)
	}
	fmt.Fprintf(stdout, "shard array job: %s (tasks 0-%d)\n", ids["shard"], p.f.Shards-1)
	fmt.Fprintf(stdout, "merge job: %s\n", ids["merge"])
	fmt.Fprintf(stdout, "report: %s\n", filepath.Join(p.dir, "report", "report.json"))
	fmt.Fprintf(stdout, "logs: %s\n", filepath.Join(p.dir, "logs"))
	fmt.Fprintf(stdout, "a failed shard K reruns with: sbatch --array=K-1 %s, then: sbatch %s\n",
		quote(filepath.Join(p.dir, "shard.sbatch")), quote(filepath.Join(p.dir, "merge.sbatch")))
	return nil
}

// sbatch submits a script and returns the job id (sbatch --parsable
// prints "id" or "id;cluster").
func sbatch(ctx context.Context, args []string) (string, error) {
	cmd := exec.CommandContext(ctx, "sbatch", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("sbatch: %s", msg)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	if _, err := strconv.Atoi(id); err != nil {
		return "", fmt.Errorf("sbatch printed %q, want a job id", strings.TrimSpace(string(out)))
	}
	return id, nil
}

func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o755)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// words quotes each word for the shell and joins them.
func words(ws []string) string {
	q := make([]string, len(ws))
	for i, w := range ws {
		q[i] = quote(w)
	}
	return strings.Join(q, " ")
}

// quote quotes a word for the shell unless it needs none.
func quote(w string) string {
	if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@%") == "" {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

// modelAttention returns the length at which attention costs as much as
// the rest of the model's forward pass, 12 times its width (package
// ppl.dev/window/protocol, DefaultAttention), for ppl-window to deal the
// windows by: 0 when the model cannot be read here or the window flags
// already set it.
func modelAttention(f flags) int {
	for _, a := range f.WindowArg {
		if strings.HasPrefix(a, "--split") { // --split-attention or --split=count
			return 0
		}
	}
	g, err := gguf.Open(f.Model)
	if err != nil {
		return 0
	}
	defer g.Close()
	arch, err := g.String("general.architecture")
	if err != nil {
		return 0
	}
	d, err := g.Uint(arch + ".embedding_length")
	if err != nil || d == 0 || d > 1<<20 {
		return 0
	}
	return int(12 * d)
}
