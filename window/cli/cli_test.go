package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"ppl.dev/command"
	"ppl.dev/pipe"
	"ppl.dev/window/protocol"
)

// tokenized returns a complete tokenize stage with one stream of n tokens
// for each element of ns, named s0, s1, ..., in chunks of at most chunk ids.
func tokenized(t testing.TB, chunk int, ns ...int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := pipe.NewWriter(&buf, pipe.StageTokenize)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Header(pipe.Header{Tool: "ppl-tokenize", Version: "test"}))
	for i, n := range ns {
		id := "s" + strconv.Itoa(i)
		must(w.Stream(&pipe.Stream{ID: id, Domain: "en", SHA256: "0", NTokens: n}))
		for off := 0; off < n; off += chunk {
			ids := make([]int32, min(chunk, n-off))
			for j := range ids {
				ids[j] = int32((off + j) % 1000)
			}
			must(w.Tokens(&pipe.Tokens{Stream: id, Offset: off, IDs: ids}))
		}
	}
	must(w.End())
	must(w.Flush())
	return buf.Bytes()
}

// runTool runs ppl-window in-process and returns its exit status, stdout
// and stderr.
func runTool(args []string, stdin []byte) (int, string, string) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, bytes.NewReader(stdin), &stdout, &stderr)
	code := command.Exit(tool, err, &stderr)
	return code, stdout.String(), stderr.String()
}

// readBack reads ppl-window's output with a pipe.Reader, which checks the
// stage accounting, and returns its window header and window records.
func readBack(t testing.TB, out string) (*pipe.Header, []pipe.Window) {
	t.Helper()
	r := pipe.NewReader(strings.NewReader(out), "out")
	var hdr *pipe.Header
	var wins []pipe.Window
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading ppl-window's output: %v", err)
		}
		if rec.Header != nil && rec.Header.Stage == pipe.StageWindow {
			hdr = rec.Header
		}
		if rec.Window != nil {
			wins = append(wins, *rec.Window)
		}
	}
	if got, want := r.Stages(), []string{pipe.StageTokenize, pipe.StageWindow}; !reflect.DeepEqual(got, want) {
		t.Fatalf("stages %v, want %v", got, want)
	}
	return hdr, wins
}

// expect returns the window records protocol.Windows gives for streams of
// the lengths ns, all shards.
func expect(t testing.TB, p protocol.Protocol, ns ...int) []pipe.Window {
	t.Helper()
	var wins []pipe.Window
	for i, n := range ns {
		spans, err := protocol.Windows(n, p)
		if err != nil {
			t.Fatal(err)
		}
		for j, s := range spans {
			wins = append(wins, pipe.Window{Type: pipe.TypeWindow, Stream: "s" + strconv.Itoa(i), Index: j,
				Begin: s.Begin, End: s.End, ScoreFrom: s.ScoreFrom, BOS: s.BOS})
		}
	}
	return wins
}

// onlyNoWindowWarnings reports whether stderr holds nothing but warnings
// about streams that get no window (those shorter than the context).
func onlyNoWindowWarnings(stderr string) bool {
	re := regexp.MustCompile(`^ppl-window: warning: stream "s[0-9]+" \([0-9]+ tokens\) gets no window under the [a-z.]+ protocol at context [0-9]+: it is shorter than the context and is not measured$`)
	for _, l := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		if l != "" && !re.MatchString(l) {
			return false
		}
	}
	return true
}

func TestRun(t *testing.T) {
	ns := []int{0, 1, 2, 9, 100, 4097}
	in := tokenized(t, 1000, ns...)
	for _, tc := range []struct {
		args []string
		p    protocol.Protocol
	}{
		{nil, protocol.Protocol{Mode: "sliding", Context: 4096, Stride: 2048}},
		{[]string{"--context", "8"}, protocol.Protocol{Mode: "sliding", Context: 8, Stride: 4}},
		{[]string{"--context", "8", "--stride", "7"}, protocol.Protocol{Mode: "sliding", Context: 8, Stride: 7}},
		{[]string{"--context", "9"}, protocol.Protocol{Mode: "sliding", Context: 9, Stride: 4}},
		{[]string{"--disjoint", "--context", "8"}, protocol.Protocol{Mode: "disjoint", Context: 8}},
		{[]string{"--protocol", "disjoint", "--context", "3"}, protocol.Protocol{Mode: "disjoint", Context: 3}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runTool(tc.args, in)
			if code != 0 || !onlyNoWindowWarnings(errOut) {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			hdr, wins := readBack(t, out)
			if !reflect.DeepEqual(*hdr.Protocol, tc.p) {
				t.Errorf("header protocol %+v, want %+v", *hdr.Protocol, tc.p)
			}
			if hdr.Tool != "ppl-window" || hdr.Version != Version {
				t.Errorf("header tool %q version %q", hdr.Tool, hdr.Version)
			}
			if want := expect(t, tc.p, ns...); !reflect.DeepEqual(wins, want) {
				t.Errorf("windows\n%v\nwant\n%v", wins, want)
			}
		})
	}
}

