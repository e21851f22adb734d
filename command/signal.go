package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Interrupt is how a tool stops on SIGINT (Ctrl-C) and SIGTERM: the first
// signal cancels the context the tool runs under, so that it stops at its
// next check (between records, windows, files, or out of a model load it
// waits on), says what it kept and exits 128+signal (130 for SIGINT, 143
// for SIGTERM); a second signal ends the process at once with that status.
//
// SIGPIPE is caught from the start, so that a write to a reader that is
// gone returns an error instead of killing the process at once. Before the
// first SIGINT or SIGTERM, the tool then still dies of SIGPIPE, as a tool
// whose downstream left (`| head`) should: the signal's handler, or Exit
// when the write's error gets there first, restores SIGPIPE's default
// action and raises it. After the first, the write's error stops the tool,
// which says on stderr what it kept: in a pipeline that the terminal
// interrupted as a whole, the next stage may be gone before this one
// writes again. Deciding this in the handler, rather than ignoring SIGPIPE
// once the interrupt is seen, has no race: SIGINT comes before the reader
// closes, and the runtime delivers it first.
type Interrupt struct {
	tool   string
	stderr io.Writer
	mu     sync.Mutex
	sig    os.Signal
	stop   func()
}

// Notify returns a context cancelled by the first SIGINT or SIGTERM; call
// the Interrupt's Exit with the tool's result. A notice, when not empty, is
// said on stderr at the first signal ("stopping after the current window").
func Notify(tool string, stderr io.Writer, notice string) (context.Context, *Interrupt) {
	ctx, cancel := context.WithCancel(context.Background())
	in := &Interrupt{tool: tool, stderr: stderr}
	c := make(chan os.Signal, 3)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM, syscall.SIGPIPE)
	done := make(chan struct{})
	in.stop = func() { signal.Stop(c); close(done) }
	go func() {
		for {
			select {
			case s := <-c:
				in.mu.Lock()
				first := in.sig == nil
				if first && s != syscall.SIGPIPE {
					in.sig = s
				}
				in.mu.Unlock()
				if s == syscall.SIGPIPE {
					if first {
						diePipe()
					}
					continue // interrupted: the write's error stops the tool
				}
				if first {
					if notice != "" {
						fmt.Fprintf(in.stderr, "%s: %s: %s (again to stop at once)\n", in.tool, SignalName(s), notice)
					}
					cancel()
					continue
				}
				fmt.Fprintf(in.stderr, "%s: %s again: stopping now\n", in.tool, SignalName(s))
				os.Exit(Status(s))
			case <-done:
				cancel()
				return
			}
		}
	}()
	return ctx, in
}

// Signal is the signal that cancelled the context, or nil.
func (in *Interrupt) Signal() os.Signal {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.sig
}

// Exit reports err as Exit does and returns the exit status: 128+signal
// when a signal stopped the tool with an error.
func (in *Interrupt) Exit(err error) int {
	if in.Signal() == nil && errors.Is(err, syscall.EPIPE) {
		diePipe() // the reader left: as SIGPIPE would have, before the handler did
	}
	in.stop()
	if s := in.Signal(); s != nil && errors.Is(err, context.Canceled) {
		err = fmt.Errorf("stopped by %s", SignalName(s))
	}
	code := Exit(in.tool, err, in.stderr)
	if s := in.Signal(); s != nil && code != 0 {
		return Status(s)
	}
	return code
}

// SignalName names s as a person knows it: SIGINT, SIGTERM.
func SignalName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// Status is the exit status of a process stopped by s: 128 + its number,
// as a shell reports it (130 for SIGINT, 143 for SIGTERM).
func Status(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 1
}
