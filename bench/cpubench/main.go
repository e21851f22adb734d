// Command cpubench measures ppl-score on the CPU: tokens per second, user
// CPU time and peak memory for synthetic Llama-architecture models of about
// 100M parameters (ppl-mkmodel's 100M preset, in F16, Q8_0 and Q4_K_M; with
// --arch qwen3moe, Qwen3-30B-A3B's mixture-of-experts layout at 1B; with
// --arch qwen35, Qwen3.5-0.8B's Gated DeltaNet hybrid, with the shared
// oracle's qwen35 tokenizer of 151,669 tokens; with --arch rwkv7, RWKV-7
// G1 0.1B's shape; with --arch minimax-m3, MiniMax-M3's layout at 48M: 4
// layers of 8 heads of 64 over 2 KV heads, a dense first layer, then 8
// experts of 256, 2 used, a shared one, and MSA's 4 blocks of 16 keys; with
// --arch qwen4exp, Qwen3.8-Flash-Next's layout at 72M: 8 layers of 512, 6
// of them Gated DeltaNet (4 key and 8 value heads of 64), n-gram
// embeddings in the second, gated attention of 8 heads of 64 over 2 KV
// heads with QSA's 4 blocks of 4 keys in the others, 4 streams, 8 experts
// of 256, 2 used, and a shared one), in
// both activation modes, from one thread to all of them; and, when given
// llama.cpp's llama-perplexity, the same workload through it, back to back.
//
//	go run ./bench/cpubench [flags]      (make bench-cpu; from the repository root)
//
// The workload is llama-perplexity's: chunks of --context tokens of one
// text, the first token of each replaced by BOS, the second half of each
// chunk scored (ppl-window --protocol llama.cpp), the first --chunks
// chunks. Each ppl-score run is a separate process, timed by wall clock
// with its user CPU time and peak RSS from the kernel's accounting
// (getrusage), model loading included, as for llama-perplexity.
// tokens/s is chunks × context / wall seconds.
//
// Comparison with llama.cpp (--llama "chroot /tmp/sid llama-perplexity",
// --llama-root /tmp/sid to copy the files where a chroot sees them): for
// each model, rounds of ppl-score fp32, ppl-score int8 (or the first int8
// mode of --modes: int8-avx2 against llama.cpp's AVX2 build, int8-amx
// against its build for CPUs with AMX-INT8) and
// llama-perplexity -c CONTEXT -b CONTEXT -t THREADS --chunks CHUNKS run
// one after another, --reps rounds; the best wall time of each is kept (the
// machine is shared, so the best is the least disturbed) and the ratios of
// tokens/s are printed.
//
// --long N adds the memory check: one window of N tokens (the text repeated
// as needed) scored with all threads in each mode, its peak RSS next to the
// model file's size.
//
// --baseline DIR compares this build's ppl-score with another build's (the
// previous commit's, say), alternating rounds, best of --reps each: the
// ratio of their tokens/s per model and mode, and whether both gave the same
// perplexity to the bit.
//
// --levels L0,L1,... compares this build's CPU kernel levels
// (PPL_CPU_KERNELS: generic, avx2, avx512, avx512vnni, neon) the same way:
// each level's tokens/s and its ratio to L0's, and whether all gave the
// same perplexity to the bit (they must: every level computes the plain Go
// kernels' bits). On arm64, --levels generic,neon measures the NEON
// kernels against plain Go.
//
// Flags: --arch (llama, qwen3moe, qwen35, rwkv7, minimax-m3 or qwen4exp), --bin DIR (the ppl tools, built by make build; default bin),
// --dir DIR (models and scratch; default profiles/bench-cpu), --types
// (default F16,Q8_0,Q4_K_M), --modes (default fp32,int8), --levels, --threads
// (comma-separated; default 1 up to the number of CPUs), --context (512),
// --chunks (8), --text FILE (default: the shared oracle's all-texts.txt, or
// the held-out corpus's English files), --vocab-from FILE.gguf (the
// tokenizer; default the shared oracle's Llama-2 tokenizer model when it is
// there), --reps (3), --llama, --llama-root, --long.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	bin, dir, text, vocabFrom string
	types, modes              []string
	threads                   []int
	context, chunks, reps     int
	llama, llamaRoot          string
	baseline                  string
	levels                    []string
	arch                      string
	long                      int
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cpubench:", err)
		os.Exit(1)
	}
}