// TestLlamaCpp checks the llama.cpp protocol end to end, and its error for
// a stream shorter than twice the context.
func TestLlamaCpp(t *testing.T) {
	p := protocol.Protocol{Mode: "llama.cpp", Context: 512}
	code, out, errOut := runTool([]string{"--protocol", "llama.cpp", "--context", "512"}, tokenized(t, 4096, 1024, 5000))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	_, wins := readBack(t, out)
	if want := expect(t, p, 1024, 5000); !reflect.DeepEqual(wins, want) {
		t.Errorf("windows %v, want %v", wins, want)
	}
	// 512-token chunks scoring the 255 targets from position 257.
	if w := wins[0]; w.Begin != 0 || w.End != 512 || w.ScoreFrom != 257 || !w.BOS {
		t.Errorf("first window %+v", w)
	}
	code, _, errOut = runTool([]string{"--protocol", "llama.cpp", "--context", "512"}, tokenized(t, 4096, 1024, 1023))
	want := `ppl-window: <stdin>:5: stream "s1": stream too short: the llama.cpp protocol needs at least twice the context (2 x 512 tokens), the stream has 1023` + "\n"
	if code != 1 || errOut != want {
		t.Errorf("exit %d, stderr %q; want 1, %q", code, errOut, want)
	}
}

// TestShardsPartition checks that the shards of a run together hold every
// window of the unsharded run exactly once.
func TestShardsPartition(t *testing.T) {
	ns := []int{7, 0, 3, 40, 1, 13}
	in := tokenized(t, 5, ns...)
	for _, tc := range []struct{ args, split []string }{
		{[]string{"--context", "4", "--stride", "1"}, nil},
		{[]string{"--disjoint", "--context", "3"}, nil},
		{[]string{"--context", "4", "--stride", "1"}, []string{"--split", "count"}},
		{[]string{"--disjoint", "--context", "3"}, []string{"--split", "count"}},
	} {
		args := tc.args
		_, all := runToolWindows(t, args, in)
		for _, n := range []int{1, 2, 3, 7, len(all) - 1, len(all), len(all) + 1} {
			seen := map[string]int{}
			for k := 1; k <= n; k++ {
				hdr, wins := runToolWindows(t, append(append(slices.Clip(args), tc.split...), "--shard", fmt.Sprintf("%d/%d", k, n)), in)
				if want := fmt.Sprintf("%d/%d", k, n); hdr.Protocol.Shard != want || hdr.Flags["shard"] != want {
					t.Errorf("header shard %q, flags %v; want %s", hdr.Protocol.Shard, hdr.Flags, want)
				}
				for _, w := range wins {
					seen[fmt.Sprint(w)]++
				}
			}
			if len(seen) != len(all) {
				t.Fatalf("%v with %d shards: %d distinct windows, want %d", args, n, len(seen), len(all))
			}
			for _, w := range all {
				if c := seen[fmt.Sprint(w)]; c != 1 {
					t.Fatalf("%v with %d shards: window %v in %d shards", args, n, w, c)
				}
			}
		}
	}
}

