package command

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/alecthomas/kong"
)

type grammar struct {
	N       int              `default:"3" help:"A number."`
	Output  string           `short:"o" help:"A path."`
	Mode    string           `enum:",a" default:"" help:"A choice."`
	Version kong.VersionFlag `help:"Print the version."`
}

func TestParseAndExit(t *testing.T) {
	var out, errb bytes.Buffer
	var g grammar
	if err := Parse("ppl-x", "1.0", "does x", &g, []string{"--n", "5"}, &out, &errb); err != nil || g.N != 5 {
		t.Fatalf("parse: %v %d", err, g.N)
	}
	err := Parse("ppl-x", "1.0", "does x", &grammar{}, []string{"--n", "five"}, &out, &errb)
	if code := Exit("ppl-x", err, &errb); code != 2 || errb.String() != "ppl-x: --n: expected a valid 64 bit int but got \"five\"\n" {
		t.Fatalf("usage: %d %q", code, errb.String())
	}
	errb.Reset()
	if err := Parse("ppl-x", "1.0", "does x", &grammar{}, []string{"--version"}, &out, &errb); !errors.Is(err, ErrExited) || out.String() != "ppl-x 1.0\n" {
		t.Fatalf("version: %v %q", err, out.String())
	}
	if code := Exit("ppl-x", fmt.Errorf("in:3: bad\nthing"), &errb); code != 1 || errb.String() != "ppl-x: in:3: bad; thing\n" {
		t.Fatalf("failure: %d %q", code, errb.String())
	}
}

// An explicitly empty path is refused, not read as absence; an enum that
// allows "" is not; Given tells an explicit zero from a default.
func TestEmptyAndGiven(t *testing.T) {
	var out, errb bytes.Buffer
	for _, args := range [][]string{{"--output", ""}, {"--output="}, {"-o", ""}} {
		err := Parse("ppl-x", "1.0", "", &grammar{}, args, &out, &errb)
		if err == nil || err.Error() != "--output: empty value" || Exit("ppl-x", err, &errb) != 2 {
			t.Errorf("%q: %v", args, err)
		}
	}
	if err := Parse("ppl-x", "1.0", "", &grammar{}, []string{"--mode", ""}, &out, &errb); err != nil {
		t.Errorf("enum allowing empty: %v", err)
	}
	kctx, err := ParseCommand("ppl-x", "1.0", "", &grammar{}, []string{"--n", "3"}, &out, &errb)
	if err != nil || !Given(kctx, "n") || Given(kctx, "output") {
		t.Errorf("Given: %v", err)
	}
}
