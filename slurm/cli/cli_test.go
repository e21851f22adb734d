package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"ppl.dev/command"
	"ppl.dev/oracle"
)

func runTool(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := command.Exit(tool, run(context.Background(), args, &stdout, &stderr), &stderr)
	return code, stdout.String(), stderr.String()
}

// base is a command line with every Slurm option.
func base(dir string) []string {
	return []string{"--dir", dir, "--shards", "3", "--model", "/m/model.gguf", "--text", "/t/a.txt", "--text", "/t/b c.txt",
		"--context", "128", "--stride", "64", "--score-arg=--kv-dtype=int8", "--window-arg=--split-attention=49152",
		"--aggregate-arg=--bootstrap=0", "--partition", "gpu", "--account", "lab", "--time", "2:00:00",
		"--gpus-per-task", "1", "--cpus-per-task", "8", "--sbatch-arg=--qos=long", "--bin", "/opt/ppl/bin"}
}

func TestDryRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	code, out, errOut := runTool(append(base(dir), "--dry-run")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"# " + dir + "/tokenize.sbatch\n#!/bin/bash\n#SBATCH --job-name=ppl-tokenize\n#SBATCH --output=" + dir + "/logs/tokenize-%j.out\n" +
			"#SBATCH --partition=gpu\n#SBATCH --account=lab\n#SBATCH --time=2:00:00\n#SBATCH --qos=long\n",
		"/opt/ppl/bin/ppl-tokenize --model /m/model.gguf --cache-dir " + dir + "/cache -o " + dir + "/tokens.ndjson --text /t/a.txt '/t/b c.txt'\n",
		// The array: one task per shard, GPUs and CPUs per task, requeue.
		"#SBATCH --job-name=ppl-shard\n#SBATCH --output=" + dir + "/logs/shard-%A_%a.out\n#SBATCH --open-mode=append\n" +
			"#SBATCH --partition=gpu\n#SBATCH --account=lab\n#SBATCH --time=2:00:00\n#SBATCH --array=0-2\n#SBATCH --ntasks=1\n" +
			"#SBATCH --cpus-per-task=8\n#SBATCH --gpus-per-task=1\n#SBATCH --requeue\n#SBATCH --qos=long\n",
		"k=$((SLURM_ARRAY_TASK_ID + 1))\n",
		"/opt/ppl/bin/ppl-window --context 128 --stride 64 --split-attention=49152 --shard \"$k/3\" " + dir + "/tokens.ndjson \\\n" +
			"  | /opt/ppl/bin/ppl-score --model /m/model.gguf --kv-dtype=int8 --cache-dir " + dir + "/cache > \"$tmp\"\n",
		`mv -f "$tmp" "$out"`,
		`scontrol requeue "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"`,
		`if [ "$restarts" -lt 2 ]; then`,
		"/opt/ppl/bin/ppl-aggregate --output \"$tmp\" --bootstrap=0 \"${files[@]}\"",
		"sbatch --parsable " + dir + "/tokenize.sbatch\n" +
			"sbatch --parsable --dependency=afterok:$TOKENIZE_JOB --kill-on-invalid-dep=yes " + dir + "/shard.sbatch\n" +
			"sbatch --parsable --dependency=afterok:$SHARD_JOB --kill-on-invalid-dep=yes " + dir + "/merge.sbatch\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks\n%s\nin\n%s", want, out)
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("--dry-run made %s", dir)
	}
}