// TestSplitCost: on streams of very different lengths, --shard deals the
// windows by cost, so the largest shard's work is within 10% of the mean;
// every shard's header records the same split, whose totals are the
// shards' own; standard input and a file give the same shards.
func TestSplitCost(t *testing.T) {
	ns := []int{3, 900, 17, 5000, 40, 2, 260, 33, 1500, 64, 8, 120}
	in := tokenized(t, 1000, ns...)
	path := filepath.Join(t.TempDir(), "tok.ndjson")
	if err := os.WriteFile(path, in, 0o644); err != nil {
		t.Fatal(err)
	}
	const attn = 64
	for _, n := range []int{2, 3, 5} {
		load := make([]int64, n)
		var first *pipe.Split
		for k := 1; k <= n; k++ {
			args := []string{"--context", "128", "--stride", "32", "--shard", fmt.Sprintf("%d/%d", k, n), "--split-attention", strconv.Itoa(attn)}
			hdr, wins := runToolWindows(t, args, in)
			code, fromFile, errOut := runTool(append(args, path), nil)
			if code != 0 {
				t.Fatalf("%v %s: exit %d: %s", args, path, code, errOut)
			}
			if _, fw := readBack(t, fromFile); !reflect.DeepEqual(fw, wins) {
				t.Errorf("shard %d/%d: the file gives other windows than standard input", k, n)
			}
			sp := hdr.Protocol.Split
			if sp == nil || sp.By != "cost" || sp.Attention != attn || len(sp.Cost) != n || len(sp.Windows) != n {
				t.Fatalf("shard %d/%d: header split %+v", k, n, sp)
			}
			if first == nil {
				first = sp
			} else if !reflect.DeepEqual(sp, first) {
				t.Errorf("shard %d/%d: split %+v differs from shard 1's %+v", k, n, sp, first)
			}
			if hdr.Flags["split"] != "cost" {
				t.Errorf("shard %d/%d: flags %v", k, n, hdr.Flags)
			}
			for _, w := range wins {
				load[k-1] += protocol.Cost(protocol.Span{Begin: w.Begin, End: w.End, ScoreFrom: w.ScoreFrom}, attn)
			}
			if len(wins) != sp.Windows[k-1] || load[k-1] != sp.Cost[k-1] {
				t.Errorf("shard %d/%d: %d windows of cost %d, the header says %d of %d", k, n, len(wins), load[k-1], sp.Windows[k-1], sp.Cost[k-1])
			}
		}
		var sum, top int64
		for _, l := range load {
			sum += l
			top = max(top, l)
		}
		mean := float64(sum) / float64(n)
		t.Logf("%d shards: costs %v, largest %.2f%% over the mean", n, load, 100*(float64(top)/mean-1))
		if float64(top) > 1.10*mean {
			t.Errorf("%d shards: costs %v: the largest is more than 10%% over the mean %.0f", n, load, mean)
		}
	}
}

func TestSplitUsage(t *testing.T) {
	good := tokenized(t, 10, 20)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--split", "cost"}, "ppl-window: --split: only with --shard\n"},
		{[]string{"--split-attention", "9"}, "ppl-window: --split-attention: only with --shard\n"},
		{[]string{"--shard", "1/2", "--split", "bytes"}, "ppl-window: --split \"bytes\": want cost or count\n"},
		{[]string{"--shard", "1/2", "--split-attention", "0"}, "ppl-window: --split-attention 0: must be at least 1\n"},
		{[]string{"--shard", "1/2", "--split", "count", "--split-attention", "5"}, "ppl-window: --split-attention: only with --split cost\n"},
	} {
		code, out, errOut := runTool(tc.args, good)
		if code != 2 || out != "" || errOut != tc.want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2, %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

func runToolWindows(t *testing.T, args []string, in []byte) (*pipe.Header, []pipe.Window) {
	t.Helper()
	code, out, errOut := runTool(args, in)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errOut)
	}
	return readBack(t, out)
}

func TestZstdInput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tok.ndjson.zst")
	f, err := pipe.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	plain := tokenized(t, 1000, 5, 3000)
	if _, err := f.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	code, fromZst, errOut := runTool([]string{"--context", "16", path}, nil)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	plainPath := filepath.Join(t.TempDir(), "tok.ndjson")
	if err := os.WriteFile(plainPath, plain, 0o644); err != nil {
		t.Fatal(err)
	}
	code, fromPlain, _ := runTool([]string{"--context", "16", plainPath}, nil)
	if code != 0 || fromZst != fromPlain {
		t.Errorf("output from .zst differs from the same input uncompressed")
	}
	// From standard input the header has no window count: ppl-window streams.
	code, fromStdin, _ := runTool([]string{"--context", "16"}, plain)
	if want := regexp.MustCompile(`,"windows":[1-9][0-9]*\}`).ReplaceAllString(fromPlain, "}"); code != 0 || fromStdin != want || want == fromPlain {
		t.Errorf("output from stdin differs from the same input in a file but for the window count")
	}
}