func run() error {
	var c config
	var types, modes, threads, levels string
	flag.StringVar(&c.bin, "bin", "bin", "directory of the ppl tools")
	flag.StringVar(&c.dir, "dir", "profiles/bench-cpu", "directory for models and scratch files")
	flag.StringVar(&types, "types", "F16,Q8_0,Q4_K_M", "model weight types")
	flag.StringVar(&modes, "modes", "fp32,int8", "ppl-score activation modes")
	flag.StringVar(&threads, "threads", "", "thread counts (default 1..number of CPUs)")
	flag.IntVar(&c.context, "context", 512, "chunk length")
	flag.IntVar(&c.chunks, "chunks", 8, "chunks scored")
	flag.StringVar(&c.text, "text", "", "text to score")
	flag.StringVar(&c.vocabFrom, "vocab-from", "", "GGUF model whose tokenizer the models get")
	flag.IntVar(&c.reps, "reps", 3, "rounds of the llama.cpp comparison (best kept)")
	flag.StringVar(&c.llama, "llama", "", "llama-perplexity command, e.g. \"chroot /tmp/sid llama-perplexity\"")
	flag.StringVar(&c.llamaRoot, "llama-root", "", "root directory the llama command sees (files are copied under ROOT/x)")
	flag.IntVar(&c.long, "long", 0, "also score one window of this many tokens and report its peak RSS")
	flag.StringVar(&c.arch, "arch", "llama", "architecture of the generated models: llama (100M), qwen3moe (Qwen3-30B-A3B's layout at 1B), qwen35 (Qwen3.5-0.8B), rwkv7 (RWKV-7 G1 0.1B), minimax-m3 (MiniMax-M3's layout at 48M) or qwen4exp (Qwen3.8-Flash-Next's layout at 72M)")
	flag.StringVar(&c.baseline, "baseline", "", "directory of another build's ppl-score (the previous commit's) to compare with, round by round")
	flag.StringVar(&levels, "levels", "", "CPU kernel levels (PPL_CPU_KERNELS) to compare, round by round, each against the first: e.g. generic,neon")
	flag.Parse()
	c.types, c.modes = strings.Split(types, ","), strings.Split(modes, ",")
	if levels != "" {
		c.levels = strings.Split(levels, ",")
		if len(c.levels) < 2 {
			return fmt.Errorf("--levels %q: name two levels or more", levels)
		}
	}
	if threads == "" {
		for t := 1; t <= runtime.NumCPU(); t *= 2 {
			c.threads = append(c.threads, t)
		}
		if last := c.threads[len(c.threads)-1]; last != runtime.NumCPU() {
			c.threads = append(c.threads, runtime.NumCPU())
		}
	} else {
		for _, s := range strings.Split(threads, ",") {
			t, err := strconv.Atoi(s)
			if err != nil || t < 1 {
				return fmt.Errorf("--threads %q", threads)
			}
			c.threads = append(c.threads, t)
		}
	}
	if c.text == "" {
		c.text = defaultText()
	}
	if c.vocabFrom == "" && c.arch == "qwen35" {
		if p := "../shared/oracle/models/tiny-qwen35.gguf"; exists(p) {
			c.vocabFrom = p
		}
	}
	if c.vocabFrom == "" {
		if p := "../shared/oracle/models/tiny-llama-spm-q8_0.gguf"; exists(p) {
			c.vocabFrom = p
		}
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return err
	}
	fmt.Printf("# ppl-score on the CPU: %d chunks of %d tokens (llama.cpp protocol), %d CPUs, %s\n", c.chunks, c.context, runtime.NumCPU(), c.text)
	var cmp []comparison
	for _, typ := range c.types {
		model, err := c.makeModel(typ)
		if err != nil {
			return err
		}
		win, err := c.windows(model)
		if err != nil {
			return err
		}
		fmt.Printf("\n## %s (%.1f MB)\n\n", filepath.Base(model), float64(fileSize(model))/1e6)
		fmt.Printf("| mode | threads | tokens/s | wall s | user s | peak RSS MB | speed-up |\n| --- | --- | --- | --- | --- | --- | --- |\n")
		for _, mode := range c.modes {
			var base float64
			for _, th := range c.threads {
				r, err := c.score(model, win, mode, th)
				if err != nil {
					return err
				}
				tps := float64(c.chunks*c.context) / r.wall.Seconds()
				if base == 0 {
					base = tps
				}
				fmt.Printf("| %s | %d | %.0f | %.2f | %.2f | %.0f | %.2f× |\n", mode, th, tps, r.wall.Seconds(), r.user.Seconds(), r.rssMB, tps/base)
			}
		}
		if c.baseline != "" {
			vs := []variant{{name: "baseline", bin: c.baseline}, {name: "this build", bin: c.bin}}
			if err := c.compareVariants(model, win, "the baseline build in "+c.baseline, vs); err != nil {
				return err
			}
		}
		if c.levels != nil {
			var vs []variant
			for _, l := range c.levels {
				vs = append(vs, variant{name: l, bin: c.bin, env: []string{"PPL_CPU_KERNELS=" + l}, level: l})
			}
			if err := c.compareVariants(model, win, "kernel levels", vs); err != nil {
				return err
			}
		}
		if c.llama != "" {
			cc, err := c.compare(typ, model, win)
			if err != nil {
				return err
			}
			cmp = append(cmp, cc)
		}
		if c.long > 0 {
			if err := c.longWindow(model); err != nil {
				return err
			}
		}
	}
	if len(cmp) > 0 {
		th := c.threads[len(c.threads)-1]
		fmt.Printf("\n## Against llama.cpp: %d threads, best of %d alternating rounds (wall clock; user CPU seconds in parentheses)\n\n", th, c.reps)
		m := c.int8Mode()
		fmt.Printf("| model | ppl-score fp32 tokens/s | ppl-score %s tokens/s | llama-perplexity tokens/s | fp32 / llama.cpp | %s / llama.cpp |\n| --- | --- | --- | --- | --- | --- |\n", m, m)
		for _, x := range cmp {
			fmt.Printf("| %s | %.0f (%.1f s) | %.0f (%.1f s) | %.0f (%.1f s) | %.2f | %.2f |\n", x.typ,
				x.tps(x.fp32), x.fp32.user.Seconds(), x.tps(x.int8), x.int8.user.Seconds(), x.tps(x.llama), x.llama.user.Seconds(),
				x.tps(x.fp32)/x.tps(x.llama), x.tps(x.int8)/x.tps(x.llama))
		}
		for _, x := range cmp {
			if x.llamaPPL != "" {
				fmt.Printf("\n%s: llama-perplexity's final estimate %s (its first pass %s s); ppl-score's PPL fp32 %.4f, %s %.4f\n",
					x.typ, x.llamaPPL, x.llamaPass, x.fp32.ppl, m, x.int8.ppl)
			}
		}
	}
	return nil
}

