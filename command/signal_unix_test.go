//go:build unix

package command

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// A pipeline stopped by Ctrl-C: SIGINT comes, then the reader of the
// tool's output leaves and the tool's next write fails with EPIPE, which
// may reach the tool before its handler has taken either signal. After
// Settle the context is cancelled, every time, and Exit reports the
// interrupt (130), not SIGPIPE.
func TestSettleAfterInterrupt(t *testing.T) {
	for i := range 50 {
		ctx, in := Notify("tool", io.Discard, "stopping")
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		_, err = w.Write([]byte("scores\n"))
		w.Close()
		if !errors.Is(err, syscall.EPIPE) {
			t.Fatalf("run %d: write to a pipe without reader: %v, want EPIPE", i, err)
		}
		Settle(ctx, err)
		if ctx.Err() == nil {
			t.Fatalf("run %d: after Settle the context is not cancelled", i)
		}
		if code := in.Exit(err); code != 130 {
			t.Fatalf("run %d: Exit = %d, want 130 (SIGINT)", i, code)
		}
	}
}

// A reader that leaves with no interrupt: the tool still ends as SIGPIPE
// would have (status 141), after pipeGrace. Run in a child process, which
// it ends.
func TestPipeWithoutInterrupt(t *testing.T) {
	if os.Getenv("COMMAND_TEST_PIPE") == "1" {
		ctx, in := Notify("tool", io.Discard, "stopping")
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		_, err = w.Write([]byte("scores\n"))
		Settle(ctx, err) // the handler's SIGPIPE ends the process here
		os.Exit(in.Exit(err) + 100)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPipeWithoutInterrupt$")
	cmd.Env = append(os.Environ(), "COMMAND_TEST_PIPE=1")
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child: %v, want it to die of SIGPIPE", err)
	}
	if ee.ExitCode() != PipeStatus {
		t.Errorf("child ended with %v, want status %d", ee, PipeStatus)
	}
}