// fakeSbatch puts an sbatch first in PATH that logs its arguments and
// prints job ids from 41 on ("41;cluster"), or fails with a message when
// fail is set.
func fakeSbatch(t *testing.T, fail bool) string {
	t.Helper()
	d := t.TempDir()
	log := filepath.Join(d, "calls")
	script := `#!/bin/bash
echo "$*" >> ` + log + `
n=$(wc -l < ` + log + `)
echo "$((40 + n));cluster"
`
	if fail {
		script = "#!/bin/bash\necho 'sbatch: error: invalid partition specified: gpu' >&2\nexit 1\n"
	}
	if err := os.WriteFile(filepath.Join(d, "sbatch"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", d+":"+os.Getenv("PATH"))
	return log
}

func TestSubmit(t *testing.T) {
	log := fakeSbatch(t, false)
	dir := filepath.Join(t.TempDir(), "run")
	code, out, errOut := runTool(base(dir)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	calls, _ := os.ReadFile(log)
	want := "--parsable " + dir + "/tokenize.sbatch\n" +
		"--parsable --dependency=afterok:41 --kill-on-invalid-dep=yes " + dir + "/shard.sbatch\n" +
		"--parsable --dependency=afterok:42 --kill-on-invalid-dep=yes " + dir + "/merge.sbatch\n"
	if string(calls) != want {
		t.Errorf("sbatch calls:\n%s\nwant\n%s", calls, want)
	}
	for _, line := range []string{"tokenize job: 41\n", "shard array job: 42 (tasks 0-2)\n", "merge job: 43\n",
		"report: " + dir + "/report/report.json\n", "a failed shard K reruns with: sbatch --array=K-1 " + dir + "/shard.sbatch, then: sbatch " + dir + "/merge.sbatch\n"} {
		if !strings.Contains(out, line) {
			t.Errorf("stdout lacks %q:\n%s", line, out)
		}
	}
	for _, s := range []string{"tokenize", "shard", "merge"} {
		fi, err := os.Stat(filepath.Join(dir, s+".sbatch"))
		if err != nil || fi.Mode().Perm()&0o100 == 0 {
			t.Errorf("%s.sbatch: %v %v", s, fi, err)
		}
	}

	// With --tokens: no tokenize job, the array depends on nothing.
	os.Remove(log)
	dir2 := filepath.Join(t.TempDir(), "run")
	code, out, errOut = runTool("--dir", dir2, "--shards", "2", "--model", "/m.gguf", "--tokens", "/t/tok.ndjson", "--no-requeue", "--max-running", "1", "--bin", "/b")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	calls, _ = os.ReadFile(log)
	if want := "--parsable " + dir2 + "/shard.sbatch\n--parsable --dependency=afterok:41 --kill-on-invalid-dep=yes " + dir2 + "/merge.sbatch\n"; string(calls) != want {
		t.Errorf("sbatch calls with --tokens:\n%s\nwant\n%s", calls, want)
	}
	if strings.Contains(out, "tokenize job") {
		t.Errorf("stdout: %s", out)
	}
	shard, _ := os.ReadFile(filepath.Join(dir2, "shard.sbatch"))
	if !strings.Contains(string(shard), "#SBATCH --no-requeue\n") || !strings.Contains(string(shard), "#SBATCH --array=0-1%1\n") || !strings.Contains(string(shard), `--shard "$k/2" /t/tok.ndjson`) ||
		!strings.Contains(string(shard), `if [ "$restarts" -lt 0 ]; then`) {
		t.Errorf("shard.sbatch with --tokens --no-requeue:\n%s", shard)
	}
}

func TestSbatchFails(t *testing.T) {
	fakeSbatch(t, true)
	dir := filepath.Join(t.TempDir(), "run")
	code, _, errOut := runTool(base(dir)...)
	if want := "ppl-slurm: submitting " + dir + "/tokenize.sbatch: sbatch: sbatch: error: invalid partition specified: gpu\n"; code != 1 || errOut != want {
		t.Errorf("exit %d, stderr %q; want 1, %q", code, errOut, want)
	}
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dir", "d", "--shards", "0", "--model", "m", "--text", "a"}, "ppl-slurm: --shards 0: want at least 1\n"},
		{[]string{"--dir", "d", "--shards", "2", "--model", "m"}, "ppl-slurm: give one input: --corpus MANIFEST, --text FILE or --tokens FILE\n"},
		{[]string{"--dir", "d", "--shards", "2", "--model", "m", "--text", "a", "--tokens", "t"}, "ppl-slurm: give one input: --corpus MANIFEST, --text FILE or --tokens FILE\n"},
		{[]string{"--dir", "d", "--shards", "2", "--model", "m", "--text", "a", "--quick"}, "ppl-slurm: --quick and --streams: only with --corpus\n"},
		{[]string{"--dir", "d", "--shards", "2", "--model", "m", "--text", "a", "--sbatch-arg", "qos=long"}, "ppl-slurm: --sbatch-arg \"qos=long\": want an sbatch option, e.g. --qos=long\n"},
		{[]string{"--dir", "d", "--shards", "2", "--model", "m", "--text", "a", "--retries=-1"}, "ppl-slurm: --retries -1: want at least 0\n"},
		{[]string{"--dir", "my runs", "--shards", "2", "--model", "m", "--text", "a"}, "ppl-slurm: --dir \"my runs\": cannot hold white space (it goes into #SBATCH lines)\n"},
		{[]string{"--dir", "d", "--shards", "2", "--model", "m", "--text", "a", "--score-arg=--x=a\nb"}, "ppl-slurm: \"--x=a\\nb\": a flag value cannot hold a newline\n"},
	} {
		code, out, errOut := runTool(tc.args...)
		if code != 2 || out != "" || errOut != tc.want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2, %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

// TestShardScript runs shard.sbatch and merge.sbatch with bash, as Slurm
// would, on stand-in tools: a shard file appears whole or not at all, a
// done shard is not redone, a failed one without retries names the
// command that reruns it, and the merge names missing shards.
func TestShardScript(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	bin := t.TempDir()
	for name, body := range map[string]string{
		"ppl-window":    `echo "window $*"`,
		"ppl-score":     `cat; echo "score $*"; if [ -n "${FAIL:-}" ]; then exit 3; fi`,
		"ppl-aggregate": `out=$2; shift 2; mkdir -p "$out"; cat "$@" > "$out/report.json"; echo table`,
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/bash\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "run")
	fakeSbatch(t, false)
	if code, _, errOut := runTool("--dir", dir, "--shards", "2", "--model", "/m.gguf", "--tokens", "/t/tok.ndjson", "--retries", "0", "--bin", bin); code != 0 {
		t.Fatal(errOut)
	}
	task := func(id string, env ...string) (string, error) {
		cmd := exec.Command("bash", filepath.Join(dir, "shard.sbatch"))
		cmd.Env = append(os.Environ(), append([]string{"SLURM_ARRAY_TASK_ID=" + id, "SLURM_ARRAY_JOB_ID=7", "SLURM_JOB_ID=8" + id}, env...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	shard1 := filepath.Join(dir, "shards", "shard-1-of-2.ndjson")
	if out, err := task("0"); err != nil {
		t.Fatalf("task 0: %v\n%s", err, out)
	}
	data, _ := os.ReadFile(shard1)
	if want := "window --shard 1/2 /t/tok.ndjson\nscore --model /m.gguf --cache-dir " + dir + "/cache\n"; string(data) != want {
		t.Errorf("shard 1: %q, want %q", data, want)
	}
	if out, _ := task("0"); !strings.Contains(out, "ppl-slurm: shard 1/2 is done: "+shard1) {
		t.Errorf("task 0 again: %s", out)
	}
	out, err := task("1", "FAIL=1")
	if err == nil || !strings.Contains(out, "ppl-slurm: shard 2/2 failed (exit 3); rerun it with: sbatch --array=1 "+dir+"/shard.sbatch, then: sbatch "+dir+"/merge.sbatch") {
		t.Errorf("failing task 1: %v\n%s", err, out)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "shards", "*")); len(left) != 1 {
		t.Errorf("shard files after a failure: %v (want only shard 1's)", left)
	}
	merge := func() (string, error) {
		cmd := exec.Command("bash", filepath.Join(dir, "merge.sbatch"))
		cmd.Env = append(os.Environ(), "SLURM_JOB_ID=9")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := merge(); err == nil || !strings.Contains(out, "ppl-slurm: shard 2/2 missing (no file in "+dir+"/shards): rerun with: sbatch --array=1 "+dir+"/shard.sbatch, then, once they are done: sbatch "+dir+"/merge.sbatch") {
		t.Errorf("merge with shard 2 missing: %v\n%s", err, out)
	}
	if out, err := task("1"); err != nil {
		t.Fatalf("task 1: %v\n%s", err, out)
	}
	if out, err := merge(); err != nil || !strings.Contains(out, "ppl-slurm: report: "+dir+"/report/report.json\ntable\n") {
		t.Errorf("merge: %v\n%s", err, out)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "report", "report.json")); !strings.Contains(string(data), "--shard 2/2") {
		t.Errorf("report: %s", data)
	}
}

// The shards are dealt with attention's share set from the model's width
// (the oracle's tiny Llama is 256 wide), unless the window flags set it.
func TestModelAttention(t *testing.T) {
	dir, err := oracle.Dir()
	if err != nil {
		t.Skipf("skipping: shared oracle unavailable: %v", err)
	}
	model := filepath.Join(dir, "models", "tiny-llama-spm-q8_0.gguf")
	args := []string{"--dir", t.TempDir(), "--shards", "2", "--model", model, "--tokens", "/t.ndjson", "--bin", "/b", "--dry-run"}
	if _, out, _ := runTool(args...); !strings.Contains(out, "/b/ppl-window --split-attention 3072 --shard") {
		t.Errorf("dry run:\n%s", out)
	}
	if _, out, _ := runTool(append(args, "--window-arg=--split=count")...); strings.Contains(out, "--split-attention") {
		t.Errorf("dry run with --split=count:\n%s", out)
	}
}