// defaultText is the shared oracle's concatenated texts, or the held-out
// corpus's English documents joined into one file.
func defaultText() string {
	if p := "../shared/oracle/golden-long/all-texts.txt"; exists(p) {
		return p
	}
	return "eval/corpora/ppl-heldout-v1/en"
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func fileSize(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}

// makeModel generates the model of a type unless it exists: the 100M
// llama, the 1B qwen3moe, the 0.8B qwen35, the 0.1B rwkv7, the 48M
// minimax-m3 or the 72M qwen4exp (shapes of their own: ppl-mkmodel has no
// preset for them).
func (c *config) makeModel(typ string) (string, error) {
	size, shape := "100M", []string(nil)
	switch c.arch {
	case "qwen3moe":
		size = "1B"
	case "qwen35":
		size = "0.8B"
	case "rwkv7":
		size = "0.1B"
	case "minimax-m3":
		size, shape = "48M", strings.Fields("--embd 512 --layers 4 --heads 8 --kv-heads 2 --head-dim 64 --ffn 1024 --experts 8 --experts-used 2 --expert-ffn 256 --shared-ffn 256")
	case "qwen4exp":
		size, shape = "72M", strings.Fields("--embd 512 --layers 8 --heads 8 --kv-heads 2 --head-dim 64 --ffn 1024 --experts 8 --experts-used 2 --expert-ffn 256 --shared-ffn 256 --ssm-state 64 --ssm-k-heads 4 --ssm-v-heads 8 --rope-dims 16")
	}
	if shape == nil {
		shape = []string{"--params", size}
	}
	path := filepath.Join(c.dir, c.arch+"-"+strings.ToLower(size)+"-"+strings.ToLower(typ)+".gguf")
	if exists(path) {
		return path, nil
	}
	args := append([]string{"--arch", c.arch, "--type", typ, "-o", path}, shape...)
	if c.vocabFrom != "" {
		args = append(args, "--vocab-from", c.vocabFrom)
	}
	fmt.Fprintf(os.Stderr, "cpubench: generating %s\n", path)
	cmd := exec.Command(filepath.Join(c.bin, "ppl-mkmodel"), args...)
	cmd.Stderr = os.Stderr
	return path, cmd.Run()
}

// textFile returns the text as one file (a directory's .txt files joined).
func (c *config) textFile() (string, error) {
	st, err := os.Stat(c.text)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return c.text, nil
	}
	paths, _ := filepath.Glob(filepath.Join(c.text, "*.txt"))
	var b bytes.Buffer
	for _, p := range paths {
		d, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		b.Write(d)
	}
	out := filepath.Join(c.dir, "text.txt")
	return out, os.WriteFile(out, b.Bytes(), 0o644)
}

