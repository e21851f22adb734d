package progress

import (
	"bytes"
	"testing"
)

func TestRedirectedLog(t *testing.T) {
	var b bytes.Buffer
	l := New(&b, "ppl-x", Info)
	l.Debugf("hidden %d", 1)
	l.Infof("shown %d", 2)
	l.Progress(true, "3/10 windows")
	l.Progress(false, "4/10 windows") // within 10 s of the last: dropped
	l.Done()
	if got, want := b.String(), "ppl-x: shown 2\nppl-x: 3/10 windows\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if _, err := ParseLevel("loud"); err == nil || err.Error() != `unknown log level "loud" (want one of debug, info, warn, error)` {
		t.Fatal(err)
	}
}

// A transient line on an 80-column terminal is cut to 79 columns: a wrapped
// line would leave a stale copy behind every update.
func TestTerminalLineFits(t *testing.T) {
	var b bytes.Buffer
	l := New(&b, "ppl-x", Info)
	l.terminal, l.width = true, func() int { return 20 }
	l.Progress(true, "12/59 windows, 652 targets/s, 24s elapsed, 1m10s left")
	if got, want := b.String(), "\r\033[Kppl-x: 12/59 windo…"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	for _, c := range []struct {
		in    string
		width int
		want  string
	}{{"abc", 0, "abc"}, {"abc", 4, "abc"}, {"abcd", 4, "ab…"}, {"ééééé", 5, "ééé…"}} {
		if got := Fit(c.in, c.width); got != c.want {
			t.Errorf("Fit(%q, %d) = %q, want %q", c.in, c.width, got, c.want)
		}
	}
}
