package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

const heldout = "../../corpora/ppl-heldout-v1/manifest.json"

func TestVerifyAndList(t *testing.T) {
	code, out, stderr := runCLI("verify", heldout)
	if code != 0 || out != "ppl-heldout-v1: 9 streams match the manifest\n" {
		t.Errorf("verify: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	code, out, _ = runCLI("list", "--quick", heldout)
	want := "en-perplexity\ten\t8685\t1547\ttrue\nzh-perplexity\tzh\t8615\t187\ttrue\ncode-pipe-reader\tcode\t10701\t1601\ttrue\n"
	if code != 0 || out != want {
		t.Errorf("list --quick: exit %d, stdout %q, want %q", code, out, want)
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Dir(heldout))); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "code", "pipe-reader.go.txt")
	os.WriteFile(f, []byte("package pipe\n"), 0o644)
	m := filepath.Join(dir, "manifest.json")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"verify", m}, 1, `stream "code-pipe-reader"`},
		{[]string{"verify", "--quick", m}, 1, "rebuild the corpus with `git checkout"},
		{[]string{"verify", filepath.Join(dir, "none.json")}, 1, "no such file"},
		{[]string{"frobnicate"}, 2, "unexpected argument frobnicate"},
		{[]string{"build"}, 2, "expected \"<manifest>\""},
		// A committed corpus has no recipes: build checks and fails.
		{[]string{"build", "--offline", "--cache", dir, m}, 1, `stream "code-pipe-reader"`},
	} {
		code, _, stderr := runCLI(c.args...)
		if code != c.code || !strings.Contains(stderr, c.msg) || !strings.HasPrefix(stderr, "ppl-corpus: ") {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.msg)
		}
	}
}
