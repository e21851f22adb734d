// Package tests runs the end-to-end testscript scripts in testdata/script
// against the real tools, linked into the test binary: `exec ppl-window`
// in a script runs ppl-window's Main in a child process.
//
// TestNoImplicitFMA (fma_test.go) checks a property of the whole
// repository instead: no float product fused into a sum unless the code
// says so.
//
// Scripts are named after their topic (window_sliding.txt, score_bad_model.txt).
// The environment variable ORACLE points at ../shared/oracle when it exists;
// scripts that need it start with `[!exec:oracle] skip` ... see condition
// `oracle` below.
package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/tidwall/gjson"

	aggregate "ppl.dev/aggregate/cli"
	cachecli "ppl.dev/cache/cli"
	compare "ppl.dev/compare/cli"
	mkmodel "ppl.dev/eval/mkmodel/cli"
	"ppl.dev/gguf"
	"ppl.dev/oracle"
	pplrun "ppl.dev/run/cli"
	score "ppl.dev/score/cli"
	tokenize "ppl.dev/tokenize/cli"
	"ppl.dev/tokenize/testmodel"
	window "ppl.dev/window/cli"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"ppl-tokenize":  func() { os.Exit(tokenize.Main()) },
		"ppl-window":    func() { os.Exit(window.Main()) },
		"ppl-score":     func() { os.Exit(score.Main()) },
		"ppl-aggregate": func() { os.Exit(aggregate.Main()) },
		"ppl-compare":   func() { os.Exit(compare.Main()) },
		"ppl-cache":     func() { os.Exit(cachecli.Main()) },
		"ppl":           func() { os.Exit(pplrun.Main()) },
		"ppl-mkmodel":   func() { os.Exit(mkmodel.Main()) },
	})
}

// update rewrites a file of a script's archive that a cmp finds differing
// from stdout or stderr (testscript's UpdateScripts): go test ./tests
// -run TestScripts/NAME -update, then review the diff.
var update = flag.Bool("update", false, "rewrite the files of a script that cmp finds differ")

func TestScripts(t *testing.T) {
	oracleDir, haveOracle := oracle.Optional(t)
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("ORACLE", oracleDir)
			env.Setenv("PPL_CACHE_DIR", env.WorkDir+"/.cache")
			// tiny.gguf: a tokenizer-only model for ppl-tokenize's scripts.
			return testmodel.WriteTinySPM(env.WorkDir + "/tiny.gguf")
		},
		// [oracle] is true when ../shared/oracle is present; scripts that
		// need it begin with: [!oracle] skip 'shared oracle absent'.
		// [exists:PATH] is true when PATH exists (/dev/zero).
		Condition: func(cond string) (bool, error) {
			if cond == "oracle" {
				return haveOracle, nil
			}
			if p, ok := strings.CutPrefix(cond, "exists:"); ok { // [exists:/dev/zero]
				_, err := os.Stat(p)
				return err == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"report-ppl":    reportPPL,
			"corrupt-cache": corruptCache,
			"swap-cache":    swapCache,
			"wait-cache":    waitCache,
			"transient":     transient,
			"gguf-split":    ggufSplit,
			"gguf-add":      ggufAdd,
			"cmp-records":   cmpRecords,
			"report-num":    reportNum,
			"sha256":        fileSHA256,
			"rwkv-vocab":    rwkvVocab,
		},
		RequireExplicitExec: true,
		UpdateScripts:       *update,
	})
}

// reportPPL checks a report's overall perplexity against an expected value:
//
//	report-ppl REPORT.json WANT REL_TOL [SCORED_TOKENS]
//
// passes when |ppl/WANT - 1| <= REL_TOL (and the overall scored-token count
// is SCORED_TOKENS when given).
func reportPPL(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 3 || len(args) > 4 {
		ts.Fatalf("usage: report-ppl REPORT.json WANT REL_TOL [SCORED_TOKENS]")
	}
	doc := ts.ReadFile(args[0])
	ppl := gjson.Get(doc, "overall.perplexity.ppl").Float()
	want, err1 := strconv.ParseFloat(args[1], 64)
	tol, err2 := strconv.ParseFloat(args[2], 64)
	if err1 != nil || err2 != nil {
		ts.Fatalf("report-ppl: bad number in %q", args[1:3])
	}
	if len(args) == 4 {
		if got := gjson.Get(doc, "overall.scored_tokens").String(); got != args[3] {
			ts.Fatalf("%s: %s scored tokens, want %s", args[0], got, args[3])
		}
	}
	if r := ppl / want; math.Abs(r-1) > tol || math.IsNaN(r) {
		ts.Fatalf("%s: PPL %.4f vs %.4f: ratio %.6f beyond 1±%g", args[0], ppl, want, r, tol)
	}
	ts.Logf("PPL %.4f vs %.4f: ratio %.6f", ppl, want, ppl/want)
}

