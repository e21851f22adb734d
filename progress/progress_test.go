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