// windows tokenizes the text with the model and cuts the first chunks.
func (c *config) windows(model string) (string, error) {
	text, err := c.textFile()
	if err != nil {
		return "", err
	}
	out := filepath.Join(c.dir, filepath.Base(model)+fmt.Sprintf(".c%d.windows.ndjson", c.context))
	tok, err := c.output("ppl-tokenize", "--model", model, "--text", text, "--no-cache", "--log-level", "warn")
	if err != nil {
		return "", err
	}
	win, err := c.outputIn(tok, "ppl-window", "--protocol", "llama.cpp", "--context", strconv.Itoa(c.context))
	if err != nil {
		return "", err
	}
	kept, n, err := firstWindows(win, c.chunks)
	if err != nil {
		return "", err
	}
	if n < c.chunks {
		return "", fmt.Errorf("%s gives %d chunks of %d tokens, want %d", text, n, c.context, c.chunks)
	}
	return out, os.WriteFile(out, kept, 0o644)
}

// firstWindows keeps the first n window records of ppl-window output and
// fixes the window stage's record count.
func firstWindows(in []byte, n int) ([]byte, int, error) {
	var out bytes.Buffer
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(in))
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	for sc.Scan() {
		line := sc.Bytes()
		var rec struct {
			Type  string `json:"type"`
			Stage string `json:"stage"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, 0, err
		}
		switch {
		case rec.Type == "window":
			seen++
			if seen > n {
				continue
			}
		case rec.Type == "end" && rec.Stage == "window":
			fmt.Fprintf(&out, `{"type":"end","stage":"window","records":%d}`+"\n", 1+min(seen, n))
			continue
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	return out.Bytes(), min(seen, n), sc.Err()
}

func (c *config) output(tool string, args ...string) ([]byte, error) {
	return c.outputIn(nil, tool, args...)
}

func (c *config) outputIn(stdin []byte, tool string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(c.bin, tool), args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %v\n%s", tool, err, errb.String())
	}
	return out, nil
}

// result is one timed process.
type result struct {
	wall, user time.Duration
	rssMB      float64
	stderr     string
	ppl        float64 // ppl-score runs: the perplexity of the scores
}

// timed runs a command and returns its wall time, user time and peak RSS.
func timed(name string, env, args []string, stdout io.Writer) (result, error) {
	cmd := exec.Command(name, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, &errb
	t0 := time.Now()
	err := cmd.Run()
	r := result{wall: time.Since(t0), stderr: errb.String()}
	if err != nil {
		return r, fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tail(errb.String(), 2000))
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.rssMB = float64(ru.Maxrss) / 1024 // KiB on Linux
	}
	r.user = cmd.ProcessState.UserTime()
	return r, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// score runs ppl-score on the windows; r.ppl is the perplexity of its
// scores.
func (c *config) score(model, win, mode string, threads int) (result, error) {
	return c.scoreWith(c.bin, nil, model, win, mode, threads)
}

// variant is one ppl-score of compareVariants: a build's tools (bin) run
// with env added to the environment, at the kernel level named (when not
// empty: checked in ppl-score's log).
type variant struct {
	name, bin string
	env       []string
	level     string
}

// compareVariants runs the variants' ppl-score in alternating rounds with
// all threads, and prints the best of each per mode, its ratio to the
// first's tokens/s (wall clock, and user CPU time, less disturbed by other
// load) and whether all gave the same perplexity to the bit: a change's
// no-slowdown check (the baseline build, then this one), or the kernel
// levels' speed-ups.
func (c *config) compareVariants(model, win, title string, vs []variant) error {
	th := c.threads[len(c.threads)-1]
	fmt.Printf("\nAgainst %s: %d threads, best of %d alternating rounds\n\n| mode |", title, th, c.reps)
	for _, v := range vs {
		fmt.Printf(" %s tokens/s |", v.name)
	}
	for _, v := range vs[1:] {
		fmt.Printf(" %s / %s | user-time ratio |", v.name, vs[0].name)
	}
	fmt.Printf(" same PPL |\n|%s\n", strings.Repeat(" --- |", 2+len(vs)+2*(len(vs)-1)))
	for _, mode := range c.modes {
		best := make([]result, len(vs))
		for range c.reps {
			for i, v := range vs {
				r, err := c.scoreWith(v.bin, v.env, model, win, mode, th)
				if err != nil {
					return fmt.Errorf("%s: %w", v.name, err)
				}
				if v.level != "" && !strings.Contains(r.stderr, ", "+v.level+" kernels,") {
					return fmt.Errorf("--levels %s: ppl-score did not run those kernels (this CPU lacks them, or the name is wrong):\n%s", v.level, tail(r.stderr, 2000))
				}
				if best[i].wall == 0 || r.wall < best[i].wall {
					best[i] = r
				}
			}
		}
		tok := float64(c.chunks * c.context)
		same := true
		fmt.Printf("| %s |", mode)
		for _, r := range best {
			fmt.Printf(" %.0f |", tok/r.wall.Seconds())
			same = same && r.ppl == best[0].ppl
		}
		for _, r := range best[1:] {
			fmt.Printf(" %.3f | %.3f |", best[0].wall.Seconds()/r.wall.Seconds(), best[0].user.Seconds()/r.user.Seconds())
		}
		fmt.Printf(" %v |\n", same)
	}
	return nil
}

// scoreWith runs the ppl-score of the tools in bin (env added to its
// environment), with an f16 KV cache as llama-perplexity's default (with
// it, the int8 modes compute what llama.cpp computes).
func (c *config) scoreWith(bin string, env []string, model, win, mode string, threads int) (result, error) {
	var out bytes.Buffer
	r, err := timed(filepath.Join(bin, "ppl-score"), env, []string{"--model", model, "--device", "cpu", "--no-cache",
		"--kv-dtype", "f16", "--activations", mode, "--threads", strconv.Itoa(threads), "--log-level", "info", win}, &out)
	if err != nil {
		return r, err
	}
	r.ppl, err = perplexity(out.Bytes())
	return r, err
}

// perplexity is exp of the mean negative log-prob of ppl-score output.
func perplexity(out []byte) (float64, error) {
	sum, n := 0.0, 0
	for _, line := range bytes.Split(out, []byte("\n")) {
		if !bytes.Contains(line, []byte(`"type":"scores"`)) {
			continue
		}
		var rec struct {
			Logprobs []float64 `json:"logprobs"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			return 0, fmt.Errorf("ppl-score output: %w", err)
		}
		for _, lp := range rec.Logprobs {
			sum -= lp
		}
		n += len(rec.Logprobs)
	}
	if n == 0 {
		return 0, errors.New("ppl-score output has no scores")
	}
	return math.Exp(sum / float64(n)), nil
}