func TestExitCodes(t *testing.T) {
	good := tokenized(t, 10, 5)
	for _, tc := range []struct {
		args   []string
		stdin  []byte
		code   int
		stderr string // exact, or a prefix when it ends in "..."
	}{
		{[]string{"--help"}, nil, 0, ""},
		{[]string{"--version"}, nil, 0, ""},
		{[]string{"--context", "4"}, good, 0, ""},
		{[]string{"--context", "1"}, good, 2, "ppl-window: --context 1: must be at least 2\n"},
		{[]string{"--context", "4", "--stride", "4"}, good, 2, "ppl-window: --stride 4: must be less than --context 4\n"},
		{[]string{"--stride", "0"}, good, 2, "ppl-window: --stride 0: must be at least 1\n"},
		{[]string{"--stride", "-1"}, good, 2, "ppl-window: --stride: expected int value but got \"-1\" (short flag)..."},
		{[]string{"--stride=-1"}, good, 2, "ppl-window: --stride -1: must be at least 1\n"},
		{[]string{"--context", "x"}, good, 2, "ppl-window: --context: expected a valid 64 bit int but got \"x\"\n"},
		{[]string{"--shard", "3/2"}, good, 2, "ppl-window: --shard \"3/2\": want 1 <= k <= n\n"},
		{[]string{"--shard", "1-2"}, good, 2, "ppl-window: --shard \"1-2\": want k/n, e.g. 1/4\n"},
		{[]string{"--protocol", "hf"}, good, 2, "ppl-window: --protocol \"hf\": want sliding, disjoint or llama.cpp\n"},
		{[]string{"--disjoint", "--stride", "2"}, good, 2, "ppl-window: --stride: the disjoint protocol has no stride\n"},
		{[]string{"--protocol", "llama.cpp", "--stride", "2"}, good, 2, "ppl-window: --stride: the llama.cpp protocol has no stride\n"},
		{[]string{"--protocol", "llama.cpp", "--context", "2"}, good, 2, "ppl-window: --context 2: must be at least 3 for the llama.cpp protocol\n"},
		{[]string{"--protocol", "sliding", "--disjoint"}, good, 2, "ppl-window: --disjoint conflicts with --protocol sliding\n"},
		{[]string{"--nope"}, good, 2, "ppl-window: unknown flag --nope\n"},
		{[]string{"a", "b"}, good, 2, "ppl-window: unexpected argument b\n"},
		{nil, good[:len(good)-5], 1, "ppl-window: <stdin>:4: malformed JSON: ..."},
		{nil, good[:bytes.LastIndexByte(good[:len(good)-1], '\n')+1], 1, "ppl-window: <stdin>:3: truncated input: no end record for stage \"tokenize\"\n"},
		{nil, nil, 1, "ppl-window: <stdin>: no records: empty input\n"},
		{[]string{filepath.Join(t.TempDir(), "none.ndjson")}, nil, 1, "ppl-window: open ..."},
	} {
		code, _, errOut := runTool(tc.args, tc.stdin)
		ok := errOut == tc.stderr
		if prefix, cut := strings.CutSuffix(tc.stderr, "..."); cut {
			ok = strings.HasPrefix(errOut, prefix)
		}
		if code != tc.code || !ok {
			t.Errorf("%q: exit %d, stderr %q; want %d, %q", tc.args, code, errOut, tc.code, tc.stderr)
		}
		if strings.Count(errOut, "\n") > 1 {
			t.Errorf("%q: stderr of more than one line: %q", tc.args, errOut)
		}
	}
}

func TestHelpAndVersion(t *testing.T) {
	code, out, errOut := runTool([]string{"--help"}, nil)
	if code != 0 || errOut != "" {
		t.Fatalf("--help: exit %d, stderr %q", code, errOut)
	}
	for _, flag := range []string{"--protocol", "--disjoint", "--context", "--stride", "--shard", "--version", "--help", "sliding", "disjoint", "llama.cpp"} {
		if !strings.Contains(out, flag) {
			t.Errorf("--help does not mention %s:\n%s", flag, out)
		}
	}
	code, out, _ = runTool([]string{"--version"}, nil)
	if code != 0 || out != "ppl-window "+Version+"\n" {
		t.Errorf("--version: exit %d, %q", code, out)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteError(t *testing.T) {
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"--context", "4"}, bytes.NewReader(tokenized(t, 10, 5)), failWriter{}, &stderr)
	if code := command.Exit(tool, err, &stderr); code != 1 || stderr.String() != "ppl-window: write: disk full\n" {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

func TestCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := run(ctx, nil, bytes.NewReader(tokenized(t, 10, 5)), io.Discard, io.Discard)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("run with a canceled context: %v", err)
	}
}