// reportNum checks a number of a report, at a gjson path, against an
// expected value:
//
//	report-num REPORT.json PATH WANT ABS_TOL
//
// passes when |value - WANT| <= ABS_TOL (half a unit of the last digit
// another program printed, say).
func reportNum(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: report-num REPORT.json PATH WANT ABS_TOL")
	}
	v := gjson.Get(ts.ReadFile(args[0]), args[1])
	want, err1 := strconv.ParseFloat(args[2], 64)
	tol, err2 := strconv.ParseFloat(args[3], 64)
	if err1 != nil || err2 != nil {
		ts.Fatalf("report-num: bad number in %q", args[2:])
	}
	if !v.Exists() {
		ts.Fatalf("%s: no %s", args[0], args[1])
	}
	if d := math.Abs(v.Float() - want); !(d <= tol) {
		ts.Fatalf("%s: %s = %v, want %v ± %g", args[0], args[1], v.Float(), want, tol)
	}
}

// fileSHA256 checks a file's sha256:
//
//	sha256 FILE HEX
func fileSHA256(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: sha256 FILE HEX")
	}
	f, err := os.Open(ts.MkAbs(args[0]))
	ts.Check(err)
	defer f.Close()
	h := sha256.New()
	_, err = io.Copy(h, f)
	ts.Check(err)
	if got := hex.EncodeToString(h.Sum(nil)); got != args[1] {
		ts.Fatalf("%s: sha256 %s, want %s", args[0], got, args[1])
	}
}

// rwkvVocab writes a tokenizer-only RWKV World vocabulary of the 256
// bytes (testmodel.WriteRWKVBytes), for ppl-mkmodel's --vocab-from:
//
//	rwkv-vocab FILE ADD_BOS
func rwkvVocab(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: rwkv-vocab FILE ADD_BOS")
	}
	add, err := strconv.ParseBool(args[1])
	ts.Check(err)
	ts.Check(testmodel.WriteRWKVBytes(ts.MkAbs(args[0]), add))
}

// corruptCache flips a byte in the middle of every cache entry under DIR:
//
//	corrupt-cache DIR
func corruptCache(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: corrupt-cache DIR")
	}
	n := 0
	err := filepath.WalkDir(ts.MkAbs(args[0]), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".ndjson.zst") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		b[len(b)/2] ^= 0x55
		n++
		return os.WriteFile(p, b, 0o644)
	})
	if err != nil || n == 0 {
		ts.Fatalf("corrupt-cache %s: %d entries, %v", args[0], n, err)
	}
}

// ggufSplit writes a model as shards of up to MAX_TENSORS tensors named
// from PREFIX, as llama.cpp's llama-gguf-split --split-max-tensors does:
//
//	gguf-split MODEL PREFIX MAX_TENSORS
func ggufSplit(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: gguf-split MODEL PREFIX MAX_TENSORS")
	}
	n, err := strconv.Atoi(args[2])
	ts.Check(err)
	f, err := gguf.Open(ts.MkAbs(args[0]))
	ts.Check(err)
	defer f.Close()
	paths, err := gguf.WriteShards(f, ts.MkAbs(args[1]), n)
	ts.Check(err)
	ts.Logf("%d shards", len(paths))
}