// comparison is one model's best times against llama.cpp.
type comparison struct {
	typ                 string
	tokens              int
	fp32, int8, llama   result
	llamaPPL, llamaPass string
}

// int8Mode is the int8 mode compared with llama.cpp: the first of --modes
// (int8-avx2 for llama.cpp's AVX2 build, int8-amx for its AMX build), int8
// if none is.
func (c *config) int8Mode() string {
	for _, m := range c.modes {
		if strings.HasPrefix(m, "int8") {
			return m
		}
	}
	return "int8"
}

func (x comparison) tps(r result) float64 { return float64(x.tokens) / r.wall.Seconds() }

// compare runs ppl-score (both modes) and llama-perplexity alternately.
func (c *config) compare(typ, model, win string) (comparison, error) {
	th := c.threads[len(c.threads)-1]
	x := comparison{typ: typ, tokens: c.chunks * c.context}
	lm, lt, err := c.llamaFiles(model)
	if err != nil {
		return x, err
	}
	fields := strings.Fields(c.llama)
	largs := append(fields[1:], "-m", lm, "-f", lt, "-c", strconv.Itoa(c.context), "-b", strconv.Itoa(c.context),
		"-t", strconv.Itoa(th), "--chunks", strconv.Itoa(c.chunks))
	best := func(cur *result, r result) {
		if cur.wall == 0 || r.wall < cur.wall {
			*cur = r
		}
	}
	for rep := 0; rep < c.reps; rep++ {
		for _, mode := range []string{"fp32", c.int8Mode()} {
			r, err := c.score(model, win, mode, th)
			if err != nil {
				return x, err
			}
			if mode == "fp32" {
				best(&x.fp32, r)
			} else {
				best(&x.int8, r)
			}
		}
		var lout bytes.Buffer
		r, err := timed(fields[0], nil, largs, &lout)
		if err != nil {
			return x, err
		}
		r.stderr = lout.String() + r.stderr
		best(&x.llama, r)
		fmt.Fprintf(os.Stderr, "cpubench: %s round %d: fp32 %.2fs, %s %.2fs, llama.cpp %.2fs\n", typ, rep+1,
			x.fp32.wall.Seconds(), c.int8Mode(), x.int8.wall.Seconds(), r.wall.Seconds())
	}
	for _, line := range strings.Split(x.llama.stderr, "\n") {
		if i := strings.Index(line, "Final estimate:"); i >= 0 {
			x.llamaPPL = strings.TrimSpace(line[i+len("Final estimate:"):])
		}
		if i := strings.Index(line, " seconds per pass"); i >= 0 {
			f := strings.Fields(line[:i])
			x.llamaPass = f[len(f)-1]
		}
	}
	return x, nil
}