// FuzzFlags runs ppl-window end to end with arbitrary protocol flags over a
// stream of n tokens: it must exit 0 with output that reads back as a
// complete pipe holding exactly the protocol's windows (and at most
// warnings on stderr), or exit 1 or 2 with a one-line message; never panic.
func FuzzFlags(f *testing.F) {
	f.Add(43, 4, 2, "sliding", "", true)
	f.Add(43, 4, 0, "disjoint", "2/3", false)
	f.Add(43, 4, 0, "llama.cpp", "", false)
	f.Add(7, 4, 0, "llama.cpp", "", false)
	f.Add(10, 4, 4, "sliding", "", true)
	f.Add(10, 1, 0, "sliding", "1/1", false)
	f.Add(10, 4, 2, "sliding", "0/2", true)
	f.Add(10, -3, -1, "hf", "x", true)
	f.Add(45, 8, 3, "sliding", "2/3", true)
	f.Fuzz(func(t *testing.T, n, N, S int, mode, shard string, withStride bool) {
		if n < 0 || n > 3000 {
			t.Skip()
		}
		args := []string{"--protocol=" + mode, "--context=" + strconv.Itoa(N)}
		if withStride {
			args = append(args, "--stride="+strconv.Itoa(S))
		}
		if shard != "" {
			args = append(args, "--shard="+shard)
		}
		code, out, errOut := runTool(args, tokenized(t, 97, n))
		switch code {
		case 0:
			// Only warnings, one line each (a stream shorter than the
			// context gets no window and is named).
			for _, line := range strings.Split(strings.TrimSuffix(errOut, "\n"), "\n") {
				if line != "" && !strings.HasPrefix(line, "ppl-window: warning: ") {
					t.Fatalf("%q: exit 0 with stderr %q", args, errOut)
				}
			}
		case 1, 2:
			if !strings.HasPrefix(errOut, "ppl-window: ") || strings.Count(errOut, "\n") != 1 {
				t.Fatalf("%q: exit %d with stderr %q", args, code, errOut)
			}
			if code == 1 && !strings.Contains(errOut, "stream too short") {
				t.Fatalf("%q: unexpected failure %q", args, errOut)
			}
			return
		default:
			t.Fatalf("%q: exit %d", args, code)
		}
		hdr, wins := readBack(t, out)
		p := *hdr.Protocol
		sh, err := protocol.ParseShard(p.Shard)
		if err != nil {
			t.Fatal(err)
		}
		split := p.Split
		p.Shard, p.Split = "", nil
		all := expect(t, p, n)
		owns := sh.Owns
		if split != nil { // dealt by cost
			costs := make([]int64, len(all))
			for i, w := range all {
				costs[i] = protocol.Cost(protocol.Span{Begin: w.Begin, End: w.End, ScoreFrom: w.ScoreFrom}, split.Attention)
			}
			owner, _ := protocol.Deal(costs, sh.N)
			owns = func(g int) bool { return int(owner[g]) == sh.K-1 }
		}
		var want []pipe.Window
		for g, w := range all {
			if owns(g) {
				want = append(want, w)
			}
		}
		if !reflect.DeepEqual(wins, want) {
			t.Fatalf("%q: windows %v, want %v", args, wins, want)
		}
	})
}

// With --split cost the input is read twice; an error in it is reported
// once, naming the file and line, before any output.
func TestSplitCostBadInput(t *testing.T) {
	in := tokenized(t, 10, 20, 30)
	bad := bytes.Replace(in, []byte(`"offset":10`), []byte(`"offset":11`), 1)
	path := filepath.Join(t.TempDir(), "bad.ndjson")
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runTool([]string{"--context", "8", "--shard", "1/2", path}, nil)
	if code != 1 || out != "" || !strings.HasPrefix(errOut, "ppl-window: "+path+":4: ") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runTool([]string{"--context", "8", "--shard", "1/2"}, bad)
	if code != 1 || out != "" || !strings.HasPrefix(errOut, "ppl-window: <stdin>:4: ") {
		t.Errorf("stdin: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
