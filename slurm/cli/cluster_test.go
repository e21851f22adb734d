package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"ppl.dev/oracle"
)

// EnvRequireSlurm set to 1 (as .ci/run does) turns the cluster test's
// skips into failures: CI must run it.
const EnvRequireSlurm = "PPL_REQUIRE_SLURM"

// cluster is a single-node Slurm on localhost: munged, slurmctld and
// slurmd, with their own socket, ports, state and logs under dir.
type cluster struct {
	dir   string
	conf  string
	procs []*exec.Cmd
}

// sbin finds a Slurm or munge program in PATH or /usr/sbin.
func sbin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	p := filepath.Join("/usr/sbin", name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not found in PATH or /usr/sbin", name)
	}
	return p, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startCluster starts the daemons; an error says why Slurm could not
// start (the caller skips on it).
func startCluster(t *testing.T) (*cluster, error) {
	progs := map[string]string{}
	for _, name := range []string{"munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo", "scancel"} {
		p, err := sbin(name)
		if err != nil {
			return nil, fmt.Errorf("%v (apt-get install slurm-wlm munge)", err)
		}
		progs[name] = p
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("slurmd must run as root to start jobs, and this test runs as uid %d", os.Geteuid())
	}
	// Short paths: the munge socket's must fit a sockaddr_un.
	dir, err := os.MkdirTemp("", "ppl-slurm-")
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c := &cluster{dir: dir, conf: filepath.Join(dir, "slurm.conf")}
	for _, d := range []string{"munge", "state", "spool", "log"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	key := make([]byte, 1024)
	rand.Read(key)
	if err := os.WriteFile(filepath.Join(dir, "munge", "key"), key, 0o400); err != nil {
		return nil, err
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	host, _, _ = strings.Cut(host, ".")
	ctldPort, err1 := freePort()
	dPort, err2 := freePort()
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("no free port: %v %v", err1, err2)
	}
	sock := filepath.Join(dir, "munge", "sock")
	// The smallest configuration that runs batch jobs in a container:
	// processes tracked through /proc, no cgroups, no task affinity, no
	// accounting; CPUs shared between jobs so the three tasks run together.
	// cred_expire=5: a requeued job waits that long (not 120 s) before it
	// may start again, while the credentials of its killed run expire;
	// sched_interval=2: then the scheduler looks at it within 2 s (not 60).
	conf := fmt.Sprintf(`ClusterName=ppltest
SlurmctldHost=%[1]s(127.0.0.1)
SlurmctldPort=%[2]d
SlurmdPort=%[3]d
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=%[4]s,cred_expire=5
SlurmUser=root
SlurmdUser=root
StateSaveLocation=%[5]s/state
SlurmdSpoolDir=%[5]s/spool
SlurmctldPidFile=%[5]s/slurmctld.pid
SlurmdPidFile=%[5]s/slurmd.pid
SlurmctldLogFile=%[5]s/log/slurmctld.log
SlurmdLogFile=%[5]s/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=2
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
JobRequeue=1
MinJobAge=600
KillWait=2
InactiveLimit=0
NodeName=%[1]s NodeAddr=127.0.0.1 CPUs=%[6]d RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=%[1]s Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
`, host, ctldPort, dPort, sock, dir, runtime.NumCPU())
	if err := os.WriteFile(c.conf, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	t.Setenv("SLURM_CONF", c.conf)
	t.Cleanup(c.stop)
	start := func(name string, args ...string) error {
		cmd := exec.Command(progs[name], args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		logf, err := os.Create(filepath.Join(dir, "log", name+".stderr"))
		if err != nil {
			return err
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
		c.procs = append(c.procs, cmd)
		return nil
	}
	if err := start("munged", "--foreground", "--force", "--socket="+sock, "--key-file="+filepath.Join(dir, "munge", "key"),
		"--pid-file="+filepath.Join(dir, "munge", "pid"), "--seed-file="+filepath.Join(dir, "munge", "seed"),
		"--log-file="+filepath.Join(dir, "munge", "log")); err != nil {
		return nil, err
	}
	if !waitFor(10*time.Second, func() bool { _, err := os.Stat(sock); return err == nil }) {
		return nil, fmt.Errorf("munged did not start: %s", c.logTail("munge/log", "log/munged.stderr"))
	}
	if err := start("slurmctld", "-D", "-i", "-f", c.conf); err != nil {
		return nil, err
	}
	if err := start("slurmd", "-D", "-f", c.conf, "-N", host); err != nil {
		return nil, err
	}
	idle := waitFor(30*time.Second, func() bool {
		out, err := exec.Command(progs["sinfo"], "-h", "-o", "%T").Output()
		return err == nil && strings.TrimSpace(string(out)) == "idle"
	})
	if !idle {
		return nil, fmt.Errorf("the node did not come up idle in 30s: %s", c.logTail("log/slurmctld.log", "log/slurmd.log", "log/slurmctld.stderr", "log/slurmd.stderr"))
	}
	return c, nil
}

func (c *cluster) stop() {
	exec.Command("scancel", "--full", "--user=root").Run()
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
}

// logTail returns the last lines of the named logs under the cluster's
// directory, for a failure message.
func (c *cluster) logTail(names ...string) string {
	var b strings.Builder
	for _, n := range names {
		data, _ := os.ReadFile(filepath.Join(c.dir, n))
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		fmt.Fprintf(&b, "\n== %s:\n%s", n, strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
	return b.String()
}

func waitFor(limit time.Duration, ok func() bool) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if ok() {
			return true
		}
	}
	return false
}

// buildTools builds the four pipeline tools into dir.
func buildTools(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", dir+"/", "ppl.dev/tokenize/cmd/ppl-tokenize", "ppl.dev/window/cmd/ppl-window",
		"ppl.dev/score/cmd/ppl-score", "ppl.dev/aggregate/cmd/ppl-aggregate")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
}

// reportNoRun reads a report.json as its top-level members without "run".
func reportNoRun(t *testing.T, path string) map[string]json.RawMessage {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if _, ok := m["run"]; !ok {
		t.Fatalf("%s: no run object", path)
	}
	delete(m, "run")
	return m
}

func sameReport(t *testing.T, got, want string) {
	t.Helper()
	g, w := reportNoRun(t, got), reportNoRun(t, want)
	for k, wv := range w {
		if gv, ok := g[k]; !ok {
			t.Errorf("%s has no %q", got, k)
		} else if !bytes.Equal(gv, wv) {
			t.Errorf("%s: %q differs from the single-process report's:\n got %.600s\nwant %.600s", got, k, gv, wv)
		}
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			t.Errorf("%s has %q, which the single-process report has not", got, k)
		}
	}
}

// TestSlurmCluster is the acceptance test of ppl-slurm: on a real
// single-node Slurm, a 3-shard array and its merge give the
// single-process report byte for byte outside "run"; then, with one task's
// ppl-score killed mid-run (the task requeues itself) and another task
// requeued by Slurm as a preempted job is, both resume from the score
// cache and the report is the same again; last, the merge script names a
// missing shard and the command that reruns it.
func TestSlurmCluster(t *testing.T) {
	require := os.Getenv(EnvRequireSlurm) == "1"
	skip := func(format string, args ...any) {
		t.Helper()
		if require {
			t.Fatalf("%s=1, but "+format, append([]any{EnvRequireSlurm}, args...)...)
		}
		t.Skipf("skipping: "+format, args...)
	}
	if testing.Short() && !require {
		t.Skip("skipping the Slurm cluster test in -short mode")
	}
	odir, err := oracle.Dir()
	if err != nil {
		skip("shared oracle unavailable: %v", err)
	}
	t0 := time.Now()
	cl, err := startCluster(t)
	if err != nil {
		skip("Slurm cannot start: %v", err)
	}
	t.Logf("single-node Slurm up in %s (%s)", time.Since(t0).Round(time.Millisecond), cl.conf)

	work := t.TempDir()
	bin := filepath.Join(work, "bin")
	buildTools(t, bin)
	model := filepath.Join(odir, "models", "tiny-llama-spm-q8_0.gguf")
	// Streams of very different lengths: 4617 and 515 tokens.
	texts := []string{filepath.Join(odir, "texts", "en-gpl3.txt"), filepath.Join(odir, "texts", "mixed-unicode.txt")}
	score := []string{"--device", "cpu", "--threads", "1"}
	// Windows of 128 at stride 32: about 55 per shard, so that a shard
	// outlasts the second Slurm takes to requeue it (at stride 64 a shard
	// could finish first and never be requeued).
	win := []string{"--context", "128", "--stride", "32"}

	// The single-process report.
	t1 := time.Now()
	ref := filepath.Join(work, "ref")
	sh := func(script string) {
		t.Helper()
		cmd := exec.Command("bash", "-c", "set -euo pipefail; "+script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
	sh(fmt.Sprintf("mkdir -p %[1]s && %[2]s/ppl-tokenize --model %[3]s --cache-dir %[1]s/cache -o %[1]s/tokens.ndjson --text %[4]s"+
		" && %[2]s/ppl-window %[5]s %[1]s/tokens.ndjson | %[2]s/ppl-score --model %[3]s %[6]s --cache-dir %[1]s/cache"+
		" | %[2]s/ppl-aggregate --output %[1]s/report > %[1]s/table.txt",
		ref, bin, model, words(texts), words(win), words(score)))
	t.Logf("single-process run: %s", time.Since(t1).Round(time.Millisecond))

	submit := func(dir string) (array, merge string) {
		t.Helper()
		args := []string{"--dir", dir, "--shards", "3", "--model", model, "--bin", bin, "--time", "10:00"}
		for _, x := range texts {
			args = append(args, "--text", x)
		}
		args = append(args, win...)
		for _, a := range score {
			args = append(args, "--score-arg="+a)
		}
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), args, &stdout, &stderr); err != nil {
			t.Fatalf("ppl-slurm: %v\n%s", err, stderr.String())
		}
		out := stdout.String()
		ma := regexp.MustCompile(`(?m)^shard array job: (\d+) `).FindStringSubmatch(out)
		mm := regexp.MustCompile(`(?m)^merge job: (\d+)$`).FindStringSubmatch(out)
		if ma == nil || mm == nil || !strings.Contains(out, "report: "+filepath.Join(dir, "report", "report.json")) {
			t.Fatalf("ppl-slurm printed:\n%s", out)
		}
		return ma[1], mm[1]
	}
	// wait waits for every job to leave the queue, calling each (if not
	// nil) on the way.
	wait := func(dir string, limit time.Duration, each func()) {
		t.Helper()
		ok := waitFor(limit, func() bool {
			if each != nil {
				each()
			}
			out, err := exec.Command("squeue", "-h", "-o", "%i %T %r").Output()
			return err == nil && strings.TrimSpace(string(out)) == ""
		})
		if !ok {
			q, _ := exec.Command("squeue", "-o", "%i %T %r").CombinedOutput()
			t.Fatalf("jobs still queued after %s:\n%s%s", limit, q, jobLogs(dir))
		}
		if _, err := os.Stat(filepath.Join(dir, "report", "report.json")); err != nil {
			jobs, _ := exec.Command("scontrol", "show", "job").CombinedOutput()
			t.Fatalf("no report after the jobs: %v\n%s%s%s", err, jobs, jobLogs(dir), cl.logTail("log/slurmctld.log"))
		}
	}

	// 1. Three shards and the merge.
	t2 := time.Now()
	run1 := filepath.Join(work, "run1")
	submit(run1)
	wait(run1, 180*time.Second, nil)
	t.Logf("3-shard run on Slurm: %s", time.Since(t2).Round(time.Millisecond))
	sameReport(t, filepath.Join(run1, "report", "report.json"), filepath.Join(ref, "report", "report.json"))
	logSplit(t, run1)

	// 2. Again in a fresh directory (own cache). Once shard 2/3 has scored
	// some windows, kill its ppl-score: the pipeline fails and the task
	// requeues itself. Once shard 1/3 has, requeue its task as Slurm does a
	// preempted job (scontrol requeue kills it, leaving its temporary
	// file). Slurm holds a requeued job for cred_expire seconds before it
	// starts it again.
	t3 := time.Now()
	run2 := filepath.Join(work, "run2")
	array, _ := submit(run2)
	// The interruptions poll every 20 ms on their own, apart from the
	// queue's polls: a loaded machine slows squeue more than a shard.
	var killed, preempted int
	var early error
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for early == nil && (killed == 0 || preempted == 0) {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			for _, k := range []struct {
				idx  string
				done *int
			}{{"1", &killed}, {"0", &preempted}} {
				if *k.done != 0 {
					continue
				}
				shard, _ := strconv.Atoi(k.idx)
				if _, err := os.Stat(filepath.Join(run2, "shards", fmt.Sprintf("shard-%d-of-3.ndjson", shard+1))); err == nil {
					early = fmt.Errorf("shard %d/3 finished before the test could stop it: make the run longer", shard+1)
					return
				}
				// Each window ppl-score caches is one write; its log lines
				// are two or three more.
				pid := findTask(array, k.idx, "ppl-score")
				if pid == 0 || writeCalls(pid) < 8 {
					continue
				}
				if k.idx == "1" {
					if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
						early = fmt.Errorf("kill %d: %v", pid, err)
						return
					}
				} else if out, err := exec.Command("scontrol", "requeue", array+"_"+k.idx).CombinedOutput(); err != nil {
					early = fmt.Errorf("scontrol requeue %s_%s: %v\n%s", array, k.idx, err, out)
					return
				}
				*k.done = pid
			}
		}
	}()
	halt := sync.OnceFunc(func() { close(stop); <-done })
	defer halt() // when wait fails the test
	wait(run2, 180*time.Second, nil)
	halt()
	if early != nil {
		t.Fatal(early)
	}
	t.Logf("3-shard run with shard 2/3's ppl-score killed (pid %d) and shard 1/3 requeued by Slurm: %s", killed, time.Since(t3).Round(time.Millisecond))
	if killed == 0 || preempted == 0 {
		t.Fatalf("killed %d, preempted %d: a task was not interrupted", killed, preempted)
	}
	sameReport(t, filepath.Join(run2, "report", "report.json"), filepath.Join(ref, "report", "report.json"))
	for _, k := range []struct{ idx, shard, mark string }{
		{"1", "2/3", "requeueing it (restart 1 of 2)"},
		{"0", "1/3", "DUE TO JOB REQUEUE"},
	} {
		logs, _ := filepath.Glob(filepath.Join(run2, "logs", "shard-*_"+k.idx+".out"))
		if len(logs) != 1 {
			t.Fatalf("shard %s logs: %v", k.shard, logs)
		}
		data, _ := os.ReadFile(logs[0])
		log := string(data)
		if !strings.Contains(log, k.mark) || !strings.Contains(log, "attempt 2") {
			t.Errorf("shard %s's log does not show the requeue (%q):\n%s", k.shard, k.mark, log)
		}
		// The second attempt replayed the windows the first had cached.
		m := regexp.MustCompile(`\((\d+) scored, (\d+) from the cache\)`).FindAllStringSubmatch(log, -1)
		if len(m) == 0 {
			t.Errorf("shard %s's log has no ppl-score summary:\n%s", k.shard, log)
		} else if last := m[len(m)-1]; last[2] == "0" {
			t.Errorf("the requeued shard %s replayed no window from the cache (%s):\n%s", k.shard, last[0], log)
		} else {
			t.Logf("requeued shard %s: %s", k.shard, last[0])
		}
	}
	if tmp, _ := filepath.Glob(filepath.Join(run2, "shards", "*.tmp.*")); len(tmp) > 0 {
		t.Errorf("temporary shard files left: %v", tmp)
	}

	// 3. The merge names a missing shard and the command that reruns it.
	os.Rename(filepath.Join(run2, "shards", "shard-2-of-3.ndjson"), filepath.Join(work, "shard-2-away"))
	cmd := exec.Command("bash", filepath.Join(run2, "merge.sbatch"))
	cmd.Env = append(os.Environ(), "SLURM_JOB_ID=test")
	out, err := cmd.CombinedOutput()
	want := "ppl-slurm: shard 2/3 missing (no file in " + filepath.Join(run2, "shards") + "): rerun with: sbatch --array=1 " + filepath.Join(run2, "shard.sbatch")
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("merge without shard 2: %v\n%s\nwant %s", err, out, want)
	}
	t.Logf("whole test: %s", time.Since(t0).Round(time.Millisecond))
}