// ggufAdd writes MODEL with one more tensor, NAME, of N float32 zeros, as
// OUT: a file with a tensor its architecture does not read.
//
//	gguf-add MODEL OUT NAME N
func ggufAdd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: gguf-add MODEL OUT NAME N")
	}
	n, err := strconv.Atoi(args[3])
	ts.Check(err)
	f, err := gguf.Open(ts.MkAbs(args[0]))
	ts.Check(err)
	defer f.Close()
	w := gguf.NewWriter()
	for _, kv := range f.Metadata {
		w.Add(kv.Key, kv.Value)
	}
	for _, t := range f.Tensors {
		ts.Check(w.AddTensor(t.Name, t.Type, t.Shape, f.Data(t)))
	}
	ts.Check(w.AddTensor(args[2], gguf.TypeF32, []uint64{uint64(n)}, make([]byte, 4*n)))
	ts.Check(w.WriteFile(ts.MkAbs(args[1])))
}

// cmpRecords compares two outputs of the tools record by record, leaving
// out their headers (which name the model, its file and the flags):
//
//	cmp-records A B
func cmpRecords(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: cmp-records A B")
	}
	records := func(name string) []string {
		var out []string
		for _, l := range strings.Split(ts.ReadFile(name), "\n") {
			if !strings.HasPrefix(l, `{"type":"header"`) {
				out = append(out, l)
			}
		}
		return out
	}
	a, b := records(args[0]), records(args[1])
	same := len(a) == len(b)
	for i := 0; same && i < len(a); i++ {
		same = a[i] == b[i]
	}
	switch {
	case same && neg:
		ts.Fatalf("%s and %s have the same %d records", args[0], args[1], len(a))
	case !same && !neg:
		ts.Fatalf("%s and %s differ beyond their headers (%d and %d records)", args[0], args[1], len(a), len(b))
	}
}

// swapCache exchanges the files of the first two cache entries under DIR,
// as if each had been copied over the other:
//
//	swap-cache DIR
func swapCache(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: swap-cache DIR")
	}
	var ps []string
	filepath.WalkDir(ts.MkAbs(args[0]), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".ndjson.zst") {
			ps = append(ps, p)
		}
		return nil
	})
	if len(ps) < 2 {
		ts.Fatalf("swap-cache %s: %d entries, want 2", args[0], len(ps))
	}
	a, err1 := os.ReadFile(ps[0])
	b, err2 := os.ReadFile(ps[1])
	ts.Check(err1)
	ts.Check(err2)
	ts.Check(os.WriteFile(ps[0], b, 0o644))
	ts.Check(os.WriteFile(ps[1], a, 0o644))
}

// waitCache waits until DIR holds at least N cache entries:
//
//	wait-cache DIR N TIMEOUT
func waitCache(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: wait-cache DIR N TIMEOUT")
	}
	n, err := strconv.Atoi(args[1])
	timeout, err2 := time.ParseDuration(args[2])
	if err != nil || err2 != nil {
		ts.Fatalf("wait-cache: bad N or TIMEOUT")
	}
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		got := 0
		filepath.WalkDir(ts.MkAbs(args[0]), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".ndjson.zst") {
				got++
			}
			return nil
		})
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("wait-cache %s: %d entries after %s, want %d", args[0], got, timeout, n)
		}
	}
}

// transient checks the transient progress lines a tool wrote to a terminal
// (recorded by script(1) in FILE): each is what follows "\r\033[K" up to
// the next carriage return or newline.
//
//	transient FILE WIDTH REGEXP
//
// passes when there is at least one, every one is narrower than WIDTH
// columns (it never wraps) and the first matches REGEXP.
func transient(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: transient FILE WIDTH REGEXP")
	}
	width, err := strconv.Atoi(args[1])
	ts.Check(err)
	re, err := regexp.Compile(args[2])
	ts.Check(err)
	parts := strings.Split(ts.ReadFile(args[0]), "\r\033[K")
	if len(parts) < 2 {
		ts.Fatalf("%s: no transient line", args[0])
	}
	for i, p := range parts[1:] {
		line, _, _ := strings.Cut(p, "\r")
		line, _, _ = strings.Cut(line, "\n")
		if n := utf8.RuneCountInString(line); n >= width {
			ts.Fatalf("%s: transient line %d is %d columns, wraps at %d: %q", args[0], i+1, n, width, line)
		}
		if i == 0 && !re.MatchString(line) {
			ts.Fatalf("%s: transient line %q does not match %q", args[0], line, args[2])
		}
		ts.Logf("%q", line)
	}
}
