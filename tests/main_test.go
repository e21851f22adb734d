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
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	aggregate "ppl.dev/aggregate/cli"
	cachecli "ppl.dev/cache/cli"
	compare "ppl.dev/compare/cli"
	"ppl.dev/oracle"
	score "ppl.dev/score/cli"
	tokenize "ppl.dev/tokenize/cli"
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
			return nil
		},
		// [oracle] is true when ../shared/oracle is present; scripts that
		// need it begin with: [!oracle] skip 'shared oracle absent'
		Condition: func(cond string) (bool, error) {
			if cond == "oracle" {
				return oracleErr == nil, nil
			}
			return false, nil
		},
		RequireExplicitExec: true,
	})
}
