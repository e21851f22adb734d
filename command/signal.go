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
	"time"
)

// Interrupt is how a tool stops on SIGINT (Ctrl-C) and SIGTERM: the first
// signal cancels the context the tool runs under, so that it stops at its
// next check (between records, windows, files, or out of a model load it
// waits on), says what it kept and exits 128+signal (130 for SIGINT, 143
// for SIGTERM); a second signal ends the process at once with that status.
//
// SIGPIPE is caught from the start, so that a write to a reader that is
// gone returns an error instead of killing the process at once. Without a
// SIGINT or SIGTERM, the tool then still dies of SIGPIPE, as a tool whose
// downstream left (`| head`) should: the signal's handler exits with
// PipeStatus. With one, the write's error
// stops the tool, which says on stderr what it kept: in a pipeline that
// the terminal interrupted as a whole, the next stage may be gone before
// this one writes again. The order in which the handler takes the two is
// not the order they were sent in: SIGINT goes to the process, which may
// take it on a thread that has to wake first, while the failed write
// raises SIGPIPE on its own thread at once. So a SIGPIPE that comes with
// no interrupt yet waits pipeGrace for one before it ends the process; and
// the write's error may reach the tool before the handler has taken
// either signal, so the tool calls Settle before it reads ctx.Err() (Exit
// does).
type Interrupt struct {
	tool      string
	stderr    io.Writer
	mu        sync.Mutex
	sig       os.Signal
	stop      func()
	piped     chan struct{} // closed when the handler has taken a SIGPIPE after the interrupt
	closePipe sync.Once
}

// interruptKey is the context key of a Notify context's Interrupt.
type interruptKey struct{}

// pipeGrace is how long a SIGPIPE waits for the SIGINT or SIGTERM that
// may have been sent before it; settleWait bounds Settle's wait for the
// handler's decision (a write's EPIPE always raises a SIGPIPE while the
// handler listens).
const pipeGrace, settleWait = 300 * time.Millisecond, 2 * time.Second

// Notify returns a context cancelled by the first SIGINT or SIGTERM; call
// the Interrupt's Exit with the tool's result. A notice, when not empty, is
// said on stderr at the first signal ("stopping after the current window").
func Notify(tool string, stderr io.Writer, notice string) (context.Context, *Interrupt) {
	in := &Interrupt{tool: tool, stderr: stderr, piped: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), interruptKey{}, in))
	c := make(chan os.Signal, 3)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM, syscall.SIGPIPE)
	done := make(chan struct{})
	in.stop = func() { signal.Stop(c); close(done) }
	go func() {
		var grace <-chan time.Time // a SIGPIPE with no interrupt yet: it ends the process when this fires
		piped := func() { in.closePipe.Do(func() { close(in.piped) }) }
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
						if grace == nil {
							grace = time.After(pipeGrace)
						}
						continue
					}
					piped()
					continue // interrupted: the write's error stops the tool
				}
				if first {
					if notice != "" {
						fmt.Fprintf(in.stderr, "%s: %s: %s (again to stop at once)\n", in.tool, SignalName(s), notice)
					}
					cancel()
					if grace != nil { // the SIGPIPE that came first was the interrupt's
						grace = nil
						piped()
					}
					continue
				}
				fmt.Fprintf(in.stderr, "%s: %s again: stopping now\n", in.tool, SignalName(s))
				os.Exit(Status(s))
			case <-grace:
				diePipe() // the reader left, with no interrupt
			case <-done:
				cancel()
				return
			}
		}
	}()
	return ctx, in
}

// Settle waits, when err is a write's EPIPE and ctx is a Notify context,
// until the signal handler has taken the SIGPIPE that the write raised, so
// that an interrupt that came before it (a pipeline stopped by Ctrl-C) has
// cancelled ctx by then: ctx.Err() then tells an interrupted run from a
// reader that left. Without an interrupt before it, the SIGPIPE ends the
// process there, as it would have without the handler.
func Settle(ctx context.Context, err error) {
	if in, ok := ctx.Value(interruptKey{}).(*Interrupt); ok && errors.Is(err, syscall.EPIPE) {
		in.settle()
	}
}

func (in *Interrupt) settle() {
	t := time.NewTimer(settleWait)
	defer t.Stop()
	select {
	case <-in.piped:
	case <-t.C:
	}
}

// PipeStatus is the exit status of a tool whose reader left: 141, what a
// shell shows for a death by SIGPIPE. A Go program cannot die of a SIGPIPE
// it raises itself (its runtime keeps a handler and ignores one sent by
// kill), so a parent that tells a broken pipe from a failure checks this
// status as well as the signal (ppl run does).
const PipeStatus = 128 + int(syscall.SIGPIPE)

// diePipe ends the process as SIGPIPE would have.
func diePipe() { os.Exit(PipeStatus) }

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
		in.settle() // an interrupt before the write's SIGPIPE: not a reader that left
		if in.Signal() == nil {
			diePipe() // the reader left: as SIGPIPE would have, before the handler did
		}
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
