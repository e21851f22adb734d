// Package tests runs the end-to-end testscript scripts in testdata/script
// against the real tools, linked into the test binary: `exec ppl-window`
// in a script runs ppl-window's Main in a child process.
//
// Scripts are named after their topic (window_sliding.txt, score_bad_model.txt).
// The environment variable ORACLE points at ../shared/oracle when it exists;
// scripts that need it start with `[!exec:oracle] skip` ... see condition
// `oracle` below.
package tests

import (
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/tidwall/gjson"

	aggregate "ppl.dev/aggregate/cli"
	cachecli "ppl.dev/cache/cli"
	compare "ppl.dev/compare/cli"
	"ppl.dev/oracle"
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
	})
}

func TestScripts(t *testing.T) {
	oracleDir, oracleErr := oracle.Dir()
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("ORACLE", oracleDir)
			env.Setenv("PPL_CACHE_DIR", env.WorkDir+"/.cache")
			// tiny.gguf: a tokenizer-only model for ppl-tokenize's scripts.
			return testmodel.WriteTinySPM(env.WorkDir + "/tiny.gguf")
		},
		// [oracle] is true when ../shared/oracle is present; scripts that
		// need it begin with: [!oracle] skip 'shared oracle absent'
		Condition: func(cond string) (bool, error) {
			if cond == "oracle" {
				return oracleErr == nil, nil
			}
			return false, nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"report-ppl":    reportPPL,
			"corrupt-cache": corruptCache,
			"wait-cache":    waitCache,
		},
		RequireExplicitExec: true,
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