// findTask returns the pid of the process named comm of array task idx
// of job array, or 0.
func findTask(array, idx, comm string) int {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		c, err := os.ReadFile(filepath.Join(p, "comm"))
		if err != nil || strings.TrimSpace(string(c)) != comm {
			continue
		}
		env, err := os.ReadFile(filepath.Join(p, "environ"))
		if err != nil {
			continue
		}
		vars := map[string]bool{}
		for _, kv := range bytes.Split(env, []byte{0}) {
			vars[string(kv)] = true
		}
		if vars["SLURM_ARRAY_JOB_ID="+array] && vars["SLURM_ARRAY_TASK_ID="+idx] {
			pid, _ := strconv.Atoi(filepath.Base(p))
			return pid
		}
	}
	return 0
}

// writeCalls returns the write system calls process pid has made so far.
func writeCalls(pid int) int {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// jobLogs returns the run's job logs, for a failure message.
func jobLogs(dir string) string {
	var b strings.Builder
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*"))
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		fmt.Fprintf(&b, "\n== %s:\n%s", l, data)
	}
	return b.String()
}

// logSplit logs how the shards were dealt: windows and cost per shard,
// from the window headers.
func logSplit(t *testing.T, dir string) {
	data, err := os.ReadFile(filepath.Join(dir, "shards", "shard-1-of-3.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		var h struct {
			Stage    string `json:"stage"`
			Protocol struct {
				Split *struct {
					Attention int     `json:"attention"`
					Windows   []int   `json:"windows"`
					Cost      []int64 `json:"cost"`
				} `json:"split"`
			} `json:"protocol"`
		}
		if json.Unmarshal(line, &h) == nil && h.Stage == "window" {
			if h.Protocol.Split == nil {
				t.Errorf("shard 1's window header records no split: %s", line)
				return
			}
			sp := h.Protocol.Split
			t.Logf("split by cost (attention %d): windows %v, cost %v", sp.Attention, sp.Windows, sp.Cost)
			return
		}
	}
}