// llamaFiles puts the model and a text prefix where the llama command sees
// them, and returns their paths as it sees them. The prefix is the text cut
// after enough bytes for the chunks (llama-perplexity tokenizes all of it).
func (c *config) llamaFiles(model string) (m, t string, err error) {
	text, err := c.textFile()
	if err != nil {
		return "", "", err
	}
	data, err := os.ReadFile(text)
	if err != nil {
		return "", "", err
	}
	// 16 bytes per token is far more than any text needs here.
	if n := 16 * (c.chunks + 1) * c.context; len(data) > n {
		data = data[:n]
		for len(data) > 0 && data[len(data)-1]&0xc0 == 0x80 { // whole characters
			data = data[:len(data)-1]
		}
		if len(data) > 0 && data[len(data)-1] >= 0xc0 {
			data = data[:len(data)-1]
		}
	}
	dir := c.dir
	seen := dir
	if c.llamaRoot != "" {
		dir = filepath.Join(c.llamaRoot, "x", "ppl-bench")
		seen = "/x/ppl-bench"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	tp := filepath.Join(dir, "text.txt")
	if err := os.WriteFile(tp, data, 0o644); err != nil {
		return "", "", err
	}
	mp := filepath.Join(dir, filepath.Base(model))
	if c.llamaRoot != "" && fileSize(mp) != fileSize(model) {
		if err := copyFile(mp, model); err != nil {
			return "", "", err
		}
	}
	if c.llamaRoot == "" {
		return model, tp, nil
	}
	return filepath.Join(seen, filepath.Base(model)), filepath.Join(seen, "text.txt"), nil
}

func copyFile(dst, src string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// longWindow scores one window of c.long tokens in each mode and reports
// the peak RSS against the model's size plus 2 GB.
func (c *config) longWindow(model string) error {
	text, err := c.textFile()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(text)
	if err != nil {
		return err
	}
	tok, err := c.output("ppl-tokenize", "--model", model, "--text", text, "--no-cache", "--log-level", "warn")
	if err != nil {
		return err
	}
	// Repeat the text until it has enough tokens.
	n := strings.Count(string(tok), ",") + 1 // a rough token count, from the ids
	reps := c.long/max(n, 1) + 2
	long := filepath.Join(c.dir, fmt.Sprintf("text-x%d.txt", reps))
	if err := os.WriteFile(long, bytes.Repeat(data, reps), 0o644); err != nil {
		return err
	}
	tok, err = c.output("ppl-tokenize", "--model", model, "--text", long, "--no-cache", "--log-level", "warn")
	if err != nil {
		return err
	}
	win, err := c.outputIn(tok, "ppl-window", "--disjoint", "--context", strconv.Itoa(c.long))
	if err != nil {
		return err
	}
	kept, k, err := firstWindows(win, 1)
	if err != nil {
		return err
	}
	if k != 1 {
		return errors.New("long window: text too short")
	}
	wp := filepath.Join(c.dir, fmt.Sprintf("long-%d.windows.ndjson", c.long))
	if err := os.WriteFile(wp, kept, 0o644); err != nil {
		return err
	}
	size := float64(float64(fileSize(model)) / (1 << 20)) // rounded: never fused into size+2048
	fmt.Printf("\nOne window of %d tokens (%d targets), all threads: model file %.0f MB, bound %.0f MB (model + 2 GB)\n\n",
		c.long, c.long-1, size, size+2048)
	fmt.Printf("| mode | wall s | user s | peak RSS MB | within bound |\n| --- | --- | --- | --- | --- |\n")
	for _, mode := range c.modes {
		r, err := c.score(model, wp, mode, runtime.NumCPU())
		if err != nil {
			return err
		}
		fmt.Printf("| %s | %.1f | %.1f | %.0f | %v |\n", mode, r.wall.Seconds(), r.user.Seconds(), r.rssMB, r.rssMB <= size+2048)
	}
	return nil
}
